//! The impairment model, sans-IO: told when a packet arrived and how long it is, it says whether
//! to drop it or when to release it. It owns no clock, socket or thread, so the tests below run
//! hundreds of thousands of packets in virtual time and check known answers.
//!
//! A packet goes through three stages, in this order (as on a real path: a bottleneck queue, a
//! lossy link, then propagation):
//!
//! 1. **Rate limit** (optional): a token bucket of `rate` bit/s and `burst` bytes with a FIFO of
//!    at most `queue` packets waiting for tokens. A packet arriving at a full queue is dropped
//!    ([`DropReason::QueueFull`]); `queue = 0` makes it a policer. Packets lost at stage 2 have
//!    used the link's bandwidth already.
//! 2. **Loss**: independent with probability `loss` when `loss_run <= 1`, otherwise a two-state
//!    Gilbert model whose bad state loses every packet: it enters the bad state with probability
//!    `loss * r / (1 - loss)` and leaves it with probability `r = 1 / loss_run`, so the long-run
//!    loss rate is `loss` and runs of consecutive losses are geometric with mean `loss_run`.
//! 3. **Delay**: a fixed `delay` plus a uniform jitter in `[-jitter, +jitter]` (never before the
//!    packet left stage 1). By default packets keep their order: a packet is never released before
//!    the one ahead of it, which skews delays upward when packets are closer than `2 * jitter`
//!    but keeps every delay within `[delay - jitter, delay + jitter]`. With `reorder`, each
//!    packet's delay is drawn alone and packets overtake each other.
//!
//! All randomness comes from one seeded [`SplitMix64`]: the same seed and the same arrivals give
//! the same decisions.

use std::collections::VecDeque;
use std::fmt;

/// Nanoseconds per millisecond: the model counts time in nanoseconds.
pub const NS_PER_MS: u64 = 1_000_000;
const NS_PER_S: u128 = 1_000_000_000;

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast, well-mixed 64-bit generator; enough for
/// test impairments and needs no crate.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// Uniform in `[0, n)` (multiply-shift; the bias is below 2^-64 * n, irrelevant here).
    /// `n = 0` gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The token bucket's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RateConfig {
    /// Link rate in bits per second (> 0).
    pub bits_per_s: u64,
    /// Bucket depth in bytes: how much may leave back to back after a pause. A packet longer than
    /// the bucket still passes, after waiting for a full bucket.
    pub burst_bytes: u32,
    /// Packets that may wait for tokens; more are dropped. 0 drops every packet that would wait.
    pub queue_packets: u32,
}

/// What to do to packets. Times in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    /// Let packets overtake each other (each delay drawn alone) instead of keeping their order.
    pub reorder: bool,
    /// Long-run fraction of packets lost, in `[0, 1)`.
    pub loss: f64,
    /// Mean length of a run of consecutive losses; `<= 1` means independent losses.
    pub loss_run: f64,
    pub rate: Option<RateConfig>,
    pub seed: u64,
}

impl Default for Config {
    /// No impairment at all: every packet is released the moment it arrives.
    fn default() -> Self {
        Self {
            delay_ns: 0,
            jitter_ns: 0,
            reorder: false,
            loss: 0.0,
            loss_run: 1.0,
            rate: None,
            seed: 1,
        }
    }
}

/// Settings the model cannot honour.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    /// `loss` is not a number in `[0, 1)`.
    Loss(f64),
    /// `loss_run` is not a finite number.
    LossRun(f64),
    /// The Gilbert model cannot have this loss rate with runs this short: entering the bad state
    /// would need a probability above 1 (`loss * r / (1 - loss)` with `r = 1 / loss_run`).
    LossRunTooShort { loss: f64, loss_run: f64 },
    /// A rate of 0 bit/s.
    ZeroRate,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Loss(p) => write!(f, "loss must be a fraction in [0, 1), got {p}"),
            ConfigError::LossRun(r) => write!(f, "loss run must be a finite number, got {r}"),
            ConfigError::LossRunTooShort { loss, loss_run } => write!(
                f,
                "a loss rate of {loss} cannot come in runs of mean {loss_run}: \
                 the mean run must be at least {:.3}",
                loss / (1.0 - loss)
            ),
            ConfigError::ZeroRate => write!(f, "the rate limit must be above 0 bit/s"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The loss model lost it.
    Loss,
    /// The rate limiter's queue was full.
    QueueFull,
}

