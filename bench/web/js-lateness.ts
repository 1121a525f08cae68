// Lateness estimation of the plain-JavaScript jitter buffer (js-jitter.ts), following
// core/src/jitter/lateness.rs: how late packets arrive against their own ideal times, and the
// depth that covers it.
//
// Every packet that arrives (in time or late, and not excused by a local stall) gives a lateness
// L = now − e(seq); a packet that never arrives gives nothing, so loss cannot raise the depth, and
// nothing is learnt from underruns. Statistics are kept per one-second window: its minimum and its
// 64 largest values, so its 95th percentile is exact and O(1) to keep. When a window closes it
// leaves its absolute 95th percentile (`pastP95`), its spread above its own minimum, its minimum
// and, when its largest lateness stood well above its spread (a stall, a heavy tail), that peak.
//
// - The drift trend `slope` is the median step between consecutive window minima (a delay step
//   moves one of them and not the median), clamped to ±1000 ppm of a window.
// - jitter() = the largest of the current window's percentile and the five past ones carried
//   forward by the trend (p95 + slope · age), minus the recent minimum (current and previous
//   window); at least the spreads of windows closed before a rebase (`pastSpreadMax`, whose
//   absolute percentiles are meaningless after it) and the peak floor: the second largest peak of
//   the last minute plus an eighth of headroom.
//
// Integers throughout (as the i64 of the Rust); i64::MAX / i64::MIN sentinels are ±Infinity.
// Real-time safe: typed arrays made up front, O(1) per sample, O(PEAK_WINDOWS) once a second.

/** Windows of the jitter estimate kept besides the current one. */
const PAST_WINDOWS = 5;
/** Windows over which a window's peak lateness is remembered (~1 min). */
const PEAK_WINDOWS = 60;
/** A window's peak counts when it exceeds the window's spread by a quarter of it plus this. */
const PEAK_EXCESS = 128;
/** Largest lateness values kept per window (for the percentile). */
const TOP = 64;
/** Outliers ignored per window: one per this many packets (the 95th percentile). */
const PERCENTILE_DIVISOR = 20;
/** Largest values always ignored per window. */
const MIN_IGNORED = 2;

/** Index in `top` of the 95th percentile of `count` values (count > 0). */
function rank(count: number): number {
  const k = Math.floor(count / PERCENTILE_DIVISOR);
  const c = k < MIN_IGNORED ? MIN_IGNORED : k > TOP - 1 ? TOP - 1 : k;
  return c < count - 1 ? c : count - 1;
}

/** Windowed lateness statistics: the current window and what the last few left. */
export class Lateness {
  // The current window.
  curCount = 0;
  curMin = Infinity;
  /** 95th percentile minus minimum, kept up to date by add and lowerMin. */
  curSpread = 0;
  /** curTop[TOP - 1]: the smallest of the largest values. */
  curFloor = -Infinity;
  /** Largest values, descending. */
  readonly curTop = new Float64Array(TOP).fill(-Infinity);
  /** Local time at which the current window began. */
  winStart = 0;
  winStarted = false;
  /** Window length, local frames. */
  len = 48000;
  /** Index of the most recently closed window. */
  last = 0;
  /** pastMin[last]: the minimum of the previous window. The recent minimum, the reference of
   * the fill, is the smaller of curMin and prevMin (Infinity: none). */
  prevMin = Infinity;
  /** Largest spread of the windows closed before the last rebase. */
  pastSpreadMax = 0;
  /** Trend of the window minima, local frames per window. */
  slope = 0;
  /** The second largest stall peak of the last minute plus an eighth (0 if fewer than two). */
  peakFloor = 0;
  peakAt = 0;
  readonly pastSpread = new Float64Array(PAST_WINDOWS);
  readonly pastMin = new Float64Array(PAST_WINDOWS).fill(Infinity);
  /** Per window: its 95th percentile (absolute; −Infinity: before a rebase, or empty). */
  readonly pastP95 = new Float64Array(PAST_WINDOWS).fill(-Infinity);
  /** Per window (ring): its peak above its minimum when that stood well above its spread. */
  readonly peaks = new Float64Array(PEAK_WINDOWS);
  /** Scratch for the trend's median. */
  private readonly steps = new Float64Array(PAST_WINDOWS);

  private add(l: number): void {
    const before = this.curCount;
    this.curCount = before + 1;
    const k = rank(this.curCount);
    let moved = l < this.curMin || before === 0 || rank(before) !== k;
    if (l < this.curMin) this.curMin = l;
    if (l > this.curFloor) {
      const top = this.curTop;
      let i = before < TOP - 1 ? before : TOP - 1;
      while (i > 0 && top[i - 1] < l) {
        top[i] = top[i - 1];
        i--;
      }
      top[i] = l;
      this.curFloor = top[TOP - 1];
      if (i <= k) moved = true;
    }
    if (moved) {
      const s = this.curTop[k] - this.curMin;
      this.curSpread = s > 0 ? s : 0;
    }
  }

  /** A value that lowers the minimum without entering the percentile. */
  private lowerMin(l: number): void {
    if (l < this.curMin) {
      this.curMin = l;
      if (this.curCount > 0) {
        const s = this.curTop[rank(this.curCount)] - this.curMin;
        this.curSpread = s > 0 ? s : 0;
      }
    }
  }

