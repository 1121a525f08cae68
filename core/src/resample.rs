//! The drift resampler: a per-peer staging FIFO read at a fractional ratio by a cubic
//! interpolator ([`Resampler`]). The ratio comes from the drift controller
//! ([`crate::drift::DriftController`]).
//!
//!
//! # The idea
//!
//! Every sound card runs on its own crystal; two of them differ by up to a few hundred ppm, so a
//! peer's blocks arrive slightly faster or slower than this machine plays them and the jitter
//! buffer would slowly fill up or run dry. Instead of dropping or repeating blocks, the engine
//! reads the peer's audio at `ratio` input frames per output frame:
//!
//! ```text
//! ratio = nominal × (1 + ε)        nominal = sender_rate / 48000 (1.0, or 0.91875 for 44.1 kHz)
//! ```
//!
//! where ε (|ε| ≤ 1000 ppm) comes from [`DriftController::update`](crate::drift::DriftController::update), driven by the fill (jitter
//! buffer + staging, in input frames) against the jitter buffer's target. Per quantum:
//!
//! ```
//! use tutti_core::drift::DriftController;
//! use tutti_core::resample::Resampler;
//! let mut staging = Resampler::new(2048);
//! let mut drift = DriftController::new(128, 48_000);
//! let (mut left, mut right) = ([0.0f32; 128], [0.0f32; 128]);
//! let (nominal, target, jitter_frames) = (1.0, 1024.0, 896.0);
//! let ratio = nominal * drift.update(jitter_frames + staging.buffered_frames(), target);
//! while staging.frames_needed(128, ratio) > 0 {
//!     let (l, r) = staging.append_slots(128);
//!     if l.is_empty() {
//!         break; // full: cannot happen when capacity covers 128 × ratio + block + 3
//!     }
//!     l.fill(0.25); // the jitter buffer writes a decoded (or concealed) block here
//!     r.fill(-0.25);
//! }
//! assert_eq!(staging.process(ratio, &mut left, &mut right), 128);
//! ```
//!
//! # Interpolation
//!
//! A 4-tap cubic Lagrange interpolator (taps at −1, 0, 1, 2 around the integer position). The
//! read position is an integer index plus an `f64` fraction: each step is exact to ~1e-16
//! frames and nothing accumulates over hours. Delay: none (at ratio exactly 1 the output is the
//! input, sample for sample).
//!
//! * **Block-constant path** (|ratio − 1| ≤ [`FAST_MAX_DEVIATION`], every 48 kHz peer): at a
//!   few hundred ppm the read position moves by under 0.05 frames per 128-frame quantum, so
//!   output `i` uses the contiguous taps `x[read + i − 1 ..= read + i + 2]` with a fraction
//!   `t_i = t0 + i·(ratio − 1)` that may run slightly outside [0, 1) (to [−0.26, 1.26]; the
//!   cubic is no less accurate there). The weights of four outputs at once are computed
//!   exactly at the ends of stretches of 128 frames (below 125 ppm), 64, 32, 16 or 8 frames (so
//!   that t moves by at most 0.016 across one) and stepped linearly in between, once per block
//!   for both channels. A channel then costs, per four outputs, four
//!   overlapping unaligned `f32x4` loads, four multiplies, three adds and four adds to step
//!   the weights — no gather, no float-to-int conversion. [`Resampler::process`] stores the
//!   outputs; the engine instead hands them, four at a time and still in registers, to the
//!   channel strip, which meters them and adds them into the bus in the same pass
//!   (`Resampler::interpolate_with` with `mix::Strip::mix_groups_into`): the interpolated
//!   block is never written to memory. The fused pass leaves exactly the bus and meters that
//!   `process` followed by `Strip::mix_into` leave (a test holds them to it bit for bit).
//! * **General path** (44.1 kHz and other rates): per-output integer offsets from a 32.32
//!   fixed-point position, weights four at a time, taps gathered per output. Same quality, about
//!   five times the cost.
//!
//! Measured quality (tests in `resample/tests.rs`; THD+N = residual RMS after a least-squares sine fit over 1 s,
//! relative to the sine; the fitted frequency is within 0.01 Hz of f × ratio):
//!
//! | tone | ±300 ppm | +1000 ppm | −2000 ppm | 44.1 kHz peer (+300 ppm) |
//! | --- | --- | --- | --- | --- |
//! | 1 kHz | −109.6 dB | −109.1 dB | −109.6 dB | −109.6 dB |
//! | 5 kHz | −57.6 dB | −56.7 dB | −57.7 dB | −57.7 dB |
//! | 10 kHz | −33.5 dB | −32.8 dB | −33.6 dB | −33.6 dB |
//!
//! The error is what any 4-tap interpolator has at high frequencies (at t = 0.5 a 10 kHz tone
//! is 6% low); it is an amplitude ripple at the drift's beat rate (ppm × 48000 Hz: 14.4 Hz at
//! 300 ppm), so its products sit within a few tens of Hz of the tone.
//!
//! Cost per 128-frame stereo quantum (a 2-core Xeon VM shared with other builds, so ±20% from
//! run to run; best of repeated runs; WASM is simd128 in Node 20's V8). Block-constant path,
//! one peer with a hot cache: interpolation, meters and mix in the fused pass 190-210 ns WASM,
//! against 225-240 ns for `process` into a block and then `Strip::mix_into`; `process` alone
//! 150-165 ns WASM and 145-160 ns native (criterion, `cargo bench -p tutti-bench --bench drift`:
//! 151 ns; with frames_needed and one 128-frame append 165 ns). A peer nobody hears costs 55 ns
//! WASM (its staged input metered, the read position skipped). General path: `process` 550-690
//! ns native (criterion 686 ns), 660-790 ns WASM. In the engine with 64 PCM16 stereo peers the
//! fused pass is about 170 of a peer's ~380 ns per quantum in WASM (replacing it with `skip`
//! leaves ~205 ns), about 100 of ~300 ns natively.
//!
//! The fused pass is bound by its arithmetic (per four frames and channel: 4 loads, 4
//! multiplies and 3 adds to interpolate, 4 adds to step the weights, a multiply, an add and a
//! max to meter, a load, multiply, add and store to mix). Variants measured slower or no faster
//! in V8: both channels in one loop (more live vectors than registers: the meter accumulators
//! went through the stack every group), the weights of every group in a per-peer table (more
//! memory touched per peer), taps built from two loads with shuffles instead of four
//! overlapping loads, the centre weight derived from the others.
//!
//! # Real-time safety
//!
//! Only [`Resampler::new`] allocates (the FIFO and a 2 KB table of weights). Everything else —
//! `frames_needed`, `append_slots`, `process`, the fused pass, `staged`, `skip`,
//! `buffered_frames`, `reset` — allocates nothing, locks nothing, and never panics on any
//! argument: bad ratios are refused (zero-filled output, unchanged state), a full FIFO refuses
//! the append and counts it. Inputs must be finite samples (the decoders guarantee it); the
//! output is then finite.

