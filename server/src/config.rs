//! Command-line flags (each with an environment variable fallback) and their validation.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde_json::Value;

use crate::attempts::Policy;

/// Longest `--room-retention-hours`: a year.
const MAX_RETENTION_HOURS: f64 = 8760.0;
/// Longest `--password-backoff-max-ms`: a day.
const MAX_BACKOFF_MS: u64 = 86_400_000;

/// Tutti's server: serves the built app and relays WebRTC signaling between room members.
#[derive(Debug, Clone, Parser)]
#[command(name = "tutti-server", version, about)]
pub struct Config {
    /// Address to listen on (0.0.0.0 for all interfaces).
    #[arg(long, env = "TUTTI_ADDR", default_value = "127.0.0.1")]
    pub addr: IpAddr,

    /// Port to listen on; 0 picks a free port (the URL line printed at start names it).
    #[arg(long, env = "PORT", default_value_t = 8080)]
    pub port: u16,

    /// Directory of the built app (made by `npm run build`); must contain index.html.
    #[arg(long, env = "TUTTI_DIST", default_value = "dist")]
    pub dist: PathBuf,

    /// TLS certificate chain (PEM). Give it with --tls-key to serve HTTPS and WSS.
    #[arg(long, env = "TUTTI_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM). Give it with --tls-cert.
    #[arg(long, env = "TUTTI_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// Most members a room can hold; the next joiner gets `room-full`.
    #[arg(long, env = "TUTTI_ROOM_CAP", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub room_cap: u32,

    /// ICE servers handed to browsers by /api/config: a JSON array of RTCIceServer objects,
    /// e.g. '[{"urls":"stun:stun.example.org:3478"}]'. None are needed on a LAN.
    #[arg(long, env = "TUTTI_ICE_SERVERS", default_value = "[]")]
    pub ice_servers: String,

    /// Largest signaling message accepted, in bytes; larger ones close the connection (1009).
    #[arg(long, env = "TUTTI_MAX_MESSAGE_BYTES", default_value_t = 65536, value_parser = clap::value_parser!(u32).range(256..))]
    pub max_message_bytes: u32,

    /// Signaling messages per second allowed per connection (token bucket refill rate).
    #[arg(long, env = "TUTTI_RATE", default_value_t = 50.0)]
    pub rate: f64,

    /// Burst of signaling messages allowed per connection (token bucket size). A connection
    /// with more than this many messages dropped within 10 s is closed (1008).
    #[arg(long, env = "TUTTI_BURST", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub burst: u32,

    /// Interval between the server's WebSocket pings, in milliseconds.
    #[arg(long, env = "TUTTI_HEARTBEAT_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    pub heartbeat_ms: u64,

    /// A connection silent for this long (milliseconds) is closed and announced as timed out.
    #[arg(long, env = "TUTTI_HEARTBEAT_TIMEOUT_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(10..))]
    pub heartbeat_timeout_ms: u64,

    /// Most simultaneous WebSocket connections; further upgrades are refused with 503.
    #[arg(long, env = "TUTTI_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,

    /// Directory of the room database (rooms.sqlite3), created if missing. Relative paths are
    /// relative to the working directory.
    #[arg(long, env = "TUTTI_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,

    /// Keep rooms in memory only: passwords, owners and member places are lost on restart.
    /// The environment variable takes true/false, 1/0, yes/no, on/off.
    #[arg(long, env = "TUTTI_NO_PERSIST", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_persist: bool,

    /// How long a room (its password, owner, lock, member places and bans) is kept after its
    /// last member left, in hours; fractions allowed, 0 forgets a room as soon as it empties.
    #[arg(long, env = "TUTTI_ROOM_RETENTION_HOURS", default_value_t = 24.0)]
    pub room_retention_hours: f64,

    /// Wrong room passwords allowed per client address (IPv6: per /64) before each further
    /// attempt must wait. A room allows 4 times as many from all addresses together.
    #[arg(long, env = "TUTTI_PASSWORD_FREE_FAILURES", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub password_free_failures: u32,

