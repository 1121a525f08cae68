// A session's stats as files: JSON (everything, nested) and CSV (one table: time-series rows and
// histogram rows, told apart by the first column), for a spreadsheet or a script.

import type { StageHistogram } from '../audio/latency';
import type { PeerSample, PeerSeries } from './history';

export type { StageHistogram };

export interface StatsExport {
  format: 'tutti-stats';
  version: 1;
  room: string;
  /** ISO 8601. */
  startedAt: string;
  exportedAt: string;
  sampleRate: number;
  blockFrames: number;
  peers: {
    peer: string;
    name: string;
    samples: PeerSample[];
    stages: Record<string, StageHistogram>;
  }[];
  /** Stages that are not per peer (capture). */
  local: Record<string, StageHistogram>;
}

export function buildExport(opts: {
  room: string;
  startedAt: number;
  now: number;
  sampleRate: number;
  blockFrames: number;
  series: PeerSeries[];
  stages: (peer: string) => Record<string, StageHistogram>;
  local: Record<string, StageHistogram>;
}): StatsExport {
  return {
    format: 'tutti-stats',
    version: 1,
    room: opts.room,
    startedAt: new Date(opts.startedAt).toISOString(),
    exportedAt: new Date(opts.now).toISOString(),
    sampleRate: opts.sampleRate,
    blockFrames: opts.blockFrames,
    peers: opts.series.map((s) => ({ peer: s.peer, name: s.name, samples: s.samples, stages: opts.stages(s.peer) })),
    local: opts.local,
  };
}

export function toJson(e: StatsExport): string {
  // NaN (a figure not measured) is not JSON: it becomes null.
  return JSON.stringify(e, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2);
}

const SERIES_FIELDS = [
  'bufferMs',
  'targetMs',
  'latencyMs',
  'rttMs',
  'received',
  'lost',
  'late',
  'concealed',
  'discarded',
  'underruns',
  'driftPpm',
] as const satisfies readonly (keyof PeerSample)[];

export const CSV_HEADER = [
  'record',
  'peer',
  'name',
  't_s',
  'buffer_ms',
  'target_ms',
  'latency_ms',
  'rtt_ms',
  'received',
  'lost',
  'late',
  'concealed',
  'discarded',
  'underruns',
  'drift_ppm',
  'stage',
  'bin_from_ms',
  'bin_to_ms',
  'count',
];

/** RFC 4180 quoting: names are user text (commas, quotes, newlines). */
function cell(v: string | number | null): string {
  if (v === null) return '';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : '';
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

/**
 * One CSV table: a `series` row per peer per sample (t_s .. drift_ppm filled) and a `histogram`
 * row per peer (or `local`) per stage per non-empty bin (stage .. count filled).
 */
export function toCsv(e: StatsExport): string {
  const rows: (string | number | null)[][] = [CSV_HEADER];
  const blankSeries = SERIES_FIELDS.map(() => null);
  for (const p of e.peers) {
    for (const s of p.samples) {
      rows.push(['series', p.peer, p.name, s.t, ...SERIES_FIELDS.map((f) => s[f]), null, null, null, null]);
    }
  }
  const hist = (peer: string, name: string, stages: Record<string, StageHistogram>) => {
    for (const [stage, h] of Object.entries(stages)) {
      h.counts.forEach((count, i) => {
        if (count > 0) rows.push(['histogram', peer, name, null, ...blankSeries, stage, h.edgesMs[i], h.edgesMs[i + 1], count]);
      });
    }
  };
  for (const p of e.peers) hist(p.peer, p.name, p.stages);
  hist('local', '', e.local);
  return rows.map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
}
