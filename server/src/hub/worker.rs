//! One hub worker thread: its UDP socket, the browser links of the rooms placed on it, and
//! those rooms' media, driven from the socket, a clock and the commands of the WebSocket side.
//!
//! The loop waits (mio) until a datagram arrives, a command is woken in, or the earliest of the
//! links' timeouts and the rooms' media deadlines comes; then it hands each datagram to the link
//! it belongs to (by source address; a new address only through an ICE check for that link's
//! credentials, after which every address that passed one stays the link's: a browser checks
//! its backup candidate pairs now and then while its audio keeps coming from the chosen one),
//! each message of a link's channel to its room's media, and each message the media sends to
//! the listener's link. Everything a room needs lives on this one thread, so nothing is locked.
//! Per datagram, the worker itself copies into buffers it made at start; str0m hands messages
//! over in owned buffers of its own.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use tokio::sync::oneshot;

use super::cascade::Shares;
use super::controller::{self, layer_notice, Controller, Decision, Report};
use super::media::layers::Layer;
use super::media::{ClientCounters, ClientId, ClientKind, MediaRoom, Mode, CASCADE};
use super::priority::{self, Scheduling};
use super::rtc::{Link, Step};
use super::stun;
use super::{lock, HubError, HubEvent, PersonalMix};
use crate::room::RoomId;
use tutti_core::train;

mod addresses;
mod cascade;
mod native;

use addresses::Addresses;
use cascade::Uplink;
pub(crate) use native::Admitted;
use native::Native;

const SOCKET: Token = Token(0);
const WAKER: Token = Token(1);
/// JackTrip client `i`'s socket is registered as `Token(FIRST_NATIVE + i)`.
const FIRST_NATIVE: usize = 2;
/// Link `k` to a home hub is `Token(FIRST_LINK + k)` (above any JackTrip client's token).
const FIRST_LINK: usize = 1 << 24;
/// Longest wait with nothing due: commands wake the loop anyway; this bounds how stale the
/// published figures get.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Largest datagram read; anything a browser sends the hub is far smaller.
const DATAGRAM_BYTES: usize = 2048;
/// Receive and send buffer asked for the worker's socket.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// A link that has not opened its channel this long after the answer is given up.
const OPEN_DEADLINE: Duration = Duration::from_secs(20);
/// Time between two packet trains to a listener that takes less than the richest layer.
const TRAIN_EVERY: Duration = Duration::from_secs(1);
/// Frames per block the layer controllers assume of a sender's packets as sent: the app's
/// default block, one quantum (a sender of smaller blocks needs more; what its listeners then
/// report corrects the choice).
const SENT_FRAMES: usize = tutti_core::engine::QUANTUM;

/// A request from the WebSocket side.
pub(crate) enum Command {
    Offer {
        room: RoomId,
        member: String,
        stream: u16,
        mode: Mode,
        sdp: String,
        /// The member's own packets come back to it (forward mode).
        echo: bool,
        reply: oneshot::Sender<Result<String, HubError>>,
    },
    Leave {
        room: RoomId,
        member: String,
    },
    Mode {
        room: RoomId,
        mode: Mode,
    },
    Mix {
        room: RoomId,
        member: String,
        mix: PersonalMix,
    },
    /// A browser listener's report of what reaches it from the hub.
    Reception {
        room: RoomId,
        member: String,
        report: Report,
    },
    /// A JackTrip client admitted into a room of this worker, with its UDP socket.
    JackTrip(Admitted),
    /// The room's link to its home hub `home` (handshake done): the bound socket and the
    /// home's UDP address for it.
    Link {
        room: RoomId,
        home: SocketAddr,
        to: SocketAddr,
        socket: std::net::UdpSocket,
    },
    /// The room no longer links to a home hub (this hub is its home now).
    Unlink {
        room: RoomId,
    },
    Stop,
}