    /// The first wait after the free failures, in milliseconds; it doubles with each further
    /// failure.
    #[arg(long, env = "TUTTI_PASSWORD_BACKOFF_MS", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub password_backoff_ms: u64,

    /// The longest wait between password attempts, in milliseconds. Failure counts are
    /// forgotten after 12 times this without an attempt.
    #[arg(long, env = "TUTTI_PASSWORD_BACKOFF_MAX_MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub password_backoff_max_ms: u64,
}

impl Config {
    /// The defaults of a command line without flags (environment fallbacks such as `PORT` still
    /// apply, and invalid ones end the process as on the command line), with `dist` set.
    pub fn with_dist(dist: impl Into<PathBuf>) -> Self {
        let mut c = Config::parse_from(["tutti-server"]);
        c.dist = dist.into();
        c
    }

    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms)
    }

    pub fn heartbeat_timeout(&self) -> Duration {
        Duration::from_millis(self.heartbeat_timeout_ms)
    }

    /// `--room-retention-hours` as a duration (after [`Config::validate`]).
    pub fn room_retention(&self) -> Duration {
        Duration::try_from_secs_f64(self.room_retention_hours * 3600.0).unwrap_or(Duration::ZERO)
    }

    /// The password-failure limiter's rules.
    pub fn password_policy(&self) -> Policy {
        Policy {
            free_failures: self.password_free_failures,
            backoff: Duration::from_millis(self.password_backoff_ms),
            max_backoff: Duration::from_millis(self.password_backoff_max_ms),
        }
    }

    /// Checks what clap cannot; returns the parsed ICE servers.
    pub fn validate(&self) -> Result<Value, String> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(
                "--tls-cert and --tls-key (TUTTI_TLS_CERT, TUTTI_TLS_KEY) must be given \
                        together, or neither for plain HTTP."
                    .into(),
            );
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!(
                "--rate must be a positive number, not {}.",
                self.rate
            ));
        }
        if self.heartbeat_timeout_ms <= self.heartbeat_ms {
            return Err(format!(
                "--heartbeat-timeout-ms ({}) must be longer than --heartbeat-ms ({}).",
                self.heartbeat_timeout_ms, self.heartbeat_ms
            ));
        }
        if !(self.room_retention_hours.is_finite()
            && (0.0..=MAX_RETENTION_HOURS).contains(&self.room_retention_hours))
        {
            return Err(format!(
                "--room-retention-hours (TUTTI_ROOM_RETENTION_HOURS) must be a number of hours \
                 from 0 to {MAX_RETENTION_HOURS}, not {}.",
                self.room_retention_hours
            ));
        }
        if self.password_backoff_max_ms < self.password_backoff_ms {
            return Err(format!(
                "--password-backoff-max-ms ({}) must be at least --password-backoff-ms ({}).",
                self.password_backoff_max_ms, self.password_backoff_ms
            ));
        }
        if self.password_backoff_max_ms > MAX_BACKOFF_MS {
            return Err(format!(
                "--password-backoff-max-ms must be at most {MAX_BACKOFF_MS} (a day), not {}.",
                self.password_backoff_max_ms
            ));
        }
        parse_ice_servers(&self.ice_servers)
    }
}

