//! The signaling protocol spoken on `GET /ws`: JSON text messages, one object per WebSocket
//! message. The browser client is written against exactly this description.
//!
//! # Rooms
//!
//! A room is identified by its name and, for a private room, its key: `(room, key)`. A join
//! without the key, or with another key, addresses a DIFFERENT room of the same name, so a wrong
//! guess never learns that a private room exists. The server keeps only a SHA-256 of the key,
//! and its logs show the room's name and `private`, never the key.
//!
//! The first joiner of a room creates it: it sets the room's password (none if it gives none)
//! and becomes its owner, receiving the owner secret in its welcome. A room is kept, with its
//! password, owner secret, locked flag, member tokens and bans, while it has members and for the
//! server's room retention time (`--room-retention-hours`, 24 by default) after its last member
//! left, across server restarts. After that it is forgotten and the next joiner creates it anew.
//!
//! # Client → server
//!
//! - `{"type":"join","room":R,"name":N,"peer":P,"token":T,"password"?:W,"key"?:K,"owner"?:O}`
//!   - `R`: room name, 1–64 chars of `[A-Za-z0-9._~-]` (it appears in links `/r/<room>`),
//!     case-sensitive.
//!   - `N`: display name, 1–40 Unicode chars after trimming white space. Rejected (not
//!     stripped, all `bad-name`): control characters; bidi embedding, override and isolate
//!     characters U+202A–U+202E and U+2066–U+2069; a name with no visible character, only
//!     zero-width, format or filler characters.
//!   - `P`: the client's own peer id, 32 lowercase hex chars, chosen once per page load. A client
//!     that reconnects (e.g. after a server restart) keeps its identity, so existing peer-to-peer
//!     links survive.
//!   - `T`: 32 lowercase hex chars, a secret the client chose with `P`. The room remembers the
//!     token of each member `P` while the room is kept (also across a restart), including
//!     members whose connection dropped, timed out or was cut by a shutdown; a member that sent
//!     `leave` or was removed gives its place up. A join as `P`
//!     with the remembered token is that member coming back: it needs no password and gets in
//!     even when the room is locked; if `P` is still connected on another (older) connection,
//!     the old one gets error `replaced` and is closed (1000), nothing is announced to the
//!     others, the member simply continues on the new socket. A join as `P` with another token
//!     fails with `peer-id-taken`.
//!   - `W`: optional password, at most 128 bytes. The creator's password, if any, is the room's.
//!     A later joiner of a room with a password must give it (else `wrong-password`; the
//!     connection stays open and the client may retry). A joiner who gives a password to a room
//!     without one is refused with `no-password` (so nobody believes an open room is
//!     protected); it may join again without it. Wrong passwords are limited per client address
//!     and per room (see Limits): over the limit the join gets `too-many-attempts` before the
//!     password is even checked. The server keeps only an Argon2id hash of the password.
//!   - `K`: optional private room key, 22–64 chars of `[A-Za-z0-9_-]`, carried in the room
//!     link's fragment (`/r/<room>#k=<key>`), never in an HTTP request.
//!   - `O`: optional owner secret (32 lowercase hex) that a previous welcome of this room gave
//!     the client. A join with the right one makes the member an owner; a wrong one is ignored.
//!   - A room that is locked admits nobody new (`room-locked`), only returning members.
//!   - A token the owner removed from the room is refused for the retention time (`removed`,
//!     then the connection is closed with 4001).
//!   - A connection is in at most one room: a second join gives `already-joined`.
//! - `{"type":"signal","to":P2,"data":D}`: `D` any JSON object. Relayed only if the sender and
//!   `P2` are members of the same room, as `{"type":"signal","from":P,"data":D}`; otherwise
//!   error `unknown-peer` (nothing is revealed about other rooms).
//! - `{"type":"leave"}`: leaves the room (announced as `peer-left` with reason `left`); the
//!   connection stays open and may join again.
//! - `{"type":"lock","locked":B}` (owner only, else `not-owner`): a locked room admits nobody
//!   new; members who come back with their token still get in. Every member, the owner
//!   included, gets `{"type":"room","locked":B}`.
//! - `{"type":"remove","peer":P2}` (owner only, else `not-owner`): `P2` gets error `removed`
//!   and its connection is closed with code 4001; the others get `peer-left` with reason
//!   `removed`; `P2`'s token is refused by the room for the retention time. Removing oneself
//!   is `bad-message` (leave instead); a `P2` not in the room is `unknown-peer`.
//! - `hub-offer`, `topology` and `hub-mix`: the hub's messages, described in
//!   [`crate::hub::signal`]; `uplink`, a member's report that the mesh no longer fits its
//!   uplink, in [`crate::hub::uplink`]; `reception`, a hub listener's report of what
//!   reaches it, and S→C `layer`, the format it then takes, in [`crate::hub::controller`]; in
//!   a mesh the same report and notice, and S→C `send-layer` to the others, in
//!   [`crate::mesh_layers`].
//! - `{"type":"ping","t":number?}` → `{"type":"pong","t":same}` (`t` omitted if it was absent),
//!   answered whether joined or not.
//!
//! # Server → client
//!
//! - `{"type":"welcome","room":R,"peer":P,"stream":S,"peers":[{"peer":P2,"name":N2,"stream":S2},
//!   ...],"cap":16,"owner"?:O,"isOwner":B,"locked":B,"protected":B,"topology":T}`: the members
//!   already there (not
//!   including self), in join order. `owner` (the owner secret, 32 lowercase hex) goes ONLY to
//!   the member who created the room or who gave the right owner secret; the client keeps it
//!   (per room) to be the owner again later. `isOwner` says whether this member may `lock` and
//!   `remove`; `locked` whether the room is locked; `protected` whether it has a password.
//! - `{"type":"peer-joined","peer":P2,"name":N2,"stream":S2}` to the other members when someone
//!   joins. Stream ids and topology: see [`crate::hub::signal`].
//! - `{"type":"topology","mode":T}` and `{"type":"hub-answer","sdp":S}`: see [`crate::hub::signal`].
//! - `{"type":"peer-left","peer":P2,"reason":"left"|"closed"|"timeout"|"removed"}` to the
//!   remaining members.
//! - `{"type":"room","locked":B}` to every member when the owner locks or unlocks the room.
//! - `{"type":"signal","from":P2,"data":D}`.
//! - `{"type":"pong","t":...}`.
//! - `{"type":"error","code":C,"message":M}`, `M` an English sentence for a human. Codes:
//!   `bad-json` (not JSON or not an object), `bad-message` (known type but a missing or invalid
//!   field, named in the message; also binary frames), `unknown-type`, `too-large`,
//!   `rate-limited`, `wrong-password`, `no-password`, `too-many-attempts` (also carries
//!   `"retryAfterMs":N`, the milliseconds before a password may be tried again; the connection
//!   stays open), `room-full`, `room-locked`, `not-owner`, `removed`, `bad-room`, `bad-name`,
//!   `bad-peer-id`, `peer-id-taken`, `already-joined`, `hub-unavailable`, `topology-refused` (back
//!   to a mesh while JackTrip players are in the room), `not-joined` (signal, leave, lock or
//!   remove before join), `unknown-peer`, `replaced`, `shutting-down`.
//!
//! # Close codes
//!
//! The server sends a close frame with one of these codes before it closes a socket: 1000
//! replaced by a newer connection of the same member, 1001 server shutting down or heartbeat
//! timeout, 1008 policy (rate limit, join deadline passed, origin), 1009 message too large,
//! 1013 too slow (outbound byte budget exceeded), 4001 removed from the room by its owner.
//!
//! # Limits and liveness
//!
//! - A room holds at most `cap` members; the next joiner gets `room-full`.
//! - Wrong passwords: a few failures are free per client address (IPv6 addresses counted by
//!   their /64), then each further attempt must wait a delay that doubles up to a maximum
//!   (`too-many-attempts` with `retryAfterMs` meanwhile). A room that sees many failures from
//!   many addresses slows, in the same way, the addresses that never gave its password right.
//!   Returning members (peer and token) are never slowed: they need no password. Checking or
//!   setting a password also spends one of an address's password hashes (30, one more every
//!   2 s) and waits for a free hashing slot (at most 3 s); either can answer
//!   `too-many-attempts` too.
//! - A message larger than the configured maximum gets `too-large` and the connection is closed
//!   with code 1009.
//! - Each connection has a token bucket (`rate` messages/s, `burst` deep). A message over the
//!   limit is dropped with `rate-limited` (at most one such error per second). A connection that
//!   has more than `burst` messages dropped within one 10-second window is closed with code 1008.
//! - The server pings every `heartbeat-ms`; a connection from which nothing at all arrives for
//!   `heartbeat-timeout-ms` is closed and announced as `peer-left` with reason `timeout`.
//! - On shutdown every client gets `shutting-down` and a close frame with code 1001. Members are
//!   not announced as leaving: they keep their places and come back with their tokens.

