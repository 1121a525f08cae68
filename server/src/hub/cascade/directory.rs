//! Which hub is a room's home and which players each hub serves: the [`Directory`] every hub of
//! a room shares, with [`LocalDirectory`] as the one-process default.
//!
//! A hub's entries expire unless it refreshes them (every cascade round, well within the
//! expiry), so a hub that vanishes without a word leaves the directory by itself: its home
//! claim lapses and the next hub of the room claims home. The values are plain strings: a home
//! is its hub's id (its advertised JackTrip handshake address), a hub's players are display
//! names (which hold no control characters, so a newline separates them in a store). What the
//! directory returns is not trusted: whoever reads a home checks it (see `coordinator`).

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

/// Why the directory could not answer (the store is unreachable, refused, or said something
/// that is not an answer). The hub goes on serving its own players.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryError(pub String);

impl fmt::Display for DirectoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DirectoryError {}

/// The shared record of rooms that span hubs. Called from the cascade thread only (a store
/// may block for its timeout), never from a worker.
pub trait Directory: Send {
    /// Claims `room`'s home for `hub` for `ttl` unless another hub holds it, and refreshes the
    /// claim when `hub` holds it. Returns the home (`hub` itself, or the holder).
    fn claim_home(
        &mut self,
        room: &str,
        hub: &str,
        ttl: Duration,
    ) -> Result<String, DirectoryError>;

    /// Records for `ttl` that `hub` serves `players` in `room`.
    fn set_players(
        &mut self,
        room: &str,
        hub: &str,
        players: &[String],
        ttl: Duration,
    ) -> Result<(), DirectoryError>;

    /// Every hub serving `room` with its players, sorted by hub.
    fn players(&mut self, room: &str) -> Result<Vec<(String, Vec<String>)>, DirectoryError>;

    /// `hub` no longer serves `room`: its players go, and its home claim if it holds it.
    fn release(&mut self, room: &str, hub: &str) -> Result<(), DirectoryError>;
}

/// An entry and when it lapses.
#[derive(Debug, Clone)]
struct Expiring<T> {
    value: T,
    until: Instant,
}

/// The directory of one process (no `--redis`): every room's home is this hub, so nothing
/// spans hubs; kept behind the same trait so the hub runs one code path. Told the time by the
/// `_at` methods (the trait's methods use the clock).
#[derive(Debug, Default)]
pub struct LocalDirectory {
    homes: HashMap<String, Expiring<String>>,
    players: HashMap<String, HashMap<String, Expiring<Vec<String>>>>,
}

impl LocalDirectory {
    pub fn new() -> LocalDirectory {
        LocalDirectory::default()
    }

    /// [`Directory::claim_home`] at `now`.
    pub fn claim_home_at(&mut self, now: Instant, room: &str, hub: &str, ttl: Duration) -> String {
        let until = now + ttl;
        match self.homes.get_mut(room) {
            Some(home) if home.until > now && home.value != hub => home.value.clone(),
            Some(home) if home.until > now => {
                home.until = until;
                home.value.clone()
            }
            _ => {
                let value = hub.to_owned();
                self.homes.insert(
                    room.to_owned(),
                    Expiring {
                        value: value.clone(),
                        until,
                    },
                );
                value
            }
        }
    }

    /// [`Directory::set_players`] at `now`.
    pub fn set_players_at(
        &mut self,
        now: Instant,
        room: &str,
        hub: &str,
        players: &[String],
        ttl: Duration,
    ) {
        let hubs = self.players.entry(room.to_owned()).or_default();
        hubs.retain(|_, e| e.until > now);
        hubs.insert(
            hub.to_owned(),
            Expiring {
                value: players.to_vec(),
                until: now + ttl,
            },
        );
    }

    /// [`Directory::players`] at `now`.
    pub fn players_at(&self, now: Instant, room: &str) -> Vec<(String, Vec<String>)> {
        let mut all: Vec<_> = self
            .players
            .get(room)
            .into_iter()
            .flatten()
            .filter(|(_, e)| e.until > now)
            .map(|(hub, e)| (hub.clone(), e.value.clone()))
            .collect();
        all.sort();
        all
    }

