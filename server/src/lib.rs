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

pub mod budget;
pub mod config;
pub mod headers;
pub mod limits;
pub mod log;
pub mod origin;
pub mod password;
pub mod protocol;
pub mod ratelimit;
pub mod rooms;
pub mod serve;
pub mod statics;
pub mod ws;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::extract::{FromRef, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio_rustls::TlsAcceptor;

use budget::SharedBudget;
pub use config::Config;
use limits::{AddressKey, Limits, LimitsConfig};
use log::{event, Throttle, THROTTLE_WINDOW};
use origin::OriginPolicy;
use rooms::Rooms;
use serve::Transport;
use statics::Dist;

/// How long a shutdown waits for connections to close before giving up on them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// State shared by all requests and connections.
pub struct App {
    rooms: Rooms,
    dist: Dist,
    api_config: String,
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
        lines.iter().for_each(|l| event(l));
    }

    /// Logs the close of a connection that was in no room, throttled like refusals: opening
    /// such connections costs a client nothing.
    fn note_unjoined_close(&self, key: AddressKey, kind: &'static str, detail: &str) {
        let now = std::time::Instant::now();
        let lines = lock(&self.unjoined_closes).note(&key.to_string(), kind, detail, now);
        lines.iter().for_each(|l| event(l));
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
        lines.iter().for_each(|l| event(l));
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
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(m) | StartError::Dist(m) | StartError::Tls(m) => f.write_str(m),
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
    transport: Transport,
    app: Arc<App>,
    shutdown: watch::Sender<bool>,
    url: String,
    local_addr: SocketAddr,
}

impl Server {
    /// Validates `config`, checks the app directory, loads TLS files and binds the port.
    pub async fn bind(config: Config) -> Result<Server, StartError> {
        let ice_servers = config.validate().map_err(StartError::Config)?;
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
        let app = Arc::new(App {
            rooms: Rooms::new(config.room_cap as usize),
            dist,
            api_config,
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
        let transport = Transport {
            tls,
            header_timeout: config.header_timeout(),
            tls_handshake_timeout: config.tls_handshake_timeout(),
        };
        Ok(Server {
            listener,
            transport,
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
            transport,
            app,
            shutdown,
            ..
        } = self;
        let router = router(app.clone());
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
        let mut signal = tokio::spawn(signal);
        tokio::select! {
            result = &mut server => {
                signal.abort();
                sweeper.abort();
                return result.map_err(io::Error::other)?;
            }
            _ = &mut signal => {}
        }
        event("shutting down");
        let _ = shutdown.send(true);
        let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
            app.wait_idle().await;
            let _ = (&mut server).await;
        })
        .await;
        server.abort();
        sweeper.abort();
        app.sweep(true);
        match drained {
            Ok(()) => event("stopped"),
            Err(_) => event("stopped (some connections did not close in time)"),
        }
        Ok(())
    }
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
