// Samples a session's per-peer figures once a second into a StatsTimeline, and answers what the
// live stats table shows: the rows (counts and percentages) and their verdicts, and the export.
// The latency path's figures are in stages.ts and the round-trip probe's in probe-view.ts; this
// module re-exports both, so the view imports everything from here.

import type { RoomSession, RoomView } from '../room/types';
import type { SessionCounters } from '../room/session';
import { StatsTimeline } from './timeline';
import { verdict, type Verdict } from './verdict';
import { buildExport, type StatsExport } from './export';
import { blockMsOf, NO_STAGES, type LatencyStages } from './stages';

export * from './stages';
export * from './probe-view';

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
