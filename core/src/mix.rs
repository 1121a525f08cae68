//! The mixer: one [`Strip`] per peer (gain, pan, mute, solo, source meters) summing into a stereo
//! bus, and one [`Master`] (master gain, soft limiter, output meters) that makes the bus safe to
//! hand to the sound card.
//!
//! # Units
//! - Samples are linear `f32`, full scale = ±1.0. Gains are linear factors; the `*_db` helpers
//!   convert with `20·log10`. Levels in dBFS are relative to a full-scale peak of 1.0, so a
//!   full-scale sine reads 0 dBFS peak and −3.01 dBFS RMS.
//! - A block is whatever slice length the caller passes, normally one render quantum of
//!   [`QUANTUM`] frames at [`SAMPLE_RATE`]. Ballistics and ramps are expressed per block, with
//!   coefficients derived from the block length (cached, so a steady quantum costs no `exp()`).
//!
//! # Pan law
//! With `θ = (pan + 1)·π/4`, the left channel is scaled by `cos θ` and the right by `sin θ`
//! ([`pan_gains`]). For a mono source (mono peers are decoded duplicated to both channels) this is
//! a constant-power pan: `gL² + gR² = 1` at every position, −3.01 dB on each side at the centre,
//! unity on one side at the extremes. For a stereo source the same two factors act as a
//! constant-power *balance*: the left input only ever reaches the left output, the right input
//! only the right output, the louder side goes up to +3.01 dB relative to the centre while the
//! other fades out. One law for both means a peer switching between mono and stereo keeps its
//! level, and the strip never needs to know its channel count.
//!
//! # Smoothing
//! Every change of effective gain (fader, pan, mute, solo, audibility) is applied as a linear ramp
//! of the left and right factors across the next block: sample `i` of an `n`-frame block gets
//! `g_prev + (g_target − g_prev)·(i + 1)/n`, so the last sample lands on the target and later
//! blocks use it unchanged. A strip whose effective gains are both zero skips its multiply-add
//! entirely (its source is still metered). A new strip starts silent and fades in on its first
//! block, so joining never clicks.
//!
//! # Limiter
//! [`Master::process`] scales the bus by the master gain and a limiter gain, both folded into one
//! linear ramp per block, then passes every sample through a soft knee:
//! - Gain computer: the peak of the last [`LIMITER_HOLD_BLOCKS`] blocks (the current one
//!   included, so the block is its own look-ahead and no latency is added), times the master
//!   gain, must land on [`LIMIT_THRESHOLD`] (−1 dBFS). A louder block lowers the limiter gain at
//!   once (the ramp spreads the change over that block); when the held peak falls, the gain
//!   recovers exponentially with a [`LIMITER_RELEASE_S`] time constant and snaps to exactly 1.0
//!   when within 1e−5 of it. Holding the peak over 8 blocks (21 ms) keeps the gain still across
//!   the cycles of any tone above ~47 Hz, so a loud steady tone is scaled, not modulated.
//! - Soft knee, per sample: below the threshold the sample is left exactly as it is; above it
//!   `|y| ↦ 1 − (1 − T)² / (|y| + 1 − 2T)`, which meets the identity at `T` with slope 1 and tends
//!   to 1.0 without reaching it. It does real work only where the block ramp lags the envelope
//!   (the blocks of a loud onset up to its first crest); afterwards the envelope alone holds the
//!   peaks at `T` and the knee is at most grazed. It is what makes `|out| ≤ 1.0` a guarantee,
//!   whatever the gains. When the block's worst case `peak × max(ramp ends)` is at or below the
//!   threshold the knee pass is skipped, and at unity gain the bus is not touched at all
//!   (bit-exact passthrough).
//! - Figures (tests): five in-phase full-scale sines (peak 5.0) at 60 Hz…1 kHz come out as a sine
//!   at −1 dBFS with 14.98 dB of gain reduction and THD+N around 4e−8 once past the onset; no
//!   sample ever exceeds ±1.0.
//! - Sanitizing: a bus block holding NaN or ±Inf (or samples so large, ~1e19, that their squares
//!   overflow) is replaced by silence and counted in [`Master::nonfinite_blocks`]; the limiter
//!   and gain state are left as they were.
//!
//! # SIMD
//! The per-sample loops (meter scan, fused meter + mix, master gain + knee + meter) are written
//! once over a private four-lane type: SSE on x86_64, simd128 on wasm32 built with `+simd128`, a
//! plain array elsewhere. Each lane runs the same IEEE operations in the same order, so the three
//! give bit-identical results; the tests hold the SIMD kernels to the portable ones and those to
//! a scalar f64 oracle. The auto-vectorized `chunks_exact(4)` form of the same loops was measured
//! 1.6–4× slower on wasm32 (lanes extracted and re-inserted) and gathered across chunks natively.
//! `unsafe` is confined to the lane type (SSE intrinsics, and unaligned loads/stores through
//! `&[f32; 4]`). The drift interpolator ([`crate::resample`]) uses the same lane type.
//!
//! A strip's meter + mix pass reads its source four frames at a time from a `Groups` source,
//! one channel at a time: a block in memory ([`Strip::mix_into`]), or the drift interpolator
//! producing the frames as it goes (`Strip::mix_groups_into`), so that a peer's audio goes from
//! the staging FIFO to the bus in one pass, metered on the way, without being stored in
//! between. Peaks are the square root of the largest square (`sqrt(fl(y·y)) == |y|` exactly in
//! binary32 while `y·y` is normal), so the meter costs a multiply, an add and a max per four
//! samples and needs no `abs` (three instructions in V8's simd128 code).
//!
//! # Example
//! One quantum of the engine's mix section:
//! ```
//! use tutti_core::mix::{solo_audible, Master, Strip, QUANTUM};
//!
//! let mut strips = [Strip::new(), Strip::new()];
//! strips[1].set_gain_db(-6.0);
//! strips[1].set_pan(-0.5);
//! let mut master = Master::new();
//! let (src_l, src_r) = ([0.9f32; QUANTUM], [0.9f32; QUANTUM]); // one peer's resampled block
//! let (mut out_l, mut out_r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
//! let any_solo = strips.iter().any(|s| s.solo());
//! for strip in strips.iter_mut() {
//!     let heard = solo_audible(any_solo, strip.solo(), strip.mute());
//!     strip.mix_into(&src_l, &src_r, &mut out_l, &mut out_r, heard);
//! }
//! master.process(&mut out_l, &mut out_r);
//! assert!(out_l.iter().chain(&out_r).all(|x| x.abs() <= 1.0));
//! assert!(strips[0].meter().peak_l > 0.89); // pre-fader source meter
//! ```
//!
//! # Real-time safety
//! Nothing here allocates, locks or panics. [`Strip::mix_into`], the fused
//! `Strip::mix_groups_into`, [`Master::process`] and every getter are render-path safe. The
//! setters are safe to call on the render thread too (`set_pan` evaluates one `sin` and one
//! `cos`, the `_db` setters one `powf`); the changes they make take effect, ramped, on the next
//! block. Meter and release coefficients call `exp()` only
//! when the block length changes.

use core::f32::consts::FRAC_PI_4;

/// Frames in one render quantum (the Web Audio block).
pub const QUANTUM: usize = 128;
/// The engine's sample rate, in Hz.
pub const SAMPLE_RATE: f32 = 48_000.0;
/// Largest linear gain a strip or the master accepts (+12.04 dB); larger requests are clamped.
pub const MAX_GAIN: f32 = 4.0;
/// Floor of the dB helpers: zero, negative, NaN or tiny linear values read as this many dB.
pub const MIN_DB: f32 = -120.0;
/// Limiter threshold, linear: −1 dBFS.
pub const LIMIT_THRESHOLD: f32 = 0.891_250_9;
/// Blocks over which the limiter holds the bus peak before releasing.
pub const LIMITER_HOLD_BLOCKS: usize = 8;
/// Limiter release time constant, in seconds.
pub const LIMITER_RELEASE_S: f32 = 0.15;
/// Meter peak hold, in frames (0.5 s).
pub const PEAK_HOLD_FRAMES: u32 = 24_000;
/// Meter peak fall-back after the hold, in dB per second.
pub const PEAK_FALL_DB_PER_S: f32 = 20.0;
/// Time constant of the one-pole RMS meter (on the mean square), in seconds.
pub const RMS_TAU_S: f32 = 0.3;

/// Linear values at or below this (−140 dB) are flushed to zero by the meters and read as
/// [`MIN_DB`], so a decayed meter reaches exactly zero instead of creeping through denormals.
const FLUSH_LIN: f32 = 1e-7;
/// The limiter gain snaps to exactly 1.0 once it has released to within this of it.
const RELEASE_SNAP: f32 = 1e-5;
/// Soft-knee constants: `y = 1 − KNEE_NUM / (|x| + KNEE_OFFSET)` above the threshold.
const KNEE_NUM: f32 = (1.0 - LIMIT_THRESHOLD) * (1.0 - LIMIT_THRESHOLD);
const KNEE_OFFSET: f32 = 1.0 - 2.0 * LIMIT_THRESHOLD;

/// Linear factor for a level in dB. NaN → 0.0; −∞ → 0.0; +∞ → +∞ (setters clamp).
pub fn db_to_lin(db: f32) -> f32 {
    if db.is_nan() {
        return 0.0;
    }
    10f32.powf(db / 20.0)
}

/// Level in dB of a linear magnitude (`20·log10`), never below [`MIN_DB`]: zero, negative, NaN and
/// values under −140 dB all read [`MIN_DB`].
pub fn lin_to_db(lin: f32) -> f32 {
    if lin > FLUSH_LIN {
        (20.0 * lin.log10()).max(MIN_DB)
    } else {
        MIN_DB
    }
}

/// The constant-power pan law: `(cos θ, sin θ)` with `θ = (pan + 1)·π/4`, for `pan` in [−1, 1]
/// (−1 = hard left). Out-of-range values are clamped; NaN reads as the centre. Both factors are
/// ≥ 0, and `gL² + gR² = 1` to f32 precision.
pub fn pan_gains(pan: f32) -> (f32, f32) {
    let p = if pan.is_nan() {
        0.0
    } else {
        pan.clamp(-1.0, 1.0)
    };
    let theta = (f64::from(p) + 1.0) * f64::from(FRAC_PI_4);
    ((theta.cos() as f32).max(0.0), (theta.sin() as f32).max(0.0))
}

/// Whether a strip is heard: mute always wins; otherwise, if any strip in the mix is soloed, only
/// the soloed strips are heard; with no solo anywhere, every unmuted strip is heard.
///
/// | any_solo | strip_solo | strip_mute | heard |
/// |---|---|---|---|
/// | – | – | true | no |
/// | false | – | false | yes |
/// | true | true | false | yes |
/// | true | false | false | no |
pub fn solo_audible(any_solo: bool, strip_solo: bool, strip_mute: bool) -> bool {
    !strip_mute && (strip_solo || !any_solo)
}

/// A meter reading: linear magnitudes (full scale = 1.0). Peaks are instant-attack with a
/// [`PEAK_HOLD_FRAMES`] hold and a [`PEAK_FALL_DB_PER_S`] fall; RMS is the square root of a
/// one-pole average of the mean square with time constant [`RMS_TAU_S`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Meter {
    /// Left peak, linear.
    pub peak_l: f32,
    /// Right peak, linear.
    pub peak_r: f32,
    /// Left RMS, linear.
    pub rms_l: f32,
    /// Right RMS, linear.
    pub rms_r: f32,
}

