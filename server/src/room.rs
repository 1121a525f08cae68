//! One room: its identity ([`RoomId`]: name and private key), its members (connected or away)
//! and its rules as data: password hash, owner secret hash, lock, bans, since when it is empty.
//! [`crate::rooms`] holds all rooms under one lock and applies the join, leave, lock and remove
//! rules to them.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::attempts::RoomTag;
use crate::hub::signal::{Topology, MAX_STREAM};
use crate::password::{digest, digest_eq, Digest32};
use crate::protocol;
use crate::rooms::Outbox;
use crate::store::{BanRecord, MemberRecord, RoomRecord};

/// A room: its name and, for a private room, the SHA-256 of its key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RoomId {
    pub name: String,
    pub key: Option<Digest32>,
}

impl RoomId {
    pub fn new(name: &str, key: Option<&str>) -> Self {
        Self {
            name: name.to_owned(),
            key: key.map(digest),
        }
    }

    pub fn is_private(&self) -> bool {
        self.key.is_some()
    }

    /// One digest naming the room (for the password-failure limiter).
    pub fn tag(&self) -> RoomTag {
        let mut h = Sha256::new();
        h.update(b"room\0");
        h.update(self.name.as_bytes());
        h.update(b"\0");
        if let Some(key) = &self.key {
            h.update(key);
        }
        h.finalize().into()
    }
}

/// For logs: the name, and `private` for a private room (never the key).
impl fmt::Display for RoomId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if self.is_private() {
            f.write_str(" private")?;
        }
        Ok(())
    }
}

pub(crate) struct Member {
    pub(crate) peer: String,
    pub(crate) name: String,
    pub(crate) token: Digest32,
    pub(crate) owner: bool,
    /// Its connection; `None` while away.
    pub(crate) outbox: Option<Outbox>,
    pub(crate) away_since: Option<u64>,
    /// Its stream id in this room (see [`crate::hub::signal`]).
    pub(crate) stream: u16,
    /// In a mesh, the controller of the layer it takes of the others' streams (made at its
    /// first report; see [`crate::mesh_layers`]).
    pub(crate) takes: Option<crate::hub::controller::Controller>,
}

impl Member {
    pub(crate) fn record(&self) -> MemberRecord {
        MemberRecord {
            peer: self.peer.clone(),
            token: self.token,
            owner: self.owner,
            away_since: self.away_since,
        }
    }

    pub(crate) fn on(&self, conn: u64) -> bool {
        self.outbox.as_ref().is_some_and(|o| o.id() == conn)
    }

    /// Its connection is gone since `now`; it keeps its place, to come back with its token.
    pub(crate) fn go_away(&mut self, now: u64) {
        self.outbox = None;
        self.takes = None;
        self.away_since = Some(now);
    }
}

/// A native JackTrip client in the room: a member without a signaling connection, heard and
/// hearing through the hub only. Never stored, never away: it is in the room while its UDP
/// session lasts.
pub(crate) struct Native {
    pub(crate) peer: String,
    pub(crate) name: String,
    pub(crate) stream: u16,
}

pub(crate) struct Room {
    /// Argon2id PHC string.
    pub(crate) password: Option<Arc<str>>,
    pub(crate) owner: Digest32,
    pub(crate) locked: bool,
    /// In join order.
    pub(crate) members: Vec<Member>,
    pub(crate) bans: Vec<BanRecord>,
    /// Set exactly while no member is connected.
    pub(crate) empty_since: Option<u64>,
    /// How its audio travels (not stored: a room kept across a restart starts as a mesh).
    pub(crate) topology: Topology,
    /// Its owner chose the mesh: members' uplink reports no longer move it to the hub.
    pub(crate) pinned: bool,
    /// The last stream id given out.
    pub(crate) stream_seq: u16,
    /// Its JackTrip clients, in join order (they count toward the cap).
    pub(crate) natives: Vec<Native>,
}

impl Room {
    pub(crate) fn record(&self) -> RoomRecord {
        RoomRecord {
            password: self.password.as_deref().map(str::to_owned),
            owner: self.owner,
            locked: self.locked,
            empty_since: self.empty_since,
        }
    }

    /// Where `peer` is in the member list, if connection `conn` holds it.
    pub(crate) fn held(&self, peer: &str, conn: u64) -> Option<usize> {
        self.members
            .iter()
            .position(|m| m.peer == peer && m.on(conn))
    }

    pub(crate) fn connected(&self) -> impl Iterator<Item = (&Member, &Outbox)> {
        self.members
            .iter()
            .filter_map(|m| m.outbox.as_ref().map(|o| (m, o)))
    }

    pub(crate) fn connected_count(&self) -> usize {
        self.connected().count()
    }

    /// Places taken toward the cap: connected members and JackTrip clients.
    pub(crate) fn places_taken(&self) -> usize {
        self.connected_count() + self.natives.len()
    }

    /// Whether `peer` names a member (connected or away) or a JackTrip client.
    pub(crate) fn has_peer(&self, peer: &str) -> bool {
        self.members.iter().any(|m| m.peer == peer) || self.natives.iter().any(|n| n.peer == peer)
    }

    pub(crate) fn broadcast(&self, text: &str, except: Option<&str>) {
        for (m, o) in self.connected() {
            if Some(m.peer.as_str()) != except {
                o.send_text(text.to_owned());
            }
        }
    }

    /// A stream id no member holds: the next after the last one given, so an id that just
    /// went is not reused at once (a late packet of the old member cannot pass as the new one's).
    pub(crate) fn new_stream(&mut self) -> u16 {
        loop {
            self.stream_seq = self.stream_seq % MAX_STREAM + 1;
            let taken = self.members.iter().any(|m| m.stream == self.stream_seq)
                || self.natives.iter().any(|n| n.stream == self.stream_seq);
            if !taken {
                return self.stream_seq;
            }
        }
    }

    pub(crate) fn expired(&self, now: u64, retention: u64) -> bool {
        self.empty_since
            .is_some_and(|t| now.saturating_sub(t) >= retention)
    }

    pub(crate) fn banned(&self, token: &Digest32, now: u64) -> bool {
        self.bans
            .iter()
            .any(|b| b.until > now && digest_eq(&b.token, token))
    }

    pub(crate) fn welcome(
        &self,
        name: &str,
        member: &Member,
        secret: Option<&str>,
        cap: usize,
    ) -> String {
        let others: Vec<protocol::PeerEntry> = self
            .connected()
            .filter(|(m, _)| m.peer != member.peer)
            .map(|(m, _)| protocol::PeerEntry {
                peer: m.peer.clone(),
                name: m.name.clone(),
                stream: m.stream,
                jacktrip: false,
            })
            .chain(self.natives.iter().map(|n| protocol::PeerEntry {
                peer: n.peer.clone(),
                name: n.name.clone(),
                stream: n.stream,
                jacktrip: true,
            }))
            .collect();
        let info = protocol::WelcomeRoom {
            owner_secret: secret,
            is_owner: member.owner,
            locked: self.locked,
            protected: self.password.is_some(),
            topology: self.topology,
        };
        protocol::welcome(name, &member.peer, member.stream, &others, cap, info)
    }
}
