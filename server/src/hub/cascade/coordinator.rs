//! The cascade thread: once a [`ROUND`], for every mix room this hub serves, claims or reads
//! the room's home in the [`Directory`], records the hub's players there, and makes sure the
//! room's worker has a link to the home when the home is another hub (or none when it is this
//! one).
//!
//! It runs apart from the workers because everything it does may block: the store (bounded by
//! its own timeouts) and the link's JackTrip handshake, a TCP exchange with the home bounded
//! by [`CONNECT_TIMEOUT`]. A link whose handshake fails is retried after a [`Backoff`] (1 s,
//! doubling to 16 s). The worker gets the link's bound UDP socket and the home's UDP address as
//! a command and runs it from then on; the worker tells the thread (through the shares) which
//! home each room is linked to, and forgets a link that stays silent.
//!
//! What the directory says is not trusted: a home that is not an `ip:port` with a port is an
//! error for that round, logged, never a panic. Errors are logged at most once a minute
//! ([`Quiet`]), with how many were not; the hub goes on serving its own players meanwhile.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::directory::Directory;
use super::{link_name, Shares};
use crate::hub::jacktrip::handshake::{HELLO_LEN, NAME_LEN};
use crate::hub::lock;
use crate::hub::worker::Command;
use crate::room::RoomId;

/// How often the rooms are checked and the directory refreshed.
pub const ROUND: Duration = Duration::from_millis(500);
/// How long the directory keeps a hub's entries unless refreshed: a vanished home is replaced
/// within this (plus a round).
pub const TTL: Duration = Duration::from_secs(3);
/// Longest wait for the home's handshake (TCP connect, then its answer).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// First and longest wait before retrying a failed link.
pub const BACKOFF_MIN: Duration = Duration::from_secs(1);
pub const BACKOFF_MAX: Duration = Duration::from_secs(16);
/// At most one error line per this long.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// Why a room's home cannot be linked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CascadeError {
    /// The directory's home is not `ip:port` (at most 64 characters of it are kept).
    BadHome(String),
}

impl fmt::Display for CascadeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CascadeError::BadHome(h) => write!(f, "the directory's home {h:?} is not ip:port"),
        }
    }
}

impl std::error::Error for CascadeError {}

/// What a room needs, from its home and its current link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// This hub is the home: no link.
    Home,
    /// Linked to the home already.
    Keep,
    /// Link to this home (replacing any other link).
    Link(SocketAddr),
}

/// Decides what a room needs: `home` as the directory says it, `me` this hub's id, `linked`
/// the home the room's link goes to, if any.
pub fn decide(
    home: &str,
    me: SocketAddr,
    linked: Option<SocketAddr>,
) -> Result<Action, CascadeError> {
    let bad = || CascadeError::BadHome(home.chars().take(64).collect());
    let addr: SocketAddr = home.parse().map_err(|_| bad())?;
    if addr.port() == 0 || addr.ip().is_unspecified() || addr.ip().is_multicast() {
        return Err(bad());
    }
    Ok(if addr == me {
        Action::Home
    } else if linked == Some(addr) {
        Action::Keep
    } else {
        Action::Link(addr)
    })
}

/// When a room may try its link again: after a failure, 1 s, then twice as long each time up to
/// 16 s; a link that worked starts over.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    not_before: Option<Instant>,
    delay: Duration,
}

impl Backoff {
    pub fn ready(&self, now: Instant) -> bool {
        match self.not_before {
            None => true,
            Some(t) => now >= t,
        }
    }

    pub fn failed(&mut self, now: Instant) {
        self.delay = (self.delay * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
        self.not_before = Some(now + self.delay);
    }

    /// A handshake worked: give the worker a round to report the link before another try.
    pub fn tried(&mut self, now: Instant) {
        self.delay = Duration::ZERO;
        self.not_before = Some(now + BACKOFF_MIN);
    }
}

/// At most one log line per [`LOG_EVERY`]; counts the lines it held back.
#[derive(Debug, Default)]
pub struct Quiet {
    last: Option<Instant>,
    held: u64,
}

impl Quiet {
    /// Whether to log now, and how many were held back since the last line.
    pub fn pass(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(t) if now < t + LOG_EVERY => {
                self.held += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.held))
            }
        }
    }
}

