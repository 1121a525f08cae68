//! Command-line flags (each with an environment variable fallback) and their validation.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde_json::Value;

use crate::turn::TurnRest;

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

    /// TURN server URLs (comma-separated turn: or turns: URLs) to hand browsers with
    /// time-limited credentials made from --turn-secret (the TURN REST scheme).
    #[arg(long, env = "TUTTI_TURN_URLS", default_value = "")]
    pub turn_urls: String,

    /// Secret shared with the TURN server (coturn: use-auth-secret, static-auth-secret=...);
    /// at least 16 bytes. Prefer the environment variable: flags show in process lists.
    #[arg(long, env = "TUTTI_TURN_SECRET", hide_env_values = true)]
    pub turn_secret: Option<String>,

    /// How long a TURN credential handed out stays valid, in seconds.
    #[arg(long, env = "TUTTI_TURN_TTL_SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(60..=604_800))]
    pub turn_ttl_secs: u64,

    /// With TLS: also listen for plain HTTP on this port and redirect every request to HTTPS
    /// (308). Off when not given.
    #[arg(long, env = "TUTTI_HTTP_REDIRECT_PORT")]
    pub http_redirect_port: Option<u16>,
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

    /// The TURN REST settings, if a secret is given.
    pub fn turn(&self) -> Result<Option<TurnRest>, String> {
        match &self.turn_secret {
            Some(secret) => TurnRest::new(&self.turn_urls, secret, self.turn_ttl_secs).map(Some),
            None if !self.turn_urls.trim().is_empty() => Err(
                "--turn-urls (TUTTI_TURN_URLS) needs --turn-secret (TUTTI_TURN_SECRET): \
                 credentials are made from it."
                    .into(),
            ),
            None => Ok(None),
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
        if self.http_redirect_port.is_some() && self.tls_cert.is_none() {
            return Err(
                "--http-redirect-port (TUTTI_HTTP_REDIRECT_PORT) redirects to HTTPS: give \
                 --tls-cert and --tls-key too."
                    .into(),
            );
        }
        if self.http_redirect_port.is_some() && self.http_redirect_port == Some(self.port) {
            return Err(format!(
                "--http-redirect-port must differ from --port ({}).",
                self.port
            ));
        }
        self.turn()?;
        if self.heartbeat_timeout_ms <= self.heartbeat_ms {
            return Err(format!(
                "--heartbeat-timeout-ms ({}) must be longer than --heartbeat-ms ({}).",
                self.heartbeat_timeout_ms, self.heartbeat_ms
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
    }
}
