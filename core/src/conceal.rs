//! Concealment: filling a missing block without a click, and fading back into real audio.
//!
//! A [`Concealer`] follows every block a peer's playout emits (real or synthesized). When a block
//! is missing it continues the waveform from the last [`HISTORY_NEED`] frames of output:
//!
//! 1. **Pitch search** (once per concealment run, on its first block). The history is mixed to
//!    mono; an 8:1 decimated copy (box filter, 6 kHz for a 48 kHz stream) is searched by
//!    normalised autocorrelation for the lag between [`MIN_LAG`] and [`MAX_LAG`] frames
//!    (2.7-16 ms at 48 kHz) that best matches the last [`SEARCH_FRAMES`] frames; the winner is
//!    refined at full rate over ±4 frames (half a coarse step) on the last 128 frames. A signal
//!    with no positive correlation at any lag (noise) repeats [`MAX_LAG`] frames, the longest,
//!    least buzzy choice.
//! 2. **Continuation.** The last period `T` of each channel becomes a loop. Its first
//!    [`JUNCTION_FRAMES`] samples are offset so that the loop's first sample follows the last
//!    played sample with the step the signal itself made one period earlier; the offset decays
//!    linearly to zero. Entry and every wrap of the loop are then continuous in value, so the
//!    continuation never jumps, whatever the signal.
//! 3. **Attenuation.** Over one run of consecutive concealed frames the gain stays 1 for
//!    [`HOLD_FRAMES`] (10 ms at 48 kHz), then falls linearly to 0 over [`FADE_FRAMES`] (40 ms),
//!    sample by sample: silence 50 ms into a gap, never a hard jump to zero.
//! 4. **Recovery.** The first [`RECOVER_FRAMES`] frames of real audio after a concealment are a
//!    raised-cosine crossfade from the (still running, still attenuating) continuation into the
//!    real signal, spanning several blocks when blocks are shorter than the crossfade. A fresh
//!    or reset concealer counts as "silent concealment", so the first real audio fades in.
//!
//! Units: frames at the stream's own rate (the sender's), stereo planar `f32`.
//!
//! # The history, without a copy per block
//!
//! Only the first block of a run reads the history, and runs start only on loss, so the
//! concealer does not copy every block it is shown. It keeps a list of what the output was made
//! of, newest last, and assembles the last [`HISTORY_NEED`] frames from it when a run starts:
//!
//! - real audio that the caller still holds in its own storage (a jitter buffer's received
//!   payloads), recorded by reference with [`Concealer::play_ref`]: a `u32` token, nothing
//!   copied. At assembly the caller decodes the block again through the `decode` argument of
//!   [`Concealer::conceal_with`] / [`Concealer::splice_with`];
//! - zeros (a run that has faded out), recorded as a length;
//! - everything else, copied into a ring of [`HISTORY_FRAMES`] frames per channel: synthesized
//!   blocks, real blocks changed by the recovery crossfade, and audio given with
//!   [`Concealer::play`].
//!
//! The assembled history is therefore exactly the output, whatever it was made of. The caller
//! keeps a referenced block decodable until [`HISTORY_NEED`] frames of later output have been
//! recorded; before its storage changes otherwise, it calls [`Concealer::detach_with`], which
//! copies the referenced part of the history. Blocks recorded by reference are at most
//! [`MAX_REF_FRAMES`] long (longer ones are copied) and should be at least 32 frames long (the
//! list holds 64 entries; history beyond them reads as silence).
//!
//! # Cost and real-time safety
//!
//! Every method is real-time safe after [`Concealer::new`] (which allocates all buffers): no
//! allocation, lock or panic, no NaN or Inf produced from finite input, bounded work.
//! [`Concealer::play_ref`] of audio that needs no crossfade costs one list entry (a few ns);
//! [`Concealer::play`] copies the block into the ring. [`Concealer::conceal_with`] on the first
//! block of a run (and [`Concealer::splice_with`]) assembles the history (decoding at most
//! [`HISTORY_NEED`] frames again through the caller; copied stretches are slice copies) and does
//! the pitch search: 81 lags × 32 decimated products plus 9 lags × 128 products (about 3.8 k
//! multiply-adds, computed eight lags at a time with the accumulators in registers, segment
//! energies sliding with the lag) and builds the loop (at most 2 × 768 copies), about 1.3 µs
//! natively; later blocks of the run cost one multiply per sample (the loop position wraps
//! without a division); once the gain has reached zero a block costs a
//! `fill(0.0)`. Its cost is bounded and independent of the input.

