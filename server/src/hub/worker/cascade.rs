//! The worker's links to home hubs: when a room here is part of a room whose home is another
//! hub, the cascade thread makes the link's JackTrip handshake and hands the worker the bound
//! UDP socket and the home's UDP address ([`Command::Link`](super::Command::Link)). The worker
//! registers the socket with its poll, turns on the room's cascade media, sends the home what the
//! media sends [`CASCADE`] and gives the media every datagram from the home's address.
//!
//! A link ends when the room ends, when the thread says so (this hub became the home, or the
//! home moved), when the home sends JackTrip's exit packet, or after [`SILENCE_US`] without a
//! datagram from it; it then sends the home the exit packet twice (as JackTrip does) and the
//! shares no longer name a link, so the thread links anew. Datagrams from any other address
//! are counted and dropped.
//!
//! Per datagram and per block nothing allocates: the socket reads into the worker's buffer.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::UdpSocket;

use super::{HubRoom, Worker, FIRST_LINK};
use crate::hub::cascade::{Share, LINK_PREFIX};
use crate::hub::lock;
use crate::hub::media::{Mode, Received};
use crate::room::RoomId;
use tutti_core::packet::CONTROL_PACKET_LEN;

/// A link without a datagram from its home for this long ends (µs).
pub const SILENCE_US: u64 = 3_000_000;

/// One room's link to its home hub.
pub(super) struct Uplink {
    socket: UdpSocket,
    room: RoomId,
    /// The home's handshake address (its id in the directory).
    home: SocketAddr,
    /// The home's UDP address for this link.
    to: SocketAddr,
    since: Instant,
    last_us: u64,
    received: u64,
    wrong_address: u64,
    sent: u64,
    send_failed: u64,
}

impl Uplink {
    /// Sends `bytes` to the home.
    pub(super) fn send(&mut self, bytes: &[u8]) -> bool {
        let ok = self.socket.send_to(bytes, self.to).is_ok();
        if ok {
            self.sent += 1;
        } else {
            self.send_failed += 1;
        }
        ok
    }
}

impl Worker {
    /// Starts `room`'s link to `home` (replacing any other), if the room is here and mixed.
    pub(super) fn link(
        &mut self,
        room: RoomId,
        home: SocketAddr,
        to: SocketAddr,
        socket: std::net::UdpSocket,
    ) {
        self.unlink(&room, "replaced");
        let now = Instant::now();
        let now_us = self.now_us(now);
        if !self
            .rooms
            .get(&room)
            .is_some_and(|r| r.media.mode() == Mode::Mix)
        {
            return;
        }
        let k = self.free_uplinks.pop().unwrap_or(self.uplinks.len());
        let registered = self.register_udp(socket, FIRST_LINK + k);
        let socket = match registered {
            Ok(socket) => socket,
            Err(e) => {
                tracing::warn!("hub cascade room={room}: no link socket: {e}");
                self.free_uplinks.push(k);
                return;
            }
        };
        let uplink = Uplink {
            socket,
            room: room.clone(),
            home,
            to,
            since: now,
            last_us: now_us,
            received: 0,
            wrong_address: 0,
            sent: 0,
            send_failed: 0,
        };
        if k == self.uplinks.len() {
            self.uplinks.push(Some(uplink));
        } else {
            self.uplinks[k] = Some(uplink);
        }
        if let Some(r) = self.rooms.get_mut(&room) {
            r.media.set_cascade(true, now_us);
            r.uplink = Some(k);
        }
        tracing::info!("hub cascade link room={room} home={home} udp={to}");
        self.report(&room);
    }