/// The model's answer for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Let the packet through at this time (never before it arrived).
    Release {
        at_ns: u64,
    },
    Drop(DropReason),
}

#[derive(Clone, Debug)]
enum LossModel {
    None,
    Independent { p: f64 },
    Gilbert { enter: f64, leave: f64, bad: bool },
}

impl LossModel {
    fn new(loss: f64, loss_run: f64, rng: &mut SplitMix64) -> Result<Self, ConfigError> {
        if !(0.0..1.0).contains(&loss) {
            return Err(ConfigError::Loss(loss));
        }
        if !loss_run.is_finite() {
            return Err(ConfigError::LossRun(loss_run));
        }
        if loss == 0.0 {
            return Ok(LossModel::None);
        }
        if loss_run <= 1.0 {
            return Ok(LossModel::Independent { p: loss });
        }
        let leave = 1.0 / loss_run;
        let enter = loss * leave / (1.0 - loss);
        if enter > 1.0 {
            return Err(ConfigError::LossRunTooShort { loss, loss_run });
        }
        // Start in the stationary distribution, so the first packets are not biased.
        let bad = rng.chance(loss);
        Ok(LossModel::Gilbert { enter, leave, bad })
    }

    fn lost(&mut self, rng: &mut SplitMix64) -> bool {
        match self {
            LossModel::None => false,
            LossModel::Independent { p } => rng.chance(*p),
            LossModel::Gilbert { enter, leave, bad } => {
                let flip = if *bad { *leave } else { *enter };
                if rng.chance(flip) {
                    *bad = !*bad;
                }
                *bad
            }
        }
    }
}

/// A token bucket in "theoretical arrival time" form: `full_at_ns` is when the bucket would be
/// full again; the tokens at time `t` are `burst - (full_at_ns - t) * rate`, capped at `burst`.
#[derive(Clone, Debug)]
struct Shaper {
    bits_per_s: u64,
    burst_ns: u64,
    full_at_ns: u64,
    /// Departure times of the packets still waiting for tokens, oldest first.
    waiting: VecDeque<u64>,
    queue_packets: usize,
}

impl Shaper {
    fn new(cfg: &RateConfig) -> Result<Self, ConfigError> {
        if cfg.bits_per_s == 0 {
            return Err(ConfigError::ZeroRate);
        }
        let queue_packets = cfg.queue_packets as usize;
        Ok(Self {
            bits_per_s: cfg.bits_per_s,
            burst_ns: Self::duration_ns(cfg.bits_per_s, cfg.burst_bytes as usize),
            full_at_ns: 0,
            waiting: VecDeque::with_capacity(queue_packets),
            queue_packets,
        })
    }

