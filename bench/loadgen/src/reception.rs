//! What one emulated client received from the server over a measuring window: packets
//! delivered, duplicated, reordered (late) and lost, by sequence number, and the time between
//! arrivals.
//!
//! Sequence numbers are JackTrip's 16-bit counters, extended here to 64 bits relative to the
//! highest one seen, so a window of any length counts across the wrap. Duplicates are told
//! apart from late packets within the last [`WINDOW`] numbers (a bitmap); a packet older than
//! that is counted late without the duplicate check. Inter-arrival times go into a fixed
//! histogram of [`BIN_US`]-wide bins, so a client costs the same whatever the run's length and
//! nothing allocates per packet.

/// Sequence numbers behind the highest whose arrival is remembered (duplicate check).
pub const WINDOW: u64 = 64;
/// Width of an inter-arrival bin, µs.
pub const BIN_US: u64 = 50;
/// Inter-arrival bins: 0 to 50 ms; longer gaps go to the last.
pub const BINS: usize = 1000;

/// Inter-arrival times, µs, in [`BIN_US`] bins.
#[derive(Clone, Debug)]
pub struct Gaps {
    bins: Vec<u64>,
    count: u64,
    max_us: u64,
}

impl Default for Gaps {
    fn default() -> Self {
        Gaps {
            bins: vec![0; BINS],
            count: 0,
            max_us: 0,
        }
    }
}

impl Gaps {
    pub fn add(&mut self, us: u64) {
        let bin = ((us / BIN_US) as usize).min(BINS - 1);
        self.bins[bin] += 1;
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    /// Adds `other`'s times to these.
    pub fn merge(&mut self, other: &Gaps) {
        for (a, b) in self.bins.iter_mut().zip(&other.bins) {
            *a += b;
        }
        self.count += other.count;
        self.max_us = self.max_us.max(other.max_us);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn max_ms(&self) -> f64 {
        self.max_us as f64 / 1000.0
    }

    /// The `q` quantile (0..=1), ms: the upper edge of the bin that holds it, or the longest gap
    /// when that is sooner or the bin is the last (NaN when empty).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.count == 0 {
            return f64::NAN;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.bins.iter().enumerate() {
            seen += n;
            if seen >= rank {
                if i == BINS - 1 {
                    return self.max_ms();
                }
                let edge = (i as u64 + 1) * BIN_US;
                return edge.min(self.max_us.max(BIN_US)) as f64 / 1000.0;
            }
        }
        self.max_ms()
    }

    fn clear(&mut self) {
        self.bins.iter_mut().for_each(|b| *b = 0);
        self.count = 0;
        self.max_us = 0;
    }
}

/// One client's reception since the last [`Reception::reset`].
#[derive(Clone, Debug, Default)]
pub struct Reception {
    /// The highest extended sequence number seen, and the first of the window.
    highest: Option<u64>,
    first: u64,
    /// Bit i: `highest - i` arrived.
    seen: u64,
    last_arrival_us: Option<u64>,
    /// Distinct packets that arrived.
    pub delivered: u64,
    /// Packets that arrived again.
    pub duplicates: u64,
    /// Packets that arrived after a later one (counted in `delivered` too).
    pub late: u64,
    pub gaps: Gaps,
}

impl Reception {
    /// Starts a new window: the counts and times so far are forgotten.
    pub fn reset(&mut self) {
        self.highest = None;
        self.first = 0;
        self.seen = 0;
        self.last_arrival_us = None;
        self.delivered = 0;
        self.duplicates = 0;
        self.late = 0;
        self.gaps.clear();
    }

    /// A packet with sequence number `seq` arrived at `now_us` (any monotonic µs clock).
    pub fn on_packet(&mut self, seq: u16, now_us: u64) {
        if let Some(last) = self.last_arrival_us {
            self.gaps.add(now_us.saturating_sub(last));
        }
        self.last_arrival_us = Some(now_us);
        let Some(highest) = self.highest else {
            // Far enough above zero that a packet from before the first stays positive.
            let ext = (1 << 20) + u64::from(seq);
            self.highest = Some(ext);
            self.first = ext;
            self.seen = 1;
            self.delivered = 1;
            return;
        };
        let delta = i64::from(seq.wrapping_sub(highest as u16) as i16);
        if delta > 0 {
            let d = delta as u64;
            self.seen = if d >= 64 { 0 } else { self.seen << d };
            self.seen |= 1;
            self.highest = Some(highest + d);
            self.delivered += 1;
            return;
        }
        let behind = delta.unsigned_abs();
        if behind < WINDOW {
            let bit = 1u64 << behind;
            if self.seen & bit != 0 {
                self.duplicates += 1;
                return;
            }
            self.seen |= bit;
        }
        self.late += 1;
        self.delivered += 1;
        if highest - behind < self.first {
            self.first = highest - behind;
        }
    }

