//! The media of one hub room, sans-IO: what the room does with each client's packets and what it
//! sends each client, driven by a worker that owns the sockets and the clock.
//!
//! The worker hands every message a client sent to [`MediaRoom::receive`], calls
//! [`MediaRoom::poll`] when it wakes (it sends what `poll` gives it) and sleeps at most until
//! [`MediaRoom::next_deadline`]. All times are µs on one monotonic clock.
//!
//! - `ingest`: every message is checked (packet, 48 kHz, format, the sender's own stream id,
//!   its rate) and bad ones are counted by reason and dropped; JackTrip's exit datagram is
//!   reported as [`Received::Exit`].
//! - `forward` (forward mode): each browser listener gets the other clients' packets, stamped
//!   with their senders' stream ids, bundled into one message per block.
//! - `mix` (mix mode, and for JackTrip listeners in forward mode too): the room ticks every 128
//!   frames; every source goes through the core's jitter buffer, concealment and drift correction,
//!   and each listener gets its personal mix minus its own voice, in PCM16 or, for a browser
//!   whose layer is Opus, as an Opus stream of its own ([`tutti_core::framer`]). In mix mode every
//!   [`METER_TICKS`] ticks each browser listener also gets one meters message
//!   ([`tutti_core::meters`]): every player's level as it arrives, which its mixer shows.
//!
//! - `cascade`: when this hub carries part of a room whose home is another hub, each tick also
//!   sends the home hub the raw sum of the players here and adds the home hub's mix (everyone
//!   else in the room) to every listener's mix.
//!
//! Clients are added and removed (and their personal mixes set) off the hot path, where the room
//! allocates; [`MediaRoom::receive`] and [`MediaRoom::poll`] allocate nothing and never panic.

mod cascade;
mod forward;
mod ingest;
pub mod layers;
mod mix;
#[cfg(test)]
mod tests;

use core::fmt;

use tutti_core::bundle::MAX_BUNDLE_LEN;
use tutti_core::engine::{EngineConfig, Peer};
use tutti_core::meters::{MetersWriter, MAX_METERS_LEN};
use tutti_core::mix::{GainControl, MixMinusError};

use cascade::Cascade;
pub use cascade::{CASCADE, LINK_FORMAT};
use forward::Pending;
use ingest::Ingest;
pub use ingest::{ClientCounters, DropReason, Received, BURST_PACKETS};
use layers::{Layer, SenderLayers, OPUS_LAYERS};
pub use mix::{tick_offset_us, MAX_TICKS_PER_POLL, TICK_US};
use mix::{Mixer, Output};

/// The stream id of a listener's mix (mix mode).
pub const MIX_STREAM: u16 = 0;
/// Most clients in one room.
pub const MAX_CLIENTS: usize = 512;
/// Most sources one listener may set away from the default in its personal mix.
pub const MAX_STRIPS: usize = 64;
/// A client is a current sender while its last accepted packet is at most this old, µs.
pub const ACTIVE_US: u64 = 50_000;
/// Longest a forwarded packet waits for the rest of its bundle, µs.
pub const BUNDLE_WAIT_US: u64 = 1_000;
/// Mix ticks between two meters messages to each browser listener (19 × 128 frames: 50.7 ms,
/// about twenty a second, as often as a mixer redraws its meters).
pub const METER_TICKS: u64 = 19;

/// How the room carries audio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each browser gets the others' packets and mixes them itself.
    Forward,
    /// Each client gets its personal mix, made here.
    Mix,
}

/// What a JackTrip client sends and wants back: the one type the JackTrip session fixes from
/// its client's first packet.
pub use super::jacktrip::session::JackTripFormat;

/// The kind of client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// A browser on a data channel: Tutti packets in, bundles out.
    Browser,
    /// A native JackTrip client over UDP: plain JackTrip packets both ways, always the mix.
    JackTrip(JackTripFormat),
}

/// A client of one room (its slot and the slot's generation, so a stale id matches nobody).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientId(u32);

impl ClientId {
    fn new(slot: usize, generation: u16) -> ClientId {
        ClientId(slot as u32 | u32::from(generation) << 16)
    }
    fn slot(self) -> usize {
        (self.0 & 0xFFFF) as usize
    }
}

