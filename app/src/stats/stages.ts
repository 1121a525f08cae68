// The latency path as the stats view shows it: the engine's per-stage histograms, what each stage
// is called and in which order it comes, a participant's path line by line with its mouth-to-ear
// sum (stageTable), and a measured round trip split into the parts our stages can see. Pure
// figures derived from what the collector sampled; nothing here reads a session.

import type { DeviceLatency, StageHistogram } from './export';

/** The engine's latency stages as Session.latencyStages() gives them. */
export interface LatencyStages {
  /** Per peer id, per stage name (jitterWait, network, delivery, sendQueue, transit, mouthToEar). */
  peers: Record<string, Record<string, StageHistogram>>;
  /** Stages that are not per peer (capture). */
  local: Record<string, StageHistogram>;
  /** The devices' output and input latency, ms (NaN: not reported). */
  devices?: DeviceLatency;
}

export const NO_STAGES: LatencyStages = { peers: {}, local: {} };

/** A participant's block (packetization) in ms from its format ("PCM16 mono 128": frames last). */
export function blockMsOf(format: string, sampleRate: number): number {
  const m = /(\d+)\s*$/.exec(format);
  return m && sampleRate > 0 ? (Number(m[1]) / sampleRate) * 1000 : NaN;
}

/** What the stages are called in the view. */
export const STAGE_NAMES: Record<string, string> = {
  mouthToEar: 'Mouth to ear (estimated)',
  oneWay: 'Added one-way (all but the devices)',
  transit: 'Transit (network + delivery + wait)',
  sendQueue: 'Send queue (ours, towards them)',
  network: 'Network one-way',
  delivery: 'Delivery (arrival to audio callback)',
  jitterWait: 'Jitter buffer wait',
  capture: 'Capture interval',
};

/** The order the histograms are shown in: the sum first, then its parts along the path. */
export const STAGE_ORDER = [
  'mouthToEar',
  'oneWay',
  'transit',
  'sendQueue',
  'network',
  'delivery',
  'jitterWait',
  'capture',
];

/** `entries` (stage name first) in STAGE_ORDER; stages it does not name keep their order, last. */
export function inStageOrder<T>(entries: [string, T][]): [string, T][] {
  const rank = (k: string) => {
    const i = STAGE_ORDER.indexOf(k);
    return i < 0 ? STAGE_ORDER.length : i;
  };
  return entries
    .map((e, i) => [e, i] as const)
    .sort((a, b) => rank(a[0][0]) - rank(b[0][0]) || a[1] - b[1])
    .map(([e]) => e);
}

/** One line of a participant's latency path (stageTable). Times in ms; NaN: not measured. */
export interface StageLine {
  key: string;
  label: string;
  /** A fixed figure (a device, the block) has the same value in all four. */
  p50: number;
  p95: number;
  p99: number;
  max: number;
  /** Values in the histogram; null for a fixed figure. */
  count: number | null;
  /** 'part' of the mouth-to-ear sum, 'aside' (shown, not in the sum), a 'subtotal' of parts
   * shown above it, or the 'sum'. */
  role: 'part' | 'aside' | 'subtotal' | 'sum';
  note: string;
}

function fixedLine(key: string, label: string, ms: number, note: string): StageLine {
  return { key, label, p50: ms, p95: ms, p99: ms, max: ms, count: null, role: 'part', note };
}

function histLine(
  key: string,
  h: StageHistogram | undefined,
  role: StageLine['role'],
  label: string,
  note: string,
): StageLine {
  const known = h !== undefined && h.count > 0;
  const v = (x: number | undefined) => (known && x !== undefined ? x : NaN);
  return {
    key,
    label,
    p50: v(h?.p50),
    p95: v(h?.p95),
    p99: v(h?.p99),
    max: v(h?.max),
    count: h?.count ?? 0,
    role,
    note,
  };
}

/**
 * A participant's latency path, for audio from them to us, in the order it happens, ending with
 * the engine's per-packet sum "mouth to ear (estimated)": transit (network + delivery + jitter
 * wait of the same packet) + their block + our send queue (standing in for theirs) + the devices'
 * latency (ours, standing in for their input). Its percentiles are those of the per-packet sum,
 * not sums of the parts' percentiles. An unreported device counts as 0 in the sum.
 */
export function stageTable(o: {
  stages?: Record<string, StageHistogram>;
  local?: Record<string, StageHistogram>;
  devices?: DeviceLatency;
  blockMs: number;
  rttMs: number | null;
}): StageLine[] {
  const st = o.stages ?? {};
  const dev = o.devices ?? { outputMs: NaN, inputMs: NaN };
  const rtt = o.rttMs ?? NaN;
  const device = (ms: number, what: string) => (Number.isFinite(ms) ? what : 'not reported (counted as 0)');
  return [
    fixedLine(
      'input',
      'Input device',
      dev.inputMs,
      device(dev.inputMs, 'the microphone track’s latency (ours, for theirs)'),
    ),
    histLine(
      'capture',
      o.local?.capture,
      'aside',
      'Capture (local)',
      'interval between input blocks: its spread is capture jitter; not in the sum',
    ),
    fixedLine('packetization', 'Packetization', o.blockMs, 'their block'),
    histLine('sendQueue', st.sendQueue, 'part', 'Send queue', 'ours towards them, for theirs towards us'),
    histLine(
      'network',
      st.network,
      'part',
      'Network one-way',
      Number.isFinite(rtt) ? `RTT/2 ${(rtt / 2).toFixed(1)} ms` : 'RTT not measured yet',
    ),
    histLine('delivery', st.delivery, 'part', 'Delivery', 'arrival to the audio callback that takes it'),
    histLine('jitterWait', st.jitterWait, 'part', 'Jitter buffer wait', 'arrival in the engine to playing'),
    histLine('transit', st.transit, 'subtotal', 'Transit', 'network + delivery + wait, per packet'),
    fixedLine(
      'output',
      'Output device',
      dev.outputMs,
      device(dev.outputMs, 'audio context base + output latency'),
    ),
    histLine(
      'mouthToEar',
      st.mouthToEar,
      'sum',
      'Mouth to ear (estimated)',
      'per packet: transit + their block + send queue + devices',
    ),
  ];
}

/**
 * A round trip to a peer and back, split where our stages can see it: our send queue towards
 * them (p50), their audio's transit to us (p50, which is also the way back of our echoed clicks)
 * and the rest, the way to them (their network, delivery and buffer for our stream, their send
 * queue), ms. NaN parts until the stages are measured.
 */
export function splitRoundTrip(
  stages: Record<string, StageHistogram> | undefined,
  roundTripMs: number,
): { sendMs: number; backMs: number; toThemMs: number } {
  const q = stages?.sendQueue;
  const t = stages?.transit;
  const sendMs = q && q.count > 0 ? q.p50 : NaN;
  const backMs = t && t.count > 0 ? t.p50 : NaN;
  return { sendMs, backMs, toThemMs: roundTripMs - sendMs - backMs };
}