    /// Sequence numbers from the first to the highest seen in the window (0 when none came).
    pub fn span(&self) -> u64 {
        self.highest.map_or(0, |h| h - self.first + 1)
    }

    /// Numbers in the span that never arrived.
    pub fn lost(&self) -> u64 {
        self.span().saturating_sub(self.delivered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(r: &mut Reception, seqs: &[u16]) {
        for (i, &s) in seqs.iter().enumerate() {
            r.on_packet(s, 2667 * i as u64);
        }
    }

    #[test]
    fn in_order_packets_are_all_delivered_none_lost() {
        let mut r = Reception::default();
        feed(&mut r, &(0..1000).collect::<Vec<u16>>());
        assert_eq!(
            (r.delivered, r.lost(), r.late, r.duplicates),
            (1000, 0, 0, 0)
        );
        assert_eq!(r.span(), 1000);
        assert_eq!(r.gaps.count(), 999);
        // Every gap is 2667 µs: bin 53 (2650..2700), whose upper edge is 2.7 ms.
        assert!((r.gaps.quantile_ms(0.99) - 2.667).abs() < 0.05);
    }

    #[test]
    fn counts_hold_across_the_wrap() {
        let mut r = Reception::default();
        let seqs: Vec<u16> = (65_000u32..66_000).map(|s| s as u16).collect();
        feed(&mut r, &seqs);
        assert_eq!((r.delivered, r.lost(), r.span()), (1000, 0, 1000));
    }

    #[test]
    fn a_gap_is_lost_a_repeat_is_a_duplicate_a_reordered_packet_is_late() {
        let mut r = Reception::default();
        // 5 and 6 never come, 9 comes twice, 12 comes after 13.
        feed(&mut r, &[1, 2, 3, 4, 7, 8, 9, 9, 10, 11, 13, 12, 14]);
        assert_eq!(r.span(), 14);
        assert_eq!(r.delivered, 12);
        assert_eq!(r.lost(), 2);
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.late, 1);
    }

    #[test]
    fn a_packet_from_before_the_first_widens_the_span() {
        let mut r = Reception::default();
        feed(&mut r, &[10, 11, 9]);
        assert_eq!((r.span(), r.delivered, r.lost(), r.late), (3, 3, 0, 1));
    }

    #[test]
    fn a_jump_forward_counts_the_skipped_numbers_lost() {
        let mut r = Reception::default();
        feed(&mut r, &[0, 1, 500, 501]);
        assert_eq!((r.span(), r.delivered, r.lost()), (502, 4, 498));
        // 1 is 500 behind now: beyond the duplicate window, so it counts late, not duplicate.
        r.on_packet(1, 0);
        assert_eq!((r.late, r.duplicates), (1, 0));
    }

    #[test]
    fn reset_starts_a_new_window() {
        let mut r = Reception::default();
        feed(&mut r, &[1, 2, 4]);
        r.reset();
        feed(&mut r, &[5, 6]);
        assert_eq!(
            (r.span(), r.delivered, r.lost(), r.gaps.count()),
            (2, 2, 0, 1)
        );
    }

    #[test]
    fn quantiles_of_known_gaps() {
        let mut g = Gaps::default();
        for _ in 0..99 {
            g.add(1000);
        }
        g.add(20_000);
        assert!((g.quantile_ms(0.5) - 1.05).abs() < 1e-9);
        assert!((g.quantile_ms(0.99) - 1.05).abs() < 1e-9);
        assert!((g.quantile_ms(1.0) - 20.0).abs() < 1e-9);
        assert!(Gaps::default().quantile_ms(0.5).is_nan());
        // Beyond the last bin: the quantile is the longest gap itself.
        let mut long = Gaps::default();
        long.add(80_000);
        assert!((long.quantile_ms(0.99) - 80.0).abs() < 1e-9);
    }
}