/// The JackTrip handshake of a link, as any JackTrip client makes it: binds a UDP socket on
/// `bind`, sends the hello (its port, the name) to the home's TCP `home`, reads the UDP port.
/// Blocks for at most about twice [`CONNECT_TIMEOUT`].
pub fn handshake(
    home: SocketAddr,
    bind: IpAddr,
    name: &str,
) -> io::Result<(UdpSocket, SocketAddr)> {
    if name.len() > NAME_LEN || name.as_bytes().contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("link name {name:?} is longer than {NAME_LEN} bytes"),
        ));
    }
    let udp = UdpSocket::bind(SocketAddr::new(bind, 0))?;
    let port = udp.local_addr()?.port();
    let mut hello = [0u8; HELLO_LEN];
    hello[..4].copy_from_slice(&i32::from(port).to_le_bytes());
    hello[4..4 + name.len()].copy_from_slice(name.as_bytes());
    let mut tcp = TcpStream::connect_timeout(&home, CONNECT_TIMEOUT)?;
    tcp.set_read_timeout(Some(CONNECT_TIMEOUT))?;
    tcp.set_write_timeout(Some(CONNECT_TIMEOUT))?;
    tcp.write_all(&hello)?;
    let mut answer = [0u8; 4];
    tcp.read_exact(&mut answer)?;
    let code = i32::from_le_bytes(answer);
    let udp_port = u16::try_from(code)
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(|| io::Error::other(format!("the home answered {code}, not a port")))?;
    Ok((udp, SocketAddr::new(home.ip(), udp_port)))
}

/// The cascade's settings.
pub struct CascadeConfig {
    pub directory: Box<dyn Directory>,
    /// This hub's id: its JackTrip handshake as other hubs reach it.
    pub advertise: SocketAddr,
    /// Where the links' UDP sockets bind.
    pub bind: IpAddr,
}

/// A worker's command queue, as the thread sees it.
pub(crate) struct WorkerQueue {
    pub tx: mpsc::Sender<Command>,
    pub waker: Arc<mio::Waker>,
}

/// The running thread's state.
pub(crate) struct Coordinator {
    pub config: CascadeConfig,
    pub shares: Shares,
    pub workers: Vec<WorkerQueue>,
    pub stop: Arc<AtomicBool>,
    backoff: HashMap<String, Backoff>,
    served: HashSet<String>,
    quiet: Quiet,
    me: String,
}

impl Coordinator {
    pub fn new(
        config: CascadeConfig,
        shares: Shares,
        workers: Vec<WorkerQueue>,
        stop: Arc<AtomicBool>,
    ) -> Coordinator {
        let me = config.advertise.to_string();
        Coordinator {
            config,
            shares,
            workers,
            stop,
            backoff: HashMap::new(),
            served: HashSet::new(),
            quiet: Quiet::default(),
            me,
        }
    }

    /// Rounds until told to stop; then takes this hub out of the directory.
    pub fn run(mut self) {
        tracing::info!("hub cascade: this hub is {}", self.me);
        while !self.stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            self.round(started);
            while started.elapsed() < ROUND && !self.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        for room in std::mem::take(&mut self.served) {
            let _ = self.config.directory.release(&room, &self.me);
        }
    }

    fn complain(&mut self, now: Instant, what: fmt::Arguments<'_>) {
        if let Some(held) = self.quiet.pass(now) {
            tracing::warn!("hub cascade: {what} ({held} similar lines held back)");
        }
    }

    fn send(&self, worker: usize, command: Command) {
        if let Some(w) = self.workers.get(worker) {
            if w.tx.send(command).is_ok() {
                let _ = w.waker.wake();
            }
        }
    }