/// Why the room refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaError {
    /// The room holds [`MAX_CLIENTS`] clients.
    Full,
    /// Another client has this stream id.
    StreamTaken,
    /// Stream ids are 1..=65534.
    BadStream,
    /// A JackTrip format the room cannot serve.
    BadFormat,
    /// No such client (or it left).
    NoSuchClient,
    /// No client with that source stream id.
    NoSuchSource,
    /// A listener has no strip for its own voice.
    OwnVoice,
    /// The listener has already set [`MAX_STRIPS`] sources away from the default.
    TooManyStrips,
    /// Layers are for browser listeners (a JackTrip client takes its own format).
    NotBrowser,
    /// The codec could not be set up (libopus refused to make an encoder).
    Codec,
}

impl fmt::Display for MediaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MediaError::Full => "the room is full",
            MediaError::StreamTaken => "stream id already in use",
            MediaError::BadStream => "stream ids are 1..=65534",
            MediaError::BadFormat => "unsupported JackTrip format",
            MediaError::NotBrowser => "only a browser listener takes a layer",
            MediaError::Codec => "the codec could not be set up",
            MediaError::NoSuchClient => "no such client",
            MediaError::NoSuchSource => "no client with that stream id",
            MediaError::OwnVoice => "a listener has no strip for its own voice",
            MediaError::TooManyStrips => "too many personal strips",
        })
    }
}

impl std::error::Error for MediaError {}

/// The room's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoomCounters {
    /// Mix ticks run.
    pub ticks: u64,
    /// Polls that came more than one tick after a due tick (the worker fell behind).
    pub late_ticks: u64,
    /// Overdue ticks skipped to catch up.
    pub skipped_ticks: u64,
    /// The worst lateness of a due tick, µs.
    pub max_tick_lateness_us: u64,
    /// Messages from client ids not in the room.
    pub unknown_client: u64,
    /// Bundles sent in forward mode.
    pub bundles: u64,
    /// Meters messages sent (mix mode), one per browser listener every [`METER_TICKS`] ticks.
    pub meter_messages: u64,
}

/// One client and everything the room holds for it.
struct Client {
    id: ClientId,
    stream: u16,
    kind: ClientKind,
    ingest: Ingest,
    /// When its last packet was accepted.
    last_us: Option<u64>,
    /// Whether its jitter buffer has been fed: it is a source of the mix.
    heard: bool,
    /// Its own packets come back to it too (forward mode): the sound check through the hub.
    echo: bool,
    /// A browser's staged forwarded packets.
    pending: Option<Pending>,
    /// What it takes of the others (forward mode, browsers).
    layer: Layer,
    /// Its stream in the Opus layers someone takes (taken out while it is fed).
    layers: Option<Box<SenderLayers>>,
    peer: Box<Peer>,
    output: Box<Output>,
}

impl Client {
    fn active(&self, now_us: u64) -> bool {
        self.last_us
            .is_some_and(|t| now_us.saturating_sub(t) <= ACTIVE_US)
    }
}

/// The media of one room. See the module docs.
pub struct MediaRoom {
    mode: Mode,
    clients: Vec<Option<Client>>,
    generations: Vec<u16>,
    len: usize,
    jacktrip: usize,
    mixer: Mixer,
    /// The link to the room's home hub, when this hub carries part of a larger room.
    cascade: Option<Box<Cascade>>,
    scratch: Box<[u8]>,
    /// Browser listeners taking each Opus layer ([`OPUS_LAYERS`] order).
    takers: [usize; 2],
    /// The meters message of the tick, written once for every listener.
    meters: Box<[u8]>,
    counters: RoomCounters,
}

impl MediaRoom {
    /// An empty room. Allocates.
    pub fn new(mode: Mode, now_us: u64) -> MediaRoom {
        let mut room = MediaRoom {
            mode,
            clients: Vec::with_capacity(MAX_CLIENTS),
            generations: Vec::with_capacity(MAX_CLIENTS),
            len: 0,
            jacktrip: 0,
            mixer: Mixer::new(),
            cascade: None,
            scratch: vec![0; MAX_BUNDLE_LEN].into_boxed_slice(),
            takers: [0; 2],
            meters: vec![0; MAX_METERS_LEN].into_boxed_slice(),
            counters: RoomCounters::default(),
        };
        room.update_running(now_us);
        room
    }

