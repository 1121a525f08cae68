// What reaches us from the hub, as the hub's layer controller wants to hear it once a second
// (server/src/hub/controller: C→S reception): the rate that got through, the share of the hub's
// packets lost, the trend of their one-way delay, the hub link's round trip, and the path's
// capacity as packet trains measured it. In a mesh the same report covers what reaches us from
// every other member (their links' bytes and messages, their packets lost, their delay trend,
// the median round trip; no trains): the server's mesh controller picks from it which layer
// they all send us (server/src/mesh_layers.rs). The hub picks from these which layer we take (as sent,
// or Opus at 128 or 64 kbit/s) of the others' streams in forward mode, of our own mix in mix
// mode (its one stream, the mix slot, is then the only participant reported).
//
// Pure: the session hands in a sample of the counters at each refresh (the pump's hub figures,
// the engine's per-participant received and lost, the stamp lag of each participant's last
// packet) and gets a report back once a window of about a second is over.
//
// - receivedBps: the bytes of the hub's messages plus PACKET_OVERHEAD_BYTES per message (what
//   they took on the wire), per second, in the lesser of the window's two halves. The hub uses
//   it only when the path is congested, to pick a layer that fits what got through; a window in
//   which the path narrowed mixes the rate before with the rate after, and the whole window's
//   would overstate the path (a 1 Mbit/s limit starting mid-window read 1.3 Mbit/s and took a
//   layer that did not fit). Where nothing changed, both halves give the same rate.
// - loss: packets the engine counted lost / (lost + received) over the window, summed over the
//   participants reached through the hub; only participants there at both ends of the window
//   count (one who came or went in it would bring a jump of their whole history); 0 when
//   nothing was expected.
// - delayRiseMsPerS: the least-squares slope of each participant's stamp lag over the last
//   RISE_WINDOW_MS (the lag is the one-way delay plus a constant clock offset, so its slope is
//   the delay's), averaged over the participants with at least RISE_MIN_POINTS samples spanning
//   at least RISE_MIN_SPAN_MS in that time: with every participant at every sample, the slope of
//   their mean lag. A sample missing (NaN) only leaves out that point. The span matters when a
//   participant is new (the hub's mix after a switch to mix mode): refreshes come in bursts
//   then, and a millisecond of jitter over samples a millisecond apart is no trend.
// - capacityBps: the lowest of the last CAPACITY_TRAINS train estimates; null before any. A
//   train reads high when the thread that takes its messages stalled and then handled them in
//   one batch (their gaps then say nothing of the path), which a loaded machine does often
//   enough that two of three can be such; a reading too high makes the hub step up into a
//   path that cannot carry the layer (loss, then back down: oscillation), one too low only
//   keeps the listener a layer lower until the next trains.
// Every figure is clamped to what the server takes (finite, in range).

import type { ReceptionReport } from '../net/protocol';
import { PACKET_OVERHEAD_BYTES } from './topology';

/** One participant reached through the hub, at one sample. */
export interface ReceptionPeer {
  /** Tells participants apart from sample to sample (the engine slot). */
  key: number;
  /** The engine's packets received and lost for them, since their slot was set up. */
  received: number;
  lost: number;
  /** Their last packet's arrival − its send stamp, ms (NaN: none yet). */
  lagMs: number;
}

/** The counters at one refresh. */
export interface ReceptionSample {
  /** performance.now(), ms. */
  nowMs: number;
  /** Bytes and messages received from the hub so far (the pump's N_HUB_RX_BYTES and
   * N_HUB_RX_MESSAGES). */
  rxBytes: number;
  rxMessages: number;
  peers: readonly ReceptionPeer[];
  /** The hub link's round trip, ms; null when unknown. */
  rttMs: number | null;
  /** Trains measured so far (N_HUB_TRAINS) and the last one's estimate (N_HUB_TRAIN_BPS). */
  trains: number;
  trainBps: number;
}

export type { ReceptionReport };

/** A report is due once a window is this long, ms: a second, less half a refresh so that a
 * timer firing a little late does not stretch every window to 1.1 s. */
export const REPORT_WINDOW_MS = 950;
/**
 * A window ends early, once it is EARLY_MIN_MS long, when the delay's trend has been above
 * RISE_EARLY_MS_PER_S (the hub's RISE_CONGESTED_MS_PER_S, server/src/hub/controller) for
 * EARLY_SAMPLES samples in a row: a queue is filling on the path, and the hub can step down
 * before it overflows. Waiting for the window's end, the queue of a path that narrowed by a
 * third overflowed first (a home router's 64 packets fill in under half a second), and the
 * loss made the hub's data-channel association slow down for seconds after the step down.
 * In a row means that the lag also grew at each of those samples: a page that stalled for a
 * moment shows one late sample, which tilts the trend for two seconds but is followed by a lag
 * that falls back.
 */