/// Parses and checks `--ice-servers`: a JSON array of objects whose `urls` is a string or an
/// array of strings, each starting with stun:, stuns:, turn: or turns:.
pub fn parse_ice_servers(text: &str) -> Result<Value, String> {
    let intro = "--ice-servers (TUTTI_ICE_SERVERS) must be a JSON array of RTCIceServer objects \
                 like [{\"urls\":\"stun:stun.example.org:3478\"}]";
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("{intro}; it is not valid JSON: {e}."))?;
    let Value::Array(servers) = &value else {
        return Err(format!("{intro}; it is not an array."));
    };
    for (i, server) in servers.iter().enumerate() {
        let Value::Object(obj) = server else {
            return Err(format!("{intro}; entry {i} is not an object."));
        };
        let urls: Vec<&Value> = match obj.get("urls") {
            Some(Value::Array(a)) if !a.is_empty() => a.iter().collect(),
            Some(v @ Value::String(_)) => vec![v],
            _ => {
                return Err(format!(
                    "{intro}; entry {i} needs \"urls\": a string or a non-empty array of strings."
                ))
            }
        };
        for url in urls {
            let ok = url.as_str().is_some_and(|u| {
                ["stun:", "stuns:", "turn:", "turns:"]
                    .iter()
                    .any(|scheme| u.starts_with(scheme))
            });
            if !ok {
                return Err(format!(
                    "{intro}; entry {i} has the URL {url}, which does not start with stun:, \
                     stuns:, turn: or turns:."
                ));
            }
        }
        for field in ["username", "credential"] {
            if obj.get(field).is_some_and(|v| !v.is_string()) {
                return Err(format!(
                    "{intro}; entry {i} has a \"{field}\" that is not a string."
                ));
            }
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_ice_servers() {
        let ok = r#"[{"urls":"stun:stun.example.org:3478"},
                     {"urls":["turn:turn.example.org:3478","turns:t.example.org"],"username":"u","credential":"p"}]"#;
        assert!(parse_ice_servers(ok).is_ok());
        assert!(parse_ice_servers("[]").is_ok());
    }

    #[test]
    fn rejects_invalid_ice_servers() {
        for bad in [
            "",
            "{",
            r#"{"urls":"stun:x"}"#,
            r#"[1]"#,
            r#"[{}]"#,
            r#"[{"urls":[]}]"#,
            r#"[{"urls":"http://x"}]"#,
            r#"[{"urls":["stun:x", 3]}]"#,
            r#"[{"urls":"turn:x","username":5}]"#,
        ] {
            assert!(parse_ice_servers(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn defaults() {
        let c = Config::with_dist("d");
        assert_eq!(c.room_cap, 16);
        assert_eq!(c.max_message_bytes, 65536);
        assert!(c.validate().is_ok());
        let mut tls = c.clone();
        tls.tls_cert = Some("cert.pem".into());
        assert!(tls.validate().is_err());
        assert_eq!(c.data_dir, PathBuf::from("data"));
        assert!(!c.no_persist);
        assert_eq!(c.room_retention(), Duration::from_secs(24 * 3600));
        assert_eq!(
            c.password_policy(),
            Policy {
                free_failures: 5,
                backoff: Duration::from_secs(20),
                max_backoff: Duration::from_secs(300),
            }
        );
    }

    #[test]
    fn validates_room_and_password_flags() {
        let parse = |args: &[&str]| {
            Config::try_parse_from([&["tutti-server"], args].concat()).map(|c| c.validate())
        };
        assert!(matches!(parse(&["--room-retention-hours", "0"]), Ok(Ok(_))));
        assert!(matches!(
            parse(&["--room-retention-hours", "0.001"]),
            Ok(Ok(_))
        ));
        for bad in ["-1", "NaN", "inf", "9000"] {
            let arg = format!("--room-retention-hours={bad}");
            let r = parse(&[&arg]);
            assert!(
                matches!(r, Ok(Err(ref m)) if m.contains("--room-retention-hours")),
                "{bad}: {r:?}"
            );
        }
        assert!(parse(&["--room-retention-hours", "day"]).is_err());
        let r = parse(&[
            "--password-backoff-ms",
            "500",
            "--password-backoff-max-ms",
            "100",
        ]);
        assert!(
            matches!(r, Ok(Err(ref m)) if m.contains("--password-backoff-max-ms")),
            "{r:?}"
        );
        assert!(parse(&["--password-free-failures", "0"]).is_err());
        assert!(parse(&["--password-backoff-ms", "0"]).is_err());
        let Ok(c) = Config::try_parse_from(["tutti-server", "--no-persist", "--data-dir", "/x"])
        else {
            panic!("flags parse")
        };
        assert!(c.no_persist);
        assert_eq!(c.data_dir, PathBuf::from("/x"));
    }
}