    /// The room's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switches the mode. Packets staged for forwarding are dropped when the mix takes over.
    pub fn set_mode(&mut self, mode: Mode, now_us: u64) {
        if mode == Mode::Mix && self.mode != Mode::Mix {
            for c in self.clients.iter_mut().flatten() {
                if let Some(p) = c.pending.as_mut() {
                    p.clear();
                }
                c.output.restart();
            }
        }
        self.mode = mode;
        self.update_running(now_us);
    }

    /// Ticks run in mix mode and, in forward mode, while a JackTrip client is present.
    fn update_running(&mut self, now_us: u64) {
        let on = self.mode == Mode::Mix || self.jacktrip > 0;
        self.mixer.set_running(on, now_us);
    }

    /// Starts (a fresh jitter buffer) or ends this room's link to its home hub: with it, each
    /// tick also sends [`CASCADE`] the room's raw sum, and what [`MediaRoom::receive_cascade`]
    /// gets is added to every listener's mix (see `cascade`). Allocates.
    pub fn set_cascade(&mut self, on: bool, now_us: u64) {
        self.cascade = on.then(|| Box::new(Cascade::new(now_us)));
    }

    /// Whether the room has a link to a home hub.
    pub fn has_cascade(&self) -> bool {
        self.cascade.is_some()
    }

    /// One packet of the home hub's mix. Never panics, never allocates; bad input is counted
    /// and dropped.
    pub fn receive_cascade(&mut self, bytes: &[u8], now_us: u64) -> Received {
        let frame = self.mixer.running().then(|| self.mixer.frame());
        match self.cascade.as_mut() {
            Some(c) => c.receive(bytes, now_us, frame),
            None => Received::Dropped(DropReason::UnknownClient),
        }
    }

    /// The link's counters: what came from the home hub, and packets sent to it.
    pub fn cascade_counters(&self) -> Option<(ClientCounters, u64)> {
        self.cascade.as_ref().map(|c| c.counters())
    }

    /// Adds a client with stream id `stream`. Allocates.
    pub fn add_client(
        &mut self,
        stream: u16,
        kind: ClientKind,
        now_us: u64,
    ) -> Result<ClientId, MediaError> {
        if stream == MIX_STREAM || stream == u16::MAX {
            return Err(MediaError::BadStream);
        }
        if let ClientKind::JackTrip(f) = kind {
            if !f.is_valid() {
                return Err(MediaError::BadFormat);
            }
        }
        if self.clients.iter().flatten().any(|c| c.stream == stream) {
            return Err(MediaError::StreamTaken);
        }
        if self.len >= MAX_CLIENTS {
            return Err(MediaError::Full);
        }
        let slot = match self.clients.iter().position(Option::is_none) {
            Some(slot) => slot,
            None => {
                self.clients.push(None);
                self.generations.push(0);
                self.clients.len() - 1
            }
        };
        let id = ClientId::new(slot, self.generations[slot]);
        self.mixer.blocks.ensure(slot);
        let _ = self.mixer.minus.clear(slot);
        self.mixer.minus.forget_source(slot);
        let mut layers = SenderLayers::new();
        for (i, l) in OPUS_LAYERS.iter().enumerate() {
            if self.takers[i] > 0 {
                layers.ensure(*l).map_err(|_| MediaError::Codec)?;
            }
        }
        self.clients[slot] = Some(Client {
            id,
            stream,
            kind,
            ingest: Ingest::new(stream, kind, now_us),
            last_us: None,
            heard: false,
            echo: false,
            pending: (kind == ClientKind::Browser).then(Pending::new),
            layer: Layer::AsSent,
            layers: Some(layers),
            peer: Peer::new(&EngineConfig::default()),
            output: Box::new(Output::new()),
        });
        self.len += 1;
        if matches!(kind, ClientKind::JackTrip(_)) {
            self.jacktrip += 1;
            self.update_running(now_us);
        }
        Ok(id)
    }

    /// Clients in the room (browsers and JackTrip clients).
    pub fn clients(&self) -> usize {
        self.len
    }

