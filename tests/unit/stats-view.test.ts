// The stats view's pure parts: the quality verdict's thresholds, the history's windows, the
// export formats (the CSV parsed back by an RFC 4180 reader written here), the collector fed the
// engine's stages (mouth to ear first), the latency path table, and the round-trip probe's
// following and wording.
import { describe, expect, it } from 'vitest';
import { verdict, THRESHOLDS } from '../../app/src/stats/verdict';
import { StatsTimeline } from '../../app/src/stats/timeline';
import { buildExport, CSV_HEADER, toCsv, toJson, type StageHistogram } from '../../app/src/stats/export';
import { parseCsv } from '../browser/lib/csv.mjs';

const base = {
  oneWayMs: 20,
  jitterMs: 2,
  lossPct: 0,
  underrunsPerMinute: 0,
  blockFrames: 128,
  bufferMode: 'adaptive' as const,
};

describe('verdict', () => {
  it('is good inside every threshold and says nothing', () => {
    expect(verdict(base)).toEqual({ grade: 'good', reasons: [], hints: [] });
    expect(
      verdict({ ...base, oneWayMs: THRESHOLDS.oneWayMs.good, jitterMs: THRESHOLDS.jitterMs.good }).grade,
    ).toBe('good');
  });
  it('takes the worst figure and gives its reason and fix', () => {
    const v = verdict({ ...base, oneWayMs: 40, lossPct: 3 });
    expect(v.grade).toBe('poor');
    expect(v.reasons).toEqual(['latency 40 ms one way (in time up to 30 ms)', '3.0 % of packets lost']);
    expect(v.hints).toContain('Try a smaller block size.');
    expect(v.hints.some((h) => h.startsWith('Use a wired network connection'))).toBe(true);
    expect(verdict({ ...base, lossPct: 0.5 }).grade).toBe('fair');
    expect(verdict({ ...base, lossPct: 0.49 }).grade).toBe('good');
    expect(verdict({ ...base, underrunsPerMinute: 4, bufferMode: 'fixed' }).hints).toEqual([
      'Use a larger fixed buffer, or the adaptive buffer.',
    ]);
    expect(verdict({ ...base, oneWayMs: null }).grade).toBe('good');
  });
  it("names the measured cause: jitter the network stage does not show is this computer's", () => {
    // A loopback room: 12 ms of jitter in the buffer, 0.4 ms of it in the network one-way stage.
    const local = verdict({ ...base, jitterMs: 12, networkJitterMs: 0.4 });
    expect(local.grade).toBe('fair');
    expect(local.reasons).toEqual(["jitter 12.0 ms, mostly from this computer (the network's: 0.4 ms)"]);
    expect(local.hints.some((h) => h.startsWith('Use a wired'))).toBe(false);
    expect(local.hints.some((h) => h.startsWith('Close other programs and browser tabs'))).toBe(true);
    // The same jitter measured on the path: the network's.
    const path = verdict({ ...base, jitterMs: 12, networkJitterMs: 9 });
    expect(path.hints.some((h) => h.startsWith('Use a wired'))).toBe(true);
    // Not measured: the path is the usual suspect.
    expect(
      verdict({ ...base, jitterMs: 12, networkJitterMs: null }).hints.some((h) =>
        h.startsWith('Use a wired'),
      ),
    ).toBe(true);
  });
  it("splits dropouts by cause and counts a participant's device gaps as dropouts", () => {
    // Five underruns here: three waited for late packets (two of them after gaps of their
    // device), one ended with a stall of this machine, one ran dry while packets were lost.
    const v = verdict({
      ...base,
      underrunsPerMinute: 5,
      causes: { late: 3, stall: 1, senderGaps: 2, ownGaps: 0 },
    });
    expect(v.grade).toBe('poor');
    expect(v.reasons).toEqual([
      '5 dropouts in the last minute (2 from their device, 1 from this computer, 1 from late packets, 1 while packets were lost)',
    ]);
    expect(v.hints.some((h) => h.startsWith('Their computer missed audio callbacks'))).toBe(true);
    expect(v.hints.some((h) => h.startsWith('Close other programs and browser tabs'))).toBe(true);
    expect(v.hints.some((h) => h.startsWith('Use a wired'))).toBe(true);
    // Our own device's gaps.
    const ours = verdict({ ...base, causes: { late: 0, stall: 0, senderGaps: 0, ownGaps: 1 } });
    expect(ours.reasons).toEqual(['1 dropout in the last minute (1 from this computer)']);
    expect(ours.hints.some((h) => h.startsWith('This computer missed audio callbacks'))).toBe(true);
  });
});

