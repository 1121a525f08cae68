// Samples a session's per-peer figures once a second into a StatsTimeline, and answers what the
// stats view shows: the live table rows (counts and percentages), the verdicts, the latency path
// stage by stage with its mouth-to-ear sum, the round-trip probe's progress and wording, the
// export.

import type { RoomSession, RoomView } from '../room/types';
import { PROBE_START_GRACE_MS, type ProbeResult, type SessionCounters } from '../room/session';
import { StatsTimeline } from './timeline';
import { verdict, type Verdict } from './verdict';
import { buildExport, type DeviceLatency, type StageHistogram, type StatsExport } from './export';

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

/** What the collector needs of a session: its view and its counters. */
export interface StatsSource {
  readonly view: RoomView;
  counters(): SessionCounters;
  /** Per-stage histograms of a peer and the local ones, when the engine provides them. */
  latencyStages?(): LatencyStages;
}

export interface PeerRow {
  peer: string;
  name: string;
  format: string;
  bufferMs: number;
  bufferAvgMs: number;
  targetMs: number;
  received: number;
  late: number;
  lost: number;
  concealed: number;
  discarded: number;
  /** Percent of the packets expected (received + lost). */
  latePct: number;
  lostPct: number;
  concealedPct: number;
  discardedPct: number;
  underruns: number;
  rttMs: number | null;
  /** One-way mouth to ear, ms: the engine's mouthToEar p50 when it has any, else the view's
   * estimate (block + RTT/2 + buffer + output); null when neither is known. */
  latencyMs: number | null;
  /** Where latencyMs comes from. */
  latencyFrom: 'mouthToEar' | 'estimate' | null;
  /** The participant's block (packetization), ms, from its format; NaN before its first packet. */
  blockMs: number;
  driftPpm: number;
  jitterMs: number;
  verdict: Verdict;
}

export const SAMPLE_EVERY_MS = 1000;

export class StatsCollector {
  readonly history: StatsTimeline;
  private timer: ReturnType<typeof setInterval> | null = null;
  private rows: PeerRow[] = [];
  private latest: LatencyStages = NO_STAGES;
  private readonly listeners = new Set<(rows: PeerRow[]) => void>();

  constructor(
    private readonly source: StatsSource & Partial<Pick<RoomSession, 'subscribe'>>,
    private readonly now: () => number = Date.now,
  ) {
    this.history = new StatsTimeline(now());
  }

  start(): void {
    if (this.timer !== null) return;
    this.sample();
    this.timer = setInterval(() => this.sample(), SAMPLE_EVERY_MS);
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.listeners.clear();
  }

  /** Calls `fn` with the table rows after each sample; returns an unsubscribe function. */
  subscribe(fn: (rows: PeerRow[]) => void): () => void {
    this.listeners.add(fn);
    fn(this.rows);
    return () => this.listeners.delete(fn);
  }

  get current(): PeerRow[] {
    return this.rows;
  }

  /** The latency stages read at the last sample (empty when the session has none). */
  get stages(): LatencyStages {
    return this.latest;
  }

