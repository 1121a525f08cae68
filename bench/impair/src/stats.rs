//! What a run counted, and how late its verdicts were, as one JSON object.

use std::fmt::Write as _;

/// A histogram of nanosecond values with relative precision better than 1 %: values below 256
/// have their own bins, above that 128 bins per power of two. About 7,000 counters, allocated
/// once; `record` allocates nothing.
#[derive(Clone, Debug)]
pub struct Histogram {
    bins: Vec<u64>,
    count: u64,
    sum: u128,
    max: u64,
}

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub fn new() -> Self {
        Self {
            bins: vec![0; Self::index(u64::MAX) + 1],
            count: 0,
            sum: 0,
            max: 0,
        }
    }

    fn index(v: u64) -> usize {
        if v < 2 * SUB {
            return v as usize;
        }
        let shift = 64 - v.leading_zeros() - (SUB_BITS + 1);
        // v >> shift is in [SUB, 2 * SUB).
        (2 * SUB + (shift as u64 - 1) * SUB + ((v >> shift) - SUB)) as usize
    }

    /// The smallest value that falls in bin `i`.
    fn lower_bound(i: usize) -> u64 {
        let i = i as u64;
        if i < 2 * SUB {
            return i;
        }
        let shift = (i - 2 * SUB) / SUB + 1;
        (SUB + (i - 2 * SUB) % SUB) << shift
    }

    pub fn record(&mut self, v: u64) {
        self.bins[Self::index(v)] += 1;
        self.count += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` in `[0, 1]` (the lower edge of its bin, at most the maximum);
    /// 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.bins.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::lower_bound(i).min(self.max);
            }
        }
        self.max
    }
}

/// How the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// `--duration-s` passed.
    Duration,
    /// SIGTERM or SIGINT.
    Signal(i32),
    /// A system call failed; the error went to stderr.
    Error,
}

/// Counters of one run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub seen: u64,
    pub accepted: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    /// Packets still held when the run ended, released at once then.
    pub released_at_exit: u64,
    /// Most packets held at one time.
    pub max_held: usize,
    /// Verdicts the kernel refused (it answers only then).
    pub verdict_errors: u64,
    /// Messages from the kernel that did not parse.
    pub malformed: u64,
    /// Nanoseconds between a verdict's due time and the moment it was sent (for a drop or an
    /// unimpaired packet, its due time is when it was read).
    pub lateness: Histogram,
    /// Receive buffer the kernel granted, bytes.
    pub rcvbuf: usize,
    /// Whether the run had real-time priority.
    pub realtime: bool,
    pub elapsed_s: f64,
    pub stop: Option<Stop>,
}

fn us(ns: u64) -> f64 {
    (ns as f64 / 100.0).round() / 10.0
}

impl Stats {
    pub fn dropped(&self) -> u64 {
        self.dropped_loss + self.dropped_queue
    }

    /// One JSON object; `config` is inserted as is (already JSON).
    pub fn to_json(&self, config: &str) -> String {
        let stopped_by = match self.stop {
            Some(Stop::Duration) => "\"duration\"".to_string(),
            Some(Stop::Signal(s)) => format!("\"signal {s}\""),
            Some(Stop::Error) => "\"error\"".to_string(),
            None => "null".to_string(),
        };
        let l = &self.lateness;
        let mut s = String::new();
        let _ = write!(
            s,
            "{{\"packets_seen\":{},\"accepted\":{},\"dropped\":{},\"dropped_loss\":{},\
             \"dropped_queue_full\":{},\"released_at_exit\":{},\"max_held\":{},\
             \"verdict_lateness_us\":{{\"count\":{},\"p50\":{},\"p99\":{},\"max\":{},\"mean\":{}}},\
             \"verdict_errors\":{},\"malformed\":{},\"rcvbuf_bytes\":{},\"realtime\":{},\"elapsed_s\":{:.3},\
             \"stopped_by\":{},\"config\":{}}}",
            self.seen,
            self.accepted,
            self.dropped(),
            self.dropped_loss,
            self.dropped_queue,
            self.released_at_exit,
            self.max_held,
            l.count(),
            us(l.quantile(0.5)),
            us(l.quantile(0.99)),
            us(l.max()),
            us(l.mean().round() as u64),
            self.verdict_errors,
            self.malformed,
            self.rcvbuf,
            self.realtime,
            self.elapsed_s,
            stopped_by,
            config,
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impair::SplitMix64;

    #[test]
    fn bins_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let i = Histogram::index(v);
            assert!(i >= last);
            last = i;
            assert!(Histogram::lower_bound(i) <= v);
            // The bin starts within 1/128 below the value.
            assert!(v - Histogram::lower_bound(i) <= v / SUB, "{v}");
        }
        assert_eq!(Histogram::index(u64::MAX) + 1, Histogram::new().bins.len());
    }

    #[test]
    fn quantiles_match_a_sorted_oracle_within_one_percent() {
        let mut rng = SplitMix64::new(17);
        let mut h = Histogram::new();
        let mut values: Vec<u64> = (0..50_000).map(|_| rng.below(5_000_000)).collect();
        values.extend((0..500).map(|_| 20_000_000 + rng.below(1_000_000)));
        for &v in &values {
            h.record(v);
        }
        values.sort_unstable();
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let rank = ((q * values.len() as f64).ceil() as usize).max(1);
            let want = values[rank - 1];
            let got = h.quantile(q);
            assert!(
                got <= want && want - got <= want / 100,
                "q {q}: {got} vs {want}"
            );
        }
        assert_eq!(h.max(), *values.last().expect("values"));
        assert_eq!(Histogram::new().quantile(0.5), 0);
    }

    #[test]
    fn json_has_the_counters() {
        let mut s = Stats {
            seen: 10,
            accepted: 7,
            dropped_loss: 2,
            dropped_queue: 1,
            ..Stats::default()
        };
        s.lateness.record(1_500);
        s.lateness.record(2_500);
        s.stop = Some(Stop::Signal(15));
        let j = s.to_json("{\"seed\":1}");
        assert!(
            j.starts_with("{\"packets_seen\":10,\"accepted\":7,\"dropped\":3,"),
            "{j}"
        );
        assert!(j.contains("\"verdict_lateness_us\":{\"count\":2,\"p50\":1.5,\"p99\":2.5,\"max\":2.5,\"mean\":2}"), "{j}");
        assert!(
            j.ends_with("\"stopped_by\":\"signal 15\",\"config\":{\"seed\":1}}"),
            "{j}"
        );
    }
}