    /// [`Directory::release`].
    pub fn release_now(&mut self, room: &str, hub: &str) {
        if self.homes.get(room).is_some_and(|h| h.value == hub) {
            self.homes.remove(room);
        }
        if let Some(hubs) = self.players.get_mut(room) {
            hubs.remove(hub);
            if hubs.is_empty() {
                self.players.remove(room);
            }
        }
    }
}

impl Directory for LocalDirectory {
    fn claim_home(
        &mut self,
        room: &str,
        hub: &str,
        ttl: Duration,
    ) -> Result<String, DirectoryError> {
        Ok(self.claim_home_at(Instant::now(), room, hub, ttl))
    }

    fn set_players(
        &mut self,
        room: &str,
        hub: &str,
        players: &[String],
        ttl: Duration,
    ) -> Result<(), DirectoryError> {
        self.set_players_at(Instant::now(), room, hub, players, ttl);
        Ok(())
    }

    fn players(&mut self, room: &str) -> Result<Vec<(String, Vec<String>)>, DirectoryError> {
        Ok(self.players_at(Instant::now(), room))
    }

    fn release(&mut self, room: &str, hub: &str) -> Result<(), DirectoryError> {
        self.release_now(room, hub);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(3);

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_first_claim_wins_until_it_lapses_and_the_holder_refreshes_it() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut d = LocalDirectory::new();
        assert_eq!(d.claim_home_at(t0, "band", "a:1", TTL), "a:1");
        assert_eq!(d.claim_home_at(t0 + s, "band", "b:2", TTL), "a:1");
        // The holder refreshes at 2 s: it holds until 5 s.
        assert_eq!(d.claim_home_at(t0 + 2 * s, "band", "a:1", TTL), "a:1");
        assert_eq!(d.claim_home_at(t0 + 4 * s, "band", "b:2", TTL), "a:1");
        // Not refreshed since: at 5 s it has lapsed, and the next claim wins.
        assert_eq!(d.claim_home_at(t0 + 5 * s, "band", "b:2", TTL), "b:2");
        assert_eq!(d.claim_home_at(t0 + 5 * s, "band", "a:1", TTL), "b:2");
        // Rooms are separate.
        assert_eq!(d.claim_home_at(t0 + 5 * s, "choir", "a:1", TTL), "a:1");
    }

    #[test]
    fn players_per_hub_lapse_and_go_with_a_release() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut d = LocalDirectory::new();
        d.set_players_at(t0, "band", "b:2", &names(&["Bo", "Cy"]), TTL);
        d.set_players_at(t0 + s, "band", "a:1", &names(&["Ann"]), TTL);
        let want = vec![
            ("a:1".to_owned(), names(&["Ann"])),
            ("b:2".to_owned(), names(&["Bo", "Cy"])),
        ];
        assert_eq!(d.players_at(t0 + s, "band"), want);
        assert_eq!(d.players_at(t0 + 3 * s, "band"), want[..1].to_vec());
        assert_eq!(d.players_at(t0, "choir"), vec![]);
        assert_eq!(d.claim_home_at(t0, "band", "a:1", TTL), "a:1");
        d.release_now("band", "b:2");
        assert_eq!(
            d.claim_home_at(t0, "band", "b:2", TTL),
            "a:1",
            "not b's to release"
        );
        d.release_now("band", "a:1");
        assert_eq!(d.players_at(t0 + s, "band"), vec![]);
        assert_eq!(d.claim_home_at(t0, "band", "b:2", TTL), "b:2");
    }

    #[test]
    fn the_trait_object_answers_with_the_clock() {
        let mut d: Box<dyn Directory> = Box::new(LocalDirectory::new());
        assert_eq!(d.claim_home("band", "a:1", TTL).unwrap(), "a:1");
        assert_eq!(d.claim_home("band", "b:2", TTL).unwrap(), "a:1");
        d.set_players("band", "a:1", &names(&["Ann"]), TTL).unwrap();
        assert_eq!(
            d.players("band").unwrap(),
            vec![("a:1".to_owned(), names(&["Ann"]))]
        );
        d.release("band", "a:1").unwrap();
        assert_eq!(d.players("band").unwrap(), vec![]);
    }
}
