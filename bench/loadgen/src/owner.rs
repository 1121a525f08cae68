//! A room's owner on this project's server, as the load generator needs one: the server admits
//! a JackTrip client only into a room that a member opened and switched to the hub, and a
//! room's topology is the owner's to set, so each room of a run is first joined over the
//! signaling WebSocket and set to `mix` (or `forward`). That member stays until the run ends:
//! its connection goes to the run's [`Keeper`](crate::signal::Keeper), which answers the
//! server's pings.

use std::net::{IpAddr, SocketAddr};

use serde_json::json;

use crate::signal::{self, Ws};

/// Joins `room` on the server at `http` from address `from` and switches it to `mode`
/// (`mix` or `forward`); returns the owner's connection, to be kept open.
pub fn open(http: SocketAddr, from: IpAddr, room: &str, mode: &str) -> Result<Ws, String> {
    let mut ws = signal::connect(http, from)?;
    // Peer ids and tokens are 32 hex digits; unique per room is enough here, and far from
    // the members' (`signal::member_id`).
    let id = format!(
        "{:032x}",
        u128::from(room.len() as u32) << 64 | u128::from(fnv(room))
    );
    signal::join(&mut ws, room, "load owner", &id)?;
    signal::send(&mut ws, json!({"type": "topology", "mode": mode}))?;
    signal::expect(&mut ws, "topology")?;
    Ok(ws)
}

/// FNV-1a of `s`: a stable id per room name.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
