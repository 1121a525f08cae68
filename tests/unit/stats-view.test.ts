// The stats view's pure parts: the quality verdict's thresholds, the history's windows, and the
// export formats (the CSV parsed back by an RFC 4180 reader written here).
import { describe, expect, it } from 'vitest';
import { verdict, THRESHOLDS } from '../../app/src/stats/verdict';
import { StatsHistory } from '../../app/src/stats/history';
import { buildExport, CSV_HEADER, toCsv, toJson, type StageHistogram } from '../../app/src/stats/export';

const base = { oneWayMs: 20, jitterMs: 2, lossPct: 0, underrunsPerMinute: 0, blockFrames: 128, bufferMode: 'adaptive' as const };

describe('verdict', () => {
  it('is good inside every threshold and says nothing', () => {
    expect(verdict(base)).toEqual({ grade: 'good', reasons: [], hints: [] });
    expect(verdict({ ...base, oneWayMs: THRESHOLDS.oneWayMs.good, jitterMs: THRESHOLDS.jitterMs.good }).grade).toBe('good');
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
});

describe('StatsHistory', () => {
  const sample = (received: number, lost: number, underruns: number) => ({
    bufferMs: 10, targetMs: 10, latencyMs: NaN, rttMs: 1, received, lost, late: 0, concealed: lost, discarded: 0, underruns, driftPpm: 2,
  });
  it('computes loss and underruns over the recent window and keeps at most maxSamples', () => {
    const h = new StatsHistory(0, 100);
    for (let s = 0; s <= 120; s++) h.add('p', 'Ana', s * 1000, sample(s * 375, s >= 100 ? (s - 100) * 4 : 0, s >= 115 ? 1 : 0));
    const ser = h.get('p')!;
    expect(ser.samples).toHaveLength(100);
    expect(ser.samples[0].t).toBe(21);
    // The last 10 s: 10 × 375 received, 10 × 4 lost.
    const r = h.recent('p', 10);
    expect(r.lossPct).toBeCloseTo((100 * 40) / (3750 + 40), 9);
    expect(r.underruns).toBe(1);
    expect(h.recent('nobody')).toEqual({ lossPct: 0, underruns: 0 });
  });
});

/** Splits RFC 4180 CSV text into rows of fields. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') row.push(field), (field = '');
    else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field), rows.push(row), (row = []), (field = ''), i++;
    } else field += c;
  }
  return rows;
}

describe('export', () => {
  const hist: StageHistogram = { edgesMs: [1, 2, 4, 8], counts: [0, 5, 1], p50: 2.8, p95: 4.5, p99: 4.9, max: 5, min: 1.5, mean: 3, count: 6, rejected: 0 };
  const h = new StatsHistory(Date.UTC(2026, 10, 21, 18, 0, 0));
  h.add('p1', 'Bo, "the drummer"', Date.UTC(2026, 10, 21, 18, 0, 1), {
    bufferMs: 12.5, targetMs: 13, latencyMs: NaN, rttMs: 0.8, received: 375, lost: 1, late: 0, concealed: 1, discarded: 0, underruns: 0, driftPpm: -3.5,
  });
  const e = buildExport({
    room: 'band', startedAt: h.startedAt, now: h.startedAt + 2000, sampleRate: 48000, blockFrames: 128,
    series: h.peers(), stages: () => ({ jitterWait: hist }), local: { capture: hist },
  });
  it('JSON holds the series and histograms, unmeasured figures as null', () => {
    const j = JSON.parse(toJson(e));
    expect(j.format).toBe('tutti-stats');
    expect(j.startedAt).toBe('2026-11-21T18:00:00.000Z');
    expect(j.peers[0].samples[0]).toMatchObject({ t: 1, bufferMs: 12.5, latencyMs: null, driftPpm: -3.5 });
    expect(j.peers[0].stages.jitterWait.counts).toEqual([0, 5, 1]);
    expect(j.local.capture.p95).toBe(4.5);
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
    expect(hrows.map((r) => [col(r, 'peer'), col(r, 'stage'), col(r, 'bin_from_ms'), col(r, 'bin_to_ms'), col(r, 'count')])).toEqual([
      ['p1', 'jitterWait', '2', '4', '5'],
      ['p1', 'jitterWait', '4', '8', '1'],
      ['local', 'capture', '2', '4', '5'],
      ['local', 'capture', '4', '8', '1'],
    ]);
  });
});

describe('StatsCollector', async () => {
  const { StatsCollector } = await import('../../app/src/stats/collector');
  it('turns the counters into rows with percentages of the packets expected, and a verdict', () => {
    let t = 0;
    const counters = {
      underruns: 0,
      quanta: 0,
      perPeer: {
        p1: { received: 990, lost: 10, late: 5, duplicates: 0, discarded: 2, concealed: 12, underruns: 1, resets: 0, bufferedMs: 10, targetMs: 12, jitterMs: 3, driftPpm: -4, gapMaxMs: 0, gapsOver20Ms: 0 },
      },
    };
    const view = {
      room: 'r',
      engine: { sampleRate: 48000, blockFrames: 128, underruns: 0, peers: 1 },
      participants: [{ peer: 'p1', name: 'Ana', format: 'PCM16 mono 128', latencyMs: 22, rttMs: 1.5 }],
    };
    const c = new StatsCollector({ view: view as never, counters: () => counters }, () => (t += 1000));
    c.sample();
    counters.perPeer.p1.bufferedMs = 20;
    c.sample();
    const [row] = c.current;
    expect(row).toMatchObject({ name: 'Ana', received: 990, lost: 10, lostPct: 1, latePct: 0.5, concealedPct: 1.2, discardedPct: 0.2, bufferMs: 20, bufferAvgMs: 15, rttMs: 1.5, driftPpm: -4 });
    // No loss and no underrun between the two samples: the recent window is clean.
    expect(row.verdict.grade).toBe('good');
    const e = c.export();
    expect(e.peers[0].samples.map((s) => s.bufferMs)).toEqual([10, 20]);
  });
});
