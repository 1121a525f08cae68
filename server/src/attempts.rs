//! The password-failure limiter: how often a client address, and anyone at all for one room, may
//! try a room password. Sans-IO: every call is told the time.
//!
//! # Rules
//!
//! - Per source address (an IPv4 address, or the /64 prefix of an IPv6 one, since one host
//!   commonly has a whole /64): the first `free_failures` failures cost nothing. After that,
//!   each attempt must wait after the previous one a delay that starts at `backoff` and doubles
//!   with each further failure, up to `max_backoff`. With the defaults (5, 20 s, 5 min): five
//!   tries at once, then one after 20 s, 40 s, 80 s, 160 s, and one per 5 minutes after that.
//! - Per room: a room that sees [`ROOM_FREE_FACTOR`] × `free_failures` failures from any number
//!   of addresses applies the same growing delays, room-wide, to the addresses that never gave
//!   its password right. Addresses that did ([`TRUSTED_PER_ROOM`] kept per room) are held to
//!   their own per-address limit only; members who come back with their peer token need no
//!   password at all and never meet this limiter.
//! - A counter with no attempt for [`FORGET_AFTER_MAX_DELAYS`] × `max_backoff` (1 hour with
//!   the defaults) is forgotten.
//! - An attempt is charged as a failure when it starts (so that 200 connections guessing at
//!   once cannot all pass before the first failure is known) and refunded if it succeeds.
//!   A success does not clear earlier failures: an address with a room of its own must not be
//!   able to reset its count there.
//! - Hashing a password (to check it or to create a room with one) takes a slow Argon2 run, so
//!   each address also has a budget of [`HASH_BURST`] hashes refilled at one per
//!   [`HASH_REFILL`]: even right passwords cannot keep a core busy.
//!
//! Memory is bounded: at most `cap` addresses and `cap` rooms are tracked; beyond that the
//! entry idle the longest is dropped. [`LogBudget`] bounds the log lines about failures.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::limits::AddressKey;
use crate::ratelimit::TokenBucket;

/// A room as the limiter knows it: a digest of its name and key.
pub type RoomTag = [u8; 32];

/// A room applies the per-address rule to unknown addresses after this many times the
/// per-address free failures, counted over all addresses.
pub const ROOM_FREE_FACTOR: u32 = 4;
/// Counters idle for this many times the longest delay are forgotten.
pub const FORGET_AFTER_MAX_DELAYS: u32 = 12;
/// Addresses remembered per room as having given its password right.
pub const TRUSTED_PER_ROOM: usize = 64;
/// Password hashes an address may start at once...
pub const HASH_BURST: u32 = 30;
/// ...and the time that gives it one more.
pub const HASH_REFILL: Duration = Duration::from_secs(2);

/// The configurable part of the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub free_failures: u32,
    pub backoff: Duration,
    pub max_backoff: Duration,
}

impl Policy {
    /// The wait required after the last attempt when `failures` are counted and `free` are
    /// free: `None` while under `free`.
    pub fn delay(&self, failures: u32, free: u32) -> Option<Duration> {
        let over = failures.checked_sub(free)?;
        // 2^over, saturating long before it matters (2^20 × 1 ms is already 17 minutes).
        let factor = 1u32 << over.min(20);
        Some(self.backoff.saturating_mul(factor).min(self.max_backoff))
    }

    fn forget_after(&self) -> Duration {
        self.max_backoff.saturating_mul(FORGET_AFTER_MAX_DELAYS)
    }

    fn room_free(&self) -> u32 {
        self.free_failures.saturating_mul(ROOM_FREE_FACTOR)
    }
}

/// Failures counted and the time of the latest attempt.
#[derive(Debug, Clone, Copy)]
struct Counter {
    failures: u32,
    last: Instant,
}

impl Counter {
    fn new(now: Instant) -> Self {
        Self {
            failures: 0,
            last: now,
        }
    }

    /// How long an attempt at `now` must still wait, if at all.
    fn wait(&self, now: Instant, free: u32, policy: &Policy) -> Option<Duration> {
        let delay = policy.delay(self.failures, free)?;
        let ready = self.last + delay;
        (now < ready).then(|| ready - now)
    }

    fn charge(&mut self, now: Instant) {
        self.failures = self.failures.saturating_add(1);
        self.last = now;
    }
}

struct SourceEntry {
    counter: Counter,
    /// Hash budget: [`HASH_BURST`] hashes, one more per [`HASH_REFILL`].
    hashes: TokenBucket,
}