/// Figures a worker publishes (relaxed atomics; read by logs and the status endpoint).
#[derive(Default)]
pub struct WorkerStats {
    pub(crate) clients: AtomicU64,
    rooms: AtomicU64,
    datagrams_in: AtomicU64,
    datagrams_out: AtomicU64,
    /// Datagrams no link claimed.
    unknown_source: AtomicU64,
    /// Datagrams the socket would not take.
    send_failed: AtomicU64,
    /// Messages not written because a link's SCTP buffer was full.
    channel_full: AtomicU64,
    /// Time spent working (not waiting), ns.
    busy_ns: AtomicU64,
    /// Media ticks run late, and the worst lateness (the thread fell behind).
    late_ticks: AtomicU64,
    max_tick_lateness_us: AtomicU64,
    /// The real-time priority the thread runs at (0: normal scheduling).
    realtime_priority: AtomicU64,
}

/// A copy of [`WorkerStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub clients: u64,
    pub rooms: u64,
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    pub unknown_source: u64,
    pub send_failed: u64,
    pub channel_full: u64,
    pub busy_ns: u64,
    pub late_ticks: u64,
    pub max_tick_lateness_us: u64,
    pub realtime_priority: u64,
}

impl WorkerStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            clients: r(&self.clients),
            rooms: r(&self.rooms),
            datagrams_in: r(&self.datagrams_in),
            datagrams_out: r(&self.datagrams_out),
            unknown_source: r(&self.unknown_source),
            send_failed: r(&self.send_failed),
            channel_full: r(&self.channel_full),
            busy_ns: r(&self.busy_ns),
            late_ticks: r(&self.late_ticks),
            max_tick_lateness_us: r(&self.max_tick_lateness_us),
            realtime_priority: r(&self.realtime_priority),
        }
    }
}

impl StatsSnapshot {
    /// A log line's worth of what went wrong since `before` (datagrams the socket would not
    /// take, messages a full channel refused, late media ticks, datagrams no link claimed),
    /// with the worker's load over `seconds`; `None` when nothing went wrong.
    pub fn trouble_since(&self, before: &StatsSnapshot, seconds: f64) -> Option<String> {
        let d = |now: u64, was: u64| now.saturating_sub(was);
        let send_failed = d(self.send_failed, before.send_failed);
        let channel_full = d(self.channel_full, before.channel_full);
        let late_ticks = d(self.late_ticks, before.late_ticks);
        let unknown = d(self.unknown_source, before.unknown_source);
        if send_failed + channel_full + late_ticks + unknown == 0 {
            return None;
        }
        let busy_pct = d(self.busy_ns, before.busy_ns) as f64 / (seconds * 1e7);
        Some(format!(
            "clients={} send_failed=+{send_failed} channel_full=+{channel_full} \
             late_ticks=+{late_ticks} unknown_source=+{unknown} worst_tick_lateness_us={} \
             busy={busy_pct:.0}%",
            self.clients, self.max_tick_lateness_us
        ))
    }
}

/// The figures of several workers as one: counts and times add up; the worst tick lateness and
/// the highest priority are the largest of any.
impl<'a> std::iter::Sum<&'a StatsSnapshot> for StatsSnapshot {
    fn sum<I: Iterator<Item = &'a StatsSnapshot>>(iter: I) -> StatsSnapshot {
        iter.fold(StatsSnapshot::default(), |a, s| StatsSnapshot {
            clients: a.clients + s.clients,
            rooms: a.rooms + s.rooms,
            datagrams_in: a.datagrams_in + s.datagrams_in,
            datagrams_out: a.datagrams_out + s.datagrams_out,
            unknown_source: a.unknown_source + s.unknown_source,
            send_failed: a.send_failed + s.send_failed,
            channel_full: a.channel_full + s.channel_full,
            busy_ns: a.busy_ns + s.busy_ns,
            late_ticks: a.late_ticks + s.late_ticks,
            max_tick_lateness_us: a.max_tick_lateness_us.max(s.max_tick_lateness_us),
            realtime_priority: a.realtime_priority.max(s.realtime_priority),
        })
    }
}

