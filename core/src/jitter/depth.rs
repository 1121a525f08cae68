//! The depth of the jitter buffer: the target it aims at and the fill it measures against it
//! (see "Depth: target and fill" in the parent module).
//!
//! The target comes from the mode and the lateness estimate and is recomputed only when that
//! estimate changes; the fill is the playout delay above the earliest recent arrivals. When
//! the two differ by more than the drift controller can correct, [`JitterBuffer::check_depth`]
//! schedules whole blocks to stretch or to skip, which the pop side carries out. Everything
//! here is real-time safe: O(1) arithmetic on the buffer's state.

use super::*;

/// The measurements the target was last computed from: it is recomputed only when one of them
/// changes (or, through `None`, the mode or the stream format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TargetInputs {
    jitter: i64,
}

impl JitterBuffer {
    /// Current jitter estimate (95th-percentile spread of lateness over the last ~6 s,
    /// including the underrun allowance), in local frames.
    pub fn jitter_frames(&self) -> u32 {
        self.lat.jitter().clamp(0, i64::from(u32::MAX)) as u32
    }

    /// The oracle, stream frames, counted as the target is (fill plus the consumer's staging):
    /// the smallest fixed depth that would have played every packet that arrived over the last
    /// two minutes of this stream; 0 before the first packet. A yardstick for the target (it
    /// knows every packet's lateness in hindsight), not an input to it. `sender_ppm`: how much
    /// faster the sender's clock runs than ours (the drift loop's estimate), so that two
    /// minutes of drift do not count as jitter.
    pub fn oracle_frames(&self, sender_ppm: f64) -> u32 {
        let per_window = if sender_ppm.is_finite() {
            -sender_ppm * 1e-6 * f64::from(self.cfg.local_rate)
        } else {
            0.0
        };
        match self.lat.oracle(per_window) {
            Some(o) => self
                .to_stream(o + self.staging_local())
                .clamp(0, i64::from(u32::MAX)) as u32,
            None => 0,
        }
    }

    /// Desired average fill, stream frames (see the module docs).
    pub fn target_frames(&self) -> u32 {
        if let BufferMode::Fixed { packets } = self.cfg.mode {
            if self.block > 0 {
                return self.fixed_target_stream(packets) as u32;
            }
        }
        self.to_stream(self.target_local)
            .clamp(0, i64::from(u32::MAX)) as u32
    }

    /// Current fill, stream frames: the playout delay above the earliest recent arrivals (see
    /// the module docs); the target while idle or prefilling.
    pub fn buffered_frames(&self) -> u32 {
        if self.state != StreamState::Playing {
            return self.target_frames();
        }
        self.to_stream(self.virtual_fill().max(0))
            .clamp(0, i64::from(u32::MAX)) as u32
    }

    /// Changes the target policy; takes effect at once. Real-time safe.
    pub fn set_mode(&mut self, mode: BufferMode) {
        self.cfg.mode = mode;
        self.target_inputs = None;
        self.update_target();
    }

    // ----- internals -------------------------------------------------------------------------

    fn fixed_target_stream(&self, packets: u32) -> i64 {
        let max = self.cap.saturating_sub(2 * self.block) as i64;
        (i64::from(packets.max(1)) * self.block as i64).min(max)
    }

    /// Largest depth the mode allows, local frames: the ceiling, or the capacity.
    pub(super) fn coverable(&self) -> i64 {
        match self.cfg.mode {
            BufferMode::Adaptive { ceiling_frames, .. } => i64::from(ceiling_frames),
            BufferMode::Fixed { .. } => self.to_local(self.cap as i64),
        }
    }

    /// What the consumer is assumed to hold staged beyond this buffer (local frames): one block,
    /// at most one quantum (a resampler pops a block when it holds less than a quantum).
    fn staging_local(&self) -> i64 {
        self.block_local().min(i64::from(self.cfg.quantum))
    }

    /// Estimated total fill (this buffer plus the consumer's staging) minus the target, local
    /// frames.
    pub(super) fn fill_error(&self) -> i64 {
        self.virtual_fill() + self.staging_local() - self.target_local
    }

    /// Playout delay above the earliest recent arrival, local frames.
    fn virtual_fill(&self) -> i64 {
        self.delay - self.lat.recent_min().unwrap_or(0)
    }

    /// Recomputes the target when the jitter estimate or the underrun allowance changed since
    /// the last time (O(1): one comparison on most pushes).
    #[inline]
    pub(super) fn update_target(&mut self) {
        let inputs = TargetInputs {
            jitter: self.lat.jitter(),
        };
        if self.target_inputs != Some(inputs) {
            self.target_inputs = Some(inputs);
            self.compute_target(inputs);
        }
    }

    /// The target from the mode, the stream format and `inputs`.
    fn compute_target(&mut self, inputs: TargetInputs) {
        let q = i64::from(self.cfg.quantum);
        let cap_local = self.to_local(self.cap as i64);
        let b = if self.block == 0 {
            q
        } else {
            self.block_local()
        };
        let max = (cap_local - 2 * b).max(b);
        self.target_local = match self.cfg.mode {
            BufferMode::Fixed { packets } => {
                if self.block == 0 {
                    i64::from(packets.max(1)) * q
                } else {
                    self.to_local(self.fixed_target_stream(packets))
                }
            }
            BufferMode::Adaptive {
                floor_frames,
                ceiling_frames,
            } => {
                let floor = i64::from(floor_frames);
                let ceiling = i64::from(ceiling_frames).max(floor);
                // Spread + one quantum (what the consumer stages) + half a block of margin,
                // rounded up to whole blocks (the fill moves in blocks).
                (inputs.jitter + q + q / 2).clamp(floor, ceiling)
            }
        }
        .min(max);
    }

    /// Keeps the delay near the target when the drift controller is too slow: a fill a block or
    /// more below the target schedules stretched blocks at once; a fill far above it for half a
    /// second schedules skips.
    pub(super) fn check_depth(&mut self, now: u64) {
        let b = self.block_local();
        let over = self.fill_error();
        if over <= -b {
            self.grow_pending = ((b / 2 - over) / b).clamp(0, i64::from(u32::MAX)) as u32;
            self.skip_pending = 0;
            self.over_since = None;
            return;
        }
        self.grow_pending = 0;
        let threshold = (b + b / 2).max(i64::from(self.cfg.quantum));
        if over <= threshold {
            self.over_since = None;
            if 2 * over <= b {
                self.skip_pending = 0;
            }
            return;
        }
        match self.over_since {
            None => self.over_since = Some(now),
            Some(since) if now.saturating_sub(since) >= u64::from(self.cfg.local_rate) / 2 => {
                self.skip_pending = ((over + b / 2) / b).clamp(0, i64::from(u32::MAX)) as u32;
                self.over_since = None;
            }
            Some(_) => {}
        }
    }
}
