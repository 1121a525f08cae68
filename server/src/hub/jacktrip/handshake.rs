//! JackTrip's TCP hello, read without I/O: which room a JackTrip client joins, under which
//! name, and where it listens for UDP.
//!
//! The client writes 68 bytes, then waits for 4:
//!
//! ```text
//! client → hub   0..4   i32 LE   the client's UDP port (1..=65535)
//!                4..68  [u8;64]  its name, UTF-8, NUL-padded ("room/name" or "name")
//! hub → client   0..4   i32 LE   the hub's UDP port for this client, then the hub closes
//! ```
//!
//! A first `i32` of [`AUTH_REQUEST`] (65536) asks for JackTrip's TLS-authenticated variant,
//! which Tutti does not speak: the hub answers [`AUTH_NOT_REQUIRED`] at once, as a JackTrip hub
//! without authentication does, and closes.
//!
//! The name picks the room: `room/name` joins room `room` (checked like any room name) as
//! `name` (checked like any display name); a name without `/` joins the hub's default room
//! (`--jacktrip-room`), if there is one.

use std::fmt;

use crate::protocol::{validate_name, validate_room};

/// What a complete, valid hello asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The UDP port the client sends from and listens on (its NAT may change it).
    pub client_udp_port: u16,
    /// The room it joins (valid as a room name).
    pub room: String,
    /// Its display name (valid as a display name, trimmed).
    pub name: String,
}

/// Why bytes are not a hello the hub accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// The connection ended before the 68 bytes: `got` bytes came.
    Short { got: usize },
    /// More than 68 bytes came before the answer.
    TooLong { got: usize },
    /// The client asked for the authenticated variant; answer [`AUTH_NOT_REQUIRED`].
    AuthUnsupported,
    /// The port is 0, negative or above 65535.
    BadPort(i32),
    /// The name is not UTF-8.
    NotUtf8,
    /// A NUL inside the name, followed by more name.
    NulInside,
    /// The room part of `room/name` is not a valid room name.
    BadRoom(String),
    /// The name part is not a valid display name (empty, too long, control characters ...).
    BadName(String),
    /// A name without `/` and no default room configured.
    NoRoom,
}

impl HandshakeError {
    /// A short stable name for logs and counters.
    pub const fn name(&self) -> &'static str {
        match self {
            HandshakeError::Short { .. } => "short",
            HandshakeError::TooLong { .. } => "too-long",
            HandshakeError::AuthUnsupported => "auth-unsupported",
            HandshakeError::BadPort(_) => "bad-port",
            HandshakeError::NotUtf8 => "not-utf8",
            HandshakeError::NulInside => "nul-inside",
            HandshakeError::BadRoom(_) => "bad-room",
            HandshakeError::BadName(_) => "bad-name",
            HandshakeError::NoRoom => "no-room",
        }
    }

    /// The 4 bytes to answer before closing, if JackTrip defines one for this error.
    pub const fn answer(&self) -> Option<[u8; 4]> {
        match self {
            HandshakeError::AuthUnsupported => Some(AUTH_NOT_REQUIRED.to_le_bytes()),
            _ => None,
        }
    }
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Short { got } => {
                write!(f, "the hello ended after {got} of {HELLO_LEN} bytes")
            }
            HandshakeError::TooLong { got } => {
                write!(f, "{got} bytes came where a hello has {HELLO_LEN}")
            }
            HandshakeError::AuthUnsupported => f.write_str(
                "the client asked for JackTrip's authenticated hub (-A), which this hub does not \
                 offer; answered \"not required\": connect without -A",
            ),
            HandshakeError::BadPort(p) => write!(f, "UDP port {p} is not 1 to 65535"),
            HandshakeError::NotUtf8 => f.write_str("the client name is not UTF-8"),
            HandshakeError::NulInside => f.write_str("the client name has a NUL inside it"),
            HandshakeError::BadRoom(why) => write!(f, "bad room in the client name: {why}"),
            HandshakeError::BadName(why) => write!(f, "bad client name: {why}"),
            HandshakeError::NoRoom => f.write_str(
                "the client name has no room (use -K room/name) and the hub has no \
                 --jacktrip-room",
            ),
        }
    }
}

impl std::error::Error for HandshakeError {}

