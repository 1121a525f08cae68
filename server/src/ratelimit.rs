//! Token buckets, told the time by their caller: [`TokenBucket`] (also the per-address
//! connection rate in [`crate::limits`] and the hash budget in [`crate::attempts`]) and the
//! per-connection message limit [`RateLimiter`] built on it.

use std::time::{Duration, Instant};

/// Length of the window in which dropped messages are counted towards closing a flooder.
pub const FLOOD_WINDOW: Duration = Duration::from_secs(10);
/// Minimum time between two `rate-limited` errors sent to one connection.
pub const ERROR_INTERVAL: Duration = Duration::from_secs(1);

/// What to do with one incoming message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the limit: handle it.
    Accept,
    /// Over the limit: drop it; `notify` says whether to send the `rate-limited` error now.
    Drop { notify: bool },
    /// Over the limit for too long: close the connection (code 1008).
    Close,
}

/// Longest wait a bucket reports (a rate near zero would otherwise overflow a `Duration`).
const MAX_WAIT_SECS: f64 = 86_400.0;

/// `rate` tokens per second, at most `burst` kept; starts full.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn full(rate: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            rate: rate.max(0.0),
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
    }

    /// Takes a token at `now`, or says how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let wait = if self.rate > 0.0 {
            ((1.0 - self.tokens) / self.rate).min(MAX_WAIT_SECS)
        } else {
            MAX_WAIT_SECS
        };
        Err(Duration::from_secs_f64(wait))
    }

    /// Whether the bucket is full again at `now` (a full bucket remembers nothing).
    pub fn full_at(&self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens + elapsed * self.rate >= self.burst
    }

    /// When a token was last taken or asked for.
    pub fn last(&self) -> Instant {
        self.last
    }
}

/// A [`TokenBucket`] of `rate` messages/s and `burst` capacity, plus the flood rule: more than
/// `burst` messages dropped within one [`FLOOD_WINDOW`] closes the connection.
pub struct RateLimiter {
    bucket: TokenBucket,
    burst: u32,
    last_error: Option<Instant>,
    window_start: Instant,
    dropped_in_window: u32,
}

impl RateLimiter {
    pub fn new(rate: f64, burst: u32, now: Instant) -> Self {
        Self {
            bucket: TokenBucket::full(rate, burst, now),
            burst: burst.max(1),
            last_error: None,
            window_start: now,
            dropped_in_window: 0,
        }
    }

    /// Accounts for one incoming message at `now`.
    pub fn check(&mut self, now: Instant) -> Verdict {
        if self.bucket.take(now).is_ok() {
            return Verdict::Accept;
        }
        if now.saturating_duration_since(self.window_start) >= FLOOD_WINDOW {
            self.window_start = now;
            self.dropped_in_window = 0;
        }
        self.dropped_in_window += 1;
        if self.dropped_in_window > self.burst {
            return Verdict::Close;
        }
        let notify = match self.last_error {
            None => true,
            Some(t) => now.saturating_duration_since(t) >= ERROR_INTERVAL,
        };
        if notify {
            self.last_error = Some(now);
        }
        Verdict::Drop { notify }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(10.0, 5, t0);
        for _ in 0..5 {
            assert_eq!(r.check(t0), Verdict::Accept);
        }
        assert_eq!(r.check(t0), Verdict::Drop { notify: true });
        assert_eq!(r.check(t0), Verdict::Drop { notify: false });
        // 100 ms refills one token at 10/s.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(r.check(t1), Verdict::Accept);
        assert_eq!(r.check(t1), Verdict::Drop { notify: false });
        // A second later the error may be sent again; the bucket is full again too.
        let t2 = t1 + Duration::from_secs(1);
        for _ in 0..5 {
            assert_eq!(r.check(t2), Verdict::Accept);
        }
        assert_eq!(r.check(t2), Verdict::Drop { notify: true });
    }

    #[test]
    fn steady_traffic_at_the_rate_is_never_dropped() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(50.0, 1, t0);
        for i in 1..=1000u32 {
            assert_eq!(r.check(t0 + Duration::from_millis(20) * i), Verdict::Accept);
        }
    }

    #[test]
    fn flooding_closes() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(1.0, 3, t0);
        let verdicts: Vec<Verdict> = (0..10).map(|_| r.check(t0)).collect();
        assert_eq!(&verdicts[..3], &[Verdict::Accept; 3]);
        assert!(matches!(
            verdicts[3..6],
            [
                Verdict::Drop { .. },
                Verdict::Drop { .. },
                Verdict::Drop { .. }
            ]
        ));
        assert_eq!(verdicts[6], Verdict::Close);
    }

    #[test]
    fn drops_spread_over_windows_do_not_close() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(0.0, 2, t0);
        let mut now = t0;
        for _ in 0..10 {
            // Two drops per 10 s window never exceed burst = 2.
            assert!(matches!(
                r.check(now),
                Verdict::Accept | Verdict::Drop { .. }
            ));
            assert!(matches!(
                r.check(now),
                Verdict::Accept | Verdict::Drop { .. }
            ));
            now += FLOOD_WINDOW;
        }
    }
}
