//! Rooms and their members. One lock over all rooms; nothing inside it waits: messages to
//! members go into their bounded outboxes with `try_send`, and a member whose outbox is full is
//! told to close (a slow receiver never blocks the room).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value};
use tokio::sync::{mpsc, Notify};

use crate::password::{secrets_equal, PasswordHash};
use crate::protocol::{self, Join, LeaveReason, ProtocolError};

/// What a connection's writer sends on the socket.
#[derive(Debug)]
pub enum Outbound {
    Text(String),
    Ping,
    Close(u16, &'static str),
}

/// The sending side of one connection: its outbound queue and a way to make it close.
#[derive(Clone)]
pub struct Outbox {
    id: u64,
    tx: mpsc::Sender<Outbound>,
    kill: Arc<Notify>,
}

impl Outbox {
    pub fn new(id: u64, tx: mpsc::Sender<Outbound>, kill: Arc<Notify>) -> Self {
        Self { id, tx, kill }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Queues `msg` without waiting. If the queue is full, the connection is told to close.
    pub fn send(&self, msg: Outbound) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(msg) {
            self.kill.notify_one();
        }
    }

    pub fn send_text(&self, text: String) {
        self.send(Outbound::Text(text));
    }
}

struct Member {
    peer: String,
    name: String,
    token: String,
    outbox: Outbox,
}

struct Room {
    password: Option<PasswordHash>,
    members: Vec<Member>,
}

/// How a join went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    /// A new member; `members` counts it.
    New { members: usize },
    /// The peer was already a member on another connection, which it now replaces.
    Replaced { members: usize },
}

/// All rooms of the server.
pub struct Rooms {
    cap: usize,
    rooms: Mutex<HashMap<String, Room>>,
}

impl Rooms {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            rooms: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Room>> {
        // Nothing under the lock can panic half-way through an update, so a poisoned map is
        // still consistent.
        self.rooms.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the connection `outbox` to the room as `join.peer`. On success the welcome has been
    /// queued to `outbox` and `peer-joined` to the others (not on a replacement).
    pub fn join(&self, join: &Join, outbox: &Outbox) -> Result<Joined, ProtocolError> {
        let mut rooms = self.lock();
        let room = match rooms.get_mut(&join.room) {
            Some(room) => room,
            None => {
                let password = match &join.password {
                    Some(pw) => Some(PasswordHash::new(pw).map_err(|_| {
                        ProtocolError::new(
                            "bad-message",
                            "The server could not set the room password (no randomness).",
                        )
                    })?),
                    None => None,
                };
                rooms.entry(join.room.clone()).or_insert(Room {
                    password,
                    members: Vec::new(),
                })
            }
        };
        if let Some(hash) = &room.password {
            let given = join.password.as_deref().unwrap_or("");
            if join.password.is_none() || !hash.matches(given) {
                let message = if join.password.is_none() {
                    format!("Room \"{}\" needs a password.", join.room)
                } else {
                    format!("Wrong password for room \"{}\".", join.room)
                };
                return Err(ProtocolError::new("wrong-password", message));
            }
        }
        let existing = room.members.iter().position(|m| m.peer == join.peer);
        if let Some(i) = existing {
            let member = &mut room.members[i];
            if !secrets_equal(&member.token, &join.token) {
                return Err(ProtocolError::new(
                    "peer-id-taken",
                    format!(
                        "Peer id {} is already in room \"{}\".",
                        join.peer, join.room
                    ),
                ));
            }
            let old = std::mem::replace(&mut member.outbox, outbox.clone());
            member.name = join.name.clone();
            old.send_text(
                ProtocolError::new(
                    "replaced",
                    "This peer joined the room again on a newer connection.",
                )
                .to_json(),
            );
            old.send(Outbound::Close(1000, "replaced"));
            outbox.send_text(welcome(&join.room, &join.peer, room, self.cap));
            return Ok(Joined::Replaced {
                members: room.members.len(),
            });
        }
        if room.members.len() >= self.cap {
            return Err(ProtocolError::new(
                "room-full",
                format!(
                    "Room \"{}\" is full ({} of {} places taken).",
                    join.room,
                    room.members.len(),
                    self.cap
                ),
            ));
        }
        outbox.send_text(welcome(&join.room, &join.peer, room, self.cap));
        let announcement = protocol::peer_joined(&join.peer, &join.name);
        for m in &room.members {
            m.outbox.send_text(announcement.clone());
        }
        room.members.push(Member {
            peer: join.peer.clone(),
            name: join.name.clone(),
            token: join.token.clone(),
            outbox: outbox.clone(),
        });
        Ok(Joined::New {
            members: room.members.len(),
        })
    }