use crate::mix::{Groups, Lanes, Simd};

/// Largest ratio (input frames per output frame) [`Resampler`] accepts (192 kHz into 48 kHz is 4).
pub const MAX_RATIO: f64 = 8.0;
/// Smallest ratio [`Resampler`] accepts.
pub const MIN_RATIO: f64 = 1.0 / 8.0;
/// Largest `|ratio - 1|` served by the block-constant path; beyond it the general path runs.
pub const FAST_MAX_DEVIATION: f64 = 2.0e-3;
/// Input frames the interpolator reads before the read position (kept when compacting).
pub const HISTORY_FRAMES: usize = 1;
/// Input frames the interpolator reads beyond the integer part of its last output position.
pub const LOOK_AHEAD_FRAMES: usize = 2;

/// Output frames interpolated with one constant integer offset. With `|ratio - 1|` at most
/// [`FAST_MAX_DEVIATION`], the fraction moves by at most 0.254 across a chunk, so it stays
/// within [-0.26, 1.26], where the cubic's error is no larger than its worst case inside [0, 1].
const CHUNK: usize = 128;

/// Which interpolation path a ratio takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Block-constant integer offset, linear fraction: contiguous taps, vectorized.
    Fast,
    /// Per-sample integer offset (nominal ratios far from 1, e.g. 44.1 kHz peers).
    General,
}

