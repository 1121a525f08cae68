// Reception reports (app/src/room/reception.ts) with known answers: the rate with its per-message
// overhead (and what a path that narrowed mid-window carries), the loss over the window, the
// delay's trend from the stamp lag, the capacity from the trains.
import { describe, expect, it } from 'vitest';
import controllerSource from '../../server/src/hub/controller/mod.rs?raw';
import {
  EARLY_LOST_MIN,
  EARLY_MIN_MS,
  LOSS_EARLY,
  REPORT_WINDOW_MS,
  RISE_EARLY_MS_PER_S,
  Reception,
  slope,
  type ReceptionPeer,
  type ReceptionReport,
  type ReceptionSample,
} from '../../app/src/room/reception';
import { PACKET_OVERHEAD_BYTES } from '../../app/src/room/topology';
import { Prng } from '../../app/src/selftest/prng';

const REFRESH_MS = 100;

/** Samples every REFRESH_MS for `seconds` from `t0` (ms), `at(t)` giving the counters at t (s
 * since t0); the reports that came out, with when. */
function run(
  r: Reception,
  seconds: number,
  at: (t: number) => Omit<ReceptionSample, 'nowMs'>,
  t0 = 10_000,
): { t: number; report: ReceptionReport }[] {
  const out: { t: number; report: ReceptionReport }[] = [];
  for (let k = 0; k <= (seconds * 1000) / REFRESH_MS; k++) {
    const t = (k * REFRESH_MS) / 1000;
    const report = r.sample({ nowMs: t0 + t * 1000, ...at(t) });
    if (report) out.push({ t, report });
  }
  return out;
}

const quiet = { rxBytes: 0, rxMessages: 0, peers: [], rttMs: null, trains: 0, trainBps: NaN };

