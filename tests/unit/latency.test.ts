// The latency histogram block reader: bin edges from the engine's formula (the same known values
// core/src/latency.rs checks), and a block written by hand read back under the seqlock.

import { describe, expect, it } from 'vitest';
import * as L from '../../app/src/audio/latency';

describe('bin edges', () => {
  it('match the known values the engine checks', () => {
    expect(L.binEdgeUs(0)).toBe(10);
    expect(L.binEdgeUs(8)).toBe(20);
    expect(L.binEdgeUs(80)).toBe(10240);
    expect(L.binEdgeUs(160)).toBe(10485760);
    expect(Math.abs(L.binEdgeUs(1) - 10.905077326652577)).toBeLessThan(1e-9);
  });

  it('lists every bin in ms, underflow from 0 and overflow to infinity', () => {
    const edges = L.binEdgesMs();
    expect(edges).toHaveLength(L.BINS + 1);
    expect(edges[0]).toBe(0);
    expect(edges[1]).toBe(0.01);
    expect(edges[L.BINS - 1]).toBeCloseTo(10485.76, 9);
    expect(edges[L.BINS]).toBe(Infinity);
    for (let b = 2; b < L.BINS; b++) {
      expect(edges[b] / edges[b - 1]).toBeCloseTo(Math.pow(2, 1 / 8), 12);
    }
  });

  it('lays the block out as the engine does', () => {
    expect(L.HIST_LEN).toBe(L.H_BINS_AT + L.BINS);
    expect(L.SLOTS_AT).toBe(L.CAPTURE_AT + L.HIST_LEN);
    expect(L.histIndex(L.HB_MAX_PEERS - 1, L.STAGES - 1) + L.HIST_LEN).toBe(L.HB_BLOCK_LEN);
    expect(L.HISTOGRAM_BYTES).toBe(L.HB_BLOCK_LEN * 8);
  });
});

/** Writes one histogram record by hand. */
function writeRecord(
  block: Float64Array,
  at: number,
  r: {
    count: number;
    mean: number;
    min: number;
    max: number;
    p50: number;
    p95: number;
    p99: number;
    rejected: number;
  },
  bins: Record<number, number>,
): void {
  block[at + L.H_COUNT] = r.count;
  block[at + L.H_MEAN_MS] = r.mean;
  block[at + L.H_MIN_MS] = r.min;
  block[at + L.H_MAX_MS] = r.max;
  block[at + L.H_P50_MS] = r.p50;
  block[at + L.H_P95_MS] = r.p95;
  block[at + L.H_P99_MS] = r.p99;
  block[at + L.H_REJECTED] = r.rejected;
  for (const [b, c] of Object.entries(bins)) block[at + L.H_BINS_AT + Number(b)] = c;
}

function handBlock(slots: number): Float64Array {
  const block = new Float64Array(new SharedArrayBuffer(L.HISTOGRAM_BYTES));
  block[L.HB_SEQUENCE] = 6;
  block[L.HB_SLOTS] = slots;
  block[L.HB_STAGES] = L.STAGES;
  block[L.HB_BINS] = L.BINS;
  // Capture: 100 intervals of about 2.667 ms (bin of 2.667 ms: 1 + floor(8·log2(266.7)) = 65).
  writeRecord(
    block,
    L.CAPTURE_AT,
    { count: 100, mean: 2.667, min: 2.6, max: 2.7, p50: 2.667, p95: 2.69, p99: 2.7, rejected: 0 },
    { 65: 100 },
  );
  // Slot 2: jitter wait and network.
  writeRecord(
    block,
    L.histIndex(2, L.STAGE_JITTER_WAIT),
    { count: 40, mean: 5.4, min: 5.2, max: 5.5, p50: 5.333, p95: 5.5, p99: 5.5, rejected: 0 },
    { 73: 30, 74: 10 },
  );
  writeRecord(
    block,
    L.histIndex(2, L.STAGE_NETWORK),
    { count: 39, mean: 0.25, min: 0.2, max: 0.31, p50: 0.24, p95: 0.3, p99: 0.31, rejected: 3 },
    { 35: 20, 37: 19 },
  );
  // Slot 3 holds a peer that has recorded nothing: left out.
  return block;
}

describe('readLatency', () => {
  it('reads a block written by hand into plain objects', () => {
    const block = handBlock(4);
    const snap = L.readLatency(block);
    expect(snap).not.toBeNull();
    const s = snap!;
    expect(s.capture.count).toBe(100);
    expect(s.capture.p50).toBe(2.667);
    expect(s.capture.counts[65]).toBe(100);
    expect(s.capture.counts).toHaveLength(L.BINS);
    // The bin that holds 2.667 ms spans it.
    expect(s.capture.edgesMs[65]).toBeLessThanOrEqual(2.667);
    expect(s.capture.edgesMs[66]).toBeGreaterThan(2.667);
    expect(s.peers.map((p) => p.slot)).toEqual([2]);
    const p = s.peers[0];
    expect(p.jitterWait).toMatchObject({ count: 40, p50: 5.333, p95: 5.5, p99: 5.5, max: 5.5, mean: 5.4 });
    expect(p.jitterWait.counts[73] + p.jitterWait.counts[74]).toBe(40);
    expect(p.network).toMatchObject({ count: 39, p50: 0.24, rejected: 3, min: 0.2 });
    expect(p.network.counts.reduce((a, b) => a + b, 0)).toBe(39);
    expect(p.network.edgesMs).toHaveLength(L.BINS + 1);
  });

  it('reads only the slots the engine wrote, whatever the block says', () => {
    const block = handBlock(4);
    // A shared view shorter than the block: only the rows it holds are read.
    const short = new Float64Array(block.buffer, 0, L.histIndex(2, 0));
    const snap = L.readLatency(short)!;
    expect(snap.peers).toEqual([]);
    expect(snap.capture.count).toBe(100);
    block[L.HB_SLOTS] = 1e9;
    expect(L.readLatency(block)!.peers.map((p) => p.slot)).toEqual([2]);
    block[L.HB_SLOTS] = NaN;
    expect(L.readLatency(block)!.peers).toEqual([]);
  });

  it('gives up while the engine is writing and reads zeros as zeros', () => {
    const block = handBlock(4);
    block[L.HB_SEQUENCE] = 7; // odd: a write in progress
    expect(L.readLatency(block)).toBeNull();
    const empty = new Float64Array(L.HB_BLOCK_LEN);
    const snap = L.readLatency(empty)!;
    expect(snap.capture).toMatchObject({ count: 0, p50: 0, max: 0 });
    expect(snap.peers).toEqual([]);
  });

  it('turns non-numbers into zeros rather than passing them on', () => {
    const block = handBlock(4);
    block[L.histIndex(2, L.STAGE_NETWORK) + L.H_P99_MS] = NaN;
    expect(L.readLatency(block)!.peers[0].network.p99).toBe(0);
  });
});
