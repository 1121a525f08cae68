// Telling a stall of the local machine from a peer's lateness, for the plain-JavaScript engine
// (js-engine-core.ts), following core/src/jitter/stall.rs: a gap of LOCAL_STALL_FRAMES with no
// packet from any of at least two streaming peers is a stall of this machine (independent paths
// do not all fall silent at once), and the packets drained up to EXCUSE_FRAMES after it ends are
// excused: they are played (or counted late) as usual but feed no peer's lateness estimate, and an
// underrun they end counts as a stall underrun. Real-time safe: numbers only.

/** Silence from every streaming peer that means a local stall: 30 ms at 48 kHz. */
export const LOCAL_STALL_FRAMES = 1440;
/** How long after the end of a stall arrivals are still excused: 4 quanta. */
export const EXCUSE_FRAMES = 512;

/** Watches the arrivals of every peer of an engine. */
export class LocalStall {
  /** Local time of the last arrival (−1: none yet). */
  private last = -1;
  /** Arrivals up to this local time are excused (−1: none). */
  private excusedUntil = -1;
  /** Local stalls seen so far. */
  stalls = 0;

  /** A packet drained at local time `now` (frames) while `streaming` peers were playing. Returns
   * the local time until which arrivals are excused when this one ends (or follows) a local
   * stall, else −1. */
  arrival(now: number, streaming: number): number {
    if (this.last >= 0) {
      const gap = now > this.last ? now - this.last : 0;
      if (streaming >= 2 && gap >= LOCAL_STALL_FRAMES) {
        this.stalls++;
        this.excusedUntil = now + EXCUSE_FRAMES;
      }
    }
    this.last = now;
    return this.excusedUntil >= 0 && now <= this.excusedUntil ? this.excusedUntil : -1;
  }
}