/// A media client's drops by reason, for the departure log lines.
fn dropped(c: &ClientCounters) -> String {
    format!(
        "malformed={} wrong_rate={} wrong_format={} flood={} spoofed={}",
        c.malformed, c.wrong_rate, c.wrong_format, c.flood, c.spoofed
    )
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// A started worker, for the hub's handle.
pub(crate) struct Spawned {
    pub tx: mpsc::Sender<Command>,
    pub waker: Arc<Waker>,
    pub stats: Arc<WorkerStats>,
    /// The address browsers send to.
    pub addr: SocketAddr,
    pub thread: JoinHandle<()>,
}

/// Binds the worker's socket on `bind` and starts its thread; browsers are told `advertise`.
pub(crate) fn spawn(
    index: usize,
    bind: SocketAddr,
    config: &super::HubConfig,
    emptied: Arc<Mutex<Vec<RoomId>>>,
    shares: Shares,
    events: Option<tokio::sync::mpsc::UnboundedSender<HubEvent>>,
) -> io::Result<Spawned> {
    let mut socket = bind_socket(bind)?;
    let addr = SocketAddr::new(config.advertise, socket.local_addr()?.port());
    let priority = config.priority;
    let poll = Poll::new()?;
    poll.registry()
        .register(&mut socket, SOCKET, Interest::READABLE)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let stats = Arc::new(WorkerStats::default());
    let (tx, rx) = mpsc::channel();
    let mut worker = Worker {
        index,
        layer_policy: config.layer_policy,
        shares,
        uplinks: Vec::new(),
        free_uplinks: Vec::new(),
        poll,
        socket,
        local: addr,
        commands: rx,
        links: Vec::new(),
        free: Vec::new(),
        addresses: Addresses::default(),
        rooms: HashMap::new(),
        natives: Vec::new(),
        free_natives: Vec::new(),
        events,
        stats: stats.clone(),
        emptied,
        epoch: Instant::now(),
        buf: vec![0; DATAGRAM_BYTES],
        dirty: Vec::with_capacity(1024),
    };
    let thread = thread::Builder::new()
        .name(format!("hub-{index}"))
        .spawn(move || {
            worker.schedule(index, priority);
            worker.run();
        })?;
    Ok(Spawned {
        tx,
        waker,
        stats,
        addr,
        thread,
    })
}

/// The worker's socket: non-blocking, with buffers for bursts of a busy room (the system
/// clamps the size to its limits).
fn bind_socket(bind: SocketAddr) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(bind),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    socket.set_nonblocking(true)?;
    socket.bind(&bind.into())?;
    Ok(UdpSocket::from_std(socket.into()))
}

/// One browser client of a room on this worker.
struct Client {
    link: Link,
    room: RoomId,
    member: String,
    media: ClientId,
    /// Which layer it takes (of the others in forward mode, of its mix in mix mode), from its
    /// reports.
    controller: Controller,
    /// When its next packet train is due (sent while it takes less than the richest layer),
    /// and that train's number.
    next_train: Instant,
    train: u32,
    /// Given up if its channel is not open by then.
    open_by: Instant,
    /// Already in the worker's list of links to drain after the rooms' poll.
    queued: bool,
    /// Its messages and the others' packets in them at its last report: how well its bundles
    /// gathered packets since then is what its controller figures needs with.
    sent_at_report: (u64, u64),
}

/// Who a media client is on this worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// A browser: the index of its link.
    Link(usize),
    /// A JackTrip client: the index of its session.
    Native(usize),
}

/// A room on this worker: its media, and which link or JackTrip client each media client and
/// member is.
struct HubRoom {
    media: MediaRoom,
    /// Browser members' links.
    by_member: HashMap<String, usize>,
    by_media: HashMap<ClientId, Target>,
    /// Its JackTrip clients (admitted, whether or not their audio has begun).
    natives: usize,
    /// Its late media ticks already added to the worker's figure.
    late_published: u64,
    /// Its link to the room's home hub, when it is part of a room larger than this hub.
    uplink: Option<usize>,
}