    /// Ends `room`'s link, if it has one, saying goodbye to the home.
    pub(super) fn unlink(&mut self, room: &RoomId, why: &str) {
        let Some(k) = self.rooms.get_mut(room).and_then(|r| r.uplink.take()) else {
            return;
        };
        let counters = self.rooms.get_mut(room).and_then(|r| {
            let c = r.media.cascade_counters();
            r.media.set_cascade(false, 0);
            c
        });
        if let Some(mut u) = self.uplinks.get_mut(k).and_then(Option::take) {
            let exit = [0xFF; CONTROL_PACKET_LEN];
            for _ in 0..2 {
                let _ = u.socket.send_to(&exit, u.to);
            }
            let _ = self.poll.registry().deregister(&mut u.socket);
            let (c, _) = counters.unwrap_or_default();
            tracing::info!(
                "hub cascade unlink room={} home={} why={why} after={:.1}s received={} \
                 accepted={} wrong_address={} late={} concealed={} sent={} send_failed={}",
                u.room,
                u.home,
                u.since.elapsed().as_secs_f64(),
                u.received,
                c.accepted,
                u.wrong_address,
                c.late,
                c.concealed,
                u.sent,
                u.send_failed,
            );
            self.free_uplinks.push(k);
        }
        self.report(room);
    }

    /// Ends every link (the worker stops).
    pub(super) fn unlink_all(&mut self) {
        let rooms: Vec<RoomId> = self
            .uplinks
            .iter()
            .flatten()
            .map(|u| u.room.clone())
            .collect();
        for room in rooms {
            self.unlink(&room, "hub-stopping");
        }
    }

    /// Reads every datagram waiting on link `k`'s socket.
    pub(super) fn read_uplink(&mut self, k: usize) {
        loop {
            let now_us = self.now_us(Instant::now());
            let Some(u) = self.uplinks.get_mut(k).and_then(Option::as_mut) else {
                return;
            };
            let (n, from) = match u.socket.recv_from(&mut self.buf) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            super::bump(&self.stats.datagrams_in);
            let from = SocketAddr::new(from.ip().to_canonical(), from.port());
            if from != u.to {
                u.wrong_address += 1;
                continue;
            }
            u.received += 1;
            u.last_us = now_us;
            let Some(r) = self.rooms.get_mut(&u.room) else {
                return;
            };
            if r.media.receive_cascade(&self.buf[..n], now_us) == Received::Exit {
                let room = u.room.clone();
                self.unlink(&room, "home-left");
                return;
            }
        }
    }

    /// Ends the links whose home has been silent too long.
    pub(super) fn tick_uplinks(&mut self) {
        let now_us = self.now_us(Instant::now());
        for k in 0..self.uplinks.len() {
            let silent = self.uplinks[k]
                .as_ref()
                .filter(|u| now_us.saturating_sub(u.last_us) > SILENCE_US)
                .map(|u| u.room.clone());
            if let Some(room) = silent {
                self.unlink(&room, "silent");
            }
        }
    }

    /// Tells the cascade thread what this worker carries of public room `room` now.
    pub(super) fn report(&self, room: &RoomId) {
        if room.key.is_some() {
            return;
        }
        let share = self.rooms.get(room).map(|r| self.share_of(room, r));
        let mut shares = lock(&self.shares);
        match share {
            Some(share) => {
                shares.insert(room.name.clone(), share);
            }
            None => {
                shares.remove(&room.name);
            }
        }
    }

    fn share_of(&self, id: &RoomId, room: &HubRoom) -> Share {
        let mut players: Vec<String> = room
            .by_member
            .keys()
            .map(|m| crate::log::short_peer(m))
            .chain(
                self.natives
                    .iter()
                    .flatten()
                    .filter_map(|n| n.player_in(id))
                    .filter(|name| !name.starts_with(LINK_PREFIX))
                    .map(str::to_owned),
            )
            .collect();
        players.sort();
        Share {
            worker: self.index,
            mix: room.media.mode() == Mode::Mix,
            players,
            link: room
                .uplink
                .and_then(|k| self.uplinks.get(k)?.as_ref())
                .map(|u| u.home),
        }
    }
}