  /** Takes one sample of every participant (called every second; tests call it directly). */
  sample(): void {
    const view = this.source.view;
    const counters = this.source.counters();
    const stages = this.source.latencyStages?.() ?? NO_STAGES;
    this.latest = stages;
    const at = this.now();
    const rows: PeerRow[] = [];
    for (const p of view.participants) {
      const c = counters.perPeer[p.peer];
      if (!c) continue;
      const m2e = stages.peers[p.peer]?.mouthToEar;
      const measured = m2e !== undefined && m2e.count > 0 && Number.isFinite(m2e.p50);
      const latencyMs = measured ? m2e.p50 : p.latencyMs;
      this.history.add(p.peer, p.name, at, {
        bufferMs: c.bufferedMs,
        targetMs: c.targetMs,
        latencyMs: latencyMs ?? NaN,
        rttMs: p.rttMs ?? NaN,
        received: c.received,
        lost: c.lost,
        late: c.late,
        concealed: c.concealed,
        discarded: c.discarded,
        underruns: c.underruns,
        driftPpm: c.driftPpm,
        lateUnderruns: c.lateUnderruns ?? 0,
        stallUnderruns: c.stallUnderruns ?? 0,
        senderGaps: c.senderGaps ?? 0,
        ownGaps: counters.captureGaps ?? 0,
        localStalls: counters.localStalls ?? 0,
      });
      const samples = this.history.get(p.peer)!.samples;
      const avg = samples.reduce((a, s) => a + s.bufferMs, 0) / samples.length;
      const expected = c.received + c.lost;
      const pct = (n: number) => (expected > 0 ? (100 * n) / expected : 0);
      const recent = this.history.recent(p.peer, 60);
      const net = stages.peers[p.peer]?.network;
      const networkJitterMs =
        net !== undefined && net.count > 0 && Number.isFinite(net.p95 - net.p50) ? net.p95 - net.p50 : null;
      rows.push({
        peer: p.peer,
        name: p.name,
        format: p.format,
        bufferMs: c.bufferedMs,
        bufferAvgMs: avg,
        targetMs: c.targetMs,
        received: c.received,
        late: c.late,
        lost: c.lost,
        concealed: c.concealed,
        discarded: c.discarded,
        latePct: pct(c.late),
        lostPct: pct(c.lost),
        concealedPct: pct(c.concealed),
        discardedPct: pct(c.discarded),
        underruns: c.underruns,
        rttMs: p.rttMs,
        latencyMs,
        latencyFrom: measured ? 'mouthToEar' : latencyMs === null ? null : 'estimate',
        blockMs: blockMsOf(p.format, view.engine.sampleRate),
        driftPpm: c.driftPpm,
        jitterMs: c.jitterMs,
        verdict: verdict({
          oneWayMs: latencyMs,
          jitterMs: c.jitterMs,
          lossPct: recent.lossPct,
          underrunsPerMinute: recent.underruns,
          blockFrames: view.engine.blockFrames,
          bufferMode: 'adaptive',
          networkJitterMs,
          causes: recent.causes,
        }),
      });
    }
    this.rows = rows;
    for (const fn of this.listeners) fn(rows);
  }

  /** Everything recorded so far, for the JSON and CSV export. */
  export(): StatsExport {
    const view = this.source.view;
    const stages = this.source.latencyStages?.() ?? NO_STAGES;
    return buildExport({
      room: view.room,
      startedAt: this.history.startedAt,
      now: this.now(),
      sampleRate: view.engine.sampleRate,
      blockFrames: view.engine.blockFrames,
      series: this.history.peers(),
      stages: (peer) => stages.peers[peer] ?? {},
      local: stages.local,
      devices: stages.devices ?? { outputMs: NaN, inputMs: NaN },
    });
  }
}

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

/** The session's round-trip probe (Session.startProbe and the rest), where it has one. */
export interface ProbeControls {
  startProbe(peer: string, clicks?: number): boolean;
  stopProbe(): void;
  probeResult(): ProbeResult | null;
  echoing(): string | null;
  latencyStages?(): LatencyStages;
}

/** `session` as ProbeControls when it has a probe, else null (older or fake sessions). */
export function probeControls(session: object): ProbeControls | null {
  const s = session as Partial<ProbeControls>;
  const fns = [s.startProbe, s.stopProbe, s.probeResult, s.echoing];
  return fns.every((f) => typeof f === 'function') ? (session as ProbeControls) : null;
}

/** 'asking': the peer has not allowed the echo yet; 'refused': they declined, did not answer or
 * stopped it (the result's message says which). */
export type ProbePhase = 'starting' | 'asking' | 'running' | 'done' | 'stopped' | 'failed' | 'refused';

/** How often a running probe is polled, ms. */
export const PROBE_POLL_MS = 200;
/** The stats block shows the previous probe until the engine took the new one: a probe not seen
 * running within this long after its start is taken as it then stands, ms (the session's). */
export { PROBE_START_GRACE_MS };

/**
 * One round-trip probe as the UI follows it: started once, then polled (every PROBE_POLL_MS)
 * until it is done, stopped or failed. Ignores what the stats block still says of the previous
 * probe until the new one shows as running.
 */
export class ProbeWatch {
  phase: ProbePhase = 'starting';
  /** The latest result of this probe (null before it shows). */
  result: ProbeResult | null = null;
  private seenRunning = false;
  private startedAt: number;

  constructor(
    private readonly probe: ProbeControls,
    readonly peer: string,
    clicks?: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.startedAt = now();
    const started = clicks === undefined ? probe.startProbe(peer) : probe.startProbe(peer, clicks);
    if (!started) this.phase = 'failed';
  }

