// A quality verdict per peer that a musician can read at a glance, from the figures that decide
// whether playing together works: one-way latency (mouth to ear), the jitter the buffer has to
// absorb, loss, and underruns (audible dropouts).
//
// Thresholds (written down here and in the README):
//   one-way latency   good ≤ 30 ms (people play in time)   fair ≤ 50 ms   poor above
//   jitter            good ≤ 10 ms                          fair ≤ 25 ms   poor above
//   loss              good < 0.5 %                          fair < 2 %     poor from 2 %
//   underruns         good: none in the last minute         fair ≤ 3       poor above
// The verdict is the worst of the four; each figure that is not good gives a reason and a hint
// for the cause that was measured, not a guess: jitter that the network stage does not show is
// this computer's (its audio callbacks, a busy CPU), not the Wi-Fi's; dropouts are split into
// late packets (the path), stalls of this machine, the participant's own device missing audio
// callbacks (heard by everyone at once), and ours.

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
  /** The network's own jitter, ms: the one-way stage's p95 − p50 (null: not measured, e.g. the
   * clock offset is not known yet). Optional: older records have none. */
  networkJitterMs?: number | null;
  /** Dropout causes in the last minute (optional: older records have none). */
  causes?: { late: number; stall: number; senderGaps: number; ownGaps: number };
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
const CPU =
  'Close other programs and browser tabs that use the CPU: this computer hands audio over in bursts.';
const THEIR_DEVICE =
  'Their computer missed audio callbacks (everyone hears it): they should close other programs, or use a larger block size.';
const OUR_DEVICE = 'This computer missed audio callbacks: close other programs, or use a larger block size.';

/** Whether the jitter the buffer absorbs is mostly the network's: unknown counts as yes. */
function networkJitter(q: QualityInput): boolean {
  const n = q.networkJitterMs;
  return n === undefined || n === null || !Number.isFinite(n) || n >= q.jitterMs / 2;
}

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
  const fromNetwork = networkJitter(q);
  if (q.oneWayMs !== null && Number.isFinite(q.oneWayMs)) {
    note(
      grade(q.oneWayMs, THRESHOLDS.oneWayMs),
      `latency ${q.oneWayMs.toFixed(0)} ms one way (in time up to ${THRESHOLDS.oneWayMs.good} ms)`,
      ...(q.blockFrames > 64 ? ['Try a smaller block size.'] : []),
      fromNetwork ? WIRED : CPU,
    );
  }
  note(
    grade(q.jitterMs, THRESHOLDS.jitterMs),
    fromNetwork
      ? `jitter ${q.jitterMs.toFixed(1)} ms`
      : `jitter ${q.jitterMs.toFixed(1)} ms, mostly from this computer (the network's: ${(q.networkJitterMs ?? 0).toFixed(1)} ms)`,
    fromNetwork ? WIRED : CPU,
  );
  note(
    grade(q.lossPct, THRESHOLDS.lossPct, true),
    `${q.lossPct.toFixed(1)} % of packets lost`,
    WIRED,
    'Close other uploads and downloads.',
  );
  // Dropouts: underruns here, plus the participant's own device gaps (a hole in what they
  // sent, heard by everyone, whether or not our buffer ran dry for it). A gap usually makes its
  // packets late here too: those late underruns are the gap's, not the path's.
  const c = q.causes;
  const parts: string[] = [];
  const fixes: string[] = [];
  let n = q.underrunsPerMinute;
  if (c) {
    const lateOnly = Math.max(0, c.late - c.senderGaps);
    const ours = c.stall + c.ownGaps;
    const other = Math.max(0, q.underrunsPerMinute - c.late - c.stall);
    n = c.senderGaps + ours + lateOnly + other;
    if (c.senderGaps > 0) {
      parts.push(`${c.senderGaps} from their device`);
      fixes.push(THEIR_DEVICE);
    }
    if (ours > 0) {
      parts.push(`${ours} from this computer`);
      fixes.push(c.ownGaps > 0 ? OUR_DEVICE : CPU);
    }
    if (lateOnly > 0) {
      parts.push(`${lateOnly} from late packets`);
      fixes.push(fromNetwork ? WIRED : CPU);
    }
    if (other > 0) parts.push(`${other} while packets were lost`);
  }
  if (fixes.length === 0 || q.bufferMode === 'fixed') {
    fixes.push(
      q.bufferMode === 'fixed'
        ? 'Use a larger fixed buffer, or the adaptive buffer.'
        : 'Close other programs that use the CPU.',
    );
  }
  note(
    grade(n, THRESHOLDS.underrunsPerMinute),
    `${n} dropout${n === 1 ? '' : 's'} in the last minute${parts.length > 0 ? ` (${parts.join(', ')})` : ''}`,
    ...fixes,
  );
  return { grade: worst, reasons, hints: [...hints] };
}