export const EARLY_MIN_MS = 250;
export const RISE_EARLY_MS_PER_S = 25;
export const EARLY_SAMPLES = 2;
/**
 * A window also ends early, once it is EARLY_MIN_MS long, when more than LOSS_EARLY of what it
 * expected was lost (at least EARLY_LOST_MIN packets): the path cannot carry the layer at all.
 * The hub drops what a narrow path cannot take before it queues (server/src/hub/drain), so
 * such a path shows loss rather than a rising delay. Five times the hub's own bar
 * (LOSS_CONGESTED, 2 %): a quarter-second window of a path that loses a few per cent at random
 * must not read as one that cannot carry the layer.
 */
export const LOSS_EARLY = 0.1;
export const EARLY_LOST_MIN = 10;
/** The stamp lag's slope is taken over this much of the latest samples, ms. */
export const RISE_WINDOW_MS = 2000;
/** Fewest samples of a participant's lag that give a slope. */
export const RISE_MIN_POINTS = 3;
/** Least time a participant's lag samples must span to give a slope, ms. */
export const RISE_MIN_SPAN_MS = 500;
/** Train estimates the capacity is the lowest of. */
export const CAPACITY_TRAINS = 3;
/** The ranges the server enforces (server/src/hub/controller parse_report). */
const MAX_BPS = 1e11;
const MAX_MS = 1e6;

interface WindowStart {
  nowMs: number;
  rxBytes: number;
  rxMessages: number;
  counts: Map<number, { received: number; lost: number }>;
}

/** The hub's bytes and messages at one sample. */
interface RxMark {
  nowMs: number;
  rxBytes: number;
  rxMessages: number;
}

/** Bits per second on the wire between two marks (NaN when no time passed). */
const wireBps = (a: RxMark, b: RxMark): number =>
  ((b.rxBytes - a.rxBytes + PACKET_OVERHEAD_BYTES * (b.rxMessages - a.rxMessages)) * 8) /
  ((b.nowMs - a.nowMs) / 1000);

/** What the participants through the hub lost and received since the window's start, over
 * those in both samples. */
function windowCounts(start: WindowStart, s: ReceptionSample): { lost: number; received: number } {
  let lost = 0;
  let received = 0;
  for (const p of s.peers) {
    const before = start.counts.get(p.key);
    if (!before) continue;
    const dl = p.lost - before.lost;
    const dr = p.received - before.received;
    // Counters that went back are another participant's in a slot used again.
    if (!(dl >= 0) || !(dr >= 0)) continue;
    lost += dl;
    received += dr;
  }
  return { lost, received };
}

const clamp = (x: number, lo: number, hi: number): number =>
  Number.isFinite(x) ? Math.min(hi, Math.max(lo, x)) : lo;

/** The least-squares slope of y over t (units of y per unit of t); NaN with fewer than two
 * distinct times. */
export function slope(ts: readonly number[], ys: readonly number[]): number {
  const n = ts.length;
  let mt = 0;
  let my = 0;
  for (let i = 0; i < n; i++) {
    mt += ts[i];
    my += ys[i];
  }
  mt /= n;
  my /= n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (ts[i] - mt) * (ys[i] - my);
    den += (ts[i] - mt) ** 2;
  }
  return den > 0 ? num / den : NaN;
}

export class Reception {
  private start: WindowStart | null = null;
  /** The hub's counters at each sample of the window since its start. */
  private marks: RxMark[] = [];
  /** Samples in a row whose delay trend was above RISE_EARLY_MS_PER_S. */
  private risingSamples = 0;
  /** The stamp lags of the last RISE_WINDOW_MS: when, and each participant's. */
  private lags: { nowMs: number; byKey: Map<number, number> }[] = [];
  /** N_HUB_TRAINS at the last sample (-1: none yet) and the latest estimates. */
  private trainsSeen = -1;
  private estimates: number[] = [];