/// Frames of copied output kept per channel (synthesized and crossfaded blocks).
pub const HISTORY_FRAMES: usize = 2048;
/// Frames compared by the pitch search (5.3 ms at 48 kHz).
pub const SEARCH_FRAMES: usize = 256;
/// Shortest loop length, in frames.
pub const MIN_LAG: usize = 128;
/// Longest loop length, in frames.
pub const MAX_LAG: usize = 768;
/// Frames of output history a concealment run reads: the compared segment plus the longest
/// lag. A caller that records blocks by reference keeps them decodable for this many frames of
/// later output.
pub const HISTORY_NEED: usize = SEARCH_FRAMES + MAX_LAG;
/// Longest block recorded by reference by [`Concealer::play_ref`] (longer ones are copied).
pub const MAX_REF_FRAMES: usize = 256;
/// Frames over which the junction offset decays.
pub const JUNCTION_FRAMES: usize = 32;
/// Frames of a concealment run played at full level.
pub const HOLD_FRAMES: usize = 480;
/// Frames of the linear fade to silence that follows.
pub const FADE_FRAMES: usize = 1920;
/// Length of the recovery crossfade into real audio, in frames.
pub const RECOVER_FRAMES: usize = 128;

/// Decimation factor of the coarse pitch search (6 kHz for a 48 kHz stream).
const DECIM: usize = 8;
/// Full-rate refinement around the coarse lag: ±this many frames (half a coarse step).
const REFINE: usize = DECIM / 2;
/// Frames compared by the full-rate refinement (the most recent ones).
const REFINE_FRAMES: usize = 128;
/// Most lags one search compares (the coarse search's).
const MAX_LAGS: usize = (MAX_LAG - MIN_LAG) / DECIM + 1;
/// Below this mean-square level the history counts as silence (about -100 dBFS).
const SILENCE_POWER: f32 = 1e-10;
/// Run position at which the gain has reached zero.
const RUN_END: usize = HOLD_FRAMES + FADE_FRAMES;
/// Entries of the history list (what the output was made of).
const MAX_ENTRIES: usize = 64;
/// Frames of the assembly buffers: the history plus room for a whole referenced block that
/// reaches back beyond it.
const WORK_FRAMES: usize = HISTORY_NEED + MAX_REF_FRAMES;

const _: () = assert!(HISTORY_NEED < HISTORY_FRAMES && HISTORY_NEED > MAX_LAG);
const _: () = assert!(HISTORY_NEED % DECIM == 0 && SEARCH_FRAMES % DECIM == 0);
const _: () = assert!(MIN_LAG % DECIM == 0 && MAX_LAG % DECIM == 0 && MIN_LAG > JUNCTION_FRAMES);
const _: () = assert!(MAX_ENTRIES * 32 >= HISTORY_NEED + MAX_REF_FRAMES);
const _: () = assert!(
    DECIM == 8 && REFINE_FRAMES <= SEARCH_FRAMES && REFINE < MIN_LAG && 2 * REFINE < MAX_LAGS
);

/// What the concealer's last output was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Real audio, fully faded in.
    Real,
    /// A concealment run is under way.
    Concealing,
    /// Real audio, still crossfading from the continuation: `done` frames of the crossfade made.
    Recovering { done: usize },
}

/// One stretch of output, in the history list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// Frames copied into the history ring (consecutive copies merge into one entry).
    Copied(u32),
    /// Frames of zeros (consecutive ones merge).
    Zeros(u32),
    /// A block the caller holds and decodes on demand.
    Held { token: u32, frames: u32 },
}

