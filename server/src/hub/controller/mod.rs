//! Which layer each hub listener takes (of the others' streams in forward mode, of its own mix
//! in mix mode): the richest whose rate fits the capacity of the listener's path, from what the
//! listener measures and reports, never from trial and error.
//!
//! seeds/003 (layered simulcast in a forwarding bridge) picks per receiver the layers that fit
//! below the path's measured capacity (its Algorithm 1) instead of stepping up until loss, which
//! overshoots the path and multiplies the loss. Its layers add up; here a listener takes one
//! format for every sender ([`Layer`]), so the rule is: the richest layer whose need (every
//! sender's stream in that format, with the bundles' overhead) stays below the capacity with a
//! margin. The decision is this module's; the forwarding is [`super::media`]'s (the paper's
//! split between controller and bridge).
//!
//! What a listener reports, about once a second ([`Report`]): the bits per second that reached
//! it, the share of packets lost, the trend of their one-way delay (a queue filling on the path
//! raises it before anything is lost), its round trip, and, when it has one, the capacity of its
//! path measured by packet trains (back-to-back messages spread by the narrowest link: see the
//! hub's probes). The controller:
//!
//! - steps **down at once** on congestion (loss above [`LOSS_CONGESTED`], or the delay rising
//!   faster than [`RISE_CONGESTED_MS_PER_S`]): to the richest layer that fits what did get
//!   through (or the measured capacity, if lower), at least one step; congestion reported
//!   within [`SETTLE_US`] of a step down is the old layer's (the path's queue still drains it)
//!   and steps no further;
//! - steps **up only after a hold** ([`HOLD_US`] since the last change and of clean reports), and
//!   only to a layer that fits the *measured* capacity with a wider margin ([`MARGIN_UP`] against
//!   [`MARGIN_DOWN`]): with no measurement it stays where it is;
//! - re-checks when the number of senders changes (more senders, more need).
//!
//! The two margins and the hold are the hysteresis: a layer taken after a step up needs more
//! than [`MARGIN_DOWN`] / [`MARGIN_UP`] of the capacity it was chosen for before a step down is
//! due, so a steady path gives at most one change each way. A measurement can still be wrong (a
//! listener's loaded machine handles a train's messages in one batch, and it reads as a fast
//! path): a step up that meets congestion before its hold is over doubles the hold before the
//! next one (up to [`MAX_HOLD_US`]), and a step up that lasts its hold brings it back to
//! [`HOLD_US`]. So a path the trains misread costs a few failed tries a minute at most, not one
//! every few seconds. Every decision carries its reason ([`Reason`]), logged by the worker and
//! shown to the listener.
//!
//! A mesh listener ([`crate::mesh_layers`]) has no packet trains: nobody on its paths sends
//! them. Its controller ([`Controller::trying_unmeasured`]) steps up without a measurement, one
//! layer after the hold of clean reports; a try that meets congestion doubles the hold as above,
//! so a path that cannot carry the richer layer costs one failed try every 32 s at most, and a
//! listener that stepped down on a passing congestion does not stay down for the session.
//!
//! [`Policy::Probe`] is the trial-and-error baseline the paper measures against, kept for the
//! comparison (`--layer-policy probe`): it steps up one layer after every hold of clean
//! reports, whatever the path measured, and down one layer on congestion, as a plain bandwidth
//! probe does. On a path narrower than the richer layer it overshoots at every hold and loses
//! packets each time; the capacity policy does not try what its measurement says will not fit.
//!
//! Sans-IO: reports and the time come in, decisions come out.

use std::fmt;

use serde_json::{json, Map, Value};

use tutti_core::bundle::MAX_BUNDLE_PACKETS;

use super::media::layers::Layer;
use crate::protocol::ProtocolError;

/// How a controller picks its listener's layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Policy {
    /// The richest layer that fits the measured capacity with a margin (the default).
    #[default]
    Capacity,
    /// Trial and error: one layer up after each hold of clean reports, one down on congestion
    /// (the baseline, for comparison).
    Probe,
}

