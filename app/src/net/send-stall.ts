// When a link's send queue has stopped draining: the decision, apart from where its figures come
// from. The mesh (mesh.ts) feeds it the pump's figures for a connected link (net-stats.ts: the
// audio channel's bufferedAmount at the last send attempt, packets handed to it, packets skipped
// because its queue was over the limit) and restarts the link when it answers true.
//
// A queue is making progress when bytes leave it: it is empty, it holds fewer bytes than at the
// last look, or the pump could hand it packets since (it only does so below its limit, so bytes
// must have left). Packets are waiting when the pump skipped some since the last look. A queue is
// stalled when packets have been waiting with no progress for STALL_AFTER_MS: an SCTP association
// that stopped taking data, while the peer connection still says it is connected. A quiet engine
// (nothing sent, nothing skipped) is never stalled: no packet waits.
//
// Counters that go backwards (the pump's figures start again for a new channel) start the watch
// again too.

/** How long packets may wait on a queue that sheds no bytes before it counts as stalled, ms. */
export const STALL_AFTER_MS = 2000;

/** One look at a link's send side. */
export interface SendSample {
  /** performance.now() of the look, ms. */
  nowMs: number;
  /** The audio channel's bufferedAmount at the pump's last send attempt. */
  bufferedBytes: number;
  /** Packets handed to the channel so far. */
  txPackets: number;
  /** Packets skipped so far (queue over the limit, or closed). */
  txSkipped: number;
}

/** Follows one link's send queue; `update` says whether it has stalled. */
export class SendStallWatch {
  private last: SendSample | null = null;
  /** When the queue last made progress or had nothing waiting, ms. */
  private okSinceMs = 0;

  constructor(readonly stallAfterMs = STALL_AFTER_MS) {}

  /** Forgets what it saw (a new channel): the next sample starts afresh. */
  reset(): void {
    this.last = null;
  }

  /** How long the queue has been stuck as of the last sample, ms (0 when it is not). */
  stuckMs(nowMs: number): number {
    return this.last ? Math.max(0, nowMs - this.okSinceMs) : 0;
  }

  /** Takes one look; true when packets have been waiting on a queue that sheds nothing for
   * at least `stallAfterMs`. */
  update(s: SendSample): boolean {
    const prev = this.last;
    this.last = s;
    if (
      !prev ||
      s.txPackets < prev.txPackets ||
      s.txSkipped < prev.txSkipped ||
      s.nowMs < prev.nowMs ||
      !(s.bufferedBytes > 0) ||
      s.bufferedBytes < prev.bufferedBytes ||
      s.txPackets > prev.txPackets ||
      s.txSkipped === prev.txSkipped
    ) {
      this.okSinceMs = s.nowMs;
      return false;
    }
    return s.nowMs - this.okSinceMs >= this.stallAfterMs;
  }
}