/// Per-stream concealment state: history list, pitch loop, gain envelope, recovery crossfade.
///
/// `repr(C)`: what [`Concealer::play_ref`] reads comes first, the entry list last.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Concealer {
    mode: Mode,
    /// The history list: `count` entries of `entries`, a ring, `newest` one past the newest.
    newest: usize,
    count: usize,
    /// Next write index in the history rings.
    pos: usize,
    period: usize,
    phase: usize,
    /// Frames synthesized in the current run (drives the gain).
    run: usize,
    /// Ring of copied output, one per channel.
    hist_l: Vec<f32>,
    hist_r: Vec<f32>,
    /// Scratch: the assembled history, oldest first, in the last `HISTORY_NEED` frames.
    work_l: Vec<f32>,
    work_r: Vec<f32>,
    /// Scratch: mono history, oldest first.
    mono: Vec<f32>,
    /// Scratch: decimated mono.
    deci: Vec<f32>,
    /// The loop, one per channel (`period` used).
    loop_l: Vec<f32>,
    loop_r: Vec<f32>,
    /// The recovery crossfade's weights, `fade_in_weight(i, RECOVER_FRAMES)` (no cosine per
    /// sample on the render path).
    fade: [f32; RECOVER_FRAMES],
    /// What the output was made of.
    entries: [Entry; MAX_ENTRIES],
}

impl Default for Concealer {
    fn default() -> Self {
        Concealer::new()
    }
}

/// Raised-cosine weight of crossfade frame `i` out of `n` (0 → 1, midpoint samples).
#[inline]
pub(crate) fn fade_in_weight(i: usize, n: usize) -> f32 {
    let x = (i as f32 + 0.5) / n as f32;
    0.5 - 0.5 * (core::f32::consts::PI * x).cos()
}

/// Gain of run frame `n`.
#[inline]
fn run_gain(n: usize) -> f32 {
    if n < HOLD_FRAMES {
        1.0
    } else if n < RUN_END {
        1.0 - (n - HOLD_FRAMES) as f32 / FADE_FRAMES as f32
    } else {
        0.0
    }
}

/// The decoder of a concealer whose history holds no references: silence.
fn no_references(_token: u32, left: &mut [f32], right: &mut [f32]) {
    left.fill(0.0);
    right.fill(0.0);
}

/// Dot product with eight independent accumulators, so that LLVM vectorizes it.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        s += x * y;
    }
    s
}

/// Lags correlated together by [`correlate`]: one tile of accumulators, kept in registers.
const TILE: usize = 8;

/// Correlations of the last `n` samples of `x` with the segments `lag` samples earlier, longest
/// lag first: `out[i]` for lag `hi - i`, `hi = lo + out.len() - 1`, `x.len() >= n + hi`.
///
/// [`TILE`] lags at a time, one target sample after the other: `acc[q] += t · x[.. + q]` over
/// a fixed-size array, which LLVM vectorizes with the accumulators in registers and no
/// horizontal sum per lag; the lags left over take a [`dot`] each.
fn correlate(x: &[f32], n: usize, lo: usize, out: &mut [f32]) {
    let m = out.len();
    let hi = lo + m - 1;
    let target = &x[x.len() - n..];
    // Lag `hi - i` pairs target sample `k` with `x[base + i + k]`.
    let base = x.len() - n - hi;
    let tiles = m / TILE;
    for (t, acc_out) in out[..tiles * TILE].chunks_exact_mut(TILE).enumerate() {
        let w = &x[base + t * TILE..base + t * TILE + n + TILE - 1];
        let mut acc = [0.0f32; TILE];
        for (&tk, xs) in target.iter().zip(w.windows(TILE)) {
            let xs: &[f32; TILE] = xs.try_into().expect("windows of TILE samples");
            for q in 0..TILE {
                acc[q] += tk * xs[q];
            }
        }
        acc_out.copy_from_slice(&acc);
    }
    for (i, c) in out.iter_mut().enumerate().skip(tiles * TILE) {
        *c = dot(target, &x[base + i..base + i + n]);
    }
}