impl Meter {
    /// Left peak in dBFS (floor [`MIN_DB`]).
    pub fn peak_l_dbfs(&self) -> f32 {
        lin_to_db(self.peak_l)
    }
    /// Right peak in dBFS (floor [`MIN_DB`]).
    pub fn peak_r_dbfs(&self) -> f32 {
        lin_to_db(self.peak_r)
    }
    /// Left RMS in dBFS (floor [`MIN_DB`]); a full-scale sine reads −3.01.
    pub fn rms_l_dbfs(&self) -> f32 {
        lin_to_db(self.rms_l)
    }
    /// Right RMS in dBFS (floor [`MIN_DB`]).
    pub fn rms_r_dbfs(&self) -> f32 {
        lin_to_db(self.rms_r)
    }
    /// The louder of the two peaks, in dBFS.
    pub fn peak_dbfs(&self) -> f32 {
        lin_to_db(self.peak_l.max(self.peak_r))
    }
}

/// Peak and sum of squares of one block, per channel.
#[derive(Clone, Copy, Debug, Default)]
struct BlockStats {
    peak: [f32; 2],
    sumsq: [f32; 2],
}

impl BlockStats {
    /// False when the block held NaN, ±Inf or a sample whose square overflows.
    fn is_finite(&self) -> bool {
        (self.sumsq[0] + self.sumsq[1]).is_finite()
    }
}

/// Meter state: peaks, hold counters, mean squares and cached coefficients. The RMS values are
/// taken (square roots) only when the reading is asked for, not in every block.
#[derive(Clone, Copy, Debug, Default)]
struct MeterState {
    peak: [f32; 2],
    hold: [u32; 2],
    mean_sq: [f32; 2],
    coeff_frames: usize,
    inv_frames: f32,
    peak_decay: f32,
    rms_alpha: f32,
}

impl MeterState {
    /// The reading: peaks as held, RMS as the square roots of the mean squares.
    fn reading(&self) -> Meter {
        Meter {
            peak_l: self.peak[0],
            peak_r: self.peak[1],
            rms_l: self.mean_sq[0].sqrt(),
            rms_r: self.mean_sq[1].sqrt(),
        }
    }

    /// Fold one block of `n` frames into the reading. Once per block; `exp()` only when `n`
    /// differs from the previous block's.
    fn update(&mut self, n: usize, stats: &BlockStats) {
        if n != self.coeff_frames {
            let secs = n as f32 / SAMPLE_RATE;
            self.peak_decay = (-secs * PEAK_FALL_DB_PER_S * core::f32::consts::LN_10 / 20.0).exp();
            self.rms_alpha = 1.0 - (-secs / RMS_TAU_S).exp();
            self.inv_frames = 1.0 / n as f32;
            self.coeff_frames = n;
        }
        let frames = u32::try_from(n).unwrap_or(u32::MAX);
        for (ch, peak) in self.peak.iter_mut().enumerate() {
            let p = stats.peak[ch];
            if p >= *peak {
                *peak = p;
                self.hold[ch] = PEAK_HOLD_FRAMES;
            } else if self.hold[ch] > 0 {
                self.hold[ch] = self.hold[ch].saturating_sub(frames);
            } else {
                let fallen = *peak * self.peak_decay;
                *peak = if fallen > p { fallen } else { p };
                if *peak <= FLUSH_LIN {
                    *peak = 0.0;
                }
            }
        }
        for ch in 0..2 {
            let ms = &mut self.mean_sq[ch];
            *ms += (stats.sumsq[ch] * self.inv_frames - *ms) * self.rms_alpha;
            if *ms <= FLUSH_LIN * FLUSH_LIN {
                *ms = 0.0;
            }
        }
    }
}

/// `a > b ? a : b`: the same rule as the lanes' `max`, so scalar tails agree with SIMD bodies.
#[inline(always)]
fn max_sel(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// Four `f32` lanes. Kernels are written once over this trait; [`Simd`] picks SSE on x86_64 and
/// simd128 on wasm32 (built with `+simd128`), `lanes::portable::Portable` (a plain array)
/// elsewhere. Every operation is the same IEEE operation lane by lane, so all three give
/// bit-identical results (the tests compare the SIMD kernels with the portable ones). The crate's
/// other vector kernel, the drift interpolator in [`crate::resample`], uses it too.
///
/// Written by hand because the auto-vectorized `chunks_exact(4)` loops were measured to
/// vectorize across chunks (strided gathers) natively and to extract/replace lanes on wasm32.
pub(crate) trait Lanes:
    Copy
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Div<Output = Self>
{
    fn splat(x: f32) -> Self;
    fn from_array(a: [f32; 4]) -> Self;
    fn load(a: &[f32; 4]) -> Self;
    fn store(self, a: &mut [f32; 4]);
    fn to_array(self) -> [f32; 4];
    /// Lane-wise `self > other ? self : other`.
    fn max(self, other: Self) -> Self;
    fn abs(self) -> Self;
    /// Magnitude of `self` with the sign bit of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// Lane-wise `self > than ? then : otherwise`.
    fn select_gt(self, than: Self, then: Self, otherwise: Self) -> Self;
    /// The four overlapping vectors `x[k..k + 4]`, k = 0..4, of seven consecutive samples (the
    /// taps of four consecutive outputs of a 4-tap filter). Four unaligned loads.
    #[inline(always)]
    fn taps(x: &[f32; 7]) -> [Self; 4] {
        let at = |k: usize| -> &[f32; 4] {
            x[k..k + 4]
                .try_into()
                .expect("k + 4 <= 7: a 4-element window of 7")
        };
        [
            Self::load(at(0)),
            Self::load(at(1)),
            Self::load(at(2)),
            Self::load(at(3)),
        ]
    }
}

pub(crate) mod lanes {
    use super::Lanes;
    use core::ops::{Add, Div, Mul, Sub};

    /// Implements the four arithmetic operators of a lanes type with one binary function each.
    macro_rules! arith {
        ($t:ty, $add:expr, $sub:expr, $mul:expr, $div:expr) => {
            impl Add for $t {
                type Output = $t;
                #[inline(always)]
                fn add(self, o: $t) -> $t {
                    $add(self, o)
                }
            }
            impl Sub for $t {
                type Output = $t;
                #[inline(always)]
                fn sub(self, o: $t) -> $t {
                    $sub(self, o)
                }
            }
            impl Mul for $t {
                type Output = $t;
                #[inline(always)]
                fn mul(self, o: $t) -> $t {
                    $mul(self, o)
                }
            }
            impl Div for $t {
                type Output = $t;
                #[inline(always)]
                fn div(self, o: $t) -> $t {
                    $div(self, o)
                }
            }
        };
    }

    /// The portable fallback: a plain array, one scalar operation per lane.
    #[cfg(any(
        test,
        not(any(
            target_arch = "x86_64",
            all(target_arch = "wasm32", target_feature = "simd128")
        ))
    ))]
    pub mod portable {
        use super::*;

        #[derive(Clone, Copy, Debug)]
        pub struct Portable(pub [f32; 4]);

        #[inline(always)]
        fn zip(a: Portable, b: Portable, f: impl Fn(f32, f32) -> f32) -> Portable {
            Portable([
                f(a.0[0], b.0[0]),
                f(a.0[1], b.0[1]),
                f(a.0[2], b.0[2]),
                f(a.0[3], b.0[3]),
            ])
        }

        arith!(
            Portable,
            |a, b| zip(a, b, |x, y| x + y),
            |a, b| zip(a, b, |x, y| x - y),
            |a, b| zip(a, b, |x, y| x * y),
            |a, b| zip(a, b, |x, y| x / y)
        );

        impl Lanes for Portable {
            #[inline(always)]
            fn splat(x: f32) -> Self {
                Portable([x; 4])
            }
            #[inline(always)]
            fn from_array(a: [f32; 4]) -> Self {
                Portable(a)
            }
            #[inline(always)]
            fn load(a: &[f32; 4]) -> Self {
                Portable(*a)
            }
            #[inline(always)]
            fn store(self, a: &mut [f32; 4]) {
                *a = self.0;
            }
            #[inline(always)]
            fn to_array(self) -> [f32; 4] {
                self.0
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                zip(self, other, super::super::max_sel)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                Portable(self.0.map(f32::abs))
            }
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                zip(self, sign, f32::copysign)
            }
            #[inline(always)]
            fn select_gt(self, than: Self, then: Self, otherwise: Self) -> Self {
                let mut out = otherwise.0;
                for (k, o) in out.iter_mut().enumerate() {
                    if self.0[k] > than.0[k] {
                        *o = then.0[k];
                    }
                }
                Portable(out)
            }
        }
    }

    /// SSE, part of the x86_64 baseline, so no runtime detection.
    ///
    /// SAFETY (every `unsafe` block below): SSE and SSE2 exist on every x86_64 CPU; loads and
    /// stores go through `&[f32; 4]` / `&mut [f32; 4]`, so they stay in bounds, and they are the
    /// unaligned forms.
    #[cfg(target_arch = "x86_64")]
    pub mod sse {
        use super::*;
        use core::arch::x86_64::*;

        #[derive(Clone, Copy, Debug)]
        pub struct Sse(__m128);

        #[inline(always)]
        fn sign_mask() -> __m128 {
            unsafe { _mm_set1_ps(-0.0) }
        }

        arith!(
            Sse,
            |a: Sse, b: Sse| Sse(unsafe { _mm_add_ps(a.0, b.0) }),
            |a: Sse, b: Sse| Sse(unsafe { _mm_sub_ps(a.0, b.0) }),
            |a: Sse, b: Sse| Sse(unsafe { _mm_mul_ps(a.0, b.0) }),
            |a: Sse, b: Sse| Sse(unsafe { _mm_div_ps(a.0, b.0) })
        );

        impl Lanes for Sse {
            #[inline(always)]
            fn splat(x: f32) -> Self {
                Sse(unsafe { _mm_set1_ps(x) })
            }
            #[inline(always)]
            fn from_array(a: [f32; 4]) -> Self {
                Sse(unsafe { _mm_setr_ps(a[0], a[1], a[2], a[3]) })
            }
            #[inline(always)]
            fn load(a: &[f32; 4]) -> Self {
                Sse(unsafe { _mm_loadu_ps(a.as_ptr()) })
            }
            #[inline(always)]
            fn store(self, a: &mut [f32; 4]) {
                unsafe { _mm_storeu_ps(a.as_mut_ptr(), self.0) }
            }
            #[inline(always)]
            fn to_array(self) -> [f32; 4] {
                let mut a = [0.0; 4];
                self.store(&mut a);
                a
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                // MAXPS returns the first operand where it is greater, else the second.
                Sse(unsafe { _mm_max_ps(self.0, other.0) })
            }
            #[inline(always)]
            fn abs(self) -> Self {
                Sse(unsafe { _mm_andnot_ps(sign_mask(), self.0) })
            }
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                let m = sign_mask();
                Sse(unsafe { _mm_or_ps(_mm_andnot_ps(m, self.0), _mm_and_ps(m, sign.0)) })
            }
            #[inline(always)]
            fn select_gt(self, than: Self, then: Self, otherwise: Self) -> Self {
                Sse(unsafe {
                    let m = _mm_cmpgt_ps(self.0, than.0);
                    _mm_or_ps(_mm_and_ps(m, then.0), _mm_andnot_ps(m, otherwise.0))
                })
            }
        }
    }

    /// WebAssembly SIMD (the crate is built with `+simd128` for the browser).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pub mod wasm {
        use super::*;
        use core::arch::wasm32::*;

        #[derive(Clone, Copy, Debug)]
        pub struct Wasm(v128);

        arith!(
            Wasm,
            |a: Wasm, b: Wasm| Wasm(f32x4_add(a.0, b.0)),
            |a: Wasm, b: Wasm| Wasm(f32x4_sub(a.0, b.0)),
            |a: Wasm, b: Wasm| Wasm(f32x4_mul(a.0, b.0)),
            |a: Wasm, b: Wasm| Wasm(f32x4_div(a.0, b.0))
        );

        impl Lanes for Wasm {
            #[inline(always)]
            fn splat(x: f32) -> Self {
                Wasm(f32x4_splat(x))
            }
            #[inline(always)]
            fn from_array(a: [f32; 4]) -> Self {
                Wasm(f32x4(a[0], a[1], a[2], a[3]))
            }
            #[inline(always)]
            fn load(a: &[f32; 4]) -> Self {
                // SAFETY: `a` is 16 readable bytes; v128.load has no alignment requirement.
                Wasm(unsafe { v128_load(a.as_ptr().cast::<v128>()) })
            }
            #[inline(always)]
            fn store(self, a: &mut [f32; 4]) {
                // SAFETY: `a` is 16 writable bytes; v128.store has no alignment requirement.
                unsafe { v128_store(a.as_mut_ptr().cast::<v128>(), self.0) }
            }
            #[inline(always)]
            fn to_array(self) -> [f32; 4] {
                [
                    f32x4_extract_lane::<0>(self.0),
                    f32x4_extract_lane::<1>(self.0),
                    f32x4_extract_lane::<2>(self.0),
                    f32x4_extract_lane::<3>(self.0),
                ]
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                // pmax(a, b) = a < b ? b : a, i.e. other < self ? self : other.
                Wasm(f32x4_pmax(other.0, self.0))
            }
            #[inline(always)]
            fn abs(self) -> Self {
                Wasm(f32x4_abs(self.0))
            }
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                Wasm(v128_bitselect(sign.0, self.0, f32x4_splat(-0.0)))
            }
            #[inline(always)]
            fn select_gt(self, than: Self, then: Self, otherwise: Self) -> Self {
                Wasm(v128_bitselect(
                    then.0,
                    otherwise.0,
                    f32x4_gt(self.0, than.0),
                ))
            }
        }
    }
}