    /// Removes `peer` from `room` if connection `conn` still holds it, announcing `peer-left`.
    /// Returns the number of members left, or `None` if nothing was removed (e.g. the member
    /// had been replaced by a newer connection).
    pub fn leave(&self, room: &str, peer: &str, conn: u64, reason: LeaveReason) -> Option<usize> {
        self.remove(room, peer, conn, Some(reason))
    }

    /// Removes `peer` from `room` like [`Rooms::leave`] but tells no one: on shutdown, when
    /// every member goes at once and all rejoin when the server is back.
    pub fn forget(&self, room: &str, peer: &str, conn: u64) -> Option<usize> {
        self.remove(room, peer, conn, None)
    }

    fn remove(
        &self,
        room: &str,
        peer: &str,
        conn: u64,
        announce: Option<LeaveReason>,
    ) -> Option<usize> {
        let mut rooms = self.lock();
        let r = rooms.get_mut(room)?;
        let i = r
            .members
            .iter()
            .position(|m| m.peer == peer && m.outbox.id == conn)?;
        r.members.remove(i);
        let remaining = r.members.len();
        if remaining == 0 {
            rooms.remove(room);
        } else if let Some(reason) = announce {
            let announcement = protocol::peer_left(peer, reason);
            for m in &r.members {
                m.outbox.send_text(announcement.clone());
            }
        }
        Some(remaining)
    }