/// The lag in `lo..=hi` whose segment `x[len - n - lag..len - lag]` best matches the last `n`
/// samples of `x` (largest positive normalised correlation), or `None` when none correlates
/// positively. `x.len() >= n + hi`, `lo >= 1`, `hi - lo < MAX_LAGS`.
///
/// The segment energy slides with the lag (one sample enters, one leaves), summed in `f64`
/// (where the square of an `f32` sample is exact), so the running sum's rounding stays far
/// below `f32` precision.
fn best_lag(x: &[f32], n: usize, lo: usize, hi: usize) -> Option<usize> {
    let len = x.len();
    let mut corr = [0.0f32; MAX_LAGS];
    let corr = &mut corr[..hi - lo + 1];
    correlate(x, n, lo, corr);
    let sq = |v: f32| f64::from(v) * f64::from(v);
    let mut e: f64 = x[len - n - lo..len - lo].iter().map(|&v| sq(v)).sum();
    let mut best: Option<(usize, f32)> = None;
    // Shortest lag first (ties keep the shorter).
    for (j, &c) in corr.iter().rev().enumerate() {
        let lag = lo + j;
        if j > 0 {
            // The segment moved one sample back.
            e += sq(x[len - n - lag]) - sq(x[len - lag]);
        }
        let ef = e as f32;
        if c <= 0.0 || ef <= 0.0 {
            continue;
        }
        // Maximising c / sqrt(e) (the target's energy is common to every lag).
        let score = c * c / ef;
        match best {
            Some((_, s)) if s >= score => {}
            _ => best = Some((lag, score)),
        }
    }
    best.map(|(lag, _)| lag)
}

impl Concealer {
    /// A concealer with silent history. Allocates its buffers (about 40 KB): call it off the
    /// render path.
    pub fn new() -> Self {
        Concealer {
            hist_l: vec![0.0; HISTORY_FRAMES],
            hist_r: vec![0.0; HISTORY_FRAMES],
            pos: 0,
            entries: [Entry::Zeros(0); MAX_ENTRIES],
            newest: 0,
            count: 0,
            work_l: vec![0.0; WORK_FRAMES],
            work_r: vec![0.0; WORK_FRAMES],
            mono: vec![0.0; HISTORY_NEED],
            deci: vec![0.0; HISTORY_NEED / DECIM],
            loop_l: vec![0.0; MAX_LAG],
            loop_r: vec![0.0; MAX_LAG],
            period: MAX_LAG,
            phase: 0,
            run: RUN_END,
            mode: Mode::Concealing,
            fade: core::array::from_fn(|i| fade_in_weight(i, RECOVER_FRAMES)),
        }
    }

    /// Forgets the history (and every reference in it): the next real audio fades in from
    /// silence. Real-time safe.
    pub fn reset(&mut self) {
        self.count = 0;
        self.period = MAX_LAG;
        self.phase = 0;
        self.run = RUN_END;
        self.mode = Mode::Concealing;
    }

    /// True while a concealment run is under way (the last output was synthesized).
    pub fn concealing(&self) -> bool {
        self.mode == Mode::Concealing
    }

    /// True once a run has faded to silence (or nothing has been played since `new`/`reset`):
    /// further [`Concealer::conceal`] calls write zeros.
    pub fn is_silent(&self) -> bool {
        self.mode == Mode::Concealing && self.run >= RUN_END
    }

    /// Real audio about to be output, in place: applies the recovery crossfade when the previous
    /// output was concealment, then records a copy of the block in the history. Real-time safe.
    pub fn play(&mut self, left: &mut [f32], right: &mut [f32]) {
        let n = left.len().min(right.len());
        let (left, right) = (&mut left[..n], &mut right[..n]);
        if self.mode == Mode::Concealing {
            self.mode = Mode::Recovering { done: 0 };
        }
        if let Mode::Recovering { .. } = self.mode {
            self.recover(left, right);
        }
        self.record(left, right);
    }

    /// As [`Concealer::play`], for audio the caller can decode again from `token` (see the
    /// module docs): when no crossfade applies (the usual case) the block is recorded by
    /// reference and nothing is copied or written. Real-time safe.
    pub fn play_ref(&mut self, left: &mut [f32], right: &mut [f32], token: u32) {
        let n = left.len().min(right.len());
        if self.mode == Mode::Real && n <= MAX_REF_FRAMES {
            if n > 0 {
                self.push_entry(Entry::Held {
                    token,
                    frames: n as u32,
                });
            }
            return;
        }
        self.play(left, right);
    }