  /** Takes one sample; the report of the window it ends, or null while none is due. */
  sample(s: ReceptionSample): ReceptionReport | null {
    this.noteTrains(s);
    this.noteLags(s);
    const start = this.start;
    if (!start) {
      this.start = this.windowStart(s);
      return null;
    }
    const elapsedMs = s.nowMs - start.nowMs;
    const bytes = s.rxBytes - start.rxBytes;
    const messages = s.rxMessages - start.rxMessages;
    if (!(elapsedMs >= 0) || !(bytes >= 0) || !(messages >= 0)) {
      // The counters went back (a new pump): start over from here.
      this.start = this.windowStart(s);
      return null;
    }
    const rise = this.delayRise();
    this.risingSamples = rise > RISE_EARLY_MS_PER_S && this.lagStep() > 0 ? this.risingSamples + 1 : 0;
    const { lost, received } = windowCounts(start, s);
    const loss = lost + received > 0 ? lost / (lost + received) : 0;
    const early =
      elapsedMs >= EARLY_MIN_MS &&
      (this.risingSamples >= EARLY_SAMPLES || (loss > LOSS_EARLY && lost >= EARLY_LOST_MIN));
    if (elapsedMs < REPORT_WINDOW_MS && !early) {
      this.marks.push({ nowMs: s.nowMs, rxBytes: s.rxBytes, rxMessages: s.rxMessages });
      return null;
    }
    const receivedBps = this.lesserHalf(start, s);
    this.start = this.windowStart(s);
    const capacity = this.estimates.length > 0 ? Math.min(...this.estimates) : null;
    return {
      receivedBps: clamp(receivedBps, 0, MAX_BPS),
      loss: clamp(loss, 0, 1),
      delayRiseMsPerS: clamp(rise, -MAX_MS, MAX_MS),
      rttMs: s.rttMs === null ? 0 : clamp(s.rttMs, 0, MAX_MS),
      capacityBps: capacity === null ? null : clamp(capacity, 1, MAX_BPS),
    };
  }

  /** Forgets everything: the next sample starts a window afresh (leaving the hub's modes, or
   * a hub link that went down). */
  reset(): void {
    this.start = null;
    this.marks = [];
    this.risingSamples = 0;
    this.lags = [];
    this.trainsSeen = -1;
    this.estimates = [];
  }

  /** The wire rate from `start` to `end` in the lesser of the two halves split at the
   * window's sample nearest its middle (the whole window's when none lies inside it). */
  private lesserHalf(start: RxMark, end: RxMark): number {
    const midMs = (start.nowMs + end.nowMs) / 2;
    let mid: RxMark | null = null;
    for (const m of this.marks) {
      if (!(m.nowMs > start.nowMs && m.nowMs < end.nowMs)) continue;
      if (!mid || Math.abs(m.nowMs - midMs) < Math.abs(mid.nowMs - midMs)) mid = m;
    }
    return mid ? Math.min(wireBps(start, mid), wireBps(mid, end)) : wireBps(start, end);
  }

  private windowStart(s: ReceptionSample): WindowStart {
    this.marks = [];
    const counts = new Map<number, { received: number; lost: number }>();
    for (const p of s.peers) counts.set(p.key, { received: p.received, lost: p.lost });
    return { nowMs: s.nowMs, rxBytes: s.rxBytes, rxMessages: s.rxMessages, counts };
  }

  private noteTrains(s: ReceptionSample): void {
    if (this.trainsSeen >= 0 && s.trains > this.trainsSeen && s.trainBps > 0 && Number.isFinite(s.trainBps)) {
      this.estimates.push(s.trainBps);
      if (this.estimates.length > CAPACITY_TRAINS) this.estimates.shift();
    }
    this.trainsSeen = Number.isFinite(s.trains) ? s.trains : -1;
  }

  private noteLags(s: ReceptionSample): void {
    const byKey = new Map<number, number>();
    for (const p of s.peers) if (Number.isFinite(p.lagMs)) byKey.set(p.key, p.lagMs);
    this.lags.push({ nowMs: s.nowMs, byKey });
    const from = s.nowMs - RISE_WINDOW_MS;
    while (this.lags.length > 0 && !(this.lags[0].nowMs >= from)) this.lags.shift();
  }

  /** The mean change of the stamp lag from the sample before to the last, over the participants
   * in both; NaN when none is. */
  private lagStep(): number {
    const n = this.lags.length;
    if (n < 2) return NaN;
    const [before, last] = [this.lags[n - 2].byKey, this.lags[n - 1].byKey];
    let sum = 0;
    let count = 0;
    for (const [key, lag] of last) {
      const prev = before.get(key);
      if (prev === undefined) continue;
      sum += lag - prev;
      count++;
    }
    return count > 0 ? sum / count : NaN;
  }

  /** The mean over participants of their stamp lag's slope, ms per second; 0 when none has
   * enough samples. */
  private delayRise(): number {
    const series = new Map<number, { ts: number[]; ys: number[] }>();
    for (const { nowMs, byKey } of this.lags) {
      for (const [key, lag] of byKey) {
        let xy = series.get(key);
        if (!xy) series.set(key, (xy = { ts: [], ys: [] }));
        xy.ts.push(nowMs / 1000);
        xy.ys.push(lag);
      }
    }
    let sum = 0;
    let n = 0;
    for (const { ts, ys } of series.values()) {
      if (ts.length < RISE_MIN_POINTS || (ts[ts.length - 1] - ts[0]) * 1000 < RISE_MIN_SPAN_MS) continue;
      const k = slope(ts, ys);
      if (Number.isFinite(k)) {
        sum += k;
        n++;
      }
    }
    return n > 0 ? sum / n : 0;
  }
}
