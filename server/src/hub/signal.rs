//! The hub's part of the signaling protocol (see [`crate::protocol`] for the rest): a room's
//! topology, a member's offer for its link to the hub, and its personal mix on the hub.
//!
//! - C→S `{"type":"hub-offer","sdp":S,"echo"?:B}` (members only): S the browser's offer, made
//!   with ONE data channel labelled `hub` (`ordered:false`, `maxRetransmits:0`). S→C
//!   `{"type":"hub-answer","sdp":S}`, or error `hub-unavailable` (the server runs no hub, or the
//!   hub refused the link; the message says why). A new offer replaces the member's previous
//!   link. With `"echo":true` the hub also sends the member its own packets back (forward mode,
//!   its own stream id): the sound check's round trip through the server. It changes what that
//!   member alone receives.
//! - C→S `{"type":"topology","mode":M}`, M one of `mesh`, `forward`, `mix` (owners only, else
//!   `not-owner`): every member gets `{"type":"topology","mode":M}`. `welcome` carries
//!   `"topology":M` (a new room starts as `mesh`).
//! - C→S `{"type":"hub-mix","master"?:G,"strips":[{"stream":S,"gain":G,"pan":P,"mute"?:B,
//!   "solo"?:B},...]}`: this member's personal mix on the hub (used where the hub mixes; kept
//!   across topology changes). `stream` 1–65534 names the member heard (its `stream` from
//!   `welcome`/`peer-joined`); `gain` and `master` 0–4 (linear), `pan` −1 (left) to 1 (right).
//!   At most [`MAX_STRIPS`] strips per message.
//!
//! Every member has a stream id, unique in its room while it is a member: its own in `welcome`
//! as `"stream"`, the others' in each `peers` entry and in `peer-joined`. Packets the hub
//! forwards carry their sender's stream id; 0 is the hub's mix.

use serde_json::{json, Map, Value};

use super::{Mode, PersonalMix, StripSetting};
use crate::protocol::ProtocolError;

/// Most strips one `hub-mix` may set.
pub const MAX_STRIPS: usize = 1024;
/// Largest gain a strip or master may ask for (linear; +12 dB).
pub const MAX_GAIN: f64 = 4.0;
/// The stream id of the hub's mix; members' stream ids are above it.
pub const MIX_STREAM: u16 = 0;
/// Largest member stream id.
pub const MAX_STREAM: u16 = 65534;

/// How a room's audio travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Topology {
    /// Peer to peer, every member to every other.
    #[default]
    Mesh,
    /// Through the hub, which forwards every stream to every member.
    Forward,
    /// Through the hub, which mixes for every member.
    Mix,
}

impl Topology {
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Mesh => "mesh",
            Topology::Forward => "forward",
            Topology::Mix => "mix",
        }
    }

    pub fn parse(s: &str) -> Option<Topology> {
        match s {
            "mesh" => Some(Topology::Mesh),
            "forward" => Some(Topology::Forward),
            "mix" => Some(Topology::Mix),
            _ => None,
        }
    }

    /// The hub's mode for this topology; `None` for the mesh.
    pub fn hub_mode(self) -> Option<Mode> {
        match self {
            Topology::Mesh => None,
            Topology::Forward => Some(Mode::Forward),
            Topology::Mix => Some(Mode::Mix),
        }
    }
}

fn bad(message: impl Into<String>) -> ProtocolError {
    ProtocolError::new("bad-message", message)
}

/// `hub-offer`: the SDP text, and whether the member asks for its own packets back.
pub fn parse_offer(obj: &Map<String, Value>) -> Result<(String, bool), ProtocolError> {
    let sdp = match obj.get("sdp") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => {
            return Err(bad(
                "Field \"sdp\" must be a non-empty string (an SDP offer).",
            ))
        }
        None => return Err(bad("Field \"sdp\" is missing.")),
    };
    let echo = match obj.get("echo") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("Field \"echo\" must be true or false.")),
    };
    Ok((sdp, echo))
}

/// `topology`: the mode asked for.
pub fn parse_topology(obj: &Map<String, Value>) -> Result<Topology, ProtocolError> {
    match obj.get("mode") {
        Some(Value::String(s)) => Topology::parse(s)
            .ok_or_else(|| bad("Field \"mode\" must be \"mesh\", \"forward\" or \"mix\".")),
        Some(_) => Err(bad("Field \"mode\" must be a string.")),
        None => Err(bad("Field \"mode\" is missing.")),
    }
}

fn number(obj: &Map<String, Value>, field: &str, lo: f64, hi: f64) -> Result<f32, ProtocolError> {
    match obj.get(field).and_then(Value::as_f64) {
        Some(x) if (lo..=hi).contains(&x) => Ok(x as f32),
        Some(_) => Err(bad(format!(
            "Field \"{field}\" must be between {lo} and {hi}."
        ))),
        None => Err(bad(format!("Field \"{field}\" must be a number."))),
    }
}

fn flag(obj: &Map<String, Value>, field: &str) -> Result<bool, ProtocolError> {
    match obj.get(field) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad(format!("Field \"{field}\" must be true or false."))),
    }
}

