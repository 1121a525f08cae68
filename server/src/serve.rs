//! From accepted TCP connection to HTTP: one path for plain and TLS connections, each stage
//! with a deadline, so a client that opens a socket and then stalls holds it only briefly.
//!
//! - TLS: the handshake must finish within `--tls-handshake-timeout-ms`.
//! - HTTP/1.1: a request head must arrive complete within `--header-timeout-ms`, counted from
//!   the start of the connection or from the end of the previous response; so the same timeout
//!   closes keep-alive connections that sit idle. (Only HTTP/1.1 is offered: WebSockets need
//!   it anyway, and each further protocol is more surface.)
//! - Closing: [`Linger`] sends the end of the stream, then reads and discards what the client
//!   still sends for up to [`LINGER`] before closing. Closing a socket with unread input makes
//!   the kernel reset the connection, and a reset can destroy data not yet read by the client,
//!   such as a WebSocket close frame with its code.
//!
//! Every request carries the client's address as axum's `ConnectInfo<SocketAddr>`.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::connect_info::IntoMakeServiceWithConnectInfo;
use axum::extract::ConnectInfo;
use axum::middleware::AddExtension;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower_service::Service;

/// How long a closing connection keeps reading what the client still sends.
pub const LINGER: Duration = Duration::from_secs(1);
/// Most bytes read and discarded while lingering; a client that sends more is cut off.
const LINGER_BYTES: usize = 1 << 20;
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// Least time between two log lines about failed accepts.
const ACCEPT_ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The transport's settings.
#[derive(Clone)]
pub struct Transport {
    pub tls: Option<TlsAcceptor>,
    pub header_timeout: Duration,
    pub tls_handshake_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` becomes true; then stops accepting, lets
/// connections finish their current request and returns when all have ended (upgraded
/// WebSockets are not waited for: they watch `shutdown` themselves).
pub async fn serve(
    listener: TcpListener,
    transport: Transport,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let make = router.into_make_service_with_connect_info::<SocketAddr>();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(transport.header_timeout)
        .keep_alive(true);
    let http = Arc::new(http);
    let mut connections = JoinSet::new();
    let stop = shutdown.clone();
    let mut accept_errors = 0u64;
    let mut last_error_log: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stopping(&mut shutdown) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => {
                    connections.spawn(connection(
                        stream,
                        addr,
                        transport.clone(),
                        http.clone(),
                        make.clone(),
                        stop.clone(),
                    ));
                }
                Err(e) => {
                    // Out of descriptors or memory, or a connection that died in the backlog:
                    // pause instead of spinning, and say so now and then.
                    accept_errors += 1;
                    let now = Instant::now();
                    if last_error_log.is_none_or(|t| now - t >= ACCEPT_ERROR_LOG_INTERVAL) {
                        tracing::warn!("accept failed ({accept_errors} times so far): {e}");
                        last_error_log = Some(now);
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
    Ok(())
}

async fn connection(
    stream: TcpStream,
    addr: SocketAddr,
    transport: Transport,
    http: Arc<http1::Builder>,
    mut make: IntoMakeServiceWithConnectInfo<Router, SocketAddr>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let Ok(service) = make.call(addr).await;
    let service = TowerToHyperService::new(service);
    match transport.tls {
        None => serve_http(Linger::new(stream), &http, service, shutdown).await,
        Some(acceptor) => {
            let handshake =
                tokio::time::timeout(transport.tls_handshake_timeout, acceptor.accept(stream));
            let tls = tokio::select! {
                tls = handshake => tls,
                _ = stopping(&mut shutdown) => return,
            };
            // A failed or timed-out handshake just ends the connection: clients that fail
            // handshakes are not worth a log line each.
            if let Ok(Ok(tls)) = tls {
                serve_http(Linger::new(tls), &http, service, shutdown).await;
            }
        }
    }
}

/// Completes when the server starts shutting down (or is gone).
async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopping| *stopping).await;
}

/// The service each connection runs: the router, with the client's address in every request.
type ConnectionService = TowerToHyperService<AddExtension<Router, ConnectInfo<SocketAddr>>>;

async fn serve_http<I>(
    io: Linger<I>,
    http: &http1::Builder,
    service: ConnectionService,
    mut shutdown: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = http
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stopping(&mut shutdown) => {}
    }
    // Finish the request in progress, if any, then close (the server bounds this wait).
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// A stream that, when dropped, is closed gracefully in the background: end of stream sent
/// (and TLS close_notify), input read and discarded until the client closes, [`LINGER`]
/// passes or 1 MiB was read.
pub struct Linger<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> {
    inner: Option<T>,
}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Linger<T> {
    pub fn new(inner: T) -> Self {
        Self { inner: Some(inner) }
    }

    fn io(&mut self) -> Pin<&mut T> {
        // `inner` is only taken by `drop`.
        Pin::new(self.inner.as_mut().expect("Linger used after drop"))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Drop for Linger<T> {
    fn drop(&mut self) {
        let Some(mut io) = self.inner.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let _ = tokio::time::timeout(LINGER, async {
                let _ = io.shutdown().await;
                let mut buf = [0u8; 4096];
                let mut discarded = 0;
                while discarded < LINGER_BYTES {
                    match io.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => discarded += n,
                    }
                }
            })
            .await;
        });
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> AsyncRead for Linger<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.io().poll_read(cx, buf)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> AsyncWrite for Linger<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.io().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.io().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(|io| io.is_write_vectored())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io().poll_shutdown(cx)
    }
}
