//! Lateness estimation: how late packets arrive against their own ideal times, and the depth
//! that covers it.
//!
//! Every packet that arrives (in time or late) gives a lateness `L = now − e(seq)` (see the
//! parent module); a packet that never arrives gives nothing, so loss cannot raise the depth.
//! Statistics are kept per window of one second:
//!
//! - the window's minimum and its 64 largest values, so its **spread** (95th percentile minus
//!   minimum, at least the two largest values ignored) is exact and O(1) to keep;
//! - the **jitter** estimate is the largest spread of the current window and the five before
//!   it: it rises with the first window whose percentile does and falls about six seconds
//!   after the path calms. Minima are per window, so a slow drift of `L` never inflates it.
//! - **peaks**: a window whose largest lateness stands well above its spread (by a quarter of
//!   it plus a quantum) records that peak: a stall, or the tail of a heavy-tailed path. Once two
//!   such peaks fall within a minute, the estimate covers the smaller of the two largest for as
//!   long as both stay within the minute. A lone stall is concealed; stalls and tails that recur
//!   are covered before they cost a glitch each, and a minute after they stop the depth is back.
//!
//! Nothing here is fed by underruns: the depth an underrun waited its way to measures the gap
//! (loss) as much as anyone's lateness, and a buffer that learnt from it climbed with every run
//! of losses. A late packet's own lateness is what raises the estimate.
//!
//! Real-time safe: fixed-size arrays, O(1) per sample (O(`PEAK_WINDOWS`) once a second).

/// Windows of the jitter estimate kept besides the current one.
const PAST_WINDOWS: usize = 5;
/// Windows over which a window's peak lateness is remembered (~1 min).
const PEAK_WINDOWS: usize = 60;
/// A window's peak counts when it exceeds the window's spread by a quarter of it plus this many
/// local frames (one 48 kHz quantum).
const PEAK_EXCESS: i64 = 128;
/// Windows the oracle looks back over (two minutes).
const ORACLE_WINDOWS: usize = 120;
/// Largest lateness values kept per window (for the percentile).
const TOP: usize = 64;
/// Outliers ignored per window: one per this many packets (the 95th percentile).
const PERCENTILE_DIVISOR: u32 = 20;
/// Largest values always ignored per window (one or two stragglers never move the estimate).
const MIN_IGNORED: usize = 2;

/// One second of lateness statistics.
///
/// The fields a typical push reads and writes come first (`repr(C)`), so that it touches one
/// cache line of the window: a value that neither lowers the minimum nor enters the largest
/// values nor moves the percentile's rank leaves `spread` as it is.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub(super) struct Window {
    min: i64,
    /// 95th percentile minus minimum, kept up to date by `add` and `lower_min`.
    spread: i64,
    /// `top[TOP - 1]`: the smallest of the largest values.
    floor: i64,
    count: u32,
    /// Largest values, descending.
    top: [i64; TOP],
}

impl Window {
    const EMPTY: Window = Window {
        min: i64::MAX,
        spread: 0,
        floor: i64::MIN,
        count: 0,
        top: [i64::MIN; TOP],
    };

    /// Index in `top` of the 95th percentile of `count` values (`count > 0`).
    fn rank(count: u32) -> usize {
        ((count / PERCENTILE_DIVISOR) as usize)
            .clamp(MIN_IGNORED, TOP - 1)
            .min(count as usize - 1)
    }

    fn add(&mut self, l: i64) {
        let before = self.count;
        self.count = self.count.saturating_add(1);
        let k = Self::rank(self.count);
        let mut moved = l < self.min || before == 0 || Self::rank(before) != k;
        self.min = self.min.min(l);
        if l > self.floor {
            // Entries from index `count` on are still i64::MIN: the insertion starts there.
            let mut i = (before as usize).min(TOP - 1);
            while i > 0 && self.top[i - 1] < l {
                self.top[i] = self.top[i - 1];
                i -= 1;
            }
            self.top[i] = l;
            self.floor = self.top[TOP - 1];
            moved |= i <= k;
        }
        if moved {
            self.spread = self.top[k].saturating_sub(self.min).max(0);
        }
    }

    /// A value that lowers the minimum without entering the percentile.
    fn lower_min(&mut self, l: i64) {
        if l < self.min {
            self.min = l;
            if self.count > 0 {
                let k = Self::rank(self.count);
                self.spread = self.top[k].saturating_sub(self.min).max(0);
            }
        }
    }
}