impl Path {
    /// The path for `ratio`, or `None` when the ratio is not finite or outside
    /// [`MIN_RATIO`]..=[`MAX_RATIO`].
    fn of(ratio: f64) -> Option<Path> {
        if !(MIN_RATIO..=MAX_RATIO).contains(&ratio) {
            return None;
        }
        if (ratio - 1.0).abs() <= FAST_MAX_DEVIATION {
            Some(Path::Fast)
        } else {
            Some(Path::General)
        }
    }

    /// Input frames, counted from the integer read position, that producing `k` output frames
    /// from fraction `frac` reads or consumes.
    fn span(self, frac: f64, k: usize, ratio: f64) -> usize {
        if k == 0 {
            return 0;
        }
        match self {
            // Taps of output i are read + i - 1 ..= read + i + 2; the consumed part
            // (floor(frac + k * ratio) frames) never reaches past read + k + 1.
            Path::Fast => k + LOOK_AHEAD_FRAMES,
            Path::General => {
                // Positions are never negative, so truncation is the floor (and needs no libm
                // call natively).
                let last = (frac + (k - 1) as f64 * ratio) as usize;
                let consumed = (frac + k as f64 * ratio) as usize;
                (last + LOOK_AHEAD_FRAMES + 1).max(consumed + 1)
            }
        }
    }
}

/// Moves a read position `frac` (in [0, 1)) forward by `k` output frames at `ratio`: returns
/// the whole input frames passed and the new fraction. Every caller uses this one expression, so
/// `frames_needed`, `process` and `skip` agree to the last bit.
fn step(frac: f64, k: usize, ratio: f64) -> (usize, f64) {
    let p = frac + k as f64 * ratio;
    let whole = p as usize;
    (whole, p - whole as f64)
}

/// Cubic Lagrange weights for taps at -1, 0, 1, 2 evaluated at `t`.
#[inline(always)]
fn lagrange4(t: f32) -> [f32; 4] {
    let tm1 = t - 1.0;
    let tm2 = t - 2.0;
    let tp1 = t + 1.0;
    let a = t * tm1;
    let b = tp1 * tm2;
    [
        a * tm2 * (-1.0 / 6.0),
        b * tm1 * 0.5,
        b * t * -0.5,
        a * tp1 * (1.0 / 6.0),
    ]
}

/// [`lagrange4`] on four lanes (the same operations in the same order, so bit-identical per
/// lane): 3 adds and 10 multiplies for four sets of weights.
#[inline(always)]
fn lagrange4_lanes<V: Lanes>(t: V) -> [V; 4] {
    let tm1 = t - V::splat(1.0);
    let tm2 = t - V::splat(2.0);
    let tp1 = t + V::splat(1.0);
    let a = t * tm1;
    let b = tp1 * tm2;
    [
        a * tm2 * V::splat(-1.0 / 6.0),
        b * tm1 * V::splat(0.5),
        b * t * V::splat(-0.5),
        a * tp1 * V::splat(1.0 / 6.0),
    ]
}

/// Largest move of the fraction across one stretch of linearly stepped weights (see
/// [`fill_stretches`]). The stepping error on a 1 kHz sine is then under −125 dB, far below the
/// cubic's own error (−110 dB).
const MAX_STEP_SPAN: f32 = 0.016;

/// Output frames per stretch of linearly stepped weights for a fraction moving by `d` per
/// frame: the largest of 128, 64, 32, 16, 8 whose span `frames × |d|` is at most
/// [`MAX_STEP_SPAN`] (8 at the edge of the fast path, |d| = 2000 ppm: span 0.016). A whole
/// 128-frame quantum is one stretch up to 125 ppm, two up to 250 ppm, four up to 500 ppm.
#[inline]
fn stretch_frames(d: f32) -> usize {
    let mut frames = CHUNK;
    while frames > 8 && frames as f32 * d.abs() > MAX_STEP_SPAN {
        frames /= 2;
    }
    frames
}

