//! The TCP side of JackTrip's hub handshake: accepts a connection on `--jacktrip-port`, reads
//! the hello under a deadline, asks the hub ([`Admit`]) for the UDP port of the client's slot,
//! answers it and closes.
//!
//! Each address is held to [`LIMITS`] (the server's per-address accounting of [`Limits`]): at
//! most 6 handshakes at once and at most 8 in any 10 s, so a client retrying in a loop or a
//! scan of the port costs little. A connection over the limit is closed at once, unanswered.
//!
//! The hub's side of admission is the [`Admit`] trait object: it gets the parsed request and
//! returns the UDP port the client should send to (or why not). It runs on a blocking thread,
//! so it may wait briefly for the worker that owns the room.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::handshake::{self, HandshakeError, Hello, HELLO_LEN};
use crate::limits::{AddressKey, Limits, LimitsConfig};

/// How long a client has to send its whole hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// Handshakes in progress: 256 at once in all, 6 per address, and per address a bucket of 6
/// refilled at one per 5 s (so at most 8 in any 10 s).
pub const LIMITS: LimitsConfig = LimitsConfig {
    max_total: 256,
    per_address: 6,
    rate: 0.2,
    burst: 6,
};

/// What a JackTrip client asks for, once its hello is valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRequest {
    /// A valid room name.
    pub room: String,
    /// A valid display name.
    pub name: String,
    /// The UDP port the client said it uses (its NAT may show another).
    pub client_udp_port: u16,
    /// The address the TCP connection came from; its UDP datagrams should come from this IP.
    pub peer_ip: IpAddr,
}

/// Why the hub did not admit a client (the connection is closed unanswered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmitError {
    /// The room holds as many clients as it may.
    RoomFull,
    /// The hub holds as many JackTrip clients as it may (no UDP slot left).
    HubFull,
    /// The hub is off or shutting down.
    Unavailable,
    /// The room refuses it for another reason (locked, banned, ...): a short stable name.
    Refused(&'static str),
}

impl AdmitError {
    /// A short stable name for logs and counters.
    pub const fn name(&self) -> &'static str {
        match self {
            AdmitError::RoomFull => "room-full",
            AdmitError::HubFull => "hub-full",
            AdmitError::Unavailable => "hub-unavailable",
            AdmitError::Refused(why) => why,
        }
    }
}

impl fmt::Display for AdmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The hub's admission of JackTrip clients; implemented by the hub worker side.
pub trait Admit: Send + Sync + 'static {
    /// Reserves a slot for `req` and returns the UDP port the client must send to. Called on a
    /// blocking thread; it may wait briefly (for the worker owning the room), not for long.
    fn admit(&self, req: JoinRequest) -> Result<u16, AdmitError>;
}

/// The listener's settings.
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// `--jacktrip-room`: where a client whose name has no `room/` goes.
    pub default_room: Option<String>,
    /// Deadline for the whole hello ([`HELLO_TIMEOUT`] in the server).
    pub hello_timeout: Duration,
    /// Per-address limits ([`LIMITS`] in the server).
    pub limits: LimitsConfig,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        Self {
            default_room: None,
            hello_timeout: HELLO_TIMEOUT,
            limits: LIMITS,
        }
    }
}

/// How one connection ended.
#[derive(Debug)]
enum Failure {
    Handshake(HandshakeError),
    Timeout { got: usize },
    Admit(AdmitError),
    Io(io::Error),
}

/// A bound JackTrip handshake port.
pub struct JackTripListener {
    tcp: TcpListener,
    shared: Arc<Shared>,
}

struct Shared {
    config: ListenerConfig,
    limits: Mutex<Limits>,
    admit: Arc<dyn Admit>,
}

