//! One peer's channel strip: fader, pan, mute and solo as ramped left/right gains, and the
//! pre-fader source meter, applied in one pass per block (see the module docs of [`crate::mix`]
//! for the pan law and the smoothing).

use super::gain::{Gain, GainControl};
use super::kernels::{mix_groups, Groups, Loaded};
use super::meter::{Meter, MeterState};
use super::pan_gains;
use super::simd::Simd;

/// One peer's channel strip. See the module docs for the pan law and the smoothing.
#[derive(Clone, Debug)]
pub struct Strip {
    gain: Gain,
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
            gain: Gain::default(),
            pan: 0.0,
            pan_lr: [l, r],
            mute: false,
            solo: false,
            current: [0.0; 2],
            meter: MeterState::default(),
            nonfinite_blocks: 0,
        }
    }

    /// Unity gain, centre, unmuted, not soloed, with its left/right factors already at `current`:
    /// for a strip that takes over a source already being heard at that level (a mix-minus
    /// listener's first change of a source), so nothing fades.
    pub(super) fn settled(current: [f32; 2]) -> Self {
        Self {
            current,
            ..Self::new()
        }
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
    /// [`solo_audible`](super::solo_audible) and passes the result as `audible`.
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
            [
                self.gain.linear() * self.pan_lr[0],
                self.gain.linear() * self.pan_lr[1],
            ]
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
    /// `audible` is the engine's [`solo_audible`](super::solo_audible) result; `false` (or a muted strip) ramps the
    /// contribution to zero over this block, after which the bus is not touched while the source
    /// is still metered. A source block holding NaN/Inf is counted and left out of the meters
    /// (whatever reaches the bus is cleaned by [`Master::process`](super::Master::process)). Real-time safe.
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
        let (groups, tail) = Loaded::split(&src_l[..n], &src_r[..n]);
        self.mix_source(&groups, tail, &mut out_l[..n], &mut out_r[..n], audible);
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

impl GainControl for Strip {
    fn gain_state(&self) -> Gain {
        self.gain
    }

    fn gain_state_mut(&mut self) -> &mut Gain {
        &mut self.gain
    }
}
