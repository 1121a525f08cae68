//! Which layer of the others' streams each member of a mesh room takes: in a mesh every sender
//! encodes its stream once per layer its peers take (the engine's capture) and sends each peer
//! the layer it takes; which one is decided here, by the hub's controller
//! ([`crate::hub::controller`]), from the same reports a hub listener sends.
//!
//! A mesh listener reports what reaches it from all its peers together, once a second
//! (`reception`: the rate that got through, the share lost, the one-way delay's trend). Its
//! downlink carries every sender's stream, so one layer for all of them is what fits it, as in
//! the hub's forward mode: the need is every other member's stream in that layer, each packet in
//! a message of its own. Nobody sends a mesh listener packet trains, so its controller tries a
//! layer up after a hold of clean reports, backing off after each try that fails
//! ([`Controller::trying_unmeasured`]).
//!
//! A decision goes to the listener as the hub's `layer` notice marked `"mesh":true` (its stats
//! view says what it takes and why; the mark tells it from a hub's notice that crossed a switch
//! to the mesh) and to every other connected member as
//! `{"type":"send-layer","peer":P,"layer":L}`: "member P takes layer L of your stream". A
//! member gets the others' current layers when it joins; a listener whose connection is
//! replaced starts again on the packets as sent, and so does every listener when the room
//! leaves the mesh (each sender is told). A report can only change its own sender's layer:
//! what a hostile member reports decides what it receives, and costs each sender at most one
//! more encode per layer (three at most), whatever the number of members.
//!
//! Only in a room that stays a mesh: its owner chose the mesh, or the server runs no hub.
//! Elsewhere a mesh that its paths cannot carry is the hub's to solve: a sender's uplink that
//! cannot carry its copies moves the room (`--hub-auto`, [`crate::hub::uplink`]), and there the
//! hub's controller fits each listener's downlink. A mesh controller there would step every
//! listener down to Opus from every sender for one sender's narrow uplink (a listener sees only
//! that packets are lost), and the mesh would then fit, on Opus, what the hub carries as PCM.
//!
//! The controllers live in the room's members ([`Member::takes`]), under the rooms' lock.

use serde_json::json;

use crate::hub::controller::{Controller, Decision, Policy, Report};
use crate::hub::media::layers::Layer;
use crate::hub::signal::Topology;
use crate::room::{Member, Room};

/// Frames per block a mesh sender sends (the app's default, as the hub figures it).
const SENT_FRAMES: usize = 128;

/// How the server treats mesh listeners' reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeshRules {
    /// How a controller picks (`--layer-policy`, as in the hub).
    pub policy: Policy,
    /// The server runs a hub: then only a room its owner keeps as a mesh has mesh layers (see
    /// the module docs).
    pub hub: bool,
}

/// S→C `{"type":"layer","layer":L,"reason":R,"mesh":true}`: what the listener now takes of the
/// others in the mesh, and why.
pub fn mesh_notice(layer: Layer, reason: &str) -> String {
    json!({"type": "layer", "layer": layer.name(), "reason": reason, "mesh": true}).to_string()
}

/// S→C `send-layer`: member `peer` takes `layer` of the receiver's stream from now on.
pub fn send_layer(peer: &str, layer: Layer) -> String {
    json!({"type": "send-layer", "peer": peer, "layer": layer.name()}).to_string()
}

impl Room {
    /// The other members whose streams a mesh listener takes.
    fn mesh_senders(&self) -> usize {
        self.connected_count().saturating_sub(1)
    }

    /// Member `i`'s reception report at `now_us` while the room is a mesh: its controller (made
    /// at its first report) may change the layer it takes, which it and the others are told;
    /// in a mesh its owner did not choose on a server with a hub, nothing (see the module
    /// docs). Reports while the room goes through the hub are not this module's (false).
    pub(crate) fn mesh_reception(
        &mut self,
        i: usize,
        report: &Report,
        rules: MeshRules,
        now_us: u64,
    ) -> bool {
        if self.topology != Topology::Mesh {
            return false;
        }
        if rules.hub && !self.pinned {
            return true;
        }
        let policy = rules.policy;
        let senders = self.mesh_senders();
        let Some(m) = self.members.get_mut(i) else {
            return true;
        };
        let c = m.takes.get_or_insert_with(|| {
            let mut c = Controller::new(policy, senders, SENT_FRAMES, now_us).trying_unmeasured();
            c.packing(1.0);
            c
        });
        if let Some(d) = c.report(report, now_us) {
            self.announce(i, d);
        }
        true
    }

    /// The number of members changed: every mesh listener's controller re-checks its need.
    pub(crate) fn mesh_senders_changed(&mut self, now_us: u64) {
        let senders = self.mesh_senders();
        for i in 0..self.members.len() {
            let decision = self.members[i]
                .takes
                .as_mut()
                .and_then(|c| c.senders(senders, now_us));
            if let Some(d) = decision {
                self.announce(i, d);
            }
        }
    }

    /// Tells member `i` (just joined) the layer each other member takes of its stream, where
    /// that is not the packets as sent.
    pub(crate) fn mesh_layers_to(&self, i: usize) {
        let Some(outbox) = self.members.get(i).and_then(|m| m.outbox.as_ref()) else {
            return;
        };
        for (m, _) in self.connected() {
            let layer = m.mesh_layer();
            if m.peer != self.members[i].peer && layer != Layer::AsSent {
                outbox.send_text(send_layer(&m.peer, layer));
            }
        }
    }

    /// Member `i` starts again on the packets as sent (a new connection, or leaving): the
    /// others are told when it took another layer.
    pub(crate) fn mesh_forget(&mut self, i: usize) {
        let Some(m) = self.members.get_mut(i) else {
            return;
        };
        let layer = m.mesh_layer();
        m.takes = None;
        if layer != Layer::AsSent {
            let peer = m.peer.clone();
            self.broadcast(&send_layer(&peer, Layer::AsSent), Some(&peer));
        }
    }

    /// The room leaves the mesh: every listener starts again on the packets as sent.
    pub(crate) fn mesh_end(&mut self) {
        for i in 0..self.members.len() {
            self.mesh_forget(i);
        }
    }

    /// Member `i` now takes the decided layer: it hears why, the others what to send it.
    fn announce(&self, i: usize, d: Decision) {
        let m = &self.members[i];
        let reason = d.reason.to_string();
        tracing::info!(
            "mesh layer peer={} layer={}: {reason}",
            crate::log::short_peer(&m.peer),
            d.layer.name()
        );
        if let Some(o) = &m.outbox {
            o.send_text(mesh_notice(d.layer, &reason));
        }
        self.broadcast(&send_layer(&m.peer, d.layer), Some(&m.peer));
    }
}

impl Member {
    /// The layer this member takes of the others' streams in a mesh.
    pub(crate) fn mesh_layer(&self) -> Layer {
        self.takes.as_ref().map_or(Layer::AsSent, Controller::layer)
    }
}
