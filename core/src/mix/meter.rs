//! The meters: a [`Meter`] reading (peaks with hold and fall, RMS) and the ballistics that
//! turn each block's peak and sum of squares into it.

use super::{lin_to_db, FLUSH_LIN, PEAK_FALL_DB_PER_S, PEAK_HOLD_FRAMES, RMS_TAU_S, SAMPLE_RATE};

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
    /// Left peak in dBFS (floor [`MIN_DB`](super::MIN_DB)).
    pub fn peak_l_dbfs(&self) -> f32 {
        lin_to_db(self.peak_l)
    }
    /// Right peak in dBFS (floor [`MIN_DB`](super::MIN_DB)).
    pub fn peak_r_dbfs(&self) -> f32 {
        lin_to_db(self.peak_r)
    }
    /// Left RMS in dBFS (floor [`MIN_DB`](super::MIN_DB)); a full-scale sine reads −3.01.
    pub fn rms_l_dbfs(&self) -> f32 {
        lin_to_db(self.rms_l)
    }
    /// Right RMS in dBFS (floor [`MIN_DB`](super::MIN_DB)).
    pub fn rms_r_dbfs(&self) -> f32 {
        lin_to_db(self.rms_r)
    }
    /// The louder of the two peaks, in dBFS.
    pub fn peak_dbfs(&self) -> f32 {
        lin_to_db(self.peak_l.max(self.peak_r))
    }
    /// The reading as the stats block lays it out: peak left, peak right, RMS left, RMS right.
    pub fn to_f64s(&self) -> [f64; 4] {
        [self.peak_l, self.peak_r, self.rms_l, self.rms_r].map(f64::from)
    }
}

/// Peak and sum of squares of one block, per channel.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BlockStats {
    pub(super) peak: [f32; 2],
    pub(super) sumsq: [f32; 2],
}

impl BlockStats {
    /// False when the block held NaN, ±Inf or a sample whose square overflows.
    pub(super) fn is_finite(&self) -> bool {
        (self.sumsq[0] + self.sumsq[1]).is_finite()
    }
}

/// Meter state: peaks, hold counters, mean squares and cached coefficients. The RMS values are
/// taken (square roots) only when the reading is asked for, not in every block.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MeterState {
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
    pub(super) fn reading(&self) -> Meter {
        Meter {
            peak_l: self.peak[0],
            peak_r: self.peak[1],
            rms_l: self.mean_sq[0].sqrt(),
            rms_r: self.mean_sq[1].sqrt(),
        }
    }

    /// Fold one block of `n` frames into the reading. Once per block; `exp()` only when `n`
    /// differs from the previous block's.
    pub(super) fn update(&mut self, n: usize, stats: &BlockStats) {
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
