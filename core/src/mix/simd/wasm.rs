//! WebAssembly SIMD (the crate is built with `+simd128` for the browser).

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
