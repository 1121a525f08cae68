//! Command-line flags (each with an environment variable fallback) and their validation.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde_json::Value;

use crate::attempts::Policy;
use crate::hub::controller::Policy as LayerPolicy;
use crate::hub::HubConfig;
use crate::turn::TurnRest;

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

    /// Most simultaneous WebSocket connections; further upgrades are refused with 503. Shared
    /// fairly: while N other addresses hold connections, one address may hold at most
    /// 1/(N+2) of them (half when it is alone), so a new address always finds room.
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

    /// Most simultaneous WebSocket connections from one client address (IPv6: one /64), enough
    /// for a household or a rehearsal room behind one NAT; further upgrades get 429.
    #[arg(long, env = "TUTTI_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_address: u32,

    /// New WebSocket connections per second allowed from one address (token bucket refill
    /// rate); over it, upgrades get 429 with Retry-After.
    #[arg(long, env = "TUTTI_CONNECT_RATE", default_value_t = 2.0)]
    pub connect_rate: f64,

    /// Burst of new WebSocket connections allowed from one address (token bucket size): a
    /// household reconnecting at once after a server restart.
    #[arg(long, env = "TUTTI_CONNECT_BURST", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub connect_burst: u32,

    /// A WebSocket connection that is not in a room for this long (milliseconds; from its
    /// start or since it left) is closed with 1008.
    #[arg(long, env = "TUTTI_JOIN_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(10..))]
    pub join_timeout_ms: u64,

    /// Another origin (scheme, host and optional port, as browsers send it) whose pages may
    /// open /ws, e.g. the https address of a proxy that terminates TLS. Repeat the flag or separate with commas. The server's own origin
    /// is always allowed; an upgrade with any other Origin header gets 403.
    #[arg(
        long = "allowed-origin",
        env = "TUTTI_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,

    /// Bytes that may wait in one connection's outbound queue; a receiver that falls further
    /// behind is closed with 1013.
    #[arg(long, env = "TUTTI_OUTBOUND_BYTES_PER_CONNECTION", default_value_t = 1 << 20)]
    pub outbound_bytes_per_connection: u64,

    /// Bytes that may wait in all outbound queues together (each connection's first 16 KiB
    /// are not counted against it); the receiver whose message does not fit is closed with 1013.
    #[arg(long, env = "TUTTI_OUTBOUND_BYTES_TOTAL", default_value_t = 64 << 20)]
    pub outbound_bytes_total: u64,

    /// An HTTP connection must deliver a complete request head within this many
    /// milliseconds, from its start or from the end of its previous response (so this is also
    /// how long an idle keep-alive connection stays open).
    #[arg(long, env = "TUTTI_HEADER_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(10..))]
    pub header_timeout_ms: u64,

    /// A TLS handshake must complete within this many milliseconds.
    #[arg(long, env = "TUTTI_TLS_HANDSHAKE_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(10..))]
    pub tls_handshake_timeout_ms: u64,

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

    /// Run the media hub (rooms whose topology is `forward` or `mix` send their audio through
    /// this server over WebRTC data channels). `--hub false` turns it off.
    #[arg(long, env = "TUTTI_HUB", default_value_t = true, action = clap::ArgAction::Set)]
    pub hub: bool,

    /// Move a mesh room to the hub (forward) by itself when a member reports that its uplink no
    /// longer carries the mesh, unless the room's owner chose the mesh. `--hub-auto false`
    /// leaves every move to the owners.
    #[arg(long, env = "TUTTI_HUB_AUTO", default_value_t = true, action = clap::ArgAction::Set)]
    pub hub_auto: bool,

    /// How the hub picks what each forward-mode listener takes of the others: `capacity` (the
    /// richest format that fits the path's measured capacity) or `probe` (trial and error, one
    /// format up after each quiet hold: the baseline it is measured against).
    #[arg(long, env = "TUTTI_LAYER_POLICY", value_enum, default_value_t = LayerPolicy::Capacity)]
    pub layer_policy: LayerPolicy,

    /// Hub worker threads (rooms are spread over them); 0 = one per core.
    #[arg(long, env = "TUTTI_HUB_THREADS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub hub_threads: u32,

    /// Real-time (SCHED_FIFO) priority of the hub's worker threads, 1-99, as audio servers ask
    /// for theirs (JACK's default is 10); 0 keeps normal scheduling. When the system refuses,
    /// the workers run at normal priority and the log says why.
    #[arg(long, env = "TUTTI_HUB_PRIORITY", default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub hub_priority: u8,

    /// Address browsers send hub audio to (the hub's ICE candidate): this machine's public or
    /// LAN address. Default: the listen address, or 127.0.0.1 when listening on all interfaces.
    #[arg(long, env = "TUTTI_HUB_ADDRESS")]
    pub hub_address: Option<IpAddr>,

    /// First hub UDP port (worker i uses port + i); 0 lets the system pick free ports.
    #[arg(long, env = "TUTTI_HUB_PORT", default_value_t = 0)]
    pub hub_port: u16,

    /// TCP port of the hub's JackTrip handshake, on --addr: JackTrip clients join with
    /// `jacktrip -C HOST -P PORT -K room/name` (their default port is 4464). 0 turns JackTrip
    /// clients off.
    #[arg(long, env = "TUTTI_JACKTRIP_PORT", default_value_t = 4464)]
    pub jacktrip_port: u16,

    /// The room a JackTrip client joins when its name (`-K`) has no `room/` in front. Without
    /// it, such a client is refused.
    #[arg(long, env = "TUTTI_JACKTRIP_ROOM")]
    pub jacktrip_room: Option<String>,

    /// First UDP port of the JackTrip clients' slots: the handshake answers this plus the
    /// slot's number (JackTrip hubs use 61002 too).
    #[arg(long, env = "TUTTI_JACKTRIP_UDP_BASE", default_value_t = 61_002, value_parser = clap::value_parser!(u16).range(1..))]
    pub jacktrip_udp_base: u16,

    /// A Redis server shared by the hub processes that carry rooms together
    /// (`redis://HOST:PORT/DB`, `redis+unix:///PATH`): the first hub to mix a room claims it as
    /// the room's home there, and the others link to that home and exchange partial mixes with
    /// it. Without it, one process keeps the same record in memory and every room stays on it.
    #[arg(long, env = "TUTTI_REDIS", hide_env_values = true)]
    pub redis: Option<String>,

    /// The `IP:PORT` other hubs reach this hub's JackTrip handshake at, and its id in the shared
    /// store. Default: the hub address (--hub-address) with --jacktrip-port.
    #[arg(long, env = "TUTTI_JACKTRIP_ADVERTISE")]
    pub jacktrip_advertise: Option<SocketAddr>,
}