    /// Relays `data` from `from` (on connection `conn`) to `to`, both in `room`.
    pub fn signal(
        &self,
        room: &str,
        from: &str,
        conn: u64,
        to: &str,
        data: Map<String, Value>,
    ) -> Result<(), ProtocolError> {
        let rooms = self.lock();
        let members = rooms.get(room).map_or(&[][..], |r| &r.members[..]);
        if !members
            .iter()
            .any(|m| m.peer == from && m.outbox.id == conn)
        {
            return Err(not_joined());
        }
        let target = members.iter().find(|m| m.peer == to);
        match target {
            Some(m) => {
                m.outbox.send_text(protocol::signal(from, data));
                Ok(())
            }
            None => {
                let shown: String = to.chars().take(40).collect();
                Err(ProtocolError::new(
                    "unknown-peer",
                    format!("There is no peer {shown:?} in room \"{room}\"."),
                ))
            }
        }
    }
}

/// The error for signal/leave on a connection that is not (or no longer) in a room.
pub fn not_joined() -> ProtocolError {
    ProtocolError::new("not-joined", "Join a room first.")
}

fn welcome(name: &str, peer: &str, room: &Room, cap: usize) -> String {
    let others: Vec<(String, String)> = room
        .members
        .iter()
        .filter(|m| m.peer != peer)
        .map(|m| (m.peer.clone(), m.name.clone()))
        .collect();
    let info = protocol::WelcomeRoom {
        owner_secret: None,
        is_owner: false,
        locked: false,
        protected: room.password.is_some(),
    };
    protocol::welcome(name, peer, &others, cap, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox(id: u64) -> (Outbox, mpsc::Receiver<Outbound>) {
        let (tx, rx) = mpsc::channel(4);
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

    fn texts(rx: &mut mpsc::Receiver<Outbound>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(m) = rx.try_recv() {
            if let Outbound::Text(t) = m {
                out.push(t);
            }
        }
        out
    }

    #[test]
    fn password_cap_replace_and_leave() {
        let rooms = Rooms::new(2);
        let (a, mut ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        let (c, _rc) = outbox(3);
        assert_eq!(
            rooms.join(&join("r", 'a', '1', Some("pw")), &a),
            Ok(Joined::New { members: 1 })
        );
        let err = |r: Result<Joined, ProtocolError>| r.err().map(|e| e.code);
        assert_eq!(
            err(rooms.join(&join("r", 'b', '2', None), &b)),
            Some("wrong-password")
        );
        assert_eq!(
            err(rooms.join(&join("r", 'b', '2', Some("PW")), &b)),
            Some("wrong-password")
        );
        assert_eq!(
            rooms.join(&join("r", 'b', '2', Some("pw")), &b),
            Ok(Joined::New { members: 2 })
        );
        assert_eq!(
            err(rooms.join(&join("r", 'c', '3', Some("pw")), &c)),
            Some("room-full")
        );
        assert_eq!(
            err(rooms.join(&join("r", 'a', '9', Some("pw")), &c)),
            Some("peer-id-taken")
        );
        assert_eq!(texts(&mut ra).len(), 2, "welcome and peer-joined");
        assert_eq!(texts(&mut rb).len(), 1, "welcome");

        // b reconnects on connection 3 with its token: a hears nothing.
        assert_eq!(
            rooms.join(&join("r", 'b', '2', Some("pw")), &c),
            Ok(Joined::Replaced { members: 2 })
        );
        assert!(texts(&mut ra).is_empty());
        assert!(texts(&mut rb)[0].contains("replaced"));
        // The old connection going away changes nothing; the new one leaving does.
        assert_eq!(
            rooms.leave("r", &"b".repeat(32), 2, LeaveReason::Closed),
            None
        );
        assert_eq!(
            rooms.leave("r", &"b".repeat(32), 3, LeaveReason::Left),
            Some(1)
        );
        assert!(texts(&mut ra)[0].contains(r#""reason":"left""#));
        // The last one leaving forgets the room and its password.
        assert_eq!(
            rooms.leave("r", &"a".repeat(32), 1, LeaveReason::Left),
            Some(0)
        );
        assert_eq!(
            rooms.join(&join("r", 'c', '3', None), &c),
            Ok(Joined::New { members: 1 })
        );
    }

    #[test]
    fn signals_stay_in_their_room() {
        let rooms = Rooms::new(4);
        let (a, _ra) = outbox(1);
        let (b, mut rb) = outbox(2);
        let (c, _rc) = outbox(3);
        assert!(rooms.join(&join("r1", 'a', '1', None), &a).is_ok());
        assert!(rooms.join(&join("r1", 'b', '2', None), &b).is_ok());
        assert!(rooms.join(&join("r2", 'c', '3', None), &c).is_ok());
        texts(&mut rb);
        assert!(rooms
            .signal("r1", &"a".repeat(32), 1, &"b".repeat(32), Map::new())
            .is_ok());
        assert_eq!(texts(&mut rb).len(), 1);
        let e = rooms.signal("r1", &"a".repeat(32), 1, &"c".repeat(32), Map::new());
        assert_eq!(e.err().map(|e| e.code), Some("unknown-peer"));
    }

    #[test]
    fn a_full_outbox_kills_the_connection_not_the_room() {
        use std::future::Future;
        let rooms = Rooms::new(4);
        let (tx, _rx_kept_full) = mpsc::channel(1);
        let kill = Arc::new(Notify::new());
        let slow = Outbox::new(1, tx, kill.clone());
        let (a, _ra) = outbox(2);
        assert!(rooms.join(&join("r", 's', '1', None), &slow).is_ok()); // fills the queue
        assert!(rooms.join(&join("r", 'a', '2', None), &a).is_ok()); // overflows it
        let notified = kill.notified();
        tokio::pin!(notified);
        // The permit stored by notify_one makes the first poll ready.
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(notified.as_mut().poll(&mut cx).is_ready());
    }
}