/// Windowed lateness statistics: the current window and the spreads and minima of the last few.
///
/// `repr(C)`: what every push reads (the scalars, then the head of `cur`) comes first.
#[derive(Clone, Debug)]
#[repr(C)]
pub(super) struct Lateness {
    /// Local time at which the current window began.
    start: u64,
    started: bool,
    /// Index of the most recently closed window.
    last: usize,
    /// `past_min[last]`: the minimum of the previous window.
    prev_min: i64,
    /// Largest of `past_spread` over the windows closed before the last rebase (whose
    /// absolute percentiles are meaningless now; updated when a window closes).
    past_spread_max: i64,
    /// Trend of the window minima, local frames per window (clock drift; see `close`).
    slope: i64,
    /// Window length, local frames.
    len: u64,
    /// The second largest stall peak of the last PEAK_WINDOWS windows (0 if fewer than two).
    peak_floor: i64,
    /// Index in `peaks` of the most recently closed window.
    peak_at: usize,
    cur: Window,
    past_spread: [i64; PAST_WINDOWS],
    past_min: [i64; PAST_WINDOWS],
    /// Per window: its 95th percentile of lateness (absolute; `i64::MIN`: from before a
    /// rebase, or empty).
    past_p95: [i64; PAST_WINDOWS],
    /// Per window (ring, PEAK_WINDOWS long): its peak lateness above its minimum when that
    /// stood well above its spread (a stall), else 0.
    peaks: [i64; PEAK_WINDOWS],
    /// Per window (ring, ORACLE_WINDOWS long, the latest at `oracle_at`; see `oracle`): its
    /// smallest and largest lateness (`i64::MAX`/`i64::MIN` when empty or before a rebase).
    oracle_min: [i64; ORACLE_WINDOWS],
    oracle_max: [i64; ORACLE_WINDOWS],
    oracle_at: usize,
}

impl Lateness {
    pub(super) fn new() -> Self {
        Lateness {
            cur: Window::EMPTY,
            start: 0,
            started: false,
            past_spread: [0; PAST_WINDOWS],
            past_min: [i64::MAX; PAST_WINDOWS],
            prev_min: i64::MAX,
            past_spread_max: 0,
            slope: 0,
            len: 48_000,
            past_p95: [i64::MIN; PAST_WINDOWS],
            peak_floor: 0,
            peak_at: 0,
            peaks: [0; PEAK_WINDOWS],
            oracle_min: [i64::MAX; ORACLE_WINDOWS],
            oracle_max: [i64::MIN; ORACLE_WINDOWS],
            oracle_at: 0,
            last: 0,
        }
    }

    fn close(&mut self) {
        let w = &self.cur;
        let peak = if w.count > 0 && w.top[0] != i64::MIN {
            w.top[0].saturating_sub(w.min).max(0)
        } else {
            0
        };
        let stall = peak > w.spread + w.spread / 4 + PEAK_EXCESS;
        self.peak_at = (self.peak_at + 1) % PEAK_WINDOWS;
        self.peaks[self.peak_at] = if stall { peak } else { 0 };
        let (mut first, mut second) = (0, 0);
        for &p in &self.peaks {
            if p > first {
                second = first;
                first = p;
            } else if p > second {
                second = p;
            }
        }
        // An eighth of headroom: the next stall is rarely the same length as the last two.
        self.peak_floor = second + second / 8;
        self.last = (self.last + 1) % PAST_WINDOWS;
        let empty = self.cur.count == 0;
        self.past_spread[self.last] = if empty { 0 } else { self.cur.spread };
        self.past_min[self.last] = self.cur.min;
        self.past_p95[self.last] = if empty {
            i64::MIN
        } else {
            self.cur.min.saturating_add(self.cur.spread)
        };
        self.prev_min = self.cur.min;
        self.past_spread_max = (0..PAST_WINDOWS)
            .filter(|&i| self.past_p95[i] == i64::MIN)
            .map(|i| self.past_spread[i])
            .max()
            .unwrap_or(0);
        self.slope = self.trend();
        self.oracle_at = (self.oracle_at + 1) % ORACLE_WINDOWS;
        self.oracle_min[self.oracle_at] = self.cur.min;
        self.oracle_max[self.oracle_at] = self.cur.top[0];
        self.cur = Window::EMPTY;
    }

    /// The drift of lateness per window: the median step between consecutive window minima
    /// (a delay step moves one of them and not the median), at most 1000 ppm of a window.
    fn trend(&self) -> i64 {
        let mut steps = [0i64; PAST_WINDOWS];
        let mut n = 0;
        for j in 0..PAST_WINDOWS - 1 {
            let newer = self.past_min[(self.last + PAST_WINDOWS - j) % PAST_WINDOWS];
            let older = self.past_min[(self.last + PAST_WINDOWS - j - 1) % PAST_WINDOWS];
            if newer != i64::MAX && older != i64::MAX {
                steps[n] = newer - older;
                n += 1;
            }
        }
        if n < 2 {
            return 0;
        }
        let steps = &mut steps[..n];
        steps.sort_unstable();
        let median = (steps[(n - 1) / 2] + steps[n / 2]) / 2;
        let max = (self.len / 1000) as i64;
        median.clamp(-max, max)
    }

