//! The signaling protocol spoken on `GET /ws`: JSON text messages, one object per WebSocket
//! message. The browser client is written against exactly this description.
//!
//! # Client → server
//!
//! - `{"type":"join","room":R,"name":N,"peer":P,"token":T,"password"?:W}`
//!   - `R`: room name, 1–64 chars of `[A-Za-z0-9._~-]` (it appears in links `/r/<room>`),
//!     case-sensitive.
//!   - `N`: display name, 1–40 Unicode chars after trimming, no control characters (rejected,
//!     not stripped).
//!   - `P`: the client's own peer id, 32 lowercase hex chars, chosen once per page load. A client
//!     that reconnects (e.g. after a server restart) keeps its identity, so existing peer-to-peer
//!     links survive.
//!   - `T`: 32 lowercase hex chars, a secret the client chose with `P`. If `P` is already a member
//!     of `R` on another (older) connection, the join REPLACES that member only if `T` matches the
//!     token stored for `P`: the old connection gets error `replaced` and is closed, nothing is
//!     announced to the others, the member simply continues on the new socket. Otherwise the join
//!     fails with `peer-id-taken`.
//!   - `W`: optional password, at most 128 bytes. The first joiner of a room (a room exists while
//!     it has members and is forgotten when the last one leaves) sets its password (none if
//!     absent). Later joiners must give the same one, else `wrong-password` (the connection stays
//!     open; the client may retry). A password given for a room without one is ignored. The
//!     server keeps only a salted SHA-256 of it and compares in constant time.
//!   - A connection is in at most one room: a second join gives `already-joined`.
//! - `{"type":"signal","to":P2,"data":D}`: `D` any JSON object. Relayed only if the sender and
//!   `P2` are members of the same room, as `{"type":"signal","from":P,"data":D}`; otherwise
//!   error `unknown-peer` (nothing is revealed about other rooms).
//! - `{"type":"leave"}`: leaves the room (announced as `peer-left` with reason `left`); the
//!   connection stays open and may join again.
//! - `{"type":"ping","t":number?}` → `{"type":"pong","t":same}` (`t` omitted if it was absent),
//!   answered whether joined or not.
//!
//! # Server → client
//!
//! - `{"type":"welcome","room":R,"peer":P,"peers":[{"peer":P2,"name":N2},...],"cap":16}`: the
//!   members already there (not including self), in join order.
//! - `{"type":"peer-joined","peer":P2,"name":N2}` to the other members when someone joins.
//! - `{"type":"peer-left","peer":P2,"reason":"left"|"closed"|"timeout"}` to the remaining members.
//! - `{"type":"signal","from":P2,"data":D}`.
//! - `{"type":"pong","t":...}`.
//! - `{"type":"error","code":C,"message":M}`, `M` an English sentence for a human. Codes:
//!   `bad-json` (not JSON or not an object), `bad-message` (known type but a missing or invalid
//!   field, named in the message; also binary frames), `unknown-type`, `too-large`,
//!   `rate-limited`, `wrong-password`, `room-full`, `bad-room`, `bad-name`, `bad-peer-id`,
//!   `peer-id-taken`, `already-joined`, `not-joined` (signal/leave before join), `unknown-peer`,
//!   `replaced`, `shutting-down`.
//!
//! # Limits and liveness
//!
//! - A room holds at most `cap` members; the next joiner gets `room-full`.
//! - A message larger than the configured maximum gets `too-large` and the connection is closed
//!   with code 1009.
//! - Each connection has a token bucket (`rate` messages/s, `burst` deep). A message over the
//!   limit is dropped with `rate-limited` (at most one such error per second). A connection that
//!   has more than `burst` messages dropped within one 10-second window is closed with code 1008.
//! - The server pings every `heartbeat-ms`; a connection from which nothing at all arrives for
//!   `heartbeat-timeout-ms` is closed and announced as `peer-left` with reason `timeout`.
//! - On shutdown every client gets `shutting-down` and a close frame with code 1001.

use serde_json::{json, Map, Value};

/// Longest password accepted, in bytes.
pub const MAX_PASSWORD_BYTES: usize = 128;
/// Longest room name, in chars (all ASCII).
pub const MAX_ROOM_CHARS: usize = 64;
/// Longest display name after trimming, in Unicode scalar values.
pub const MAX_NAME_CHARS: usize = 40;
/// How much of an unknown type is echoed back in the error message.
const MAX_ECHOED_TYPE_CHARS: usize = 40;

/// A message from a client, validated.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientMessage {
    Join(Join),
    Signal {
        to: String,
        data: Map<String, Value>,
    },
    Leave,
    Ping {
        t: Option<Value>,
    },
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
}

/// An error reply: a code from the list in the module docs and a sentence for a human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    pub code: &'static str,
    pub message: String,
}

impl ProtocolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The `{"type":"error",...}` message.
    pub fn to_json(&self) -> String {
        json!({"type": "error", "code": self.code, "message": self.message}).to_string()
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
    let password = match obj.get("password") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.len() <= MAX_PASSWORD_BYTES => Some(s.clone()),
        Some(Value::String(_)) => {
            return Err(bad_message(format!(
                "Field \"password\" must be at most {MAX_PASSWORD_BYTES} bytes long."
            )))
        }
        Some(_) => return Err(bad_message("Field \"password\" must be a string.")),
    };
    Ok(Join {
        room: room.to_owned(),
        name,
        peer: peer.to_owned(),
        token: token.to_owned(),
        password,
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

/// A display name: trimmed, 1–40 chars, no control characters. Returns the trimmed name.
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
    Ok(trimmed.to_owned())
}

/// 32 lowercase hex chars (peer ids and tokens).
pub fn is_hex_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `{"type":"welcome",...}`; `peers` are `(peer, name)` in join order.
pub fn welcome(room: &str, peer: &str, peers: &[(String, String)], cap: usize) -> String {
    let peers: Vec<Value> = peers
        .iter()
        .map(|(p, n)| json!({"peer": p, "name": n}))
        .collect();
    json!({"type": "welcome", "room": room, "peer": peer, "peers": peers, "cap": cap}).to_string()
}

pub fn peer_joined(peer: &str, name: &str) -> String {
    json!({"type": "peer-joined", "peer": peer, "name": name}).to_string()
}

/// Why a member left, as sent in `peer-left`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    Left,
    Closed,
    Timeout,
}

impl LeaveReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaveReason::Left => "left",
            LeaveReason::Closed => "closed",
            LeaveReason::Timeout => "timeout",
        }
    }
}

pub fn peer_left(peer: &str, reason: LeaveReason) -> String {
    json!({"type": "peer-left", "peer": peer, "reason": reason.as_str()}).to_string()
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
    fn parses_signal_leave_ping() {
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
        assert_eq!(pong(Some(json!(12.5))), r#"{"t":12.5,"type":"pong"}"#);
        assert_eq!(code(r#"{"type":"ping","t":"now"}"#), "bad-message");
    }
}
