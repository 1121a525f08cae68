//! The mixer's per-sample loops over [`Lanes`]: the meter scan of a block, and the fused pass
//! that meters a strip's source and adds it, ramped, into the bus, fed four frames at a time by
//! a [`Groups`] source (a block in memory, or the resampler producing frames as it goes).

use super::meter::BlockStats;
use super::simd::{max_sel, Lanes};

/// Whole four-frame groups of a slice, as arrays (the remainder is left to a scalar tail).
#[inline(always)]
pub(super) fn quads(s: &[f32]) -> impl Iterator<Item = &[f32; 4]> {
    s.chunks_exact(4).filter_map(|c| c.try_into().ok())
}

/// Mutable counterpart of [`quads`].
#[inline(always)]
pub(super) fn quads_mut(s: &mut [f32]) -> impl Iterator<Item = &mut [f32; 4]> {
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
pub(super) struct ChAcc<V> {
    square_max: V,
    sumsq: V,
}

impl<V: Lanes> ChAcc<V> {
    #[inline(always)]
    pub(super) fn new() -> Self {
        let z = V::splat(0.0);
        Self {
            square_max: z,
            sumsq: z,
        }
    }

    #[inline(always)]
    pub(super) fn add(&mut self, y: V) {
        let y2 = y * y;
        self.sumsq = self.sumsq + y2;
        self.square_max = y2.max(self.square_max);
    }

    /// Folds the lanes (fixed order) and the scalar tail's `[square_max, sumsq]` into
    /// `(peak, sumsq)`.
    #[inline(always)]
    pub(super) fn finish(self, tail: [f32; 2]) -> (f32, f32) {
        let (p, s) = (self.square_max.to_array(), self.sumsq.to_array());
        let square_max = max_sel(max_sel(max_sel(p[0], p[1]), max_sel(p[2], p[3])), tail[0]);
        (square_max.sqrt(), ((s[0] + s[1]) + (s[2] + s[3])) + tail[1])
    }
}

/// [`ChAcc`] for both channels.
#[derive(Clone, Copy)]
pub(super) struct Acc<V>([ChAcc<V>; 2]);

impl<V: Lanes> Acc<V> {
    #[inline(always)]
    pub(super) fn new() -> Self {
        Self([ChAcc::new(), ChAcc::new()])
    }

    #[inline(always)]
    pub(super) fn add(&mut self, a: V, b: V) {
        self.0[0].add(a);
        self.0[1].add(b);
    }

    /// Folds the lanes and the scalar tail's `[square_max, sumsq]` per channel.
    #[inline(always)]
    pub(super) fn finish(self, tail: [[f32; 2]; 2]) -> BlockStats {
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
pub(super) fn tail_add1(acc: &mut [f32; 2], y: f32) {
    let y2 = y * y;
    acc[0] = max_sel(y2, acc[0]);
    acc[1] += y2;
}

/// Scalar tail accumulation: `acc[ch] = [square_max, sumsq]`.
#[inline(always)]
pub(super) fn tail_add(acc: &mut [[f32; 2]; 2], a: f32, b: f32) {
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
pub(super) struct Loaded<'a> {
    pub(super) l: &'a [f32],
    pub(super) r: &'a [f32],
}

impl<'a> Loaded<'a> {
    /// Splits equally long `l` and `r` into their whole groups of four frames, as a source, and
    /// the frames left over (fewer than four per channel).
    pub(super) fn split(l: &'a [f32], r: &'a [f32]) -> (Loaded<'a>, [&'a [f32]; 2]) {
        let full = l.len() - l.len() % 4;
        let groups = Loaded {
            l: &l[..full],
            r: &r[..full],
        };
        (groups, [&l[full..], &r[full..]])
    }
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
pub(super) fn scan<V: Lanes>(l: &[f32], r: &[f32], n: usize) -> BlockStats {
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
pub(super) fn mix_groups<V: Lanes, const MIX: bool, const RAMP: bool>(
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
pub(super) fn mix_block<V: Lanes, const RAMP: bool>(
    src: [&[f32]; 2],
    out_l: &mut [f32],
    out_r: &mut [f32],
    n: usize,
    g0: [f32; 2],
    step: [f32; 2],
) -> BlockStats {
    let (groups, tail) = Loaded::split(&src[0][..n], &src[1][..n]);
    mix_groups::<V, true, RAMP>(&groups, tail, &mut out_l[..n], &mut out_r[..n], g0, step)
}