impl SourceEntry {
    fn new(now: Instant) -> Self {
        Self {
            counter: Counter::new(now),
            hashes: TokenBucket::full(1.0 / HASH_REFILL.as_secs_f64(), HASH_BURST, now),
        }
    }

    fn last_active(&self) -> Instant {
        self.counter.last.max(self.hashes.last())
    }
}

struct RoomEntry {
    counter: Counter,
    /// Sources that gave the password right, oldest first.
    trusted: Vec<AddressKey>,
}

/// Which rule refused an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The address's own failures.
    Address,
    /// The room's failures from many addresses.
    Room,
    /// The address's hash budget.
    Hashes,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Address => "address",
            Limit::Room => "room",
            Limit::Hashes => "hash budget",
        }
    }
}

/// An attempt refused: try again after `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub retry_after: Duration,
    pub limit: Limit,
}

/// A password check allowed to run; hand it back to [`Attempts::finish`].
#[derive(Debug)]
#[must_use = "an attempt is charged as a failure until it is finished"]
pub struct Attempt {
    source: AddressKey,
    room: RoomTag,
    room_charged: bool,
}

/// Failure counters of all addresses and rooms.
pub struct Attempts {
    policy: Policy,
    cap: usize,
    sources: HashMap<AddressKey, SourceEntry>,
    rooms: HashMap<RoomTag, RoomEntry>,
}