/// Most stretches of linearly stepped weights in one [`CHUNK`] (stretches are at least 8
/// frames long).
const MAX_STRETCHES: usize = CHUNK / 8;

/// One block's stretches of interpolation weights: row `s` holds the exact weights of the
/// stretch's first group of four outputs (tap `k`'s four lanes at `[4k..4k + 4]`) and their
/// step per group (at `[16 + 4k..16 + 4k + 4]`).
type StretchTable = [[f32; 32]; MAX_STRETCHES];

/// Vector `k` (0..8) of a [`StretchTable`] row: tap weights 0..4, then steps 0..4.
#[inline(always)]
fn stretch_vec(row: &[f32; 32], k: usize) -> &[f32; 4] {
    row[4 * k..4 * k + 4]
        .try_into()
        .expect("k < 8: a 4-element window of 32")
}

/// Fills `table` for `groups` groups of four outputs `i` at `t_i = t0 + i·d`, in stretches of
/// [`stretch_frames`] outputs: weights exact at each stretch's start, stepped linearly so that
/// they would land exactly on the next stretch's start. Since the stepped weights still sum to
/// 1 and reproduce linear signals exactly, the stepping error on a sine of ω rad/frame is below
/// ω²·s²/8 for a span s ≤ [`MAX_STEP_SPAN`] (−125 dB at 1 kHz). Returns the groups per stretch
/// (the last stretch may be shorter) and the number of stretches.
#[inline(always)]
fn fill_stretches<V: Lanes>(
    table: &mut StretchTable,
    t0: f32,
    d: f32,
    groups: usize,
) -> (usize, usize) {
    let groups = groups.min(CHUNK / 4);
    let per = stretch_frames(d) / 4;
    let count = groups.div_ceil(per);
    let lane = V::from_array([0.0, 1.0, 2.0, 3.0]);
    let (t0v, dv) = (V::splat(t0), V::splat(d));
    let exact = |g: usize| lagrange4_lanes(t0v + (V::splat((4 * g) as f32) + lane) * dv);
    let mut end = exact(0);
    for (s, row) in table[..count].iter_mut().enumerate() {
        let first = s * per;
        let len = per.min(groups - first);
        let at = end;
        end = exact(first + len);
        let scale = V::splat(1.0 / len as f32);
        let vecs = row
            .chunks_exact_mut(4)
            .filter_map(|c| <&mut [f32; 4]>::try_from(c).ok());
        for (k, v) in vecs.enumerate() {
            let x = if k < 4 {
                at[k]
            } else {
                (end[k - 4] - at[k - 4]) * scale
            };
            x.store(v);
        }
    }
    (per, count)
}

/// The block-constant interpolator as a source of four-frame vectors: output `i` is the cubic
/// through `x[i..i + 4]` at `t_i = t0 + i·d`, handed on four outputs at a time ([`Groups`]), so
/// that the consumer (the strip's meter and mix, or a store for [`Resampler::process`]) takes
/// them straight from registers.
///
/// The weights' stretches are computed once per block ([`fill_stretches`]) and shared by both
/// channels. A channel's pass then does, per four outputs, four overlapping tap loads
/// ([`Lanes::taps`]), four multiplies and three adds, and one add per weight vector to step it.
/// One channel at a time, the loop carries 11 vectors (weights, steps, the strip's two meter
/// accumulators, its gain) within the 16 vector registers of SSE and of V8's simd128 code; both
/// channels at once carried 14 and spilled meter accumulators to the stack in every group.
#[derive(Clone, Copy)]
pub(crate) struct Cubic<'a> {
    /// Taps: output `i` reads `x[i..i + 4]`; at least `4 × groups + 3` samples.
    xl: &'a [f32],
    xr: &'a [f32],
    /// Groups of four outputs, groups per stretch, and the stretches.
    groups: usize,
    per: usize,
    stretches: &'a [[f32; 32]],
}

