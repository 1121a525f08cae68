//! The [`Directory`] in Redis (`--redis URL`), shared by every hub process of a deployment.
//!
//! Why Redis: it is an existing store that operators already run and that Debian packages
//! (`redis-server`); it expires keys by itself, which is exactly how a vanished hub leaves the
//! directory, and a short server-side script makes "claim unless held, refresh if mine" one
//! atomic step. Why the `redis` crate: the maintained Rust client, used here synchronously
//! (one connection, on the cascade thread only) with connect, read and write timeouts, so a
//! store that hangs delays the cascade round, never a worker.
//!
//! Keys, for room R and hub H (H is the hub's advertised JackTrip address `ip:port`):
//! - `tutti:room:R:home`: the home's id, set with `NX` and an expiry the home refreshes;
//! - `tutti:room:R:hubs`: a set of the hubs serving R (its expiry refreshed by each);
//! - `tutti:room:R:hub:H`: H's players in R, newline-separated, with an expiry.
//!
//! A failed call drops the connection; the next call connects anew.

use std::time::Duration;

use redis::{Client, Connection, Script};

use super::directory::{Directory, DirectoryError};

/// Longest wait to connect, and for any reply.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Claims KEYS[1] for ARGV[1] for ARGV[2] ms unless another holds it; refreshes it when
/// ARGV[1] holds it; returns the holder.
const CLAIM: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return v
";

/// Deletes KEYS[1] if ARGV[1] holds it, then KEYS[2], and takes ARGV[1] out of set KEYS[3].
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return 1
";

/// The directory in a Redis server. See the module docs.
pub struct RedisDirectory {
    client: Client,
    connection: Option<Connection>,
    claim: Script,
    release: Script,
}

fn home_key(room: &str) -> String {
    format!("tutti:room:{room}:home")
}

fn hubs_key(room: &str) -> String {
    format!("tutti:room:{room}:hubs")
}

fn hub_key(room: &str, hub: &str) -> String {
    format!("tutti:room:{room}:hub:{hub}")
}

fn error(e: redis::RedisError) -> DirectoryError {
    DirectoryError(format!("redis: {e}"))
}

fn millis(ttl: Duration) -> u64 {
    ttl.as_millis().clamp(1, u128::from(u64::MAX)) as u64
}

impl RedisDirectory {
    /// A directory at `url` (`redis://host:port/db`, `redis+unix:///path`). Checks the URL
    /// only; the first call connects.
    pub fn new(url: &str) -> Result<RedisDirectory, DirectoryError> {
        let client = Client::open(url).map_err(error)?;
        Ok(RedisDirectory {
            client,
            connection: None,
            claim: Script::new(CLAIM),
            release: Script::new(RELEASE),
        })
    }

    /// Runs `f` on the connection (connecting first if there is none); an error drops it.
    fn with<T>(
        &mut self,
        f: impl FnOnce(&mut Connection, &Script, &Script) -> redis::RedisResult<T>,
    ) -> Result<T, DirectoryError> {
        if self.connection.is_none() {
            let c = self
                .client
                .get_connection_with_timeout(TIMEOUT)
                .map_err(error)?;
            c.set_read_timeout(Some(TIMEOUT)).map_err(error)?;
            c.set_write_timeout(Some(TIMEOUT)).map_err(error)?;
            self.connection = Some(c);
        }
        let Some(c) = self.connection.as_mut() else {
            return Err(DirectoryError("redis: no connection".into()));
        };
        let result = f(c, &self.claim, &self.release);
        if result.is_err() {
            self.connection = None;
        }
        result.map_err(error)
    }
}

impl Directory for RedisDirectory {
    fn claim_home(
        &mut self,
        room: &str,
        hub: &str,
        ttl: Duration,
    ) -> Result<String, DirectoryError> {
        let key = home_key(room);
        self.with(|c, claim, _| claim.key(key).arg(hub).arg(millis(ttl)).invoke(c))
    }

    fn set_players(
        &mut self,
        room: &str,
        hub: &str,
        players: &[String],
        ttl: Duration,
    ) -> Result<(), DirectoryError> {
        let (hubs, mine) = (hubs_key(room), hub_key(room, hub));
        let list = players.join("\n");
        let ms = millis(ttl);
        self.with(|c, _, _| {
            redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(&mine)
                .arg(list)
                .arg("PX")
                .arg(ms)
                .ignore()
                .cmd("SADD")
                .arg(&hubs)
                .arg(hub)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&hubs)
                .arg(ms)
                .ignore()
                .query(c)
        })
    }

    fn players(&mut self, room: &str) -> Result<Vec<(String, Vec<String>)>, DirectoryError> {
        let hubs_key = hubs_key(room);
        let mut hubs: Vec<String> =
            self.with(|c, _, _| redis::cmd("SMEMBERS").arg(&hubs_key).query(c))?;
        hubs.sort();
        let mut all = Vec::with_capacity(hubs.len());
        for hub in hubs {
            let key = hub_key(room, &hub);
            let list: Option<String> = self.with(|c, _, _| redis::cmd("GET").arg(&key).query(c))?;
            match list {
                // Lapsed: the hub stopped refreshing.
                None => {}
                Some(list) => {
                    let players = list
                        .split('\n')
                        .filter(|p| !p.is_empty())
                        .map(str::to_owned)
                        .collect();
                    all.push((hub, players));
                }
            }
        }
        Ok(all)
    }

    fn release(&mut self, room: &str, hub: &str) -> Result<(), DirectoryError> {
        let keys = [home_key(room), hub_key(room, hub), hubs_key(room)];
        self.with(|c, _, release| {
            release
                .key(&keys[0])
                .key(&keys[1])
                .key(&keys[2])
                .arg(hub)
                .invoke::<i64>(c)
                .map(|_| ())
        })
    }
}