  get finished(): boolean {
    return (
      this.phase === 'done' || this.phase === 'stopped' || this.phase === 'failed' || this.phase === 'refused'
    );
  }

  poll(): ProbePhase {
    if (this.finished) return this.phase;
    const r = this.probe.probeResult();
    const mine = r !== null && r.peer === this.peer ? r : null;
    if (mine?.state === 'asking') {
      // The clicks start once the peer allows the echo: the start's grace runs from then.
      this.startedAt = this.now();
      return (this.phase = 'asking');
    }
    if (mine?.state === 'refused') {
      this.result = mine;
      return (this.phase = 'refused');
    }
    if (mine?.state === 'running') {
      this.seenRunning = true;
      this.result = mine;
      return (this.phase = 'running');
    }
    if (!this.seenRunning && this.now() - this.startedAt < PROBE_START_GRACE_MS) return this.phase;
    this.result = mine;
    return (this.phase = mine?.state === 'done' ? 'done' : this.seenRunning ? 'stopped' : 'failed');
  }

  /** Stops the probe (the peer's echo too). */
  stop(): void {
    if (this.finished) return;
    this.probe.stopProbe();
    this.phase = 'stopped';
  }

  /** "click k of n" while running; "waiting for their answer…" while asking; "starting…" before. */
  get progress(): string {
    const r = this.result;
    if (this.phase === 'asking') return 'waiting for their answer…';
    if (this.phase !== 'running' || !r) return 'starting…';
    return `click ${Math.min(r.clicks, Math.max(1, r.sent))} of ${r.clicks}`;
  }
}

const ms1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '–');

/** The wording of a finished peer probe. */
export function roundTripText(r: ProbeResult, name: string): string {
  if (r.heard === 0) return `No click came back: ${name} did not echo (an older version of Tutti, or muted).`;
  const lost = r.sent - r.heard;
  return (
    `Round trip: median ${ms1(r.medianMs)} ms (min–max ${ms1(r.minMs)}–${ms1(r.maxMs)} ms over ${r.heard} ` +
    `click${r.heard === 1 ? '' : 's'})${lost > 0 ? `; ${lost} of ${r.sent} lost` : ''}`
  );
}

/** The sound check's latency measurement: the engine's round trip on itself and the devices. */
export interface SelfLoop {
  engineMs: number;
  outputMs: number;
  inputMs: number;
  /** engine + the devices that reported a latency; NaN when no click came back. */
  totalMs: number;
  engine: string;
  devices: string;
  total: string;
}

/**
 * The sound check's "Measure latency": the probe's median round trip through the engine and the
 * packet pump (no network, no devices: it is timed on the audio clock), plus the devices' output
 * and input latency where the browser reports them.
 */
export function selfLoop(r: ProbeResult, devices: DeviceLatency): SelfLoop {
  const { outputMs, inputMs } = devices;
  const engineMs = r.heard > 0 ? r.medianMs : NaN;
  const known = (v: number) => (Number.isFinite(v) ? v : 0);
  const totalMs = engineMs + known(outputMs) + known(inputMs);
  const dev = (v: number) => (Number.isFinite(v) ? `${ms1(v)} ms` : 'not reported');
  const parts = [
    'engine',
    ...(Number.isFinite(outputMs) ? ['output'] : []),
    ...(Number.isFinite(inputMs) ? ['input'] : []),
  ];
  const missing = [
    ...(Number.isFinite(outputMs) ? [] : ['output']),
    ...(Number.isFinite(inputMs) ? [] : ['input']),
  ];
  return {
    engineMs,
    outputMs,
    inputMs,
    totalMs,
    engine:
      r.heard > 0
        ? `Engine round trip ${ms1(engineMs)} ms (spread ${ms1(r.minMs)}–${ms1(r.maxMs)} ms over ${r.heard} click${r.heard === 1 ? '' : 's'})`
        : 'No click came back through the engine.',
    devices: `Devices: output ${dev(outputMs)}, input ${dev(inputMs)}`,
    total:
      `Total local I/O + engine: ${ms1(totalMs)} ms (${parts.join(' + ')}` +
      (missing.length === 2
        ? '; neither device reports its latency, so neither is included)'
        : missing.length === 1
          ? `; the ${missing[0]} device does not report its latency, so it is not included)`
          : ')'),
  };
}
