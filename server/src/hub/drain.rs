//! How much one listener's link may hold before the hub drops audio for it, from the rate its
//! path drains, measured at the hub.
//!
//! SCTP holds messages back while its congestion window is closed (a narrow or lossy path); audio
//! that waits there arrives late, and everything after it with it. What the channel holds (its
//! buffered amount) counts the bytes in flight too, released when acknowledged or abandoned. So
//! the bytes that have *left* the channel, written minus held, grow at the rate the path carries.
//! The bound is a time at that rate:
//!
//! - [`QUEUED_SECONDS`] while the path drains what the hub offers it: room for the round trip
//!   of a busy machine and a page that stalls for a moment.
//! - [`NARROW_SECONDS`] once the hub offers more than the path drains ([`NARROW_RATIO`] over a
//!   window): the path is the bottleneck, and the hub keeps the queue in front of it short. A
//!   message the hub drops costs nothing more. One the network drops (a router's queue full)
//!   is abandoned by SCTP, which then sends a FORWARD TSN at every acknowledgement that comes
//!   back before the peer has taken the last one (RFC 3758 C3, as SCTP's sender implements it),
//!   and the browser answers each one that is out of date with another acknowledgement. Over
//!   a queue half a second long that exchange filled a 1 Mbit/s path with 100-byte packets for
//!   two seconds after the listener's layer had already stepped down: 20-70 % of its audio lost.
//!   With the queue kept short the exchange dies within a round trip.
//!
//! A bound from the rate *written* would not see a path that narrowed: on a path cut to a third
//! it let the hub hold 94 kB, more than a home router's queue of 64 packets.
//!
//! The rates are those of the last [`WINDOW`], sampled every [`SAMPLE_EVERY`] (the worker samples
//! at its wakes). A narrow path drains steadily: at 1 Mbit/s, 4-6 kB in every 50 ms. A page that
//! stalls (a loaded machine) acknowledges nothing for the stall and everything at once after it,
//! so a window with a sample period that drained less than [`STEADY_FRACTION`] of the window's
//! mean is a stall, not a narrow path: the bound stays [`QUEUED_SECONDS`], and the audio waits
//! for the page instead of being dropped (dropped, it would read as loss, and the page's layer
//! controller would step it down for a stall).

use std::time::{Duration, Instant};

/// What a link may hold, in seconds of the rate its path drains, while that is what it is offered...
pub const QUEUED_SECONDS: f64 = 0.25;
/// ...and once it is offered more than this times what it drains...
pub const NARROW_RATIO: f64 = 1.25;
/// ...this many seconds of it. A path whose round trip is longer than this then carries less than
/// it could; its listener's layer controller steps down to what fits (and the bound is
/// [`QUEUED_SECONDS`] again). Such a path is far beyond playing in time anyway.
pub const NARROW_SECONDS: f64 = 0.1;
/// A window is narrow only if every sample period in it drained at least this fraction of the
/// window's mean.
pub const STEADY_FRACTION: f64 = 0.25;
/// The bound never goes below this: a packet train (4.4 kB) and a message behind it. A message is
/// written whatever its size when less is waiting.
pub const MIN_QUEUED_BYTES: usize = 8 * 1024;
/// ...and is this until a window's rate is known.
pub const FIRST_QUEUED_BYTES: usize = 128 * 1024;
/// How often the drained count is sampled...
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// ...and the span the rate is measured over (the samples kept span this).
pub const WINDOW: Duration = Duration::from_millis(250);
const SAMPLES: usize = (WINDOW.as_millis() / SAMPLE_EVERY.as_millis()) as usize + 1;

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    left: u64,
    offered: u64,
}

/// A link's send bound from its drain rate.
#[derive(Debug, Clone)]
pub struct SendBound {
    /// (when, bytes that had left the channel by then, bytes offered to it by then), a ring;
    /// `next` is the slot written next.
    samples: [Sample; SAMPLES],
    next: usize,
    kept: usize,
    bound: usize,
}

impl SendBound {
    pub fn new(now: Instant) -> SendBound {
        SendBound {
            samples: [Sample {
                at: now,
                left: 0,
                offered: 0,
            }; SAMPLES],
            next: 0,
            kept: 0,
            bound: FIRST_QUEUED_BYTES,
        }
    }

    /// Whether a sample is due at `now` (cheap: the worker asks at every wake).
    pub fn due(&self, now: Instant) -> bool {
        self.kept == 0 || now >= self.newest().at + SAMPLE_EVERY
    }

    /// Records that by `now`, `left` bytes have left the channel (written minus held) and
    /// `offered` bytes were offered to it (written or dropped), and sets the bound from the rates
    /// over the window once the samples span it.
    pub fn sample(&mut self, now: Instant, left: u64, offered: u64) {
        self.samples[self.next] = Sample {
            at: now,
            left,
            offered,
        };
        self.next = (self.next + 1) % SAMPLES;
        self.kept = (self.kept + 1).min(SAMPLES);
        if self.kept < SAMPLES {
            return;
        }
        // The oldest sample is the slot written next.
        let then = self.samples[self.next];
        let span = now.saturating_duration_since(then.at).as_secs_f64();
        if span <= 0.0 {
            return;
        }
        let drained = left.saturating_sub(then.left) as f64 / span;
        let offered = offered.saturating_sub(then.offered) as f64 / span;
        let seconds = if offered > drained * NARROW_RATIO && self.steady(drained) {
            NARROW_SECONDS
        } else {
            QUEUED_SECONDS
        };
        self.bound = ((drained * seconds) as usize).max(MIN_QUEUED_BYTES);
    }