    /// The recovery crossfade, in place over `left`/`right` (real audio): from the continuation
    /// into the real signal over [`RECOVER_FRAMES`] frames counted across calls. Does nothing
    /// unless a recovery is under way; [`Concealer::play`] calls it. Real-time safe.
    pub fn recover(&mut self, left: &mut [f32], right: &mut [f32]) {
        let Mode::Recovering { done } = self.mode else {
            return;
        };
        let n = left.len().min(right.len()).min(RECOVER_FRAMES - done);
        let silent = self.run >= RUN_END;
        let mut p = self.phase % self.period;
        for i in 0..n {
            let w = self.fade[done + i];
            let (cl, cr) = if silent {
                (0.0, 0.0)
            } else {
                let g = run_gain(self.run + i);
                (self.loop_l[p] * g, self.loop_r[p] * g)
            };
            p += 1;
            if p == self.period {
                p = 0;
            }
            left[i] = w * left[i] + (1.0 - w) * cl;
            right[i] = w * right[i] + (1.0 - w) * cr;
        }
        self.phase = (self.phase + n) % self.period;
        self.run = (self.run + n).min(RUN_END);
        self.mode = if done + n >= RECOVER_FRAMES {
            Mode::Real
        } else {
            Mode::Recovering { done: done + n }
        };
    }

    /// Writes a continuation of the output into `left`/`right` (the shorter length) and records
    /// it. Returns true when any written sample may be non-zero (false once the run has faded
    /// out). For a history without references (see [`Concealer::conceal_with`]). Real-time
    /// safe; the first call of a run does the pitch search.
    pub fn conceal(&mut self, left: &mut [f32], right: &mut [f32]) -> bool {
        self.conceal_with(left, right, no_references)
    }

    /// [`Concealer::conceal`] for a history that holds blocks recorded by reference:
    /// `decode(token, left, right)` writes the block recorded with `token` into both slices
    /// (each exactly its length). Called only on the first block of a run, at most once per
    /// referenced block of the last [`HISTORY_NEED`] frames. Real-time safe.
    pub fn conceal_with(
        &mut self,
        left: &mut [f32],
        right: &mut [f32],
        mut decode: impl FnMut(u32, &mut [f32], &mut [f32]),
    ) -> bool {
        let n = left.len().min(right.len());
        let (left, right) = (&mut left[..n], &mut right[..n]);
        if self.mode != Mode::Concealing {
            self.start_run(&mut decode);
        }
        let audible = self.run < RUN_END;
        if audible {
            // Stretches of contiguous loop positions: no division per sample, and no gain
            // computed while it is held at 1.
            let period = self.period;
            let mut p = self.phase % period;
            let mut i = 0;
            while i < n {
                let len = (n - i).min(period - p);
                let out = left[i..i + len]
                    .iter_mut()
                    .zip(right[i..i + len].iter_mut());
                let src = self.loop_l[p..p + len].iter().zip(&self.loop_r[p..p + len]);
                let at = self.run + i;
                if at + len <= HOLD_FRAMES {
                    for ((l, r), (&a, &b)) in out.zip(src) {
                        *l = a;
                        *r = b;
                    }
                } else {
                    for (k, ((l, r), (&a, &b))) in out.zip(src).enumerate() {
                        let g = run_gain(at + k);
                        *l = a * g;
                        *r = b * g;
                    }
                }
                i += len;
                p = if p + len == period { 0 } else { p + len };
            }
            self.phase = (self.phase + n) % self.period;
            self.run = (self.run + n).min(RUN_END);
            self.record(left, right);
        } else {
            left.fill(0.0);
            right.fill(0.0);
            self.push_entry(Entry::Zeros(n as u32));
        }
        audible
    }

    /// The next real block does not continue the last one (playout jumped): prepares a
    /// continuation of the output so far, so that [`Concealer::play`] crossfades from it.
    /// Costs a pitch search. For a history without references. Real-time safe.
    pub fn splice(&mut self) {
        self.splice_with(no_references);
    }

    /// [`Concealer::splice`] for a history that holds blocks recorded by reference (`decode` as
    /// in [`Concealer::conceal_with`]). Real-time safe.
    pub fn splice_with(&mut self, mut decode: impl FnMut(u32, &mut [f32], &mut [f32])) {
        self.start_run(&mut decode);
    }

