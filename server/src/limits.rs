//! Who may open another WebSocket: per-address and global connection accounting, told the
//! time by its caller.
//!
//! Three rules, checked in this order when an upgrade arrives:
//! 1. The server holds at most `max_total` connections (503 beyond).
//! 2. One address holds at most `per_address` of them, and never more than its fair share of
//!    the global cap: while `n` other addresses hold connections, an address may hold at most
//!    `max_total / (n + 2)` (at least one). Alone it gets half, so whoever comes next still
//!    finds room; an address holding nothing is always let in while the server has room.
//! 3. New connections from one address are paced by a token bucket (`rate` per second,
//!    `burst` deep); over it the client is told when to retry.
//!
//! An address is an IPv4 address or an IPv6 /64: one household's network, in which a single
//! host can pick any address it likes.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use crate::ratelimit::TokenBucket;

/// Most addresses tracked at once; beyond it (after forgetting the idle ones) new addresses
/// are refused until some leave. About 64 bytes each.
pub const MAX_TRACKED_ADDRESSES: usize = 65_536;

/// A client address as the limits count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressKey(IpAddr);

impl AddressKey {
    /// IPv4 (also when mapped into IPv6) as is; IPv6 cut to its /64.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    Self(IpAddr::V6(Ipv6Addr::from(prefix)))
                }
            },
        }
    }
}

impl fmt::Display for AddressKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// The limits' settings (from the flags).
#[derive(Debug, Clone, Copy)]
pub struct LimitsConfig {
    pub max_total: usize,
    pub per_address: usize,
    /// New connections per second per address.
    pub rate: f64,
    pub burst: u32,
}

/// Why an upgrade was refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refusal {
    /// The global cap is reached (503).
    ServerFull,
    /// The address holds its share of connections (429).
    AddressFull,
    /// The address opens connections too fast (429); a token is back after `retry_after`.
    TooFast { retry_after: Duration },
    /// Too many addresses are tracked (503).
    TooManyAddresses,
}

impl Refusal {
    /// A short name for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::ServerFull => "server-full",
            Refusal::AddressFull => "address-full",
            Refusal::TooFast { .. } => "too-fast",
            Refusal::TooManyAddresses => "too-many-addresses",
        }
    }
}

#[derive(Debug)]
struct Entry {
    open: usize,
    bucket: TokenBucket,
}

/// Open connections by address, and each address's token bucket.
#[derive(Debug)]
pub struct Limits {
    config: LimitsConfig,
    open: usize,
    /// Addresses with at least one open connection.
    holders: usize,
    addresses: HashMap<AddressKey, Entry>,
}

impl Limits {
    pub fn new(config: LimitsConfig) -> Self {
        Self {
            config,
            open: 0,
            holders: 0,
            addresses: HashMap::new(),
        }
    }

    /// Open connections in all.
    pub fn open(&self) -> usize {
        self.open
    }

    /// Open connections from `key`.
    pub fn open_from(&self, key: AddressKey) -> usize {
        self.addresses.get(&key).map_or(0, |e| e.open)
    }

    /// Addresses tracked (holding connections or with a bucket not yet full).
    pub fn tracked(&self) -> usize {
        self.addresses.len()
    }

    /// The most connections one address may hold while `others` other addresses hold some.
    pub fn share(&self, others: usize) -> usize {
        let fair = (self.config.max_total / (others + 2)).max(1);
        fair.min(self.config.per_address)
    }

    /// Counts a new connection from `key` at `now`, or says why not. Every `Ok` must be
    /// matched by one [`Limits::release`].
    pub fn admit(&mut self, key: AddressKey, now: Instant) -> Result<(), Refusal> {
        if self.open >= self.config.max_total {
            return Err(Refusal::ServerFull);
        }
        if !self.addresses.contains_key(&key) && self.addresses.len() >= MAX_TRACKED_ADDRESSES {
            self.prune(now);
            if self.addresses.len() >= MAX_TRACKED_ADDRESSES {
                return Err(Refusal::TooManyAddresses);
            }
        }
        let held = self.open_from(key);
        let share = self.share(self.holders - usize::from(held > 0));
        let LimitsConfig { rate, burst, .. } = self.config;
        let entry = self.addresses.entry(key).or_insert_with(|| Entry {
            open: 0,
            bucket: TokenBucket::full(rate, burst, now),
        });
        if entry.open >= share {
            return Err(Refusal::AddressFull);
        }
        entry
            .bucket
            .take(now)
            .map_err(|retry_after| Refusal::TooFast { retry_after })?;
        if entry.open == 0 {
            self.holders += 1;
        }
        entry.open += 1;
        self.open += 1;
        Ok(())
    }

    /// A connection admitted for `key` has ended.
    pub fn release(&mut self, key: AddressKey) {
        let Some(entry) = self.addresses.get_mut(&key) else {
            debug_assert!(false, "release without admit");
            return;
        };
        if entry.open == 0 {
            debug_assert!(false, "release without admit");
            return;
        }
        entry.open -= 1;
        self.open -= 1;
        if entry.open == 0 {
            self.holders -= 1;
        }
    }

