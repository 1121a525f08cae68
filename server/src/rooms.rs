//! Rooms and their members, the room rules of the protocol (creator, password, owner, lock,
//! removal, retention; see [`crate::protocol`]) and what is kept of rooms in a [`Store`].
//!
//! One lock over all rooms; nothing inside it waits: messages to members go into their bounded
//! outboxes with `try_send`, and a member whose outbox is full (in messages or bytes) is told to
//! close (a slow receiver never blocks the room). Each change is written to the store under the lock, as a few short
//! statements on a local file. Passwords are never hashed here: a join that needs a hash
//! returns [`Step::Verify`] or [`Step::Hash`], the caller computes it on a blocking thread
//! outside the lock and joins again with the [`Proof`].
//!
//! Sans-IO: every call is told the wall-clock time in Unix milliseconds (retention spans
//! restarts, so it cannot be a monotonic clock).
//!
//! A room is kept while it has connected members and for the retention time after the last
//! one went. Its members' peer ids stay reserved for their tokens: a member who leaves on
//! purpose (`leave`) gives its place up, but one whose connection dropped or timed out, or was
//! cut off by a shutdown or a crash, stays as an "away" member (for the retention time, at
//! most twice the cap per room): it comes back with its token, without the password and even
//! into a locked room, and nobody else can take its peer id meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::{mpsc, Notify};

use crate::budget::{self, QueueBudget};
use crate::hub::controller::Report;
use crate::hub::signal::{self, Topology};
use crate::hub::uplink::{self, UplinkReport};
use crate::mesh_layers::MeshRules;
use crate::password::{digest, digest_eq, random_hex_id, Digest32};
use crate::protocol::{self, Join, LeaveReason, ProtocolError};
pub use crate::room::RoomId;
use crate::room::{Member, Native, Room};
use crate::store::{BanRecord, Store};

/// What a connection's writer sends on the socket.
#[derive(Debug)]
pub enum Outbound {
    Text(String),
    Ping,
    Close(u16, &'static str),
}

/// The sending side of one connection: its outbound queue, bounded in messages by the channel
/// and in bytes by its budget (see [`crate::budget`]), and a way to make it close.
#[derive(Clone)]
pub struct Outbox {
    id: u64,
    tx: mpsc::Sender<Outbound>,
    kill: Arc<Notify>,
    budget: Arc<QueueBudget>,
}

impl Outbox {
    /// An outbox bounded only by the channel's capacity; see [`Outbox::with_budget`].
    pub fn new(id: u64, tx: mpsc::Sender<Outbound>, kill: Arc<Notify>) -> Self {
        Self {
            id,
            tx,
            kill,
            budget: Arc::new(QueueBudget::unlimited()),
        }
    }