impl Config {
    /// The defaults of a command line without flags (environment fallbacks such as `PORT` still
    /// apply, and invalid ones end the process as on the command line), with `dist` set.
    pub fn with_dist(dist: impl Into<PathBuf>) -> Self {
        let mut c = Config::parse_from(["tutti-server"]);
        c.dist = dist.into();
        c
    }

    /// The address other hubs link to (and this hub's id in the shared store), `None` when the
    /// hub or JackTrip clients are off.
    pub fn jacktrip_advertise(&self) -> Option<SocketAddr> {
        let hub = self.hub()?;
        if self.jacktrip_port == 0 {
            return None;
        }
        Some(
            self.jacktrip_advertise
                .unwrap_or(SocketAddr::new(hub.advertise, self.jacktrip_port)),
        )
    }

    /// The hub's settings, `None` when it is off.
    pub fn hub(&self) -> Option<HubConfig> {
        if !self.hub {
            return None;
        }
        let threads = match self.hub_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n as usize,
        };
        let advertise = self.hub_address.unwrap_or(match self.addr {
            ip if ip.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
            ip => ip,
        });
        Some(HubConfig {
            threads,
            bind: self.addr,
            advertise,
            port: self.hub_port,
            priority: self.hub_priority,
            layer_policy: self.layer_policy,
        })
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