impl<V: Lanes> Groups<V> for Cubic<'_> {
    #[inline(always)]
    fn for_each(&self, ch: usize, out: &mut [f32], mut f: impl FnMut(V, &mut [f32; 4])) {
        let x = if ch == 0 { self.xl } else { self.xr };
        let n = (4 * self.groups).min(out.len());
        let stretches = out[..n].chunks_mut(4 * self.per).zip(self.stretches);
        for (s, (so, row)) in stretches.enumerate() {
            let mut w = [0, 1, 2, 3].map(|k| V::load(stretch_vec(row, k)));
            let step = [4, 5, 6, 7].map(|k| V::load(stretch_vec(row, k)));
            let first = 4 * s * self.per;
            // Group c of the stretch reads x[first + 4c .. first + 4c + 7] (the taps hold
            // 4 × groups + 3). Windows of 7 at a stride of 4 carry their length, so the loop
            // needs no bounds check.
            let Some(taps) = x.get(first..first + so.len() + 3) else {
                return;
            };
            let groups = taps.windows(7).step_by(4).zip(so.chunks_exact_mut(4));
            for (t, o) in groups {
                let (Ok(t), Ok(o)) = (t.try_into(), o.try_into()) else {
                    return;
                };
                let a = V::taps(t);
                let y = (w[0] * a[0] + w[1] * a[1]) + (w[2] * a[2] + w[3] * a[3]);
                f(y, o);
                for k in 0..4 {
                    w[k] = w[k] + step[k];
                }
            }
        }
    }
}

/// Block-constant path into memory: [`Cubic`] for the whole groups of four (stretches in
/// `table`), exact weights for the last `out.len() % 4` outputs. `out.len()` is at most
/// [`CHUNK`]; `x*` must hold `out.len() + 3` samples; shorter inputs give zeros.
fn fast_kernel(
    table: &mut StretchTable,
    xl: &[f32],
    xr: &[f32],
    t0: f32,
    d: f32,
    ol: &mut [f32],
    or: &mut [f32],
) {
    let n = ol.len().min(or.len()).min(CHUNK);
    let (Some(xl), Some(xr)) = (xl.get(..n + 3), xr.get(..n + 3)) else {
        ol.fill(0.0);
        or.fill(0.0);
        return;
    };
    let full = n - n % 4;
    let (ol4, ol_tail) = ol[..n].split_at_mut(full);
    let (or4, or_tail) = or[..n].split_at_mut(full);
    let (per, count) = fill_stretches::<Simd>(table, t0, d, full / 4);
    let groups = Cubic {
        xl,
        xr,
        groups: full / 4,
        per,
        stretches: &table[..count],
    };
    for (ch, out) in [ol4, or4].into_iter().enumerate() {
        groups.for_each(ch, out, |y: Simd, o| y.store(o));
    }
    for (j, (yl, yr)) in ol_tail.iter_mut().zip(or_tail.iter_mut()).enumerate() {
        let i = full + j;
        let c = lagrange4(t0 + i as f32 * d);
        (*yl, *yr) = match (xl[i..].first_chunk::<4>(), xr[i..].first_chunk::<4>()) {
            (Some(a), Some(b)) => (dot4(&c, a), dot4(&c, b)),
            _ => (0.0, 0.0),
        };
    }
}