    /// Time to earn the tokens for `bytes` at `bits_per_s`, rounded up.
    fn duration_ns(bits_per_s: u64, bytes: usize) -> u64 {
        let ns = (bytes as u128 * 8 * NS_PER_S).div_ceil(bits_per_s as u128);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// When a packet of `len` bytes arriving at `now_ns` gets its tokens, or `None` when it
    /// would have to wait behind a full queue.
    fn depart(&mut self, now_ns: u64, len: usize) -> Option<u64> {
        while self.waiting.front().is_some_and(|&t| t <= now_ns) {
            self.waiting.pop_front();
        }
        let cost_ns = Self::duration_ns(self.bits_per_s, len);
        // A packet longer than the bucket waits for a full bucket and then takes it all.
        let slack_ns = self.burst_ns.max(cost_ns);
        let earliest = (self.full_at_ns.saturating_add(cost_ns)).saturating_sub(slack_ns);
        let depart = now_ns.max(earliest);
        if depart > now_ns {
            if self.waiting.len() >= self.queue_packets {
                return None;
            }
            self.waiting.push_back(depart);
        }
        self.full_at_ns = self.full_at_ns.max(depart).saturating_add(cost_ns);
        Some(depart)
    }
}

/// The model. `on_packet` costs a few arithmetic operations and allocates nothing (the rate
/// limiter's queue is sized up front).
#[derive(Clone, Debug)]
pub struct Impairer {
    delay_ns: u64,
    jitter_ns: u64,
    reorder: bool,
    loss: LossModel,
    shaper: Option<Shaper>,
    rng: SplitMix64,
    last_release_ns: u64,
}

impl Impairer {
    pub fn new(cfg: &Config) -> Result<Self, ConfigError> {
        let mut rng = SplitMix64::new(cfg.seed);
        let loss = LossModel::new(cfg.loss, cfg.loss_run, &mut rng)?;
        let shaper = cfg.rate.as_ref().map(Shaper::new).transpose()?;
        Ok(Self {
            delay_ns: cfg.delay_ns,
            jitter_ns: cfg.jitter_ns,
            reorder: cfg.reorder,
            loss,
            shaper,
            rng,
            last_release_ns: 0,
        })
    }

