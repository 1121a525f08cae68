//! The worker's JackTrip clients: each has a UDP socket of its own (the port the handshake
//! answered), registered with the worker's poll, and a sans-IO [`Session`] that says what each
//! datagram is. Its first audio packet fixes its format and adds it to the room's media as
//! [`ClientKind::JackTrip`]; what the media sends it goes back from the same socket to the
//! address its packets come from. Its exit packet, a refused format or 10 s of silence end it;
//! the rooms then hear of it through a [`HubEvent`], as the worker runs on a thread of its own.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use mio::net::UdpSocket;

use super::{HubRoom, Target, Worker, FIRST_NATIVE};
use crate::hub::jacktrip::session::{Session, Verdict};
use crate::hub::media::{ClientId, ClientKind, Mode, Received};
use crate::hub::HubEvent;
use crate::protocol::LeaveReason;
use crate::room::RoomId;

/// A JackTrip client the rooms admitted, for the room's worker.
#[derive(Debug)]
pub(crate) struct Admitted {
    pub room: RoomId,
    /// Its peer id in the room.
    pub member: String,
    pub name: String,
    pub stream: u16,
    /// The room's mode, should the worker not carry it yet.
    pub mode: Mode,
    /// Bound to the port the client was told.
    pub socket: std::net::UdpSocket,
    /// Where its TCP handshake came from: its datagrams must come from this address.
    pub client_ip: IpAddr,
}

/// One JackTrip client on this worker.
pub(super) struct Native {
    socket: UdpSocket,
    session: Session,
    room: RoomId,
    member: String,
    name: String,
    stream: u16,
    port: u16,
    /// Its media client, from its first audio packet on.
    media: Option<ClientId>,
    sent: u64,
    send_failed: u64,
}

impl Native {
    /// Its display name, if it is a client of `room`.
    pub(super) fn player_in(&self, room: &RoomId) -> Option<&str> {
        (self.room == *room).then_some(self.name.as_str())
    }

    /// When its session times out (µs on the worker's clock).
    pub(super) fn deadline(&self) -> u64 {
        self.session.deadline()
    }

    /// Sends `bytes` to the client's address; false if it has none yet or the socket refused.
    pub(super) fn send(&mut self, bytes: &[u8]) -> bool {
        let sent = self
            .session
            .peer_addr()
            .is_some_and(|to| self.socket.send_to(bytes, to).is_ok());
        if sent {
            self.sent += 1;
        } else {
            self.send_failed += 1;
        }
        sent
    }
}

impl Worker {
    /// Takes a JackTrip client the rooms admitted: registers its socket, opens its session.
    pub(super) fn admit_native(&mut self, admitted: Admitted) {
        let Admitted {
            room,
            member,
            name,
            stream,
            mode,
            socket,
            client_ip,
        } = admitted;
        let now_us = self.now_us(Instant::now());
        let port = socket.local_addr().map(|a| a.port()).unwrap_or(0);
        let j = self.free_natives.pop().unwrap_or(self.natives.len());
        let registered = self.register_udp(socket, FIRST_NATIVE + j);
        let socket = match registered {
            Ok(socket) => socket,
            Err(e) => {
                tracing::warn!("hub jacktrip room={room} peer={member}: no socket: {e}");
                self.free_natives.push(j);
                self.tell(room, member, LeaveReason::Closed);
                return;
            }
        };
        tracing::info!(
            "hub jacktrip join room={room} peer={} name={name:?} stream={stream} udp={port} \
             from={client_ip}",
            crate::log::short_peer(&member),
        );
        self.rooms
            .entry(room.clone())
            .or_insert_with(|| HubRoom::new(mode, now_us))
            .natives += 1;
        let native = Native {
            socket,
            session: Session::new(client_ip, now_us),
            room,
            member,
            name,
            stream,
            port,
            media: None,
            sent: 0,
            send_failed: 0,
        };
        let room = native.room.clone();
        if j == self.natives.len() {
            self.natives.push(Some(native));
        } else {
            self.natives[j] = Some(native);
        }
        self.publish_counts();
        self.report(&room);
        self.senders_changed(&room);
    }