/// General path: output `i` sits at `frac + i * ratio` frames after `x[1]`. Positions run in
/// 32.32 fixed point (integer adds, no float-to-int conversion per sample), rounded down so they
/// never pass the `f64` positions `span` accounts for; the error stays under 2^-32 × (i + 1)
/// frames (3e-8 frames at i = 127). Weights are computed four outputs at a time (vectorized)
/// for both channels; the taps are gathered per output.
fn general_kernel(xl: &[f32], xr: &[f32], frac: f64, ratio: f64, ol: &mut [f32], or: &mut [f32]) {
    const ONE: f64 = (1u64 << 32) as f64;
    let n = ol.len().min(or.len());
    let max_base = xl.len().min(xr.len()).saturating_sub(4);
    let step = (ratio * ONE) as u64;
    let mut pos = (frac * ONE) as u64;
    for (cl, cr) in ol[..n].chunks_mut(4).zip(or[..n].chunks_mut(4)) {
        let mut t = [0.0f32; 4];
        let mut base = [0usize; 4];
        for (t, b) in t.iter_mut().zip(base.iter_mut()) {
            // The top 24 fraction bits convert exactly to f32.
            *t = ((pos >> 8) & 0xff_ffff) as i32 as f32 * (1.0 / 16_777_216.0);
            // `span` guarantees the integer part <= max_base; the clamp keeps indexing provably
            // in range.
            *b = ((pos >> 32) as usize).min(max_base);
            pos += step;
        }
        let mut w = [[0.0f32; 4]; 4];
        for (j, &t) in t.iter().enumerate() {
            for (wk, ck) in w.iter_mut().zip(lagrange4(t)) {
                wk[j] = ck;
            }
        }
        for (j, (yl, yr)) in cl.iter_mut().zip(cr.iter_mut()).enumerate() {
            let b = base[j];
            (*yl, *yr) = match (xl[b..].first_chunk::<4>(), xr[b..].first_chunk::<4>()) {
                (Some(a), Some(c)) => (
                    w[0][j] * a[0] + w[1][j] * a[1] + w[2][j] * a[2] + w[3][j] * a[3],
                    w[0][j] * c[0] + w[1][j] * c[1] + w[2][j] * c[2] + w[3][j] * c[3],
                ),
                _ => (0.0, 0.0),
            };
        }
    }
}

#[inline(always)]
fn dot4(c: &[f32; 4], x: &[f32; 4]) -> f32 {
    c[0] * x[0] + c[1] * x[1] + c[2] * x[2] + c[3] * x[3]
}

/// Per-peer stereo staging FIFO and fractional-ratio interpolator.
///
/// The jitter buffer appends whole blocks at the tail ([`Resampler::append_slots`]); the
/// interpolator reads at a fractional position that advances by `ratio` input frames per output
/// frame ([`Resampler::process`]). The integer read index and an `f64` fraction in [0, 1) are
/// kept separately, so the position is exact to ~1e-16 frames however long it runs.
#[derive(Clone, Debug)]
pub struct Resampler {
    left: Vec<f32>,
    right: Vec<f32>,
    /// Index of the integer read position; `HISTORY_FRAMES <= read <= end`.
    read: usize,
    /// One past the last appended frame; `end <= left.len()`.
    end: usize,
    /// Fractional read position in [0, 1).
    frac: f64,
    /// Appends refused for lack of room.
    refused: u64,
    /// Scratch for the block-constant path's weights (see [`Cubic`]).
    weights: Box<StretchTable>,
}

impl Resampler {
    /// A resampler holding up to `capacity_frames` unconsumed stereo frames (plus one frame of
    /// history). Allocates; call outside the render path. The capacity must cover one call's
    /// need plus one block: 2048 frames serve a 128-frame quantum at any accepted ratio fed with
    /// blocks of up to 256 frames.
    pub fn new(capacity_frames: usize) -> Self {
        let len = capacity_frames.saturating_add(HISTORY_FRAMES);
        Resampler {
            left: vec![0.0; len],
            right: vec![0.0; len],
            read: HISTORY_FRAMES,
            end: HISTORY_FRAMES,
            frac: 0.0,
            refused: 0,
            weights: Box::new([[0.0; 32]; MAX_STRETCHES]),
        }
    }

    /// Unconsumed frames the FIFO can hold.
    pub fn capacity_frames(&self) -> usize {
        self.left.len() - HISTORY_FRAMES
    }

    /// Empties the FIFO, zeroes the history and the fraction. Real-time safe.
    pub fn reset(&mut self) {
        self.read = HISTORY_FRAMES;
        self.end = HISTORY_FRAMES;
        self.frac = 0.0;
        self.left[..HISTORY_FRAMES].fill(0.0);
        self.right[..HISTORY_FRAMES].fill(0.0);
    }

    /// Input frames appended but not yet consumed (the fraction counts as consumed in part).
    /// Includes the look-ahead the interpolator holds, so it is what the drift loop should see.
    pub fn buffered_frames(&self) -> f64 {
        (self.end - self.read) as f64 - self.frac
    }

