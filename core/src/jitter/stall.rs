//! Telling a stall of the local machine from a peer's lateness.
//!
//! When this machine stalls (its packet pump or main thread starved, a page busy), every peer's
//! packets stop reaching the engine and then come all together: to each jitter buffer that looks
//! exactly like a late path. If each buffer learnt from it, one local hiccup would raise every
//! peer's depth at once; they are the local machine's, not the peers'. Independent paths do not
//! all fall silent at the same moment, so a gap of [`LOCAL_STALL_FRAMES`] with no packet from any
//! of at least two streaming peers is taken as a local stall, and the packets that end it are
//! excused: they are played (or counted late) as usual but do not feed any peer's lateness
//! estimate, and an underrun they end counts as `stall_underruns`, not as a late one.
//!
//! Sans-IO and real-time safe: the engine calls [`LocalStall::arrival`] for every packet it
//! drains, with the quantum's time; nothing allocates.

/// Silence from every streaming peer that means a local stall: 30 ms at 48 kHz (a peer's
/// packets are normally 0.7-5 ms apart; a path that drops them all for 30 ms while every other
/// path does the same is this machine).
pub const LOCAL_STALL_FRAMES: u64 = 1440;
/// How long after the end of a stall arrivals are still excused (the clump of packets that
/// piled up may take a few quanta to drain): 4 quanta.
pub const EXCUSE_FRAMES: u64 = 512;

/// Watches the arrivals of every peer of an engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalStall {
    last: Option<u64>,
    excused_until: Option<u64>,
    stalls: u64,
}

impl LocalStall {
    /// A detector that has seen nothing yet.
    pub fn new() -> Self {
        LocalStall::default()
    }

    /// A packet drained at local time `now` (frames), while `streaming` peers were playing.
    /// Returns the local time until which arrivals are excused when this one ends (or
    /// follows) a local stall. Real-time safe.
    pub fn arrival(&mut self, now: u64, streaming: usize) -> Option<u64> {
        if let Some(last) = self.last {
            let gap = now.saturating_sub(last);
            if streaming >= 2 && gap >= LOCAL_STALL_FRAMES {
                self.stalls += 1;
                self.excused_until = Some(now + EXCUSE_FRAMES);
            }
        }
        self.last = Some(now);
        self.excused_until.filter(|&u| now <= u)
    }

    /// Local stalls seen so far.
    pub fn stalls(&self) -> u64 {
        self.stalls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_common_silence_is_a_local_stall_and_excuses_the_clump() {
        let mut d = LocalStall::new();
        // Two peers, a packet each every quantum.
        for q in 0..100u64 {
            assert_eq!(d.arrival(q * 128, 2), None);
            assert_eq!(d.arrival(q * 128, 2), None);
        }
        // 40 ms of nothing, then the clump over two quanta.
        let resume = 99 * 128 + 1920;
        assert_eq!(d.arrival(resume, 2), Some(resume + EXCUSE_FRAMES));
        assert_eq!(d.arrival(resume + 128, 2), Some(resume + EXCUSE_FRAMES));
        assert_eq!(d.arrival(resume + EXCUSE_FRAMES + 128, 2), None);
        assert_eq!(d.stalls(), 1);
    }

    #[test]
    fn one_peer_or_a_short_gap_is_not_a_local_stall() {
        let mut d = LocalStall::new();
        assert_eq!(d.arrival(0, 1), None);
        // One streaming peer: its silence may be its path.
        assert_eq!(d.arrival(10_000, 1), None);
        // Two peers, a gap just under the threshold.
        assert_eq!(d.arrival(10_000 + LOCAL_STALL_FRAMES - 1, 2), None);
        assert_eq!(d.stalls(), 0);
    }
}
