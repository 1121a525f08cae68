//! The portable fallback: a plain array, one scalar operation per lane.

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
        zip(self, other, max_sel)
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
