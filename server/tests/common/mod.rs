//! Helpers shared by the integration tests: a temporary dist directory, an in-process server
//! on a free port, a raw HTTP/1.1 client and a WebSocket client.

#![allow(dead_code)] // each test binary uses a different subset

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tutti_server::{Config, Server};

pub const INDEX: &str = "<!doctype html><title>Tutti</title>";
pub const WASM: &[u8] = b"\0asm\x01\0\0\0";

/// A dist directory with an index, a hashed asset, a wasm file and a manifest, plus a secret
/// file beside it that traversal attempts aim for; servers keep their rooms in `base/data`.
/// Removed on drop.
pub struct TempDist {
    pub base: PathBuf,
    pub dist: PathBuf,
}

impl TempDist {
    pub fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir().join(format!(
            "tutti-server-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let dist = base.join("dist");
        std::fs::create_dir_all(dist.join("assets")).expect("test setup: create temp dist");
        let files: [(&str, &[u8]); 5] = [
            ("index.html", INDEX.as_bytes()),
            ("assets/app-1a2b3c.js", b"console.log(1)"),
            ("assets/engine-4d5e.wasm", WASM),
            ("manifest.webmanifest", b"{}"),
            ("sw.js", b"self"),
        ];
        for (name, data) in files {
            std::fs::write(dist.join(name), data).expect("test setup: write temp dist");
        }
        std::fs::write(base.join("secret.txt"), "secret").expect("test setup: write secret");
        Self { base, dist }
    }
}

impl Drop for TempDist {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// An in-process server; shut down (and the dist removed) on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
    _dist: TempDist,
}

impl TestServer {
    pub async fn start(tweak: impl FnOnce(&mut Config)) -> Self {
        let dist = TempDist::new();
        let mut config = Config::with_dist(&dist.dist);
        config.data_dir = dist.base.join("data");
        config.addr = [127, 0, 0, 1].into();
        config.port = 0;
        tweak(&mut config);
        let server = Server::bind(config).await.expect("test server binds");
        let addr = server.local_addr();
        let url = server.url().to_owned();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        Self {
            addr,
            url,
            stop: Some(stop),
            task,
            _dist: dist,
        }
    }

    /// Starts the shutdown (as SIGTERM does) without waiting for it.
    pub fn begin_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    pub async fn ws(&self) -> Client {
        Client::connect(self.addr).await
    }
}

/// A parsed HTTP response.
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request with `Connection: close` and reads the whole response. `target` is sent
/// verbatim, so tests can send paths a URL library would normalise.
pub async fn http(addr: SocketAddr, method: &str, target: &str) -> HttpResponse {
    let mut stream = TcpStream::connect(addr)
        .await
        .expect("connect to test server");
    let request =
        format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send request");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut raw))
        .await
        .expect("response within 5 s")
        .expect("read response");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response has a header block");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let body = raw[split + 4..].to_vec();
    HttpResponse {
        status,
        headers,
        body,
    }
}

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A signaling client.
pub struct Client {
    pub ws: Ws,
}

pub fn hex_id(c: char) -> String {
    c.to_string().repeat(32)
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws"))
            .await
            .expect("websocket connects");
        Self { ws }
    }

    pub async fn send(&mut self, v: Value) {
        self.ws
            .send(Message::Text(v.to_string().into()))
            .await
            .expect("send");
    }

    pub async fn send_raw(&mut self, m: Message) {
        self.ws.send(m).await.expect("send");
    }

    /// The next JSON message within 3 s (pings are answered and skipped).
    pub async fn recv(&mut self) -> Value {
        self.recv_within(Duration::from_secs(3)).await
    }

    pub async fn recv_within(&mut self, limit: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let next = tokio::time::timeout_at(deadline, self.ws.next())
                .await
                .expect("a message arrives in time");
            match next {
                Some(Ok(Message::Text(t))) => {
                    return serde_json::from_str(t.as_str()).expect("server sends JSON")
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("expected a text message, got {other:?}"),
            }
        }
    }

    /// Waits for the server to close the connection; returns the close code if one was sent.
    /// Text messages before the close are returned too.
    pub async fn closed(&mut self) -> (Option<u16>, Vec<Value>) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        let mut texts = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => panic!("connection not closed in time; got {texts:?}"),
                Ok(Some(Ok(Message::Close(frame)))) => {
                    return (frame.map(|f| u16::from(f.code)), texts)
                }
                Ok(Some(Ok(Message::Text(t)))) => {
                    texts.push(serde_json::from_str(t.as_str()).unwrap_or(Value::Null))
                }
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(_)) | None) => return (None, texts),
            }
        }
    }

    /// Sends a join for peer `hex_id(p)` with token `hex_id(t)` and returns the reply.
    pub async fn join(
        &mut self,
        room: &str,
        name: &str,
        p: char,
        t: char,
        pw: Option<&str>,
    ) -> Value {
        let mut msg = json!({"type": "join", "room": room, "name": name,
                             "peer": hex_id(p), "token": hex_id(t)});
        if let Some(pw) = pw {
            msg["password"] = json!(pw);
        }
        self.send(msg).await;
        self.recv().await
    }
}