    /// Removes a client: its buffers, its personal mix, and every other listener's strip for it.
    pub fn remove_client(&mut self, id: ClientId) {
        let Some(slot) = self.slot_of(id) else {
            return;
        };
        let Some(client) = self.clients[slot].take() else {
            return;
        };
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        self.len -= 1;
        if let Some(i) = client.layer.index() {
            self.takers[i] -= 1;
        }
        let _ = self.mixer.minus.clear(slot);
        self.mixer.minus.forget_source(slot);
        for c in self.clients.iter_mut().flatten() {
            if let Some(p) = c.pending.as_mut() {
                p.forget_sender(slot);
            }
        }
        if matches!(client.kind, ClientKind::JackTrip(_)) {
            self.jacktrip -= 1;
            let now = client.last_us.unwrap_or(0);
            self.update_running(now);
        }
    }

    /// Whether a browser client's own packets come back to it in forward mode (with its own
    /// stream id, in its bundles): what it asked for its sound check through the hub. It changes
    /// what that client alone receives.
    pub fn set_echo(&mut self, id: ClientId, on: bool) {
        if let Some(c) = self.slot_of(id).and_then(|s| self.clients[s].as_mut()) {
            c.echo = on;
        }
    }

    /// What browser `listener` takes: in forward mode, the other senders' packets as sent or an
    /// Opus layer (each sender's stream encoded once for all who take it); in mix mode, its mix
    /// in PCM16 or as Opus at that layer's rate (encoded for it alone: the mix is its own). The
    /// choice holds across a switch of mode. Makes the layer's encoders for every sender that
    /// lacks one and the listener's own: allocates, so it belongs to the control path. A
    /// JackTrip client takes its own format from the mix and has no layer.
    pub fn set_layer(&mut self, listener: ClientId, layer: Layer) -> Result<(), MediaError> {
        let slot = self.slot_of(listener).ok_or(MediaError::NoSuchClient)?;
        match self.clients[slot].as_ref() {
            Some(c) if c.kind == ClientKind::Browser => {}
            Some(_) => return Err(MediaError::NotBrowser),
            None => return Err(MediaError::NoSuchClient),
        }
        for c in self.clients.iter_mut().flatten() {
            if let Some(layers) = c.layers.as_mut() {
                layers.ensure(layer).map_err(|_| MediaError::Codec)?;
            }
        }
        let Some(c) = self.clients[slot].as_mut() else {
            return Err(MediaError::NoSuchClient);
        };
        c.output.set_layer(layer).map_err(|_| MediaError::Codec)?;
        if let Some(i) = c.layer.index() {
            self.takers[i] -= 1;
        }
        if let Some(i) = layer.index() {
            self.takers[i] += 1;
        }
        c.layer = layer;
        Ok(())
    }

    /// The layer `listener` takes.
    pub fn layer(&self, listener: ClientId) -> Option<Layer> {
        self.slot_of(listener)
            .and_then(|s| self.clients[s].as_ref())
            .map(|c| c.layer)
    }

    /// What the client's Opus layers counted (as a sender).
    pub fn layer_counters(&self, id: ClientId) -> Option<layers::LayerCounters> {
        self.slot_of(id)
            .and_then(|s| self.clients[s].as_ref())
            .and_then(|c| c.layers.as_ref())
            .map(|l| l.counters)
    }

    /// The Opus frames of the client's own mix (mix mode, an Opus layer): encoded and refused.
    pub fn mix_opus_counters(&self, id: ClientId) -> Option<tutti_core::framer::Pushed> {
        self.slot_of(id)
            .and_then(|s| self.clients[s].as_ref())
            .map(|c| c.output.opus_frames)
    }