use serde_json::{json, Map, Value};

use crate::hub::controller;
use crate::hub::signal::{self, Topology};
use crate::hub::uplink::{self, UplinkReport};
use crate::hub::PersonalMix;

/// Longest password accepted, in bytes.
pub const MAX_PASSWORD_BYTES: usize = 128;
/// Longest room name, in chars (all ASCII).
pub const MAX_ROOM_CHARS: usize = 64;
/// Shortest and longest private room key, in chars (all ASCII).
pub const MIN_KEY_CHARS: usize = 22;
pub const MAX_KEY_CHARS: usize = 64;
/// Longest display name after trimming, in Unicode scalar values.
pub const MAX_NAME_CHARS: usize = 40;
/// How much of an unknown type is echoed back in the error message.
const MAX_ECHOED_TYPE_CHARS: usize = 40;

/// Close code: replaced by a newer connection of the same member.
pub const CLOSE_REPLACED: u16 = 1000;
/// Close code: the server shuts down, or the heartbeat timed out.
pub const CLOSE_GOING_AWAY: u16 = 1001;
/// Close code: a policy was violated (rate limit, join deadline, origin).
pub const CLOSE_POLICY: u16 = 1008;
/// Close code: a message was too large.
pub const CLOSE_TOO_LARGE: u16 = 1009;
/// Close code: the connection read too slowly (outbound byte budget exceeded).
pub const CLOSE_TOO_SLOW: u16 = 1013;
/// Close code: removed from the room by its owner.
pub const CLOSE_REMOVED: u16 = 4001;

