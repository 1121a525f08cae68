// A page's engine and pump counters (`Session.counters()`), and what changed between two reads
// of them: the soaks judge an interval, not the session so far.

/** Counters that only grow: their change over an interval is what happened in it. */
const GROWING = [
  'received',
  'lost',
  'late',
  'concealed',
  'underruns',
  'lateUnderruns',
  'stallUnderruns',
  'txPackets',
  'txSkipped',
];

/** @param {import('playwright-core').Page} page */
export function pageCounters(page) {
  return page.evaluate(() => window.tutti.session.counters());
}

/**
 * What changed on one page between `before` and `after` (two `pageCounters` reads): its own
 * underruns and quanta, and per peer present at the end, the growing counters' change (a peer
 * new in the interval counts from 0) beside the gauges as they read at the end (buffer, target,
 * longest gap, send queue).
 */
export function counterDelta(before, after) {
  const peers = Object.entries(after.perPeer).map(([peer, p]) => {
    const q = before.perPeer[peer] ?? {};
    const row = { peer };
    for (const k of GROWING) row[k] = (p[k] ?? 0) - (q[k] ?? 0);
    for (const k of ['bufferedMs', 'targetMs', 'gapMaxMs', 'gapsOver20Ms', 'sendBufferedBytes'])
      row[k] = p[k] ?? 0;
    return row;
  });
  return { underruns: after.underruns - before.underruns, quanta: after.quanta - before.quanta, peers };
}