describe('StatsTimeline', () => {
  const sample = (received: number, lost: number, underruns: number) => ({
    bufferMs: 10,
    targetMs: 10,
    latencyMs: NaN,
    rttMs: 1,
    received,
    lost,
    late: 0,
    concealed: lost,
    discarded: 0,
    underruns,
    driftPpm: 2,
  });
  it('computes loss and underruns over the recent window and keeps at most maxSamples', () => {
    const h = new StatsTimeline(0, 100);
    for (let s = 0; s <= 120; s++)
      h.add('p', 'Ana', s * 1000, sample(s * 375, s >= 100 ? (s - 100) * 4 : 0, s >= 115 ? 1 : 0));
    const ser = h.get('p')!;
    expect(ser.samples).toHaveLength(100);
    expect(ser.samples[0].t).toBe(21);
    // The last 10 s: 10 × 375 received, 10 × 4 lost.
    const r = h.recent('p', 10);
    expect(r.lossPct).toBeCloseTo((100 * 40) / (3750 + 40), 9);
    expect(r.underruns).toBe(1);
    expect(h.recent('nobody')).toEqual({
      lossPct: 0,
      underruns: 0,
      causes: { late: 0, stall: 0, senderGaps: 0, ownGaps: 0 },
    });
  });
});

/** A stage histogram: `counts` in the bins between `edgesMs` (its count is their sum), and its figures. */
function histogram(
  edgesMs: number[],
  counts: number[],
  figures: Pick<StageHistogram, 'p50' | 'p95' | 'p99' | 'max' | 'min' | 'mean'>,
  rejected = 0,
): StageHistogram {
  return { edgesMs, counts, ...figures, count: counts.reduce((a, b) => a + b, 0), rejected };
}

type ExportOptions = Parameters<typeof buildExport>[0];