/// The lane type of this build: SSE, simd128, or the portable array.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) type Simd = lanes::wasm::Wasm;
/// The lane type of this build: SSE, simd128, or the portable array.
#[cfg(target_arch = "x86_64")]
pub(crate) type Simd = lanes::sse::Sse;
/// The lane type of this build: SSE, simd128, or the portable array.
#[cfg(not(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
)))]
pub(crate) type Simd = lanes::portable::Portable;

/// Whole four-frame groups of a slice, as arrays (the remainder is left to a scalar tail).
#[inline(always)]
fn quads(s: &[f32]) -> impl Iterator<Item = &[f32; 4]> {
    s.chunks_exact(4).filter_map(|c| c.try_into().ok())
}

/// Mutable counterpart of [`quads`].
#[inline(always)]
fn quads_mut(s: &mut [f32]) -> impl Iterator<Item = &mut [f32; 4]> {
    s.chunks_exact_mut(4).filter_map(|c| c.try_into().ok())
}

/// Per-lane largest square and sum of squares of one channel.
///
/// The peak is the square root of the largest square: in binary32 with round-to-nearest,
/// `sqrt(fl(y·y)) == |y|` exactly whenever `y·y` is normal (1.1e-19 < |y| < 1.8e19; checked
/// for every f32 in [1, 4), which covers all exponents by exact scaling by 4). The square is
/// needed for the mean square anyway, so the peak costs one `max` per four samples and no `abs`
/// (three instructions in V8's simd128 code). Smaller samples read as a peak below 1.1e-19
/// (−380 dBFS; the meters floor at −140 dB); larger ones overflow the square and mark the block
/// non-finite, as their sum of squares always did.
#[derive(Clone, Copy)]
struct ChAcc<V> {
    square_max: V,
    sumsq: V,
}

impl<V: Lanes> ChAcc<V> {
    #[inline(always)]
    fn new() -> Self {
        let z = V::splat(0.0);
        Self {
            square_max: z,
            sumsq: z,
        }
    }

    #[inline(always)]
    fn add(&mut self, y: V) {
        let y2 = y * y;
        self.sumsq = self.sumsq + y2;
        self.square_max = y2.max(self.square_max);
    }

    /// Folds the lanes (fixed order) and the scalar tail's `[square_max, sumsq]` into
    /// `(peak, sumsq)`.
    #[inline(always)]
    fn finish(self, tail: [f32; 2]) -> (f32, f32) {
        let (p, s) = (self.square_max.to_array(), self.sumsq.to_array());
        let square_max = max_sel(max_sel(max_sel(p[0], p[1]), max_sel(p[2], p[3])), tail[0]);
        (square_max.sqrt(), ((s[0] + s[1]) + (s[2] + s[3])) + tail[1])
    }
}

/// [`ChAcc`] for both channels.
#[derive(Clone, Copy)]
struct Acc<V>([ChAcc<V>; 2]);

impl<V: Lanes> Acc<V> {
    #[inline(always)]
    fn new() -> Self {
        Self([ChAcc::new(), ChAcc::new()])
    }

    #[inline(always)]
    fn add(&mut self, a: V, b: V) {
        self.0[0].add(a);
        self.0[1].add(b);
    }

    /// Folds the lanes and the scalar tail's `[square_max, sumsq]` per channel.
    #[inline(always)]
    fn finish(self, tail: [[f32; 2]; 2]) -> BlockStats {
        let (pl, sl) = self.0[0].finish(tail[0]);
        let (pr, sr) = self.0[1].finish(tail[1]);
        BlockStats {
            peak: [pl, pr],
            sumsq: [sl, sr],
        }
    }
}

/// Scalar tail accumulation of one channel: `acc = [square_max, sumsq]`.
#[inline(always)]
fn tail_add1(acc: &mut [f32; 2], y: f32) {
    let y2 = y * y;
    acc[0] = max_sel(y2, acc[0]);
    acc[1] += y2;
}

/// Scalar tail accumulation: `acc[ch] = [square_max, sumsq]`.
#[inline(always)]
fn tail_add(acc: &mut [[f32; 2]; 2], a: f32, b: f32) {
    tail_add1(&mut acc[0], a);
    tail_add1(&mut acc[1], b);
}

/// A stereo source that the strip kernels consume four frames at a time, in one pass per
/// channel with the matching four frames of the bus, so that a source computed on the fly (the
/// drift interpolator, [`crate::resample`]) never goes through memory. The source drives the loop,
/// which lets it keep its own state (filter weights) in registers; one channel at a time keeps
/// the loop's live vectors within the 16 registers V8 and SSE have (both channels at once
/// spilled the meter accumulators to the stack in every iteration).
pub(crate) trait Groups<V> {
    /// Calls `f(y, out)` for each whole group of four frames of `out`, in order, with channel
    /// `ch`'s (0 left, 1 right) next four frames; stops early when the source runs out.
    fn for_each(&self, ch: usize, out: &mut [f32], f: impl FnMut(V, &mut [f32; 4]));
}

/// A stereo block in memory as a [`Groups`] source (loaded four frames at a time).
#[derive(Clone, Copy)]
struct Loaded<'a> {
    l: &'a [f32],
    r: &'a [f32],
}

impl<V: Lanes> Groups<V> for Loaded<'_> {
    #[inline(always)]
    fn for_each(&self, ch: usize, out: &mut [f32], mut f: impl FnMut(V, &mut [f32; 4])) {
        let src = if ch == 0 { self.l } else { self.r };
        for (x, d) in quads(src).zip(quads_mut(out)) {
            f(V::load(x), d);
        }
    }
}

/// Peak and sum of squares of the first `n` frames of a stereo block (read only).
#[inline]
fn scan<V: Lanes>(l: &[f32], r: &[f32], n: usize) -> BlockStats {
    let (l, r) = (&l[..n], &r[..n]);
    let mut acc = Acc::<V>::new();
    for (a, b) in quads(l).zip(quads(r)) {
        acc.add(V::load(a), V::load(b));
    }
    let tail = n - n % 4;
    let mut t = [[0.0; 2]; 2];
    for (&a, &b) in l[tail..].iter().zip(&r[tail..]) {
        tail_add(&mut t, a, b);
    }
    acc.finish(t)
}

/// One fused pass per channel: meters the source and adds `src × gain` into `out` (`MIX`), or
/// only meters it (`!MIX`: `out` is not written). The source is `groups` (four frames at a
/// time, over the whole groups of `out`) followed by the scalar `tail` (the rest of `out`).
/// Gain of frame `i` is `g0 + step·(i + 1)` per channel (`RAMP`), or `g0` (`!RAMP`).
#[inline(always)]
fn mix_groups<V: Lanes, const MIX: bool, const RAMP: bool>(
    groups: &impl Groups<V>,
    tail: [&[f32]; 2],
    out_l: &mut [f32],
    out_r: &mut [f32],
    g0: [f32; 2],
    step: [f32; 2],
) -> BlockStats {
    let n = out_l.len().min(out_r.len());
    let full = n - tail[0].len().min(tail[1].len()).min(n);
    let mut stats = BlockStats::default();
    for (ch, out) in [out_l, out_r].into_iter().enumerate() {
        let (out, out_tail) = out[..n].split_at_mut(full);
        let mut acc = ChAcc::<V>::new();
        let (g0v, stv, four) = (V::splat(g0[ch]), V::splat(step[ch]), V::splat(4.0));
        let mut idx = V::from_array([1.0, 2.0, 3.0, 4.0]);
        groups.for_each(ch, out, |y, d| {
            acc.add(y);
            if MIX {
                let g = if RAMP { g0v + stv * idx } else { g0v };
                (V::load(d) + y * g).store(d);
                if RAMP {
                    idx = idx + four;
                }
            }
        });
        let mut k = (full + 1) as f32;
        let mut t = [0.0; 2];
        for (&y, d) in tail[ch].iter().zip(out_tail.iter_mut()) {
            tail_add1(&mut t, y);
            if MIX {
                let g = if RAMP { g0[ch] + step[ch] * k } else { g0[ch] };
                *d += y * g;
            }
            k += 1.0;
        }
        (stats.peak[ch], stats.sumsq[ch]) = acc.finish(t);
    }
    stats
}

/// [`mix_groups`] over the first `n` frames of a stereo block in memory.
#[cfg(test)]
fn mix_block<V: Lanes, const RAMP: bool>(
    src: [&[f32]; 2],
    out_l: &mut [f32],
    out_r: &mut [f32],
    n: usize,
    g0: [f32; 2],
    step: [f32; 2],
) -> BlockStats {
    let (sl, sr) = (&src[0][..n], &src[1][..n]);
    let full = n - n % 4;
    mix_groups::<V, true, RAMP>(
        &Loaded {
            l: &sl[..full],
            r: &sr[..full],
        },
        [&sl[full..], &sr[full..]],
        &mut out_l[..n],
        &mut out_r[..n],
        g0,
        step,
    )
}