    /// Appends refused so far because the FIFO was full (see [`Resampler::append_slots`]).
    pub fn refused_appends(&self) -> u64 {
        self.refused
    }

    /// How many more input frames must be appended before [`Resampler::process`] can produce
    /// `out_frames` at `ratio` (0 when enough is buffered, or when `ratio` is invalid). Includes
    /// the interpolator's look-ahead.
    ///
    /// Pass the ratio `process` will get. On the block-constant path (|ratio − 1| ≤
    /// [`FAST_MAX_DEVIATION`]) the answer does not depend on the ratio (`out_frames + 2` frames
    /// from the read position); on the general path a different ratio may need one frame more.
    /// When `out_frames` exceeds the capacity the answer is a bound that can never be met.
    /// Real-time safe.
    pub fn frames_needed(&self, out_frames: usize, ratio: f64) -> usize {
        let Some(path) = Path::of(ratio) else {
            return 0;
        };
        let avail = self.end - self.read;
        if path == Path::Fast && out_frames <= CHUNK {
            // One chunk: `span` is k + look-ahead whatever the fraction.
            return path
                .span(self.frac, out_frames, ratio)
                .saturating_sub(avail);
        }
        if out_frames > self.capacity_frames() {
            // Can never be met; an upper bound without walking every chunk.
            let bound = (out_frames as f64 * ratio).ceil() + (LOOK_AHEAD_FRAMES + 2) as f64;
            return (bound as usize).saturating_sub(avail);
        }
        let mut rel = 0;
        let mut frac = self.frac;
        let mut remaining = out_frames;
        let mut need = 0;
        while remaining > 0 {
            let k = remaining.min(CHUNK);
            need = need.max(rel + path.span(frac, k, ratio));
            let (whole, f) = step(frac, k, ratio);
            rel += whole;
            frac = f;
            remaining -= k;
        }
        need.saturating_sub(avail)
    }

    /// Writable regions of exactly `frames` frames (left, right) at the FIFO tail; they count as
    /// appended at once, so the caller must fill them before the next `process`.
    ///
    /// Moves the live tail (one history frame plus unconsumed frames, a few hundred floats) to the
    /// front when the end of the storage is reached. When `frames` do not fit even then, appends
    /// nothing, counts the refusal ([`Resampler::refused_appends`]) and returns two empty slices.
    /// Real-time safe.
    pub fn append_slots(&mut self, frames: usize) -> (&mut [f32], &mut [f32]) {
        if frames > self.left.len() - self.end {
            self.compact();
        }
        let start = self.end;
        if frames > self.left.len() - start {
            self.refused += 1;
            return (&mut self.left[start..start], &mut self.right[start..start]);
        }
        self.end = start + frames;
        (
            &mut self.left[start..self.end],
            &mut self.right[start..self.end],
        )
    }

    fn compact(&mut self) {
        let from = self.read - HISTORY_FRAMES;
        if from == 0 {
            return;
        }
        self.left.copy_within(from..self.end, 0);
        self.right.copy_within(from..self.end, 0);
        self.read -= from;
        self.end -= from;
    }