describe('reception reports', () => {
  it('reports once a second; a constant 1 Mbit/s of bytes gives 1e6 plus the overhead exactly', () => {
    // 125,000 bytes a second in 400 messages a second.
    const reports = run(new Reception(), 5, (t) => ({
      ...quiet,
      rxBytes: Math.round(125_000 * t),
      rxMessages: Math.round(400 * t),
    }));
    expect(reports.map((x) => x.t)).toEqual([1, 2, 3, 4, 5]);
    for (const { report } of reports) {
      expect(report.receivedBps).toBeCloseTo(1e6 + 400 * PACKET_OVERHEAD_BYTES * 8, 6);
      expect(report.loss).toBe(0);
      expect(report.capacityBps).toBeNull();
      expect(report.rttMs).toBe(0);
    }
  });

  it('reports what a path that narrowed mid-window carries now, not the mix of before and after', () => {
    // 1.7 Mbit/s of bytes until 0.4 s into the window, then a 1 Mbit/s limit: the whole window
    // averages 1.28 Mbit/s, the path now carries 1 Mbit/s (the second half's rate).
    const bytesAt = (t: number) => (t <= 0.4 ? 212_500 * t : 212_500 * 0.4 + 125_000 * (t - 0.4));
    const [first] = run(new Reception(), 1, (t) => ({ ...quiet, rxBytes: bytesAt(t) }));
    expect(bytesAt(1) * 8).toBeCloseTo(1.28e6, 6);
    expect(first.report.receivedBps).toBeCloseTo(1e6, 6);
    // A path that widened: the first half's rate, the lesser.
    const [wide] = run(new Reception(), 1, (t) => ({
      ...quiet,
      rxBytes: 1e6 * t + (t > 0.7 ? 1e6 * (t - 0.7) : 0),
    }));
    expect(wide.report.receivedBps).toBeCloseTo(8e6, 6);
  });

  it('ends a window early when a queue starts filling, and not for one late sample', () => {
    // 1 s of a steady lag, then a path that narrowed by 40 %: the queue fills at 400 ms a
    // second from 1.35 s. The window that started at 1.0 s ends early, two samples after the
    // 2 s trend first reads above the hub's bar, well before it would at 1.95 s.
    const lag = (t: number) => 40 + (t > 1.35 ? 400 * (t - 1.35) : 0);
    const reports = run(new Reception(), 3, (t) => ({
      ...quiet,
      peers: [{ key: 0, received: 0, lost: 0, lagMs: lag(t) }],
    }));
    expect(reports[0].t).toBe(1);
    const second = reports[1];
    expect(second.t).toBeGreaterThanOrEqual(1 + EARLY_MIN_MS / 1000);
    expect(second.t).toBeLessThan(1.8);
    expect(second.report.delayRiseMsPerS).toBeGreaterThan(RISE_EARLY_MS_PER_S);
    // One sample 300 ms late (a page that stalled), the others steady: reports once a second.
    const stalled = run(new Reception(), 3, (t) => ({
      ...quiet,
      peers: [{ key: 0, received: 0, lost: 0, lagMs: Math.abs(t - 1.5) < 1e-9 ? 340 : 40 }],
    }));
    expect(stalled.map((x) => x.t)).toEqual([1, 2, 3]);
  });

  it('ends a window early when a path cannot carry the layer at all, and not for a few per cent', () => {
    // 375 packets a second expected; from 1.3 s half are lost (the hub drops what the path
    // cannot take). The window that started at 1.0 s ends once it is EARLY_MIN_MS long and its
    // loss is above LOSS_EARLY: at 1.3 s it has lost nothing, at 1.4 s 19 of 150 (12.7 %).
    const lostAt = (t: number) => (t > 1.3 ? Math.round(187.5 * (t - 1.3)) : 0);
    const heavy = run(new Reception(), 3, (t) => ({
      ...quiet,
      peers: [{ key: 0, received: Math.round(375 * t) - lostAt(t), lost: lostAt(t), lagMs: NaN }],
    }));
    expect(heavy[0].t).toBe(1);
    expect(heavy[1].t).toBeCloseTo(1.4, 9);
    expect(heavy[1].report.loss).toBeGreaterThan(LOSS_EARLY);
    // 4 % lost at random (over the hub's own bar, under LOSS_EARLY): reports once a second.
    const light = run(new Reception(), 3, (t) => ({
      ...quiet,
      peers: [{ key: 0, received: Math.round(360 * t), lost: Math.round(15 * t), lagMs: NaN }],
    }));
    expect(light.map((x) => x.t)).toEqual([1, 2, 3]);
    // Nor for a few packets in a short window: 3 of 20 is 15 %, but under EARLY_LOST_MIN.
    const few = run(new Reception(), 3, (t) => ({
      ...quiet,
      peers: [{ key: 0, received: Math.round(17 * t), lost: Math.round(3 * t), lagMs: NaN }],
    }));
    expect(few.map((x) => x.t)).toEqual([1, 2, 3]);
    expect(EARLY_LOST_MIN).toBeGreaterThan(3);
  });

  it("reports early at the hub controller's own bar for a rising delay, and at five times its bar for loss", () => {
    const m = /pub const RISE_CONGESTED_MS_PER_S: f64 = ([0-9.]+);/.exec(controllerSource);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBe(RISE_EARLY_MS_PER_S);
    const l = /pub const LOSS_CONGESTED: f64 = ([0-9.]+);/.exec(controllerSource);
    expect(l).not.toBeNull();
    expect(LOSS_EARLY).toBeCloseTo(5 * Number(l![1]), 12);
  });

  it('uses the window as it was: a late refresh makes a longer window, not a higher rate', () => {
    const r = new Reception();
    const s = (nowMs: number): ReceptionSample => ({
      ...quiet,
      nowMs,
      rxBytes: nowMs * 125,
      rxMessages: 0,
    });
    expect(r.sample(s(0))).toBeNull();
    expect(r.sample(s(REPORT_WINDOW_MS - 1))).toBeNull();
    expect(r.sample(s(1200))!.receivedBps).toBeCloseTo(1e6, 6);
  });

  it('gives 2 % loss from the engine counters of the participants through the hub', () => {
    // Two participants, 375 packets a second each expected; one loses 15 a second (4 %), the
    // other none: 15 of 750 is 2 %.
    const reports = run(new Reception(), 3, (t) => ({
      ...quiet,
      peers: [
        { key: 1, received: 1000 + Math.round(360 * t), lost: 7 + Math.round(15 * t), lagMs: NaN },
        { key: 4, received: 50 + Math.round(375 * t), lost: 0, lagMs: NaN },
      ],
    }));
    expect(reports).toHaveLength(3);
    for (const { report } of reports) expect(report.loss).toBeCloseTo(0.02, 12);
  });

  it('leaves out a participant who came or went in the window, and one whose slot was reused', () => {
    const r = new Reception();
    const peer = (key: number, received: number, lost: number): ReceptionPeer => ({
      key,
      received,
      lost,
      lagMs: NaN,
    });
    r.sample({ ...quiet, nowMs: 0, peers: [peer(1, 100, 0), peer(2, 100, 0), peer(3, 5000, 10)] });
    const report = r.sample({
      ...quiet,
      nowMs: 1000,
      // 2 left; 3's slot went to someone new (counters from 0); 5 came with a long history.
      peers: [peer(1, 470, 5), peer(3, 20, 0), peer(5, 9000, 900)],
    })!;
    expect(report.loss).toBeCloseTo(5 / 375, 12);
  });

  it('says nothing was lost when nothing was expected', () => {
    const reports = run(new Reception(), 1, () => ({
      ...quiet,
      peers: [{ key: 1, received: 9, lost: 1, lagMs: 3 }],
    }));
    expect(reports[0].report.loss).toBe(0);
    expect(reports[0].report.delayRiseMsPerS).toBe(0);
  });

  it('finds a delay rising 10 ms a second in jittered stamp lags, whatever the clock offsets', () => {
    const prng = new Prng(7);
    const reports = run(new Reception(), 4, (t) => ({
      ...quiet,
      peers: [
        // Offsets of seconds between the clocks; ±1 ms of jitter on each packet.
        { key: 0, received: 0, lost: 0, lagMs: 3_600_000 + 20 + 10 * t + (prng.next() * 2 - 1) },
        { key: 1, received: 0, lost: 0, lagMs: -42_000 + 35 + 10 * t + (prng.next() * 2 - 1) },
        // A participant with no packets yet counts for nothing.
        { key: 2, received: 0, lost: 0, lagMs: NaN },
      ],
    }));
    expect(reports).toHaveLength(4);
    for (const { report } of reports) expect(Math.abs(report.delayRiseMsPerS - 10)).toBeLessThan(0.5);
  });

  it('keeps the trend with one sample missing, and sees it fall', () => {
    const reports = run(new Reception(), 3, (t) => ({
      ...quiet,
      peers: [{ key: 0, received: 0, lost: 0, lagMs: Math.abs(t - 1.5) < 1e-9 ? NaN : 80 - 4 * t }],
    }));
    for (const { report } of reports) expect(report.delayRiseMsPerS).toBeCloseTo(-4, 9);
  });

  it('takes no trend from samples a millisecond apart, and one once they span half a second', () => {
    // A participant new to the window (the hub's mix after a switch to mix mode) sampled in a
    // burst at its end: 2 ms of jitter over 2 ms would read as a queue filling at 1000 ms per
    // second.
    const lag = [5_000_000, 5_000_001, 5_000_002];
    const at = (nowMs: number, k: number | null) => ({
      ...quiet,
      nowMs,
      peers: k === null ? [] : [{ key: 63, received: 0, lost: 0, lagMs: lag[k % lag.length] }],
    });
    const r = new Reception();
    expect(r.sample(at(10_000, null))).toBeNull();
    expect(r.sample(at(10_948, 0))).toBeNull();
    expect(r.sample(at(10_949, 1))).toBeNull();
    const burst = r.sample(at(10_950, 2))!;
    expect(burst).not.toBeNull();
    expect(burst.delayRiseMsPerS).toBe(0);
    // Samples over the next second: the span is there, and the jitter is no trend.
    let next = null;
    for (let k = 1; k <= 10 && !next; k++) next = r.sample(at(10_950 + 100 * k, k));
    expect(next).not.toBeNull();
    expect(Math.abs(next!.delayRiseMsPerS)).toBeLessThan(2);
  });

  it('takes the lowest of the last three train estimates; none before the first', () => {
    const r = new Reception();
    const at = (nowMs: number, trains: number, trainBps: number) =>
      r.sample({ ...quiet, nowMs, trains, trainBps });
    at(0, 0, NaN);
    expect(at(1000, 0, NaN)!.capacityBps).toBeNull();
    at(1500, 1, 2e6);
    expect(at(2000, 1, 2e6)!.capacityBps).toBe(2e6);
    // Two trains handled in a batch read 189.6 Mbit/s (the floor figure) on a 2 Mbit/s path.
    at(2500, 2, 189.6e6);
    at(2600, 3, 189.6e6);
    expect(at(3000, 3, 189.6e6)!.capacityBps).toBe(2e6);
    at(3500, 4, 1.9e6);
    // 189.6e6, 189.6e6, 1.9e6
    expect(at(4000, 4, 1.9e6)!.capacityBps).toBe(1.9e6);
    // The path widened: once three trains say so.
    at(4500, 5, 8e6);
    at(4600, 6, 9e6);
    expect(at(5000, 6, 9e6)!.capacityBps).toBe(1.9e6);
    at(5500, 7, 8.5e6);
    expect(at(6000, 7, 8.5e6)!.capacityBps).toBe(8e6);
  });

  it('forgets the trains measured before a reset, and starts the window afresh', () => {
    const r = new Reception();
    r.sample({ ...quiet, nowMs: 0, trains: 0 });
    r.sample({ ...quiet, nowMs: 500, trains: 1, trainBps: 5e6 });
    expect(r.sample({ ...quiet, nowMs: 1000, trains: 1, trainBps: 5e6 })!.capacityBps).toBe(5e6);
    r.reset();
    expect(r.sample({ ...quiet, nowMs: 1100, trains: 1, trainBps: 5e6 })).toBeNull();
    expect(r.sample({ ...quiet, nowMs: 2100, trains: 1, trainBps: 5e6 })!.capacityBps).toBeNull();
  });

  it('keeps every figure in the ranges the server takes', () => {
    const r = new Reception();
    r.sample({ ...quiet, nowMs: 0, peers: [{ key: 0, received: 0, lost: 0, lagMs: 0 }] });
    r.sample({ ...quiet, nowMs: 10, rxBytes: 5e14, peers: [{ key: 0, received: 0, lost: 0, lagMs: 1e9 }] });
    const report = r.sample({
      nowMs: 1000,
      rxBytes: 1e15,
      rxMessages: 0,
      peers: [{ key: 0, received: 0, lost: 0, lagMs: 2e9 }],
      rttMs: -3,
      trains: 0,
      trainBps: NaN,
    })!;
    expect(report).toEqual({
      receivedBps: 1e11,
      loss: 0,
      delayRiseMsPerS: 1e6,
      rttMs: 0,
      capacityBps: null,
    });
    // Counters that went back (a new pump) start a window afresh.
    expect(r.sample({ ...quiet, nowMs: 2000 })).toBeNull();
  });

  it('fits a least-squares line', () => {
    expect(slope([0, 1, 2, 3], [1, 3, 5, 7])).toBe(2);
    expect(slope([0, 1, 2], [0, 1, 0])).toBe(0);
    expect(slope([1, 1], [0, 5])).toBeNaN();
  });
});