/// One peer's channel strip. See the module docs for the pan law and the smoothing.
#[derive(Clone, Debug)]
pub struct Strip {
    gain: f32,
    pan: f32,
    pan_lr: [f32; 2],
    mute: bool,
    solo: bool,
    /// Effective left/right factors reached at the end of the last block.
    current: [f32; 2],
    meter: MeterState,
    nonfinite_blocks: u64,
}

impl Default for Strip {
    fn default() -> Self {
        Self::new()
    }
}

impl Strip {
    /// Unity gain, centre, unmuted, not soloed; silent until its first block fades it in.
    pub fn new() -> Self {
        let (l, r) = pan_gains(0.0);
        Self {
            gain: 1.0,
            pan: 0.0,
            pan_lr: [l, r],
            mute: false,
            solo: false,
            current: [0.0; 2],
            meter: MeterState::default(),
            nonfinite_blocks: 0,
        }
    }

    /// Sets the linear fader gain. Clamped to [0, [`MAX_GAIN`]] (negative → 0, +∞ → `MAX_GAIN`);
    /// NaN is ignored.
    pub fn set_gain(&mut self, gain: f32) {
        if !gain.is_nan() {
            self.gain = gain.clamp(0.0, MAX_GAIN);
        }
    }

    /// Sets the fader in dB (−∞ → silence, above +12.04 dB clamped); NaN is ignored.
    pub fn set_gain_db(&mut self, db: f32) {
        if !db.is_nan() {
            self.set_gain(db_to_lin(db));
        }
    }

    /// The fader's linear gain.
    pub fn gain(&self) -> f32 {
        self.gain
    }

    /// The fader in dB (floor [`MIN_DB`]).
    pub fn gain_db(&self) -> f32 {
        lin_to_db(self.gain)
    }

    /// Sets the pan, −1 (hard left) … 1 (hard right), clamped; NaN is ignored.
    pub fn set_pan(&mut self, pan: f32) {
        if !pan.is_nan() {
            self.pan = pan.clamp(-1.0, 1.0);
            let (l, r) = pan_gains(self.pan);
            self.pan_lr = [l, r];
        }
    }

    /// The pan position.
    pub fn pan(&self) -> f32 {
        self.pan
    }

    /// Mutes or unmutes (ramped over the next block). A muted strip is silent whatever `audible`
    /// says.
    pub fn set_mute(&mut self, mute: bool) {
        self.mute = mute;
    }

    /// Whether the strip is muted.
    pub fn mute(&self) -> bool {
        self.mute
    }

    /// Sets the solo flag. The strip only records it: the engine combines all strips' flags with
    /// [`solo_audible`] and passes the result as `audible`.
    pub fn set_solo(&mut self, solo: bool) {
        self.solo = solo;
    }

    /// Whether the strip is soloed.
    pub fn solo(&self) -> bool {
        self.solo
    }

    /// The left/right factors the strip will apply once the current ramp (if any) has finished,
    /// for the given audibility.
    pub fn target_gains(&self, audible: bool) -> [f32; 2] {
        if audible && !self.mute {
            [self.gain * self.pan_lr[0], self.gain * self.pan_lr[1]]
        } else {
            [0.0; 2]
        }
    }

    /// The left/right factors reached at the end of the last block.
    pub fn current_gains(&self) -> [f32; 2] {
        self.current
    }

    /// Meters the source block (pre-fader) and adds it, gained and panned, into the bus.
    ///
    /// Processes `n = min` of the four lengths; frames beyond `n` are not read or written.
    /// `audible` is the engine's [`solo_audible`] result; `false` (or a muted strip) ramps the
    /// contribution to zero over this block, after which the bus is not touched while the source
    /// is still metered. A source block holding NaN/Inf is counted and left out of the meters
    /// (whatever reaches the bus is cleaned by [`Master::process`]). Real-time safe.
    pub fn mix_into(
        &mut self,
        src_l: &[f32],
        src_r: &[f32],
        out_l: &mut [f32],
        out_r: &mut [f32],
        audible: bool,
    ) {
        let n = src_l
            .len()
            .min(src_r.len())
            .min(out_l.len())
            .min(out_r.len());
        if n == 0 {
            return;
        }
        let (src_l, src_r) = (&src_l[..n], &src_r[..n]);
        let full = n - n % 4;
        self.mix_source(
            &Loaded {
                l: &src_l[..full],
                r: &src_r[..full],
            },
            [&src_l[full..], &src_r[full..]],
            &mut out_l[..n],
            &mut out_r[..n],
            audible,
        );
    }

    /// Whether this block leaves the bus untouched: the strip is silent (muted, inaudible or at
    /// zero gain) and has finished ramping out. [`Strip::mix_into`] then only meters the source,
    /// so a caller that has to compute the source may meter a cheaper stand-in instead.
    pub fn is_silent(&self, audible: bool) -> bool {
        self.current == [0.0; 2] && self.target_gains(audible) == [0.0; 2]
    }

    /// [`Strip::mix_into`] for a source produced four frames at a time while it is mixed (the
    /// drift interpolator), so that it never goes through memory: `groups` supplies
    /// `out_l.len() / 4` groups. `out_l` and `out_r` must be equally long, a multiple of 4.
    /// Real-time safe.
    pub(crate) fn mix_groups_into(
        &mut self,
        groups: &impl Groups<Simd>,
        out_l: &mut [f32],
        out_r: &mut [f32],
        audible: bool,
    ) {
        self.mix_source(groups, [&[], &[]], out_l, out_r, audible);
    }

    /// The strip's block: ramp, steady or silent kernel over `groups` then `tail`, then the
    /// meters. `out_l`/`out_r` are as long as the source.
    #[inline(always)]
    fn mix_source(
        &mut self,
        groups: &impl Groups<Simd>,
        tail: [&[f32]; 2],
        out_l: &mut [f32],
        out_r: &mut [f32],
        audible: bool,
    ) {
        let n = out_l.len().min(out_r.len());
        if n == 0 {
            return;
        }
        let target = self.target_gains(audible);
        let stats = if target != self.current {
            let inv_n = 1.0 / n as f32;
            let step = [
                (target[0] - self.current[0]) * inv_n,
                (target[1] - self.current[1]) * inv_n,
            ];
            mix_groups::<Simd, true, true>(groups, tail, out_l, out_r, self.current, step)
        } else if target == [0.0; 2] {
            mix_groups::<Simd, false, false>(groups, tail, out_l, out_r, target, target)
        } else {
            mix_groups::<Simd, true, false>(groups, tail, out_l, out_r, target, [0.0; 2])
        };
        self.current = target;
        if stats.is_finite() {
            self.meter.update(n, &stats);
        } else {
            self.nonfinite_blocks += 1;
        }
    }

    /// The source meter (pre-fader: what the peer sends).
    pub fn meter(&self) -> Meter {
        self.meter.reading()
    }

    /// Source blocks that held NaN or ±Inf (not metered).
    pub fn nonfinite_blocks(&self) -> u64 {
        self.nonfinite_blocks
    }
}

/// Applies `t0 + step·(i + 1)` to the first `n` frames, then the soft knee (`KNEE`), and returns
/// the output's stats for the meters.
#[inline]
fn apply_gain<V: Lanes, const KNEE: bool>(
    l: &mut [f32],
    r: &mut [f32],
    n: usize,
    t0: f32,
    step: f32,
) -> BlockStats {
    let (l, r) = (&mut l[..n], &mut r[..n]);
    let mut acc = Acc::<V>::new();
    let (t0v, stv, four) = (V::splat(t0), V::splat(step), V::splat(4.0));
    let mut idx = V::from_array([1.0, 2.0, 3.0, 4.0]);
    for (cl, cr) in quads_mut(&mut l[..]).zip(quads_mut(&mut r[..])) {
        let g = t0v + stv * idx;
        let (mut a, mut b) = (V::load(cl) * g, V::load(cr) * g);
        if KNEE {
            a = knee_lanes(a);
            b = knee_lanes(b);
        }
        a.store(cl);
        b.store(cr);
        acc.add(a, b);
        idx = idx + four;
    }
    let tail = n - n % 4;
    let mut k = (tail + 1) as f32;
    let mut t = [[0.0; 2]; 2];
    for (a, b) in l[tail..].iter_mut().zip(&mut r[tail..]) {
        let g = t0 + step * k;
        *a *= g;
        *b *= g;
        if KNEE {
            *a = knee(*a);
            *b = knee(*b);
        }
        tail_add(&mut t, *a, *b);
        k += 1.0;
    }
    acc.finish(t)
}

/// The limiter's soft knee: identity up to [`LIMIT_THRESHOLD`], then
/// `sign(x)·(1 − (1 − T)²/(|x| + 1 − 2T))`: continuous with slope 1 at `T`, below 1.0 for every
/// finite input (and exactly 1.0 for ±∞).
#[inline(always)]
fn knee(x: f32) -> f32 {
    let a = x.abs();
    let soft = (1.0 - KNEE_NUM / (a + KNEE_OFFSET)).copysign(x);
    if a > LIMIT_THRESHOLD {
        soft
    } else {
        x
    }
}

/// [`knee`] on four lanes (bit-identical per lane).
#[inline(always)]
fn knee_lanes<V: Lanes>(x: V) -> V {
    let a = x.abs();
    let soft = (V::splat(1.0) - V::splat(KNEE_NUM) / (a + V::splat(KNEE_OFFSET))).copysign(x);
    a.select_gt(V::splat(LIMIT_THRESHOLD), soft, x)
}

/// The master section: smoothed master gain, soft limiter, output meters. See the module docs
/// for the limiter design.
#[derive(Clone, Debug)]
pub struct Master {
    gain: f32,
    /// Master gain reached at the end of the last block.
    gain_current: f32,
    /// Limiter gain reached at the end of the last block (≤ 1).
    limiter: f32,
    /// Total factor (master × limiter) at the end of the last block.
    total: f32,
    /// Raw bus peaks of the last `LIMITER_HOLD_BLOCKS` blocks.
    held: [f32; LIMITER_HOLD_BLOCKS],
    held_pos: usize,
    release_frames: usize,
    release_alpha: f32,
    meter: MeterState,
    nonfinite_blocks: u64,
    knee_blocks: u64,
}

impl Default for Master {
    fn default() -> Self {
        Self::new()
    }
}

impl Master {
    /// Unity master gain, limiter idle (passes a bus below −1 dBFS bit-exact from the first block).
    pub fn new() -> Self {
        Self {
            gain: 1.0,
            gain_current: 1.0,
            limiter: 1.0,
            total: 1.0,
            held: [0.0; LIMITER_HOLD_BLOCKS],
            held_pos: 0,
            release_frames: 0,
            release_alpha: 0.0,
            meter: MeterState::default(),
            nonfinite_blocks: 0,
            knee_blocks: 0,
        }
    }

    /// Sets the linear master gain, clamped to [0, [`MAX_GAIN`]]; NaN is ignored. Ramped over the
    /// next block.
    pub fn set_gain(&mut self, gain: f32) {
        if !gain.is_nan() {
            self.gain = gain.clamp(0.0, MAX_GAIN);
        }
    }

    /// Sets the master gain in dB (−∞ → silence, above +12.04 dB clamped); NaN is ignored.
    pub fn set_gain_db(&mut self, db: f32) {
        if !db.is_nan() {
            self.set_gain(db_to_lin(db));
        }
    }

