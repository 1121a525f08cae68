//! The four-lane `f32` type the mixer's and the resampler's per-sample loops are written over:
//! one trait ([`Lanes`]) and three back-ends, SSE on x86_64 (`sse`), simd128 on wasm32 built
//! with `+simd128` (`wasm`), and a plain array elsewhere (`portable`, also compiled for the
//! tests, which hold the other two to it bit for bit). `unsafe` is confined to the back-ends.

use core::ops::{Add, Div, Mul, Sub};

/// Four `f32` lanes. Kernels are written once over this trait; [`Simd`] picks SSE on x86_64 and
/// simd128 on wasm32 (built with `+simd128`), `portable::Portable` (a plain array)
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

/// Implements the four arithmetic operators of a lanes type with one binary function each.
macro_rules! arith {
    ($t:ty, $add:expr, $sub:expr, $mul:expr, $div:expr) => {
        arith!(@op $t, Add, add, $add);
        arith!(@op $t, Sub, sub, $sub);
        arith!(@op $t, Mul, mul, $mul);
        arith!(@op $t, Div, div, $div);
    };
    (@op $t:ty, $trait:ident, $method:ident, $f:expr) => {
        impl $trait for $t {
            type Output = $t;
            #[inline(always)]
            fn $method(self, o: $t) -> $t {
                $f(self, o)
            }
        }
    };
}

#[cfg(any(
    test,
    not(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    ))
))]
pub mod portable;
#[cfg(target_arch = "x86_64")]
pub mod sse;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub mod wasm;

/// The lane type of this build: SSE, simd128, or the portable array.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) type Simd = wasm::Wasm;
/// The lane type of this build: SSE, simd128, or the portable array.
#[cfg(target_arch = "x86_64")]
pub(crate) type Simd = sse::Sse;
/// The lane type of this build: SSE, simd128, or the portable array.
#[cfg(not(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
)))]
pub(crate) type Simd = portable::Portable;

/// `a > b ? a : b`: the same rule as the lanes' `max`, so scalar tails agree with SIMD bodies.
#[inline(always)]
pub(crate) fn max_sel(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}