impl HubRoom {
    fn new(mode: Mode, now_us: u64) -> HubRoom {
        HubRoom {
            media: MediaRoom::new(mode, now_us),
            by_member: HashMap::new(),
            by_media: HashMap::new(),
            natives: 0,
            late_published: 0,
            uplink: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.by_member.is_empty() && self.natives == 0
    }
}

struct Worker {
    index: usize,
    /// How each listener's controller picks its layer.
    layer_policy: controller::Policy,
    /// What this worker carries of each public room, for the cascade thread.
    shares: Shares,
    /// Links to home hubs, by index (their socket's token less [`FIRST_LINK`]).
    uplinks: Vec<Option<Uplink>>,
    free_uplinks: Vec<usize>,
    poll: Poll,
    socket: UdpSocket,
    /// The address browsers send to (the links' local candidate).
    local: SocketAddr,
    commands: mpsc::Receiver<Command>,
    links: Vec<Option<Client>>,
    free: Vec<usize>,
    /// Which link each address and ICE username fragment is.
    addresses: Addresses,
    rooms: HashMap<RoomId, HubRoom>,
    /// JackTrip clients, by index (their socket's token less [`FIRST_NATIVE`]).
    natives: Vec<Option<Native>>,
    free_natives: Vec<usize>,
    /// Where the rooms hear of JackTrip clients that ended.
    events: Option<tokio::sync::mpsc::UnboundedSender<HubEvent>>,
    stats: Arc<WorkerStats>,
    emptied: Arc<Mutex<Vec<RoomId>>>,
    epoch: Instant,
    buf: Vec<u8>,
    /// Links written to by a room's media, to be drained.
    dirty: Vec<usize>,
}

impl Worker {
    /// Asks for the configured real-time scheduling for this thread; says once what it got.
    fn schedule(&self, index: usize, priority: u8) {
        match priority::promote_current(priority) {
            Scheduling::Normal => tracing::info!("hub worker {index}: normal scheduling"),
            Scheduling::Realtime(p) => {
                self.stats
                    .realtime_priority
                    .store(u64::from(p), Ordering::Relaxed);
                tracing::info!("hub worker {index}: real-time scheduling (SCHED_FIFO {p})");
            }
            Scheduling::Refused(p, why) => tracing::warn!(
                "hub worker {index}: real-time priority {p} refused ({why}); normal scheduling"
            ),
        }
    }

    fn run(&mut self) {
        let mut events = Events::with_capacity(64);
        loop {
            let wait = self.next_wake().saturating_duration_since(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!("hub worker stopped: {e}");
                    return;
                }
            }
            let started = Instant::now();
            for event in events.iter() {
                match event.token() {
                    SOCKET => self.read_socket(),
                    Token(t) if t >= FIRST_LINK => self.read_uplink(t - FIRST_LINK),
                    Token(t) if t >= FIRST_NATIVE => self.read_native(t - FIRST_NATIVE),
                    _ => {}
                }
            }
            if !self.commands() {
                return;
            }
            self.tick_natives();
            self.tick_uplinks();
            self.tick_links();
            self.poll_rooms();
            self.send_trains();
            self.reap();
            self.stats
                .busy_ns
                .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Makes a socket handed over by another thread non-blocking and registers it for reading
    /// under `token` (JackTrip clients' and links' sockets alike).
    fn register_udp(&self, socket: std::net::UdpSocket, token: usize) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        let mut socket = UdpSocket::from_std(socket);
        self.poll
            .registry()
            .register(&mut socket, Token(token), Interest::READABLE)?;
        Ok(socket)
    }

    fn now_us(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_micros() as u64
    }

    /// The earliest time anything is due.
    fn next_wake(&self) -> Instant {
        let now = Instant::now();
        let mut next = now + MAX_WAIT;
        for c in self.links.iter().flatten() {
            next = next.min(c.link.next());
        }
        let deadlines = self
            .rooms
            .values()
            .map(|r| r.media.next_deadline())
            .chain(self.natives.iter().flatten().map(Native::deadline));
        for deadline in deadlines {
            if let Some(at) = self.epoch.checked_add(Duration::from_micros(deadline)) {
                next = next.min(at);
            }
        }
        next.max(now)
    }

    /// Reads every datagram waiting on the socket.
    fn read_socket(&mut self) {
        loop {
            let (n, source) = match self.socket.recv_from(&mut self.buf) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            bump(&self.stats.datagrams_in);
            let now = Instant::now();
            let bytes = &self.buf[..n];
            let found = match self.addresses.link_of(source) {
                Some(i) => Some(i),
                // A new address: only an ICE check for a link's credentials is let in, and
                // only that one link is asked (see `addresses`).
                None => stun::binding_request_ufrag(bytes)
                    .and_then(|ufrag| self.addresses.link_of_ufrag(ufrag))
                    .filter(|&i| {
                        self.links[i]
                            .as_ref()
                            .is_some_and(|c| c.link.accepts(source, self.local, bytes, now))
                    }),
            };
            let Some(i) = found else {
                bump(&self.stats.unknown_source);
                continue;
            };
            let Some(client) = self.links[i].as_mut() else {
                continue;
            };
            client.link.receive(source, self.local, bytes, now);
            self.addresses.learn(i, source);
            self.drain(i, now);
        }
    }