    /// The master gain, linear.
    pub fn gain(&self) -> f32 {
        self.gain
    }

    /// The master gain in dB (floor [`MIN_DB`]).
    pub fn gain_db(&self) -> f32 {
        lin_to_db(self.gain)
    }

    /// Master gain, limiter, soft knee and output meters, in place. Real-time safe.
    ///
    /// Processes `n = min(l.len(), r.len())` frames; if the lengths differ, the longer slice's
    /// extra frames are zeroed (so nothing unlimited is left in the output). Afterwards every
    /// sample is finite and within ±1.0.
    pub fn process(&mut self, l: &mut [f32], r: &mut [f32]) {
        let n = l.len().min(r.len());
        if l.len() != r.len() {
            l[n..].fill(0.0);
            r[n..].fill(0.0);
        }
        if n == 0 {
            return;
        }
        let input = scan::<Simd>(l, r, n);
        if !input.is_finite() {
            l.fill(0.0);
            r.fill(0.0);
            self.nonfinite_blocks += 1;
            self.meter.update(n, &BlockStats::default());
            return;
        }

        // Gain computer on the held peak of the gained bus.
        let peak = max_sel(input.peak[0], input.peak[1]);
        self.held[self.held_pos] = peak;
        self.held_pos = (self.held_pos + 1) % LIMITER_HOLD_BLOCKS;
        let held = self.held.iter().fold(0.0, |m, &p| max_sel(p, m));
        let gain_max = max_sel(self.gain, self.gain_current);
        let loudest = held * gain_max;
        let wanted = if loudest > LIMIT_THRESHOLD {
            LIMIT_THRESHOLD / loudest
        } else {
            1.0
        };
        let released = if self.limiter < 1.0 {
            if n != self.release_frames {
                self.release_alpha = 1.0 - (-(n as f32) / (SAMPLE_RATE * LIMITER_RELEASE_S)).exp();
                self.release_frames = n;
            }
            let g = self.limiter + (1.0 - self.limiter) * self.release_alpha;
            if g >= 1.0 - RELEASE_SNAP {
                1.0
            } else {
                g
            }
        } else {
            1.0
        };
        let limiter = if wanted < released { wanted } else { released };
        let total = self.gain * limiter;

        // Worst case over the block: the ramp stays between its two ends.
        let worst = peak * max_sel(self.total, total);
        let output = if self.total == 1.0 && total == 1.0 && worst <= LIMIT_THRESHOLD {
            input
        } else {
            let step = (total - self.total) / n as f32;
            if worst > LIMIT_THRESHOLD {
                let out = apply_gain::<Simd, true>(l, r, n, self.total, step);
                if max_sel(out.peak[0], out.peak[1]) > LIMIT_THRESHOLD {
                    self.knee_blocks += 1;
                }
                out
            } else {
                apply_gain::<Simd, false>(l, r, n, self.total, step)
            }
        };
        self.gain_current = self.gain;
        self.limiter = limiter;
        self.total = total;
        self.meter.update(n, &output);
    }

    /// The output meter (after the limiter).
    pub fn meter(&self) -> Meter {
        self.meter.reading()
    }

    /// Current limiter gain reduction in dB, ≥ 0 (0.0 exactly when the limiter is idle). The
    /// soft knee's extra reduction on overshooting samples is not included; see
    /// [`Master::knee_blocks`].
    pub fn gain_reduction_db(&self) -> f32 {
        if self.limiter >= 1.0 {
            0.0
        } else {
            -lin_to_db(self.limiter)
        }
    }

    /// Current limiter gain, linear (1.0 = idle).
    pub fn limiter_gain(&self) -> f32 {
        self.limiter
    }

    /// Bus blocks replaced by silence because they held NaN or ±Inf.
    pub fn nonfinite_blocks(&self) -> u64 {
        self.nonfinite_blocks
    }