    /// Closes the windows that ended before `now` (window length `len` local frames).
    pub(super) fn roll(&mut self, now: u64, len: u64) {
        self.len = len.max(1);
        if !self.started {
            self.started = true;
            self.start = now;
            return;
        }
        let mut closed = 0;
        while now >= self.start.saturating_add(len) && closed <= PAST_WINDOWS {
            self.close();
            self.start = self.start.saturating_add(len);
            closed += 1;
        }
        if now >= self.start.saturating_add(len) || now < self.start {
            // A long pause, or time went backwards: start afresh from here.
            self.start = now;
        }
    }

    /// The lateness reference changed: old minima are meaningless, spreads stay.
    pub(super) fn rebase(&mut self) {
        if self.cur.count > 0 {
            self.close();
        }
        self.cur = Window::EMPTY;
        self.past_min = [i64::MAX; PAST_WINDOWS];
        self.past_p95 = [i64::MIN; PAST_WINDOWS];
        self.oracle_min = [i64::MAX; ORACLE_WINDOWS];
        self.oracle_max = [i64::MIN; ORACLE_WINDOWS];
        self.past_spread_max = self.past_spread.iter().copied().max().unwrap_or(0);
        self.prev_min = i64::MAX;
        self.slope = 0;
    }

    /// Adds a lateness sample: to the minimum always, to the percentile unless it lies more
    /// than `cutoff` above the recent minimum. Ignores absurd values (a host whose time jumped).
    pub(super) fn add_checked(&mut self, l: i64, cutoff: i64) {
        if l.unsigned_abs() >= 1 << 40 {
            return;
        }
        let straggler = self.recent_min().is_some_and(|m| l - m > cutoff);
        if straggler {
            self.cur.lower_min(l);
        } else {
            self.cur.add(l);
        }
    }

    /// The depth, above the recent minimum, that covers the lateness of the last few windows
    /// and the recurring peaks. The windows' percentiles are absolute (not spreads above each
    /// window's own minimum), carried forward by the drift trend: so when the path delay steps,
    /// the target moves with the packets' lateness, in the same reference as the fill, and the
    /// window that straddles the step does not hold a spread as large as the step for seconds
    /// after the minimum has followed.
    pub(super) fn jitter(&self) -> i64 {
        let Some(base) = self.recent_min() else {
            return self.past_spread_max.max(self.peak_floor);
        };
        let mut need = if self.cur.count > 0 {
            self.cur.min.saturating_add(self.cur.spread)
        } else {
            i64::MIN
        };
        for age in 1..=PAST_WINDOWS {
            let p = self.past_p95[(self.last + PAST_WINDOWS + 1 - age) % PAST_WINDOWS];
            if p != i64::MIN {
                need = need.max(p.saturating_add(self.slope * age as i64));
            }
        }
        let body = if need == i64::MIN { 0 } else { need - base };
        body.max(self.past_spread_max).max(self.peak_floor).max(0)
    }

    /// Minimum lateness over the current and the previous window.
    /// The oracle: the smallest fill that would have played every packet that arrived over the
    /// last two minutes (largest minus smallest lateness; stragglers later than any allowed
    /// depth are left out, as the percentile leaves them), or `None` before any arrival. Older
    /// windows are carried forward by `drift_per_window` (local frames per window: how much
    /// later the same path delivers each window, from the drift loop's estimate). A yardstick for the target, not an input to it:
    /// it knows the future of every packet it covers.
    pub(super) fn oracle(&self, drift_per_window: f64) -> Option<i64> {
        let mut lo = self.cur.min;
        let mut hi = self.cur.top[0];
        for age in 1..=ORACLE_WINDOWS {
            let i = (self.oracle_at + ORACLE_WINDOWS + 1 - age) % ORACLE_WINDOWS;
            if self.oracle_min[i] == i64::MAX || self.oracle_max[i] == i64::MIN {
                continue;
            }
            // Carried to the present along the drift: a window `age` old saw every lateness
            // `age × drift` away from where the same path puts it now.
            let shift = (drift_per_window * age as f64).round() as i64;
            lo = lo.min(self.oracle_min[i].saturating_add(shift));
            hi = hi.max(self.oracle_max[i].saturating_add(shift));
        }
        (lo != i64::MAX && hi != i64::MIN).then(|| (hi - lo).max(0))
    }

    pub(super) fn recent_min(&self) -> Option<i64> {
        let m = self.cur.min.min(self.prev_min);
        (m != i64::MAX).then_some(m)
    }

    pub(super) fn forget(&mut self) {
        *self = Lateness::new();
    }
}