    fn round(&mut self, now: Instant) {
        let shares: Vec<_> = lock(&self.shares)
            .iter()
            .filter(|(_, s)| s.mix)
            .map(|(room, s)| (room.clone(), s.clone()))
            .collect();
        let now_served: HashSet<String> = shares.iter().map(|(r, _)| r.clone()).collect();
        for gone in self
            .served
            .difference(&now_served)
            .cloned()
            .collect::<Vec<_>>()
        {
            if let Err(e) = self.config.directory.release(&gone, &self.me) {
                self.complain(now, format_args!("room {gone}: {e}"));
            }
            self.backoff.remove(&gone);
        }
        self.served = now_served;
        for (room, share) in shares {
            let me = self.me.clone();
            let home = match self.config.directory.claim_home(&room, &me, TTL) {
                Ok(home) => home,
                Err(e) => {
                    self.complain(now, format_args!("room {room}: {e}"));
                    continue;
                }
            };
            if let Err(e) = self
                .config
                .directory
                .set_players(&room, &me, &share.players, TTL)
            {
                self.complain(now, format_args!("room {room}: {e}"));
            }
            let id = RoomId::new(&room, None);
            match decide(&home, self.config.advertise, share.link) {
                Err(e) => self.complain(now, format_args!("room {room}: {e}")),
                Ok(Action::Home) => {
                    if share.link.is_some() {
                        tracing::info!("hub cascade: room {room}: this hub is its home now");
                        self.send(share.worker, Command::Unlink { room: id });
                    }
                }
                Ok(Action::Keep) => {}
                Ok(Action::Link(home)) => {
                    let backoff = self.backoff.entry(room.clone()).or_default();
                    if !backoff.ready(now) {
                        continue;
                    }
                    let name = link_name(&room, &me);
                    match handshake(home, self.config.bind, &name) {
                        Ok((socket, to)) => {
                            backoff.tried(now);
                            tracing::info!(
                                "hub cascade: room {room}: linking to its home {home} (UDP {to})"
                            );
                            self.send(
                                share.worker,
                                Command::Link {
                                    room: id,
                                    home,
                                    to,
                                    socket,
                                },
                            );
                        }
                        Err(e) => {
                            backoff.failed(now);
                            self.complain(
                                now,
                                format_args!("room {room}: no link to its home {home}: {e}"),
                            );
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn a_room_links_to_another_home_keeps_its_link_and_drops_it_when_home() {
        let me = addr("10.0.0.1:4464");
        let other = addr("10.0.0.2:4464");
        assert_eq!(decide("10.0.0.1:4464", me, None), Ok(Action::Home));
        assert_eq!(decide("10.0.0.1:4464", me, Some(other)), Ok(Action::Home));
        assert_eq!(decide("10.0.0.2:4464", me, None), Ok(Action::Link(other)));
        assert_eq!(decide("10.0.0.2:4464", me, Some(other)), Ok(Action::Keep));
        // The home moved: the old link goes for a new one.
        let third = addr("10.0.0.3:4464");
        assert_eq!(
            decide("10.0.0.3:4464", me, Some(other)),
            Ok(Action::Link(third))
        );
    }

    #[test]
    fn a_hostile_home_is_an_error_not_a_panic() {
        let me = addr("10.0.0.1:4464");
        let long = "x".repeat(10_000);
        for bad in [
            "",
            "garbage",
            "10.0.0.2",
            "10.0.0.2:0",
            "0.0.0.0:4464",
            "224.0.0.1:4464",
            "10.0.0.2:99999",
            "[::1]:-1",
            "\u{0}\u{ffff}",
            &long,
        ] {
            let e = decide(bad, me, None).expect_err(bad);
            let CascadeError::BadHome(kept) = &e;
            assert!(kept.chars().count() <= 64);
            assert!(e.to_string().contains("not ip:port"));
        }
    }

    #[test]
    fn backoff_doubles_to_sixteen_seconds_and_starts_over() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut b = Backoff::default();
        assert!(b.ready(t0));
        let mut waits = Vec::new();
        let mut now = t0;
        for _ in 0..7 {
            b.failed(now);
            let mut waited = 0;
            while !b.ready(now) {
                now += s;
                waited += 1;
            }
            waits.push(waited);
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 16, 16]);
        b.tried(now);
        assert!(!b.ready(now));
        assert!(b.ready(now + s));
        b.failed(now);
        assert!(b.ready(now + s), "a link that worked starts over at 1 s");
    }

    #[test]
    fn errors_are_logged_once_a_minute_with_the_count_held_back() {
        let t0 = Instant::now();
        let mut q = Quiet::default();
        assert_eq!(q.pass(t0), Some(0));
        for k in 1..=5 {
            assert_eq!(q.pass(t0 + Duration::from_secs(k)), None);
        }
        assert_eq!(q.pass(t0 + LOG_EVERY), Some(5));
        assert_eq!(q.pass(t0 + LOG_EVERY), None);
    }

    #[test]
    fn a_handshake_with_nobody_fails_within_its_bound() {
        // A port nobody listens on: refused at once.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let home = l.local_addr().unwrap();
        drop(l);
        let t0 = Instant::now();
        let r = handshake(home, [127, 0, 0, 1].into(), "band/~hub-x");
        assert!(r.is_err());
        assert!(t0.elapsed() < CONNECT_TIMEOUT * 2);
        let long = format!("band/{}", "n".repeat(64));
        let r = handshake(home, [127, 0, 0, 1].into(), &long);
        assert_eq!(
            r.map(|_| ()).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn a_handshake_reads_the_homes_udp_port_and_refuses_a_code() {
        for (answer, ok) in [(61_002i32, true), (196_608, false), (0, false)] {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let home = l.local_addr().unwrap();
            let server = std::thread::spawn(move || {
                let (mut s, _) = l.accept().unwrap();
                let mut hello = [0u8; HELLO_LEN];
                s.read_exact(&mut hello).unwrap();
                s.write_all(&answer.to_le_bytes()).unwrap();
                hello
            });
            let r = handshake(home, [127, 0, 0, 1].into(), "band/~hub-x");
            let hello = server.join().unwrap();
            assert_eq!(&hello[4..15], b"band/~hub-x");
            assert!(hello[15..].iter().all(|&b| b == 0));
            match r {
                Ok((udp, to)) => {
                    assert!(ok);
                    assert_eq!(to, SocketAddr::new(home.ip(), 61_002));
                    let port = udp.local_addr().unwrap().port();
                    assert_eq!(&hello[..4], &i32::from(port).to_le_bytes());
                }
                Err(_) => assert!(!ok, "answer {answer}"),
            }
        }
    }
}
