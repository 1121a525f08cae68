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