  private close(): void {
    const top0 = this.curTop[0];
    let peak = 0;
    if (this.curCount > 0 && top0 !== -Infinity) {
      const p = top0 - this.curMin;
      peak = p > 0 ? p : 0;
    }
    const spread = this.curSpread;
    const stall = peak > spread + Math.trunc(spread / 4) + PEAK_EXCESS;
    this.peakAt = (this.peakAt + 1) % PEAK_WINDOWS;
    this.peaks[this.peakAt] = stall ? peak : 0;
    let first = 0;
    let second = 0;
    for (let i = 0; i < PEAK_WINDOWS; i++) {
      const p = this.peaks[i];
      if (p > first) {
        second = first;
        first = p;
      } else if (p > second) {
        second = p;
      }
    }
    // An eighth of headroom: the next stall is rarely the same length as the last two.
    this.peakFloor = second + Math.trunc(second / 8);
    this.last = (this.last + 1) % PAST_WINDOWS;
    const empty = this.curCount === 0;
    this.pastSpread[this.last] = empty ? 0 : spread;
    this.pastMin[this.last] = this.curMin;
    this.pastP95[this.last] = empty ? -Infinity : this.curMin + spread;
    this.prevMin = this.curMin;
    let s = 0;
    for (let i = 0; i < PAST_WINDOWS; i++) {
      if (this.pastP95[i] === -Infinity && this.pastSpread[i] > s) s = this.pastSpread[i];
    }
    this.pastSpreadMax = s;
    this.slope = this.trend();
    this.resetCur();
  }

  /** The drift of lateness per window: the median step between consecutive window minima, at
   * most 1000 ppm of a window. */
  private trend(): number {
    const steps = this.steps;
    let n = 0;
    for (let j = 0; j < PAST_WINDOWS - 1; j++) {
      const newer = this.pastMin[(this.last + PAST_WINDOWS - j) % PAST_WINDOWS];
      const older = this.pastMin[(this.last + PAST_WINDOWS - j - 1) % PAST_WINDOWS];
      if (newer !== Infinity && older !== Infinity) {
        // Insertion sort as the steps come (at most four).
        const v = newer - older;
        let i = n++;
        while (i > 0 && steps[i - 1] > v) {
          steps[i] = steps[i - 1];
          i--;
        }
        steps[i] = v;
      }
    }
    if (n < 2) return 0;
    const median = Math.trunc((steps[(n - 1) >> 1] + steps[n >> 1]) / 2);
    const max = Math.trunc(this.len / 1000);
    return median < -max ? -max : median > max ? max : median;
  }

  private resetCur(): void {
    this.curCount = 0;
    this.curMin = Infinity;
    this.curSpread = 0;
    this.curFloor = -Infinity;
    this.curTop.fill(-Infinity);
  }

  /** Closes the windows that ended before `now` (window length `len` local frames). */
  roll(now: number, len: number): void {
    this.len = len > 1 ? len : 1;
    if (!this.winStarted) {
      this.winStarted = true;
      this.winStart = now;
      return;
    }
    let closed = 0;
    while (now >= this.winStart + len && closed <= PAST_WINDOWS) {
      this.close();
      this.winStart += len;
      closed++;
    }
    // A long pause, or time went backwards: start afresh from here.
    if (now >= this.winStart + len || now < this.winStart) this.winStart = now;
  }

  /** The lateness reference changed: old minima and percentiles are meaningless, spreads stay. */
  rebase(): void {
    if (this.curCount > 0) this.close();
    this.resetCur();
    this.pastMin.fill(Infinity);
    this.pastP95.fill(-Infinity);
    let s = 0;
    for (let i = 0; i < PAST_WINDOWS; i++) if (this.pastSpread[i] > s) s = this.pastSpread[i];
    this.pastSpreadMax = s;
    this.prevMin = Infinity;
    this.slope = 0;
  }

  /** Adds a sample: to the minimum always, to the percentile unless it lies more than `cutoff`
   * above the recent minimum. Ignores absurd values (a host whose time jumped). */
  addChecked(l: number, cutoff: number): void {
    if (!(Math.abs(l) < 2 ** 40)) return;
    const m = this.curMin < this.prevMin ? this.curMin : this.prevMin;
    if (m !== Infinity && l - m > cutoff) this.lowerMin(l);
    else this.add(l);
  }

  /** The depth, above the recent minimum, that covers the lateness of the last few windows
   * (absolute percentiles carried forward by the drift trend) and the recurring peaks. */
  jitter(): number {
    const base = this.curMin < this.prevMin ? this.curMin : this.prevMin;
    let floor = this.pastSpreadMax > this.peakFloor ? this.pastSpreadMax : this.peakFloor;
    if (base === Infinity) return floor;
    let need = this.curCount > 0 ? this.curMin + this.curSpread : -Infinity;
    for (let age = 1; age <= PAST_WINDOWS; age++) {
      const p = this.pastP95[(this.last + PAST_WINDOWS + 1 - age) % PAST_WINDOWS];
      if (p !== -Infinity) {
        const carried = p + this.slope * age;
        if (carried > need) need = carried;
      }
    }
    const body = need === -Infinity ? 0 : need - base;
    if (body > floor) floor = body;
    return floor > 0 ? floor : 0;
  }

  /** Forgets everything (a new stream format or peer). */
  forget(): void {
    this.resetCur();
    this.winStart = 0;
    this.winStarted = false;
    this.len = 48000;
    this.last = 0;
    this.prevMin = Infinity;
    this.pastSpreadMax = 0;
    this.slope = 0;
    this.peakFloor = 0;
    this.peakAt = 0;
    this.pastSpread.fill(0);
    this.pastMin.fill(Infinity);
    this.pastP95.fill(-Infinity);
    this.peaks.fill(0);
  }
}