impl Attempts {
    /// Tracks at most `cap` addresses and `cap` rooms.
    pub fn new(policy: Policy, cap: usize) -> Self {
        Self {
            policy,
            cap: cap.max(1),
            sources: HashMap::new(),
            rooms: HashMap::new(),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Asks to check a password for `room` from `ip` at `now`. On `Ok` the attempt is charged
    /// (and a hash credit spent) until [`Attempts::finish`] says how it went.
    pub fn begin(&mut self, ip: IpAddr, room: &RoomTag, now: Instant) -> Result<Attempt, Refusal> {
        let source = AddressKey::of(ip);
        self.forget_stale(source, Some(room), now);
        let policy = self.policy;
        let entry = self.sources.get(&source);
        if let Some(wait) = entry.and_then(|e| e.counter.wait(now, policy.free_failures, &policy)) {
            return Err(Refusal {
                retry_after: wait,
                limit: Limit::Address,
            });
        }
        let room_entry = self.rooms.get(room);
        let trusted = room_entry.is_some_and(|r| r.trusted.contains(&source));
        if !trusted {
            if let Some(wait) =
                room_entry.and_then(|r| r.counter.wait(now, policy.room_free(), &policy))
            {
                return Err(Refusal {
                    retry_after: wait,
                    limit: Limit::Room,
                });
            }
        }
        self.spend_hash(source, now)?;
        let entry = self.source_entry(source, now);
        entry.counter.charge(now);
        if !trusted {
            self.room_entry(*room, now).counter.charge(now);
        }
        Ok(Attempt {
            source,
            room: *room,
            room_charged: !trusted,
        })
    }

    /// Says how an attempt went: a success refunds its charge and trusts the address in the
    /// room; a failure stays counted.
    pub fn finish(&mut self, attempt: Attempt, ok: bool, now: Instant) {
        if !ok {
            return;
        }
        if let Some(e) = self.sources.get_mut(&attempt.source) {
            e.counter.failures = e.counter.failures.saturating_sub(1);
        }
        let room = self.room_entry(attempt.room, now);
        if attempt.room_charged {
            room.counter.failures = room.counter.failures.saturating_sub(1);
        }
        if !room.trusted.contains(&attempt.source) {
            if room.trusted.len() >= TRUSTED_PER_ROOM {
                room.trusted.remove(0);
            }
            room.trusted.push(attempt.source);
        }
    }

    /// Withdraws an attempt that never ran (no hashing slot was free): its charge is refunded
    /// and nothing is learned. Its hash credit stays spent.
    pub fn cancel(&mut self, attempt: Attempt) {
        if let Some(e) = self.sources.get_mut(&attempt.source) {
            e.counter.failures = e.counter.failures.saturating_sub(1);
        }
        if attempt.room_charged {
            if let Some(r) = self.rooms.get_mut(&attempt.room) {
                r.counter.failures = r.counter.failures.saturating_sub(1);
            }
        }
    }

    /// Asks to hash a new room's password from `ip` at `now` (spends a hash credit).
    pub fn begin_hash(&mut self, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        let source = AddressKey::of(ip);
        self.forget_stale(source, None, now);
        self.spend_hash(source, now)
    }

    fn spend_hash(&mut self, source: AddressKey, now: Instant) -> Result<(), Refusal> {
        self.source_entry(source, now)
            .hashes
            .take(now)
            .map_err(|retry_after| Refusal {
                retry_after,
                limit: Limit::Hashes,
            })
    }

    /// Drops every counter idle for longer than the policy remembers.
    pub fn purge(&mut self, now: Instant) {
        let forget = self.policy.forget_after();
        self.sources
            .retain(|_, e| now.saturating_duration_since(e.last_active()) < forget);
        self.rooms
            .retain(|_, r| now.saturating_duration_since(r.counter.last) < forget);
    }

    /// How many addresses and rooms are tracked.
    pub fn tracked(&self) -> (usize, usize) {
        (self.sources.len(), self.rooms.len())
    }

    fn forget_stale(&mut self, source: AddressKey, room: Option<&RoomTag>, now: Instant) {
        let forget = self.policy.forget_after();
        if self
            .sources
            .get(&source)
            .is_some_and(|e| now.saturating_duration_since(e.last_active()) >= forget)
        {
            self.sources.remove(&source);
        }
        if let Some(room) = room {
            if self
                .rooms
                .get(room)
                .is_some_and(|r| now.saturating_duration_since(r.counter.last) >= forget)
            {
                self.rooms.remove(room);
            }
        }
    }

    fn source_entry(&mut self, source: AddressKey, now: Instant) -> &mut SourceEntry {
        if !self.sources.contains_key(&source) && self.sources.len() >= self.cap {
            let oldest = self
                .sources
                .iter()
                .min_by_key(|(_, e)| e.last_active())
                .map(|(s, _)| *s);
            if let Some(oldest) = oldest {
                self.sources.remove(&oldest);
            }
        }
        self.sources
            .entry(source)
            .or_insert_with(|| SourceEntry::new(now))
    }

    fn room_entry(&mut self, room: RoomTag, now: Instant) -> &mut RoomEntry {
        if !self.rooms.contains_key(&room) && self.rooms.len() >= self.cap {
            let oldest = self
                .rooms
                .iter()
                .min_by_key(|(_, r)| r.counter.last)
                .map(|(t, _)| *t);
            if let Some(oldest) = oldest {
                self.rooms.remove(&oldest);
            }
        }
        self.rooms.entry(room).or_insert_with(|| RoomEntry {
            counter: Counter::new(now),
            trusted: Vec::new(),
        })
    }
}

/// At most `lines` log lines per `window`; the lines held back are counted so that the next
/// line written can say how many were not.
pub struct LogBudget {
    lines: u32,
    window: Duration,
    window_start: Option<Instant>,
    used: u32,
    suppressed: u64,
}

impl LogBudget {
    pub fn new(lines: u32, window: Duration) -> Self {
        Self {
            lines,
            window,
            window_start: None,
            used: 0,
            suppressed: 0,
        }
    }

    /// Whether a line may be written at `now`: `Some(n)` with the number of lines held back
    /// since the last one written, or `None` (the line is counted as held back).
    pub fn admit(&mut self, now: Instant) -> Option<u64> {
        let fresh = self
            .window_start
            .is_none_or(|start| now.saturating_duration_since(start) >= self.window);
        if fresh {
            self.window_start = Some(now);
            self.used = 0;
        }
        if self.used >= self.lines {
            self.suppressed += 1;
            return None;
        }
        self.used += 1;
        Some(std::mem::take(&mut self.suppressed))
    }

    /// The lines held back so far, once their window is over (for a periodic summary).
    pub fn take_suppressed(&mut self, now: Instant) -> u64 {
        let over = self
            .window_start
            .is_none_or(|start| now.saturating_duration_since(start) >= self.window);
        if over {
            std::mem::take(&mut self.suppressed)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const ROOM: RoomTag = [1; 32];
    const OTHER_ROOM: RoomTag = [2; 32];

    fn policy() -> Policy {
        Policy {
            free_failures: 5,
            backoff: Duration::from_secs(20),
            max_backoff: Duration::from_secs(300),
        }
    }

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// One attempt that must be let through, finished as right (`ok`) or wrong.
    fn attempt(a: &mut Attempts, ip: IpAddr, room: &RoomTag, ok: bool, at: Instant) {
        let attempt = a.begin(ip, room, at).expect("the attempt is let through");
        a.finish(attempt, ok, at);
    }

    /// A guesser that tries every `every` for `span`, always wrong: the times it got through.
    fn guess(
        a: &mut Attempts,
        ip: IpAddr,
        t0: Instant,
        every: Duration,
        span: Duration,
    ) -> Vec<Duration> {
        let mut allowed = Vec::new();
        let mut t = Duration::ZERO;
        while t <= span {
            if let Ok(attempt) = a.begin(ip, &ROOM, t0 + t) {
                a.finish(attempt, false, t0 + t);
                allowed.push(t);
            }
            t += every;
        }
        allowed
    }

    #[test]
    fn free_failures_then_doubling_delays_up_to_the_maximum() {
        let p = policy();
        assert_eq!(p.delay(4, 5), None);
        assert_eq!(p.delay(5, 5), Some(secs(20)));
        assert_eq!(p.delay(6, 5), Some(secs(40)));
        assert_eq!(p.delay(8, 5), Some(secs(160)));
        assert_eq!(p.delay(9, 5), Some(secs(300)));
        assert_eq!(p.delay(u32::MAX, 5), Some(secs(300)));

        let t0 = Instant::now();
        let mut a = Attempts::new(p, 100);
        let times = guess(&mut a, v4(1), t0, secs(1), secs(3600));
        // Five at once (a guesser trying every second gets them at 0-4 s), then the schedule.
        let got: Vec<u64> = times.iter().map(Duration::as_secs).collect();
        assert_eq!(&got[..5], &[0, 1, 2, 3, 4]);
        assert_eq!(
            &got[5..],
            &[24, 64, 144, 304, 604, 904, 1204, 1504, 1804, 2104, 2404, 2704, 3004, 3304],
        );
        // In the first minute 6 guesses, in the hour 19: "a few, then about one per 5 min".
        assert_eq!(times.iter().filter(|t| **t < secs(60)).count(), 6);
        assert_eq!(times.len(), 19);
    }

    #[test]
    fn the_refusal_says_how_long_to_wait() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(), 100);
        for _ in 0..5 {
            attempt(&mut a, v4(1), &ROOM, false, t0); // free failures
        }
        assert_eq!(
            a.begin(v4(1), &ROOM, t0 + secs(5)).err(),
            Some(Refusal {
                retry_after: secs(15),
                limit: Limit::Address
            })
        );
        // A refused try does not move the schedule.
        assert!(a.begin(v4(1), &ROOM, t0 + secs(20)).is_ok());
    }

    #[test]
    fn concurrent_attempts_are_charged_before_they_finish() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(), 100);
        let running: Vec<Attempt> = (0..5)
            .map(|_| a.begin(v4(1), &ROOM, t0).expect("free"))
            .collect();
        assert!(a.begin(v4(1), &ROOM, t0).is_err(), "the sixth must wait");
        for attempt in running {
            a.finish(attempt, false, t0);
        }
    }