    /// Runs a link's output: datagrams to the socket, channel messages to its room's media.
    fn drain(&mut self, i: usize, now: Instant) {
        let now_us = self.now_us(now);
        let Some(client) = self.links[i].as_mut() else {
            return;
        };
        let room = self.rooms.get_mut(&client.room);
        let mut room = room;
        loop {
            match client.link.step() {
                Step::Transmit(to, bytes) => match self.socket.send_to(bytes, to) {
                    Ok(_) => bump(&self.stats.datagrams_out),
                    Err(_) => bump(&self.stats.send_failed),
                },
                Step::Message(bytes) => {
                    if let Some(room) = room.as_mut() {
                        room.media.receive(client.media, bytes, now_us);
                    }
                }
                Step::Idle(_) | Step::Closed => return,
            }
        }
    }

    /// Ticks the links whose timeouts have come.
    fn tick_links(&mut self) {
        let now = Instant::now();
        for i in 0..self.links.len() {
            let due = match &mut self.links[i] {
                Some(c) if c.link.next() <= now => {
                    c.link.tick(now);
                    true
                }
                _ => false,
            };
            if due {
                self.drain(i, now);
            }
        }
    }

    /// Sends a packet train ([`tutti_core::train`]) to each listener that takes less than the
    /// richest layer (of the others' streams in forward mode, of its mix in mix mode) and is
    /// due one: what it measures of them tells its
    /// controller whether a richer layer fits, without trying one. On the way, each link's send
    /// bound follows its rate ([`super::rtc::Link::rebound`]).
    fn send_trains(&mut self) {
        let now = Instant::now();
        let mut message = [0u8; train::TRAIN_BYTES];
        for i in 0..self.links.len() {
            let Some(c) = self.links[i].as_mut() else {
                continue;
            };
            // The cheap checks first: this runs at every wake of the worker.
            c.link.rebound(now);
            if now < c.next_train || c.controller.layer() == Layer::AsSent || !c.link.open() {
                continue;
            }
            c.next_train = now + TRAIN_EVERY;
            c.train = c.train.wrapping_add(1);
            for index in 0..train::TRAIN_MESSAGES {
                if train::write(index, c.train, &mut message).is_some() && !c.link.send(&message) {
                    break;
                }
            }
            self.drain(i, now);
        }
    }