/// A listener's report of one window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// Bits per second that reached the listener from the hub (packets with their overhead).
    pub received_bps: f64,
    /// Share of the hub's packets to it that were lost, 0..=1.
    pub loss: f64,
    /// How fast their one-way delay rose over the window, ms per second (negative: fell).
    pub delay_rise_ms_per_s: f64,
    /// Round trip to the hub, ms.
    pub rtt_ms: f64,
    /// Its path's capacity measured by packet trains, bits per second (`None`: none yet).
    pub capacity_bps: Option<f64>,
}

/// Loss in a window above which the path is congested.
pub const LOSS_CONGESTED: f64 = 0.02;
/// One-way delay rising faster than this (ms per second) means a queue is filling. A path
/// overloaded by a tenth fills its queue at 100 ms per second; what pages measure on a clean
/// loopback link swings by up to 5 ms per second (jitter over a 2 s slope), so the bar stands
/// well above that noise.
pub const RISE_CONGESTED_MS_PER_S: f64 = 25.0;
/// A step down takes the richest layer needing at most this share of what got through. What
/// got through in a congested window overstates the path a little (the path's queue drains
/// into it), and a stream of bundles and packet trains comes in bursts that a queue must
/// absorb: a layer needing 87 % of a 1 Mbit/s path still lost 2 % of its packets there.
pub const MARGIN_DOWN: f64 = 0.7;
/// A step up takes the richest layer needing at most this share of the measured capacity.
pub const MARGIN_UP: f64 = 0.6;
/// Least time since the last change, and of clean reports, before a step up, µs.
pub const HOLD_US: u64 = 4_000_000;
/// Longest hold before a step up, after step ups that failed in a row, µs.
pub const MAX_HOLD_US: u64 = 32_000_000;
/// After a step down, congestion reported this soon is the old layer's (the path's queue still
/// drains what was sent before it, and the hub's SCTP association recovers from the loss), not
/// the new one's: it steps down no further, µs. Two reports' worth.
pub const SETTLE_US: u64 = 2_000_000;

/// The layers from the poorest to the richest.
const LADDER: [Layer; 3] = [Layer::Opus64, Layer::Opus128, Layer::AsSent];

/// Bytes a data-channel message costs beyond its payload on the wire (IPv4, UDP, DTLS, SCTP
/// common header and DATA chunk; the app's `PACKET_OVERHEAD_BYTES`).
const MESSAGE_OVERHEAD: f64 = 85.0;
/// Bytes an entry costs in a bundle beyond its packet's payload: its length (2), the JackTrip
/// header (16) and the trailer (8).
const ENTRY_OVERHEAD: f64 = 26.0;

/// What a listener needs, bits per second, to take `layer` from `senders` senders each sending
/// `sent_frames`-frame blocks of PCM16 stereo (the app's default: 128), when each message it
/// gets carries `per_message` of the others' packets on average (at least 1): `senders` when
/// every bundle gathers one packet of each, fewer when senders' packets arrive out of step,
/// more when they arrive in twos (browsers often send two blocks at once). The hub measures it
/// ([`Controller::packing`]): at 2.5 ms frames and 85 bytes a message, a 40-byte Opus frame
/// costs three times its size when it travels alone.
pub fn need_bps(layer: Layer, senders: usize, sent_frames: usize, per_message: f64) -> f64 {
    let s = senders as f64;
    let (frames_per_s, payload) = match layer.opus() {
        Some((bitrate, frame)) => {
            // Each frame travels twice: in its packet and, as the redundant copy, in the next.
            let per_s = 48_000.0 / frame as f64;
            (per_s, 2.0 * f64::from(bitrate) / 8.0 / per_s)
        }
        None => {
            let f = sent_frames.max(1) as f64;
            (48_000.0 / f, f * 2.0 * 2.0)
        }
    };
    let entries_per_s = s * frames_per_s;
    let messages_per_s = entries_per_s / per_message.clamp(1.0, MAX_BUNDLE_PACKETS as f64);
    (entries_per_s * (payload + ENTRY_OVERHEAD) + messages_per_s * MESSAGE_OVERHEAD) * 8.0
}