    /// Copies the part of the history recorded by reference (`decode` as in
    /// [`Concealer::conceal_with`]), after which no token is read again: call it before the
    /// caller's storage changes other than by writing new blocks over old ones (for example a
    /// new layout). Costs an assembly of the history (no pitch search). Real-time safe.
    pub fn detach_with(&mut self, mut decode: impl FnMut(u32, &mut [f32], &mut [f32])) {
        let held = self.iter_newest().any(|e| matches!(e, Entry::Held { .. }));
        if !held {
            return;
        }
        self.assemble(&mut decode);
        let lo = WORK_FRAMES - HISTORY_NEED;
        self.count = 0;
        let (work_l, work_r) = (&self.work_l, &self.work_r);
        Self::copy_in(
            &mut self.hist_l,
            &mut self.hist_r,
            &mut self.pos,
            &work_l[lo..],
            &work_r[lo..],
        );
        self.push_entry(Entry::Copied(HISTORY_NEED as u32));
    }

    /// Addresses and capacities of every buffer (tests check nothing grows after `new`).
    #[cfg(test)]
    pub(crate) fn storage_fingerprint(&self) -> [(usize, usize); 8] {
        [
            &self.hist_l,
            &self.hist_r,
            &self.work_l,
            &self.work_r,
            &self.mono,
            &self.deci,
            &self.loop_l,
            &self.loop_r,
        ]
        .map(|v| (v.as_ptr() as usize, v.capacity()))
    }