/// A message from a client, validated.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientMessage {
    Join(Join),
    Signal {
        to: String,
        data: Map<String, Value>,
    },
    Leave,
    Lock {
        locked: bool,
    },
    Remove {
        peer: String,
    },
    Ping {
        t: Option<Value>,
    },
    HubOffer {
        sdp: String,
        /// The member's own packets come back to it (the sound check through the server).
        echo: bool,
    },
    Topology {
        mode: Topology,
    },
    HubMix(PersonalMix),
    Uplink(UplinkReport),
    Reception(controller::Report),
}

/// A validated join request.
#[derive(Debug, Clone, PartialEq)]
pub struct Join {
    pub room: String,
    /// Trimmed display name.
    pub name: String,
    pub peer: String,
    pub token: String,
    pub password: Option<String>,
    /// A private room's key.
    pub key: Option<String>,
    /// The owner secret a previous welcome gave this client.
    pub owner: Option<String>,
}

/// An error reply: a code from the list in the module docs and a sentence for a human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    pub code: &'static str,
    pub message: String,
    /// `retryAfterMs`, sent with `too-many-attempts`.
    pub retry_after_ms: Option<u64>,
}

impl ProtocolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// `too-many-attempts`, to be retried after `retry_after_ms`.
    pub fn too_many_attempts(retry_after_ms: u64, message: impl Into<String>) -> Self {
        Self {
            code: "too-many-attempts",
            message: message.into(),
            retry_after_ms: Some(retry_after_ms),
        }
    }

    /// The `{"type":"error",...}` message.
    pub fn to_json(&self) -> String {
        let mut v = json!({"type": "error", "code": self.code, "message": self.message});
        if let Some(ms) = self.retry_after_ms {
            v["retryAfterMs"] = json!(ms);
        }
        v.to_string()
    }
}

fn bad_message(message: impl Into<String>) -> ProtocolError {
    ProtocolError::new("bad-message", message)
}

