//! Tutti's server: serves the built app (with the headers that make it cross-origin isolated),
//! `GET /api/config` for the browser, and WebRTC signaling between the members of a room on
//! `GET /ws` (the protocol is described in [`protocol`]). Audio never passes through it.
//!
//! Every client is assumed hostile. A connection passes [`serve`] (TLS handshake and HTTP
//! request heads under deadlines), then for `/ws` [`ws::upgrade`] (the page's [`origin`], the
//! address's share of connections in [`limits`]), then [`ws`]'s connection task (message rate
//! and size, heartbeat, join deadline, outbound [`budget`]s, close codes that arrive).
//!
//! Run it with [`Server::bind`] then [`Server::run`]; the binary does exactly that:
//!
//! ```no_run
//! # async fn start() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = tutti_server::Config::with_dist("dist");
//! config.port = 0; // any free port
//! let server = tutti_server::Server::bind(config).await?;
//! println!("Tutti is running at {}", server.url());
//! server.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

pub mod attempts;
pub mod budget;
pub mod config;
pub mod headers;
pub mod hub;
pub mod limits;
pub mod log;
pub mod memory;
pub mod mesh_layers;
pub mod origin;
pub mod password;
pub mod protocol;
pub mod ratelimit;
pub mod room;
pub mod rooms;
pub mod serve;
pub mod statics;
pub mod store;
pub mod turn;
pub mod ws;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{FromRef, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};
use tokio_rustls::TlsAcceptor;

use attempts::{Attempts, LogBudget};
use budget::SharedBudget;
pub use config::Config;
use limits::{AddressKey, Limits, LimitsConfig};
use log::{Throttle, THROTTLE_WINDOW};
use origin::OriginPolicy;
use rooms::Rooms;
use serve::Transport;
use statics::Dist;
use store::{NoStore, SqliteStore, Store};

/// How long a shutdown waits for connections to close before giving up on them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Client addresses and rooms the password-failure limiter tracks at most.
const ATTEMPTS_TRACKED: usize = 10_000;
/// Password hashes computed at once (each on a blocking thread, ~20 MiB of memory).
const HASH_SLOTS: usize = 2;
/// Log lines about wrong passwords: at most this many per [`PASSWORD_LOG_WINDOW`]...
const PASSWORD_FAILURE_LINES: u32 = 20;
/// ...and about refused attempts (each line says how many it stands for).
const PASSWORD_REFUSAL_LINES: u32 = 2;
const PASSWORD_LOG_WINDOW: Duration = Duration::from_secs(10);
/// Expired rooms and idle limiter counters are dropped at least this often.
const PURGE_EVERY_MAX: Duration = Duration::from_secs(60);

/// State shared by all requests and connections.
pub struct App {
    rooms: Rooms,
    /// The media hub, unless `--hub false`.
    hub: Option<hub::Hub>,
    /// Rooms move to the hub by themselves on members' uplink reports (`--hub-auto`).
    hub_auto: bool,
    /// How listeners' layers are chosen, in the hub and in a mesh (`--layer-policy`).
    layer_policy: hub::controller::Policy,
    attempts: Mutex<Attempts>,
    /// Wrong-password log lines, and refused-attempt log lines.
    failure_log: Mutex<LogBudget>,
    refusal_log: Mutex<LogBudget>,
    hash_slots: Semaphore,
    purge_every: Duration,
    dist: Dist,
    /// `/api/config` without its ICE servers, which are made per request.
    api_config: serde_json::Map<String, serde_json::Value>,
    ice_servers: Vec<serde_json::Value>,
    turn: Option<turn::TurnRest>,
    max_message_bytes: usize,
    rate: f64,
    burst: u32,
    heartbeat: Duration,
    heartbeat_timeout: Duration,
    join_timeout: Duration,
    origins: OriginPolicy,
    /// Open WebSocket connections, by address.
    limits: Mutex<Limits>,
    outbound_bytes_per_connection: usize,
    outbound_bytes_total: Arc<SharedBudget>,
    /// Lines about refused upgrades.
    refusals: Mutex<Throttle>,
    /// Lines about connections closed before they joined a room.
    unjoined_closes: Mutex<Throttle>,
    next_connection_id: AtomicU64,
    /// Becomes `true` when the server starts shutting down.
    shutdown: watch::Receiver<bool>,
    /// Notified when the last connection ends.
    idle: Notify,
}