/// Bytes in a hello: the port, then the name.
pub const HELLO_LEN: usize = 4 + NAME_LEN;
/// Bytes of the NUL-padded name field.
pub const NAME_LEN: usize = 64;
/// A first `i32` asking for the authenticated variant (JackTrip's `Auth::OK`).
pub const AUTH_REQUEST: i32 = 65_536;
/// The answer to [`AUTH_REQUEST`] when authentication is not in use (`Auth::NOTREQUIRED`).
pub const AUTH_NOT_REQUIRED: i32 = 196_608;

/// Reads what has arrived so far (`buf`, every byte read from the connection).
///
/// `Ok(None)`: more bytes are needed. `Ok(Some(hello))`: complete and valid; answer with
/// [`reply`]. `Err`: refuse (send [`HandshakeError::answer`] if any, then close). The auth
/// request is recognised from the first 4 bytes alone, since such a client waits for an answer
/// before sending more. Call again with the longer buffer after each read; at end of stream
/// use [`finish`].
pub fn parse(buf: &[u8], default_room: Option<&str>) -> Result<Option<Hello>, HandshakeError> {
    let Some(port_bytes) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let port = i32::from_le_bytes(*port_bytes);
    if port == AUTH_REQUEST {
        return Err(HandshakeError::AuthUnsupported);
    }
    if buf.len() > HELLO_LEN {
        return Err(HandshakeError::TooLong { got: buf.len() });
    }
    if buf.len() < HELLO_LEN {
        return Ok(None);
    }
    let client_udp_port = u16::try_from(port)
        .ok()
        .filter(|&p| p != 0)
        .ok_or(HandshakeError::BadPort(port))?;
    let field = &buf[4..HELLO_LEN];
    let end = field.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
    if field[end..].iter().any(|&b| b != 0) {
        return Err(HandshakeError::NulInside);
    }
    let full = std::str::from_utf8(&field[..end]).map_err(|_| HandshakeError::NotUtf8)?;
    let (room, name) = split_name(full, default_room)?;
    Ok(Some(Hello {
        client_udp_port,
        room,
        name,
    }))
}

/// The verdict on a stream that ended with `buf`: the hello, or why not.
pub fn finish(buf: &[u8], default_room: Option<&str>) -> Result<Hello, HandshakeError> {
    parse(buf, default_room)?.ok_or(HandshakeError::Short { got: buf.len() })
}

/// `room/name` → (room, name); `name` → (default room, name).
fn split_name(full: &str, default_room: Option<&str>) -> Result<(String, String), HandshakeError> {
    let (room, name) = match full.split_once('/') {
        Some((room, name)) => (room, name),
        None => (default_room.ok_or(HandshakeError::NoRoom)?, full),
    };
    validate_room(room).map_err(|e| HandshakeError::BadRoom(e.message))?;
    let name = validate_name(name).map_err(|e| HandshakeError::BadName(e.message))?;
    Ok((room.to_owned(), name))
}