/// `hub-mix`: the member's master and strips.
pub fn parse_mix(obj: &Map<String, Value>) -> Result<PersonalMix, ProtocolError> {
    let master = match obj.get("master") {
        None => None,
        Some(_) => Some(number(obj, "master", 0.0, MAX_GAIN)?),
    };
    let list = match obj.get("strips") {
        None => &Vec::new(),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(bad("Field \"strips\" must be an array.")),
    };
    if list.len() > MAX_STRIPS {
        return Err(bad(format!("At most {MAX_STRIPS} strips per message.")));
    }
    let mut strips = Vec::with_capacity(list.len());
    for item in list {
        let Value::Object(s) = item else {
            return Err(bad("Each strip must be an object."));
        };
        let stream = match s.get("stream").and_then(Value::as_u64) {
            Some(n) if (1..=u64::from(MAX_STREAM)).contains(&n) => n as u16,
            _ => {
                return Err(bad(format!(
                    "A strip's \"stream\" must be 1 to {MAX_STREAM}."
                )))
            }
        };
        strips.push(StripSetting {
            stream,
            gain: number(s, "gain", 0.0, MAX_GAIN)?,
            pan: number(s, "pan", -1.0, 1.0)?,
            mute: flag(s, "mute")?,
            solo: flag(s, "solo")?,
        });
    }
    Ok(PersonalMix { master, strips })
}

pub fn answer(sdp: &str) -> String {
    json!({"type": "hub-answer", "sdp": sdp}).to_string()
}

pub fn topology(mode: Topology) -> String {
    json!({"type": "topology", "mode": mode.as_str()}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("test objects"),
        }
    }

    #[test]
    fn topologies_round_trip() {
        for t in [Topology::Mesh, Topology::Forward, Topology::Mix] {
            assert_eq!(Topology::parse(t.as_str()), Some(t));
            let m = parse_topology(&obj(json!({"mode": t.as_str()}))).expect("parses");
            assert_eq!(m, t);
        }
        assert_eq!(Topology::Mesh.hub_mode(), None);
        assert_eq!(Topology::Mix.hub_mode(), Some(Mode::Mix));
        assert!(parse_topology(&obj(json!({"mode": "star"}))).is_err());
        assert!(parse_topology(&obj(json!({"mode": 1}))).is_err());
        assert!(parse_topology(&obj(json!({}))).is_err());
        assert_eq!(
            topology(Topology::Forward),
            r#"{"mode":"forward","type":"topology"}"#
        );
    }

    #[test]
    fn offers_need_sdp_and_may_ask_for_an_echo() {
        assert_eq!(
            parse_offer(&obj(json!({"sdp": "v=0"}))),
            Ok(("v=0".to_owned(), false))
        );
        assert_eq!(
            parse_offer(&obj(json!({"sdp": "v=0", "echo": true}))),
            Ok(("v=0".to_owned(), true))
        );
        for bad in [
            json!({}),
            json!({"sdp": ""}),
            json!({"sdp": 3}),
            json!({"sdp": "v=0", "echo": "yes"}),
            json!({"sdp": "v=0", "echo": 1}),
        ] {
            assert_eq!(
                parse_offer(&obj(bad)).map_err(|e| e.code),
                Err("bad-message")
            );
        }
    }

    #[test]
    fn mixes_are_checked() {
        let m = parse_mix(&obj(json!({"master": 0.5, "strips": [
            {"stream": 3, "gain": 2.0, "pan": -1.0, "mute": true},
            {"stream": 65534, "gain": 0.0, "pan": 0.25, "solo": true}
        ]})))
        .expect("parses");
        assert_eq!(m.master, Some(0.5));
        assert_eq!(
            m.strips,
            vec![
                StripSetting {
                    stream: 3,
                    gain: 2.0,
                    pan: -1.0,
                    mute: true,
                    solo: false
                },
                StripSetting {
                    stream: 65534,
                    gain: 0.0,
                    pan: 0.25,
                    mute: false,
                    solo: true
                },
            ]
        );
        let refused = [
            json!({"master": 5.0}),
            json!({"master": "loud"}),
            json!({"strips": {}}),
            json!({"strips": [1]}),
            json!({"strips": [{"stream": 0, "gain": 1.0, "pan": 0.0}]}),
            json!({"strips": [{"stream": 65535, "gain": 1.0, "pan": 0.0}]}),
            json!({"strips": [{"stream": 2, "gain": -0.1, "pan": 0.0}]}),
            json!({"strips": [{"stream": 2, "gain": 1.0, "pan": 1.5}]}),
            json!({"strips": [{"stream": 2, "gain": 1.0, "pan": 0.0, "mute": 1}]}),
        ];
        for r in refused {
            assert_eq!(
                parse_mix(&obj(r)).map(|_| ()).map_err(|e| e.code),
                Err("bad-message")
            );
        }
        let many: Vec<Value> = (0..=MAX_STRIPS)
            .map(|i| json!({"stream": i + 1, "gain": 1.0, "pan": 0.0}))
            .collect();
        assert!(parse_mix(&obj(json!({ "strips": many }))).is_err());
    }
}
