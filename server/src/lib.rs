//! Tutti's server: serves the built app (with the headers that make it cross-origin isolated),
//! `GET /api/config` for the browser, and WebRTC signaling between the members of a room on
//! `GET /ws` (the protocol is described in [`protocol`]). Audio never passes through it.
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
pub mod config;
pub mod headers;
pub mod log;
pub mod password;
pub mod protocol;
pub mod ratelimit;
pub mod room;
pub mod rooms;
pub mod statics;
pub mod store;
pub mod ws;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{FromRef, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};

use attempts::{Attempts, LogBudget};
pub use config::Config;
use log::event;
use rooms::Rooms;
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
    attempts: Mutex<Attempts>,
    /// Wrong-password log lines, and refused-attempt log lines.
    failure_log: Mutex<LogBudget>,
    refusal_log: Mutex<LogBudget>,
    hash_slots: Semaphore,
    purge_every: Duration,
    dist: Dist,
    api_config: String,
    max_message_bytes: usize,
    rate: f64,
    burst: u32,
    heartbeat: Duration,
    heartbeat_timeout: Duration,
    max_connections: usize,
    connections: AtomicUsize,
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

impl App {
    async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            if self.connections.load(Ordering::Acquire) == 0 {
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

/// A server bound to its port, not yet serving.
pub struct Server {
    listener: TcpListener,
    tls: Option<RustlsConfig>,
    app: Arc<App>,
    shutdown: watch::Sender<bool>,
    url: String,
    local_addr: SocketAddr,
}

impl Server {
    /// Validates `config`, checks the app directory, loads TLS files, binds the port and opens
    /// the room database (dropping rooms that expired meanwhile).
    pub async fn bind(config: Config) -> Result<Server, StartError> {
        let ice_servers = config.validate().map_err(StartError::Config)?;
        let dist = Dist::open(&config.dist).map_err(StartError::Dist)?;
        let tls = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => {
                // Only ring is compiled in; installing fails harmlessly if already installed.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let tls = RustlsConfig::from_pem_file(cert, key).await.map_err(|e| {
                    StartError::Tls(format!(
                        "Cannot use the TLS certificate {} with the key {}: {e}.",
                        cert.display(),
                        key.display()
                    ))
                })?;
                Some(tls)
            }
            _ => None,
        };
        let addr = SocketAddr::new(config.addr, config.port);
        let listener = TcpListener::bind(addr).await.map_err(|error| {
            if error.kind() == io::ErrorKind::AddrInUse {
                StartError::PortInUse {
                    addr: config.addr,
                    port: config.port,
                }
            } else {
                StartError::Bind { addr, error }
            }
        })?;
        let local_addr = listener
            .local_addr()
            .map_err(|error| StartError::Bind { addr, error })?;
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
        let api_config = serde_json::json!({
            "iceServers": ice_servers,
            "roomCap": config.room_cap,
            "heartbeatMs": config.heartbeat_ms,
        })
        .to_string();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (kept, _) = rooms.counts();
        event(&format!(
            "rooms: {kept} kept, in {kept_in}; kept {:?} h after they empty",
            config.room_retention_hours
        ));
        let app = Arc::new(App {
            rooms,
            attempts: Mutex::new(Attempts::new(config.password_policy(), ATTEMPTS_TRACKED)),
            failure_log: Mutex::new(LogBudget::new(PASSWORD_FAILURE_LINES, PASSWORD_LOG_WINDOW)),
            refusal_log: Mutex::new(LogBudget::new(PASSWORD_REFUSAL_LINES, PASSWORD_LOG_WINDOW)),
            hash_slots: Semaphore::new(HASH_SLOTS),
            purge_every: (retention / 4).clamp(Duration::from_secs(1), PURGE_EVERY_MAX),
            dist,
            api_config,
            max_message_bytes: config.max_message_bytes as usize,
            rate: config.rate,
            burst: config.burst,
            heartbeat: config.heartbeat(),
            heartbeat_timeout: config.heartbeat_timeout(),
            max_connections: config.max_connections,
            connections: AtomicUsize::new(0),
            next_connection_id: AtomicU64::new(1),
            shutdown: shutdown_rx,
            idle: Notify::new(),
        });
        Ok(Server {
            listener,
            tls,
            app,
            shutdown,
            url,
            local_addr,
        })
    }

    /// `http://127.0.0.1:PORT/` (https with TLS), with the port actually bound.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `signal` completes, then shuts down: stops accepting, tells every
    /// WebSocket client `shutting-down`, closes them (1001) and waits at most
    /// [`SHUTDOWN_GRACE`] for them.
    pub async fn run(self, signal: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        let Server {
            listener,
            tls,
            app,
            shutdown,
            ..
        } = self;
        let router = router(app.clone());
        let tls_handle = axum_server::Handle::new();
        let mut server = match tls {
            None => {
                let mut flag = app.shutdown.clone();
                let serve = axum::serve(
                    listener,
                    router.into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(async move {
                    let _ = flag.wait_for(|stopping| *stopping).await;
                });
                tokio::spawn(async move { serve.await })
            }
            Some(tls) => {
                let listener = listener.into_std()?;
                let serve = axum_server::from_tcp_rustls(listener, tls)
                    .handle(tls_handle.clone())
                    .serve(router.into_make_service_with_connect_info::<SocketAddr>());
                tokio::spawn(serve)
            }
        };
        let purge = tokio::spawn(purge_loop(app.clone()));
        let mut signal = tokio::spawn(signal);
        tokio::select! {
            result = &mut server => {
                signal.abort();
                return result.map_err(io::Error::other)?;
            }
            _ = &mut signal => {}
        }
        event("shutting down");
        let _ = shutdown.send(true);
        tls_handle.graceful_shutdown(Some(SHUTDOWN_GRACE));
        let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
            app.wait_idle().await;
            let _ = (&mut server).await;
        })
        .await;
        server.abort();
        purge.abort();
        match drained {
            Ok(()) => event("stopped"),
            Err(_) => event("stopped (some connections did not close in time)"),
        }
        Ok(())
    }
}

/// Now, in Unix milliseconds (room retention spans restarts, so it needs the wall clock).
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Drops expired rooms and idle limiter counters, and logs how many password lines were held
/// back, every [`App::purge_every`].
async fn purge_loop(app: Arc<App>) {
    let mut every = tokio::time::interval(app.purge_every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        let forgotten = app.rooms.purge(unix_ms());
        if forgotten > 0 {
            event(&format!("rooms: {forgotten} expired and forgotten"));
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
                event(&format!("password: {held} more {what} lines held back"));
            }
        }
    }
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/api/config", get(api_config))
        .route("/ws", get(ws::upgrade))
        .fallback(statics::serve)
        .layer(axum::middleware::map_response(
            headers::add_security_headers,
        ))
        .with_state(app)
}

async fn api_config(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        app.api_config.clone(),
    )
}
