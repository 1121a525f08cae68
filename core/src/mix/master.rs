//! The master section: master gain, the soft limiter and the output meters, which make the bus
//! safe to hand to the sound card (see the module docs of [`crate::mix`] for the limiter).

use super::gain::{Gain, GainControl};
use super::kernels::{quads_mut, scan, tail_add, Acc};
use super::meter::{BlockStats, Meter, MeterState};
use super::simd::{max_sel, Lanes, Simd};
use super::{
    lin_to_db, KNEE_NUM, KNEE_OFFSET, LIMITER_HOLD_BLOCKS, LIMITER_RELEASE_S, LIMIT_THRESHOLD,
    RELEASE_SNAP, SAMPLE_RATE,
};

/// Applies `t0 + step·(i + 1)` to the first `n` frames, then the soft knee (`KNEE`), and returns
/// the output's stats for the meters.
#[inline]
pub(super) fn apply_gain<V: Lanes, const KNEE: bool>(
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
pub(super) fn knee(x: f32) -> f32 {
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
pub(super) fn knee_lanes<V: Lanes>(x: V) -> V {
    let a = x.abs();
    let soft = (V::splat(1.0) - V::splat(KNEE_NUM) / (a + V::splat(KNEE_OFFSET))).copysign(x);
    a.select_gt(V::splat(LIMIT_THRESHOLD), soft, x)
}

/// The master section: smoothed master gain, soft limiter, output meters. See the module docs
/// for the limiter design.
#[derive(Clone, Debug)]
pub struct Master {
    gain: Gain,
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
            gain: Gain::default(),
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
        let gain_max = max_sel(self.gain.linear(), self.gain_current);
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
        let total = self.gain.linear() * limiter;

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
        self.gain_current = self.gain.linear();
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

impl GainControl for Master {
    fn gain_state(&self) -> Gain {
        self.gain
    }

    fn gain_state_mut(&mut self) -> &mut Gain {
        &mut self.gain
    }
}
