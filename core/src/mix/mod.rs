//! The mixer: one [`Strip`] per peer (gain, pan, mute, solo, source meters) summing into a stereo
//! bus, and one [`Master`] (master gain, soft limiter, output meters) that makes the bus safe to
//! hand to the sound card. For a hub in mix mode, [`MixMinus`] makes every listener's personal
//! mix of the same sources (the room less its own voice, with its own strips and master) in O(N)
//! per block for the whole room.
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
//! use tutti_core::mix::{solo_audible, GainControl, Master, Strip, QUANTUM};
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

mod gain;
mod kernels;
mod master;
mod meter;
mod minus;
pub(crate) mod simd;
mod strip;
#[cfg(test)]
mod tests;

pub use gain::{Gain, GainControl};
pub(crate) use kernels::Groups;
pub use master::Master;
pub use meter::Meter;
pub use minus::{MixMinus, MixMinusError, Sources, MAX_SOURCE_PEAK};
pub(crate) use simd::{Lanes, Simd};
pub use strip::Strip;
