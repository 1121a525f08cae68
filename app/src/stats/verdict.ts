// A quality verdict per peer that a musician can read at a glance, from the figures that decide
// whether playing together works: one-way latency (mouth to ear), the jitter the buffer has to
// absorb, loss, and underruns (audible dropouts).
//
// Thresholds (written down here and in the README):
//   one-way latency   good ≤ 30 ms (people play in time)   fair ≤ 50 ms   poor above
//   jitter            good ≤ 10 ms                          fair ≤ 25 ms   poor above
//   loss              good < 0.5 %                          fair < 2 %     poor from 2 %
//   underruns         good: none in the last minute         fair ≤ 3       poor above
// The verdict is the worst of the four; each figure that is not good gives a reason and the
// usual fix as a hint.

export type Grade = 'good' | 'fair' | 'poor';

export interface QualityInput {
  /** Estimated one-way mouth-to-ear latency, ms (null: not measured yet): the engine's
   * mouthToEar stage's p50 where it has one (stats/collector.ts, store/history.ts). */
  oneWayMs: number | null;
  /** Arrival jitter the buffer absorbs, ms. */
  jitterMs: number;
  /** Packets lost of those expected, percent (over the recent window). */
  lossPct: number;
  /** Underruns in the last minute. */
  underrunsPerMinute: number;
  /** Block size in frames, for the hints. */
  blockFrames: number;
  /** The jitter-buffer mode, for the hints. */
  bufferMode: 'adaptive' | 'fixed';
}

export interface Verdict {
  grade: Grade;
  /** What is not good, in words. */
  reasons: string[];
  /** What usually helps. */
  hints: string[];
}

export const THRESHOLDS = {
  oneWayMs: { good: 30, fair: 50 },
  jitterMs: { good: 10, fair: 25 },
  lossPct: { good: 0.5, fair: 2 },
  underrunsPerMinute: { good: 0, fair: 3 },
} as const;

const RANK: Record<Grade, number> = { good: 0, fair: 1, poor: 2 };
const WIRED = 'Use a wired network connection (Wi-Fi adds jitter).';

function grade(value: number, t: { good: number; fair: number }, strictGood = false): Grade {
  if (strictGood ? value < t.good : value <= t.good) return 'good';
  return (strictGood ? value < t.fair : value <= t.fair) ? 'fair' : 'poor';
}

export function verdict(q: QualityInput): Verdict {
  const reasons: string[] = [];
  const hints = new Set<string>();
  let worst: Grade = 'good';
  const note = (g: Grade, reason: string, ...fixes: string[]) => {
    if (g === 'good') return;
    if (RANK[g] > RANK[worst]) worst = g;
    reasons.push(reason);
    for (const f of fixes) hints.add(f);
  };
  if (q.oneWayMs !== null && Number.isFinite(q.oneWayMs)) {
    note(
      grade(q.oneWayMs, THRESHOLDS.oneWayMs),
      `latency ${q.oneWayMs.toFixed(0)} ms one way (in time up to ${THRESHOLDS.oneWayMs.good} ms)`,
      ...(q.blockFrames > 64 ? ['Try a smaller block size.'] : []),
      WIRED,
    );
  }
  note(
    grade(q.jitterMs, THRESHOLDS.jitterMs),
    `jitter ${q.jitterMs.toFixed(1)} ms`,
    WIRED,
  );
  note(
    grade(q.lossPct, THRESHOLDS.lossPct, true),
    `${q.lossPct.toFixed(1)} % of packets lost`,
    WIRED,
    'Close other uploads and downloads.',
  );
  note(
    grade(q.underrunsPerMinute, THRESHOLDS.underrunsPerMinute),
    `${q.underrunsPerMinute} dropout${q.underrunsPerMinute === 1 ? '' : 's'} in the last minute`,
    q.bufferMode === 'fixed' ? 'Use a larger fixed buffer, or the adaptive buffer.' : 'Close other programs that use the CPU.',
  );
  return { grade: worst, reasons, hints: [...hints] };
}
