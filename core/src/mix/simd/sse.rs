//! SSE, part of the x86_64 baseline, so no runtime detection.
//!
//! SAFETY (every `unsafe` block below): SSE and SSE2 exist on every x86_64 CPU; loads and
//! stores go through `&[f32; 4]` / `&mut [f32; 4]`, so they stay in bounds, and they are the
//! unaligned forms.

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