    /// Runs each room's media that has something due, then sends what it wrote.
    fn poll_rooms(&mut self) {
        let now = Instant::now();
        let now_us = self.now_us(now);
        let links = &mut self.links;
        let natives = &mut self.natives;
        let uplinks = &mut self.uplinks;
        let dirty = &mut self.dirty;
        let stats = &self.stats;
        for room in self.rooms.values_mut() {
            if room.media.next_deadline() > now_us {
                continue;
            }
            let by_media = &room.by_media;
            let uplink = room.uplink;
            room.media.poll(now_us, &mut |to, bytes| {
                if to == CASCADE {
                    if let Some(u) = uplink.and_then(|k| uplinks.get_mut(k)?.as_mut()) {
                        if u.send(bytes) {
                            bump(&stats.datagrams_out);
                        } else {
                            bump(&stats.send_failed);
                        }
                    }
                    return;
                }
                let i = match by_media.get(&to) {
                    Some(&Target::Link(i)) => i,
                    Some(&Target::Native(j)) => {
                        if let Some(n) = natives[j].as_mut() {
                            if n.send(bytes) {
                                bump(&stats.datagrams_out);
                            } else {
                                bump(&stats.send_failed);
                            }
                        }
                        return;
                    }
                    None => return,
                };
                if let Some(c) = links[i].as_mut() {
                    if c.link.send(bytes) {
                        if !c.queued {
                            c.queued = true;
                            dirty.push(i);
                        }
                    } else if c.link.open() {
                        bump(&stats.channel_full);
                    }
                }
            });
            // The worker's figure is the sum over its rooms, past and present: each room adds
            // what it counted since it last did.
            let counters = room.media.room_counters();
            stats.late_ticks.fetch_add(
                counters.late_ticks.saturating_sub(room.late_published),
                Ordering::Relaxed,
            );
            room.late_published = counters.late_ticks;
            stats
                .max_tick_lateness_us
                .fetch_max(counters.max_tick_lateness_us, Ordering::Relaxed);
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        for &i in &dirty {
            if let Some(c) = self.links[i].as_mut() {
                c.queued = false;
            }
            self.drain(i, now);
        }
        dirty.clear();
        self.dirty = dirty;
    }

    /// Handles the commands waiting; false when told to stop.
    fn commands(&mut self) -> bool {
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Offer {
                    room,
                    member,
                    stream,
                    mode,
                    sdp,
                    echo,
                    reply,
                } => {
                    let answer = self.offer(room, member, stream, mode, &sdp, echo);
                    let _ = reply.send(answer);
                }
                Command::Leave { room, member } => self.leave(&room, &member),
                Command::Mode { room, mode } => {
                    let now_us = self.now_us(Instant::now());
                    if let Some(r) = self.rooms.get_mut(&room) {
                        r.media.set_mode(mode, now_us);
                    }
                    if mode != Mode::Mix {
                        self.unlink(&room, "not-mixed");
                    }
                    self.report(&room);
                    // A listener's layer holds across the switch; what it takes is not the same
                    // number of streams.
                    self.senders_changed(&room);
                }
                Command::Mix { room, member, mix } => self.mix(&room, &member, &mix),
                Command::Reception {
                    room,
                    member,
                    report,
                } => self.reception(&room, &member, &report),
                Command::JackTrip(admitted) => self.admit_native(admitted),
                Command::Link {
                    room,
                    home,
                    to,
                    socket,
                } => self.link(room, home, to, socket),
                Command::Unlink { room } => self.unlink(&room, "home-here"),
                Command::Stop => {
                    // The homes hear the goodbye now rather than after their 10 s timeout.
                    self.unlink_all();
                    return false;
                }
            }
        }
        true
    }