    /// Listener `listener`'s strip for the client whose stream id is `source_stream`: its gain
    /// (linear, 0..=4), pan (−1..=1), mute and solo in the listener's personal mix.
    pub fn set_strip(
        &mut self,
        listener: ClientId,
        source_stream: u16,
        gain: f32,
        pan: f32,
        mute: bool,
        solo: bool,
    ) -> Result<(), MediaError> {
        let l = self.slot_of(listener).ok_or(MediaError::NoSuchClient)?;
        let s = self
            .clients
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.stream == source_stream))
            .ok_or(MediaError::NoSuchSource)?;
        let strip = self.mixer.minus.strip_mut(l, s).map_err(|e| match e {
            MixMinusError::OwnVoice(_) => MediaError::OwnVoice,
            MixMinusError::TooManyChanges(_) => MediaError::TooManyStrips,
            MixMinusError::NoSuchSlot(_) => MediaError::NoSuchClient,
        })?;
        strip.set_gain(gain);
        strip.set_pan(pan);
        strip.set_mute(mute);
        strip.set_solo(solo);
        Ok(())
    }

    /// Listener `listener`'s master gain (linear, 0..=4) in its personal mix.
    pub fn set_master(&mut self, listener: ClientId, gain: f32) -> Result<(), MediaError> {
        let l = self.slot_of(listener).ok_or(MediaError::NoSuchClient)?;
        let master = self
            .mixer
            .minus
            .master_mut(l)
            .ok_or(MediaError::NoSuchClient)?;
        master.set_gain(gain);
        Ok(())
    }

    /// One message from a client. Never panics, never allocates; bad input is counted and
    /// dropped. [`Received::Exit`] asks the worker to end the client.
    pub fn receive(&mut self, from: ClientId, bytes: &[u8], now_us: u64) -> Received {
        let Some(slot) = self.slot_of(from) else {
            self.counters.unknown_client += 1;
            return Received::Dropped(DropReason::UnknownClient);
        };
        let running = self.mixer.running();
        let frame = self.mixer.frame();
        let Some(client) = self.clients[slot].as_mut() else {
            return Received::Dropped(DropReason::UnknownClient);
        };
        let pkt = match client.ingest.check(bytes, now_us) {
            Ok(pkt) => pkt,
            Err(outcome) => return outcome,
        };
        client.last_us = Some(now_us);
        if running {
            client.peer.push(&pkt, frame);
            client.heard = true;
        }
        if self.mode != Mode::Forward {
            return Received::Accepted;
        }
        let stream = client.stream;
        let has_ext = pkt.ext.is_some();
        let mut forwarded = stage_for(
            &mut self.clients,
            slot,
            stream,
            Layer::AsSent,
            bytes,
            has_ext,
            now_us,
        );
        let taken = [self.takers[0] > 0, self.takers[1] > 0];
        if taken.contains(&true) {
            // The sender's layers are taken out while their frames are staged for the others
            // (moving the box allocates nothing).
            let mut layers = self.clients[slot].as_mut().and_then(|c| c.layers.take());
            if let Some(l) = layers.as_mut() {
                let clients = &mut self.clients;
                l.feed(&pkt, now_us, taken, &mut |layer, frame| {
                    forwarded += stage_for(clients, slot, stream, layer, frame, true, now_us);
                });
            }
            if let Some(c) = self.clients[slot].as_mut() {
                c.layers = layers;
            }
        }
        if let Some(client) = self.clients[slot].as_mut() {
            client.ingest.counters.forwarded += forwarded;
        }
        Received::Accepted
    }

    /// Everything due at `now_us`: calls `send(to, bytes)` once per outgoing message. No
    /// allocation.
    pub fn poll(&mut self, now_us: u64, send: &mut dyn FnMut(ClientId, &[u8])) {
        let ticks = self.mixer.due(now_us, &mut self.counters);
        for _ in 0..ticks {
            self.tick(send);
            self.mixer.advance();
        }
        let active = self
            .clients
            .iter()
            .flatten()
            .filter(|c| c.active(now_us))
            .count();
        let scratch = &mut self.scratch;
        for c in self.clients.iter_mut().flatten() {
            // Whom its bundle waits for: the other senders, and itself when it hears itself.
            let others = active - usize::from(c.active(now_us) && !c.echo);
            let Some(p) = c.pending.as_mut() else {
                continue;
            };
            if !p.due(now_us, others) {
                continue;
            }
            let id = c.id;
            let (messages, packets, bytes) = p.flush(scratch, &mut |b| send(id, b));
            c.ingest.counters.sent += messages;
            c.ingest.counters.sent_entries += packets;
            c.ingest.counters.sent_bytes += bytes;
            self.counters.bundles += messages;
        }
    }

    /// One mix tick: every source's block, the room's sum, each listener's mix sent.
    fn tick(&mut self, send: &mut dyn FnMut(ClientId, &[u8])) {
        let frame = self.mixer.frame();
        let stamp = self.mixer.next_tick_us().unwrap_or(0);
        for (slot, c) in self.clients.iter_mut().enumerate() {
            let (l, r, live) = self.mixer.blocks.slot_mut(slot);
            match c {
                Some(c) if c.heard => {
                    c.peer.pull(frame, l, r);
                    *live = true;
                }
                _ => *live = false,
            }
        }
        self.mixer.minus.sum(&self.mixer.blocks);
        self.counters.ticks += 1;
        let mut cascade = self.cascade.as_deref_mut();
        if let Some(c) = cascade.as_mut() {
            let (l, r) = self.mixer.minus.room_sum();
            let packet = c.encode_sum(l, r, stamp);
            if !packet.is_empty() {
                send(CASCADE, packet);
            }
        }
        let extra = cascade.and_then(|c| c.pull(frame));
        let mix_mode = self.mode == Mode::Mix;
        for (slot, c) in self.clients.iter_mut().enumerate() {
            let Some(c) = c else {
                continue;
            };
            if !mix_mode && c.kind == ClientKind::Browser {
                continue;
            }
            let id = c.id;
            let (messages, packets, bytes) =
                self.mixer
                    .render_for(slot, c.kind, &mut c.output, stamp, extra, &mut |b| {
                        send(id, b)
                    });
            c.ingest.counters.sent += messages;
            c.ingest.counters.sent_entries += packets;
            c.ingest.counters.sent_bytes += bytes;
        }
        if mix_mode && self.counters.ticks % METER_TICKS == 0 {
            self.send_meters(send);
        }
    }

    /// Every player's source meter, in one message to each browser listener: its own engine hears
    /// only its mix, so this is how its mixer shows who plays how loud.
    fn send_meters(&mut self, send: &mut dyn FnMut(ClientId, &[u8])) {
        let Ok(mut writer) = MetersWriter::new(&mut self.meters) else {
            return;
        };
        for (slot, c) in self.clients.iter().enumerate() {
            let Some(c) = c.as_ref().filter(|c| c.heard) else {
                continue;
            };
            if let Some(m) = self.mixer.minus.source_meter(slot) {
                let _ = writer.push(c.stream, [m.peak_l, m.peak_r, m.rms_l, m.rms_r]);
            }
        }
        let Ok(len) = writer.finish() else {
            return;
        };
        for c in self.clients.iter().flatten() {
            if c.kind == ClientKind::Browser {
                send(c.id, &self.meters[..len]);
                self.counters.meter_messages += 1;
            }
        }
    }

    /// When `poll` next has something to do (µs; `u64::MAX`: nothing pending).
    pub fn next_deadline(&self) -> u64 {
        let forward = self
            .clients
            .iter()
            .flatten()
            .filter_map(|c| c.pending.as_ref()?.deadline())
            .min();
        match (self.mixer.next_tick_us(), forward) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(u64::MAX),
        }
    }

    /// A client's counters.
    pub fn client_counters(&self, id: ClientId) -> Option<ClientCounters> {
        let c = self.clients.get(self.slot_of(id)?)?.as_ref()?;
        let mut counters = c.ingest.counters;
        let jitter = c.peer.jitter_counters();
        counters.late = jitter.late;
        counters.concealed = jitter.concealed;
        Some(counters)
    }

    /// The room's counters.
    pub fn room_counters(&self) -> RoomCounters {
        self.counters
    }

    /// The stream id of a client.
    pub fn stream(&self, id: ClientId) -> Option<u16> {
        Some(self.clients.get(self.slot_of(id)?)?.as_ref()?.stream)
    }

    /// The slot of a client still in the room.
    fn slot_of(&self, id: ClientId) -> Option<usize> {
        let slot = id.slot();
        let c = self.clients.get(slot)?.as_ref()?;
        (c.id == id).then_some(slot)
    }
}

/// Stages `packet` (from the sender in `slot`, stream id `stream`) for every browser listener
/// that takes `layer` (the sender itself only while it asked for its own echo); a listener whose
/// staging is full counts an overflow. Returns the listeners it was staged for.
fn stage_for(
    clients: &mut [Option<Client>],
    slot: usize,
    stream: u16,
    layer: Layer,
    packet: &[u8],
    has_ext: bool,
    now_us: u64,
) -> u64 {
    let mut staged = 0;
    for (i, other) in clients.iter_mut().enumerate() {
        let Some(other) = other
            .as_mut()
            .filter(|o| (i != slot || o.echo) && o.layer == layer)
        else {
            continue;
        };
        if let Some(p) = other.pending.as_mut() {
            if p.stage(slot, stream, packet, has_ext, now_us) {
                staged += 1;
            } else {
                other.ingest.counters.overflow += 1;
            }
        }
    }
    staged
}