impl FromRef<Arc<App>> for Dist {
    fn from_ref(app: &Arc<App>) -> Dist {
        app.dist.clone()
    }
}

/// Locks `m`; nothing under these locks can panic half-way through an update, so a poisoned
/// one is still consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl App {
    fn limits(&self) -> MutexGuard<'_, Limits> {
        lock(&self.limits)
    }

    /// Logs a refused upgrade from `key`, throttled (see [`Throttle`]).
    fn note_refusal(&self, key: AddressKey, kind: &'static str, detail: &str) {
        let now = std::time::Instant::now();
        let lines = lock(&self.refusals).note(&key.to_string(), kind, detail, now);
        log::lines(&lines);
    }

    /// Logs the close of a connection that was in no room, throttled like refusals: opening
    /// such connections costs a client nothing.
    fn note_unjoined_close(&self, key: AddressKey, kind: &'static str, detail: &str) {
        let now = std::time::Instant::now();
        let lines = lock(&self.unjoined_closes).note(&key.to_string(), kind, detail, now);
        log::lines(&lines);
    }

    /// Forgets idle addresses and writes the throttled summaries; runs every
    /// [`THROTTLE_WINDOW`], and with `last` when the server stops.
    fn sweep(&self, last: bool) {
        let now = std::time::Instant::now();
        self.limits().prune(now);
        let mut lines = Vec::new();
        for throttle in [&self.refusals, &self.unjoined_closes] {
            let mut throttle = lock(throttle);
            lines.extend(if last {
                throttle.flush_all(now)
            } else {
                throttle.flush(now)
            });
        }
        log::lines(&lines);
    }

    async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            if self.limits().open() == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// Why the server could not start.
#[derive(Debug)]
pub enum StartError {
    /// A flag is invalid.
    Config(String),
    /// The app directory is missing or incomplete.
    Dist(String),
    /// The port is taken.
    PortInUse { addr: IpAddr, port: u16 },
    /// Another bind error.
    Bind { addr: SocketAddr, error: io::Error },
    /// The certificate or key cannot be used.
    Tls(String),
    /// The room database cannot be used.
    Store(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(m)
            | StartError::Dist(m)
            | StartError::Tls(m)
            | StartError::Store(m) => f.write_str(m),
            StartError::PortInUse { addr, port } => write!(
                f,
                "Port {port} on {addr} is already in use (another Tutti server?). Choose \
                 another port with --port N or PORT=N."
            ),
            StartError::Bind { addr, error } => write!(f, "Cannot listen on {addr}: {error}."),
        }
    }
}

impl std::error::Error for StartError {}

/// The hub workers' figures, per worker (none when the hub is off); see [`Server::hub_stats`].
pub struct HubStats(Arc<App>);

impl HubStats {
    pub fn snapshot(&self) -> Vec<hub::worker::StatsSnapshot> {
        self.0.hub.as_ref().map(|h| h.stats()).unwrap_or_default()
    }
}

/// A server bound to its port, not yet serving.
pub struct Server {
    listener: TcpListener,
    transport: Transport,
    /// The plain-HTTP listener of `--http-redirect-port`.
    redirect: Option<TcpListener>,
    app: Arc<App>,
    shutdown: watch::Sender<bool>,
    url: String,
    local_addr: SocketAddr,
    /// The JackTrip handshake port (with the hub, unless `--jacktrip-port 0`).
    jacktrip: Option<hub::jacktrip::listener::JackTripListener>,
    /// What the hub's workers report (JackTrip clients that ended).
    hub_events: Option<tokio::sync::mpsc::UnboundedReceiver<hub::HubEvent>>,
}

