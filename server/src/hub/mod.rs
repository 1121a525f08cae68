//! The media hub: one server carries a room's audio, so a room is no longer bounded by what each
//! player's uplink can send to every other player.
//!
//! - [`media`]: the sans-IO media of one room — checking what clients send, forwarding (one
//!   bundle per listener per block) or mixing (each listener's personal mix minus its own voice,
//!   made by the same core as the browser's worklet).
//! - [`rtc`]: one browser's WebRTC link (str0m, ICE-lite, one data channel).
//! - [`worker`]: one thread per core; each owns a UDP socket, the links of its rooms and their
//!   media, and drives them from its socket and its clock.
//! - [`jacktrip`]: JackTrip's hub handshake and UDP sessions, for native clients in the same rooms;
//!   `admit` lets them into rooms (the rooms' rules, a UDP port, the room's worker).
//! - [`signal`]: the hub's messages in the signaling protocol.
//! - [`cascade`]: rooms larger than one hub: a directory of each room's home hub, and links
//!   that carry partial mixes between hub processes.
//! - [`client`]: a native client of the hub (tests and benchmarks stand in for browsers with it).
//!
//! This module is the handle the rest of the server holds: it starts the workers, places each
//! room on one of them (a room's clients all live on one thread, so its media needs no lock),
//! and passes requests from the WebSocket side to the room's worker as commands.

pub(crate) mod admit;
pub mod cascade;
pub mod client;
pub mod controller;
pub mod drain;
pub mod jacktrip;
pub mod media;
pub mod opus;
pub mod opus_stream;
pub mod priority;
pub mod rtc;
pub mod signal;
pub mod stun;
pub mod uplink;
pub mod worker;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::protocol::LeaveReason;
use crate::room::RoomId;
pub use media::Mode;
pub(crate) use worker::Admitted;
use worker::{Command, WorkerStats};

/// How the hub is set up (from the server's flags).
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Worker threads; rooms are spread over them.
    pub threads: usize,
    /// Address the workers' UDP sockets bind to.
    pub bind: IpAddr,
    /// Address browsers are told to send to (the ICE candidate).
    pub advertise: IpAddr,
    /// First worker's UDP port (worker i uses port + i); 0 lets the system pick each.
    pub port: u16,
    /// Real-time priority of the worker threads (0: normal scheduling); see [`priority`].
    pub priority: u8,
    /// How each forward-mode listener's layer is picked.
    pub layer_policy: controller::Policy,
}

/// Why the hub could not serve a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubError {
    /// The offer was unusable or refused; the text says why.
    Offer(String),
    /// The room's media refused the client (full, or its stream id is taken).
    Refused(String),
    /// The hub is stopping or its worker is gone.
    Unavailable,
}

impl HubError {
    pub fn message(&self) -> String {
        match self {
            HubError::Offer(m) | HubError::Refused(m) => m.clone(),
            HubError::Unavailable => "The hub is not available.".to_owned(),
        }
    }
}

/// A member's personal mix on the hub: its master and its strips for other members' streams.
#[derive(Debug, Clone, PartialEq)]
pub struct PersonalMix {
    pub master: Option<f32>,
    pub strips: Vec<StripSetting>,
}

/// One strip of a personal mix: how a listener hears the member sending `stream`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StripSetting {
    pub stream: u16,
    pub gain: f32,
    pub pan: f32,
    pub mute: bool,
    pub solo: bool,
}

/// What the workers tell the rest of the server (their threads cannot call into the rooms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubEvent {
    /// A JackTrip client's session ended (`Left`: its exit packet; `Timeout`: 10 s of silence;
    /// `Closed`: refused, e.g. its format).
    JackTripLeft {
        room: RoomId,
        member: String,
        reason: LeaveReason,
    },
    /// A browser listener's layer changed (forward mode): the member is told, with the reason.
    Layer {
        room: RoomId,
        member: String,
        notice: String,
    },
}

struct WorkerHandle {
    tx: mpsc::Sender<Command>,
    waker: Arc<mio::Waker>,
    stats: Arc<WorkerStats>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    fn send(&self, command: Command) -> Result<(), HubError> {
        self.tx.send(command).map_err(|_| HubError::Unavailable)?;
        self.waker.wake().map_err(|_| HubError::Unavailable)
    }
}

