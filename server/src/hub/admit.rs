//! JackTrip clients into rooms: the server's side of [`Admit`] and of their departures.
//!
//! A hello that names a room goes to the rooms first (the room must exist, be public, without a
//! password, unlocked, not full and run through the hub); the client then gets a UDP socket of
//! its own on `--addr`, on the first free port from `--jacktrip-udp-base`, and is handed with it
//! to the worker that carries the room. The handshake answers that port. When the worker ends
//! the client's session it sends a [`HubEvent`]; [`departures`] takes it out of the room.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;

use super::jacktrip::listener::{Admit, AdmitError, JoinRequest};
use super::{Admitted, HubEvent};
use crate::protocol::LeaveReason;
use crate::room::RoomId;
use crate::App;

/// Ports tried from the base before the hub counts itself full of JackTrip clients.
pub const UDP_PORTS: u16 = 512;

/// The server's admission of JackTrip clients.
pub(crate) struct Admission {
    pub app: Arc<App>,
    /// Where the clients' UDP sockets bind (`--addr`).
    pub bind: IpAddr,
    /// `--jacktrip-udp-base`.
    pub udp_base: u16,
}

impl Admission {
    /// A socket on the first free port from the base, and its port.
    fn socket(&self) -> Option<(UdpSocket, u16)> {
        (0..UDP_PORTS).find_map(|k| {
            let port = self.udp_base.checked_add(k)?;
            let socket = UdpSocket::bind(SocketAddr::new(self.bind, port)).ok()?;
            Some((socket, port))
        })
    }
}

impl Admit for Admission {
    fn admit(&self, req: JoinRequest) -> Result<u16, AdmitError> {
        let hub = self.app.hub.as_ref().ok_or(AdmitError::Unavailable)?;
        let (member, stream, topology) =
            self.app
                .rooms
                .add_native(&req.room, &req.name)
                .map_err(|e| {
                    tracing::info!(
                        room = %req.room, name = %req.name, why = e.code,
                        "jacktrip: the room refuses the client: {}", e.message
                    );
                    match e.code {
                        "room-full" => AdmitError::RoomFull,
                        code => AdmitError::Refused(code),
                    }
                })?;
        let room = RoomId::new(&req.room, None);
        let undo = |why| {
            self.app
                .rooms
                .remove_native(&room, &member, LeaveReason::Closed);
            why
        };
        let mode = topology
            .hub_mode()
            .ok_or_else(|| undo(AdmitError::Refused("not-hub")))?;
        let (socket, port) = self.socket().ok_or_else(|| undo(AdmitError::HubFull))?;
        hub.jacktrip(Admitted {
            room: room.clone(),
            member: member.clone(),
            name: req.name,
            stream,
            mode,
            socket,
            client_ip: req.peer_ip,
        })
        .map_err(|_| undo(AdmitError::Unavailable))?;
        Ok(port)
    }
}

/// Takes each JackTrip client whose session ended out of its room (`peer-left`), and tells each
/// listener whose layer changed, until the hub's workers are gone.
pub(crate) async fn departures(app: Arc<App>, mut events: UnboundedReceiver<HubEvent>) {
    while let Some(event) = events.recv().await {
        match event {
            HubEvent::JackTripLeft {
                room,
                member,
                reason,
            } => {
                app.rooms.remove_native(&room, &member, reason);
            }
            HubEvent::Layer {
                room,
                member,
                notice,
            } => app.rooms.tell(&room, &member, notice),
        }
    }
}