    /// Decides the fate of a packet of `len` bytes (IP packet length) arriving at `now_ns`.
    /// Arrival times must not go backwards.
    pub fn on_packet(&mut self, now_ns: u64, len: usize) -> Decision {
        let depart = match &mut self.shaper {
            Some(shaper) => match shaper.depart(now_ns, len) {
                Some(t) => t,
                None => return Decision::Drop(DropReason::QueueFull),
            },
            None => now_ns,
        };
        if self.loss.lost(&mut self.rng) {
            return Decision::Drop(DropReason::Loss);
        }
        let mut at = depart.saturating_add(self.delay_ns);
        if self.jitter_ns > 0 {
            let offset = self.rng.below(2 * self.jitter_ns + 1);
            // at + offset - jitter, but never before the packet left the rate limiter.
            at = at
                .saturating_add(offset)
                .saturating_sub(self.jitter_ns)
                .max(depart);
        }
        if !self.reorder {
            at = at.max(self.last_release_ns);
            self.last_release_ns = at;
        }
        Decision::Release { at_ns: at }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NS_PER_MS;

    /// Feeds `n` packets of `len` bytes, one every `interval_ns`; returns the decisions.
    fn feed(cfg: &Config, n: usize, interval_ns: u64, len: usize) -> Vec<(u64, Decision)> {
        let mut imp = Impairer::new(cfg).expect("valid test config");
        (0..n as u64)
            .map(|i| {
                let t = i * interval_ns;
                (t, imp.on_packet(t, len))
            })
            .collect()
    }

    /// Lengths of the runs of consecutive drops.
    fn loss_runs(decisions: &[(u64, Decision)]) -> Vec<usize> {
        let mut runs = Vec::new();
        let mut run = 0;
        for (_, d) in decisions {
            if matches!(d, Decision::Drop(_)) {
                run += 1;
            } else if run > 0 {
                runs.push(run);
                run = 0;
            }
        }
        if run > 0 {
            runs.push(run);
        }
        runs
    }

    fn mean(xs: &[usize]) -> f64 {
        xs.iter().sum::<usize>() as f64 / xs.len() as f64
    }

    #[test]
    fn splitmix_matches_reference_outputs() {
        let mut r = SplitMix64::new(1_234_567);
        let want = [
            6_457_827_717_110_365_317,
            3_203_168_211_198_807_973,
            9_817_491_932_198_370_423,
            4_593_380_528_125_082_431,
            16_408_922_859_458_223_821,
        ];
        for w in want {
            assert_eq!(r.next_u64(), w);
        }
    }

    #[test]
    fn splitmix_uniform_draws_stay_in_range_and_are_centred() {
        let mut r = SplitMix64::new(7);
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
            assert!(r.below(7) < 7);
        }
        // Mean of U(0,1) is 0.5 with standard error 0.29 / sqrt(n) = 0.0009.
        assert!((sum / n as f64 - 0.5).abs() < 0.005);
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn no_impairment_releases_at_arrival() {
        for (t, d) in feed(&Config::default(), 1000, 100_000, 1000) {
            assert_eq!(d, Decision::Release { at_ns: t });
        }
    }

    #[test]
    fn fixed_delay_adds_exactly_the_delay() {
        let cfg = Config {
            delay_ns: 10 * MS,
            ..Config::default()
        };
        for (t, d) in feed(&cfg, 1000, 2_500_000, 1000) {
            assert_eq!(d, Decision::Release { at_ns: t + 10 * MS });
        }
    }

    #[test]
    fn jittered_delays_stay_within_bounds_in_order() {
        // 10 ± 3 ms at 400 and 10,000 packets/s: every delay in [7, 13] ms, releases in order.
        for interval in [2_500_000, 100_000] {
            let cfg = Config {
                delay_ns: 10 * MS,
                jitter_ns: 3 * MS,
                seed: 3,
                ..Config::default()
            };
            let mut last = 0;
            for (t, d) in feed(&cfg, 100_000, interval, 1000) {
                let Decision::Release { at_ns } = d else {
                    panic!("no loss configured")
                };
                assert!(
                    (t + 7 * MS..=t + 13 * MS).contains(&at_ns),
                    "{t} -> {at_ns}"
                );
                assert!(at_ns >= last, "released out of order");
                last = at_ns;
            }
        }
    }

    #[test]
    fn jitter_with_reordering_is_uniform_and_reorders() {
        let cfg = Config {
            delay_ns: 10 * MS,
            jitter_ns: 3 * MS,
            reorder: true,
            seed: 11,
            ..Config::default()
        };
        let n = 100_000;
        let decisions = feed(&cfg, n, 100_000, 1000);
        let mut sum = 0.0;
        let mut overtaken = 0;
        let mut last = 0;
        let mut low_third = 0;
        for &(t, d) in &decisions {
            let Decision::Release { at_ns } = d else {
                panic!("no loss configured")
            };
            let delay = at_ns - t;
            assert!((7 * MS..=13 * MS).contains(&delay));
            sum += delay as f64;
            if delay < 9 * MS {
                low_third += 1;
            }
            if at_ns < last {
                overtaken += 1;
            }
            last = last.max(at_ns);
        }
        // Mean of U(7, 13) ms is 10 ms (standard error 1.73 ms / sqrt(n) = 5.5 µs).
        assert!(
            (sum / n as f64 - 10e6).abs() < 50e3,
            "mean {}",
            sum / n as f64
        );
        // A third of U(7, 13) lies below 9 ms (standard error 0.0015).
        assert!((low_third as f64 / n as f64 - 1.0 / 3.0).abs() < 0.01);
        // Packets 0.1 ms apart with 6 ms of spread overtake each other most of the time.
        assert!(overtaken > n / 2, "{overtaken} of {n} overtaken");
    }

    #[test]
    fn independent_loss_rate_and_runs_match() {
        // p = 2 %: over 100k packets the rate's standard error is 0.00044; tolerance 0.002.
        // Runs of independent losses are geometric with mean 1 / (1 - p) = 1.0204.
        for seed in 1..=5 {
            let cfg = Config {
                loss: 0.02,
                seed,
                ..Config::default()
            };
            let d = feed(&cfg, 100_000, 100_000, 1000);
            let lost = d
                .iter()
                .filter(|(_, d)| *d == Decision::Drop(DropReason::Loss))
                .count();
            let rate = lost as f64 / d.len() as f64;
            assert!((rate - 0.02).abs() < 0.002, "seed {seed}: loss rate {rate}");
            let runs = loss_runs(&d);
            assert!(
                (mean(&runs) - 1.0 / 0.98).abs() < 0.05,
                "seed {seed}: run {}",
                mean(&runs)
            );
        }
    }

    #[test]
    fn gilbert_loss_rate_and_mean_run_match() {
        // Over N = 100k packets there are about N * loss / run runs, each geometric with mean
        // `run` and variance (1 - r) / r^2 (r = 1 / run). The loss rate's standard error is then
        // sqrt(runs * (variance + run^2)) / N, the mean run's sqrt(variance / runs); both must
        // hold within 4 standard errors. For 2 % in runs of 4 that is ±0.0048 and ±0.62.
        let n = 100_000;
        for (loss, run) in [(0.02, 4.0), (0.05, 2.0), (0.01, 8.0), (0.1, 1.5)] {
            let runs_expected = n as f64 * loss / run;
            let r = 1.0 / run;
            let variance = (1.0 - r) / (r * r);
            let rate_tol = 4.0 * (runs_expected * (variance + run * run)).sqrt() / n as f64;
            let run_tol = 4.0 * (variance / runs_expected).sqrt();
            for seed in 1..=5 {
                let cfg = Config {
                    loss,
                    loss_run: run,
                    seed,
                    ..Config::default()
                };
                let d = feed(&cfg, n, 100_000, 1000);
                let lost = d
                    .iter()
                    .filter(|(_, d)| matches!(d, Decision::Drop(_)))
                    .count();
                let rate = lost as f64 / n as f64;
                assert!(
                    (rate - loss).abs() < rate_tol,
                    "{loss}/{run} seed {seed}: rate {rate}"
                );
                let m = mean(&loss_runs(&d));
                assert!(
                    (m - run).abs() < run_tol,
                    "{loss}/{run} seed {seed}: mean run {m}"
                );
            }
        }
    }

    #[test]
    fn impossible_loss_settings_are_errors() {
        let bad = |loss, loss_run| {
            Impairer::new(&Config {
                loss,
                loss_run,
                ..Config::default()
            })
        };
        assert_eq!(bad(1.0, 1.0).err(), Some(ConfigError::Loss(1.0)));
        assert_eq!(bad(-0.1, 1.0).err(), Some(ConfigError::Loss(-0.1)));
        assert!(matches!(bad(f64::NAN, 1.0), Err(ConfigError::Loss(_))));
        assert!(matches!(
            bad(0.1, f64::INFINITY),
            Err(ConfigError::LossRun(_))
        ));
        // 90 % loss needs runs of at least 9.
        assert!(matches!(
            bad(0.9, 2.0),
            Err(ConfigError::LossRunTooShort { .. })
        ));
        assert!(bad(0.9, 9.5).is_ok());
        let cfg = rate_only(0, 1500, 10);
        assert_eq!(Impairer::new(&cfg).err(), Some(ConfigError::ZeroRate));
    }

    /// The default config with only a rate limit.
    fn rate_only(bits_per_s: u64, burst_bytes: u32, queue_packets: u32) -> Config {
        Config {
            rate: Some(RateConfig {
                bits_per_s,
                burst_bytes,
                queue_packets,
            }),
            ..Config::default()
        }
    }

    /// Bytes released in `[from, to)` ns.
    fn released_bytes(d: &[(u64, Decision)], len: usize, from: u64, to: u64) -> usize {
        d.iter()
            .filter(|(_, d)| matches!(d, Decision::Release { at_ns } if (from..to).contains(at_ns)))
            .count()
            * len
    }

    #[test]
    fn rate_limit_throughput_within_two_percent() {
        // Offered at twice the rate for 10 s: what leaves is the rate, within 2 %, whatever the
        // packet size and burst; the rest is dropped at the queue.
        for (kbit, len, burst) in [
            (800u64, 1000usize, 1500u32),
            (2_000, 200, 10_000),
            (500, 1400, 1400),
        ] {
            let bits_per_s = kbit * 1000;
            let cfg = rate_only(bits_per_s, burst, 50);
            let offered_pps = 2 * bits_per_s / (8 * len as u64);
            let n = (offered_pps * 10) as usize;
            let d = feed(&cfg, n, 1_000_000_000 / offered_pps, len);
            // Measure from 1 s to 9 s: past the initial burst, before the queue drains.
            let bytes = released_bytes(&d, len, 1_000_000_000, 9_000_000_000);
            let measured = bytes as f64 * 8.0 / 8.0; // bits over the 8 s window
            let want = bits_per_s as f64;
            assert!(
                (measured - want).abs() < 0.02 * want,
                "{kbit} kbit/s, {len} B: {measured} bit/s"
            );
            assert!(d
                .iter()
                .any(|(_, d)| *d == Decision::Drop(DropReason::QueueFull)));
            // Releases in order and never more than the bucket plus the rate over any window.
            let mut last = 0;
            for (_, dec) in &d {
                if let Decision::Release { at_ns } = dec {
                    assert!(*at_ns >= last);
                    last = *at_ns;
                }
            }
        }
    }

    #[test]
    fn rate_limit_below_the_rate_adds_no_delay() {
        // 400 packets/s of 1000 B = 3.2 Mbit/s through a 4 Mbit/s bucket: nothing waits.
        let cfg = rate_only(4_000_000, 1500, 10);
        for (t, d) in feed(&cfg, 10_000, 2_500_000, 1000) {
            assert_eq!(d, Decision::Release { at_ns: t });
        }
    }

    #[test]
    fn rate_limit_queue_bounds_the_wait() {
        // 1000 B at 800 kbit/s takes 10 ms; with 5 waiting packets no packet waits more than
        // 5 * 10 ms (plus one packet's rounding).
        let cfg = rate_only(800_000, 1000, 5);
        let d = feed(&cfg, 10_000, 1_000_000, 1000);
        for &(t, dec) in &d {
            if let Decision::Release { at_ns } = dec {
                assert!(at_ns - t <= 50 * MS + 1000, "waited {} ns", at_ns - t);
            }
        }
        // A policer (no queue) passes only packets that find their tokens at once.
        let cfg = rate_only(800_000, 1000, 0);
        let d = feed(&cfg, 10_000, 1_000_000, 1000);
        let passed = d
            .iter()
            .filter(|(t, dec)| *dec == Decision::Release { at_ns: *t })
            .count();
        let dropped = d
            .iter()
            .filter(|(_, dec)| *dec == Decision::Drop(DropReason::QueueFull))
            .count();
        assert_eq!(passed + dropped, d.len());
        assert_eq!(passed, 1000, "one packet in ten fits 800 kbit/s");
    }

    #[test]
    fn same_seed_same_decisions() {
        let cfg = Config {
            delay_ns: 5 * MS,
            jitter_ns: 2 * MS,
            reorder: true,
            loss: 0.05,
            loss_run: 3.0,
            rate: Some(RateConfig {
                bits_per_s: 5_000_000,
                burst_bytes: 3000,
                queue_packets: 20,
            }),
            seed: 42,
        };
        assert_eq!(
            feed(&cfg, 10_000, 1_000_000, 1000),
            feed(&cfg, 10_000, 1_000_000, 1000)
        );
        let other = Config {
            seed: 43,
            ..cfg.clone()
        };
        assert_ne!(
            feed(&cfg, 10_000, 1_000_000, 1000),
            feed(&other, 10_000, 1_000_000, 1000)
        );
    }
}