/// Why a listener takes its layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reason {
    /// Congestion: the loss and the rate that got through.
    Congested { loss: f64, received_bps: f64 },
    /// The delay was rising: a queue filling on the path.
    DelayRising {
        rise_ms_per_s: f64,
        received_bps: f64,
    },
    /// A richer layer fits the measured capacity (after the hold).
    Fits { capacity_bps: f64 },
    /// More senders: the layer no longer fits the measured capacity.
    MoreSenders { senders: usize, capacity_bps: f64 },
    /// Trial and error ([`Policy::Probe`]): clean for the hold, so the next layer up is tried.
    Probing,
    /// No measure of the path (a mesh listener): clean for the hold (seconds), so the next layer
    /// up is tried.
    Unmeasured { hold_s: u64 },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::Congested { loss, received_bps } => write!(
                f,
                "{:.1} % of packets lost; {} got through",
                loss * 100.0,
                mbit(received_bps)
            ),
            Reason::DelayRising {
                rise_ms_per_s,
                received_bps,
            } => write!(
                f,
                "delay rising {rise_ms_per_s:.1} ms per second (a queue filling); {} got through",
                mbit(received_bps)
            ),
            Reason::Fits { capacity_bps } => {
                write!(f, "the path carries {}", mbit(capacity_bps))
            }
            Reason::MoreSenders {
                senders,
                capacity_bps,
            } => write!(
                f,
                "{senders} players need more than the path's {}",
                mbit(capacity_bps)
            ),
            Reason::Probing => write!(
                f,
                "no loss for {} s: trying the next layer up",
                HOLD_US / 1_000_000
            ),
            Reason::Unmeasured { hold_s } => write!(
                f,
                "no loss for {hold_s} s on a path nobody measured: trying the next layer up"
            ),
        }
    }
}

/// "1.8 Mbit/s", "640 kbit/s".
fn mbit(bps: f64) -> String {
    if bps >= 1e6 {
        format!("{:.1} Mbit/s", bps / 1e6)
    } else {
        format!("{:.0} kbit/s", bps / 1e3)
    }
}

/// A change of layer and why.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub layer: Layer,
    pub reason: Reason,
}

/// One listener's controller.
#[derive(Clone, Debug)]
pub struct Controller {
    policy: Policy,
    layer: Layer,
    senders: usize,
    sent_frames: usize,
    /// When the layer last changed (or the controller started), µs.
    changed_us: u64,
    /// Whether that change was a step down (whose effect takes [`SETTLE_US`] to show).
    stepped_down: bool,
    /// Whether that change was a step up that has not yet lasted its hold.
    trying_up: bool,
    /// The hold before the next step up, µs: [`HOLD_US`], doubled by each step up that failed.
    hold_us: u64,
    /// Start of the current run of clean reports, µs.
    clean_since_us: Option<u64>,
    /// The latest measured capacity.
    capacity_bps: Option<f64>,
    /// The others' packets per message the listener got lately (`None`: not measured yet).
    per_message: Option<f64>,
    /// Steps up without a measured capacity (see the module docs).
    unmeasured_tries: bool,
}

impl Controller {
    /// A listener starting on the packets as sent, among `senders` senders of `sent_frames`
    /// frames per block, at `now_us`, choosing by `policy`.
    pub fn new(policy: Policy, senders: usize, sent_frames: usize, now_us: u64) -> Controller {
        Controller {
            policy,
            layer: Layer::AsSent,
            senders,
            sent_frames,
            changed_us: now_us,
            stepped_down: false,
            trying_up: false,
            hold_us: HOLD_US,
            clean_since_us: None,
            capacity_bps: None,
            per_message: None,
            unmeasured_tries: false,
        }
    }