    /// Blocks in which the soft knee shaped at least one sample (the envelope lagged a sudden
    /// rise; normally only the first block of a loud onset).
    pub fn knee_blocks(&self) -> u64 {
        self.knee_blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;
    use core::f64::consts::PI;

    fn sine(freq: f64, amp: f64, start: usize, n: usize) -> Vec<f32> {
        (start..start + n)
            .map(|i| (amp * (2.0 * PI * freq * i as f64 / f64::from(SAMPLE_RATE)).sin()) as f32)
            .collect()
    }

    /// Least-squares amplitude of a sine at `freq` over `y` (an integer number of periods), and
    /// the RMS of what is left, relative to the fitted sine (THD+N).
    fn fit_sine(y: &[f32], freq: f64) -> (f64, f64) {
        let n = y.len() as f64;
        let w = 2.0 * PI * freq / f64::from(SAMPLE_RATE);
        let (mut s, mut c) = (0.0, 0.0);
        for (i, &v) in y.iter().enumerate() {
            s += f64::from(v) * (w * i as f64).sin();
            c += f64::from(v) * (w * i as f64).cos();
        }
        let (a, b) = (2.0 * s / n, 2.0 * c / n);
        let mut res = 0.0;
        for (i, &v) in y.iter().enumerate() {
            let fit = a * (w * i as f64).sin() + b * (w * i as f64).cos();
            res += (f64::from(v) - fit).powi(2);
        }
        let amp = a.hypot(b);
        let fit_rms = amp / 2f64.sqrt();
        (amp, (res / n).sqrt() / fit_rms)
    }

    /// Frequency from interpolated upward zero crossings.
    fn zero_crossing_freq(y: &[f32]) -> f64 {
        let mut first = None;
        let mut last = 0.0;
        let mut count = 0usize;
        for i in 1..y.len() {
            let (a, b) = (f64::from(y[i - 1]), f64::from(y[i]));
            if a < 0.0 && b >= 0.0 {
                let t = (i - 1) as f64 + a / (a - b);
                first.get_or_insert(t);
                last = t;
                count += 1;
            }
        }
        let first = first.expect("test signal crosses zero");
        (count - 1) as f64 * f64::from(SAMPLE_RATE) / (last - first)
    }

    /// Runs one strip over a whole signal in QUANTUM blocks, into a zeroed bus; returns the bus.
    fn run_strip(strip: &mut Strip, l: &[f32], r: &[f32], audible: bool) -> (Vec<f32>, Vec<f32>) {
        let mut out_l = vec![0.0; l.len()];
        let mut out_r = vec![0.0; l.len()];
        for (((sl, sr), ol), or) in l
            .chunks(QUANTUM)
            .zip(r.chunks(QUANTUM))
            .zip(out_l.chunks_mut(QUANTUM))
            .zip(out_r.chunks_mut(QUANTUM))
        {
            strip.mix_into(sl, sr, ol, or, audible);
        }
        (out_l, out_r)
    }

    fn run_master(master: &mut Master, l: &mut [f32], r: &mut [f32]) {
        for (bl, br) in l.chunks_mut(QUANTUM).zip(r.chunks_mut(QUANTUM)) {
            master.process(bl, br);
        }
    }

    const CENTRE: f32 = core::f32::consts::FRAC_1_SQRT_2;

    #[test]
    fn pan_law_is_constant_power() {
        // Tolerance: gL² + gR² = 1 within 1e-6 over a 2001-point grid; centre −3.0103 dB ± 1e-3.
        let mut prev = (f32::INFINITY, -1.0);
        for k in 0..=2000 {
            let p = -1.0 + k as f32 / 1000.0;
            let (gl, gr) = pan_gains(p);
            assert!(
                (gl * gl + gr * gr - 1.0).abs() <= 1e-6,
                "pan {p}: {gl} {gr}"
            );
            assert!(gl >= 0.0 && gr >= 0.0);
            assert!(gl <= prev.0 && gr >= prev.1, "monotonic at {p}");
            prev = (gl, gr);
        }
        let (gl, gr) = pan_gains(0.0);
        assert_eq!(gl, gr);
        assert!((gl - CENTRE).abs() <= 1e-7);
        assert!((lin_to_db(gl) + 3.0103).abs() <= 1e-3, "{}", lin_to_db(gl));
        let (l, r) = pan_gains(-1.0);
        assert!(l == 1.0 && r <= 1e-7);
        let (l, r) = pan_gains(1.0);
        assert!(r == 1.0 && l <= 1e-7);
        // Out of range clamps, NaN reads as the centre.
        assert_eq!(pan_gains(3.0), pan_gains(1.0));
        assert_eq!(pan_gains(f32::NEG_INFINITY), pan_gains(-1.0));
        assert_eq!(pan_gains(f32::NAN), pan_gains(0.0));
    }

    #[test]
    fn strip_pans_a_mono_source_and_balances_a_stereo_one() {
        // Tolerance 1e-6 on the settled factors.
        for &p in &[-1.0f32, -0.5, 0.0, 0.3, 1.0] {
            let mut s = Strip::new();
            s.set_gain(0.5);
            s.set_pan(p);
            let dc = vec![0.8f32; 2 * QUANTUM];
            let (ol, or) = run_strip(&mut s, &dc, &dc, true);
            let (gl, gr) = pan_gains(p);
            for i in QUANTUM..2 * QUANTUM {
                assert!((ol[i] - 0.8 * 0.5 * gl).abs() <= 1e-6, "pan {p} left");
                assert!((or[i] - 0.8 * 0.5 * gr).abs() <= 1e-6, "pan {p} right");
            }
        }
        // Stereo: hard right keeps the right input only; the left input is not folded over.
        let mut s = Strip::new();
        s.set_pan(1.0);
        let ones = vec![1.0f32; 2 * QUANTUM];
        let zeros = vec![0.0f32; 2 * QUANTUM];
        let (ol, or) = run_strip(&mut s, &ones, &zeros, true);
        assert!(ol[QUANTUM..].iter().all(|&x| x.abs() <= 1e-7));
        assert!(or.iter().all(|&x| x == 0.0));
        // Hard left: the left input at unity, +3.01 dB relative to the centre.
        s.set_pan(-1.0);
        let (ol, _) = run_strip(&mut s, &ones, &zeros, true);
        assert!(ol[QUANTUM..].iter().all(|&x| (x - 1.0).abs() <= 1e-6));
    }

    #[test]
    fn gain_step_ramps_linearly_over_exactly_one_quantum() {
        // Tolerance 1e-6 on every ramp sample; consecutive steps within 1e-6 of the increment.
        let mut s = Strip::new();
        let dc = vec![1.0f32; 4 * QUANTUM];
        run_strip(&mut s, &dc[..QUANTUM], &dc[..QUANTUM], true);
        assert_eq!(s.current_gains(), [CENTRE; 2]);
        s.set_gain(0.25);
        let (ol, or) = run_strip(&mut s, &dc[..2 * QUANTUM], &dc[..2 * QUANTUM], true);
        let (from, to) = (CENTRE, 0.25 * CENTRE);
        let inc = (to - from) / QUANTUM as f32;
        let mut prev = from;
        for i in 0..QUANTUM {
            let want = from + inc * (i + 1) as f32;
            assert!(
                (ol[i] - want).abs() <= 1e-6,
                "sample {i}: {} vs {want}",
                ol[i]
            );
            assert_eq!(ol[i], or[i]);
            let step = ol[i] - prev;
            assert!((step - inc).abs() <= 1e-6, "step {i}: {step} vs {inc}");
            prev = ol[i];
        }
        assert!((ol[QUANTUM - 1] - to).abs() <= 1e-6);
        // The ramp is over: the next quantum is flat at the target, exactly.
        assert!(ol[QUANTUM..].iter().all(|&x| x == to));
    }

    #[test]
    fn solo_and_mute_truth_table() {
        // Exact: every combination of (any_solo, strip_solo, strip_mute).
        let table = [
            (false, false, false, true),
            (false, false, true, false),
            (false, true, false, true),
            (false, true, true, false),
            (true, false, false, false),
            (true, false, true, false),
            (true, true, false, true),
            (true, true, true, false),
        ];
        for (any, solo, mute, heard) in table {
            assert_eq!(solo_audible(any, solo, mute), heard, "{any} {solo} {mute}");
        }
        let mut s = Strip::new();
        s.set_solo(true);
        s.set_mute(true);
        assert!(s.solo() && s.mute());
        // A muted strip is silent even if the caller says audible.
        assert_eq!(s.target_gains(true), [0.0; 2]);
    }

    #[test]
    fn mute_ramps_out_then_leaves_the_bus_untouched_and_unmute_ramps_in() {
        // Exact: untouched bus is bit-identical; ramps within 1e-6 of linear.
        let mut rng = Rng::new(7);
        let mut s = Strip::new();
        let dc = vec![1.0f32; QUANTUM];
        let (mut ol, mut or) = (vec![0.0; QUANTUM], vec![0.0; QUANTUM]);
        s.mix_into(&dc, &dc, &mut ol, &mut or, true);
        s.set_mute(true);
        assert!(!s.is_silent(true), "still has to ramp out");
        ol.fill(0.0);
        s.mix_into(&dc, &dc, &mut ol, &mut or, true);
        assert!(s.is_silent(true) && s.is_silent(false));
        let inc = -CENTRE / QUANTUM as f32;
        for (i, &x) in ol.iter().enumerate() {
            assert!((x - (CENTRE + inc * (i + 1) as f32)).abs() <= 1e-6);
        }
        assert!(ol[QUANTUM - 1].abs() <= 1e-6);
        for _ in 0..10 {
            let bus: Vec<f32> = (0..QUANTUM).map(|_| rng.uniform_f32(-1.0, 1.0)).collect();
            let (mut bl, mut br) = (bus.clone(), bus.clone());
            s.mix_into(&dc, &dc, &mut bl, &mut br, true);
            assert_eq!(bl, bus);
            assert_eq!(br, bus);
        }
        s.set_mute(false);
        assert!(!s.is_silent(true) && s.is_silent(false));
        ol.fill(0.0);
        s.mix_into(&dc, &dc, &mut ol, &mut or, true);
        let inc = CENTRE / QUANTUM as f32;
        let mut prev = 0.0;
        for &x in &ol {
            assert!((x - prev - inc).abs() <= 1e-6, "unmute step");
            prev = x;
        }
    }

    #[test]
    fn inaudible_strip_adds_nothing_after_its_ramp_but_keeps_metering() {
        // Exact: after the ramp block the bus is bit-identical; meter peak equals the source peak.
        let mut rng = Rng::new(11);
        let mut s = Strip::new();
        let src: Vec<f32> = (0..QUANTUM).map(|_| rng.uniform_f32(-0.5, 0.5)).collect();
        let (mut ol, mut or) = (vec![0.0; QUANTUM], vec![0.0; QUANTUM]);
        s.mix_into(&src, &src, &mut ol, &mut or, true);
        s.mix_into(&src, &src, &mut ol, &mut or, false);
        assert_eq!(s.current_gains(), [0.0; 2]);
        let loud: Vec<f32> = (0..QUANTUM)
            .map(|i| if i == 5 { 0.9 } else { 0.1 })
            .collect();
        for _ in 0..20 {
            let bus: Vec<f32> = (0..QUANTUM).map(|_| rng.uniform_f32(-1.0, 1.0)).collect();
            let (mut bl, mut br) = (bus.clone(), bus.clone());
            s.mix_into(&loud, &loud, &mut bl, &mut br, false);
            assert_eq!(bl, bus);
            assert_eq!(br, bus);
        }
        assert_eq!(s.meter().peak_l, 0.9);
        assert_eq!(s.meter().peak_r, 0.9);
    }

    #[test]
    fn new_strip_fades_in_over_its_first_quantum() {
        // Tolerance 1e-6: the first block is a ramp from silence, not a step.
        let mut s = Strip::new();
        let dc = vec![1.0f32; QUANTUM];
        let (ol, _) = run_strip(&mut s, &dc, &dc, true);
        let inc = CENTRE / QUANTUM as f32;
        for (i, &x) in ol.iter().enumerate() {
            assert!((x - inc * (i + 1) as f32).abs() <= 1e-6);
        }
    }

    #[test]
    fn meter_reads_a_sine() {
        // Tolerances: peak ± 0.01, RMS ± 0.01 after 2 s; dBFS helpers ± 0.1 dB.
        let mut s = Strip::new();
        s.set_mute(true); // pre-fader: a muted strip still meters its source
        let secs = 2 * SAMPLE_RATE as usize;
        let l = sine(997.0, 1.0, 0, secs);
        let r = sine(997.0, 0.5, 0, secs);
        run_strip(&mut s, &l, &r, true);
        let m = s.meter();
        assert!((m.peak_l - 1.0).abs() <= 0.01, "{m:?}");
        assert!((m.rms_l - CENTRE).abs() <= 0.01, "{m:?}");
        assert!((m.peak_r - 0.5).abs() <= 0.01, "{m:?}");
        assert!((m.rms_r - 0.3536).abs() <= 0.01, "{m:?}");
        assert!((m.rms_l_dbfs() + 3.01).abs() <= 0.1);
        assert!((m.peak_r_dbfs() + 6.02).abs() <= 0.1);
        assert!((m.peak_dbfs() - 0.0).abs() <= 0.1);
    }

    #[test]
    fn meter_holds_then_decays_in_silence() {
        // Tolerances: peak held exactly for 0.5 s, then −60 dB ± 0.5 dB after 3 s more;
        // RMS within 1 % of ms0·exp(−t/τ); everything exactly zero after 20 s.
        let mut s = Strip::new();
        let q_per_s = SAMPLE_RATE as usize / QUANTUM; // 375
        let sig = sine(1000.0, 0.9, 0, q_per_s * QUANTUM);
        let mut impulse = vec![0.0f32; QUANTUM];
        impulse[0] = 1.0;
        run_strip(&mut s, &sig, &sig, true);
        run_strip(&mut s, &impulse, &impulse, true);
        let ms0 = f64::from(s.meter().rms_l).powi(2);
        assert_eq!(s.meter().peak_l, 1.0);
        let quiet = vec![0.0f32; QUANTUM];
        let mut blocks = 0usize;
        let mut run = |s: &mut Strip, k: usize| {
            for _ in 0..k {
                run_strip(s, &quiet, &quiet, true);
            }
            blocks += k;
            blocks as f64 / q_per_s as f64
        };
        run(&mut s, PEAK_HOLD_FRAMES as usize / QUANTUM - 1);
        assert_eq!(s.meter().peak_l, 1.0, "held for 0.5 s");
        let t = run(&mut s, 1);
        let want_rms = (ms0 * (-t / f64::from(RMS_TAU_S)).exp()).sqrt();
        assert!((f64::from(s.meter().rms_l) / want_rms - 1.0).abs() <= 0.01);
        run(&mut s, q_per_s * 3);
        let fall = s.meter().peak_l_dbfs();
        assert!(
            (fall + 60.0).abs() <= 0.5,
            "fell to {fall} dB after 0.5 s hold + 3 s"
        );
        run(&mut s, q_per_s * 20);
        assert_eq!(
            s.meter(),
            Meter::default(),
            "fully decayed meters read exactly zero"
        );
        assert_eq!(s.meter().peak_dbfs(), MIN_DB);
    }

    #[test]
    fn meter_ballistics_do_not_depend_on_block_length() {
        // Tolerances between 64- and 128-frame blocks: RMS 1e-4 relative after 1 s of sine and
        // 1 s of silence; peak 1.5e-2 relative (0.13 dB) 1.5 s after an impulse: the hold is
        // counted in whole blocks, so its end can differ by up to 128 frames (0.05 dB of fall).
        let readings: Vec<(Meter, Meter)> = [64usize, 128]
            .iter()
            .map(|&block| {
                let run = |x: &[f32]| {
                    let mut s = Strip::new();
                    let (mut bl, mut br) = (vec![0.0; block], vec![0.0; block]);
                    for c in x.chunks(block) {
                        s.mix_into(c, c, &mut bl, &mut br, true);
                    }
                    s.meter()
                };
                let mut x = sine(440.0, 0.8, 0, SAMPLE_RATE as usize);
                x.extend(vec![0.0; SAMPLE_RATE as usize]);
                let mut imp = vec![0.0; 3 * SAMPLE_RATE as usize / 2];
                imp[0] = 0.8;
                (run(&x), run(&imp))
            })
            .collect();
        let ((a, ai), (b, bi)) = (readings[0], readings[1]);
        assert!((a.rms_l / b.rms_l - 1.0).abs() <= 1e-4, "{a:?} {b:?}");
        assert!(
            (ai.peak_l / bi.peak_l - 1.0).abs() <= 1.5e-2,
            "{ai:?} {bi:?}"
        );
        assert!(bi.peak_l < 0.8 * 0.9, "the impulse has decayed: {bi:?}");
    }

    #[test]
    fn soft_knee_is_continuous_bounded_and_odd() {
        // Tolerances: identity below T exactly; one-sided slope over 1e-4 above T within 3e-3 of 1
        // (curvature 2/(1 − T) gives 9e-4, f32 rounding up to 1.2e-3); |out| ≤ 1 always.
        let t = LIMIT_THRESHOLD;
        for k in 0..=1000 {
            let x = t * k as f32 / 1000.0;
            assert_eq!(knee(x), x);
            assert_eq!(knee(-x), -x);
        }
        let h = 1e-4f32;
        let slope = (knee(t + h) - knee(t)) / h;
        assert!((slope - 1.0).abs() <= 3e-3, "slope {slope}");
        let mut prev = knee(t);
        for k in 1..=100_000 {
            let x = t + k as f32 * 1e-3;
            let y = knee(x);
            assert!(y >= prev && y <= 1.0 && y < x, "x {x} y {y}");
            assert_eq!(knee(-x), -y);
            prev = y;
        }
        for x in [1e10f32, 1e30, f32::MAX, f32::INFINITY] {
            assert!(knee(x) <= 1.0 && knee(x) > 0.99);
            assert!(knee(-x) >= -1.0);
        }
    }

    /// Five in-phase full-scale sines summed (peak 5.0) through the master at unity gain.
    fn limit_five_sines(freq: f64) -> (Vec<f32>, Master) {
        let n = SAMPLE_RATE as usize;
        let mut l = vec![0.0f32; n];
        for _ in 0..5 {
            for (o, x) in l.iter_mut().zip(sine(freq, 1.0, 0, n)) {
                *o += x;
            }
        }
        let mut r = l.clone();
        let mut m = Master::new();
        run_master(&mut m, &mut l, &mut r);
        assert_eq!(l, r);
        (l, m)
    }

    #[test]
    fn limiter_keeps_five_full_scale_sines_under_full_scale_and_sinusoidal() {
        // Tolerances: |out| ≤ 1.0 everywhere (exact); over the last 0.5 s: frequency within
        // 0.01 %, THD+N ≤ 1e-5 (−100 dB; measured ~4e-8: in steady state the limiter is a pure
        // gain), amplitude −1 dBFS ± 0.05 dB, gain reduction
        // 20·log10(5/T) ± 0.05 dB; after the attack block the envelope does the limiting: the
        // output never exceeds T by more than 0.1 % (the knee is only grazed).
        for freq in [1000.0, 440.0, 100.0, 60.0] {
            let (y, m) = limit_five_sines(freq);
            assert!(
                y.iter().all(|x| x.abs() <= 1.0),
                "{freq} Hz exceeds full scale"
            );
            let tail = &y[y.len() / 2..];
            let (amp, thd) = fit_sine(tail, freq);
            let f_est = zero_crossing_freq(tail);
            assert!(
                (f_est / freq - 1.0).abs() <= 1e-4,
                "{freq} Hz came out at {f_est}"
            );
            assert!(thd <= 1e-5, "{freq} Hz: THD+N {thd}");
            let amp_db = 20.0 * amp.log10();
            assert!(
                (amp_db + 1.0).abs() <= 0.05,
                "{freq} Hz: amplitude {amp_db} dB"
            );
            let gr = f64::from(m.gain_reduction_db());
            let want = 20.0 * (5.0 / f64::from(LIMIT_THRESHOLD)).log10();
            assert!((gr - want).abs() <= 0.05, "{freq} Hz: GR {gr} vs {want}");
            assert!(
                m.knee_blocks() >= 1,
                "{freq} Hz: the attack block is shaped"
            );
            // The attack lasts until the block after the one holding the first crest.
            let attack = (f64::from(SAMPLE_RATE) / (4.0 * freq)) as usize / QUANTUM + 1;
            let after = y[attack * QUANTUM..]
                .iter()
                .fold(0.0f32, |a, x| a.max(x.abs()));
            assert!(
                after <= LIMIT_THRESHOLD * 1.001,
                "{freq} Hz: {after} after the attack"
            );
            assert!((m.meter().peak_l_dbfs() + 1.0).abs() <= 0.05);
        }
    }

    #[test]
    fn quiet_bus_passes_bit_exact_and_limiter_releases_to_exact_unity() {
        // Exact: a −12 dBFS bus (sine, and noise peaking at −12 dBFS) is returned bit-identical
        // at unity master gain, from the first block and again 3 s after a loud passage.
        let n = SAMPLE_RATE as usize;
        let amp = f64::from(db_to_lin(-12.0));
        let mut rng = Rng::new(3);
        let noise: Vec<f32> = (0..n)
            .map(|_| rng.uniform_f32(-1.0, 1.0) * amp as f32)
            .collect();
        let mut m = Master::new();
        for src in [sine(1234.5, amp, 0, n), noise.clone()] {
            let (mut l, mut r) = (src.clone(), src.clone());
            run_master(&mut m, &mut l, &mut r);
            assert_eq!(l, src);
            assert_eq!(r, src);
        }
        assert_eq!(m.gain_reduction_db(), 0.0);
        let mut loud = sine(200.0, 3.0, 0, n / 2);
        let mut loud_r = loud.clone();
        run_master(&mut m, &mut loud, &mut loud_r);
        assert!(m.gain_reduction_db() > 10.0);
        let mut settle = sine(1234.5, amp, 0, 3 * n);
        let mut settle_r = settle.clone();
        run_master(&mut m, &mut settle, &mut settle_r);
        assert_eq!(m.limiter_gain(), 1.0);
        assert_eq!(m.gain_reduction_db(), 0.0);
        let (mut l, mut r) = (noise.clone(), noise.clone());
        run_master(&mut m, &mut l, &mut r);
        assert_eq!(l, noise);
    }

    #[test]
    fn master_gain_step_ramps_linearly() {
        // Tolerance 1e-6: a step from 1 to 2 on a 0.25 DC bus (below threshold) ramps over the
        // block, then holds.
        let mut m = Master::new();
        m.set_gain_db(6.0206);
        assert!((m.gain() - 2.0).abs() <= 1e-4);
        let g = m.gain();
        let (mut l, mut r) = (vec![0.25f32; 2 * QUANTUM], vec![0.25f32; 2 * QUANTUM]);
        run_master(&mut m, &mut l, &mut r);
        for (i, &x) in l[..QUANTUM].iter().enumerate() {
            let want = 0.25 * (1.0 + (g - 1.0) * (i + 1) as f32 / QUANTUM as f32);
            assert!((x - want).abs() <= 1e-6, "{i}: {x} vs {want}");
        }
        assert!(l[QUANTUM..].iter().all(|&x| (x - 0.25 * g).abs() <= 1e-6));
        assert_eq!(m.gain_reduction_db(), 0.0);
    }

    #[test]
    fn nonfinite_bus_blocks_are_silenced_and_counted() {
        // Exact: poisoned blocks come out as zeros, the count matches, and the next clean
        // quiet block is still bit-exact (no state poisoned).
        let mut m = Master::new();
        for (k, bad) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30]
            .iter()
            .enumerate()
        {
            let mut l = sine(500.0, 0.5, 0, QUANTUM);
            let mut r = l.clone();
            if k % 2 == 0 {
                l[37] = *bad;
            } else {
                r[QUANTUM - 1] = *bad;
            }
            m.process(&mut l, &mut r);
            assert!(l.iter().chain(&r).all(|&x| x == 0.0), "{bad}");
            assert_eq!(m.nonfinite_blocks(), k as u64 + 1);
        }
        let clean = sine(500.0, 0.25, 0, QUANTUM);
        let (mut l, mut r) = (clean.clone(), clean.clone());
        m.process(&mut l, &mut r);
        assert_eq!(l, clean);
        let meter = m.meter();
        assert!(meter.peak_l.is_finite() && meter.rms_l.is_finite());
    }