/// The hub's answer: the UDP port the client sends to.
pub const fn reply(udp_port: u16) -> [u8; 4] {
    (udp_port as i32).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hello with `port` and `name` NUL-padded (or cut) to 64 bytes.
    fn hello(port: i32, name: &[u8]) -> Vec<u8> {
        let mut b = port.to_le_bytes().to_vec();
        let mut field = [0u8; NAME_LEN];
        let n = name.len().min(NAME_LEN);
        field[..n].copy_from_slice(&name[..n]);
        b.extend_from_slice(&field);
        b
    }

    fn ok(room: &str, name: &str, port: u16) -> Result<Option<Hello>, HandshakeError> {
        Ok(Some(Hello {
            client_udp_port: port,
            room: room.into(),
            name: name.into(),
        }))
    }

    #[test]
    fn room_and_name_from_the_client_name() {
        // Bytes as Debian's jacktrip 1.7.0 sent them for `-B 47500 -K myroom/alice`.
        let mut wire = vec![0x8c, 0xb9, 0x00, 0x00];
        wire.extend_from_slice(b"myroom/alice");
        wire.resize(HELLO_LEN, 0);
        assert_eq!(parse(&wire, None), ok("myroom", "alice", 47500));
        assert_eq!(parse(&wire, Some("other")), ok("myroom", "alice", 47500));
        // Only the first '/' splits; the rest belongs to the display name.
        let h = hello(4464, "band/Ann / bass".as_bytes());
        assert_eq!(parse(&h, None), ok("band", "Ann / bass", 4464));
        let h = hello(65_535, "Zoë ♪".as_bytes());
        assert_eq!(parse(&h, Some("choir")), ok("choir", "Zoë ♪", 65_535));
        assert_eq!(parse(&hello(1, b"  Bo  "), Some("r")), ok("r", "Bo", 1));
    }

    #[test]
    fn a_name_without_room_needs_the_default() {
        let h = hello(4464, b"alice");
        assert_eq!(parse(&h, None), Err(HandshakeError::NoRoom));
        assert_eq!(HandshakeError::NoRoom.name(), "no-room");
    }

    #[test]
    fn arrives_in_pieces() {
        let h = hello(5000, b"r/n");
        for cut in 0..HELLO_LEN {
            assert_eq!(parse(&h[..cut], None), Ok(None), "cut at {cut}");
        }
        assert_eq!(parse(&h, None), ok("r", "n", 5000));
    }

    #[test]
    fn auth_request_is_refused_from_four_bytes_with_not_required() {
        let e = parse(&AUTH_REQUEST.to_le_bytes(), None);
        assert_eq!(e, Err(HandshakeError::AuthUnsupported));
        assert_eq!(
            HandshakeError::AuthUnsupported.answer(),
            Some([0x00, 0x00, 0x03, 0x00])
        );
        assert_eq!(HandshakeError::AuthUnsupported.name(), "auth-unsupported");
        assert_eq!(parse(&hello(AUTH_REQUEST, b"r/n"), None), e);
    }

    #[test]
    fn hostile_hellos_are_errors() {
        let cases: Vec<(Vec<u8>, HandshakeError)> = vec![
            (hello(0, b"r/n"), HandshakeError::BadPort(0)),
            (hello(65_536 + 1, b"r/n"), HandshakeError::BadPort(65_537)),
            (hello(-1, b"r/n"), HandshakeError::BadPort(-1)),
            (hello(i32::MAX, b"r/n"), HandshakeError::BadPort(i32::MAX)),
            (hello(9, &[b'r', b'/', 0xff, 0xfe]), HandshakeError::NotUtf8),
            (hello(9, b"r/a\0b"), HandshakeError::NulInside),
            (hello(9, b"\0r/ab"), HandshakeError::NulInside),
            (hello(9, b""), HandshakeError::NoRoom),
            (
                [hello(9, b"r/n"), vec![0]].concat(),
                HandshakeError::TooLong { got: 69 },
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(parse(&bytes, None), Err(want.clone()), "{}", want.name());
            assert_eq!(want.answer(), None);
        }
        let bad_room = parse(&hello(9, b"no room/n"), None);
        assert!(
            matches!(bad_room, Err(HandshakeError::BadRoom(_))),
            "{bad_room:?}"
        );
        for name in [&b"r/"[..], b"r/   ", b"r/a\x07b", b"r/\xe2\x80\xae"] {
            let r = parse(&hello(9, name), None);
            assert!(
                matches!(r, Err(HandshakeError::BadName(_))),
                "{name:?}: {r:?}"
            );
        }
        let long = format!("r/{}", "x".repeat(41));
        let r = parse(&hello(9, long.as_bytes()), None);
        assert!(matches!(r, Err(HandshakeError::BadName(_))), "{r:?}");
        // 64 name bytes without a NUL: a whole field, but too long for a display name.
        let r = parse(&hello(9, &[b'a'; NAME_LEN]), Some("d"));
        assert!(matches!(r, Err(HandshakeError::BadName(_))), "{r:?}");
    }

    #[test]
    fn short_streams() {
        assert_eq!(finish(&[], None), Err(HandshakeError::Short { got: 0 }));
        let h = hello(9, b"r/n");
        assert_eq!(
            finish(&h[..67], None),
            Err(HandshakeError::Short { got: 67 })
        );
        assert_eq!(finish(&h, None).map(Some), ok("r", "n", 9));
        assert_eq!(
            finish(&[0, 0, 1, 0], None),
            Err(HandshakeError::AuthUnsupported)
        );
    }

    #[test]
    fn reply_is_the_port_as_i32_le() {
        assert_eq!(reply(61_002), [0x4a, 0xee, 0x00, 0x00]);
        assert_eq!(reply(65_535), [0xff, 0xff, 0x00, 0x00]);
    }
}