    /// This controller's listener has no packet trains (a mesh): with no measured capacity it
    /// tries one layer up after each hold of clean reports, the hold doubling after a try that
    /// failed (see the module docs).
    pub fn trying_unmeasured(mut self) -> Controller {
        self.unmeasured_tries = true;
        self
    }

    /// The layer in force.
    pub fn layer(&self) -> Layer {
        self.layer
    }

    /// The others' packets per message its bundles carried lately, as the hub counted them: the
    /// needs are figured with it. Values below 1 or not finite are ignored.
    pub fn packing(&mut self, per_message: f64) {
        if per_message.is_finite() && per_message >= 1.0 {
            self.per_message = Some(per_message);
        }
    }

    fn need(&self, layer: Layer, senders: usize) -> f64 {
        let per_message = self.per_message.unwrap_or(senders as f64);
        need_bps(layer, senders, self.sent_frames, per_message)
    }

    fn rung(layer: Layer) -> usize {
        LADDER.iter().position(|&l| l == layer).unwrap_or(0)
    }

    /// The richest layer needing at most `budget_bps` (the poorest when none does).
    fn richest_within(&self, budget_bps: f64) -> Layer {
        LADDER
            .iter()
            .rev()
            .copied()
            .find(|&l| self.need(l, self.senders) <= budget_bps)
            .unwrap_or(LADDER[0])
    }

    fn change(&mut self, layer: Layer, reason: Reason, now_us: u64) -> Option<Decision> {
        if layer == self.layer {
            return None;
        }
        self.stepped_down = Self::rung(layer) < Self::rung(self.layer);
        self.trying_up = !self.stepped_down;
        self.layer = layer;
        self.changed_us = now_us;
        self.clean_since_us = None;
        Some(Decision { layer, reason })
    }

    /// The room's senders (other than the listener) changed.
    pub fn senders(&mut self, senders: usize, now_us: u64) -> Option<Decision> {
        self.senders = senders;
        if self.policy == Policy::Probe {
            // Trial and error learns from loss alone.
            return None;
        }
        let capacity = self.capacity_bps?;
        if self.need(self.layer, senders) <= capacity * MARGIN_DOWN {
            return None;
        }
        let layer = self.richest_within(capacity * MARGIN_DOWN);
        self.change(
            layer,
            Reason::MoreSenders {
                senders,
                capacity_bps: capacity,
            },
            now_us,
        )
    }