    #[test]
    fn nonfinite_source_is_counted_and_kept_out_of_the_meter() {
        // Exact: the meter reading is unchanged by the poisoned block; the master cleans the bus.
        let mut s = Strip::new();
        let good = sine(300.0, 0.5, 0, QUANTUM);
        let (mut l, mut r) = (vec![0.0; QUANTUM], vec![0.0; QUANTUM]);
        s.mix_into(&good, &good, &mut l, &mut r, true);
        let before = s.meter();
        let mut bad = good.clone();
        bad[10] = f32::NAN;
        s.mix_into(&bad, &good, &mut l, &mut r, true);
        assert_eq!(s.nonfinite_blocks(), 1);
        assert_eq!(s.meter(), before);
        let mut m = Master::new();
        m.process(&mut l, &mut r);
        assert!(l.iter().chain(&r).all(|x| x.is_finite() && x.abs() <= 1.0));
        assert_eq!(m.nonfinite_blocks(), 1);
    }

    #[test]
    fn setters_validate_their_input() {
        // Exact, per the documented rules: NaN ignored, out of range clamped.
        let mut s = Strip::new();
        s.set_gain(0.5);
        s.set_gain(f32::NAN);
        assert_eq!(s.gain(), 0.5);
        s.set_gain(-3.0);
        assert_eq!(s.gain(), 0.0);
        s.set_gain(f32::INFINITY);
        assert_eq!(s.gain(), MAX_GAIN);
        s.set_gain_db(100.0);
        assert_eq!(s.gain(), MAX_GAIN);
        s.set_gain_db(f32::NEG_INFINITY);
        assert_eq!(s.gain(), 0.0);
        assert_eq!(s.gain_db(), MIN_DB);
        s.set_gain_db(-6.0);
        s.set_gain_db(f32::NAN);
        assert!((s.gain_db() + 6.0).abs() <= 1e-4);
        s.set_pan(0.25);
        s.set_pan(f32::NAN);
        assert_eq!(s.pan(), 0.25);
        s.set_pan(-7.0);
        assert_eq!(s.pan(), -1.0);
        let mut m = Master::new();
        m.set_gain(f32::NAN);
        assert_eq!(m.gain(), 1.0);
        m.set_gain(9.0);
        assert_eq!(m.gain(), MAX_GAIN);
        m.set_gain(-1.0);
        assert_eq!(m.gain(), 0.0);
        // dB helpers, tolerance 1e-4 dB / 1e-5 linear.
        assert_eq!(db_to_lin(0.0), 1.0);
        assert!((db_to_lin(-6.0206) - 0.5).abs() <= 1e-5);
        assert!((lin_to_db(0.5) + 6.0206).abs() <= 1e-4);
        assert_eq!(db_to_lin(f32::NAN), 0.0);
        assert_eq!(lin_to_db(0.0), MIN_DB);
        assert_eq!(lin_to_db(-1.0), MIN_DB);
        assert_eq!(lin_to_db(f32::NAN), MIN_DB);
    }

    #[test]
    fn odd_and_mismatched_lengths() {
        // Tolerance 1e-6 against the linear-ramp formula on a 131-frame block (tail path);
        // the master zeroes the longer slice's extra frames and still limits.
        let mut s = Strip::new();
        let n = 131;
        let dc = vec![1.0f32; n];
        let (mut l, mut r) = (vec![0.0; n], vec![0.0; n + 9]);
        s.mix_into(&dc, &dc, &mut l, &mut r, true);
        let inc = CENTRE / n as f32;
        for i in 0..n {
            assert!((l[i] - inc * (i + 1) as f32).abs() <= 1e-6, "{i}");
            assert_eq!(l[i], r[i]);
        }
        assert!(r[n..].iter().all(|&x| x == 0.0));
        let mut m = Master::new();
        let mut l = vec![4.0f32; 7];
        let mut r = vec![4.0f32; 12];
        m.process(&mut l, &mut r);
        assert!(l.iter().all(|x| x.abs() <= 1.0));
        assert!(r[..7].iter().all(|x| x.abs() <= 1.0));
        assert!(r[7..].iter().all(|&x| x == 0.0));
        m.process(&mut [], &mut []);
    }

    fn stats_bits(s: &BlockStats) -> [u32; 4] {
        [
            s.peak[0].to_bits(),
            s.peak[1].to_bits(),
            s.sumsq[0].to_bits(),
            s.sumsq[1].to_bits(),
        ]
    }

    /// Random samples including edge values: zeros, ±T, beyond full scale, huge, tiny.
    fn edgy_block(rng: &mut Rng, n: usize) -> Vec<f32> {
        let edges = [
            0.0,
            -0.0,
            LIMIT_THRESHOLD,
            -LIMIT_THRESHOLD,
            1.0,
            -1.0,
            3.7,
            -1e10,
            1e-30,
        ];
        (0..n)
            .map(|_| {
                if rng.chance(0.2) {
                    edges[rng.below(edges.len() as u64) as usize]
                } else {
                    rng.uniform_f32(-2.0, 2.0)
                }
            })
            .collect()
    }