impl Server {
    /// Validates `config`, checks the app directory, loads TLS files, binds the port and opens
    /// the room database (dropping rooms that expired meanwhile).
    pub async fn bind(config: Config) -> Result<Server, StartError> {
        let ice_servers = config.validate().map_err(StartError::Config)?;
        let turn = config.turn().map_err(StartError::Config)?;
        let serde_json::Value::Array(ice_servers) = ice_servers else {
            unreachable!("validate() returns the array it checked")
        };
        if has_fixed_turn_credentials(&ice_servers) {
            tracing::warn!(
                "warning: --ice-servers hands every visitor a fixed TURN password; prefer \
                 --turn-urls with --turn-secret (time-limited credentials)",
            );
        }
        let dist = Dist::open(&config.dist).map_err(StartError::Dist)?;
        let tls = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => Some(tls_acceptor(cert, key).map_err(|e| {
                StartError::Tls(format!(
                    "Cannot use the TLS certificate {} with the key {}: {e}.",
                    cert.display(),
                    key.display()
                ))
            })?),
            _ => None,
        };
        let origins = OriginPolicy::new(tls.is_some(), &config.allowed_origins)
            .map_err(StartError::Config)?;
        let listener = listen(config.addr, config.port).await?;
        let redirect = match config.http_redirect_port {
            Some(port) => Some(listen(config.addr, port).await?),
            None => None,
        };
        let local_addr = listener.local_addr().map_err(|error| StartError::Bind {
            addr: SocketAddr::new(config.addr, config.port),
            error,
        })?;
        let (store, kept_in): (Box<dyn Store>, String) = if config.no_persist {
            (Box::new(NoStore), "memory only (--no-persist)".into())
        } else {
            let dir = config.data_dir.clone();
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(&dir))
                .await
                .map_err(|e| StartError::Store(format!("Cannot open the room database: {e}.")))?
                .map_err(StartError::Store)?;
            let where_ = store.path().display().to_string();
            (Box::new(store), where_)
        };
        let retention = config.room_retention();
        let rooms = Rooms::new(config.room_cap as usize, retention, store, unix_ms())
            .map_err(StartError::Store)?;
        let host = match local_addr.ip() {
            ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
            ip if ip.is_unspecified() => "[::1]".to_owned(),
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{host}:{}/", local_addr.port());
        let mut api_config = serde_json::Map::new();
        api_config.insert("roomCap".into(), config.room_cap.into());
        api_config.insert("heartbeatMs".into(), config.heartbeat_ms.into());
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (kept, _) = rooms.counts();
        tracing::info!(
            "rooms: {kept} kept, in {kept_in}; kept {:?} h after they empty",
            config.room_retention_hours
        );
        let (hub_tx, hub_events) = tokio::sync::mpsc::unbounded_channel();
        let hub = match config.hub() {
            Some(hub_config) => {
                let cascade = match config.jacktrip_advertise() {
                    Some(advertise) => {
                        let directory: Box<dyn hub::cascade::Directory> = match &config.redis {
                            Some(url) => Box::new(
                                hub::cascade::redis::RedisDirectory::new(url)
                                    .map_err(|e| StartError::Config(e.to_string()))?,
                            ),
                            None => Box::new(hub::cascade::LocalDirectory::new()),
                        };
                        Some(hub::cascade::CascadeConfig {
                            directory,
                            advertise,
                            bind: hub_config.bind,
                        })
                    }
                    None => None,
                };
                let hub = hub::Hub::start(&hub_config, Some(hub_tx), cascade).map_err(|error| {
                    StartError::Bind {
                        addr: SocketAddr::new(hub_config.bind, hub_config.port),
                        error,
                    }
                })?;
                tracing::info!(
                    "hub: {} worker(s), UDP {}",
                    hub_config.threads,
                    hub.addresses()
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                Some(hub)
            }
            None => None,
        };
        let app = Arc::new(App {
            rooms,
            hub_auto: config.hub_auto,
            layer_policy: config.layer_policy,
            hub,
            attempts: Mutex::new(Attempts::new(config.password_policy(), ATTEMPTS_TRACKED)),
            failure_log: Mutex::new(LogBudget::new(PASSWORD_FAILURE_LINES, PASSWORD_LOG_WINDOW)),
            refusal_log: Mutex::new(LogBudget::new(PASSWORD_REFUSAL_LINES, PASSWORD_LOG_WINDOW)),
            hash_slots: Semaphore::new(HASH_SLOTS),
            purge_every: (retention / 4).clamp(Duration::from_secs(1), PURGE_EVERY_MAX),
            dist,
            api_config,
            ice_servers,
            turn,
            max_message_bytes: config.max_message_bytes as usize,
            rate: config.rate,
            burst: config.burst,
            heartbeat: config.heartbeat(),
            heartbeat_timeout: config.heartbeat_timeout(),
            join_timeout: config.join_timeout(),
            origins,
            limits: Mutex::new(Limits::new(LimitsConfig {
                max_total: config.max_connections,
                per_address: config.max_connections_per_address as usize,
                rate: config.connect_rate,
                burst: config.connect_burst,
            })),
            outbound_bytes_per_connection: usize::try_from(config.outbound_bytes_per_connection)
                .unwrap_or(usize::MAX),
            outbound_bytes_total: SharedBudget::new(
                usize::try_from(config.outbound_bytes_total).unwrap_or(usize::MAX),
            ),
            refusals: Mutex::new(Throttle::new("refused")),
            unjoined_closes: Mutex::new(Throttle::new("closed")),
            next_connection_id: AtomicU64::new(1),
            shutdown: shutdown_rx,
            idle: Notify::new(),
        });
        let jacktrip = if app.hub.is_some() && config.jacktrip_port != 0 {
            let addr = SocketAddr::new(config.addr, config.jacktrip_port);
            let admission = hub::admit::Admission {
                app: app.clone(),
                bind: config.addr,
                udp_base: config.jacktrip_udp_base,
            };
            let listener_config = hub::jacktrip::listener::ListenerConfig {
                default_room: config.jacktrip_room.clone(),
                ..Default::default()
            };
            let listener = hub::jacktrip::listener::JackTripListener::bind(
                addr,
                listener_config,
                Arc::new(admission),
            )
            .await
            .map_err(|error| StartError::Bind { addr, error })?;
            tracing::info!(
                "jacktrip: handshake on TCP {addr}, UDP from port {}",
                config.jacktrip_udp_base
            );
            Some(listener)
        } else {
            None
        };
        let transport = Transport {
            tls,
            header_timeout: config.header_timeout(),
            tls_handshake_timeout: config.tls_handshake_timeout(),
        };
        Ok(Server {
            listener,
            transport,
            redirect,
            app,
            shutdown,
            url,
            local_addr,
            jacktrip,
            hub_events: Some(hub_events),
        })
    }

    /// `http://127.0.0.1:PORT/` (https with TLS), with the port actually bound.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Reads the hub workers' figures while the server runs (`run` takes the server itself).
    pub fn hub_stats(&self) -> HubStats {
        HubStats(self.app.clone())
    }

    /// The JackTrip handshake's address, when JackTrip clients are on.
    pub fn jacktrip_addr(&self) -> Option<SocketAddr> {
        self.jacktrip.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until `signal` completes, then shuts down: stops accepting, tells every
    /// WebSocket client `shutting-down`, closes them (1001) and waits at most
    /// [`SHUTDOWN_GRACE`] for them.
    pub async fn run(self, signal: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        let Server {
            listener,
            transport,
            redirect,
            app,
            shutdown,
            local_addr,
            jacktrip,
            hub_events,
            ..
        } = self;
        let tls = transport.tls.is_some();
        let header_timeout = transport.header_timeout;
        let router = router(app.clone(), tls);
        let mut server = tokio::spawn(serve::serve(
            listener,
            transport,
            router,
            app.shutdown.clone(),
        ));
        let sweeper = {
            let app = app.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(THROTTLE_WINDOW);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    app.sweep(false);
                }
            })
        };
        let https_port = local_addr.port();
        let redirect = redirect.map(|listener| {
            let plain = Transport {
                tls: None,
                header_timeout,
                tls_handshake_timeout: header_timeout,
            };
            tokio::spawn(serve::serve(
                listener,
                plain,
                redirect_router(https_port),
                app.shutdown.clone(),
            ))
        });
        let purge = tokio::spawn(purge_loop(app.clone()));
        let hub_report = app
            .hub
            .is_some()
            .then(|| tokio::spawn(hub_report_loop(app.clone())));
        let departures =
            hub_events.map(|events| tokio::spawn(hub::admit::departures(app.clone(), events)));
        let jacktrip = jacktrip.map(|listener| {
            let mut stopping = app.shutdown.clone();
            tokio::spawn(listener.run(async move {
                let _ = stopping.wait_for(|&s| s).await;
            }))
        });
        let mut signal = tokio::spawn(signal);
        tokio::select! {
            result = &mut server => {
                signal.abort();
                sweeper.abort();
                for task in jacktrip
                    .iter()
                    .chain(departures.iter())
                    .chain(hub_report.iter())
                {
                    task.abort();
                }
                return result.map_err(io::Error::other)?;
            }
            _ = &mut signal => {}
        }
        tracing::info!("shutting down");
        let _ = shutdown.send(true);
        let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
            app.wait_idle().await;
            let _ = (&mut server).await;
        })
        .await;
        server.abort();
        if let Some(redirect) = redirect {
            redirect.abort();
        }
        sweeper.abort();
        app.sweep(true);
        purge.abort();
        for task in jacktrip
            .iter()
            .chain(departures.iter())
            .chain(hub_report.iter())
        {
            task.abort();
        }
        match drained {
            Ok(()) => tracing::info!("stopped"),
            Err(_) => tracing::info!("stopped (some connections did not close in time)"),
        }
        Ok(())
    }
}