    /// Entries from the newest to the oldest.
    fn iter_newest(&self) -> impl Iterator<Item = Entry> + '_ {
        (1..=self.count).map(|k| self.entries[(self.newest + MAX_ENTRIES - k) % MAX_ENTRIES])
    }

    /// Appends an entry to the history list, merging it into the newest when both are copies
    /// or both zeros.
    fn push_entry(&mut self, e: Entry) {
        if self.count > 0 && !matches!(e, Entry::Held { .. }) {
            let last = &mut self.entries[(self.newest + MAX_ENTRIES - 1) % MAX_ENTRIES];
            match (last, e) {
                (Entry::Copied(f), Entry::Copied(g)) | (Entry::Zeros(f), Entry::Zeros(g)) => {
                    *f = f.saturating_add(g);
                    return;
                }
                _ => {}
            }
        }
        self.entries[self.newest] = e;
        self.newest = (self.newest + 1) % MAX_ENTRIES;
        self.count = (self.count + 1).min(MAX_ENTRIES);
    }

    /// Appends a copy of a block to the history.
    fn record(&mut self, left: &[f32], right: &[f32]) {
        let n = left.len().min(right.len());
        Self::copy_in(
            &mut self.hist_l,
            &mut self.hist_r,
            &mut self.pos,
            left,
            right,
        );
        self.push_entry(Entry::Copied(n.min(u32::MAX as usize) as u32));
    }

    /// Writes a block into the history rings at `pos` (its last `HISTORY_FRAMES` frames).
    fn copy_in(
        hist_l: &mut [f32],
        hist_r: &mut [f32],
        pos: &mut usize,
        left: &[f32],
        right: &[f32],
    ) {
        let n = left.len().min(right.len());
        let skip = n.saturating_sub(HISTORY_FRAMES);
        let (left, right) = (&left[skip..n], &right[skip..n]);
        let n = left.len();
        let first = n.min(HISTORY_FRAMES - *pos);
        let (l1, l2) = left.split_at(first);
        let (r1, r2) = right.split_at(first);
        hist_l[*pos..*pos + first].copy_from_slice(l1);
        hist_r[*pos..*pos + first].copy_from_slice(r1);
        hist_l[..l2.len()].copy_from_slice(l2);
        hist_r[..r2.len()].copy_from_slice(r2);
        *pos = (*pos + n) % HISTORY_FRAMES;
    }

    /// History sample `back` frames before `pos` in a ring (1 = the last one written).
    #[cfg(test)]
    fn hist(ring: &[f32], pos: usize, back: usize) -> f32 {
        ring[(pos + HISTORY_FRAMES - back) % HISTORY_FRAMES]
    }

    /// Assembles the last [`HISTORY_NEED`] frames of output, oldest first, into the last
    /// `HISTORY_NEED` frames of the work buffers (silence where nothing was recorded).
    fn assemble(&mut self, decode: &mut impl FnMut(u32, &mut [f32], &mut [f32])) {
        let lo = WORK_FRAMES - HISTORY_NEED;
        let mut p = WORK_FRAMES;
        // One past the newest copied frame not yet placed.
        let mut copied_end = self.pos;
        for k in 1..=self.count {
            if p <= lo {
                break;
            }
            match self.entries[(self.newest + MAX_ENTRIES - k) % MAX_ENTRIES] {
                Entry::Zeros(f) => {
                    let n = (f as usize).min(p - lo);
                    self.work_l[p - n..p].fill(0.0);
                    self.work_r[p - n..p].fill(0.0);
                    p -= n;
                }
                Entry::Copied(f) => {
                    let n = (f as usize).min(p - lo);
                    // n <= HISTORY_NEED < HISTORY_FRAMES: the ring stretch is at most two
                    // slices, its wrapped part first.
                    let start = (copied_end + HISTORY_FRAMES - n) % HISTORY_FRAMES;
                    let first = n.min(HISTORY_FRAMES - start);
                    for (work, ring) in [
                        (&mut self.work_l, &self.hist_l),
                        (&mut self.work_r, &self.hist_r),
                    ] {
                        let dst = &mut work[p - n..p];
                        dst[..first].copy_from_slice(&ring[start..start + first]);
                        dst[first..].copy_from_slice(&ring[..n - first]);
                    }
                    copied_end = (copied_end + HISTORY_FRAMES - f as usize % HISTORY_FRAMES)
                        % HISTORY_FRAMES;
                    p -= n;
                }
                Entry::Held { token, frames } => {
                    // frames <= MAX_REF_FRAMES = lo < p: the whole block fits below `p`.
                    let n = (frames as usize).min(p);
                    decode(
                        token,
                        &mut self.work_l[p - n..p],
                        &mut self.work_r[p - n..p],
                    );
                    p -= n;
                }
            }
        }
        if p > lo {
            self.work_l[lo..p].fill(0.0);
            self.work_r[lo..p].fill(0.0);
        }
    }

    /// Starts a concealment run: history assembly, pitch search and loop construction.
    fn start_run(&mut self, decode: &mut impl FnMut(u32, &mut [f32], &mut [f32])) {
        self.mode = Mode::Concealing;
        self.run = 0;
        self.phase = 0;
        self.assemble(decode);
        let lo = WORK_FRAMES - HISTORY_NEED;
        let (hist_l, hist_r) = (&self.work_l[lo..], &self.work_r[lo..]);
        // Mono history, oldest first: mono[k] is `HISTORY_NEED - k` frames back.
        for ((m, l), r) in self.mono.iter_mut().zip(hist_l).zip(hist_r) {
            *m = 0.5 * (l + r);
        }
        let span = self.mono.len();
        let recent = &self.mono[span - SEARCH_FRAMES..];
        if dot(recent, recent) <= SILENCE_POWER * SEARCH_FRAMES as f32 {
            // Nothing to continue: a silent run.
            self.run = RUN_END;
            return;
        }
        // Coarse search on the decimated signal.
        for (d, c) in self.deci.iter_mut().zip(self.mono.chunks_exact(DECIM)) {
            // Pairwise: short dependency chains.
            *d = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
        }
        let coarse = best_lag(
            &self.deci,
            SEARCH_FRAMES / DECIM,
            MIN_LAG / DECIM,
            MAX_LAG / DECIM,
        );
        let period = match coarse {
            Some(c) => {
                let lo = (c * DECIM).saturating_sub(REFINE).max(MIN_LAG);
                let hi = (c * DECIM + REFINE).min(MAX_LAG);
                best_lag(&self.mono, REFINE_FRAMES, lo, hi).unwrap_or(c * DECIM)
            }
            None => MAX_LAG,
        };
        self.period = period;
        // The loop: the last `period` frames, with the junction offset.
        let n = HISTORY_NEED;
        for (hist, lp) in [(hist_l, &mut self.loop_l), (hist_r, &mut self.loop_r)] {
            lp[..period].copy_from_slice(&hist[n - period..]);
            let offset = hist[n - 1] - hist[n - 1 - period];
            for (k, v) in lp[..JUNCTION_FRAMES].iter_mut().enumerate() {
                *v = (*v + offset * (1.0 - k as f32 / JUNCTION_FRAMES as f32)).clamp(-1.0, 1.0);
            }
        }
    }
}

#[cfg(test)]
mod tests;