describe('export', () => {
  const hist = histogram([1, 2, 4, 8], [0, 5, 1], {
    p50: 2.8,
    p95: 4.5,
    p99: 4.9,
    max: 5,
    min: 1.5,
    mean: 3,
  });
  const h = new StatsTimeline(Date.UTC(2026, 10, 21, 18, 0, 0));
  h.add('p1', 'Bo, "the drummer"', Date.UTC(2026, 10, 21, 18, 0, 1), {
    bufferMs: 12.5,
    targetMs: 13,
    latencyMs: NaN,
    rttMs: 0.8,
    received: 375,
    lost: 1,
    late: 0,
    concealed: 1,
    discarded: 0,
    underruns: 0,
    driftPpm: -3.5,
  });
  /** The export of room 'band' two seconds in: Bo's series, `hist` as the capture stage, `stages` per peer. */
  const exportWith = (stages: ExportOptions['stages'], devices?: ExportOptions['devices']) =>
    buildExport({
      room: 'band',
      startedAt: h.startedAt,
      now: h.startedAt + 2000,
      sampleRate: 48000,
      blockFrames: 128,
      series: h.peers(),
      stages,
      local: { capture: hist },
      devices,
    });
  const e = exportWith(() => ({ jitterWait: hist }));
  it('JSON holds the series and histograms, unmeasured figures as null', () => {
    const j = JSON.parse(toJson(e));
    expect(j.format).toBe('tutti-stats');
    expect(j.startedAt).toBe('2026-11-21T18:00:00.000Z');
    expect(j.peers[0].samples[0]).toMatchObject({ t: 1, bufferMs: 12.5, latencyMs: null, driftPpm: -3.5 });
    expect(j.peers[0].stages.jitterWait.counts).toEqual([0, 5, 1]);
    expect(j.local.capture.p95).toBe(4.5);
  });
  it('carries every stage by name and the devices, in JSON and CSV', () => {
    const m2e = histogram(
      [0, 16, 32, 64],
      [0, 300, 100],
      { p50: 24.5, p95: 40.25, p99: 55, max: 60, min: 17, mean: 28 },
      2,
    );
    const empty = histogram([0, 1, 2], [0, 0], { p50: 0, p95: 0, p99: 0, max: 0, min: 0, mean: 0 });
    const x = exportWith(() => ({ mouthToEar: m2e, network: empty }), { outputMs: 10.5, inputMs: NaN });
    const j = JSON.parse(toJson(x));
    expect(j.devices).toEqual({ outputMs: 10.5, inputMs: null });
    expect(j.peers[0].stages.mouthToEar).toMatchObject({
      p50: 24.5,
      p95: 40.25,
      p99: 55,
      max: 60,
      count: 400,
      counts: [0, 300, 100],
    });
    expect(j.peers[0].stages.network.count).toBe(0);

    const rows = parseCsv(toCsv(x));
    expect(rows.every((r) => r.length === CSV_HEADER.length)).toBe(true);
    const col = (r: string[], name: string) => r[CSV_HEADER.indexOf(name)];
    const pick = (record: string, ...names: string[]) =>
      rows
        .filter((r) => r[0] === record)
        .map((r) => [col(r, 'peer'), col(r, 'stage'), ...names.map((n) => col(r, n))]);
    // A summary per stage, the empty one too (its quantiles blank: nothing measured).
    expect(
      pick('stage', 'count', 'p50_ms', 'p95_ms', 'p99_ms', 'max_ms', 'min_ms', 'mean_ms', 'rejected'),
    ).toEqual([
      ['p1', 'mouthToEar', '400', '24.5', '40.25', '55', '60', '17', '28', '2'],
      ['p1', 'network', '0', '', '', '', '', '', '', '0'],
      ['local', 'capture', '6', '2.8', '4.5', '4.9', '5', '1.5', '3', '0'],
    ]);
    expect(
      pick('histogram', 'bin_from_ms', 'bin_to_ms', 'count').filter((r) => r[1] === 'mouthToEar'),
    ).toEqual([
      ['p1', 'mouthToEar', '16', '32', '300'],
      ['p1', 'mouthToEar', '32', '64', '100'],
    ]);
    expect(pick('device', 'value_ms')).toEqual([
      ['local', 'output', '10.5'],
      ['local', 'input', ''],
    ]);
    // The series rows leave the new columns empty.
    const series = rows.find((r) => r[0] === 'series')!;
    expect(['stage', 'count', 'p50_ms', 'value_ms'].map((n) => col(series, n))).toEqual(['', '', '', '']);
  });
  it('CSV parses back: a series row per sample, a histogram row per non-empty bin', () => {
    const rows = parseCsv(toCsv(e));
    expect(rows[0]).toEqual(CSV_HEADER);
    expect(rows.every((r) => r.length === CSV_HEADER.length)).toBe(true);
    const col = (r: string[], name: string) => r[CSV_HEADER.indexOf(name)];
    const series = rows.filter((r) => r[0] === 'series');
    expect(series).toHaveLength(1);
    expect(col(series[0], 'name')).toBe('Bo, "the drummer"');
    expect(col(series[0], 'buffer_ms')).toBe('12.5');
    expect(col(series[0], 'latency_ms')).toBe('');
    const hrows = rows.filter((r) => r[0] === 'histogram');
    expect(
      hrows.map((r) => [
        col(r, 'peer'),
        col(r, 'stage'),
        col(r, 'bin_from_ms'),
        col(r, 'bin_to_ms'),
        col(r, 'count'),
      ]),
    ).toEqual([
      ['p1', 'jitterWait', '2', '4', '5'],
      ['p1', 'jitterWait', '4', '8', '1'],
      ['local', 'capture', '2', '4', '5'],
      ['local', 'capture', '4', '8', '1'],
    ]);
  });
});