    /// The same outbox, its bytes counted by `budget` (which its writer releases).
    pub fn with_budget(self, budget: Arc<QueueBudget>) -> Self {
        Self { budget, ..self }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Queues `msg` without waiting. If it does not fit (the queue is full or over a byte
    /// budget), the connection is told to close.
    pub fn send(&self, msg: Outbound) {
        let cost = budget::cost(&msg);
        if !self.budget.reserve(cost) {
            self.kill.notify_one();
            return;
        }
        if let Err(e) = self.tx.try_send(msg) {
            self.budget.release(cost);
            if let mpsc::error::TrySendError::Full(_) = e {
                self.kill.notify_one();
            }
        }
    }

    pub fn send_text(&self, text: String) {
        self.send(Outbound::Text(text));
    }

    /// Completes when the connection's writer has stopped (after a close frame, or when the
    /// socket failed): nothing sent from then on reaches the client.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

/// Most rooms kept at once. Beyond it, creating a room forgets the empty room that has been
/// empty longest, rooms without a password first.
pub const MAX_ROOMS: usize = 50_000;
/// Most tokens banned per room; beyond it the one that expires first is dropped.
pub const MAX_BANS_PER_ROOM: usize = 256;
/// A room reserves at most this many times its cap of peer ids (connected and away).
const RESERVED_PER_CAP: usize = 2;

/// What the caller computed for a join that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    /// Nothing yet.
    None,
    /// The join's password matched this stored hash.
    Verified(Arc<str>),
    /// The join's password hashed for a new room.
    Hashed(String),
}

/// The next step of a join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Done: the welcome is queued.
    Joined(Joined),
    /// Check the join's password against this hash (after asking the limiter), then join
    /// again with [`Proof::Verified`].
    Verify(Arc<str>),
    /// The join creates a room with a password: hash it, then join again with
    /// [`Proof::Hashed`].
    Hash,
}

/// How a join went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    /// The room was created; the member is its owner.
    Created,
    /// A new member (or one coming back after a restart); `members` counts it.
    New { members: usize },
    /// The member was connected on another connection, which it now replaces.
    Replaced { members: usize },
}

struct Inner {
    rooms: HashMap<RoomId, Room>,
    store: Box<dyn Store>,
}

/// All rooms of the server.
pub struct Rooms {
    cap: usize,
    retention_ms: u64,
    inner: Mutex<Inner>,
}

impl Rooms {
    /// Rooms of at most `cap` members, kept for `retention` after they empty, loaded from and
    /// written to `store`; those that expired while the server was down are forgotten at once.
    pub fn new(
        cap: usize,
        retention: Duration,
        mut store: Box<dyn Store>,
        now: u64,
    ) -> Result<Self, String> {
        let mut rooms = HashMap::new();
        for stored in store.load()? {
            let mut room = Room {
                password: stored.room.password.map(Arc::from),
                owner: stored.room.owner,
                locked: stored.room.locked,
                members: Vec::new(),
                bans: stored.bans,
                // A crash left no time: the room empties now.
                empty_since: Some(stored.room.empty_since.unwrap_or(now)),
                topology: Topology::Mesh,
                pinned: false,
                stream_seq: 0,
                natives: Vec::new(),
            };
            for m in stored.members {
                let stream = room.new_stream();
                room.members.push(Member {
                    peer: m.peer,
                    name: String::new(),
                    token: m.token,
                    owner: m.owner,
                    outbox: None,
                    away_since: Some(m.away_since.unwrap_or(now)),
                    stream,
                    takes: None,
                });
            }
            if stored.room.empty_since.is_none() {
                store.put_room(&stored.id, &room.record());
                for m in &room.members {
                    store.put_member(&stored.id, &m.record());
                }
            }
            rooms.insert(stored.id, room);
        }
        let rooms = Self {
            cap,
            retention_ms: u64::try_from(retention.as_millis()).unwrap_or(u64::MAX),
            inner: Mutex::new(Inner { rooms, store }),
        };
        rooms.purge(now);
        Ok(rooms)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing under the lock can panic half-way through an update, so a poisoned map is
        // still consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives the store back (to reopen the rooms from it, as a restart does).
    #[cfg(test)]
    fn into_store(self) -> Box<dyn Store> {
        self.inner
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .store
    }

    /// Rooms kept and members connected.
    pub fn counts(&self) -> (usize, usize) {
        let inner = self.lock();
        let members = inner.rooms.values().map(Room::connected_count).sum();
        (inner.rooms.len(), members)
    }

    /// Joins the connection `outbox` to the room of `join` as `join.peer`, or says which hash
    /// the caller must compute first. On `Joined` the welcome has been queued to `outbox` and
    /// `peer-joined` to the others (not on a replacement).
    pub fn join(
        &self,
        join: &Join,
        outbox: &Outbox,
        proof: &Proof,
        now: u64,
    ) -> Result<Step, ProtocolError> {
        let id = RoomId::new(&join.room, join.key.as_deref());
        let token = digest(&join.token);
        let mut guard = self.lock();
        let inner = &mut *guard;
        if inner
            .rooms
            .get(&id)
            .is_some_and(|r| r.expired(now, self.retention_ms))
        {
            inner.rooms.remove(&id);
            inner.store.delete_room(&id);
        }
        let Some(room) = inner.rooms.get_mut(&id) else {
            return self.create(inner, id, join, token, outbox, proof, now);
        };
        if room.banned(&token, now) {
            return Err(removed(&join.room));
        }
        let given_owner = join
            .owner
            .as_deref()
            .is_some_and(|o| digest_eq(&digest(o), &room.owner));
        let echoed = join.owner.as_deref().filter(|_| given_owner);
        let existing = room.members.iter().position(|m| m.peer == join.peer);
        let returning = existing.filter(|&i| digest_eq(&room.members[i].token, &token));
        if returning.is_none() {
            match (&room.password, &join.password) {
                (None, Some(_)) => {
                    return Err(ProtocolError::new(
                        "no-password",
                        format!(
                            "Room \"{}\" has no password: anyone with its link can join. Join \
                             without a password, or create a new room with one.",
                            join.room
                        ),
                    ))
                }
                (Some(_), None) => {
                    return Err(ProtocolError::new(
                        "wrong-password",
                        format!("Room \"{}\" needs a password.", join.room),
                    ))
                }
                (Some(hash), Some(_)) => match proof {
                    Proof::Verified(checked) if checked == hash => {}
                    _ => return Ok(Step::Verify(hash.clone())),
                },
                (None, None) => {}
            }
            if room.locked && !given_owner {
                return Err(ProtocolError::new(
                    "room-locked",
                    format!("Room \"{}\" is locked: nobody new can join.", join.room),
                ));
            }
            if existing.is_some() {
                return Err(ProtocolError::new(
                    "peer-id-taken",
                    format!(
                        "Peer id {} is already in room \"{}\".",
                        join.peer, join.room
                    ),
                ));
            }
        }
        let connected = room.connected_count();
        let taken = room.places_taken();
        let replacing = returning.is_some_and(|i| room.members[i].outbox.is_some());
        if !replacing && taken >= self.cap {
            return Err(ProtocolError::new(
                "room-full",
                format!(
                    "Room \"{}\" is full ({taken} of {} places taken).",
                    join.room, self.cap
                ),
            ));
        }
        let i = match returning {
            Some(i) => {
                let m = &mut room.members[i];
                if let Some(old) = m.outbox.replace(outbox.clone()) {
                    old.send_text(
                        ProtocolError::new(
                            "replaced",
                            "This peer joined the room again on a newer connection.",
                        )
                        .to_json(),
                    );
                    old.send(Outbound::Close(protocol::CLOSE_REPLACED, "replaced"));
                }
                m.name = join.name.clone();
                m.owner |= given_owner;
                m.away_since = None;
                i
            }
            None => {
                let stream = room.new_stream();
                room.members.push(Member {
                    peer: join.peer.clone(),
                    name: join.name.clone(),
                    token,
                    owner: given_owner,
                    outbox: Some(outbox.clone()),
                    away_since: None,
                    stream,
                    takes: None,
                });
                room.members.len() - 1
            }
        };
        let member = &room.members[i];
        outbox.send_text(room.welcome(&join.room, member, echoed, self.cap));
        inner.store.put_member(&id, &member.record());
        if !replacing {
            room.broadcast(
                &protocol::peer_joined(&join.peer, &join.name, member.stream),
                Some(&join.peer),
            );
        }
        // In a mesh: the newcomer (or the member's new page) takes everyone's stream as sent,
        // and learns which layer of its own each other member takes; one more sender may not
        // fit every listener's path.
        room.mesh_forget(i);
        room.mesh_layers_to(i);
        room.mesh_senders_changed(now.saturating_mul(1000));
        if room.empty_since.take().is_some() {
            inner.store.put_room(&id, &room.record());
        }
        self.bound_reserved(inner.store.as_mut(), &id, room);
        Ok(Step::Joined(if replacing {
            Joined::Replaced { members: connected }
        } else {
            Joined::New {
                members: connected + 1,
            }
        }))
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        inner: &mut Inner,
        id: RoomId,
        join: &Join,
        token: Digest32,
        outbox: &Outbox,
        proof: &Proof,
        now: u64,
    ) -> Result<Step, ProtocolError> {
        let password = match (&join.password, proof) {
            (None, _) => None,
            (Some(_), Proof::Hashed(hash)) => Some(Arc::from(hash.as_str())),
            (Some(_), _) => return Ok(Step::Hash),
        };
        let secret = random_hex_id().map_err(|_| {
            ProtocolError::new(
                "bad-message",
                "The server could not create the room (it has no randomness).",
            )
        })?;
        if inner.rooms.len() >= MAX_ROOMS {
            self.purge_locked(inner, now);
            evict_one(inner);
            if inner.rooms.len() >= MAX_ROOMS {
                return Err(ProtocolError::new(
                    "room-full",
                    "The server has too many rooms in use; try again later.",
                ));
            }
        }
        let member = Member {
            peer: join.peer.clone(),
            name: join.name.clone(),
            token,
            owner: true,
            outbox: Some(outbox.clone()),
            away_since: None,
            stream: 1,
            takes: None,
        };
        let room = Room {
            password,
            owner: digest(&secret),
            locked: false,
            members: vec![member],
            bans: Vec::new(),
            empty_since: None,
            topology: Topology::Mesh,
            pinned: false,
            stream_seq: 1,
            natives: Vec::new(),
        };
        outbox.send_text(room.welcome(&join.room, &room.members[0], Some(&secret), self.cap));
        inner.store.put_room(&id, &room.record());
        inner.store.put_member(&id, &room.members[0].record());
        inner.rooms.insert(id, room);
        Ok(Step::Joined(Joined::Created))
    }

    /// Forgets the oldest away members beyond the room's reservation bound.
    fn bound_reserved(&self, store: &mut dyn Store, id: &RoomId, room: &mut Room) {
        while room.members.len() > self.cap * RESERVED_PER_CAP {
            let oldest = room
                .members
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.away_since.map(|t| (t, i)))
                .min();
            let Some((_, i)) = oldest else { break };
            let m = room.members.remove(i);
            store.delete_member(id, &m.peer);
        }
    }

    /// Takes `peer` out of room `id` if connection `conn` still holds it, announcing
    /// `peer-left`: a member that left gives its place up, one whose connection closed or
    /// timed out keeps it (away) to come back with its token. Returns the number of members
    /// left connected, or `None` if nothing was removed (e.g. the member had been replaced by
    /// a newer connection).
    pub fn leave(
        &self,
        id: &RoomId,
        peer: &str,
        conn: u64,
        reason: LeaveReason,
        now: u64,
    ) -> Option<usize> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let room = inner.rooms.get_mut(id)?;
        let i = room.held(peer, conn)?;
        if reason == LeaveReason::Left {
            room.members.remove(i);
            inner.store.delete_member(id, peer);
        } else {
            let m = &mut room.members[i];
            m.go_away(now);
            inner.store.put_member(id, &m.record());
        }
        room.broadcast(&protocol::peer_left(peer, reason), None);
        Some(self.after_departure(inner, id, now))
    }

