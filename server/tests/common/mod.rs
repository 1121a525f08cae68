//! Helpers shared by the integration tests: a temporary dist directory, an in-process server
//! on a free port, the compiled server as a child process, a raw HTTP/1.1 client and a
//! WebSocket client (optionally from a chosen local address, with an Origin header).
//!
//! `tls/` holds a certificate for `localhost` and 127.0.0.1 signed by a test CA, made for these
//! tests only (`test-key.pem` protects nothing).

#![allow(dead_code)] // each test binary uses a different subset

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
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
        // Servers of parallel tests would share JackTrip's default port; a test that wants
        // JackTrip clients picks a port.
        config.jacktrip_port = 0;
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

    /// Two members of room "r": `a` (peer `hex_id('a')`, named "A") and `b` (peer
    /// `hex_id('b')`, named "B"), with b's arrival already read from a's connection.
    pub async fn joined_pair(&self) -> (Client, Client) {
        let mut a = self.ws().await;
        let mut b = self.ws().await;
        a.join("r", "A", 'a', '1', None).await;
        b.join("r", "B", 'b', '2', None).await;
        assert_eq!(
            a.recv().await,
            json!({"type": "peer-joined", "peer": hex_id('b'), "name": "B", "stream": 2})
        );
        (a, b)
    }
}

/// A [`TestServer::start`] tweak: each connection's message bucket refills at `rate` per
/// second and holds `burst`.
pub fn message_rate(rate: f64, burst: u32) -> impl FnOnce(&mut Config) {
    move |c| {
        c.rate = rate;
        c.burst = burst;
    }
}

/// The compiled server, started with `--port 0` and `args` on a temporary dist; its stderr is
/// collected line by line. Stopped with SIGTERM by [`BinaryServer::stop`], killed on drop.
pub struct BinaryServer {
    pub addr: SocketAddr,
    pub pid: u32,
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    _dist: Option<TempDist>,
}

impl BinaryServer {
    /// On a temporary dist of its own, with its rooms in a temporary data directory.
    pub fn start(args: &[&str]) -> Self {
        let dist = TempDist::new();
        let data = dist.base.join("data");
        let mut server = Self::start_on(&dist.dist, &data, args);
        server._dist = Some(dist);
        server
    }

    /// On `dist`, with its rooms in `data` (two servers one after the other on the same `data`
    /// see the same rooms: a restart).
    pub fn start_on(dist: &Path, data: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tutti-server"))
            .arg("--dist")
            .arg(dist)
            .arg("--data-dir")
            .arg(data)
            .args(["--port", "0", "--addr", "127.0.0.1"])
            .args(if args.contains(&"--jacktrip-port") {
                &[][..]
            } else {
                &["--jacktrip-port", "0"][..]
            })
            .args(args)
            .env_remove("PORT")
            .env_remove("TUTTI_ADDR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server binary starts");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reads the URL line");
        let port: u16 = line
            .trim_end()
            .strip_prefix("Tutti is running at http://127.0.0.1:")
            .and_then(|p| p.trim_end_matches('/').parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = log.clone();
        // Drained continuously: a full pipe would block the server's logging.
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().expect("log lock").push(line);
            }
        });
        Self {
            addr: ([127, 0, 0, 1], port).into(),
            pid: child.id(),
            child,
            log,
            reader: Some(reader),
            _dist: None,
        }
    }

    /// The server's resident memory (VmRSS of /proc/PID/status), in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .expect("/proc/PID/status of the server");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a VmRSS line")
    }

    /// The stderr lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("log lock").clone()
    }

    /// Whether a log line containing `needle` arrives within 3 s.
    pub fn logs_within(&self, needle: &str) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while std::time::Instant::now() < deadline {
            if self.log().iter().any(|l| l.contains(needle)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// SIGTERM, then waits (at most 5 s) for the exit; returns the exit code and all stderr.
    pub async fn stop(mut self) -> (Option<i32>, Vec<String>) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let mut code = None;
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
                code = status.code();
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(reader) = self.reader.take() {
            if code.is_some() {
                let _ = reader.join();
            }
        }
        (code, self.log())
    }
}

impl Drop for BinaryServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Opens a WebSocket to `server`'s /ws from the local address `from` (any port), with an
/// `Origin` header if given, and a small receive buffer if given (a client that stops reading
/// then stops absorbing data soon).
pub async fn ws_from(
    from: IpAddr,
    server: SocketAddr,
    origin: Option<&str>,
    recv_buffer: Option<u32>,
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    let stream = socket.connect(server).await?;
    let mut request = format!("ws://{server}/ws").into_client_request()?;
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().expect("a header value"));
    }
    let (ws, _) = tokio_tungstenite::client_async(request, MaybeTlsStream::Plain(stream)).await?;
    Ok(ws)
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
    http_with(addr, method, target, &[]).await
}

/// [`http`] with further request headers (`Range`, `If-None-Match`, ...).
pub async fn http_with(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> HttpResponse {
    let mut stream = TcpStream::connect(addr)
        .await
        .expect("connect to test server");
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let request =
        format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n");
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

    /// A client whose connection comes from `local` (any 127.x.y.z address is this machine).
    pub async fn connect_from(local: impl Into<IpAddr>, server: SocketAddr) -> Self {
        let ws = ws_from(local.into(), server, None, None)
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

    /// Sends `message` and returns the reply.
    pub async fn ask(&mut self, message: Value) -> Value {
        self.send(message).await;
        self.recv().await
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
        let extra = pw.map_or(json!({}), |pw| json!({"password": pw}));
        self.join_with(room, name, p, t, extra).await
    }

    /// [`Client::join`] with further fields (`password`, `key`, `owner`) from `extra`.
    pub async fn join_with(
        &mut self,
        room: &str,
        name: &str,
        p: char,
        t: char,
        extra: Value,
    ) -> Value {
        self.ask(join_msg(room, name, &hex_id(p), &hex_id(t), extra))
            .await
    }
}

/// A join message, peer and token given in full, with the fields of `extra` added.
pub fn join_msg(room: &str, name: &str, peer: &str, token: &str, extra: Value) -> Value {
    let mut msg = json!({"type": "join", "room": room, "name": name, "peer": peer, "token": token});
    if let (Value::Object(m), Value::Object(extra)) = (&mut msg, extra) {
        m.extend(extra);
    }
    msg
}

/// Asserts that `message` has each field of `expected`, with that value (other fields may
/// be there too).
#[track_caller]
pub fn assert_fields(message: &Value, expected: Value) {
    let Value::Object(fields) = &expected else {
        panic!("the expected fields are a JSON object: {expected}")
    };
    let got = fields.keys().map(|k| (k.clone(), message[k].clone()));
    assert_eq!(Value::Object(got.collect()), expected, "in {message}");
}

/// The directory of the test certificate (`test-cert.pem`, `test-key.pem`) and its CA.
pub fn tls_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/tls")
}

/// A TLS client that trusts only the test CA.
pub fn tls_client() -> tokio_rustls::TlsConnector {
    let dir = tls_dir();
    let pem = std::fs::read(dir.join("test-ca.pem")).expect("the test CA");
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.expect("a PEM certificate")).expect("a CA");
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}
