// Samples a session's per-peer figures once a second into a StatsHistory, and answers what the
// stats view shows: the live table rows (counts and percentages), the verdicts, the export.

import type { RoomSession, RoomView } from '../room/types';
import type { SessionCounters } from '../room/session';
import { StatsHistory } from './history';
import { verdict, type Verdict } from './verdict';
import { buildExport, type StageHistogram, type StatsExport } from './export';

/** What the collector needs of a session: its view and its counters. */
export interface StatsSource {
  readonly view: RoomView;
  counters(): SessionCounters;
  /** Per-stage histograms of a peer and the local ones, when the engine provides them. */
  latencyStages?(): { peers: Record<string, Record<string, StageHistogram>>; local: Record<string, StageHistogram> };
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
  latencyMs: number | null;
  driftPpm: number;
  jitterMs: number;
  verdict: Verdict;
}

export const SAMPLE_EVERY_MS = 1000;

export class StatsCollector {
  readonly history: StatsHistory;
  private timer: ReturnType<typeof setInterval> | null = null;
  private rows: PeerRow[] = [];
  private readonly listeners = new Set<(rows: PeerRow[]) => void>();

  constructor(
    private readonly source: StatsSource & Partial<Pick<RoomSession, 'subscribe'>>,
    private readonly now: () => number = Date.now,
  ) {
    this.history = new StatsHistory(now());
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

  /** Takes one sample of every participant (called every second; tests call it directly). */
  sample(): void {
    const view = this.source.view;
    const counters = this.source.counters();
    const at = this.now();
    const rows: PeerRow[] = [];
    for (const p of view.participants) {
      const c = counters.perPeer[p.peer];
      if (!c) continue;
      this.history.add(p.peer, p.name, at, {
        bufferMs: c.bufferedMs,
        targetMs: c.targetMs,
        latencyMs: p.latencyMs ?? NaN,
        rttMs: p.rttMs ?? NaN,
        received: c.received,
        lost: c.lost,
        late: c.late,
        concealed: c.concealed,
        discarded: c.discarded,
        underruns: c.underruns,
        driftPpm: c.driftPpm,
      });
      const samples = this.history.get(p.peer)!.samples;
      const avg = samples.reduce((a, s) => a + s.bufferMs, 0) / samples.length;
      const expected = c.received + c.lost;
      const pct = (n: number) => (expected > 0 ? (100 * n) / expected : 0);
      const recent = this.history.recent(p.peer, 60);
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
        latencyMs: p.latencyMs,
        driftPpm: c.driftPpm,
        jitterMs: c.jitterMs,
        verdict: verdict({
          oneWayMs: p.latencyMs,
          jitterMs: c.jitterMs,
          lossPct: recent.lossPct,
          underrunsPerMinute: recent.underruns,
          blockFrames: view.engine.blockFrames,
          bufferMode: 'adaptive',
        }),
      });
    }
    this.rows = rows;
    for (const fn of this.listeners) fn(rows);
  }

  /** Everything recorded so far, for the JSON and CSV export. */
  export(): StatsExport {
    const view = this.source.view;
    const stages = this.source.latencyStages?.() ?? { peers: {}, local: {} };
    return buildExport({
      room: view.room,
      startedAt: this.history.startedAt,
      now: this.now(),
      sampleRate: view.engine.sampleRate,
      blockFrames: view.engine.blockFrames,
      series: this.history.peers(),
      stages: (peer) => stages.peers[peer] ?? {},
      local: stages.local,
    });
  }
}
