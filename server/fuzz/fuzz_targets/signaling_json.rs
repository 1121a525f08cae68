//! Fuzzes the signaling parser with JSON objects built around the message shapes, so the fuzzer
//! spends its time in the validation of fields rather than in JSON syntax. Besides the checks of
//! the `signaling` target, it knows answers:
//!
//! - a `type` that is missing or not a string is `bad-message`;
//! - a join, signal, ping or leave whose fields are all valid (and no others) is accepted with
//!   exactly those values.
//!
//! Fields of messages added later (`key`, `owner`, `lock`, `remove`, ...) are generated too, so
//! their validation is reached; only the generic checks apply to them.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Number, Value};
use tutti_server::protocol::ClientMessage;
use tutti_server_fuzz::signaling::{check_text, join_fields, same_json};

#[derive(Arbitrary, Debug)]
struct Input {
    kind: Kind,
    fields: Vec<(Key, Field)>,
    style: Style,
}

#[derive(Arbitrary, Debug)]
enum Kind {
    Join,
    Signal,
    Leave,
    Ping,
    Lock,
    Remove,
    Named(String),
    Missing,
    NotAString(Field),
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Room,
    Name,
    Peer,
    Token,
    Password,
    Key,
    Owner,
    To,
    Data,
    T,
    Locked,
    Type,
    Other(u8),
}