    fn offer(
        &mut self,
        room_id: RoomId,
        member: String,
        stream: u16,
        mode: Mode,
        sdp: &str,
        echo: bool,
    ) -> Result<String, HubError> {
        self.leave(&room_id, &member);
        let now = Instant::now();
        let now_us = self.now_us(now);
        let (link, answer) =
            Link::accept(sdp, self.local, now).map_err(|e| HubError::Offer(e.message()))?;
        let room = self
            .rooms
            .entry(room_id.clone())
            .or_insert_with(|| HubRoom::new(mode, now_us));
        let media = match room.media.add_client(stream, ClientKind::Browser, now_us) {
            Ok(id) => {
                room.media.set_echo(id, echo);
                id
            }
            Err(e) => {
                if room.is_empty() {
                    self.rooms.remove(&room_id);
                }
                return Err(HubError::Refused(format!(
                    "The hub's room refused this member: {e:?}."
                )));
            }
        };
        let senders = streams_taken(&room.media);
        let client = Client {
            link,
            room: room_id,
            member: member.clone(),
            media,
            controller: Controller::new(self.layer_policy, senders, SENT_FRAMES, now_us),
            next_train: now,
            train: 0,
            open_by: now + OPEN_DEADLINE,
            queued: false,
            sent_at_report: (0, 0),
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.links[i] = Some(client);
                i
            }
            None => {
                self.links.push(Some(client));
                self.links.len() - 1
            }
        };
        room.by_member.insert(member, i);
        room.by_media.insert(media, Target::Link(i));
        if let Some(c) = self.links[i].as_ref() {
            self.addresses.add_link(i, c.link.ufrag());
        }
        self.publish_counts();
        if let Some(c) = self.links[i].as_ref() {
            let room = c.room.clone();
            self.report(&room);
            self.senders_changed(&room);
        }
        self.drain(i, now);
        Ok(answer)
    }

    fn leave(&mut self, room_id: &RoomId, member: &str) {
        let Some(&i) = self
            .rooms
            .get(room_id)
            .and_then(|r| r.by_member.get(member))
        else {
            return;
        };
        self.remove(i);
    }

    /// Ends link `i`: its media client, its address, and the room when it was the last.
    fn remove(&mut self, i: usize) {
        let Some(mut client) = self.links[i].take() else {
            return;
        };
        client.link.close();
        self.drain_closed(&mut client);
        self.addresses.remove_link(i, client.link.ufrag());
        if let Some(room) = self.rooms.get_mut(&client.room) {
            if let Some(c) = room.media.client_counters(client.media) {
                tracing::info!(
                    "hub leave room={} peer={} received={} accepted={} dropped: {}; \
                     forwarded={} sent={} overflow={} send_full={} late={} concealed={}",
                    client.room,
                    crate::log::short_peer(&client.member),
                    c.received,
                    c.accepted,
                    dropped(&c),
                    c.forwarded,
                    c.sent,
                    c.overflow,
                    client.link.send_full,
                    c.late,
                    c.concealed,
                );
            }
            room.media.remove_client(client.media);
            room.by_media.remove(&client.media);
            if room.by_member.get(&client.member) == Some(&i) {
                room.by_member.remove(&client.member);
            }
        }
        self.forget_if_empty(&client.room);
        self.report(&client.room);
        self.senders_changed(&client.room);
        self.free.push(i);
        self.publish_counts();
    }

    /// Sends whatever a closing link still has (its goodbye to the browser).
    fn drain_closed(&mut self, client: &mut Client) {
        while let Step::Transmit(to, bytes) = client.link.step() {
            let _ = self.socket.send_to(bytes, to);
        }
    }

    /// Removes links that closed or never opened their channel.
    fn reap(&mut self) {
        let now = Instant::now();
        for i in 0..self.links.len() {
            let over = self.links[i]
                .as_ref()
                .is_some_and(|c| c.link.closed() || (!c.link.open() && now > c.open_by));
            if over {
                self.remove(i);
            }
        }
    }

    fn mix(&mut self, room_id: &RoomId, member: &str, mix: &PersonalMix) {
        let Some(room) = self.rooms.get_mut(room_id) else {
            return;
        };
        let Some(&i) = room.by_member.get(member) else {
            return;
        };
        let Some(listener) = self.links[i].as_ref().map(|c| c.media) else {
            return;
        };
        if let Some(gain) = mix.master {
            let _ = room.media.set_master(listener, gain);
        }
        for s in &mix.strips {
            let _ = room
                .media
                .set_strip(listener, s.stream, s.gain, s.pan, s.mute, s.solo);
        }
    }

    /// A listener's report: its controller may change the layer it takes.
    fn reception(&mut self, room_id: &RoomId, member: &str, report: &Report) {
        let Some(&i) = self
            .rooms
            .get(room_id)
            .and_then(|r| r.by_member.get(member))
        else {
            return;
        };
        let now_us = self.now_us(Instant::now());
        let Some(c) = self.links[i].as_mut() else {
            return;
        };
        let sent = self
            .rooms
            .get(room_id)
            .and_then(|r| r.media.client_counters(c.media))
            .map(|k| (k.sent, k.sent_entries));
        if let Some((messages, packets)) = sent {
            let (m0, p0) = c.sent_at_report;
            let (dm, dp) = (messages.saturating_sub(m0), packets.saturating_sub(p0));
            if dm > 0 && dp > 0 {
                c.controller.packing(dp as f64 / dm as f64);
            }
            c.sent_at_report = (messages, packets);
        }
        let decision = c.controller.report(report, now_us);
        if let Some(d) = decision {
            self.apply_layer(i, d);
        }
    }

    /// The number of streams each listener in room `id` takes changed (a sender came or went,
    /// or the mode changed): every listener's controller re-checks.
    fn senders_changed(&mut self, room_id: &RoomId) {
        let Some(room) = self.rooms.get(room_id) else {
            return;
        };
        let others = streams_taken(&room.media);
        let links: Vec<usize> = room.by_member.values().copied().collect();
        let now_us = self.now_us(Instant::now());
        for i in links {
            let decision = self.links[i]
                .as_mut()
                .and_then(|c| c.controller.senders(others, now_us));
            if let Some(d) = decision {
                self.apply_layer(i, d);
            }
        }
    }

    /// Makes link `i`'s listener take the decided layer, logs why and tells the member.
    fn apply_layer(&mut self, i: usize, d: Decision) {
        let Some(c) = self.links[i].as_ref() else {
            return;
        };
        let Some(room) = self.rooms.get_mut(&c.room) else {
            return;
        };
        let reason = d.reason.to_string();
        if let Err(e) = room.media.set_layer(c.media, d.layer) {
            tracing::warn!(
                "hub layer room={} peer={} layer={} refused: {e}",
                c.room,
                crate::log::short_peer(&c.member),
                d.layer.name()
            );
            return;
        }
        tracing::info!(
            "hub layer room={} peer={} layer={}: {reason}",
            c.room,
            crate::log::short_peer(&c.member),
            d.layer.name()
        );
        if let Some(events) = &self.events {
            let _ = events.send(HubEvent::Layer {
                room: c.room.clone(),
                member: c.member.clone(),
                notice: layer_notice(d.layer, &reason),
            });
        }
    }

    /// Forgets room `id` once it has neither browsers nor JackTrip clients.
    fn forget_if_empty(&mut self, id: &RoomId) {
        if self.rooms.get(id).is_some_and(HubRoom::is_empty) {
            self.unlink(id, "room-empty");
            self.rooms.remove(id);
            lock(&self.emptied).push(id.clone());
        }
    }

    fn publish_counts(&self) {
        let clients =
            (self.links.iter().flatten().count() + self.natives.iter().flatten().count()) as u64;
        self.stats.clients.store(clients, Ordering::Relaxed);
        self.stats
            .rooms
            .store(self.rooms.len() as u64, Ordering::Relaxed);
    }
}