    /// Reads every datagram waiting on JackTrip client `j`'s socket.
    pub(super) fn read_native(&mut self, j: usize) {
        loop {
            let now_us = self.now_us(Instant::now());
            let Some(native) = self.natives.get_mut(j).and_then(Option::as_mut) else {
                return;
            };
            let (n, from) = match native.socket.recv_from(&mut self.buf) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            super::bump(&self.stats.datagrams_in);
            let ended = match native.session.on_datagram(from, &self.buf[..n], now_us) {
                Verdict::Audio(packet) => {
                    let Some(room) = self.rooms.get_mut(&native.room) else {
                        return;
                    };
                    feed(native, j, room, packet, now_us)
                }
                Verdict::Exit => Some(LeaveReason::Left),
                Verdict::Refused(e) => {
                    tracing::info!(
                        "hub jacktrip refused room={} peer={} from={from}: {e}",
                        native.room,
                        crate::log::short_peer(&native.member),
                    );
                    Some(LeaveReason::Closed)
                }
                Verdict::Dropped(_) => None,
            };
            if let Some(reason) = ended {
                self.end_native(j, reason);
                return;
            }
        }
    }

    /// Ends the JackTrip clients silent for too long.
    pub(super) fn tick_natives(&mut self) {
        let now_us = self.now_us(Instant::now());
        for j in 0..self.natives.len() {
            let over = self.natives[j]
                .as_mut()
                .is_some_and(|n| n.session.poll_timeout(now_us));
            if over {
                self.end_native(j, LeaveReason::Timeout);
            }
        }
    }

    /// Ends JackTrip client `j`: its socket, its media client, and the room's member.
    fn end_native(&mut self, j: usize, reason: LeaveReason) {
        let Some(mut native) = self.natives.get_mut(j).and_then(Option::take) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut native.socket);
        let s = native.session.counters();
        let format = native
            .session
            .format()
            .map(|f| format!("{}x{}ch/{}bit", f.frames, f.channels, f.bits))
            .unwrap_or_else(|| "none".to_owned());
        let mut media_counts = String::new();
        if let Some(room) = self.rooms.get_mut(&native.room) {
            if let Some(id) = native.media {
                if let Some(c) = room.media.client_counters(id) {
                    media_counts = format!(
                        " accepted={} dropped: {}; overflow={} late={} concealed={}",
                        c.accepted,
                        super::dropped(&c),
                        c.overflow,
                        c.late,
                        c.concealed,
                    );
                }
                room.media.remove_client(id);
                room.by_media.remove(&id);
            }
            room.natives = room.natives.saturating_sub(1);
        }
        tracing::info!(
            "hub jacktrip leave room={} peer={} name={:?} stream={} udp={} reason={} \
             format={format} received={} audio={} dropped: wrong_address={} malformed={} \
             wrong_format={} after_end={};{media_counts} sent={} send_failed={}",
            native.room,
            crate::log::short_peer(&native.member),
            native.name,
            native.stream,
            native.port,
            reason.as_str(),
            s.received,
            s.audio,
            s.wrong_address,
            s.malformed,
            s.wrong_format,
            s.after_end,
            native.sent,
            native.send_failed,
        );
        self.forget_if_empty(&native.room);
        self.report(&native.room);
        self.senders_changed(&native.room);
        self.free_natives.push(j);
        self.publish_counts();
        self.tell(native.room, native.member, reason);
    }

    /// Tells the rooms that a JackTrip client is gone.
    fn tell(&self, room: RoomId, member: String, reason: LeaveReason) {
        if let Some(events) = &self.events {
            let _ = events.send(HubEvent::JackTripLeft {
                room,
                member,
                reason,
            });
        }
    }
}

/// Hands one audio packet of JackTrip client `j` to its room's media, adding it there on its
/// first packet. Returns why it ends, if it does.
fn feed(
    native: &mut Native,
    j: usize,
    room: &mut HubRoom,
    packet: &[u8],
    now_us: u64,
) -> Option<LeaveReason> {
    let id = match native.media {
        Some(id) => id,
        None => {
            let format = native.session.format()?;
            match room
                .media
                .add_client(native.stream, ClientKind::JackTrip(format), now_us)
            {
                Ok(id) => {
                    tracing::info!(
                        "hub jacktrip audio room={} peer={} from={} format={}x{}ch/{}bit",
                        native.room,
                        crate::log::short_peer(&native.member),
                        native
                            .session
                            .peer_addr()
                            .map_or_else(|| "?".to_owned(), |a: SocketAddr| a.to_string()),
                        format.frames,
                        format.channels,
                        format.bits,
                    );
                    native.media = Some(id);
                    room.by_media.insert(id, Target::Native(j));
                    id
                }
                Err(e) => {
                    tracing::info!(
                        "hub jacktrip refused room={} peer={}: the room's media: {e:?}",
                        native.room,
                        crate::log::short_peer(&native.member),
                    );
                    return Some(LeaveReason::Closed);
                }
            }
        }
    };
    match room.media.receive(id, packet, now_us) {
        Received::Exit => Some(LeaveReason::Left),
        Received::Accepted | Received::Dropped(_) => None,
    }
}