/// Parses and validates one text message.
pub fn parse(text: &str) -> Result<ClientMessage, ProtocolError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|_| ProtocolError::new("bad-json", "The message is not valid JSON."))?;
    let Value::Object(mut obj) = value else {
        return Err(ProtocolError::new(
            "bad-json",
            "The message must be a JSON object.",
        ));
    };
    let kind = match obj.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(bad_message("Field \"type\" must be a string.")),
        None => return Err(bad_message("Field \"type\" is missing.")),
    };
    match kind.as_str() {
        "join" => parse_join(&obj).map(ClientMessage::Join),
        "signal" => {
            let to = match obj.get("to") {
                Some(Value::String(s)) => s.clone(),
                Some(_) => return Err(bad_message("Field \"to\" must be a string (a peer id).")),
                None => return Err(bad_message("Field \"to\" is missing.")),
            };
            match obj.remove("data") {
                Some(Value::Object(data)) => Ok(ClientMessage::Signal { to, data }),
                Some(_) => Err(bad_message("Field \"data\" must be a JSON object.")),
                None => Err(bad_message("Field \"data\" is missing.")),
            }
        }
        "leave" => Ok(ClientMessage::Leave),
        "lock" => match obj.get("locked") {
            Some(Value::Bool(locked)) => Ok(ClientMessage::Lock { locked: *locked }),
            Some(_) => Err(bad_message("Field \"locked\" must be true or false.")),
            None => Err(bad_message("Field \"locked\" is missing.")),
        },
        "remove" => match obj.get("peer") {
            Some(Value::String(peer)) => Ok(ClientMessage::Remove { peer: peer.clone() }),
            Some(_) => Err(bad_message("Field \"peer\" must be a string (a peer id).")),
            None => Err(bad_message("Field \"peer\" is missing.")),
        },
        "hub-offer" => {
            signal::parse_offer(&obj).map(|(sdp, echo)| ClientMessage::HubOffer { sdp, echo })
        }
        "topology" => signal::parse_topology(&obj).map(|mode| ClientMessage::Topology { mode }),
        "hub-mix" => signal::parse_mix(&obj).map(ClientMessage::HubMix),
        "uplink" => uplink::parse_report(&obj).map(ClientMessage::Uplink),
        "reception" => controller::parse_report(&obj).map(ClientMessage::Reception),
        "ping" => match obj.remove("t") {
            None => Ok(ClientMessage::Ping { t: None }),
            Some(t @ Value::Number(_)) => Ok(ClientMessage::Ping { t: Some(t) }),
            Some(_) => Err(bad_message("Field \"t\" must be a number.")),
        },
        other => {
            let shown: String = other.chars().take(MAX_ECHOED_TYPE_CHARS).collect();
            Err(ProtocolError::new(
                "unknown-type",
                format!("Unknown message type {shown:?}."),
            ))
        }
    }
}

fn string_field<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<&'a str, ProtocolError> {
    match obj.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(bad_message(format!("Field {field:?} must be a string."))),
        None => Err(bad_message(format!("Field {field:?} is missing."))),
    }
}

/// An optional string field: absent and `null` are `None`.
fn optional_string<'a>(
    obj: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, ProtocolError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad_message(format!("Field {field:?} must be a string."))),
    }
}

fn parse_join(obj: &Map<String, Value>) -> Result<Join, ProtocolError> {
    let room = string_field(obj, "room")?;
    validate_room(room)?;
    let name = validate_name(string_field(obj, "name")?)?;
    let peer = string_field(obj, "peer")?;
    if !is_hex_id(peer) {
        return Err(ProtocolError::new(
            "bad-peer-id",
            "The peer id must be 32 lowercase hexadecimal characters.",
        ));
    }
    let token = string_field(obj, "token")?;
    if !is_hex_id(token) {
        return Err(bad_message(
            "Field \"token\" must be 32 lowercase hexadecimal characters.",
        ));
    }
    let password = optional_string(obj, "password")?;
    if password.is_some_and(|p| p.len() > MAX_PASSWORD_BYTES) {
        return Err(bad_message(format!(
            "Field \"password\" must be at most {MAX_PASSWORD_BYTES} bytes long."
        )));
    }
    let key = optional_string(obj, "key")?;
    if let Some(key) = key {
        validate_key(key)?;
    }
    let owner = optional_string(obj, "owner")?;
    if owner.is_some_and(|o| !is_hex_id(o)) {
        return Err(bad_message(
            "Field \"owner\" must be 32 lowercase hexadecimal characters.",
        ));
    }
    Ok(Join {
        room: room.to_owned(),
        name,
        peer: peer.to_owned(),
        token: token.to_owned(),
        password: password.map(str::to_owned),
        key: key.map(str::to_owned),
        owner: owner.map(str::to_owned),
    })
}