    #[test]
    fn peak_from_the_largest_square_is_exact() {
        // Exact: sqrt(fl(y·y)) == |y| for every 37th f32 in [1, 4) (scaling by powers of 4 is
        // exact for both the square and the root, so this covers every exponent whose square
        // stays normal; the whole range was checked once, 25 million values), and for seeded
        // values from 2^-62 to 2^62. Below ~1.1e-19 the square is subnormal and the peak may
        // read lower: far under the meters' −140 dB floor.
        let (lo, hi) = (1.0f32.to_bits(), 4.0f32.to_bits());
        for b in (lo..hi).step_by(37) {
            let y = f32::from_bits(b);
            assert_eq!((y * y).sqrt(), y, "{y:e}");
        }
        let mut rng = Rng::new(0x5a5a);
        for _ in 0..100_000 {
            let sign = if rng.chance(0.5) { -1.0 } else { 1.0 };
            let y = sign * rng.uniform_f32(1.0, 2.0) * 2f32.powi(rng.below(124) as i32 - 62);
            assert_eq!((y * y).sqrt(), y.abs(), "{y:e}");
        }
        let block: Vec<f32> = (0..131).map(|_| rng.uniform_f32(-3.0, 3.0)).collect();
        let stats = scan::<Simd>(&block, &block, block.len());
        let peak = block.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert_eq!(stats.peak, [peak, peak]);
    }

    #[test]
    fn simd_kernels_match_the_portable_kernels_bit_for_bit() {
        // Exact: the SIMD lanes run the same IEEE operations in the same order as the portable
        // fallback, so outputs and stats must be bit-identical, for every length (tails too).
        use lanes::portable::Portable;
        let mut rng = Rng::new(0xB17);
        for &n in &[0usize, 1, 3, 4, 5, 8, 127, 128, 131, 256] {
            for _ in 0..20 {
                let (a, b) = (edgy_block(&mut rng, n), edgy_block(&mut rng, n));
                let (oa, ob) = (edgy_block(&mut rng, n), edgy_block(&mut rng, n));
                assert_eq!(
                    stats_bits(&scan::<Simd>(&a, &b, n)),
                    stats_bits(&scan::<Portable>(&a, &b, n))
                );
                let g0 = [rng.uniform_f32(0.0, 4.0), rng.uniform_f32(0.0, 4.0)];
                let step = [rng.uniform_f32(-0.03, 0.03), rng.uniform_f32(-0.03, 0.03)];
                for ramp in [false, true] {
                    let (mut sl, mut sr, mut pl, mut pr) =
                        (oa.clone(), ob.clone(), oa.clone(), ob.clone());
                    let (s1, s2) = if ramp {
                        (
                            mix_block::<Simd, true>([&a, &b], &mut sl, &mut sr, n, g0, step),
                            mix_block::<Portable, true>([&a, &b], &mut pl, &mut pr, n, g0, step),
                        )
                    } else {
                        (
                            mix_block::<Simd, false>([&a, &b], &mut sl, &mut sr, n, g0, step),
                            mix_block::<Portable, false>([&a, &b], &mut pl, &mut pr, n, g0, step),
                        )
                    };
                    assert_eq!(stats_bits(&s1), stats_bits(&s2));
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&sl), bits(&pl));
                    assert_eq!(bits(&sr), bits(&pr));
                }
                let (t0, st) = (rng.uniform_f32(0.0, 4.0), rng.uniform_f32(-0.03, 0.03));
                for with_knee in [false, true] {
                    let (mut sl, mut sr, mut pl, mut pr) =
                        (a.clone(), b.clone(), a.clone(), b.clone());
                    let (s1, s2) = if with_knee {
                        (
                            apply_gain::<Simd, true>(&mut sl, &mut sr, n, t0, st),
                            apply_gain::<Portable, true>(&mut pl, &mut pr, n, t0, st),
                        )
                    } else {
                        (
                            apply_gain::<Simd, false>(&mut sl, &mut sr, n, t0, st),
                            apply_gain::<Portable, false>(&mut pl, &mut pr, n, t0, st),
                        )
                    };
                    assert_eq!(stats_bits(&s1), stats_bits(&s2));
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&sl), bits(&pl));
                    assert_eq!(bits(&sr), bits(&pr));
                }
            }
        }
        // The lane knee is the scalar knee, lane by lane, including ±0, ±T, ±∞.
        let xs = [
            0.0f32,
            -0.0,
            LIMIT_THRESHOLD,
            -LIMIT_THRESHOLD,
            0.9,
            -0.95,
            1.0,
            7.0,
            -1e20,
        ];
        let xs = xs.iter().chain(&[f32::INFINITY, f32::NEG_INFINITY, 0.5]);
        let v: Vec<f32> = xs.copied().collect();
        for c in v.chunks_exact(4) {
            let q = [c[0], c[1], c[2], c[3]];
            let simd = knee_lanes(Simd::from_array(q)).to_array();
            let port = knee_lanes(Portable::from_array(q)).to_array();
            for k in 0..4 {
                assert_eq!(simd[k].to_bits(), knee(q[k]).to_bits(), "{}", q[k]);
                assert_eq!(port[k].to_bits(), knee(q[k]).to_bits(), "{}", q[k]);
            }
        }
    }

    #[test]
    fn portable_kernels_match_a_scalar_oracle() {
        // Tolerances: peaks exact; sums of squares within 1e-5 relative of f64; mixed samples
        // within 1e-6 (plus 1e-6 relative) of f64 `out + src·(g0 + step·(i + 1))`.
        use lanes::portable::Portable;
        let mut rng = Rng::new(0x0AC1E);
        for &n in &[1usize, 4, 7, 128, 131] {
            for _ in 0..50 {
                let a: Vec<f32> = (0..n).map(|_| rng.uniform_f32(-1.5, 1.5)).collect();
                let b: Vec<f32> = (0..n).map(|_| rng.uniform_f32(-1.5, 1.5)).collect();
                let stats = scan::<Portable>(&a, &b, n);
                for (ch, x) in [&a, &b].iter().enumerate() {
                    let peak = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                    let ss: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
                    assert_eq!(stats.peak[ch], peak);
                    assert!((f64::from(stats.sumsq[ch]) / ss - 1.0).abs() <= 1e-5);
                }
                let g0 = [rng.uniform_f32(0.0, 2.0), rng.uniform_f32(0.0, 2.0)];
                let step = [rng.uniform_f32(-0.01, 0.01), rng.uniform_f32(-0.01, 0.01)];
                let (mut ol, mut or) = (a.clone(), b.clone());
                mix_block::<Portable, true>([&b, &a], &mut ol, &mut or, n, g0, step);
                for i in 0..n {
                    let k = (i + 1) as f64;
                    let gl = f64::from(g0[0]) + f64::from(step[0]) * k;
                    let gr = f64::from(g0[1]) + f64::from(step[1]) * k;
                    let wl = f64::from(a[i]) + f64::from(b[i]) * gl;
                    let wr = f64::from(b[i]) + f64::from(a[i]) * gr;
                    assert!((f64::from(ol[i]) - wl).abs() <= 1e-6 + 1e-6 * wl.abs());
                    assert!((f64::from(or[i]) - wr).abs() <= 1e-6 + 1e-6 * wr.abs());
                }
            }
        }
    }

    /// The documented strip behaviour, written the plain way: validated parameters, pan law,
    /// linear ramp of the effective factors across each block.
    struct OracleStrip {
        gain: f64,
        pan: f64,
        mute: bool,
        solo: bool,
        current: [f64; 2],
    }

    impl OracleStrip {
        fn target(&self, any_solo: bool) -> [f64; 2] {
            let heard = !self.mute && (self.solo || !any_solo);
            if !heard {
                return [0.0; 2];
            }
            let theta = (self.pan + 1.0) * PI / 4.0;
            [self.gain * theta.cos(), self.gain * theta.sin()]
        }
    }

    #[test]
    fn random_parameter_changes_match_the_oracle_and_never_exceed_full_scale() {
        // Tolerances: bus before the master within 2e-5 of the f64 oracle; after the master
        // every sample finite and |x| ≤ 1.0 (exact). Five strips, 3000 quanta, seeded.
        let mut rng = Rng::new(0x5EED_1234_ABCD);
        const PEERS: usize = 5;
        let mut strips: Vec<Strip> = (0..PEERS).map(|_| Strip::new()).collect();
        let mut oracle: Vec<OracleStrip> = (0..PEERS)
            .map(|_| OracleStrip {
                gain: 1.0,
                pan: 0.0,
                mute: false,
                solo: false,
                current: [0.0; 2],
            })
            .collect();
        let mut master = Master::new();
        let freqs = [110.0, 220.5, 440.0, 997.0, 3001.0];
        let wild = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -5.0, 1e9];
        let mut worst = 0.0f64;
        for q in 0..3000usize {
            for (s, o) in strips.iter_mut().zip(oracle.iter_mut()) {
                if rng.chance(0.1) {
                    let g = if rng.chance(0.1) {
                        wild[rng.below(5) as usize]
                    } else {
                        rng.uniform_f32(0.0, 5.0)
                    };
                    s.set_gain(g);
                    if !g.is_nan() {
                        o.gain = f64::from(g.clamp(0.0, MAX_GAIN));
                    }
                }
                if rng.chance(0.1) {
                    let p = if rng.chance(0.1) {
                        wild[rng.below(5) as usize]
                    } else {
                        rng.uniform_f32(-1.5, 1.5)
                    };
                    s.set_pan(p);
                    if !p.is_nan() {
                        o.pan = f64::from(p.clamp(-1.0, 1.0));
                    }
                }
                if rng.chance(0.05) {
                    o.mute = !o.mute;
                    s.set_mute(o.mute);
                }
                if rng.chance(0.03) {
                    o.solo = !o.solo;
                    s.set_solo(o.solo);
                }
            }
            if rng.chance(0.05) {
                master.set_gain(rng.uniform_f32(-0.5, 5.0));
            }
            if rng.chance(0.01) {
                master.set_gain(wild[rng.below(5) as usize]);
            }
            let any_solo = strips.iter().any(|s| s.solo());
            let mut bus_l = vec![0.0f32; QUANTUM];
            let mut bus_r = vec![0.0f32; QUANTUM];
            let mut want_l = vec![0.0f64; QUANTUM];
            let mut want_r = vec![0.0f64; QUANTUM];
            for (k, (s, o)) in strips.iter_mut().zip(oracle.iter_mut()).enumerate() {
                let amp = f64::from(rng.uniform_f32(0.0, 2.0));
                let src_l = sine(freqs[k], amp, q * QUANTUM, QUANTUM);
                let src_r: Vec<f32> = (0..QUANTUM).map(|_| rng.uniform_f32(-1.0, 1.0)).collect();
                let heard = solo_audible(any_solo, s.solo(), s.mute());
                s.mix_into(&src_l, &src_r, &mut bus_l, &mut bus_r, heard);
                let target = o.target(any_solo);
                for i in 0..QUANTUM {
                    let f = (i + 1) as f64 / QUANTUM as f64;
                    let gl = o.current[0] + (target[0] - o.current[0]) * f;
                    let gr = o.current[1] + (target[1] - o.current[1]) * f;
                    want_l[i] += f64::from(src_l[i]) * gl;
                    want_r[i] += f64::from(src_r[i]) * gr;
                }
                o.current = target;
            }
            for i in 0..QUANTUM {
                worst = worst.max((f64::from(bus_l[i]) - want_l[i]).abs());
                worst = worst.max((f64::from(bus_r[i]) - want_r[i]).abs());
            }
            master.process(&mut bus_l, &mut bus_r);
            assert!(
                bus_l
                    .iter()
                    .chain(&bus_r)
                    .all(|x| x.is_finite() && x.abs() <= 1.0),
                "quantum {q}"
            );
            assert!(master.gain_reduction_db().is_finite());
        }
        assert!(worst <= 2e-5, "bus differs from the oracle by {worst}");
    }
}
