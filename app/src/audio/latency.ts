// The histogram block, mirrored from core/src/latency.rs (a Rust test checks the constants
// agree): per peer slot, per stage, a latency histogram with its summary; plus the local capture
// interval. The worklet publishes it about once a second under a seqlock (index 0 odd while it
// is being written), like the stats block. Times in the block are milliseconds.
//
// Bins: 0 is the underflow bin [0, 10 µs); bin b in 1..=160 spans [edge(b − 1), edge(b)) with
// edge(k) = 10 µs × 2^(k/8); bin 161 holds everything from edge(160) ≈ 10.49 s up. The engine's
// quantiles are interpolated inside their bin: off by less than one bin, under 9.05 % of the
// value in the regular range.

export const MIN_US = 10;
export const BINS_PER_OCTAVE = 8;
export const REGULAR_BINS = 160;
export const BINS = 162;
export const H_COUNT = 0;
export const H_MEAN_MS = 1;
export const H_MIN_MS = 2;
export const H_MAX_MS = 3;
export const H_P50_MS = 4;
export const H_P95_MS = 5;
export const H_P99_MS = 6;
export const H_REJECTED = 7;
export const H_BINS_AT = 8;
export const HIST_LEN = 170;
export const STAGE_JITTER_WAIT = 0;
export const STAGE_NETWORK = 1;
export const STAGE_DELIVERY = 2;
export const STAGE_SEND_QUEUE = 3;
export const STAGE_TRANSIT = 4;
export const STAGE_ONE_WAY = 5;
export const STAGES = 6;
export const HB_SEQUENCE = 0;
export const HB_SLOTS = 1;
export const HB_STAGES = 2;
export const HB_BINS = 3;
export const HB_OUTPUT_US = 4;
export const HB_INPUT_US = 5;
export const HB_GLOBAL_LEN = 8;
export const CAPTURE_AT = 8;
export const SLOTS_AT = 178;
export const HB_MAX_PEERS = 256;
export const HB_BLOCK_LEN = 261298;

/** Bytes a histogram SharedArrayBuffer needs. */
export const HISTOGRAM_BYTES = HB_BLOCK_LEN * 8;

/** Start of the record of stage `stage` of peer `slot`. */
export function histIndex(slot: number, stage: number): number {
  return SLOTS_AT + (slot * STAGES + stage) * HIST_LEN;
}

/** Edge `k` (0..=REGULAR_BINS) of the regular bins, µs: the same formula as the engine's. */
export function binEdgeUs(k: number): number {
  return MIN_US * Math.pow(2, k / BINS_PER_OCTAVE);
}

/**
 * The bin edges in ms, BINS + 1 of them: bin b spans [edges[b], edges[b + 1]). The underflow bin
 * starts at 0; the overflow bin has no upper edge, so its last edge is Infinity.
 */
export function binEdgesMs(): number[] {
  const edges = [0];
  for (let k = 0; k <= REGULAR_BINS; k++) edges.push(binEdgeUs(k) / 1000);
  edges.push(Infinity);
  return edges;
}

/** One stage's distribution, as the UI shows it. Times in ms. */
export interface StageHistogram {
  /** BINS + 1 edges in ms (see binEdgesMs); counts[b] lies between edges[b] and edges[b + 1]. */
  edgesMs: number[];
  counts: number[];
  p50: number;
  p95: number;
  p99: number;
  max: number;
  min: number;
  mean: number;
  count: number;
  /** Values measured but refused (out of range, negative). */
  rejected: number;
}

export interface PeerLatency {
  slot: number;
  /** Arrival to playout, per packet played. */
  jitterWait: StageHistogram;
  /** Sender's wall clock to ours, corrected by the clock offset; empty until it is known. */
  network: StageHistogram;
  /** Arrival at the pump to the quantum that takes the packet into the engine. */
  delivery: StageHistogram;
  /** Our data channel's queue towards this peer, per packet sent, as time. */
  sendQueue: StageHistogram;
  /** The sender handing a packet over to its first frame playing: network + delivery + wait. */
  transit: StageHistogram;
  /** Added one-way latency: transit + the sender's block + send queue (devices aside). */
  oneWay: StageHistogram;
  /** Estimated mouth to ear: oneWay shifted by the devices' latency (known parts; see readLatency). */
  mouthToEar: StageHistogram;
}

/** The per-peer stages by their names in PeerLatency, in the block's order. */
export const PEER_STAGES = [
  ['jitterWait', STAGE_JITTER_WAIT],
  ['network', STAGE_NETWORK],
  ['delivery', STAGE_DELIVERY],
  ['sendQueue', STAGE_SEND_QUEUE],
  ['transit', STAGE_TRANSIT],
  ['oneWay', STAGE_ONE_WAY],
] as const;
export type PeerStage = (typeof PEER_STAGES)[number][0];

