//! The fader gain that a [`Strip`](super::Strip) and the [`Master`](super::Master) both carry:
//! one linear factor, clamped to [0, [`MAX_GAIN`]], set in linear terms or in dB. The value is
//! kept in [`Gain`] (so nothing can store an unclamped or NaN gain), and [`GainControl`] gives
//! every holder the same setters and getters. Real-time safe: plain arithmetic.

use super::{db_to_lin, lin_to_db, MAX_GAIN};

/// A fader's linear gain, always finite and within [0, [`MAX_GAIN`]].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gain(f32);

impl Default for Gain {
    /// Unity.
    fn default() -> Self {
        Gain(1.0)
    }
}

impl Gain {
    /// The linear factor.
    pub fn linear(self) -> f32 {
        self.0
    }
}

/// Setters and getters of a fader gain, for the types that hold a [`Gain`].
pub trait GainControl {
    /// The gain held.
    fn gain_state(&self) -> Gain;
    /// The gain held, to be changed through the setters.
    fn gain_state_mut(&mut self) -> &mut Gain;

    /// Sets the linear gain. Clamped to [0, [`MAX_GAIN`]] (negative → 0, +∞ → `MAX_GAIN`); NaN
    /// is ignored. A mixer ramps to it over the next block.
    fn set_gain(&mut self, gain: f32) {
        if !gain.is_nan() {
            self.gain_state_mut().0 = gain.clamp(0.0, MAX_GAIN);
        }
    }

    /// Sets the gain in dB (−∞ → silence, above +12.04 dB clamped); NaN is ignored.
    fn set_gain_db(&mut self, db: f32) {
        if !db.is_nan() {
            self.set_gain(db_to_lin(db));
        }
    }

    /// The linear gain.
    fn gain(&self) -> f32 {
        self.gain_state().linear()
    }

    /// The gain in dB (floor [`MIN_DB`](super::MIN_DB)).
    fn gain_db(&self) -> f32 {
        lin_to_db(self.gain())
    }
}