/** The collector's counters with one peer, 'p1': a clean stream of 1000 packets, with `p1` over it. */
function countersOf(p1: Record<string, number> = {}) {
  const clean = {
    received: 1000,
    lost: 0,
    late: 0,
    duplicates: 0,
    discarded: 0,
    concealed: 0,
    underruns: 0,
    resets: 0,
    bufferedMs: 10,
    targetMs: 10,
    jitterMs: 2,
    driftPpm: 0,
    gapMaxMs: 0,
    gapsOver20Ms: 0,
  };
  return { underruns: 0, quanta: 0, perPeer: { p1: { ...clean, ...p1 } } };
}

/** A room view with one participant, Ana as 'p1', whose latency the view estimates at 22 ms. */
function viewOf(format: string) {
  return {
    room: 'r',
    engine: { sampleRate: 48000, blockFrames: 128, underruns: 0, peers: 1 },
    participants: [{ peer: 'p1', name: 'Ana', format, latencyMs: 22, rttMs: 1.5 }],
  };
}

describe('StatsCollector', async () => {
  const { StatsCollector } = await import('../../app/src/stats/collector');
  it('turns the counters into rows with percentages of the packets expected, and a verdict', () => {
    let t = 0;
    const counters = countersOf({
      received: 990,
      lost: 10,
      late: 5,
      discarded: 2,
      concealed: 12,
      underruns: 1,
      targetMs: 12,
      jitterMs: 3,
      driftPpm: -4,
    });
    const view = viewOf('PCM16 mono 128');
    const c = new StatsCollector({ view: view as never, counters: () => counters }, () => (t += 1000));
    c.sample();
    counters.perPeer.p1.bufferedMs = 20;
    c.sample();
    const [row] = c.current;
    expect(row).toMatchObject({
      name: 'Ana',
      received: 990,
      lost: 10,
      lostPct: 1,
      latePct: 0.5,
      concealedPct: 1.2,
      discardedPct: 0.2,
      bufferMs: 20,
      bufferAvgMs: 15,
      rttMs: 1.5,
      driftPpm: -4,
    });
    // No loss and no underrun between the two samples: the recent window is clean.
    expect(row.verdict.grade).toBe('good');
    const e = c.export();
    expect(e.peers[0].samples.map((s) => s.bufferMs)).toEqual([10, 20]);
  });
});

/** A histogram with only the summary the view reads (one bin). */
function stage(p50: number, p95: number, count = 100, max = p95 + 1): StageHistogram {
  return histogram([0, 1000], [count], { p50, p95, p99: p95 + 0.5, max, min: p50 / 2, mean: p50 });
}

describe('StatsCollector with the engine stages', async () => {
  const { StatsCollector } = await import('../../app/src/stats/collector');
  const counters = countersOf();
  // The view's own estimate says 22 ms: good.
  const view = viewOf('PCM16 mono 256');
  it("samples and grades the mouthToEar p50 when the engine has one, else the view's estimate", () => {
    let m2e = stage(40, 47, 0);
    const stages = () => ({
      peers: { p1: { mouthToEar: m2e, transit: stage(12, 14) } },
      local: {},
      devices: { outputMs: 8, inputMs: NaN },
    });
    let t = 0;
    const c = new StatsCollector(
      { view: view as never, counters: () => counters, latencyStages: stages },
      () => (t += 1000),
    );
    // Nothing recorded yet in mouthToEar: the view's estimate.
    c.sample();
    expect(c.current[0]).toMatchObject({ latencyMs: 22, latencyFrom: 'estimate' });
    expect(c.current[0].verdict.grade).toBe('good');
    m2e = stage(40, 47, 500);
    c.sample();
    const [row] = c.current;
    expect(row).toMatchObject({ latencyMs: 40, latencyFrom: 'mouthToEar' });
    expect(row.blockMs).toBeCloseTo((256 / 48000) * 1000, 12);
    // 40 ms one way: fair (≤ 50), with its reason and the smaller-block hint (256 frames).
    expect(row.verdict.grade).toBe('fair');
    expect(row.verdict.reasons).toEqual(['latency 40 ms one way (in time up to 30 ms)']);
    expect(row.verdict.hints).toContain('Try a smaller block size.');
    expect(c.history.get('p1')!.samples.map((s) => s.latencyMs)).toEqual([22, 40]);
    expect(c.stages.devices).toEqual({ outputMs: 8, inputMs: NaN });
    const e = c.export();
    expect(Object.keys(e.peers[0].stages)).toEqual(['mouthToEar', 'transit']);
    expect(e.devices).toEqual({ outputMs: 8, inputMs: NaN });
    // 51 ms: poor.
    m2e = stage(51, 60, 600);
    c.sample();
    expect(c.current[0].verdict.grade).toBe('poor');
  });
  it('leaves the latency unknown when neither the stages nor the view have it', () => {
    const c = new StatsCollector({
      view: { ...view, participants: [{ ...view.participants[0], latencyMs: null, format: '' }] } as never,
      counters: () => counters,
    });
    c.sample();
    expect(c.current[0]).toMatchObject({ latencyMs: null, latencyFrom: null });
    expect(c.current[0].blockMs).toBeNaN();
    expect(c.history.get('p1')!.samples[0].latencyMs).toBeNaN();
  });
});