/// The running hub.
pub struct Hub {
    workers: Vec<WorkerHandle>,
    /// Which worker carries each room that has (or had) hub clients.
    placement: Mutex<HashMap<RoomId, usize>>,
    /// Rooms whose last client left their worker; their placement is forgotten.
    emptied: Arc<Mutex<Vec<RoomId>>>,
    /// The cascade thread (rooms larger than this hub), and its stop flag.
    cascade: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Hub {
    /// Binds the workers' sockets and starts their threads; they report to `events`. With
    /// `cascade`, a thread also keeps the directory of rooms larger than one hub and links this
    /// hub's share of them to their home hubs.
    pub fn start(
        config: &HubConfig,
        events: Option<tokio::sync::mpsc::UnboundedSender<HubEvent>>,
        cascade: Option<cascade::CascadeConfig>,
    ) -> io::Result<Hub> {
        let emptied = Arc::new(Mutex::new(Vec::new()));
        let shares: cascade::Shares = Arc::default();
        let mut workers = Vec::with_capacity(config.threads.max(1));
        for i in 0..config.threads.max(1) {
            let port = if config.port == 0 {
                0
            } else {
                config.port.checked_add(i as u16).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, "hub port range overflows")
                })?
            };
            let bind = SocketAddr::new(config.bind, port);
            let spawned = worker::spawn(
                i,
                bind,
                config,
                emptied.clone(),
                shares.clone(),
                events.clone(),
            )?;
            workers.push(WorkerHandle {
                tx: spawned.tx,
                waker: spawned.waker,
                stats: spawned.stats,
                addr: spawned.addr,
                thread: Some(spawned.thread),
            });
        }
        let cascade = match cascade {
            Some(config) => {
                let stop = Arc::new(AtomicBool::new(false));
                let queues = workers
                    .iter()
                    .map(|w| cascade::coordinator::WorkerQueue {
                        tx: w.tx.clone(),
                        waker: w.waker.clone(),
                    })
                    .collect();
                let coordinator =
                    cascade::coordinator::Coordinator::new(config, shares, queues, stop.clone());
                let thread = std::thread::Builder::new()
                    .name("hub-cascade".into())
                    .spawn(move || coordinator.run())?;
                Some((stop, thread))
            }
            None => None,
        };
        Ok(Hub {
            workers,
            placement: Mutex::new(HashMap::new()),
            emptied,
            cascade,
        })
    }

    /// The UDP addresses browsers are told to use, one per worker.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.workers.iter().map(|w| w.addr).collect()
    }

    /// The worker that carries `room`, placing it on the least loaded one if it has none.
    fn worker_for(&self, room: &RoomId) -> usize {
        let mut placement = lock(&self.placement);
        for gone in lock(&self.emptied).drain(..) {
            placement.remove(&gone);
        }
        if let Some(&w) = placement.get(room) {
            return w;
        }
        let w = (0..self.workers.len())
            .min_by_key(|&i| self.workers[i].stats.clients.load(Ordering::Relaxed))
            .unwrap_or(0);
        placement.insert(room.clone(), w);
        w
    }

    fn placed(&self, room: &RoomId) -> Option<&WorkerHandle> {
        let w = *lock(&self.placement).get(room)?;
        self.workers.get(w)
    }

    /// Answers a member's offer: its link to the hub, carrying stream `stream` in `room`
    /// (which the hub runs in `mode`). A member's new offer replaces its previous link. With
    /// `echo` the member's own packets come back to it too (forward mode).
    pub async fn offer(
        &self,
        room: &RoomId,
        member: &str,
        stream: u16,
        mode: Mode,
        sdp: String,
        echo: bool,
    ) -> Result<String, HubError> {
        let (reply, answer) = oneshot::channel();
        let w = self.worker_for(room);
        self.workers[w].send(Command::Offer {
            room: room.clone(),
            member: member.to_owned(),
            stream,
            mode,
            sdp,
            echo,
            reply,
        })?;
        answer.await.map_err(|_| HubError::Unavailable)?
    }

    /// Hands an admitted JackTrip client (its socket bound) to the worker of its room.
    pub(crate) fn jacktrip(&self, admitted: Admitted) -> Result<(), HubError> {
        let w = self.worker_for(&admitted.room);
        self.workers[w].send(Command::JackTrip(admitted))
    }

    /// The member left the room (or its connection ended): its link and media go.
    pub fn leave(&self, room: &RoomId, member: &str) {
        if let Some(w) = self.placed(room) {
            let _ = w.send(Command::Leave {
                room: room.clone(),
                member: member.to_owned(),
            });
        }
    }

    /// The room's topology changed to forwarding or mixing.
    pub fn set_mode(&self, room: &RoomId, mode: Mode) {
        if let Some(w) = self.placed(room) {
            let _ = w.send(Command::Mode {
                room: room.clone(),
                mode,
            });
        }
    }

    /// A member's personal mix on the hub.
    pub fn set_mix(&self, room: &RoomId, member: &str, mix: PersonalMix) {
        if let Some(w) = self.placed(room) {
            let _ = w.send(Command::Mix {
                room: room.clone(),
                member: member.to_owned(),
                mix,
            });
        }
    }

    /// A forward-mode listener's report of what reaches it: its layer controller may change
    /// what it takes.
    pub fn reception(&self, room: &RoomId, member: &str, report: controller::Report) {
        if let Some(w) = self.placed(room) {
            let _ = w.send(Command::Reception {
                room: room.clone(),
                member: member.to_owned(),
                report,
            });
        }
    }

    /// Figures for logs and the status endpoint: per worker.
    pub fn stats(&self) -> Vec<worker::StatsSnapshot> {
        self.workers.iter().map(|w| w.stats.snapshot()).collect()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        // The cascade thread first: it takes this hub out of the directory, so the rooms it was
        // home to find a new home at once instead of when the entries lapse.
        if let Some((stop, thread)) = self.cascade.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
        for w in &self.workers {
            let _ = w.send(Command::Stop);
        }
        for w in &mut self.workers {
            if let Some(thread) = w.thread.take() {
                let _ = thread.join();
            }
        }
    }
}