/// A room name: 1–64 chars of `[A-Za-z0-9._~-]`.
pub fn validate_room(room: &str) -> Result<(), ProtocolError> {
    let ok_chars = room
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'));
    if room.is_empty() || room.len() > MAX_ROOM_CHARS || !ok_chars {
        return Err(ProtocolError::new(
            "bad-room",
            format!(
                "A room name must be 1 to {MAX_ROOM_CHARS} characters among letters, digits \
                 and . _ ~ -"
            ),
        ));
    }
    Ok(())
}

/// A private room key: 22–64 chars of `[A-Za-z0-9_-]` (base64url, at least 128 bits).
pub fn validate_key(key: &str) -> Result<(), ProtocolError> {
    let ok_chars = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if !(MIN_KEY_CHARS..=MAX_KEY_CHARS).contains(&key.len()) || !ok_chars {
        return Err(bad_message(format!(
            "Field \"key\" must be {MIN_KEY_CHARS} to {MAX_KEY_CHARS} characters among \
             letters, digits, _ and -."
        )));
    }
    Ok(())
}

/// A display name: trimmed, 1–40 chars, no control characters (`bad-name`), no bidi
/// embedding/override/isolate characters and at least one visible character (`bad-message`).
/// Returns the trimmed name.
pub fn validate_name(name: &str) -> Result<String, ProtocolError> {
    let trimmed = name.trim();
    let count = trimmed.chars().count();
    if count == 0 || count > MAX_NAME_CHARS {
        return Err(ProtocolError::new(
            "bad-name",
            format!("A display name must be 1 to {MAX_NAME_CHARS} characters long."),
        ));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(ProtocolError::new(
            "bad-name",
            "A display name must not contain control characters.",
        ));
    }
    if trimmed.chars().any(is_bidi_control) {
        return Err(ProtocolError::new(
            "bad-name",
            "A display name must not contain characters that reverse or isolate text \
             direction.",
        ));
    }
    if trimmed.chars().all(is_invisible) {
        return Err(ProtocolError::new(
            "bad-name",
            "A display name must contain at least one visible character.",
        ));
    }
    Ok(trimmed.to_owned())
}

/// Bidi embeddings and overrides (U+202A–U+202E) and isolates (U+2066–U+2069): they let a name
/// display as something else, or reorder the text around it.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Characters that show nothing on their own: white space, zero-width and other format
/// characters, variation selectors, tags and the fillers some scripts have (Hangul filler,
/// Braille blank). A name made of only these looks empty or copies another name.
pub fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{2800}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// 32 lowercase hex chars (peer ids, tokens, owner secrets).
pub fn is_hex_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What a welcome says about the room and the member's place in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WelcomeRoom<'a> {
    /// The owner secret: only for the creator or a member who gave it.
    pub owner_secret: Option<&'a str>,
    pub is_owner: bool,
    pub locked: bool,
    /// The room has a password.
    pub protected: bool,
    pub topology: Topology,
}

/// A member as `welcome` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerEntry {
    pub peer: String,
    pub name: String,
    pub stream: u16,
    /// A native JackTrip client (listed with `"kind":"jacktrip"`), not a browser.
    pub jacktrip: bool,
}

/// The `kind` a native JackTrip member is listed with.
pub const KIND_JACKTRIP: &str = "jacktrip";

/// `{"type":"welcome",...}`; `peers` in join order; `stream` the new member's own.
pub fn welcome(
    room: &str,
    peer: &str,
    stream: u16,
    peers: &[PeerEntry],
    cap: usize,
    info: WelcomeRoom<'_>,
) -> String {
    let peers: Vec<Value> = peers
        .iter()
        .map(|p| {
            let mut entry = json!({"peer": p.peer, "name": p.name, "stream": p.stream});
            if p.jacktrip {
                entry["kind"] = json!(KIND_JACKTRIP);
            }
            entry
        })
        .collect();
    let mut v = json!({
        "type": "welcome",
        "room": room,
        "peer": peer,
        "stream": stream,
        "topology": info.topology.as_str(),
        "peers": peers,
        "cap": cap,
        "isOwner": info.is_owner,
        "locked": info.locked,
        "protected": info.protected,
    });
    if let Some(secret) = info.owner_secret {
        v["owner"] = json!(secret);
    }
    v.to_string()
}