    /// Largest `k <= want` whose span fits in what is buffered.
    fn producible(&self, path: Path, want: usize, ratio: f64) -> usize {
        let avail = self.end - self.read;
        if path.span(self.frac, want, ratio) <= avail {
            return want;
        }
        if path == Path::Fast {
            return avail.saturating_sub(LOOK_AHEAD_FRAMES).min(want);
        }
        // span is monotonic in k: binary search (at most 8 steps for a 128-frame chunk).
        let (mut lo, mut hi) = (0, want);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if path.span(self.frac, mid, ratio) <= avail {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    fn consume(&mut self, k: usize, ratio: f64) {
        let (whole, frac) = step(self.frac, k, ratio);
        self.read += whole;
        self.frac = frac;
    }

    /// Produces `left.len()` output frames (the shorter of the two slices; the longer one's
    /// extra frames are zeroed), consuming about `left.len() × ratio` input frames.
    ///
    /// `ratio` is input frames per output frame: nominal (sender rate / 48000) times the drift
    /// factor from [`DriftController::update`](crate::drift::DriftController::update). Returns the frames produced from input; when the
    /// FIFO runs short (or `ratio` is not finite or outside [`MIN_RATIO`]..=[`MAX_RATIO`]) the
    /// rest is zero-filled and the read position stays where the input ran out. Call
    /// [`Resampler::frames_needed`] first to avoid that. Real-time safe.
    pub fn process(&mut self, ratio: f64, left: &mut [f32], right: &mut [f32]) -> usize {
        let n = left.len().min(right.len());
        let mut done = 0;
        if let Some(path) = Path::of(ratio) {
            while done < n {
                let want = (n - done).min(CHUNK);
                let k = self.producible(path, want, ratio);
                if k == 0 {
                    break;
                }
                let from = self.read - HISTORY_FRAMES;
                let xl = &self.left[from..self.end];
                let xr = &self.right[from..self.end];
                let ol = &mut left[done..done + k];
                let or = &mut right[done..done + k];
                match path {
                    Path::Fast => fast_kernel(
                        &mut self.weights,
                        xl,
                        xr,
                        self.frac as f32,
                        (ratio - 1.0) as f32,
                        ol,
                        or,
                    ),
                    Path::General => general_kernel(xl, xr, self.frac, ratio, ol, or),
                }
                self.consume(k, ratio);
                done += k;
                if k < want {
                    break;
                }
            }
        }
        left[done..].fill(0.0);
        right[done..].fill(0.0);
        done
    }

    /// Runs `f` over the next `frames` output frames as they are interpolated, four at a time
    /// ([`Cubic`]: one vector per four frames, a channel at a time), then consumes them
    /// exactly as [`Resampler::process`] would. Only on the block-constant path, for a multiple of 4 up
    /// to 128 frames that the FIFO holds in full; otherwise returns `None` and changes nothing
    /// (use `process`). The outputs are bit-identical to what `process` writes. Real-time safe.
    pub(crate) fn interpolate_with<R>(
        &mut self,
        ratio: f64,
        frames: usize,
        f: impl FnOnce(&Cubic<'_>) -> R,
    ) -> Option<R> {
        if frames % 4 != 0 || frames > CHUNK || Path::of(ratio) != Some(Path::Fast) {
            return None;
        }
        if Path::Fast.span(self.frac, frames, ratio) > self.end - self.read {
            return None;
        }
        let from = self.read - HISTORY_FRAMES;
        let groups = frames / 4;
        let (per, count) = fill_stretches::<Simd>(
            &mut self.weights,
            self.frac as f32,
            (ratio - 1.0) as f32,
            groups,
        );
        let out = f(&Cubic {
            xl: &self.left[from..self.end],
            xr: &self.right[from..self.end],
            groups,
            per,
            stretches: &self.weights[..count],
        });
        self.consume(frames, ratio);
        Some(out)
    }

    /// Up to `frames` input frames from the integer read position: what the next `frames`
    /// outputs are made of when the ratio is near 1. For metering a peer nobody hears without
    /// interpolating it (then [`Resampler::skip`]). Real-time safe.
    pub fn staged(&self, frames: usize) -> (&[f32], &[f32]) {
        let end = self.end.min(self.read.saturating_add(frames));
        (&self.left[self.read..end], &self.right[self.read..end])
    }

    /// Consumes input exactly as [`Resampler::process`] would for `out_frames` output frames,
    /// without computing them (for a peer nobody hears). Returns the frames that `process` would
    /// have produced from input. Real-time safe.
    pub fn skip(&mut self, out_frames: usize, ratio: f64) -> usize {
        let Some(path) = Path::of(ratio) else {
            return 0;
        };
        let mut done = 0;
        while done < out_frames {
            let want = (out_frames - done).min(CHUNK);
            let k = self.producible(path, want, ratio);
            self.consume(k, ratio);
            done += k;
            if k < want {
                break;
            }
        }
        done
    }
}

#[cfg(test)]
mod tests;
