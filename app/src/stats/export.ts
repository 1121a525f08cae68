// A session's stats as files: JSON (everything, nested) and CSV (one table: time-series rows,
// per-stage summaries, histogram bins and the devices' latency, told apart by the first column),
// for a spreadsheet or a script. Stages go out by name, whatever the engine names them.

import type { StageHistogram } from '../audio/latency';
import type { PeerSample, PeerSeries } from './timeline';

export type { StageHistogram };

/** The devices' latency as the host reports it, ms (NaN: not reported). */
export interface DeviceLatency {
  /** The audio context's base + output latency. */
  outputMs: number;
  /** The microphone track's reported latency. */
  inputMs: number;
}

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
  /** The devices' latency at export (null in JSON: not reported). */
  devices: DeviceLatency;
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
  devices?: DeviceLatency;
}): StatsExport {
  return {
    format: 'tutti-stats',
    version: 1,
    room: opts.room,
    startedAt: new Date(opts.startedAt).toISOString(),
    exportedAt: new Date(opts.now).toISOString(),
    sampleRate: opts.sampleRate,
    blockFrames: opts.blockFrames,
    peers: opts.series.map((s) => ({
      peer: s.peer,
      name: s.name,
      samples: s.samples,
      stages: opts.stages(s.peer),
    })),
    local: opts.local,
    devices: opts.devices ?? { outputMs: NaN, inputMs: NaN },
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

/** A series field's CSV column: its name in snake case with the unit last (bufferMs: buffer_ms). */
const seriesColumn = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const SERIES_COLUMNS = SERIES_FIELDS.map(seriesColumn);

export const CSV_HEADER = [
  'record',
  'peer',
  'name',
  't_s',
  ...SERIES_COLUMNS,
  'stage',
  'bin_from_ms',
  'bin_to_ms',
  'count',
  'p50_ms',
  'p95_ms',
  'p99_ms',
  'max_ms',
  'min_ms',
  'mean_ms',
  'rejected',
  'value_ms',
];

/** RFC 4180 quoting: names are user text (commas, quotes, newlines). */
function cell(v: string | number | null): string {
  if (v === null) return '';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : '';
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

/**
 * One CSV table, every row with every column:
 * - `series`: a row per peer per sample (t_s .. drift_ppm filled);
 * - `stage`: a row per peer (or `local`) per stage, empty ones included (stage, count = values
 *   recorded, p50_ms .. rejected filled);
 * - `histogram`: a row per peer (or `local`) per stage per non-empty bin (stage .. count filled);
 * - `device`: the devices' latency, peer `local`, stage `output` or `input` (value_ms; empty when
 *   not reported).
 */
export function toCsv(e: StatsExport): string {
  type Cell = string | number | null;
  const rows: Cell[][] = [CSV_HEADER];
  /** A row from its record, peer and name and the other cells by column name. */
  const row = (record: string, peer: string, name: string, cells: Record<string, Cell>) => {
    for (const k of Object.keys(cells)) if (!CSV_HEADER.includes(k)) throw new Error(`no CSV column ${k}`);
    rows.push([record, peer, name, ...CSV_HEADER.slice(3).map((c) => cells[c] ?? null)]);
  };
  for (const p of e.peers) {
    for (const s of p.samples) {
      row(
        'series',
        p.peer,
        p.name,
        Object.fromEntries([['t_s', s.t], ...SERIES_FIELDS.map((f, i) => [SERIES_COLUMNS[i], s[f]])]),
      );
    }
  }
  const hist = (peer: string, name: string, stages: Record<string, StageHistogram>) => {
    for (const [stage, h] of Object.entries(stages)) {
      // The engine reports 0 for the quantiles of an empty histogram: nothing measured.
      const q = (v: number) => (h.count > 0 ? v : null);
      row('stage', peer, name, {
        stage,
        count: h.count,
        p50_ms: q(h.p50),
        p95_ms: q(h.p95),
        p99_ms: q(h.p99),
        max_ms: q(h.max),
        min_ms: q(h.min),
        mean_ms: q(h.mean),
        rejected: h.rejected,
      });
    }
    for (const [stage, h] of Object.entries(stages)) {
      h.counts.forEach((count, i) => {
        if (count > 0)
          row('histogram', peer, name, {
            stage,
            bin_from_ms: h.edgesMs[i],
            bin_to_ms: h.edgesMs[i + 1],
            count,
          });
      });
    }
  };
  for (const p of e.peers) hist(p.peer, p.name, p.stages);
  hist('local', '', e.local);
  const devices = e.devices ?? { outputMs: NaN, inputMs: NaN };
  row('device', 'local', '', { stage: 'output', value_ms: devices.outputMs });
  row('device', 'local', '', { stage: 'input', value_ms: devices.inputMs });
  return rows.map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
}