    /// Forgets addresses that hold nothing and whose bucket has refilled (they would start
    /// afresh anyway). Call now and then.
    pub fn prune(&mut self, now: Instant) {
        self.addresses
            .retain(|_, e| e.open > 0 || !e.bucket.full_at(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> AddressKey {
        AddressKey::of(s.parse().expect("test address"))
    }

    fn limits(max_total: usize, per_address: usize, rate: f64, burst: u32) -> Limits {
        Limits::new(LimitsConfig {
            max_total,
            per_address,
            rate,
            burst,
        })
    }

    /// `n` connections from `a` at `t`, each admitted.
    fn admit_all(l: &mut Limits, a: AddressKey, n: usize, t: Instant) {
        for i in 0..n {
            assert_eq!(l.admit(a, t), Ok(()), "connection {i} from {a}");
        }
    }

    #[test]
    fn keys_group_ipv6_by_64_and_unmap_ipv4() {
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
        assert_eq!(key("2001:db8:1:2:aaaa::1").to_string(), "2001:db8:1:2::/64");
        assert_eq!(key("::ffff:192.0.2.7").to_string(), "192.0.2.7");
    }

    #[test]
    fn per_address_cap_and_release() {
        let t = Instant::now();
        let mut l = limits(1024, 3, 100.0, 100);
        let a = key("10.0.0.1");
        admit_all(&mut l, a, 3, t);
        assert_eq!(l.admit(a, t), Err(Refusal::AddressFull));
        assert_eq!(l.admit(key("10.0.0.2"), t), Ok(()));
        l.release(a);
        assert_eq!(l.open_from(a), 2);
        assert_eq!(l.admit(a, t), Ok(()));
        assert_eq!(l.open(), 4);
    }

    #[test]
    fn bucket_paces_new_connections_and_says_when_to_retry() {
        let t0 = Instant::now();
        let mut l = limits(1024, 1000, 2.0, 4);
        let a = key("10.0.0.1");
        admit_all(&mut l, a, 4, t0);
        assert_eq!(
            l.admit(a, t0),
            Err(Refusal::TooFast {
                retry_after: Duration::from_millis(500)
            })
        );
        // Another address has its own bucket.
        assert_eq!(l.admit(key("10.0.0.2"), t0), Ok(()));
        let t1 = t0 + Duration::from_millis(250);
        assert_eq!(
            l.admit(a, t1),
            Err(Refusal::TooFast {
                retry_after: Duration::from_millis(250)
            })
        );
        let t2 = t0 + Duration::from_millis(500);
        assert_eq!(l.admit(a, t2), Ok(()));
        // Over the next 10 s at the rate: 20 more, no more.
        let mut admitted = 0;
        for ms in (510..=10_505).step_by(5) {
            if l.admit(a, t0 + Duration::from_millis(ms)).is_ok() {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 20);
    }

    #[test]
    fn one_address_never_takes_the_whole_cap() {
        let t = Instant::now();
        let mut l = limits(100, 1000, 1e9, 1_000_000);
        let a = key("10.0.0.1");
        let taken = (0..1000).filter(|_| l.admit(a, t).is_ok()).count();
        assert_eq!(taken, 50, "alone, half of the cap");
        assert_eq!(l.admit(a, t), Err(Refusal::AddressFull));
        // A second address gets a third, a third one a quarter: each still gets in.
        let b = key("10.0.0.2");
        let taken_b = (0..1000).filter(|_| l.admit(b, t).is_ok()).count();
        assert_eq!(taken_b, 33);
        let c = key("2001:db8::1");
        let taken_c = (0..1000).filter(|_| l.admit(c, t).is_ok()).count();
        assert_eq!(taken_c, 17, "the rest of the cap");
        assert_eq!(l.open(), 100);
        assert_eq!(l.admit(key("10.0.0.4"), t), Err(Refusal::ServerFull));
        // When a holder leaves entirely, the others' share grows again.
        for _ in 0..17 {
            l.release(c);
        }
        assert_eq!(l.share(1), 33);
        assert_eq!(l.admit(a, t), Err(Refusal::AddressFull), "a holds 50 > 33");
        assert_eq!(l.admit(key("10.0.0.4"), t), Ok(()));
    }

    #[test]
    fn a_newcomer_gets_in_while_there_is_room() {
        let t = Instant::now();
        let mut l = limits(4, 4, 1e9, 1000);
        let mut admitted = 0;
        for i in 0..10 {
            if l.admit(key(&format!("10.0.0.{i}")), t).is_ok() {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 4);
        assert_eq!(l.admit(key("10.0.0.1"), t), Err(Refusal::ServerFull));
    }

    #[test]
    fn idle_addresses_are_forgotten_once_their_bucket_is_full() {
        let t0 = Instant::now();
        let mut l = limits(1024, 32, 2.0, 4);
        let a = key("10.0.0.1");
        let b = key("10.0.0.2");
        admit_all(&mut l, a, 4, t0);
        assert_eq!(l.admit(b, t0), Ok(()));
        for _ in 0..4 {
            l.release(a);
        }
        l.prune(t0 + Duration::from_secs(1));
        assert_eq!(l.tracked(), 2, "a's bucket is not full yet, b is open");
        l.prune(t0 + Duration::from_secs(2));
        assert_eq!(l.tracked(), 1);
        assert_eq!(l.open_from(b), 1);
        // Forgetting changes nothing: a starts with a full bucket, as it would have.
        admit_all(&mut l, a, 4, t0 + Duration::from_secs(2));
    }
}