describe('latency path', async () => {
  const { blockMsOf, inStageOrder, stageTable, splitRoundTrip, STAGE_NAMES } =
    await import('../../app/src/stats/collector');
  it('reads the block from the format', () => {
    expect(blockMsOf('PCM16 mono 128', 48000)).toBeCloseTo(2.6666667, 6);
    expect(blockMsOf('float32 stereo 64', 48000)).toBeCloseTo(1.3333333, 6);
    expect(blockMsOf('', 48000)).toBeNaN();
  });
  it('lists the stages in path order, fixed figures in every column, and the per-packet sum last', () => {
    const lines = stageTable({
      stages: {
        sendQueue: stage(0.5, 2),
        network: stage(6, 9),
        delivery: stage(1, 3),
        jitterWait: stage(8, 12),
        transit: stage(15.5, 22),
        mouthToEar: stage(29, 36),
      },
      local: { capture: stage(2.7, 3) },
      devices: { outputMs: 10.7, inputMs: NaN },
      blockMs: 2.5,
      rttMs: 12.4,
    });
    expect(lines.map((l) => [l.key, l.role])).toEqual([
      ['input', 'part'],
      ['capture', 'aside'],
      ['packetization', 'part'],
      ['sendQueue', 'part'],
      ['network', 'part'],
      ['delivery', 'part'],
      ['jitterWait', 'part'],
      ['transit', 'subtotal'],
      ['output', 'part'],
      ['mouthToEar', 'sum'],
    ]);
    const by = Object.fromEntries(lines.map((l) => [l.key, l]));
    expect(by.network).toMatchObject({ p50: 6, p95: 9, p99: 9.5, max: 10, count: 100, note: 'RTT/2 6.2 ms' });
    expect(by.packetization).toMatchObject({ p50: 2.5, p95: 2.5, p99: 2.5, max: 2.5, count: null });
    expect(by.output).toMatchObject({ p50: 10.7, max: 10.7 });
    expect(by.input.p50).toBeNaN();
    expect(by.input.note).toBe('not reported (counted as 0)');
    expect(by.mouthToEar).toMatchObject({
      label: 'Mouth to ear (estimated)',
      p50: 29,
      p95: 36,
      p99: 36.5,
      max: 37,
    });
  });
  it('shows an empty stage as not measured', () => {
    const lines = stageTable({ stages: { network: stage(0, 0, 0) }, blockMs: NaN, rttMs: null });
    const net = lines.find((l) => l.key === 'network')!;
    expect([net.p50, net.p95, net.p99, net.max].every(Number.isNaN)).toBe(true);
    expect(net.count).toBe(0);
    expect(net.note).toBe('RTT not measured yet');
    expect(lines.find((l) => l.key === 'mouthToEar')!.count).toBe(0);
  });
  it('splits a round trip into our send queue, the way back (transit here) and the way there', () => {
    expect(splitRoundTrip({ sendQueue: stage(0.5, 1), transit: stage(15.5, 20) }, 40)).toEqual({
      sendMs: 0.5,
      backMs: 15.5,
      toThemMs: 24,
    });
    expect(splitRoundTrip({ transit: stage(15.5, 20) }, 40).toThemMs).toBeNaN();
    expect(splitRoundTrip({ sendQueue: stage(0.5, 1), transit: stage(0, 0, 0) }, 40).backMs).toBeNaN();
    expect(splitRoundTrip(undefined, 40).sendMs).toBeNaN();
  });
  it('orders the histograms mouth to ear first and names them', () => {
    const order = inStageOrder(
      ['jitterWait', 'network', 'delivery', 'sendQueue', 'transit', 'mouthToEar', 'newStage', 'capture'].map(
        (k) => [k, 0],
      ),
    );
    expect(order.map(([k]) => k)).toEqual([
      'mouthToEar',
      'transit',
      'sendQueue',
      'network',
      'delivery',
      'jitterWait',
      'capture',
      'newStage',
    ]);
    for (const k of ['mouthToEar', 'transit', 'delivery', 'sendQueue', 'network', 'jitterWait', 'capture'])
      expect(STAGE_NAMES[k]).toBeTruthy();
  });
});