    /// A report at `now_us`: a change, when one is due. Reports with values out of range
    /// (negative rates, loss outside 0..=1, non-finite numbers) are ignored.
    pub fn report(&mut self, r: &Report, now_us: u64) -> Option<Decision> {
        let sane = r.received_bps.is_finite()
            && r.received_bps >= 0.0
            && (0.0..=1.0).contains(&r.loss)
            && r.delay_rise_ms_per_s.is_finite()
            && r.capacity_bps.is_none_or(|c| c.is_finite() && c > 0.0);
        if !sane {
            return None;
        }
        if let Some(c) = r.capacity_bps {
            self.capacity_bps = Some(c);
        }
        let lossy = r.loss > LOSS_CONGESTED;
        let rising = r.delay_rise_ms_per_s > RISE_CONGESTED_MS_PER_S;
        if lossy || rising {
            self.clean_since_us = None;
            if self.trying_up && self.policy == Policy::Capacity {
                // The capacity said the layer fits, and it did not: slower to believe it again.
                self.hold_us = (self.hold_us * 2).min(MAX_HOLD_US);
                self.trying_up = false;
            }
            if self.stepped_down && now_us.saturating_sub(self.changed_us) < SETTLE_US {
                return None;
            }
            // What got through is what the path carries now; a measured capacity below it
            // counts too.
            let carried = match r.capacity_bps {
                Some(c) => c.min(r.received_bps),
                None => r.received_bps,
            };
            let fits = self.richest_within(carried * MARGIN_DOWN);
            let one_down = LADDER[Self::rung(self.layer).saturating_sub(1)];
            // Trial and error knows no capacity: one step at a time.
            let layer =
                if self.policy == Policy::Capacity && Self::rung(fits) < Self::rung(one_down) {
                    fits
                } else {
                    one_down
                };
            let reason = if lossy {
                Reason::Congested {
                    loss: r.loss,
                    received_bps: r.received_bps,
                }
            } else {
                Reason::DelayRising {
                    rise_ms_per_s: r.delay_rise_ms_per_s,
                    received_bps: r.received_bps,
                }
            };
            return self.change(layer, reason, now_us);
        }
        let clean_since = *self.clean_since_us.get_or_insert(now_us);
        if self.trying_up && now_us.saturating_sub(self.changed_us) >= HOLD_US {
            // The step up lasted: the trains are believed at once again.
            self.trying_up = false;
            self.hold_us = HOLD_US;
        }
        // Trial and error never backs off (its hold stays HOLD_US), so one hold serves both.
        let held = now_us.saturating_sub(self.changed_us) >= self.hold_us
            && now_us.saturating_sub(clean_since) >= self.hold_us;
        if self.policy == Policy::Probe {
            let one_up = LADDER[(Self::rung(self.layer) + 1).min(LADDER.len() - 1)];
            return if held {
                self.change(one_up, Reason::Probing, now_us)
            } else {
                None
            };
        }
        if !held {
            return None;
        }
        let Some(capacity) = self.capacity_bps else {
            let one_up = LADDER[(Self::rung(self.layer) + 1).min(LADDER.len() - 1)];
            if !self.unmeasured_tries {
                return None;
            }
            let hold_s = self.hold_us / 1_000_000;
            return self.change(one_up, Reason::Unmeasured { hold_s }, now_us);
        };
        let fits = self.richest_within(capacity * MARGIN_UP);
        if Self::rung(fits) <= Self::rung(self.layer) {
            return None;
        }
        self.change(
            fits,
            Reason::Fits {
                capacity_bps: capacity,
            },
            now_us,
        )
    }
}

/// Largest rate a report may state, bits per second (far beyond any path).
pub const MAX_REPORT_BPS: f64 = 1e11;
/// Largest delay trend or round trip a report may state (ms per second, ms).
pub const MAX_REPORT_MS: f64 = 1e6;

fn field(
    obj: &Map<String, Value>,
    name: &str,
    range: std::ops::RangeInclusive<f64>,
) -> Result<f64, ProtocolError> {
    match obj.get(name).and_then(Value::as_f64) {
        Some(v) if v.is_finite() && range.contains(&v) => Ok(v),
        _ => Err(ProtocolError::new(
            "bad-message",
            format!(
                "Field \"{name}\" must be a number from {} to {}.",
                range.start(),
                range.end()
            ),
        )),
    }
}

/// C→S `{"type":"reception","receivedBps":R,"loss":L,"delayRiseMsPerS":D,"rttMs":T,
/// "capacityBps":C|null}`: a hub listener's report of the last second.
pub fn parse_report(obj: &Map<String, Value>) -> Result<Report, ProtocolError> {
    let capacity_bps = match obj.get("capacityBps") {
        None | Some(Value::Null) => None,
        Some(_) => Some(field(obj, "capacityBps", 1.0..=MAX_REPORT_BPS)?),
    };
    Ok(Report {
        received_bps: field(obj, "receivedBps", 0.0..=MAX_REPORT_BPS)?,
        loss: field(obj, "loss", 0.0..=1.0)?,
        delay_rise_ms_per_s: field(obj, "delayRiseMsPerS", -MAX_REPORT_MS..=MAX_REPORT_MS)?,
        rtt_ms: field(obj, "rttMs", 0.0..=MAX_REPORT_MS)?,
        capacity_bps,
    })
}

/// S→C `{"type":"layer","layer":L,"reason":R}`: what the listener now takes of the others, and
/// why (for its stats view).
pub fn layer_notice(layer: Layer, reason: &str) -> String {
    json!({"type": "layer", "layer": layer.name(), "reason": reason}).to_string()
}

#[cfg(test)]
mod tests;
