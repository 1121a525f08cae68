//! Audio-clock continuity: noticing when an audio clock fell behind the wall clock, that is,
//! when a device callback was missed and a stretch of audio was never captured or played.
//!
//! A sound card's clock runs at its own steady pace; the audio it captures is contiguous in its
//! frames. When the audio thread misses a callback (a starved machine, an overloaded sound
//! server), the device plays silence for it and, on the capture side, the input for that time is
//! lost or late: afterwards every frame is stamped later on the wall clock than before. So the
//! offset `wall time − frames time` steps up by the length of the gap and stays there.
//!
//! [`Continuity`] watches that offset. Callbacks carrying several quanta and wake-up jitter move
//! single offsets by up to a callback's length; the *minimum* per half-second window does not,
//! so a gap is a rise of the window minimum by at least [`GAP_US`] over the previous window's
//! (clock drift moves it by well under 0.1 ms per window). Rises in consecutive windows are one
//! gap, their lengths added: a device resuming after a stall delivers its first callbacks
//! unevenly, so the offset may settle over two windows, and whether it does depends only on
//! where the windows happen to fall (the sender's and each listener's are not aligned). The
//! same watch serves two sides:
//! - our own engine feeds it the wall clock of each quantum: our device's gaps (we glitched);
//! - per peer, the packet headers' send stamps against their sequence numbers: that peer's
//!   capture gaps, which every listener hears at the same moment. Nothing extra is sent: the
//!   JackTrip header already carries the send time.
//!
//! Sans-IO (told the times), fixed size, real-time safe.

/// The smallest rise of the window minimum counted as a gap: 2 ms (a missed 128-frame callback
/// is 2.67 ms; the worklet's wall clock has 1 ms resolution).
pub const GAP_US: f64 = 2000.0;
/// Window length on the audio clock, µs.
pub const WINDOW_US: f64 = 500_000.0;

/// Gap detector for one audio clock. See the module docs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Continuity {
    /// Audio-clock time at which the current window began, µs.
    start: Option<f64>,
    cur_min: f64,
    prev_min: Option<f64>,
    /// The last window closed rose: a rise in the next continues the same gap.
    rising: bool,
    gaps: u64,
    gap_us: f64,
}

impl Continuity {
    /// A detector that has seen nothing.
    pub fn new() -> Self {
        Continuity {
            cur_min: f64::INFINITY,
            ..Continuity::default()
        }
    }

    /// One observation: audio time `audio_us` (frames converted to µs) was stamped `wall_us` on
    /// the wall clock. Non-finite values and audio time going backwards restart the watch.
    /// Real-time safe.
    pub fn observe(&mut self, audio_us: f64, wall_us: f64) {
        if !audio_us.is_finite() || !wall_us.is_finite() {
            self.restart();
            return;
        }
        let start = match self.start {
            Some(s) if audio_us >= s => s,
            _ => {
                self.restart();
                self.start = Some(audio_us);
                audio_us
            }
        };
        if audio_us - start >= WINDOW_US {
            self.close();
            // A long silence of this clock: the next window starts here.
            let windows = ((audio_us - start) / WINDOW_US).floor();
            self.start = Some(if windows > 1.0 {
                audio_us
            } else {
                start + WINDOW_US
            });
        }
        self.cur_min = self.cur_min.min(wall_us - audio_us);
    }

    fn close(&mut self) {
        if !self.cur_min.is_finite() {
            return;
        }
        if let Some(prev) = self.prev_min {
            let rise = self.cur_min - prev;
            let rose = rise >= GAP_US;
            if rose {
                if !self.rising {
                    self.gaps += 1;
                }
                self.gap_us += rise;
            }
            self.rising = rose;
        }
        self.prev_min = Some(self.cur_min);
        self.cur_min = f64::INFINITY;
    }

    /// Forgets the offset history (a restarted stream); the counts stay.
    pub fn restart(&mut self) {
        self.start = None;
        self.cur_min = f64::INFINITY;
        self.prev_min = None;
        self.rising = false;
    }

