// The stats panel's pure parts: how a figure is written, the plots' columns drawn from the
// history, a latency histogram's bars, a probe's outcome. Figures are written with scale's
// formatMs, re-exported here as fmt: the panel writes ppm and percentages with it too.
import type { ProbeResult } from '../room/session';
import type { ProbePhase } from '../stats/collector';
import type { StageHistogram } from '../stats/export';
import type { PeerSample, PeerSeries } from '../stats/timeline';

export { formatMs as fmt } from './scale';

/**
 * [t, one column per peer] for uPlot: every second any peer has a sample for, in order, and
 * NaN where a peer has none. `pick` sees each sample and the one before it (null for the first).
 */
export function series(
  peers: readonly PeerSeries[],
  pick: (s: PeerSample, prev: PeerSample | null) => number,
): { names: string[]; data: number[][] } {
  const ts = new Set<number>();
  for (const p of peers) for (const s of p.samples) ts.add(Math.round(s.t));
  const times = [...ts].sort((a, b) => a - b);
  const data: number[][] = [times];
  for (const p of peers) {
    const byT = new Map<number, number>();
    p.samples.forEach((s, i) => byT.set(Math.round(s.t), pick(s, i > 0 ? p.samples[i - 1] : null)));
    data.push(times.map((t) => byT.get(t) ?? NaN));
  }
  return { names: peers.map((p) => p.name), data };
}

/** The share of packets lost between two samples, in percent (0 for the first sample). */
export function lossPct(s: PeerSample, prev: PeerSample | null): number {
  if (!prev) return 0;
  const lost = s.lost - prev.lost;
  const expected = lost + (s.received - prev.received);
  return expected > 0 ? (100 * Math.max(0, lost)) / expected : 0;
}

/** Bars for the bins that hold anything, with their range; the tallest bar is 1. */
export function bars(h: StageHistogram): { from: number; to: number; frac: number }[] {
  const first = h.counts.findIndex((c) => c > 0);
  if (first < 0) return [];
  let last = h.counts.length - 1;
  while (last > first && h.counts[last] === 0) last--;
  const peak = Math.max(...h.counts);
  const out = [];
  for (let i = first; i <= last; i++)
    out.push({ from: h.edgesMs[i], to: h.edgesMs[i + 1], frac: h.counts[i] / peak });
  return out;
}

/** How the last round-trip probe to a participant ended. */
export interface ProbeOutcome {
  phase: ProbePhase;
  result: ProbeResult | null;
}