    #[test]
    fn a_success_is_refunded_but_clears_nothing() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(), 100);
        for _ in 0..4 {
            attempt(&mut a, v4(1), &OTHER_ROOM, false, t0);
        }
        // The right password (of the address's own room) many times: never a delay...
        for i in 0..20 {
            attempt(&mut a, v4(1), &ROOM, true, t0 + secs(i));
        }
        // ...and the four earlier failures still count: one free failure is left.
        attempt(&mut a, v4(1), &OTHER_ROOM, false, t0 + secs(30));
        assert!(a.begin(v4(1), &OTHER_ROOM, t0 + secs(31)).is_err());
    }

    #[test]
    fn addresses_are_counted_apart_and_ipv6_by_its_64() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(), 100);
        let net = |host: u16, subnet: u16| {
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, subnet, 0, 0, 0, host))
        };
        assert_eq!(guess(&mut a, net(1, 0), t0, secs(1), secs(9)).len(), 5);
        // Another host of the same /64 shares the count...
        assert!(a.begin(net(0xffff, 0), &ROOM, t0 + secs(10)).is_err());
        // ...another /64 and another IPv4 address do not.
        assert!(a.begin(net(1, 1), &ROOM, t0 + secs(10)).is_ok());
        assert!(a.begin(v4(9), &ROOM, t0 + secs(10)).is_ok());
        // An IPv4-mapped IPv6 address is its IPv4 address.
        let mapped = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 9).to_ipv6_mapped());
        assert_eq!(AddressKey::of(mapped), AddressKey::of(v4(9)));
    }

    #[test]
    fn a_room_guessed_from_many_addresses_slows_unknown_addresses_only() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(), 1000);
        // A member's address got in before the attack.
        let member = v4(200);
        attempt(&mut a, member, &ROOM, true, t0);
        // 20 addresses, one failure each: the room's free failures are used up.
        for i in 0..20 {
            attempt(&mut a, v4(i), &ROOM, false, t0 + secs(1));
        }
        let refused = a.begin(v4(100), &ROOM, t0 + secs(2)).err();
        assert_eq!(
            refused,
            Some(Refusal {
                retry_after: secs(19),
                limit: Limit::Room
            })
        );
        // The member's address is not held by the room; other rooms are not either.
        assert!(a.begin(member, &ROOM, t0 + secs(2)).is_ok());
        assert!(a.begin(v4(100), &OTHER_ROOM, t0 + secs(2)).is_ok());
        // Room-wide, one new address per delay gets through.
        assert!(a.begin(v4(100), &ROOM, t0 + secs(21)).is_ok());
        assert!(a.begin(v4(101), &ROOM, t0 + secs(22)).is_err());
    }

    #[test]
    fn idle_counters_are_forgotten() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(), 100);
        assert_eq!(guess(&mut a, v4(1), t0, secs(1), secs(9)).len(), 5);
        assert!(a.begin(v4(1), &ROOM, t0 + secs(10)).is_err());
        assert_eq!(a.tracked(), (1, 1));
        // Forgotten after 12 × 5 min without an attempt.
        let later = t0 + secs(4) + secs(3600);
        a.purge(later - secs(1));
        assert_eq!(a.tracked(), (1, 1));
        a.purge(later);
        assert_eq!(a.tracked(), (0, 0));
        assert!(a.begin(v4(1), &ROOM, later).is_ok());
    }

    #[test]
    fn memory_is_bounded_by_evicting_the_longest_idle() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(), 3);
        for i in 0..3 {
            let _charged = a.begin(v4(i), &[i; 32], t0 + secs(u64::from(i)));
        }
        assert_eq!(a.tracked(), (3, 3));
        let _charged = a.begin(v4(3), &[3; 32], t0 + secs(3));
        assert_eq!(a.tracked(), (3, 3));
        assert!(!a.sources.contains_key(&AddressKey::of(v4(0))));
        assert!(!a.rooms.contains_key(&[0; 32]));
        assert!(a.sources.contains_key(&AddressKey::of(v4(1))));
    }

    #[test]
    fn hashes_have_a_budget_per_address() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(), 100);
        for _ in 0..HASH_BURST {
            assert!(a.begin_hash(v4(1), t0).is_ok());
        }
        assert_eq!(
            a.begin_hash(v4(1), t0 + Duration::from_millis(500)),
            Err(Refusal {
                retry_after: Duration::from_millis(1500),
                limit: Limit::Hashes
            })
        );
        // Right passwords spend the same budget.
        assert_eq!(
            a.begin(v4(1), &ROOM, t0).err().map(|r| r.limit),
            Some(Limit::Hashes)
        );
        assert!(
            a.begin_hash(v4(2), t0).is_ok(),
            "other addresses are unaffected"
        );
        assert!(a.begin_hash(v4(1), t0 + HASH_REFILL).is_ok());
        assert!(a.begin_hash(v4(1), t0 + HASH_REFILL).is_err());
        // A minute refills 30.
        let later = t0 + HASH_REFILL + secs(60);
        let n = (0..100)
            .take_while(|_| a.begin_hash(v4(1), later).is_ok())
            .count();
        assert_eq!(n, HASH_BURST as usize);
    }

    #[test]
    fn log_lines_are_budgeted_and_the_rest_counted() {
        let t0 = Instant::now();
        let mut log = LogBudget::new(3, secs(1));
        let admitted: Vec<Option<u64>> = (0..10).map(|_| log.admit(t0)).collect();
        assert_eq!(&admitted[..3], &[Some(0); 3]);
        assert!(admitted[3..].iter().all(Option::is_none));
        assert_eq!(log.take_suppressed(t0), 0, "not before the window ends");
        // The next window's first line tells how many were held back.
        assert_eq!(log.admit(t0 + secs(1)), Some(7));
        assert_eq!(log.admit(t0 + secs(1)), Some(0));
        assert_eq!(log.admit(t0 + secs(1)), Some(0));
        assert_eq!(log.admit(t0 + secs(1)), None);
        assert_eq!(log.take_suppressed(t0 + secs(2)), 1);
        assert_eq!(log.take_suppressed(t0 + secs(2)), 0);
    }
}