impl JackTripListener {
    /// Binds the TCP port (`addr`'s port 0 picks a free one).
    pub async fn bind(
        addr: SocketAddr,
        config: ListenerConfig,
        admit: Arc<dyn Admit>,
    ) -> io::Result<Self> {
        let tcp = TcpListener::bind(addr).await?;
        let limits = Mutex::new(Limits::new(config.limits));
        Ok(Self {
            tcp,
            shared: Arc::new(Shared {
                config,
                limits,
                admit,
            }),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// Accepts connections until `shutdown` completes; each is handled on its own task.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                () = &mut shutdown => return,
                accepted = self.tcp.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %e, "jacktrip: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let key = AddressKey::of(peer.ip());
            let now = Instant::now();
            let admitted = {
                let mut limits = self.shared.lock_limits();
                limits.prune(now);
                limits.admit(key, now)
            };
            if let Err(refusal) = admitted {
                tracing::debug!(%peer, why = refusal.kind(), "jacktrip: handshake refused");
                drop(stream);
                continue;
            }
            let shared = Arc::clone(&self.shared);
            tokio::spawn(async move {
                shared.serve(stream, peer).await;
                shared.lock_limits().release(key);
            });
        }
    }
}

impl Shared {
    fn lock_limits(&self) -> std::sync::MutexGuard<'_, Limits> {
        self.limits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn serve(&self, mut stream: TcpStream, peer: SocketAddr) {
        match self.handshake(&mut stream, peer).await {
            Ok((hello, port)) => tracing::info!(
                %peer,
                room = %hello.room,
                name = %hello.name,
                client_udp_port = hello.client_udp_port,
                udp_port = port,
                "jacktrip: client admitted"
            ),
            Err(Failure::Handshake(e)) => {
                if let Some(answer) = e.answer() {
                    // Best effort: the client is told why before the close.
                    let _ = stream.write_all(&answer).await;
                }
                tracing::info!(%peer, why = e.name(), "jacktrip: hello refused: {e}");
            }
            Err(Failure::Timeout { got }) => tracing::info!(
                %peer,
                why = "timeout",
                "jacktrip: hello refused: {got} of {HELLO_LEN} bytes within {:?}",
                self.config.hello_timeout
            ),
            Err(Failure::Admit(e)) => {
                tracing::info!(%peer, why = e.name(), "jacktrip: client not admitted")
            }
            Err(Failure::Io(e)) => {
                tracing::debug!(%peer, error = %e, "jacktrip: connection failed")
            }
        }
        let _ = stream.shutdown().await;
    }

    async fn handshake(
        &self,
        stream: &mut TcpStream,
        peer: SocketAddr,
    ) -> Result<(Hello, u16), Failure> {
        let hello = self.read_hello(stream).await?;
        let req = JoinRequest {
            room: hello.room.clone(),
            name: hello.name.clone(),
            client_udp_port: hello.client_udp_port,
            peer_ip: peer.ip().to_canonical(),
        };
        let admit = Arc::clone(&self.admit);
        let port = tokio::task::spawn_blocking(move || admit.admit(req))
            .await
            .map_err(|_| Failure::Admit(AdmitError::Unavailable))?
            .map_err(Failure::Admit)?;
        stream
            .write_all(&handshake::reply(port))
            .await
            .map_err(Failure::Io)?;
        Ok((hello, port))
    }

    async fn read_hello(&self, stream: &mut TcpStream) -> Result<Hello, Failure> {
        let room = self.config.default_room.as_deref();
        // One byte more than a hello, to see a hello that is too long.
        let mut buf = [0u8; HELLO_LEN + 1];
        let mut len = 0;
        let read = async {
            loop {
                let n = stream.read(&mut buf[len..]).await.map_err(Failure::Io)?;
                if n == 0 {
                    return handshake::finish(&buf[..len], room).map_err(Failure::Handshake);
                }
                len += n;
                if let Some(hello) =
                    handshake::parse(&buf[..len], room).map_err(Failure::Handshake)?
                {
                    return Ok(hello);
                }
            }
        };
        match tokio::time::timeout(self.config.hello_timeout, read).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Timeout { got: len }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Admits every request at port 61002 + the number of requests before it, keeping them.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<JoinRequest>>);

    impl Admit for Recorder {
        fn admit(&self, req: JoinRequest) -> Result<u16, AdmitError> {
            let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if req.room == "full" {
                return Err(AdmitError::RoomFull);
            }
            seen.push(req);
            Ok(61_001 + seen.len() as u16)
        }
    }