export interface LatencySnapshot {
  /** Interval between input quanta reaching the engine (the worklet's clock has 1 ms steps). */
  capture: StageHistogram;
  /** Peers whose stages recorded anything, by slot. */
  peers: PeerLatency[];
  /** The devices' output and input latency the host reported, ms (NaN: unknown). */
  outputMs: number;
  inputMs: number;
}

/**
 * Copies a consistent snapshot of the shared histogram block into `into`. Returns false when the
 * engine kept writing during every attempt; the caller retries later.
 */
export function readHistogramBlock(shared: Float64Array, into: Float64Array, attempts = 4): boolean {
  for (let i = 0; i < attempts; i++) {
    const before = shared[HB_SEQUENCE];
    if (before % 2 !== 0) continue;
    // Only the slots the engine writes (its max peers), not the whole 256-slot block.
    const slots = Math.max(0, Math.min(HB_MAX_PEERS, Math.floor(shared[HB_SLOTS]) || 0));
    into.set(shared.subarray(0, Math.min(shared.length, into.length, SLOTS_AT + slots * STAGES * HIST_LEN)));
    if (shared[HB_SEQUENCE] === before) return true;
  }
  return false;
}

/** Decodes one histogram record starting at `at` of a consistent block copy. */
export function stageAt(block: Float64Array, at: number, edgesMs = binEdgesMs()): StageHistogram {
  const value = (i: number): number => {
    const v = block[at + i];
    return Number.isFinite(v) ? v : 0;
  };
  const counts: number[] = [];
  for (let b = 0; b < BINS; b++) counts.push(value(H_BINS_AT + b));
  return {
    edgesMs,
    counts,
    p50: value(H_P50_MS),
    p95: value(H_P95_MS),
    p99: value(H_P99_MS),
    max: value(H_MAX_MS),
    min: value(H_MIN_MS),
    mean: value(H_MEAN_MS),
    count: value(H_COUNT),
    rejected: value(H_REJECTED),
  };
}

/**
 * The distribution of `h` + `ms` (a constant): every edge and figure moves by `ms`. An empty
 * histogram stays empty (its figures 0).
 */
export function shiftStage(h: StageHistogram, ms: number): StageHistogram {
  if (h.count === 0 || ms === 0) return h;
  return {
    ...h,
    edgesMs: h.edgesMs.map((e) => e + ms),
    p50: h.p50 + ms,
    p95: h.p95 + ms,
    p99: h.p99 + ms,
    max: h.max + ms,
    min: h.min + ms,
    mean: h.mean + ms,
  };
}

/**
 * Reads the shared histogram block into plain objects: the capture interval and every peer slot
 * with anything recorded. Returns null when no consistent copy could be taken (retry later).
 * `scratch` (HB_BLOCK_LEN values) may be passed to avoid allocating the copy each time.
 */
export function readLatency(
  shared: Float64Array,
  scratch: Float64Array = new Float64Array(HB_BLOCK_LEN),
): LatencySnapshot | null {
  if (!readHistogramBlock(shared, scratch)) return null;
  const edgesMs = binEdgesMs();
  const slots = Math.min(
    Math.max(0, Math.floor(scratch[HB_SLOTS]) || 0),
    HB_MAX_PEERS,
    Math.floor((Math.min(shared.length, scratch.length) - SLOTS_AT) / (STAGES * HIST_LEN)),
  );
  const ms = (us: number) => (Number.isFinite(us) ? us / 1000 : NaN);
  const outputMs = ms(scratch[HB_OUTPUT_US]);
  const inputMs = ms(scratch[HB_INPUT_US]);
  const devicesMs = (Number.isFinite(outputMs) ? outputMs : 0) + (Number.isFinite(inputMs) ? inputMs : 0);
  const peers: PeerLatency[] = [];
  for (let slot = 0; slot < slots; slot++) {
    const stages = {} as Record<PeerStage, StageHistogram>;
    let any = 0;
    for (const [name, stage] of PEER_STAGES) {
      const h = stageAt(scratch, histIndex(slot, stage), edgesMs);
      stages[name] = h;
      any += h.count + h.rejected;
    }
    if (any > 0) peers.push({ slot, ...stages, mouthToEar: shiftStage(stages.oneWay, devicesMs) });
  }
  return { capture: stageAt(scratch, CAPTURE_AT, edgesMs), peers, outputMs, inputMs };
}