describe('round-trip probe', async () => {
  const { ProbeWatch, PROBE_START_GRACE_MS, probeControls, roundTripText, selfLoop } =
    await import('../../app/src/stats/collector');
  type Result = NonNullable<ReturnType<import('../../app/src/stats/collector').ProbeControls['probeResult']>>;
  const result = (over: Partial<Result>): Result => ({
    peer: 'p1',
    state: 'done',
    clicks: 10,
    sent: 10,
    heard: 10,
    roundTripsMs: [],
    medianMs: 31.25,
    minMs: 30,
    maxMs: 33.5,
    ...over,
  });
  function fakeProbe(first: Result | null) {
    const calls: unknown[][] = [];
    let current = first;
    return {
      calls,
      set: (r: Result | null) => (current = r),
      startProbe: (peer: string, clicks?: number) => (calls.push(['start', peer, clicks]), peer !== 'gone'),
      stopProbe: () => void calls.push(['stop']),
      probeResult: () => current,
      echoing: () => null,
    };
  }
  it("ignores the previous probe's result until the new one runs, then follows it to done", () => {
    let now = 0;
    // The stats block still shows an earlier probe of the same peer, done.
    const p = fakeProbe(result({ medianMs: 99 }));
    const w = new ProbeWatch(p, 'p1', undefined, () => now);
    expect(p.calls).toEqual([['start', 'p1', undefined]]);
    now = 200;
    expect(w.poll()).toBe('starting');
    expect(w.progress).toBe('starting…');
    p.set(result({ state: 'running', sent: 3, heard: 2 }));
    now = 400;
    expect(w.poll()).toBe('running');
    expect(w.progress).toBe('click 3 of 10');
    p.set(result({ state: 'running', sent: 0, heard: 0 }));
    w.poll();
    expect(w.progress).toBe('click 1 of 10');
    p.set(result({}));
    expect(w.poll()).toBe('done');
    expect(w.finished).toBe(true);
    expect(w.result?.medianMs).toBe(31.25);
    // Finished: later polls and stops change nothing.
    p.set(null);
    expect(w.poll()).toBe('done');
    w.stop();
    expect(p.calls).toHaveLength(1);
  });
  it('stops, fails to start, and gives up waiting after the grace time', () => {
    let now = 0;
    const p = fakeProbe(null);
    const w = new ProbeWatch(p, 'p1', 4, () => now);
    expect(p.calls).toEqual([['start', 'p1', 4]]);
    p.set(result({ state: 'running', clicks: 4, sent: 1, heard: 0 }));
    w.poll();
    w.stop();
    expect(w.phase).toBe('stopped');
    expect(p.calls.at(-1)).toEqual(['stop']);

    expect(new ProbeWatch(p, 'gone', undefined, () => now).phase).toBe('failed');

    // Never seen running: the previous result counts once the grace time is over.
    p.set(result({ medianMs: 12 }));
    const late = new ProbeWatch(p, 'p1', undefined, () => now);
    now += PROBE_START_GRACE_MS - 1;
    expect(late.poll()).toBe('starting');
    now += 2;
    expect(late.poll()).toBe('done');
    // ...and nothing at all for this peer: failed.
    p.set(result({ peer: 'other', state: 'running' }));
    const other = new ProbeWatch(p, 'p1', undefined, () => now);
    now += PROBE_START_GRACE_MS + 1;
    expect(other.poll()).toBe('failed');
    expect(other.result).toBeNull();
  });
  it('waits for the peer to allow the echo however long it takes, then follows the clicks or ends with their refusal', () => {
    let now = 0;
    const p = fakeProbe(result({ medianMs: 99 }));
    const w = new ProbeWatch(p, 'p1', undefined, () => now);
    p.set(result({ state: 'asking', sent: 0, heard: 0 }));
    // Asking takes longer than the start's grace: still asking, not failed.
    now = 10 * PROBE_START_GRACE_MS;
    expect(w.poll()).toBe('asking');
    expect(w.progress).toBe('waiting for their answer…');
    // Allowed: the stats block shows the previous probe for a moment, then the new one running.
    p.set(result({ medianMs: 99 }));
    now += PROBE_START_GRACE_MS - 1;
    expect(w.poll()).toBe('asking');
    p.set(result({ state: 'running', sent: 1, heard: 0 }));
    expect(w.poll()).toBe('running');
    p.set(result({}));
    expect(w.poll()).toBe('done');

    const refused = new ProbeWatch(p, 'p1', undefined, () => now);
    p.set(result({ state: 'asking', sent: 0, heard: 0 }));
    expect(refused.poll()).toBe('asking');
    p.set(
      result({
        state: 'refused',
        sent: 0,
        heard: 0,
        medianMs: NaN,
        message: 'Bea declined the round-trip measurement.',
      }),
    );
    expect(refused.poll()).toBe('refused');
    expect(refused.finished).toBe(true);
    expect(refused.result?.message).toBe('Bea declined the round-trip measurement.');
  });
  it('finds the probe on a session that has one', () => {
    expect(probeControls(fakeProbe(null))).not.toBeNull();
    expect(probeControls({ startProbe() {} })).toBeNull();
  });
  it('words a peer round trip, lost clicks and a peer that did not echo', () => {
    expect(roundTripText(result({}), 'Ana')).toBe(
      'Round trip: median 31.3 ms (min–max 30.0–33.5 ms over 10 clicks)',
    );
    expect(roundTripText(result({ heard: 9 }), 'Ana')).toBe(
      'Round trip: median 31.3 ms (min–max 30.0–33.5 ms over 9 clicks); 1 of 10 lost',
    );
    expect(roundTripText(result({ heard: 0, medianMs: NaN, minMs: NaN, maxMs: NaN }), 'Ana')).toBe(
      'No click came back: Ana did not echo (an older version of Tutti, or muted).',
    );
  });
  it("adds the devices to the sound check's engine round trip when they report it", () => {
    const r = result({ medianMs: 8, minMs: 7.9, maxMs: 8.4 });
    const both = selfLoop(r, { outputMs: 10.5, inputMs: 3 });
    expect(both).toMatchObject({ engineMs: 8, totalMs: 21.5 });
    expect(both.engine).toBe('Engine round trip 8.0 ms (spread 7.9–8.4 ms over 10 clicks)');
    expect(both.devices).toBe('Devices: output 10.5 ms, input 3.0 ms');
    expect(both.total).toBe('Total local I/O + engine: 21.5 ms (engine + output + input)');
    const noInput = selfLoop(r, { outputMs: 10.5, inputMs: NaN });
    expect(noInput.totalMs).toBe(18.5);
    expect(noInput.devices).toBe('Devices: output 10.5 ms, input not reported');
    expect(noInput.total).toBe(
      'Total local I/O + engine: 18.5 ms (engine + output; the input device does not report its latency, so it is not included)',
    );
    expect(selfLoop(r, { outputMs: NaN, inputMs: NaN }).total).toBe(
      'Total local I/O + engine: 8.0 ms (engine; neither device reports its latency, so neither is included)',
    );
    const none = selfLoop(result({ heard: 0, medianMs: NaN }), { outputMs: 10, inputMs: 1 });
    expect(none.totalMs).toBeNaN();
    expect(none.engine).toBe('No click came back through the engine.');
  });
});