    async fn start(config: ListenerConfig) -> (SocketAddr, Arc<Recorder>) {
        let recorder = Arc::new(Recorder::default());
        let admit: Arc<dyn Admit> = recorder.clone();
        let listener = JackTripListener::bind("127.0.0.1:0".parse().unwrap(), config, admit)
            .await
            .expect("bind on loopback");
        let addr = listener.local_addr().expect("bound address");
        tokio::spawn(listener.run(std::future::pending()));
        (addr, recorder)
    }

    fn hello(port: i32, name: &str) -> Vec<u8> {
        let mut b = port.to_le_bytes().to_vec();
        b.extend_from_slice(name.as_bytes());
        b.resize(HELLO_LEN, 0);
        b
    }

    /// Sends `pieces` (pausing between them), then reads the answer until the hub closes.
    async fn exchange(addr: SocketAddr, pieces: &[&[u8]]) -> Vec<u8> {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        for piece in pieces {
            s.write_all(piece).await.expect("write");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        s.shutdown().await.expect("end of the hello");
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer));
        match read.await {
            Ok(Ok(_)) => answer,
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset => answer,
            other => panic!("no close within 5 s: {other:?}"),
        }
    }

    #[tokio::test]
    async fn answers_the_slot_port_to_a_hello_in_pieces() {
        let (addr, rec) = start(ListenerConfig::default()).await;
        let h = hello(47_500, "band/Ann");
        let answer = exchange(addr, &[&h[..3], &h[3..40], &h[40..]]).await;
        assert_eq!(answer, 61_002i32.to_le_bytes());
        let seen = rec.0.lock().unwrap().clone();
        let want = JoinRequest {
            room: "band".into(),
            name: "Ann".into(),
            client_udp_port: 47_500,
            peer_ip: "127.0.0.1".parse().unwrap(),
        };
        assert_eq!(seen, vec![want]);
    }

    #[tokio::test]
    async fn default_room_auth_and_refusals() {
        let config = ListenerConfig {
            default_room: Some("choir".into()),
            ..ListenerConfig::default()
        };
        let (addr, rec) = start(config).await;
        assert_eq!(exchange(addr, &[&hello(9, "Bo")]).await, [0x4a, 0xee, 0, 0]);
        // The authenticated variant: JackTrip's "not required", then the close.
        let answer = exchange(addr, &[&65_536i32.to_le_bytes()]).await;
        assert_eq!(answer, 196_608i32.to_le_bytes());
        // Bad hellos and a refused admission: closed without an answer.
        assert_eq!(exchange(addr, &[&hello(0, "r/n")]).await, b"");
        assert_eq!(exchange(addr, &[&hello(9, "bad room/n")]).await, b"");
        assert_eq!(exchange(addr, &[&hello(9, "full/n")]).await, b"");
        assert_eq!(exchange(addr, &[&hello(9, "r/n")[..30]]).await, b"");
        let seen = rec.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 1);
        assert_eq!(
            (seen[0].room.as_str(), seen[0].name.as_str()),
            ("choir", "Bo")
        );
    }

    #[tokio::test]
    async fn a_silent_client_is_closed_at_the_deadline() {
        let config = ListenerConfig {
            hello_timeout: Duration::from_millis(200),
            ..ListenerConfig::default()
        };
        let (addr, _) = start(config).await;
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(&[1, 2]).await.expect("write");
        let t0 = Instant::now();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut rest)).await;
        assert!(matches!(read, Ok(Ok(0))), "{read:?}");
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(150) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn one_address_gets_at_most_six_handshakes_in_a_burst() {
        let (addr, rec) = start(ListenerConfig::default()).await;
        let mut answered = 0;
        for i in 0..8 {
            let answer = exchange(addr, &[&hello(9, &format!("r/n{i}"))]).await;
            answered += usize::from(answer.len() == 4);
        }
        assert_eq!(answered, 6);
        assert_eq!(rec.0.lock().unwrap().len(), 6);
    }
}