    /// What the channel may hold before a message is dropped.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// Whether every sample period of the window drained at least [`STEADY_FRACTION`] of
    /// `mean` (bytes per second).
    fn steady(&self, mean: f64) -> bool {
        (0..SAMPLES - 1).all(|k| {
            let a = self.samples[(self.next + k) % SAMPLES];
            let b = self.samples[(self.next + k + 1) % SAMPLES];
            let span = b.at.saturating_duration_since(a.at).as_secs_f64();
            span > 0.0 && b.left.saturating_sub(a.left) as f64 / span >= mean * STEADY_FRACTION
        })
    }

    fn newest(&self) -> Sample {
        self.samples[(self.next + SAMPLES - 1) % SAMPLES]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path sampled every sample period: what the hub offers it and what it drains, in bytes
    /// per second.
    struct Path {
        t0: Instant,
        at_ms: u64,
        left: u64,
        offered: u64,
    }

    impl Path {
        /// A path from now, and a link's bound made at the same time.
        fn new() -> (Path, SendBound) {
            let t0 = Instant::now();
            let p = Path {
                t0,
                at_ms: 0,
                left: 0,
                offered: 0,
            };
            (p, SendBound::new(t0))
        }

        fn run(&mut self, b: &mut SendBound, ms: u64, offered_per_s: u64, drained_per_s: u64) {
            let step = SAMPLE_EVERY.as_millis() as u64;
            let end = self.at_ms + ms;
            while self.at_ms < end {
                self.at_ms += step;
                self.offered += offered_per_s * step / 1000;
                self.left += drained_per_s * step / 1000;
                b.sample(
                    self.t0 + Duration::from_millis(self.at_ms),
                    self.left,
                    self.offered,
                );
            }
        }
    }

    /// 3 Mbit/s, and the 1 Mbit/s of the path it is cut to, in bytes per second.
    const FULL: u64 = 375_000;
    const CUT: u64 = 125_000;

    #[test]
    fn the_first_bound_holds_until_a_window_is_measured() {
        let (mut p, mut b) = Path::new();
        assert!(b.due(p.t0));
        p.run(&mut b, 250, FULL, FULL);
        assert_eq!(b.bound(), FIRST_QUEUED_BYTES);
        p.run(&mut b, 50, FULL, FULL);
        // A quarter second of 3 Mbit/s: 93,750 bytes.
        assert_eq!(b.bound(), 93_750);
    }

    #[test]
    fn a_path_cut_to_a_third_is_held_to_a_short_queue_within_a_window() {
        let (mut p, mut b) = Path::new();
        p.run(&mut b, 1000, FULL, FULL);
        assert_eq!(b.bound(), 93_750);
        // 100 ms into the cut the window's drain is 2.2 Mbit/s against 3 offered: narrow.
        p.run(&mut b, 100, FULL, CUT);
        assert_eq!(b.bound(), (275_000.0 * NARROW_SECONDS) as usize);
        p.run(&mut b, 150, FULL, CUT);
        // A tenth of a second of 1 Mbit/s: 12.5 kB, about 25 packets of a layer as sent, where a
        // home router's queue holds 64.
        assert_eq!(b.bound(), 12_500);
    }

    #[test]
    fn a_layer_that_fits_the_narrow_path_gets_the_quarter_second_again() {
        let (mut p, mut b) = Path::new();
        p.run(&mut b, 1000, FULL, CUT);
        assert_eq!(b.bound(), 12_500);
        // Opus 64 for two senders, 44 kB/s, drains as offered.
        p.run(&mut b, 250, 44_000, 44_000);
        assert_eq!(b.bound(), 11_000);
    }

    #[test]
    fn a_link_that_carries_little_keeps_the_floor() {
        let (mut p, mut b) = Path::new();
        p.run(&mut b, 500, 8_000, 8_000);
        assert_eq!(b.bound(), MIN_QUEUED_BYTES);
        p.run(&mut b, 500, 0, 0);
        assert_eq!(b.bound(), MIN_QUEUED_BYTES);
    }

    #[test]
    fn a_stall_is_no_narrow_path() {
        let (mut p, mut b) = Path::new();
        p.run(&mut b, 1000, FULL, FULL);
        // 100 ms without an acknowledgement: 150 ms of the window drained, 250 offered. Not
        // steady, so a quarter second of what it drained.
        p.run(&mut b, 100, FULL, 0);
        assert_eq!(b.bound(), (225_000.0 * QUEUED_SECONDS) as usize);
        // The acknowledgement of the stall's bytes comes at once, then the rate again.
        p.left += FULL / 10;
        p.run(&mut b, 300, FULL, FULL);
        assert_eq!(b.bound(), 93_750);
        // A path that drains a third of what it is offered, but steadily, is narrow.
        p.run(&mut b, 250, FULL, CUT);
        assert_eq!(b.bound(), 12_500);
    }

    #[test]
    fn samples_come_no_more_often_than_their_period() {
        let t0 = Instant::now();
        let mut b = SendBound::new(t0);
        b.sample(t0, 0, 0);
        assert!(!b.due(t0 + Duration::from_millis(49)));
        assert!(b.due(t0 + SAMPLE_EVERY));
    }
}