async fn listen(ip: IpAddr, port: u16) -> Result<TcpListener, StartError> {
    let addr = SocketAddr::new(ip, port);
    TcpListener::bind(addr).await.map_err(|error| {
        if error.kind() == io::ErrorKind::AddrInUse {
            StartError::PortInUse { addr: ip, port }
        } else {
            StartError::Bind { addr, error }
        }
    })
}

/// A TLS acceptor for the PEM certificate chain and key, offering HTTP/1.1 only.
fn tls_acceptor(cert: &std::path::Path, key: &std::path::Path) -> Result<TlsAcceptor, String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("reading the certificate: {e}"))?;
    if certs.is_empty() {
        return Err("the certificate file holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("reading the key: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Now, in Unix milliseconds (room retention spans restarts, so it needs the wall clock).
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Drops expired rooms and idle limiter counters, and logs how many password lines were held
/// back, every [`App::purge_every`].
/// How often the hub's workers are asked what went wrong.
const HUB_REPORT_EVERY: Duration = Duration::from_secs(10);

/// Every [`HUB_REPORT_EVERY`], one warning per hub worker whose trouble figures grew (see
/// `StatsSnapshot::trouble_since`): what an operator needs to see when listeners hear gaps.
async fn hub_report_loop(app: Arc<App>) {
    let Some(hub) = app.hub.as_ref() else {
        return;
    };
    let mut every = tokio::time::interval(HUB_REPORT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    let mut last = hub.stats();
    loop {
        every.tick().await;
        let now = hub.stats();
        for (i, (was, is)) in last.iter().zip(&now).enumerate() {
            if let Some(line) = is.trouble_since(was, HUB_REPORT_EVERY.as_secs_f64()) {
                tracing::warn!("hub worker {i}: {line}");
            }
        }
        last = now;
    }
}

async fn purge_loop(app: Arc<App>) {
    let mut every = tokio::time::interval(app.purge_every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        let forgotten = app.rooms.purge(unix_ms());
        if forgotten > 0 {
            tracing::info!("rooms: {forgotten} expired and forgotten");
        }
        let now = std::time::Instant::now();
        app.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .purge(now);
        for (log, what) in [
            (&app.failure_log, "wrong-password"),
            (&app.refusal_log, "refused-attempt"),
        ] {
            let held = log
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take_suppressed(now);
            if held > 0 {
                tracing::info!("password: {held} more {what} lines held back");
            }
        }
    }
}

fn router(app: Arc<App>, tls: bool) -> Router {
    let router = Router::new()
        .route("/api/config", get(api_config))
        .route("/ws", get(ws::upgrade))
        .fallback(statics::serve)
        .layer(axum::middleware::map_response(
            headers::add_security_headers,
        ));
    let router = if tls {
        router.layer(axum::middleware::map_response(headers::add_hsts))
    } else {
        router
    };
    router.with_state(app)
}

/// `/api/config`: ICE servers (with TURN credentials fresh for this request), room cap, heartbeat.
async fn api_config(State(app): State<Arc<App>>) -> impl IntoResponse {
    let mut ice_servers = app.ice_servers.clone();
    if let Some(turn) = &app.turn {
        ice_servers.push(turn.ice_server(unix_ms() / 1000));
    }
    let mut body = app.api_config.clone();
    body.insert("iceServers".into(), ice_servers.into());
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        serde_json::Value::Object(body).to_string(),
    )
}

/// Whether an `--ice-servers` entry is a TURN server with a fixed password.
fn has_fixed_turn_credentials(servers: &[serde_json::Value]) -> bool {
    servers.iter().any(|s| {
        let turn_url = |u: &serde_json::Value| {
            u.as_str()
                .is_some_and(|u| u.starts_with("turn:") || u.starts_with("turns:"))
        };
        let is_turn = match &s["urls"] {
            serde_json::Value::Array(urls) => urls.iter().any(turn_url),
            u => turn_url(u),
        };
        is_turn && s.get("credential").is_some()
    })
}

/// The plain-HTTP listener of `--http-redirect-port`: every request gets a 308 to the same path
/// on HTTPS at `https_port`, on the host the client asked for.
fn redirect_router(https_port: u16) -> Router {
    Router::new().fallback(move |request: axum::extract::Request| async move {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(host_without_port);
        let Some(host) = host else {
            return (
                axum::http::StatusCode::BAD_REQUEST,
                "This server speaks HTTPS; the request named no usable Host.\n",
            )
                .into_response();
        };
        let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
        let location = format!("https://{host}:{https_port}{path}");
        match axum::http::HeaderValue::from_str(&location) {
            Ok(location) => (
                axum::http::StatusCode::PERMANENT_REDIRECT,
                [(header::LOCATION, location)],
            )
                .into_response(),
            Err(_) => (axum::http::StatusCode::BAD_REQUEST, "Bad request.\n").into_response(),
        }
    })
}

/// `example.org:80` → `example.org`, `[::1]:80` → `[::1]`; `None` for what is not a host name
/// or address (a redirect must not be steered to a URL of the client's making).
fn host_without_port(host: &str) -> Option<&str> {
    let name = if host.starts_with('[') {
        &host[..=host.find(']')?]
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b));
    ok.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_hosts() {
        for (host, expected) in [
            ("example.org:8080", Some("example.org")),
            ("example.org", Some("example.org")),
            ("[::1]:80", Some("[::1]")),
            ("192.168.1.2:80", Some("192.168.1.2")),
            ("evil/x:80", None),
            ("a@b", None),
            (":80", None),
            ("[::1", None),
        ] {
            assert_eq!(host_without_port(host), expected, "{host}");
        }
    }

    #[test]
    fn spots_fixed_turn_passwords() {
        let fixed = serde_json::json!([{"urls":["turn:t:3478"],"username":"u","credential":"p"}]);
        let stun = serde_json::json!([{"urls":"stun:s:3478"}]);
        let (Some(fixed), Some(stun)) = (fixed.as_array(), stun.as_array()) else {
            unreachable!("literal arrays")
        };
        assert!(has_fixed_turn_credentials(fixed));
        assert!(!has_fixed_turn_credentials(stun));
    }
}