    /// Takes `peer` of connection `conn` out of room `id` like [`Rooms::leave`] but tells no
    /// one and keeps its place: on shutdown, when every member goes at once and all come back
    /// with their tokens when the server is back.
    pub fn forget(&self, id: &RoomId, peer: &str, conn: u64, now: u64) -> Option<usize> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let room = inner.rooms.get_mut(id)?;
        let i = room.held(peer, conn)?;
        let m = &mut room.members[i];
        m.go_away(now);
        inner.store.put_member(id, &m.record());
        Some(self.after_departure(inner, id, now))
    }

    /// Marks the room empty if it is, and forgets it if it expired (retention zero). Returns the
    /// members still connected.
    fn after_departure(&self, inner: &mut Inner, id: &RoomId, now: u64) -> usize {
        let Some(room) = inner.rooms.get_mut(id) else {
            return 0;
        };
        let remaining = room.connected_count();
        if remaining == 0 && room.empty_since.is_none() {
            room.empty_since = Some(now);
            if room.expired(now, self.retention_ms) {
                inner.rooms.remove(id);
                inner.store.delete_room(id);
            } else {
                inner.store.put_room(id, &room.record());
            }
        }
        remaining
    }

    /// Locks or unlocks room `id` for `peer` on connection `conn`, if it is an owner; every
    /// member hears `room`.
    pub fn set_locked(
        &self,
        id: &RoomId,
        peer: &str,
        conn: u64,
        locked: bool,
    ) -> Result<(), ProtocolError> {
        let mut guard = self.lock();
        let Inner { rooms, store } = &mut *guard;
        let room = owner_room(rooms, id, peer, conn)?;
        room.locked = locked;
        room.broadcast(&protocol::room_state(locked), None);
        store.put_room(id, &room.record());
        Ok(())
    }

    /// Removes `target` from room `id` for `peer` on connection `conn`, if it is an owner: the
    /// target hears `removed` and is closed (4001), the others `peer-left` (`removed`), and its
    /// token is refused for the retention time. Returns the members left connected.
    pub fn remove_member(
        &self,
        id: &RoomId,
        peer: &str,
        conn: u64,
        target: &str,
        now: u64,
    ) -> Result<usize, ProtocolError> {
        let mut guard = self.lock();
        let Inner { rooms, store } = &mut *guard;
        let room = owner_room(rooms, id, peer, conn)?;
        if target == peer {
            return Err(ProtocolError::new(
                "bad-message",
                "You cannot remove yourself; leave the room instead.",
            ));
        }
        let Some(i) = room.members.iter().position(|m| m.peer == target) else {
            return Err(unknown_peer(target, &id.name));
        };
        let gone = room.members.remove(i);
        if let Some(o) = &gone.outbox {
            o.send_text(removed(&id.name).to_json());
            o.send(Outbound::Close(protocol::CLOSE_REMOVED, "removed"));
        }
        let ban = BanRecord {
            token: gone.token,
            until: now.saturating_add(self.retention_ms),
        };
        room.bans.retain(|b| !digest_eq(&b.token, &gone.token));
        if room.bans.len() >= MAX_BANS_PER_ROOM {
            if let Some((j, _)) = room.bans.iter().enumerate().min_by_key(|(_, b)| b.until) {
                let dropped = room.bans.remove(j);
                store.delete_ban(id, &dropped.token);
            }
        }
        room.bans.push(ban);
        room.broadcast(&protocol::peer_left(target, LeaveReason::Removed), None);
        store.delete_member(id, target);
        store.put_ban(id, &ban);
        Ok(room.connected_count())
    }

    /// Sets room `id`'s topology for `peer` on connection `conn`, if it is an owner; every
    /// member hears `topology`. Returns whether it changed.
    pub fn set_topology(
        &self,
        id: &RoomId,
        peer: &str,
        conn: u64,
        mode: Topology,
    ) -> Result<bool, ProtocolError> {
        let mut guard = self.lock();
        let room = owner_room(&mut guard.rooms, id, peer, conn)?;
        if mode == Topology::Mesh && !room.natives.is_empty() {
            return Err(ProtocolError::new(
                "topology-refused",
                format!(
                    "The room stays on the hub while JackTrip players are in it ({}): they \
                     are heard only through the hub.",
                    room.natives
                        .iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let changed = room.topology != mode;
        if mode != Topology::Mesh {
            room.mesh_end();
        }
        room.topology = mode;
        // The owner's mesh stands: reports of full uplinks no longer move it.
        room.pinned = mode == Topology::Mesh;
        room.broadcast(&signal::topology(mode), None);
        Ok(changed)
    }

    /// A member's report that the mesh no longer fits its uplink (`uplink`): when it moves
    /// room `id` to the hub in forward mode (see [`crate::hub::uplink`]), every member hears
    /// `topology` with the reason, which is returned. `allowed`: the server may move rooms by
    /// itself (`--hub-auto`, with the hub running).
    pub fn uplink_report(
        &self,
        id: &RoomId,
        peer: &str,
        conn: u64,
        report: &UplinkReport,
        allowed: bool,
    ) -> Result<Option<String>, ProtocolError> {
        let mut guard = self.lock();
        let room = guard.rooms.get_mut(id).ok_or_else(not_joined)?;
        let me = room.held(peer, conn).ok_or_else(not_joined)?;
        if !allowed {
            return Ok(None);
        }
        let players = room.places_taken();
        let name = &room.members[me].name;
        let Some(reason) = uplink::move_reason(report, name, players, room.topology, room.pinned)
        else {
            return Ok(None);
        };
        room.mesh_end();
        room.topology = Topology::Forward;
        room.broadcast(&uplink::moved(Topology::Forward, &reason), None);
        Ok(Some(reason))
    }

    /// A member's reception report (`peer` on connection `conn` in room `id`) at `now` (ms):
    /// in a mesh it is the mesh's ([`crate::mesh_layers`], by `rules`) and true is returned;
    /// false when the room goes through the hub, whose controller it is for.
    pub fn reception(
        &self,
        id: &RoomId,
        peer: &str,
        conn: u64,
        report: &Report,
        rules: MeshRules,
        now: u64,
    ) -> Result<bool, ProtocolError> {
        let mut guard = self.lock();
        let room = guard.rooms.get_mut(id).ok_or_else(not_joined)?;
        let me = room.held(peer, conn).ok_or_else(not_joined)?;
        Ok(room.mesh_reception(me, report, rules, now.saturating_mul(1000)))
    }

    /// The stream id of `peer` (on connection `conn`) in room `id`, and the room's topology.
    pub fn hub_member(
        &self,
        id: &RoomId,
        peer: &str,
        conn: u64,
    ) -> Result<(u16, Topology), ProtocolError> {
        let inner = self.lock();
        let room = inner.rooms.get(id).ok_or_else(not_joined)?;
        let me = room.held(peer, conn).ok_or_else(not_joined)?;
        Ok((room.members[me].stream, room.topology))
    }

    /// Sends `text` to member `peer` of room `id` if it is connected (nothing otherwise).
    pub fn tell(&self, id: &RoomId, peer: &str, text: String) {
        let inner = self.lock();
        let target = inner.rooms.get(id).and_then(|room| {
            room.connected()
                .find(|(m, _)| m.peer == peer)
                .map(|(_, o)| o)
        });
        if let Some(outbox) = target {
            outbox.send_text(text);
        }
    }

    /// Relays `data` from `from` (on connection `conn`) to `to`, both in room `id`.
    pub fn signal(
        &self,
        id: &RoomId,
        from: &str,
        conn: u64,
        to: &str,
        data: Map<String, Value>,
    ) -> Result<(), ProtocolError> {
        let inner = self.lock();
        let Some(room) = inner.rooms.get(id) else {
            return Err(not_joined());
        };
        if room.held(from, conn).is_none() {
            return Err(not_joined());
        }
        let target = room.connected().find(|(m, _)| m.peer == to).map(|(_, o)| o);
        let Some(outbox) = target else {
            return Err(unknown_peer(to, &id.name));
        };
        outbox.send_text(protocol::signal(from, data));
        Ok(())
    }

    /// Adds a JackTrip client named `name` to the public room `room`: the room must exist, have
    /// no password, not be locked, have a free place and run through the hub (`forward` or
    /// `mix`). Returns its new peer id, its stream id and the room's topology; the members hear
    /// `peer-joined` with `"kind":"jacktrip"`. Nothing is stored.
    pub fn add_native(
        &self,
        room: &str,
        name: &str,
    ) -> Result<(String, u16, Topology), ProtocolError> {
        let id = RoomId::new(room, None);
        let mut guard = self.lock();
        let Some(r) = guard.rooms.get_mut(&id) else {
            return Err(ProtocolError::new(
                "no-room",
                format!("There is no room \"{room}\": a browser must open it first."),
            ));
        };
        if r.password.is_some() {
            return Err(ProtocolError::new(
                "wrong-password",
                format!("Room \"{room}\" has a password; JackTrip clients cannot give one."),
            ));
        }
        if r.locked {
            return Err(ProtocolError::new(
                "room-locked",
                format!("Room \"{room}\" is locked: nobody new can join."),
            ));
        }
        if r.topology.hub_mode().is_none() {
            return Err(ProtocolError::new(
                "not-hub",
                format!(
                    "Room \"{room}\" is a mesh; its owner must switch it to forward or mix first."
                ),
            ));
        }
        let taken = r.places_taken();
        if taken >= self.cap {
            return Err(ProtocolError::new(
                "room-full",
                format!(
                    "Room \"{room}\" is full ({taken} of {} places taken).",
                    self.cap
                ),
            ));
        }
        let peer = loop {
            let peer = random_hex_id()
                .map_err(|_| ProtocolError::new("bad-message", "The server has no randomness."))?;
            if !r.has_peer(&peer) {
                break peer;
            }
        };
        let stream = r.new_stream();
        r.broadcast(&protocol::peer_joined_jacktrip(&peer, name, stream), None);
        r.natives.push(Native {
            peer: peer.clone(),
            name: name.to_owned(),
            stream,
        });
        Ok((peer, stream, r.topology))
    }

    /// Takes the JackTrip client `peer` out of room `id`; the members hear `peer-left` with
    /// `reason`. Returns whether it was there.
    pub fn remove_native(&self, id: &RoomId, peer: &str, reason: LeaveReason) -> bool {
        let mut guard = self.lock();
        let Some(room) = guard.rooms.get_mut(id) else {
            return false;
        };
        let Some(i) = room.natives.iter().position(|n| n.peer == peer) else {
            return false;
        };
        room.natives.remove(i);
        room.broadcast(&protocol::peer_left(peer, reason), None);
        true
    }

    /// Forgets expired rooms, bans and away members. Returns the number of rooms forgotten.
    pub fn purge(&self, now: u64) -> usize {
        let mut inner = self.lock();
        self.purge_locked(&mut inner, now)
    }

    fn purge_locked(&self, inner: &mut Inner, now: u64) -> usize {
        let retention = self.retention_ms;
        let expired: Vec<RoomId> = inner
            .rooms
            .iter()
            .filter(|(_, r)| r.expired(now, retention))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            inner.rooms.remove(id);
            inner.store.delete_room(id);
        }
        let Inner { rooms, store } = inner;
        for (id, room) in rooms.iter_mut() {
            room.bans.retain(|b| {
                let keep = b.until > now;
                if !keep {
                    store.delete_ban(id, &b.token);
                }
                keep
            });
            room.members.retain(|m| {
                let keep = m
                    .away_since
                    .is_none_or(|t| now.saturating_sub(t) < retention);
                if !keep {
                    store.delete_member(id, &m.peer);
                }
                keep
            });
        }
        expired.len()
    }
}

/// Forgets the empty room that has been empty longest, a room without a password if any.
fn evict_one(inner: &mut Inner) {
    let victim = inner
        .rooms
        .iter()
        .filter_map(|(id, r)| r.empty_since.map(|t| ((r.password.is_some(), t), id)))
        .min_by_key(|(order, _)| *order)
        .map(|(_, id)| id.clone());
    if let Some(id) = victim {
        inner.rooms.remove(&id);
        inner.store.delete_room(&id);
    }
}

/// The room of `peer` on `conn`, if it is an owner there.
fn owner_room<'a>(
    rooms: &'a mut HashMap<RoomId, Room>,
    id: &RoomId,
    peer: &str,
    conn: u64,
) -> Result<&'a mut Room, ProtocolError> {
    let room = rooms.get_mut(id).ok_or_else(not_joined)?;
    let me = room.held(peer, conn).ok_or_else(not_joined)?;
    if !room.members[me].owner {
        return Err(ProtocolError::new(
            "not-owner",
            "Only the room's owner can lock it, remove members or change its topology.",
        ));
    }
    Ok(room)
}