impl Key {
    fn name(self) -> String {
        match self {
            Key::Room => "room".into(),
            Key::Name => "name".into(),
            Key::Peer => "peer".into(),
            Key::Token => "token".into(),
            Key::Password => "password".into(),
            Key::Key => "key".into(),
            Key::Owner => "owner".into(),
            Key::To => "to".into(),
            Key::Data => "data".into(),
            Key::T => "t".into(),
            Key::Locked => "locked".into(),
            Key::Type => "type".into(),
            Key::Other(n) => format!("x{n}"),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Field {
    /// A valid value for its key, made from these bytes.
    Valid(Vec<u8>),
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Array(Vec<Field>),
    Object(Vec<(String, Field)>),
}

#[derive(Arbitrary, Debug)]
enum Style {
    Compact,
    Pretty,
    /// Every non-ASCII char as `\uXXXX` (surrogate pairs beyond the BMP).
    AsciiEscaped,
}

const ROOM_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-";
const KEY_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
/// Visible chars of several scripts and widths, and a plain space (never first or last).
const NAME_CHARS: &[char] = &[
    'a', 'Z', '7', ' ', 'é', 'ß', 'Ж', 'λ', 'م', 'א', '日', '本', '🎻', '🥁', '.', '\'',
];

fn pick(alphabet: &[u8], bytes: &[u8], len: usize) -> String {
    (0..len)
        .map(|i| {
            let b = bytes.get(i).copied().unwrap_or(i as u8);
            char::from(alphabet[usize::from(b) % alphabet.len()])
        })
        .collect()
}

fn hex_id(bytes: &[u8]) -> String {
    (0..16)
        .map(|i| format!("{:02x}", bytes.get(i).copied().unwrap_or(0)))
        .collect()
}

fn valid(key: Key, bytes: &[u8]) -> Value {
    let first = bytes.first().copied().unwrap_or(0);
    let text = |s: String| Value::String(s);
    match key {
        Key::Room => text(pick(ROOM_CHARS, bytes, 1 + usize::from(first) % 64)),
        Key::Name => {
            let len = 1 + usize::from(first) % 40;
            let mut name: String = (0..len)
                .map(|i| {
                    let b = bytes.get(i + 1).copied().unwrap_or(0);
                    NAME_CHARS[usize::from(b) % NAME_CHARS.len()]
                })
                .collect();
            name = name.trim().to_owned();
            if name.is_empty() {
                name.push('a');
            }
            // Whitespace around the name is trimmed away (the known answer trims too).
            if first & 0x80 != 0 {
                name = format!(" \t{name}\u{3000}");
            }
            text(name)
        }
        Key::Peer | Key::Token | Key::Owner | Key::To => text(hex_id(bytes)),
        Key::Key => text(pick(KEY_CHARS, bytes, 22 + usize::from(first) % 43)),
        Key::Password => {
            let mut s = String::from_utf8_lossy(bytes).into_owned();
            while s.len() > 128 {
                s.pop();
            }
            text(s)
        }
        Key::Data => {
            let mut data = Map::new();
            data.insert("sdp".into(), text(String::from_utf8_lossy(bytes).into_owned()));
            data.insert("n".into(), Value::from(u64::from(first)));
            Value::Object(data)
        }
        Key::T => Number::from_f64(f64::from(first) * 1000.25).map_or(Value::Null, Value::Number),
        Key::Locked => Value::Bool(first % 2 == 1),
        Key::Type | Key::Other(_) => text(String::from_utf8_lossy(bytes).into_owned()),
    }
}

fn to_value(key: Key, field: &Field) -> Value {
    match field {
        Field::Valid(bytes) => valid(key, bytes),
        Field::Null => Value::Null,
        Field::Bool(b) => Value::Bool(*b),
        Field::Int(n) => Value::from(*n),
        Field::Float(x) => Number::from_f64(*x).map_or(Value::Null, Value::Number),
        Field::Text(s) => Value::String(s.clone()),
        Field::Array(items) => Value::Array(items.iter().map(|f| to_value(key, f)).collect()),
        Field::Object(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, f)| (k.clone(), to_value(key, f)))
                .collect(),
        ),
    }
}

fn ascii_escaped(text: &str) -> String {
    // Non-ASCII chars occur only inside JSON strings, where `\uXXXX` means the same.
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

fuzz_target!(|input: Input| {
    let mut obj = Map::new();
    let type_value = match &input.kind {
        Kind::Join => Some(Value::from("join")),
        Kind::Signal => Some(Value::from("signal")),
        Kind::Leave => Some(Value::from("leave")),
        Kind::Ping => Some(Value::from("ping")),
        Kind::Lock => Some(Value::from("lock")),
        Kind::Remove => Some(Value::from("remove")),
        Kind::Named(s) => Some(Value::from(s.as_str())),
        Kind::Missing => None,
        Kind::NotAString(f) => Some(to_value(Key::Type, f)),
    };
    if let Some(t) = type_value {
        obj.insert("type".into(), t);
    }
    // Which fields hold a valid value (the last one given for a key counts).
    let mut valid_keys = std::collections::BTreeMap::new();
    for (key, field) in &input.fields {
        obj.insert(key.name(), to_value(*key, field));
        valid_keys.insert(*key, matches!(field, Field::Valid(_)));
    }
    let value = Value::Object(obj);
    let text = match input.style {
        Style::Compact => value.to_string(),
        Style::Pretty => serde_json::to_string_pretty(&value).expect("a Value serialises"),
        Style::AsciiEscaped => ascii_escaped(&value.to_string()),
    };
    let result = check_text(&text);
    // serde_json refuses arrays and objects nested 128 deep (its guard against running out of
    // stack): such a message is `bad-json` whatever it holds.
    if depth(&value) >= SERDE_RECURSION_LIMIT {
        let code = result.as_ref().err().map(|e| e.code);
        assert_eq!(code, Some("bad-json"), "{text}");
        return;
    }

    let Value::Object(obj) = &value else {
        unreachable!("built as an object")
    };
    match obj.get("type") {
        Some(Value::String(_)) => {}
        _ => {
            let code = result.as_ref().err().map(|e| e.code);
            assert_eq!(code, Some("bad-message"), "{text}");
            return;
        }
    }
    // The known answers: exactly these keys, each valid.
    let only_valid = |required: &[Key], optional: &[Key]| {
        required.iter().all(|k| valid_keys.get(k) == Some(&true))
            && valid_keys
                .iter()
                .all(|(k, ok)| *ok && (required.contains(k) || optional.contains(k)))
    };
    let field = |k: Key| obj.get(&k.name());
    let s = |k: Key| field(k).and_then(Value::as_str);
    match input.kind {
        Kind::Join if only_valid(&[Key::Room, Key::Name, Key::Peer, Key::Token], &[Key::Password]) => {
            let Ok(ClientMessage::Join(j)) = &result else {
                panic!("valid join {text} gave {result:?}")
            };
            let expected = (
                s(Key::Room).unwrap_or_default(),
                s(Key::Name).unwrap_or_default().trim(),
                s(Key::Peer).unwrap_or_default(),
                s(Key::Token).unwrap_or_default(),
                s(Key::Password),
            );
            assert_eq!(join_fields(j), expected, "{text}");
        }
        Kind::Signal if only_valid(&[Key::To, Key::Data], &[]) => {
            let Ok(ClientMessage::Signal { to, data }) = &result else {
                panic!("valid signal {text} gave {result:?}")
            };
            assert_eq!(Some(to.as_str()), s(Key::To));
            assert!(same_json(&Value::Object(data.clone()), field(Key::Data).unwrap_or(&Value::Null)));
        }
        Kind::Ping if only_valid(&[], &[Key::T]) => {
            let Ok(ClientMessage::Ping { t }) = &result else {
                panic!("valid ping {text} gave {result:?}")
            };
            match (t, field(Key::T)) {
                (None, None) => {}
                (Some(t), Some(sent)) => assert!(same_json(t, sent), "{text}"),
                (t, sent) => panic!("ping {text}: t {t:?}, sent {sent:?}"),
            }
        }
        Kind::Leave if only_valid(&[], &[]) => {
            assert!(matches!(result, Ok(ClientMessage::Leave)), "{text} gave {result:?}");
        }
        _ => {}
    }
});

/// The nesting depth of arrays and objects at which serde_json stops (127 levels parse).
const SERDE_RECURSION_LIMIT: usize = 128;

/// Nesting depth of arrays and objects: 1 for `[]` or `{}`, 0 for a scalar.
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}
