//! Rooms larger than one hub: several hub processes carry one room, each serving part of its
//! players, and exchange partial mixes in a star around the room's home hub.
//!
//! The first hub to serve a room in mix mode claims it as the room's home in a shared
//! [`Directory`] (Redis with `--redis`, else [`LocalDirectory`] in the process, where every
//! room's home is this hub and nothing changes). Any other hub serving players of that room
//! finds the home there and joins it as an ordinary JackTrip client named `room/~hub-<id>`
//! ([`link_name`]): over that link it sends the raw sum of its own players and receives the
//! home's mix minus that link, which it adds to each of its listeners' mixes (the media side is
//! `media::cascade`, the worker's socket `worker::cascade`). The home needs no code of its own:
//! a link is one more voice in its room, with no privileges, so a hostile hub can do no more
//! than a JackTrip client can.
//!
//! - [`directory`]: the shared record (home per room, players per hub), with expiry, and its
//!   in-process implementation;
//! - [`redis`]: the same in Redis, for hubs on several machines or processes;
//! - [`coordinator`]: the thread that claims, refreshes and reads the directory and makes each
//!   room's link (the blocking parts, kept off the workers).
//!
//! Which rooms this hub serves reaches the thread through [`Shares`], written by the workers
//! when a room's players, mode or link change (never per block).
//!
//! Many machines: the hubs share one Redis and each advertises the `ip:port` its peers reach
//! its JackTrip handshake at (`--jacktrip-advertise`); nothing else changes, as the links are
//! plain JackTrip over UDP. What it costs and where it stops:
//! - a voice served elsewhere arrives one hop later than a local one (its hub to the home, or
//!   the home to the listener's hub: one network path, one adaptive jitter buffer and up to one
//!   block each; 6.5-7.7 ms measured on loopback), and two hops later between two hubs that are
//!   not the home;
//! - the home carries one link per other hub (one voice and one 1.5 Mbit/s stereo stream each
//!   way), so the star scales with the home's uplink and worker, not with the room;
//! - only one level of star is right: a link carries its own hub's players, never what it got
//!   from its home, so a hub linked to a hub that is not the home would be heard only there;
//!   deeper trees would need partial mixes forwarded per branch, and add a hop per level;
//! - a vanished home is replaced within the directory's expiry plus a round (3-3.5 s), during
//!   which the other hubs hear only their own players;
//! - a remote hub is one strip at the home (its players' sum) and its players are not metered
//!   at the other hubs: personal mixes reach remote voices only as a group.

pub mod coordinator;
pub mod directory;
pub mod redis;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

pub use coordinator::CascadeConfig;
pub use directory::{Directory, DirectoryError, LocalDirectory};

/// A link's display name starts with this; it is not counted as a player.
pub const LINK_PREFIX: &str = "~hub-";

/// The JackTrip client name of this hub's link into `room`: `room/~hub-<hub>`.
pub fn link_name(room: &str, hub: &str) -> String {
    format!("{room}/{LINK_PREFIX}{hub}")
}

/// What a worker says of one public room it carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Share {
    /// The worker that carries it.
    pub worker: usize,
    /// Whether the room is mixed here (only mix rooms span hubs).
    pub mix: bool,
    /// Its players on this hub (JackTrip names, browsers' short peer ids), links left out.
    pub players: Vec<String>,
    /// The home hub its link goes to, while the link is up.
    pub link: Option<SocketAddr>,
}

/// Every public room the workers carry, by name.
pub type Shares = Arc<Mutex<HashMap<String, Share>>>;