/// The streams each browser listener of `media` takes, whose needs its controller adds up:
/// every other client's in forward mode, its own mix alone in mix mode.
fn streams_taken(media: &MediaRoom) -> usize {
    match media.mode() {
        Mode::Forward => media.clients().saturating_sub(1),
        Mode::Mix => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::StatsSnapshot;

    #[test]
    fn workers_sum_their_counts_and_keep_the_worst_lateness() {
        let a = StatsSnapshot {
            clients: 3,
            datagrams_in: 100,
            channel_full: 2,
            busy_ns: 10,
            max_tick_lateness_us: 700,
            realtime_priority: 10,
            ..StatsSnapshot::default()
        };
        let b = StatsSnapshot {
            clients: 4,
            datagrams_in: 50,
            late_ticks: 1,
            busy_ns: 5,
            max_tick_lateness_us: 300,
            ..StatsSnapshot::default()
        };
        let total: StatsSnapshot = [a, b].iter().sum();
        assert_eq!(
            total,
            StatsSnapshot {
                clients: 7,
                datagrams_in: 150,
                channel_full: 2,
                late_ticks: 1,
                busy_ns: 15,
                max_tick_lateness_us: 700,
                realtime_priority: 10,
                ..StatsSnapshot::default()
            }
        );
        assert_eq!([].iter().sum::<StatsSnapshot>(), StatsSnapshot::default());
    }

    #[test]
    fn trouble_is_what_grew_and_nothing_when_nothing_did() {
        let before = StatsSnapshot {
            clients: 4,
            send_failed: 1,
            channel_full: 2,
            late_ticks: 3,
            unknown_source: 4,
            busy_ns: 1_000_000_000,
            ..StatsSnapshot::default()
        };
        let mut after = StatsSnapshot {
            datagrams_in: 99,
            busy_ns: 2_000_000_000,
            ..before
        };
        assert_eq!(after.trouble_since(&before, 10.0), None, "traffic alone");
        after.channel_full = 7;
        after.late_ticks = 4;
        after.max_tick_lateness_us = 5_400;
        assert_eq!(
            after.trouble_since(&before, 10.0).as_deref(),
            Some(
                "clients=4 send_failed=+0 channel_full=+5 late_ticks=+1 unknown_source=+0 \
                 worst_tick_lateness_us=5400 busy=10%"
            )
        );
    }
}
