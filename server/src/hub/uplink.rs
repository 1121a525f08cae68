//! When a mesh no longer fits: a member's report of what its uplink carries, and the server's
//! decision to carry the room on the hub.
//!
//! In a mesh each of N players uploads its stream N − 1 times. Every page measures what its own
//! uplink carries (what its channels were handed less what they still hold, over a few seconds)
//! and, when the mesh has asked more than that for a while, reports it:
//! C→S `{"type":"uplink","need":N,"carries":C}`, bits per second each (the mesh's ask of that
//! player, and what its uplink was seen to carry). Only the members know their uplinks, and one
//! player whose uplink cannot carry the mesh is heard in gaps by everyone, so one report is
//! enough: the server moves the room to the hub in forward mode, where each player uploads its
//! stream once, and every member gets `{"type":"topology","mode":"forward","reason":R}` with R
//! saying whose uplink and by how much. A report is acted on only in a mesh room of three or
//! more players whose owner has not chosen the mesh (an owner's choice stands), and only while
//! the server runs the hub with `--hub-auto`.
//!
//! A member could report falsely: the most it does is move its own room to the hub once (every
//! member keeps hearing every other), and the owner's move back to the mesh pins it there.

use serde_json::{json, Map, Value};

use super::signal::Topology;
use crate::protocol::ProtocolError;

/// Largest rate a report may state, bits per second (far beyond any uplink).
pub const MAX_REPORT_BPS: f64 = 1e11;
/// Fewest players for which the hub helps: with two, each sends one stream either way.
pub const MIN_PLAYERS: usize = 3;

/// A member's report: what the mesh asks of its uplink and what the uplink carries, bits/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UplinkReport {
    pub need_bps: f64,
    pub carries_bps: f64,
}

fn rate(obj: &Map<String, Value>, field: &str) -> Result<f64, ProtocolError> {
    match obj.get(field).and_then(Value::as_f64) {
        Some(v) if v.is_finite() && (0.0..=MAX_REPORT_BPS).contains(&v) => Ok(v),
        _ => Err(ProtocolError::new(
            "bad-message",
            format!("Field \"{field}\" must be a rate in bits per second, 0 to {MAX_REPORT_BPS}."),
        )),
    }
}

/// `uplink`: the two rates.
pub fn parse_report(obj: &Map<String, Value>) -> Result<UplinkReport, ProtocolError> {
    Ok(UplinkReport {
        need_bps: rate(obj, "need")?,
        carries_bps: rate(obj, "carries")?,
    })
}

/// "1.8 Mbit/s", "12 Mbit/s".
fn mbit(bps: f64) -> String {
    let m = bps / 1e6;
    if m >= 10.0 {
        format!("{m:.0} Mbit/s")
    } else {
        format!("{m:.1} Mbit/s")
    }
}

/// Why the room moves to the hub on `report` from the member named `name`, in a room of
/// `players` players now using `topology` (`pinned`: its owner chose it): `None` when it stays.
pub fn move_reason(
    report: &UplinkReport,
    name: &str,
    players: usize,
    topology: Topology,
    pinned: bool,
) -> Option<String> {
    if topology != Topology::Mesh || pinned || players < MIN_PLAYERS {
        return None;
    }
    if report.carries_bps >= report.need_bps {
        return None;
    }
    Some(format!(
        "{name}'s uplink carries about {}, and a mesh of {players} asks {} of each player: \
         the room now goes through the server, where each player sends its stream once",
        mbit(report.carries_bps),
        mbit(report.need_bps)
    ))
}

/// `topology` with the reason the server moved the room.
pub fn moved(mode: Topology, reason: &str) -> String {
    json!({"type": "topology", "mode": mode.as_str(), "reason": reason}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn reports_are_two_rates_in_range() {
        assert_eq!(
            parse_report(&obj(json!({"need": 7.4e6, "carries": 3.1e6}))),
            Ok(UplinkReport {
                need_bps: 7.4e6,
                carries_bps: 3.1e6
            })
        );
        for bad in [
            json!({"need": 7.4e6}),
            json!({"carries": 1}),
            json!({"need": "7.4e6", "carries": 1}),
            json!({"need": -1, "carries": 1}),
            json!({"need": 1e12, "carries": 1}),
            json!({"need": 1, "carries": null}),
        ] {
            assert_eq!(
                parse_report(&obj(bad.clone())).map_err(|e| e.code),
                Err("bad-message"),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_mesh_that_does_not_fit_moves_once_and_says_why() {
        let r = UplinkReport {
            need_bps: 7.36e6,
            carries_bps: 3.14e6,
        };
        assert_eq!(
            move_reason(&r, "Ann", 5, Topology::Mesh, false).as_deref(),
            Some(
                "Ann's uplink carries about 3.1 Mbit/s, and a mesh of 5 asks 7.4 Mbit/s of each \
                 player: the room now goes through the server, where each player sends its \
                 stream once"
            )
        );
        // Already on the hub, the owner's mesh, two players, or an uplink that carries it: stays.
        assert_eq!(move_reason(&r, "Ann", 5, Topology::Forward, false), None);
        assert_eq!(move_reason(&r, "Ann", 5, Topology::Mix, false), None);
        assert_eq!(move_reason(&r, "Ann", 5, Topology::Mesh, true), None);
        assert_eq!(move_reason(&r, "Ann", 2, Topology::Mesh, false), None);
        let fits = UplinkReport {
            need_bps: 3.0e6,
            carries_bps: 3.0e6,
        };
        assert_eq!(move_reason(&fits, "Ann", 5, Topology::Mesh, false), None);
        assert!(moved(Topology::Forward, "why").contains(r#""reason":"why""#));
    }
}