    /// Gaps seen.
    pub fn gaps(&self) -> u64 {
        self.gaps
    }

    /// Their total length, ms.
    pub fn gap_ms(&self) -> f64 {
        self.gap_us / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q_US: f64 = 128.0 / 48_000.0 * 1e6;

    /// Quanta rendered in callbacks of `per` quanta (the wall clock stamps a whole callback at
    /// its start), with `gaps` = (quantum index, µs) where the clock falls behind.
    fn run(per: u64, quanta: u64, gaps: &[(u64, f64)], drift_ppm: f64) -> Continuity {
        let mut c = Continuity::new();
        let mut behind = 0.0;
        for q in 0..quanta {
            if let Some(&(_, us)) = gaps.iter().find(|g| g.0 == q) {
                behind += us;
            }
            let audio = q as f64 * Q_US;
            let callback = (q / per * per) as f64 * Q_US;
            let wall = 1.7e15 + callback * (1.0 + drift_ppm * 1e-6) + behind;
            // Whole milliseconds, as the worklet's Date.now().
            c.observe(audio, wall.floor() - wall.floor() % 1000.0 + 500.0);
        }
        c
    }

    #[test]
    fn missed_callbacks_are_counted_with_their_length() {
        // 30 s of 128-frame callbacks; a 20 ms gap at 5 s and a 2.67 ms one at 15 s.
        let c = run(1, 11_250, &[(1875, 20_000.0), (5625, Q_US)], 0.0);
        assert_eq!(c.gaps(), 2);
        assert!((c.gap_ms() - 22.67).abs() < 2.0, "{}", c.gap_ms());
    }

    #[test]
    fn bursty_callbacks_and_drift_are_not_gaps() {
        // 10 ms callbacks of 4 quanta at 300 ppm for 60 s: nothing.
        let c = run(4, 22_500, &[], 300.0);
        assert_eq!(c.gaps(), 0);
        let c = run(4, 22_500, &[], -300.0);
        assert_eq!(c.gaps(), 0);
        // A 40 ms stall among them is one gap.
        let c = run(4, 22_500, &[(10_000, 40_000.0)], 300.0);
        assert_eq!(c.gaps(), 1);
        assert!((c.gap_ms() - 40.0).abs() < 2.0, "{}", c.gap_ms());
    }

    #[test]
    fn a_gap_that_settles_over_two_windows_is_one_gap() {
        // A 100 ms stall, then the resumed device's callbacks come unevenly and the clock settles
        // 4 ms further behind 80 ms later: one gap of about 104 ms wherever the windows fall
        // (188 quanta make a window; every start within one window is tried).
        for start in (1875..1875 + 188).step_by(3) {
            let c = run(4, 3_750, &[(start, 100_000.0), (start + 30, 4_000.0)], 0.0);
            assert_eq!(c.gaps(), 1, "stall at quantum {start}");
            assert!(
                (c.gap_ms() - 104.0).abs() < 2.0,
                "stall at quantum {start}: {}",
                c.gap_ms()
            );
        }
        // Two stalls two seconds apart stay two gaps.
        let c = run(4, 3_750, &[(1875, 50_000.0), (2625, 30_000.0)], 0.0);
        assert_eq!(c.gaps(), 2);
        assert!((c.gap_ms() - 80.0).abs() < 2.0, "{}", c.gap_ms());
    }

    #[test]
    fn bad_times_restart_without_counting() {
        let mut c = Continuity::new();
        c.observe(0.0, 1e15);
        c.observe(f64::NAN, 1e15);
        c.observe(1e6, f64::INFINITY);
        c.observe(10.0, 2e15); // audio time went back: restart, not a gap
        c.observe(600_000.0, 2e15 + 600_000.0);
        c.observe(1_200_000.0, 2e15 + 1_200_000.0);
        assert_eq!(c.gaps(), 0);
    }
}