pub fn peer_joined(peer: &str, name: &str, stream: u16) -> String {
    json!({"type": "peer-joined", "peer": peer, "name": name, "stream": stream}).to_string()
}

/// `peer-joined` for a native JackTrip client (no signaling of its own: it is heard through
/// the hub only).
pub fn peer_joined_jacktrip(peer: &str, name: &str, stream: u16) -> String {
    json!({"type": "peer-joined", "peer": peer, "name": name, "stream": stream,
           "kind": KIND_JACKTRIP})
    .to_string()
}

/// Why a member left, as sent in `peer-left`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    Left,
    Closed,
    Timeout,
    Removed,
}

impl LeaveReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaveReason::Left => "left",
            LeaveReason::Closed => "closed",
            LeaveReason::Timeout => "timeout",
            LeaveReason::Removed => "removed",
        }
    }
}

pub fn peer_left(peer: &str, reason: LeaveReason) -> String {
    json!({"type": "peer-left", "peer": peer, "reason": reason.as_str()}).to_string()
}

/// `{"type":"room","locked":B}`.
pub fn room_state(locked: bool) -> String {
    json!({"type": "room", "locked": locked}).to_string()
}

pub fn signal(from: &str, data: Map<String, Value>) -> String {
    json!({"type": "signal", "from": from, "data": Value::Object(data)}).to_string()
}