    pub fn join_timeout(&self) -> Duration {
        Duration::from_millis(self.join_timeout_ms)
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub fn tls_handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.tls_handshake_timeout_ms)
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

        if self.max_connections == 0 {
            return Err("--max-connections must be at least 1.".into());
        }
        if !(self.connect_rate.is_finite() && self.connect_rate > 0.0) {
            return Err(format!(
                "--connect-rate must be a positive number, not {}.",
                self.connect_rate
            ));
        }
        let message = u64::from(self.max_message_bytes);
        if self.outbound_bytes_per_connection < 2 * message {
            return Err(format!(
                "--outbound-bytes-per-connection ({}) must be at least twice \
                 --max-message-bytes ({message}), so that a relayed message always fits.",
                self.outbound_bytes_per_connection
            ));
        }
        if self.outbound_bytes_total < self.outbound_bytes_per_connection {
            return Err(format!(
                "--outbound-bytes-total ({}) must be at least --outbound-bytes-per-connection \
                 ({}).",
                self.outbound_bytes_total, self.outbound_bytes_per_connection
            ));
        }
        for origin in &self.allowed_origins {
            crate::origin::Origin::parse(origin).map_err(|why| {
                format!(
                    "--allowed-origin (TUTTI_ALLOWED_ORIGINS) {origin:?} is not an origin like \
                     https://tutti.example.org or http://192.168.1.20:8080: {why}."
                )
            })?;
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
        if let Some(room) = &self.jacktrip_room {
            crate::protocol::validate_room(room).map_err(|e| {
                format!(
                    "--jacktrip-room (TUTTI_JACKTRIP_ROOM) {room:?} is not a room name: {}.",
                    e.message
                )
            })?;
        }
        if let Some(url) = &self.redis {
            crate::hub::cascade::redis::RedisDirectory::new(url).map_err(|e| {
                format!(
                    "--redis (TUTTI_REDIS) is not a Redis URL like redis://127.0.0.1:6379/0: {e}."
                )
            })?;
        }
        if let Some(a) = self.jacktrip_advertise {
            if a.port() == 0 || a.ip().is_unspecified() {
                return Err(format!(
                    "--jacktrip-advertise {a} must be an address and port other hubs can reach."
                ));
            }
        }
        if self.jacktrip_port != 0 && self.jacktrip_port == self.port {
            return Err(format!(
                "--jacktrip-port must differ from --port ({}); 0 turns JackTrip clients off.",
                self.port
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
        assert_eq!(
            (c.max_connections, c.max_connections_per_address),
            (1024, 32)
        );
        assert_eq!((c.connect_rate, c.connect_burst), (2.0, 32));
        assert_eq!(
            (c.outbound_bytes_per_connection, c.outbound_bytes_total),
            (1 << 20, 64 << 20)
        );
        assert_eq!(
            (
                c.join_timeout_ms,
                c.header_timeout_ms,
                c.tls_handshake_timeout_ms
            ),
            (10_000, 10_000, 10_000)
        );
        assert!(c.allowed_origins.is_empty());
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
    fn connection_limits_are_validated() {
        let ok = Config::with_dist("d");
        let refused = |change: &dyn Fn(&mut Config), flag: &str| {
            let mut c = ok.clone();
            change(&mut c);
            let e = c.validate().err().unwrap_or_default();
            assert!(e.contains(flag), "{flag}: {e:?}");
        };
        refused(&|c| c.max_connections = 0, "--max-connections");
        refused(&|c| c.connect_rate = 0.0, "--connect-rate");
        refused(&|c| c.connect_rate = f64::NAN, "--connect-rate");
        refused(
            &|c| c.outbound_bytes_per_connection = 100_000,
            "--outbound-bytes-per-connection",
        );
        refused(
            &|c| c.outbound_bytes_total = (1 << 20) - 1,
            "--outbound-bytes-total",
        );
        refused(
            &|c| c.allowed_origins = vec!["tutti.example.org".into()],
            "--allowed-origin",
        );
        let parsed = Config::parse_from([
            "tutti-server",
            "--allowed-origin",
            "https://a.example,http://b.example:8080",
            "--allowed-origin",
            "http://[::1]:3000",
        ]);
        assert_eq!(parsed.allowed_origins.len(), 3);
        assert!(parsed.validate().is_ok());
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

    #[test]
    fn cascade_flags() {
        let parse = |args: &[&str]| {
            Config::try_parse_from([&["tutti-server", "--addr", "10.0.0.5"], args].concat())
                .expect("flags parse")
        };
        let c = parse(&[]);
        assert_eq!(c.redis, None);
        assert_eq!(
            c.jacktrip_advertise(),
            Some("10.0.0.5:4464".parse().unwrap())
        );
        let c = parse(&["--hub-address", "192.0.2.1", "--jacktrip-port", "4470"]);
        assert_eq!(
            c.jacktrip_advertise(),
            Some("192.0.2.1:4470".parse().unwrap())
        );
        let c = parse(&["--jacktrip-advertise", "198.51.100.2:9000"]);
        assert_eq!(
            c.jacktrip_advertise(),
            Some("198.51.100.2:9000".parse().unwrap())
        );
        assert_eq!(parse(&["--jacktrip-port", "0"]).jacktrip_advertise(), None);
        assert_eq!(parse(&["--hub", "false"]).jacktrip_advertise(), None);
        for url in ["redis://127.0.0.1:6379/0", "redis+unix:///run/redis.sock"] {
            let c = parse(&["--redis", url]);
            assert_eq!(c.redis.as_deref(), Some(url));
            assert!(c.validate().is_ok(), "{url}");
        }
        for (args, flag) in [
            (&["--redis", "http://x"][..], "--redis"),
            (&["--redis", "not a url"][..], "--redis"),
            (
                &["--jacktrip-advertise", "0.0.0.0:4464"][..],
                "--jacktrip-advertise",
            ),
            (
                &["--jacktrip-advertise", "10.0.0.5:0"][..],
                "--jacktrip-advertise",
            ),
        ] {
            let r = parse(args).validate();
            assert!(
                matches!(r, Err(ref m) if m.contains(flag)),
                "{args:?}: {r:?}"
            );
        }
        let garbage = Config::try_parse_from(["tutti-server", "--jacktrip-advertise", "nope"]);
        assert!(garbage.is_err());
    }

    #[test]
    fn jacktrip_flags() {
        let c = Config::with_dist("d");
        assert_eq!(
            (
                c.jacktrip_port,
                c.jacktrip_room.as_deref(),
                c.jacktrip_udp_base
            ),
            (4464, None, 61_002)
        );
        let parse = |args: &[&str]| {
            Config::try_parse_from([&["tutti-server"], args].concat()).map(|c| c.validate())
        };
        let Ok(c) = Config::try_parse_from([
            "tutti-server",
            "--jacktrip-port",
            "0",
            "--jacktrip-room",
            "choir",
            "--jacktrip-udp-base",
            "50000",
        ]) else {
            panic!("flags parse")
        };
        assert_eq!(
            (
                c.jacktrip_port,
                c.jacktrip_room.as_deref(),
                c.jacktrip_udp_base
            ),
            (0, Some("choir"), 50_000)
        );
        assert!(c.validate().is_ok());
        let r = parse(&["--jacktrip-room", "no spaces"]);
        assert!(
            matches!(r, Ok(Err(ref m)) if m.contains("--jacktrip-room")),
            "{r:?}"
        );
        let r = parse(&["--port", "4464"]);
        assert!(
            matches!(r, Ok(Err(ref m)) if m.contains("--jacktrip-port")),
            "{r:?}"
        );
        assert!(matches!(
            parse(&["--port", "4464", "--jacktrip-port", "0"]),
            Ok(Ok(_))
        ));
        assert!(parse(&["--jacktrip-udp-base", "0"]).is_err());
        assert!(parse(&["--jacktrip-port", "65536"]).is_err());
    }
}
