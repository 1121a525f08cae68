//! Properties of `protocol::parse` on any text:
//!
//! - It returns, never panics (libFuzzer's `-timeout` catches a hang).
//! - An error has a code of lower-case words joined by `-` and a non-empty message of at most
//!   [`MAX_ERROR_MESSAGE_BYTES`]: whatever a client sends, the reply it gets stays small.
//!   `to_json` is the error as a JSON object.
//! - An accepted join holds only what the rooms rely on: a valid room name, a trimmed valid
//!   display name, hex peer id and token, a password within its limit; sent again, the same
//!   fields make the same join.
//! - An accepted signal relays its data unchanged; an accepted ping is answered with its `t`.

use serde_json::{json, Map, Value};
use tutti_server::protocol::{self, ClientMessage, Join, ProtocolError};

/// Longest error message: the longest fixed sentence (under 100 bytes) with a type echoed back
/// (at most 40 chars, each at most 10 bytes once escaped as `\u{10ffff}`).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 512;

/// A peer id for the replies built from accepted messages.
const FROM: &str = "0123456789abcdef0123456789abcdef";

/// Parses `text` and checks the result (see the module docs); returns it for further checks.
pub fn check_text(text: &str) -> Result<ClientMessage, ProtocolError> {
    let parsed = protocol::parse(text);
    match &parsed {
        Ok(message) => check_message(message),
        Err(e) => check_error(e),
    }
    parsed
}

pub fn check_error(e: &ProtocolError) {
    let words_ok = e
        .code
        .split('-')
        .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()));
    assert!(words_ok, "error code {:?}", e.code);
    assert!(
        !e.message.is_empty() && e.message.len() <= MAX_ERROR_MESSAGE_BYTES,
        "error message of {} bytes: {:?}",
        e.message.len(),
        e.message
    );
    assert_eq!(
        reply(&e.to_json()),
        json!({"type": "error", "code": e.code, "message": e.message})
    );
}

pub fn check_message(message: &ClientMessage) {
    match message {
        ClientMessage::Join(join) => check_join(join),
        ClientMessage::Signal { to, data } => check_signal(to, data),
        ClientMessage::Ping { t } => check_ping(t.as_ref()),
        ClientMessage::Leave => {}
        // Message types added after these checks: parsing them did not panic, which is all a
        // generic check can say.
        #[allow(unreachable_patterns)]
        _ => {}
    }
}

/// The fields of a join that every version of the protocol has, comparable.
pub fn join_fields(j: &Join) -> (&str, &str, &str, &str, Option<&str>) {
    (
        &j.room,
        &j.name,
        &j.peer,
        &j.token,
        j.password.as_deref(),
    )
}

fn check_join(j: &Join) {
    assert!(protocol::validate_room(&j.room).is_ok(), "room {:?}", j.room);
    assert_eq!(
        protocol::validate_name(&j.name).as_ref(),
        Ok(&j.name),
        "the name is kept trimmed and valid"
    );
    assert!(!j.name.chars().any(char::is_control), "name {:?}", j.name);
    assert!(protocol::is_hex_id(&j.peer), "peer {:?}", j.peer);
    assert!(protocol::is_hex_id(&j.token), "token {:?}", j.token);
    if let Some(password) = &j.password {
        assert!(password.len() <= protocol::MAX_PASSWORD_BYTES);
    }
    let again = json!({
        "type": "join", "room": j.room, "name": j.name, "peer": j.peer, "token": j.token,
        "password": j.password,
    });
    match protocol::parse(&again.to_string()) {
        Ok(ClientMessage::Join(k)) => assert_eq!(join_fields(&k), join_fields(j)),
        other => panic!("the accepted join {j:?} sent again gave {other:?}"),
    }
    assert_eq!(
        reply(&protocol::peer_joined(&j.peer, &j.name, 7)),
        json!({"type": "peer-joined", "peer": j.peer, "name": j.name, "stream": 7})
    );
}

fn check_signal(to: &str, data: &Map<String, Value>) {
    let relayed = reply(&protocol::signal(FROM, data.clone()));
    let data = Value::Object(data.clone());
    assert_eq!((&relayed["type"], &relayed["from"]), (&json!("signal"), &json!(FROM)));
    assert!(
        same_json(&relayed["data"], &data),
        "relayed {relayed} for {data}"
    );
    let again = json!({"type": "signal", "to": to, "data": data});
    match protocol::parse(&again.to_string()) {
        Ok(ClientMessage::Signal { to: to2, data: d2 }) => {
            assert_eq!(to2, to);
            assert!(same_json(&Value::Object(d2), &data));
        }
        other => panic!("the accepted signal sent again gave {other:?}"),
    }
}

fn check_ping(t: Option<&Value>) {
    let pong = reply(&protocol::pong(t.cloned()));
    assert_eq!(pong["type"], "pong");
    match t {
        None => assert_eq!(pong, json!({"type": "pong"})),
        Some(t) => {
            assert!(t.is_number(), "t {t}");
            assert!(same_json(&pong["t"], t), "pong {pong} for t {t}");
        }
    }
}

/// A reply the server built: JSON, an object.
fn reply(text: &str) -> Value {
    let value: Value = serde_json::from_str(text).expect("replies are JSON");
    assert!(value.is_object(), "reply {text}");
    value
}

/// Equal JSON, numbers compared as numbers: integers exactly, floats within the rounding that
/// printing then parsing may add (serde_json parses without its `float_roundtrip` feature).
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x == y {
                return true;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs()),
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}