pub fn pong(t: Option<Value>) -> String {
    match t {
        Some(t) => json!({"type": "pong", "t": t}).to_string(),
        None => json!({"type": "pong"}).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "0123456789abcdef0123456789abcdef";
    const KEY: &str = "Abc_def-0123456789abcd";

    fn code(text: &str) -> &'static str {
        match parse(text) {
            Ok(m) => panic!("expected an error, got {m:?}"),
            Err(e) => e.code,
        }
    }

    #[test]
    fn parses_join() {
        let text = format!(
            r#"{{"type":"join","room":"jam-1.a~_","name":"  Ana ","peer":"{P}","token":"{P}","password":"pw"}}"#
        );
        let Ok(ClientMessage::Join(j)) = parse(&text) else {
            panic!("join did not parse")
        };
        assert_eq!(j.room, "jam-1.a~_");
        assert_eq!(j.name, "Ana");
        assert_eq!(j.password.as_deref(), Some("pw"));
        assert_eq!((j.key, j.owner), (None, None));
    }

    #[test]
    fn parses_key_and_owner() {
        let join = |extra: Value| {
            let mut v = json!({"type": "join", "room": "r", "name": "A", "peer": P, "token": P});
            if let (Value::Object(v), Value::Object(extra)) = (&mut v, extra) {
                v.extend(extra);
            }
            parse(&v.to_string())
        };
        let Ok(ClientMessage::Join(j)) = join(json!({"key": KEY, "owner": P})) else {
            panic!("join with key and owner did not parse")
        };
        assert_eq!(j.key.as_deref(), Some(KEY));
        assert_eq!(j.owner.as_deref(), Some(P));
        let Ok(ClientMessage::Join(j)) = join(json!({"key": null, "owner": null})) else {
            panic!("join with null key did not parse")
        };
        assert_eq!((j.key, j.owner), (None, None));
        assert!(join(json!({"key": "k".repeat(64)})).is_ok());
        for bad in [
            json!({"key": &KEY[1..]}),
            json!({"key": "k".repeat(65)}),
            json!({"key": format!("{}=", &KEY[1..])}),
            json!({"key": format!("{}.", &KEY[1..])}),
            json!({"key": 5}),
            json!({"owner": P.to_uppercase()}),
            json!({"owner": &P[1..]}),
            json!({"owner": true}),
        ] {
            assert_eq!(
                join(bad.clone()).err().map(|e| e.code),
                Some("bad-message"),
                "{bad}"
            );
        }
    }

    #[test]
    fn rejects_bad_json_and_types() {
        assert_eq!(code("nope"), "bad-json");
        assert_eq!(code("[1,2]"), "bad-json");
        assert_eq!(code("{}"), "bad-message");
        assert_eq!(code(r#"{"type":5}"#), "bad-message");
        assert_eq!(code(r#"{"type":"dance"}"#), "unknown-type");
        let long = format!(r#"{{"type":"{}"}}"#, "x".repeat(100));
        let Err(e) = parse(&long) else {
            panic!("accepted")
        };
        assert!(e.message.contains(&"x".repeat(40)), "{}", e.message);
        assert!(!e.message.contains(&"x".repeat(41)), "{}", e.message);
    }

    #[test]
    fn validates_join_fields() {
        let join = |room: &str, name: &str, peer: &str, token: &str| {
            json!({"type": "join", "room": room, "name": name, "peer": peer, "token": token})
                .to_string()
        };
        assert_eq!(code(&join("", "A", P, P)), "bad-room");
        assert_eq!(code(&join("a/b", "A", P, P)), "bad-room");
        assert_eq!(code(&join(&"r".repeat(65), "A", P, P)), "bad-room");
        assert!(parse(&join(&"r".repeat(64), "A", P, P)).is_ok());
        assert_eq!(code(&join("r", "   ", P, P)), "bad-name");
        assert_eq!(code(&join("r", "a\u{7}b", P, P)), "bad-name");
        assert_eq!(code(&join("r", &"é".repeat(41), P, P)), "bad-name");
        assert!(parse(&join("r", &"é".repeat(40), P, P)).is_ok());
        assert_eq!(code(&join("r", "A", &P.to_uppercase(), P)), "bad-peer-id");
        assert_eq!(code(&join("r", "A", &P[1..], P)), "bad-peer-id");
        assert_eq!(code(&join("r", "A", P, "zz")), "bad-message");
        assert_eq!(code(r#"{"type":"join","room":"r"}"#), "bad-message");
        let pw = format!(
            r#"{{"type":"join","room":"r","name":"A","peer":"{P}","token":"{P}","password":"{}"}}"#,
            "p".repeat(129)
        );
        assert_eq!(code(&pw), "bad-message");
    }

    #[test]
    fn display_names_that_deceive_are_rejected() {
        let name = |n: &str| validate_name(n).map_err(|e| e.code);
        // Right-to-left override: "Ana\u{202E}nimda" displays as "Anaadmin".
        for bidi in ['\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}'] {
            assert_eq!(name(&format!("Ana{bidi}nimda")), Err("bad-name"));
        }
        for isolate in ['\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}'] {
            assert_eq!(name(&format!("{isolate}Bo")), Err("bad-name"));
        }
        for invisible in [
            "\u{200B}",
            "\u{200B}\u{200C}\u{200D}",
            "\u{2060}\u{FEFF}",
            "\u{3164}",
            "\u{115F}\u{1160}",
            "\u{2800}\u{2800}",
            "\u{FE0F}",
            "\u{E0041}\u{E0042}",
            "\u{00AD}",
            " \u{200B} \u{3000}",
        ] {
            assert_eq!(name(invisible), Err("bad-name"), "{invisible:?}");
        }
        // Visible text with joiners, marks and emoji sequences stays allowed.
        for ok in [
            "Zoë",
            "李雷",
            "عمر",
            "\u{200F}עמית",
            "👨\u{200D}👩\u{200D}👧",
            "❤\u{FE0F}",
            "a\u{200B}",
            "Anna-Lena O'Brien",
        ] {
            assert_eq!(name(ok), Ok(ok.to_owned()), "{ok:?}");
        }
    }

    #[test]
    fn parses_signal_leave_lock_remove_ping() {
        assert_eq!(code(r#"{"type":"signal","to":"x"}"#), "bad-message");
        assert_eq!(
            code(r#"{"type":"signal","to":"x","data":3}"#),
            "bad-message"
        );
        assert!(matches!(
            parse(r#"{"type":"signal","to":"x","data":{"sdp":"v=0"}}"#),
            Ok(ClientMessage::Signal { .. })
        ));
        assert_eq!(parse(r#"{"type":"leave"}"#), Ok(ClientMessage::Leave));
        assert_eq!(
            parse(r#"{"type":"lock","locked":true}"#),
            Ok(ClientMessage::Lock { locked: true })
        );
        assert_eq!(
            parse(r#"{"type":"lock","locked":false}"#),
            Ok(ClientMessage::Lock { locked: false })
        );
        assert_eq!(code(r#"{"type":"lock"}"#), "bad-message");
        assert_eq!(code(r#"{"type":"lock","locked":1}"#), "bad-message");
        assert_eq!(
            parse(&format!(r#"{{"type":"remove","peer":"{P}"}}"#)),
            Ok(ClientMessage::Remove { peer: P.into() })
        );
        assert_eq!(code(r#"{"type":"remove"}"#), "bad-message");
        assert_eq!(code(r#"{"type":"remove","peer":[]}"#), "bad-message");
        assert_eq!(pong(Some(json!(12.5))), r#"{"t":12.5,"type":"pong"}"#);
        assert_eq!(code(r#"{"type":"ping","t":"now"}"#), "bad-message");
    }

    /// The vectors the app's rule (app/src/room/display-name.ts) is checked against too.
    #[test]
    fn display_names_judged_as_the_app_judges_them() {
        let v: Value = serde_json::from_str(include_str!("../../tests/vectors/display-names.json"))
            .expect("the vectors are JSON");
        let Some(accepted) = v["accepted"].as_array() else {
            panic!("accepted is a list")
        };
        for pair in accepted {
            let (raw, trimmed) = (pair[0].as_str(), pair[1].as_str());
            let (Some(raw), Some(trimmed)) = (raw, trimmed) else {
                panic!("{pair} is [raw, trimmed]")
            };
            assert_eq!(validate_name(raw).ok().as_deref(), Some(trimmed), "{raw:?}");
        }
        let Some(refused) = v["refused"].as_array() else {
            panic!("refused is a list")
        };
        for raw in refused.iter().filter_map(Value::as_str) {
            assert_eq!(
                validate_name(raw).err().map(|e| e.code),
                Some("bad-name"),
                "{raw:?}"
            );
        }
        assert!(accepted.len() >= 10 && refused.len() >= 20);
    }

    #[test]
    fn server_messages() {
        let info = WelcomeRoom {
            owner_secret: Some(P),
            is_owner: true,
            locked: false,
            protected: true,
            topology: Topology::Mix,
        };
        let peers = [
            PeerEntry {
                peer: P.to_owned(),
                name: "Ann".to_owned(),
                stream: 7,
                jacktrip: false,
            },
            PeerEntry {
                peer: P.to_owned(),
                name: "Jo".to_owned(),
                stream: 8,
                jacktrip: true,
            },
        ];
        let w: Value =
            serde_json::from_str(&welcome("r", P, 3, &peers, 16, info)).expect("welcome is JSON");
        assert_eq!(
            w,
            json!({"type": "welcome", "room": "r", "peer": P, "stream": 3, "cap": 16,
                   "peers": [{"peer": P, "name": "Ann", "stream": 7},
                             {"peer": P, "name": "Jo", "stream": 8, "kind": "jacktrip"}],
                   "topology": "mix",
                   "owner": P, "isOwner": true, "locked": false, "protected": true})
        );
        let info = WelcomeRoom {
            owner_secret: None,
            is_owner: false,
            ..info
        };
        let w: Value =
            serde_json::from_str(&welcome("r", P, 1, &[], 16, info)).expect("welcome is JSON");
        assert!(w.get("owner").is_none() && w["isOwner"] == false);
        assert_eq!(room_state(true), r#"{"locked":true,"type":"room"}"#);
        assert_eq!(
            peer_left(P, LeaveReason::Removed),
            format!(r#"{{"peer":"{P}","reason":"removed","type":"peer-left"}}"#)
        );
        let e: Value =
            serde_json::from_str(&ProtocolError::too_many_attempts(1500, "Wait.").to_json())
                .expect("error is JSON");
        assert_eq!(
            e,
            json!({"type": "error", "code": "too-many-attempts", "message": "Wait.",
                   "retryAfterMs": 1500})
        );
        assert!(!ProtocolError::new("x", "y")
            .to_json()
            .contains("retryAfterMs"));
    }
}