fn removed(room: &str) -> ProtocolError {
    ProtocolError::new(
        "removed",
        format!("The owner of room \"{room}\" removed you from it."),
    )
}

fn unknown_peer(peer: &str, room: &str) -> ProtocolError {
    let shown: String = peer.chars().take(40).collect();
    ProtocolError::new(
        "unknown-peer",
        format!("There is no peer {shown:?} in room \"{room}\"."),
    )
}

/// The error for signal/leave/lock/remove on a connection that is not (or no longer) in a
/// room.
pub fn not_joined() -> ProtocolError {
    ProtocolError::new("not-joined", "Join a room first.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use serde_json::json;

    const HOUR: u64 = 3_600_000;
    const T0: u64 = 1_800_000_000_000;
    const KEY: &str = "0123456789abcdefABCDEF_-";

    fn rooms_with(cap: usize, store: Box<dyn Store>, now: u64) -> Rooms {
        Rooms::new(cap, Duration::from_millis(24 * HOUR), store, now).expect("rooms load")
    }

    fn rooms(cap: usize) -> Rooms {
        let store = SqliteStore::open_in_memory().expect("an in-memory database");
        rooms_with(cap, Box::new(store), T0)
    }

    fn outbox(id: u64) -> (Outbox, mpsc::Receiver<Outbound>) {
        let (tx, rx) = mpsc::channel(16);
        (Outbox::new(id, tx, Arc::new(Notify::new())), rx)
    }

    fn join(room: &str, peer: char, token: char, password: Option<&str>) -> Join {
        Join {
            room: room.into(),
            name: format!("n{peer}"),
            peer: peer.to_string().repeat(32),
            token: token.to_string().repeat(32),
            password: password.map(String::from),
            key: None,
            owner: None,
        }
    }

    /// Joins as the connection does, with a stand-in for Argon2 ("H:" + password): hashes and
    /// checks when asked.
    fn enter(
        rooms: &Rooms,
        join: &Join,
        outbox: &Outbox,
        now: u64,
    ) -> Result<Joined, &'static str> {
        let fake_hash = format!("H:{}", join.password.as_deref().unwrap_or(""));
        let mut proof = Proof::None;
        for _ in 0..3 {
            match rooms.join(join, outbox, &proof, now).map_err(|e| e.code)? {
                Step::Joined(j) => return Ok(j),
                Step::Hash => proof = Proof::Hashed(fake_hash.clone()),
                Step::Verify(h) if *h == *fake_hash => proof = Proof::Verified(h),
                Step::Verify(_) => return Err("wrong-password"),
            }
        }
        panic!("the join did not settle")
    }

    /// Everything queued: the JSON messages and the close codes.
    fn drain(rx: &mut mpsc::Receiver<Outbound>) -> (Vec<Value>, Vec<u16>) {
        let (mut texts, mut closes) = (Vec::new(), Vec::new());
        while let Ok(m) = rx.try_recv() {
            match m {
                Outbound::Text(t) => texts.push(serde_json::from_str(&t).expect("JSON")),
                Outbound::Close(code, _) => closes.push(code),
                Outbound::Ping => {}
            }
        }
        (texts, closes)
    }

    fn texts(rx: &mut mpsc::Receiver<Outbound>) -> Vec<Value> {
        drain(rx).0
    }

    fn id(room: &str) -> RoomId {
        RoomId::new(room, None)
    }

    fn hex(c: char) -> String {
        c.to_string().repeat(32)
    }

    /// Asserts that `message` has each field of `expected`, with that value (other fields may
    /// be there too).
    #[track_caller]
    fn assert_fields(message: &Value, expected: Value) {
        let Value::Object(fields) = &expected else {
            panic!("the expected fields are a JSON object: {expected}")
        };
        let got = fields.keys().map(|k| (k.clone(), message[k].clone()));
        assert_eq!(Value::Object(got.collect()), expected, "in {message}");
    }

    /// `a`, the owner of room "r" on connection `conn`, locks or opens it.
    fn owner_a_locks(rooms: &Rooms, conn: u64, locked: bool) {
        rooms
            .set_locked(&id("r"), &hex('a'), conn, locked)
            .expect("the owner may lock and open its room");
    }

    /// The error code of a refused call, `None` if it succeeded.
    fn code<T>(result: Result<T, ProtocolError>) -> Option<&'static str> {
        result.err().map(|e| e.code)
    }

    /// The owner secret in the creator's welcome, the first message queued for it.
    fn owner_secret(rx: &mut mpsc::Receiver<Outbound>) -> String {
        let welcome = &texts(rx)[0];
        welcome["owner"]
            .as_str()
            .expect("the creator gets the owner secret")
            .to_owned()
    }

    #[test]
    fn the_creator_owns_the_room_and_sets_its_password() {
        let rooms = rooms(4);
        let (a, mut ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        assert_eq!(
            rooms.join(&join("r", 'a', '1', Some("pw")), &a, &Proof::None, T0),
            Ok(Step::Hash)
        );
        assert_eq!(
            enter(&rooms, &join("r", 'a', '1', Some("pw")), &a, T0),
            Ok(Joined::Created)
        );
        let w = &texts(&mut ra)[0];
        assert_fields(
            w,
            json!({"isOwner": true, "protected": true, "locked": false}),
        );
        let secret = w["owner"]
            .as_str()
            .expect("the creator gets the owner secret")
            .to_owned();
        assert!(protocol::is_hex_id(&secret));

        // Without the password, with a wrong one, then right.
        assert_eq!(
            enter(&rooms, &join("r", 'b', '2', None), &b, T0),
            Err("wrong-password")
        );
        assert_eq!(
            enter(&rooms, &join("r", 'b', '2', Some("PW")), &b, T0),
            Err("wrong-password")
        );
        let asked = rooms.join(&join("r", 'b', '2', Some("pw")), &b, &Proof::None, T0);
        assert_eq!(asked, Ok(Step::Verify(Arc::from("H:pw"))));
        // A proof for another hash proves nothing.
        let forged = rooms.join(
            &join("r", 'b', '2', Some("pw")),
            &b,
            &Proof::Verified(Arc::from("H:x")),
            T0,
        );
        assert_eq!(forged, Ok(Step::Verify(Arc::from("H:pw"))));
        assert_eq!(
            enter(&rooms, &join("r", 'b', '2', Some("pw")), &b, T0),
            Ok(Joined::New { members: 2 })
        );
        let w = &texts(&mut rb)[0];
        assert!(w.get("owner").is_none() && w["isOwner"] == false, "{w}");
        assert_eq!(
            w["peers"],
            json!([{"peer": hex('a'), "name": "na", "stream": 1}])
        );

        // The owner secret makes another member an owner, and is echoed to it.
        let (c, mut rc) = outbox(3);
        let mut j = join("r", 'c', '3', Some("pw"));
        j.owner = Some(secret.clone());
        assert_eq!(enter(&rooms, &j, &c, T0), Ok(Joined::New { members: 3 }));
        let w = &texts(&mut rc)[0];
        assert_fields(w, json!({"isOwner": true, "owner": secret}));
        // A wrong one is ignored.
        let (d, mut rd) = outbox(4);
        let mut j = join("r", 'd', '4', Some("pw"));
        j.owner = Some(hex('f'));
        assert_eq!(enter(&rooms, &j, &d, T0), Ok(Joined::New { members: 4 }));
        let w = &texts(&mut rd)[0];
        assert!(w.get("owner").is_none() && w["isOwner"] == false, "{w}");
    }

    #[test]
    fn a_password_for_an_open_room_is_refused() {
        let rooms = rooms(4);
        let (a, _ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        assert_eq!(
            enter(&rooms, &join("open", 'a', '1', None), &a, T0),
            Ok(Joined::Created)
        );
        assert_eq!(
            enter(&rooms, &join("open", 'b', '2', Some("x")), &b, T0),
            Err("no-password")
        );
        assert!(texts(&mut rb).is_empty());
        assert_eq!(
            enter(&rooms, &join("open", 'b', '2', None), &b, T0),
            Ok(Joined::New { members: 2 })
        );
        assert_eq!(texts(&mut rb)[0]["protected"], false);
    }

    #[test]
    fn a_private_room_is_another_room() {
        let rooms = rooms(4);
        let (a, _ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        let (c, mut rc) = outbox(3);
        let mut private = join("jam", 'a', '1', Some("secret"));
        private.key = Some(KEY.into());
        assert_eq!(enter(&rooms, &private, &a, T0), Ok(Joined::Created));
        // Without the key: a new public room of the same name, no password asked, nobody there.
        assert_eq!(
            enter(&rooms, &join("jam", 'b', '2', None), &b, T0),
            Ok(Joined::Created)
        );
        assert_eq!(texts(&mut rb)[0]["peers"], json!([]));
        // Another key: yet another room.
        let mut other = join("jam", 'c', '3', None);
        other.key = Some(format!("{}x", &KEY[1..]));
        assert_eq!(enter(&rooms, &other, &c, T0), Ok(Joined::Created));
        assert_eq!(texts(&mut rc)[0]["peers"], json!([]));
        // The right key reaches the private room and its password.
        let (d, mut rd) = outbox(4);
        let mut right = join("jam", 'd', '4', Some("secret"));
        right.key = Some(KEY.into());
        assert_eq!(
            enter(&rooms, &right, &d, T0),
            Ok(Joined::New { members: 2 })
        );
        assert_eq!(
            texts(&mut rd)[0]["peers"],
            json!([{"peer": hex('a'), "name": "na", "stream": 1}])
        );
        assert_eq!(rooms.counts(), (3, 4));
        assert_eq!(RoomId::new("jam", Some(KEY)).to_string(), "jam private");
        assert!(!RoomId::new("jam", Some(KEY)).to_string().contains(KEY));
        assert_ne!(RoomId::new("jam", Some(KEY)).tag(), id("jam").tag());
    }

    #[test]
    fn the_owner_locks_and_removes() {
        let rooms = rooms(8);
        let (a, mut ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        let (c, mut rc) = outbox(3);
        enter(&rooms, &join("r", 'a', '1', None), &a, T0).expect("a creates");
        let secret = owner_secret(&mut ra);
        enter(&rooms, &join("r", 'b', '2', None), &b, T0).expect("b joins");
        enter(&rooms, &join("r", 'c', '3', None), &c, T0).expect("c joins");
        for rx in [&mut ra, &mut rb, &mut rc] {
            texts(rx);
        }
        assert_eq!(
            code(rooms.set_locked(&id("r"), &hex('b'), 2, true)),
            Some("not-owner")
        );
        assert_eq!(
            code(rooms.remove_member(&id("r"), &hex('b'), 2, &hex('c'), T0)),
            Some("not-owner")
        );
        assert_eq!(
            code(rooms.set_locked(&id("r"), &hex('a'), 9, true)),
            Some("not-joined")
        );
        assert_eq!(code(rooms.set_locked(&id("r"), &hex('a'), 1, true)), None);
        for rx in [&mut ra, &mut rb, &mut rc] {
            assert_eq!(texts(rx), vec![json!({"type": "room", "locked": true})]);
        }
        // Locked: nobody new, but b coming back on a new connection, and the owner's secret.
        let (d, _rd) = outbox(4);
        assert_eq!(
            enter(&rooms, &join("r", 'd', '4', None), &d, T0),
            Err("room-locked")
        );
        let (b2, mut rb2) = outbox(5);
        assert_eq!(
            enter(&rooms, &join("r", 'b', '2', None), &b2, T0),
            Ok(Joined::Replaced { members: 3 })
        );
        assert_eq!(texts(&mut rb2)[0]["locked"], true);
        assert_eq!(drain(&mut rb).1, vec![protocol::CLOSE_REPLACED]);
        let mut owner_tab = join("r", 'e', '5', None);
        owner_tab.owner = Some(secret);
        let (e, _re) = outbox(6);
        assert_eq!(
            enter(&rooms, &owner_tab, &e, T0),
            Ok(Joined::New { members: 4 })
        );

        // Removing c: c hears removed and is closed with 4001, the others peer-left.
        texts(&mut ra);
        texts(&mut rc);
        assert_eq!(
            rooms.remove_member(&id("r"), &hex('a'), 1, &hex('c'), T0),
            Ok(3)
        );
        let (heard, closed) = drain(&mut rc);
        assert_eq!(heard.len(), 1);
        assert_eq!(heard[0]["code"], "removed");
        assert_eq!(closed, vec![protocol::CLOSE_REMOVED]);
        assert_eq!(
            texts(&mut ra),
            vec![json!({"type": "peer-left", "peer": hex('c'), "reason": "removed"})]
        );
        assert_eq!(
            code(rooms.remove_member(&id("r"), &hex('a'), 1, &hex('c'), T0)),
            Some("unknown-peer")
        );
        assert_eq!(
            code(rooms.remove_member(&id("r"), &hex('a'), 1, &hex('a'), T0)),
            Some("bad-message")
        );
        // c's token is refused even when the room is open again, for the retention time.
        owner_a_locks(&rooms, 1, false);
        let (c2, _rc2) = outbox(7);
        for at in [T0 + HOUR, T0 + 24 * HOUR - 1] {
            assert_eq!(
                enter(&rooms, &join("r", 'c', '3', None), &c2, at),
                Err("removed"),
                "{at}"
            );
        }
        rooms.purge(T0 + 24 * HOUR);
        assert_eq!(
            enter(&rooms, &join("r", 'c', '3', None), &c2, T0 + 24 * HOUR),
            Ok(Joined::New { members: 4 })
        );
    }

    #[test]
    fn an_empty_room_keeps_its_rules_for_the_retention_time() {
        let rooms = rooms(4);
        let (a, mut ra) = outbox(1);
        enter(&rooms, &join("r", 'a', '1', Some("pw")), &a, T0).expect("a creates");
        texts(&mut ra);
        assert_eq!(
            rooms.leave(&id("r"), &hex('a'), 1, LeaveReason::Left, T0),
            Some(0)
        );
        assert_eq!(rooms.counts(), (1, 0));
        // A guesser cannot re-create it without the password...
        let (x, _rx) = outbox(2);
        assert_eq!(
            enter(&rooms, &join("r", 'x', '9', None), &x, T0 + HOUR),
            Err("wrong-password")
        );
        // ...a's place was freed when it left (everyone was told); a comes back with the
        // password and is not the owner by that alone.
        let (a2, mut ra2) = outbox(3);
        assert_eq!(
            enter(&rooms, &join("r", 'a', '1', Some("pw")), &a2, T0 + HOUR),
            Ok(Joined::New { members: 1 })
        );
        assert_eq!(texts(&mut ra2)[0]["isOwner"], false);
        rooms.leave(&id("r"), &hex('a'), 3, LeaveReason::Closed, T0 + 2 * HOUR);
        // Expired: the next joiner creates it anew, with no password.
        rooms.purge(T0 + 26 * HOUR - 1);
        assert_eq!(rooms.counts(), (1, 0));
        assert_eq!(
            enter(&rooms, &join("r", 'x', '9', None), &x, T0 + 26 * HOUR),
            Ok(Joined::Created)
        );
    }

    #[test]
    fn a_restart_keeps_rooms_members_and_bans() {
        let rooms = rooms(4);
        let (a, mut ra) = outbox(1);
        let (b, _rb) = outbox(2);
        let (c, _rc) = outbox(3);
        enter(&rooms, &join("r", 'a', '1', Some("pw")), &a, T0).expect("a creates");
        let secret = owner_secret(&mut ra);
        enter(&rooms, &join("r", 'b', '2', Some("pw")), &b, T0).expect("b joins");
        enter(&rooms, &join("r", 'c', '3', Some("pw")), &c, T0).expect("c joins");
        owner_a_locks(&rooms, 1, true);
        rooms
            .remove_member(&id("r"), &hex('a'), 1, &hex('c'), T0)
            .expect("remove c");
        // Shutdown: a is forgotten (keeps its place); b's process dies without a word.
        assert_eq!(rooms.forget(&id("r"), &hex('a'), 1, T0 + 10), Some(1));
        let store = rooms.into_store();

        let later = T0 + HOUR;
        let rooms = rooms_with(4, store, later);
        assert_eq!(rooms.counts(), (1, 0));
        // Still locked and still protected; c still removed.
        let (x, _rx) = outbox(10);
        for (peer, token, password, refused) in [
            ('x', '9', Some("pw"), "room-locked"),
            ('x', '9', None, "wrong-password"),
            ('c', '3', Some("pw"), "removed"),
        ] {
            assert_eq!(
                enter(&rooms, &join("r", peer, token, password), &x, later),
                Err(refused)
            );
        }
        // a comes back with its token (no password needed) and is still the owner.
        let (a2, mut ra2) = outbox(11);
        assert_eq!(
            enter(&rooms, &join("r", 'a', '1', None), &a2, later),
            Ok(Joined::New { members: 1 })
        );
        let w = &texts(&mut ra2)[0];
        assert_fields(
            w,
            json!({"isOwner": true, "locked": true, "protected": true}),
        );
        assert!(
            w.get("owner").is_none(),
            "the secret is only echoed to whoever gives it"
        );
        // Even with the room open and the password, nobody can take b's peer id.
        owner_a_locks(&rooms, 11, false);
        texts(&mut ra2);
        assert_eq!(
            enter(&rooms, &join("r", 'b', '9', Some("pw")), &x, later),
            Err("peer-id-taken")
        );
        let (b2, mut rb2) = outbox(12);
        assert_eq!(
            enter(&rooms, &join("r", 'b', '2', Some("pw")), &b2, later),
            Ok(Joined::New { members: 2 })
        );
        assert_eq!(
            texts(&mut rb2)[0]["peers"],
            json!([{"peer": hex('a'), "name": "na", "stream": 1}])
        );
        assert_eq!(
            texts(&mut ra2),
            vec![json!({"type": "peer-joined", "peer": hex('b'), "name": "nb", "stream": 2})]
        );
        // The owner secret still works.
        let (d, mut rd) = outbox(13);
        let mut j = join("r", 'd', '4', Some("pw"));
        j.owner = Some(secret);
        assert_eq!(enter(&rooms, &j, &d, later), Ok(Joined::New { members: 3 }));
        assert_eq!(texts(&mut rd)[0]["isOwner"], true);
    }

    #[test]
    fn rooms_that_expired_while_the_server_was_down_are_forgotten() {
        let rooms = rooms(4);
        let (a, _ra) = outbox(1);
        enter(&rooms, &join("r", 'a', '1', Some("pw")), &a, T0).expect("a creates");
        rooms.forget(&id("r"), &hex('a'), 1, T0);
        let store = rooms.into_store();
        let rooms = rooms_with(4, store, T0 + 24 * HOUR);
        assert_eq!(rooms.counts(), (0, 0));
        let store = rooms.into_store();
        let rooms = rooms_with(4, store, T0);
        assert_eq!(rooms.counts(), (0, 0), "and deleted from the store");
    }

    #[test]
    fn a_crash_leaves_members_away_from_the_restart_on() {
        let rooms = rooms(4);
        let (a, _ra) = outbox(1);
        enter(&rooms, &join("r", 'a', '1', None), &a, T0).expect("a creates");
        // No forget, no leave: the process died.
        let store = rooms.into_store();
        let restart = T0 + 30 * HOUR;
        let rooms = rooms_with(4, store, restart);
        assert_eq!(
            rooms.counts(),
            (1, 0),
            "kept: the retention starts at the restart"
        );
        let (x, _rx) = outbox(2);
        assert_eq!(
            enter(&rooms, &join("r", 'a', '9', None), &x, restart),
            Err("peer-id-taken")
        );
        rooms.purge(restart + 24 * HOUR);
        assert_eq!(rooms.counts(), (0, 0));
    }

    #[test]
    fn jacktrip_clients_join_public_hub_rooms_only() {
        let rooms = rooms(3);
        assert_eq!(code(rooms.add_native("r", "Jo")), Some("no-room"));
        let (a, mut ra) = outbox(1);
        enter(&rooms, &join("r", 'a', '1', None), &a, T0).expect("a creates r");
        assert_eq!(code(rooms.add_native("r", "Jo")), Some("not-hub"));
        rooms
            .set_topology(&id("r"), &hex('a'), 1, Topology::Mix)
            .expect("the owner sets the topology");
        owner_a_locks(&rooms, 1, true);
        assert_eq!(code(rooms.add_native("r", "Jo")), Some("room-locked"));
        owner_a_locks(&rooms, 1, false);
        texts(&mut ra);
        let (jo, stream, mode) = rooms.add_native("r", "Jo").expect("Jo joins");
        assert_eq!((stream, mode), (2, Topology::Mix));
        assert_eq!(jo.len(), 32);
        assert!(jo.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            texts(&mut ra),
            vec![
                json!({"type": "peer-joined", "peer": jo, "name": "Jo", "stream": 2,
                        "kind": "jacktrip"})
            ]
        );
        // A browser joining later sees it listed; natives count toward the cap (3).
        let (b, mut rb) = outbox(2);
        enter(&rooms, &join("r", 'b', '2', None), &b, T0).expect("b");
        let w = texts(&mut rb).remove(0);
        assert_eq!(w["stream"], 3);
        assert_eq!(
            w["peers"],
            json!([{"peer": hex('a'), "name": "na", "stream": 1},
                   {"peer": jo, "name": "Jo", "stream": 2, "kind": "jacktrip"}])
        );
        assert_eq!(code(rooms.add_native("r", "Max")), Some("room-full"));
        let (c, _rc) = outbox(3);
        assert_eq!(
            enter(&rooms, &join("r", 'c', '3', None), &c, T0),
            Err("room-full")
        );
        assert_eq!(rooms.counts(), (1, 2), "natives are not connected members");
        texts(&mut ra);
        assert!(rooms.remove_native(&id("r"), &jo, LeaveReason::Timeout));
        assert!(!rooms.remove_native(&id("r"), &jo, LeaveReason::Left));
        assert_eq!(
            texts(&mut ra),
            vec![json!({"type": "peer-left", "peer": jo, "reason": "timeout"})]
        );
        // Its place is free again; its stream id is not handed out again at once.
        let (_, stream, _) = rooms.add_native("r", "Max").expect("Max joins");
        assert_eq!(stream, 4);
        // While Max is in the room it cannot go back to a mesh, which cannot carry him.
        let refused = rooms.set_topology(&id("r"), &hex('a'), 1, Topology::Mesh);
        assert_eq!(
            refused.as_ref().map_err(|e| e.code),
            Err("topology-refused")
        );
        let message = refused.expect_err("refused").message;
        assert!(message.contains("Max"), "{message}");
        assert_eq!(
            rooms.set_topology(&id("r"), &hex('a'), 1, Topology::Forward),
            Ok(true),
            "another hub mode is fine"
        );
        // A room with a password, or a private room, is not for JackTrip clients.
        let (d, _rd) = outbox(4);
        enter(&rooms, &join("p", 'd', '4', Some("pw")), &d, T0).expect("d creates p");
        rooms
            .set_topology(&id("p"), &hex('d'), 4, Topology::Forward)
            .expect("the owner sets the topology");
        assert_eq!(code(rooms.add_native("p", "Jo")), Some("wrong-password"));
        let mut private = join("q", 'e', '5', None);
        private.key = Some(KEY.into());
        let (e, _re) = outbox(5);
        enter(&rooms, &private, &e, T0).expect("e creates private q");
        assert_eq!(code(rooms.add_native("q", "Jo")), Some("no-room"));
    }

    #[test]
    fn jacktrip_clients_are_never_stored() {
        let store = SqliteStore::open_in_memory().expect("an in-memory database");
        let rooms = rooms_with(4, Box::new(store), T0);
        let (a, _ra) = outbox(1);
        enter(&rooms, &join("r", 'a', '1', None), &a, T0).expect("a creates r");
        rooms
            .set_topology(&id("r"), &hex('a'), 1, Topology::Forward)
            .expect("the owner sets the topology");
        rooms.add_native("r", "Jo").expect("Jo joins");
        let store = rooms.into_store();
        let rooms = rooms_with(4, store, T0 + 1);
        let (b, mut rb) = outbox(2);
        enter(&rooms, &join("r", 'b', '2', None), &b, T0 + 1).expect("b");
        let w = texts(&mut rb).remove(0);
        assert_eq!(w["peers"], json!([]), "a is away, Jo is gone: {w}");
    }

    #[test]
    fn cap_replace_leave_and_signals() {
        let rooms = rooms(2);
        let (a, mut ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        let (c, _rc) = outbox(3);
        enter(&rooms, &join("r", 'a', '1', None), &a, T0).expect("a");
        enter(&rooms, &join("r", 'b', '2', None), &b, T0).expect("b");
        assert_eq!(
            enter(&rooms, &join("r", 'c', '3', None), &c, T0),
            Err("room-full")
        );
        assert_eq!(
            enter(&rooms, &join("r", 'a', '9', None), &c, T0),
            Err("peer-id-taken")
        );
        assert_eq!(texts(&mut ra).len(), 2, "welcome and peer-joined");
        assert_eq!(texts(&mut rb).len(), 1, "welcome");
        // b reconnects on connection 3 with its token, at the cap: a hears nothing.
        assert_eq!(
            enter(&rooms, &join("r", 'b', '2', None), &c, T0),
            Ok(Joined::Replaced { members: 2 })
        );
        assert!(texts(&mut ra).is_empty());
        assert_eq!(texts(&mut rb)[0]["code"], "replaced");
        assert!(rooms
            .signal(&id("r"), &hex('a'), 1, &hex('b'), Map::new())
            .is_ok());
        assert!(
            rooms
                .signal(&id("r"), &hex('b'), 2, &hex('a'), Map::new())
                .is_err(),
            "old connection"
        );
        assert_eq!(
            code(rooms.signal(&id("r"), &hex('a'), 1, &hex('z'), Map::new())),
            Some("unknown-peer")
        );
        // The old connection going away changes nothing; the new one leaving does.
        assert_eq!(
            rooms.leave(&id("r"), &hex('b'), 2, LeaveReason::Closed, T0),
            None
        );
        assert_eq!(
            rooms.leave(&id("r"), &hex('b'), 3, LeaveReason::Left, T0),
            Some(1)
        );
        assert_eq!(texts(&mut ra)[0]["reason"], "left");
    }

    #[test]
    fn a_dropped_member_keeps_its_place_one_that_left_gives_it_up() {
        let rooms = rooms(4);
        let (a, mut ra) = outbox(1);
        let (b, _rb) = outbox(2);
        enter(&rooms, &join("r", 'a', '1', Some("pw")), &a, T0).expect("a creates");
        enter(&rooms, &join("r", 'b', '2', Some("pw")), &b, T0).expect("b joins");
        owner_a_locks(&rooms, 1, true);
        texts(&mut ra);
        // b's connection drops: a is told, b keeps its place.
        assert_eq!(
            rooms.leave(&id("r"), &hex('b'), 2, LeaveReason::Closed, T0),
            Some(1)
        );
        assert_eq!(texts(&mut ra)[0]["reason"], "closed");
        let (x, _rx) = outbox(3);
        assert_eq!(
            enter(&rooms, &join("r", 'b', '9', Some("pw")), &x, T0),
            Err("room-locked")
        );
        owner_a_locks(&rooms, 1, false);
        assert_eq!(
            enter(&rooms, &join("r", 'b', '9', Some("pw")), &x, T0),
            Err("peer-id-taken")
        );
        owner_a_locks(&rooms, 1, true);
        // b comes back with its token: no password, through the lock, announced again.
        texts(&mut ra);
        let (b2, mut rb2) = outbox(4);
        assert_eq!(
            enter(&rooms, &join("r", 'b', '2', None), &b2, T0 + 5),
            Ok(Joined::New { members: 2 })
        );
        assert_eq!(texts(&mut rb2)[0]["type"], "welcome");
        assert_eq!(texts(&mut ra)[0]["type"], "peer-joined");
        // Leaving on purpose gives the place up: the token no longer opens the lock.
        assert_eq!(
            rooms.leave(&id("r"), &hex('b'), 4, LeaveReason::Left, T0 + 6),
            Some(1)
        );
        assert_eq!(
            enter(&rooms, &join("r", 'b', '2', Some("pw")), &b2, T0 + 7),
            Err("room-locked")
        );
    }

    #[test]
    fn zero_retention_forgets_a_room_when_it_empties() {
        let store = SqliteStore::open_in_memory().expect("memory");
        let rooms = Rooms::new(4, Duration::ZERO, Box::new(store), T0).expect("rooms");
        let (a, _ra) = outbox(1);
        enter(&rooms, &join("r", 'a', '1', Some("pw")), &a, T0).expect("a creates");
        rooms.leave(&id("r"), &hex('a'), 1, LeaveReason::Left, T0);
        assert_eq!(rooms.counts(), (0, 0));
    }

    #[test]
    fn away_places_are_bounded() {
        let rooms = rooms(2);
        // Three restarts, each with two members who never come back.
        let mut store: Box<dyn Store> = rooms.into_store();
        for (round, peers) in [['a', 'b'], ['c', 'd'], ['e', 'f']].iter().enumerate() {
            let now = T0 + round as u64;
            let rooms = rooms_with(2, store, now);
            for (i, p) in peers.iter().enumerate() {
                let (o, _r) = outbox(i as u64 + 1);
                enter(&rooms, &join("r", *p, '1', None), &o, now).expect("joins");
                rooms.forget(&id("r"), &hex(*p), i as u64 + 1, now);
            }
            store = rooms.into_store();
        }
        let rooms = rooms_with(2, store, T0 + 10);
        let kept = rooms.lock().rooms.get(&id("r")).map(|r| r.members.len());
        assert_eq!(kept, Some(4), "at most twice the cap");
        // The oldest went: a may be claimed again, e may not.
        let (x, _rx) = outbox(9);
        assert_eq!(
            enter(&rooms, &join("r", 'a', '9', None), &x, T0 + 10),
            Ok(Joined::New { members: 1 })
        );
        let (y, _ry) = outbox(10);
        assert_eq!(
            enter(&rooms, &join("r", 'e', '9', None), &y, T0 + 10),
            Err("peer-id-taken")
        );
    }

    #[test]
    fn a_full_outbox_kills_the_connection_not_the_room() {
        use std::future::Future;
        let rooms = rooms(4);
        let (tx, _rx_kept_full) = mpsc::channel(1);
        let kill = Arc::new(Notify::new());
        let slow = Outbox::new(1, tx, kill.clone());
        let (a, _ra) = outbox(2);
        assert!(enter(&rooms, &join("r", 's', '1', None), &slow, T0).is_ok()); // fills the queue
        assert!(enter(&rooms, &join("r", 'a', '2', None), &a, T0).is_ok()); // overflows it
        let notified = kill.notified();
        tokio::pin!(notified);
        // The permit stored by notify_one makes the first poll ready.
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(notified.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_mesh_listener_on_a_narrow_path_gets_a_layer_its_senders_are_told_of() {
        use crate::hub::controller::{Policy, Report};
        let rooms = rooms(8);
        let cap = MeshRules {
            policy: Policy::Capacity,
            hub: false,
        };
        let (a, mut ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        let (c, mut rc) = outbox(3);
        for (p, t, o) in [('a', '1', &a), ('b', '2', &b), ('c', '3', &c)] {
            enter(&rooms, &join("r", p, t, None), o, T0).expect("joins");
        }
        for rx in [&mut ra, &mut rb, &mut rc] {
            texts(rx);
        }
        let report = |received_bps: f64, loss: f64| Report {
            received_bps,
            loss,
            delay_rise_ms_per_s: 0.0,
            rtt_ms: 20.0,
            capacity_bps: None,
        };
        // c's path carries 1 Mbit/s of the two streams' 3.4: it steps down at once.
        let mesh = rooms.reception(&id("r"), &hex('c'), 3, &report(1e6, 0.3), cap, T0 + 1000);
        assert_eq!(mesh, Ok(true));
        let notice = &texts(&mut rc)[0];
        assert_fields(
            notice,
            json!({"type": "layer", "layer": "opus-64", "mesh": true}),
        );
        assert!(notice["reason"]
            .as_str()
            .unwrap()
            .contains("30.0 % of packets lost"));
        for rx in [&mut ra, &mut rb] {
            assert_eq!(
                texts(rx),
                [json!({"type": "send-layer", "peer": hex('c'), "layer": "opus-64"})]
            );
        }
        // Clean reports for less than the hold change nothing; nobody else is told anything.
        for k in 2..5 {
            let r = rooms.reception(
                &id("r"),
                &hex('c'),
                3,
                &report(5e5, 0.0),
                cap,
                T0 + k * 1000,
            );
            assert_eq!(r, Ok(true));
        }
        assert!(texts(&mut ra).is_empty() && texts(&mut rc).is_empty());
        // Someone else's connection cannot report for c.
        let forged = rooms.reception(&id("r"), &hex('c'), 1, &report(1e6, 0.3), cap, T0);
        assert_eq!(code(forged), Some("not-joined"));
        // A newcomer learns what c takes of its stream (and the others get peer-joined only).
        let (d, mut rd) = outbox(4);
        enter(&rooms, &join("r", 'd', '4', None), &d, T0 + 5000).expect("joins");
        let got = texts(&mut rd);
        assert_eq!(got[0]["type"], "welcome");
        assert_eq!(
            got[1..],
            [json!({"type": "send-layer", "peer": hex('c'), "layer": "opus-64"})]
        );
        // The room goes through the hub: every sender is told c takes the packets as sent, and
        // reports are the hub's from then on.
        texts(&mut ra);
        rooms
            .set_topology(&id("r"), &hex('a'), 1, Topology::Forward)
            .expect("the owner moves the room");
        let got = texts(&mut rb);
        assert!(
            got.contains(&json!({"type": "send-layer", "peer": hex('c'), "layer": "as-sent"})),
            "{got:?}"
        );
        assert!(!texts(&mut rc).iter().any(|m| m["type"] == "send-layer"));
        let hub = rooms.reception(&id("r"), &hex('c'), 3, &report(1e6, 0.3), cap, T0 + 6000);
        assert_eq!(hub, Ok(false));
    }

    #[test]
    fn on_a_server_with_a_hub_mesh_layers_wait_for_the_owners_mesh() {
        use crate::hub::controller::{Policy, Report};
        let rooms = rooms(8);
        let (a, mut ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        let (c, _rc) = outbox(3);
        for (p, t, o) in [('a', '1', &a), ('b', '2', &b), ('c', '3', &c)] {
            enter(&rooms, &join("r", p, t, None), o, T0).expect("joins");
        }
        texts(&mut ra);
        texts(&mut rb);
        let auto = MeshRules {
            policy: Policy::Capacity,
            hub: true,
        };
        let lossy = Report {
            received_bps: 1e6,
            loss: 0.3,
            delay_rise_ms_per_s: 0.0,
            rtt_ms: 20.0,
            capacity_bps: None,
        };
        // The server has a hub: a mesh its paths cannot carry is the hub's; nobody is told.
        let r = rooms.reception(&id("r"), &hex('c'), 3, &lossy, auto, T0 + 1000);
        assert_eq!(r, Ok(true));
        assert!(texts(&mut ra).is_empty());
        // The owner keeps the mesh: its listeners get layers.
        rooms
            .set_topology(&id("r"), &hex('a'), 1, Topology::Mesh)
            .expect("the owner pins the mesh");
        texts(&mut ra);
        let r = rooms.reception(&id("r"), &hex('c'), 3, &lossy, auto, T0 + 2000);
        assert_eq!(r, Ok(true));
        assert_eq!(
            texts(&mut ra),
            [json!({"type": "send-layer", "peer": hex('c'), "layer": "opus-64"})]
        );
    }
}
