//! The capture side: local input quanta collected into blocks and encoded into outgoing packets,
//! each with the peers it is meant for.
//!
//! Normally every block goes to every peer ([`Destination::All`]). While the engine echoes a peer
//! for its round-trip probe ([`crate::engine::Engine::set_echo`]), a second lane runs in lockstep
//! with the first: it holds the echoed peer's stream as it played here, and each block then
//! leaves twice, the echoed peer's own stream to that peer only ([`Destination::Only`]) and our
//! input to everyone else ([`Destination::AllBut`]). The others keep hearing us; only the asker
//! hears itself. Both packets of a block carry the same header (sequence number, timestamp), so
//! that to every receiver our stream stays one sequence whichever lane feeds it. The lane switches
//! at block boundaries: a block under way when the echo starts begins with our input, one under
//! way when it stops goes out whole from our input.
//!
//! # One stream per layer our peers take
//!
//! A peer may take our stream as Opus instead of as sent ([`Capture::set_layer`]: a mesh
//! listener whose path cannot carry PCM). Then each block of our input also goes into one
//! [`OpusFramer`] per Opus layer taken, made from the host's encoders ([`Capture::set_encoder`]),
//! so that the input is encoded at most once per layer, never once per peer. Each layer's
//! packets go to the peers taking that layer ([`Destination::Layer`]); the packets as sent go to
//! the rest, and to the hub. A layer nobody takes codes nothing, and one taken again starts a
//! new stream (its numbers go on). While no peer takes an Opus layer the destinations are the
//! plain ones above, packet for packet.
//!
//! Which peer takes which layer is this module's to say: the net side learns it from route
//! records in the outbound ring ([`Destination::Route`], one byte: [`Layer::code`]), written
//! before the first packet that depends on it, once per change. A slot's layer goes back to as
//! sent when its peer comes or goes ([`crate::engine::Engine::insert_peer`]), told likewise
//! when that is a change.
//!
//! # Destinations in the outbound ring
//!
//! The engine's host writes each packet into the outbound ring (see [`crate::ring`]) with its
//! destination in the record's tag, which the net side reads to pick the data channels:
//!
//! ```text
//! tag 0xFFFF                          OUT_ALL       every peer
//! tag 0x8000 | slot                   OUT_ALL_BUT   every peer except the one in `slot` (0..=255)
//! tag slot                            (no flag)     only the peer in `slot`
//! tag 0x4000 | code << 8              OUT_LAYER     every peer taking layer `code` (0..=2)
//! tag 0x4800 | code << 8 | slot       OUT_LAYER | OUT_EXCEPT   the same, except `slot`
//! tag 0x2000 | slot                   OUT_ROUTE     not a packet: the peer in `slot` takes the
//!                                                   layer in the record's one byte from now on
//! ```
//!
//! Any other tag names nobody: the net side counts and drops it. The TypeScript end
//! (`app/src/net/pump.ts`) mirrors these constants; a test (`core/tests/engine_echo.rs`) reads
//! that file and compares.
//!
//! Everything here but [`Capture::new`] is real-time safe: the lanes, the packet buffer and
//! the meters are sized up front.

use crate::codec::Encoder;
use crate::engine::{LOCAL_RATE, QUANTUM};
use crate::framer::OpusFramer;
use crate::layer::{Layer, OPUS_LAYERS};
use crate::packet::{self, Header, SampleFormat, SampleRate, MAX_FRAMES};
use crate::stats::MAX_PEERS;

/// Outbound ring tag of a packet for every peer.
pub const OUT_ALL: u16 = 0xFFFF;
/// Outbound ring tag flag: every peer except the one in the tag's low byte.
pub const OUT_ALL_BUT: u16 = 0x8000;
/// The slot part of an outbound tag.
pub const OUT_SLOT_MASK: u16 = 0x00FF;
/// Outbound ring tag flag: every peer taking the layer in bits 8..10.
pub const OUT_LAYER: u16 = 0x4000;
/// With [`OUT_LAYER`]: except the one in the tag's low byte.
pub const OUT_EXCEPT: u16 = 0x0800;
/// The layer code's bits in an [`OUT_LAYER`] tag.
pub const OUT_LAYER_MASK: u16 = 0x0300;
/// Outbound ring tag flag: a route record for the slot in the low byte.
pub const OUT_ROUTE: u16 = 0x2000;

/// Who an outgoing packet is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Every peer.
    All,
    /// Every peer except the one in this slot.
    AllBut(usize),
    /// Only the peer in this slot.
    Only(usize),
    /// Every peer taking `layer` (except the one in `except`).
    Layer { layer: Layer, except: Option<usize> },
    /// Not a packet: the peer in this slot takes the layer the record's byte names.
    Route(usize),
}

impl Destination {
    /// The outbound ring tag that carries this destination (see the module docs). Slots are
    /// below [`crate::stats::MAX_PEERS`] (256), so they fit the tag's low byte.
    pub fn tag(self) -> u16 {
        match self {
            Destination::All => OUT_ALL,
            Destination::AllBut(slot) => OUT_ALL_BUT | (slot as u16 & OUT_SLOT_MASK),
            Destination::Only(slot) => slot as u16 & OUT_SLOT_MASK,
            Destination::Layer { layer, except } => {
                let group = OUT_LAYER | (u16::from(layer.code()) << 8);
                match except {
                    Some(slot) => group | OUT_EXCEPT | (slot as u16 & OUT_SLOT_MASK),
                    None => group,
                }
            }
            Destination::Route(slot) => OUT_ROUTE | (slot as u16 & OUT_SLOT_MASK),
        }
    }

    /// The destination an outbound tag names, or `None` for a tag that names nobody.
    pub fn from_tag(tag: u16) -> Option<Destination> {
        let slot = usize::from(tag & OUT_SLOT_MASK);
        let high = tag & !OUT_SLOT_MASK;
        match high {
            _ if tag == OUT_ALL => Some(Destination::All),
            OUT_ALL_BUT => Some(Destination::AllBut(slot)),
            0 => Some(Destination::Only(slot)),
            OUT_ROUTE => Some(Destination::Route(slot)),
            _ if high & !(OUT_LAYER_MASK | OUT_EXCEPT) == OUT_LAYER => {
                let layer = Layer::from_code(u32::from((high & OUT_LAYER_MASK) >> 8))?;
                let except = match (high & OUT_EXCEPT != 0, slot) {
                    (true, s) => Some(s),
                    (false, 0) => None,
                    // A slot without the flag says nothing: not a tag this module writes.
                    (false, _) => return None,
                };
                Some(Destination::Layer { layer, except })
            }
            _ => None,
        }
    }

    /// Whether the peer in `slot`, taking `layer` of our stream, receives a packet sent to
    /// this destination.
    pub fn includes(self, slot: usize, layer: Layer) -> bool {
        match self {
            Destination::All => true,
            Destination::AllBut(s) => s != slot,
            Destination::Only(s) => s == slot,
            Destination::Layer { layer: l, except } => l == layer && except != Some(slot),
            Destination::Route(_) => false,
        }
    }
}

/// What one [`Capture::push`] handed over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Packets of our input (or the probe's clicks) the sink took.
    pub packets: u64,
    /// Packets of the echo lane the sink took.
    pub echoes: u64,
    /// Packets the sink refused (both lanes, every layer).
    pub dropped: u64,
    /// Opus frames encoded for peers taking an Opus layer (all layers).
    pub encoded: u64,
}

/// Why [`Capture::set_layer`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerError {
    /// The slot is outside `0..MAX_PEERS`.
    NoSuchSlot(usize),
    /// The host gave no encoder for this layer (no codec module).
    NoEncoder(Layer),
}

impl core::fmt::Display for LayerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LayerError::NoSuchSlot(s) => write!(f, "no peer slot {s}"),
            LayerError::NoEncoder(l) => write!(f, "no encoder for layer {}", l.name()),
        }
    }
}

impl std::error::Error for LayerError {}

/// Local input collected into blocks and encoded, with the echo lane (see the module docs).
pub struct Capture {
    block: usize,
    format: SampleFormat,
    channels: u8,
    left: [f32; MAX_FRAMES + QUANTUM],
    right: [f32; MAX_FRAMES + QUANTUM],
    /// The echo lane: the echoed peer's stream, frame for frame beside `left`/`right`.
    echo_left: [f32; MAX_FRAMES + QUANTUM],
    echo_right: [f32; MAX_FRAMES + QUANTUM],
    /// The slot the echo lane holds frames for (`None`: the lane is idle).
    echo_slot: Option<usize>,
    filled: usize,
    seq: u16,
    bytes: [u8; packet::MAX_PACKET_LEN],
    peak: f32,
    mean_square: f32,
    /// The Opus layers' streams, in [`OPUS_LAYERS`] order (`None`: the host gave no encoder).
    opus: [Option<Box<OpusFramer>>; 2],
    /// Each slot's layer of our stream, and whether the net side has yet to be told.
    layers: [Layer; MAX_PEERS],
    unannounced: [bool; MAX_PEERS],
    /// Slots in `unannounced`.
    pending: usize,
    /// How many slots take each layer, in [`crate::layer::LAYERS`] order.
    takers: [usize; 3],
}

impl Capture {
    /// A capture of `block` frames per packet (one of [`packet::BLOCK_SIZES`]; anything else is
    /// taken as 128), `channels` (1 or 2) in `format`. Allocates (it is large): build it off the
    /// render path.
    pub fn new(block: u16, format: SampleFormat, channels: u8) -> Box<Capture> {
        let block = if packet::BLOCK_SIZES.contains(&block) {
            usize::from(block)
        } else {
            QUANTUM
        };
        Box::new(Capture {
            block,
            format,
            channels: channels.clamp(1, 2),
            left: [0.0; MAX_FRAMES + QUANTUM],
            right: [0.0; MAX_FRAMES + QUANTUM],
            echo_left: [0.0; MAX_FRAMES + QUANTUM],
            echo_right: [0.0; MAX_FRAMES + QUANTUM],
            echo_slot: None,
            filled: 0,
            seq: 0,
            bytes: [0; packet::MAX_PACKET_LEN],
            peak: 0.0,
            mean_square: 0.0,
            opus: [None, None],
            layers: [Layer::AsSent; MAX_PEERS],
            unannounced: [false; MAX_PEERS],
            pending: 0,
            takers: [MAX_PEERS, 0, 0],
        })
    }

    /// Makes `layer` sendable, coded by `encoder` (stereo, at the layer's bit rate; a mono
    /// capture codes it mono). Set-up: allocates. An `AsSent` layer needs none and ignores it.
    pub fn set_encoder(
        &mut self,
        layer: Layer,
        encoder: Box<dyn Encoder>,
    ) -> Result<(), crate::codec::CodecError> {
        let (Some(i), Some((_, frame))) = (layer.index(), layer.opus()) else {
            return Ok(());
        };
        let mut framer = OpusFramer::new(encoder, frame);
        framer.set_channels(self.channels)?;
        self.opus[i] = Some(framer);
        Ok(())
    }

    /// Whether `layer` can be sent (the packets as sent always can).
    pub fn can_send(&self, layer: Layer) -> bool {
        layer.index().is_none_or(|i| self.opus[i].is_some())
    }

    /// The peer in `slot` takes `layer` of our stream from the next block on; the net side is
    /// told before the first packet for it. A layer taken that nobody took starts a new stream.
    /// Real-time safe.
    pub fn set_layer(&mut self, slot: usize, layer: Layer) -> Result<(), LayerError> {
        let old = *self.layers.get(slot).ok_or(LayerError::NoSuchSlot(slot))?;
        if !self.can_send(layer) {
            return Err(LayerError::NoEncoder(layer));
        }
        if old == layer {
            return Ok(());
        }
        if !self.unannounced[slot] {
            self.unannounced[slot] = true;
            self.pending += 1;
        }
        self.takers[usize::from(old.code())] -= 1;
        let taken = &mut self.takers[usize::from(layer.code())];
        *taken += 1;
        if *taken == 1 {
            if let Some(framer) = layer.index().and_then(|i| self.opus[i].as_deref_mut()) {
                framer.reset();
            }
        }
        self.layers[slot] = layer;
        Ok(())
    }

    /// The layer the peer in `slot` takes of our stream.
    pub fn layer(&self, slot: usize) -> Layer {
        self.layers.get(slot).copied().unwrap_or_default()
    }

    /// Input peak and RMS (linear) of what the main lane carried.
    pub fn meter(&self) -> (f32, f32) {
        (self.peak, self.mean_square.sqrt())
    }

    /// The slot the echo lane serves, if any.
    pub fn echo_slot(&self) -> Option<usize> {
        self.echo_slot
    }

    /// Takes one quantum (`left`/`right`, at most [`QUANTUM`] frames) of the main lane and, while
    /// echoing, the same number of frames of the echoed peer (`echo`: its slot and its quantum;
    /// missing frames are silence) for the echo lane, starting at local frame `now`. Hands every
    /// completed block to `sink` with its destination; `sink` returns false when it could not
    /// take the packet (counted as dropped). Real-time safe.
    pub fn push(
        &mut self,
        left: &[f32],
        right: &[f32],
        echo: Option<(usize, &[f32], &[f32])>,
        now: u64,
        sink: &mut dyn FnMut(Destination, &[u8]) -> bool,
    ) -> Sent {
        let n = left.len().min(right.len()).min(QUANTUM);
        self.meter_input(&left[..n]);
        let mut sent = Sent::default();
        if self.pending > 0 {
            self.announce(sink, &mut sent);
        }
        let at = self.filled;
        let n = n.min(self.left.len() - at);
        self.left[at..at + n].copy_from_slice(&left[..n]);
        self.right[at..at + n].copy_from_slice(&right[..n]);
        match echo {
            Some((slot, el, er)) => {
                if self.echo_slot != Some(slot) {
                    // The lane starts (or serves another peer): the block under way begins with
                    // what everyone got, so that the echoed peer's stream from us has no hole.
                    self.echo_left[..at].copy_from_slice(&self.left[..at]);
                    self.echo_right[..at].copy_from_slice(&self.right[..at]);
                    self.echo_slot = Some(slot);
                }
                let m = n.min(el.len()).min(er.len());
                self.echo_left[at..at + m].copy_from_slice(&el[..m]);
                self.echo_right[at..at + m].copy_from_slice(&er[..m]);
                self.echo_left[at + m..at + n].fill(0.0);
                self.echo_right[at + m..at + n].fill(0.0);
            }
            // The lane stops: the block under way goes out whole from the main lane.
            None => self.echo_slot = None,
        }
        self.filled += n;
        // Every Opus layer taken gets the quantum as it comes (a frame leaves as soon as it is
        // whole); each goes to its takers, but for the echoed peer, which gets the echo lane.
        let stamp_us = now.saturating_sub(n as u64) * 1_000_000 / u64::from(LOCAL_RATE);
        let except = self.echo_slot;
        for (i, layer) in OPUS_LAYERS.into_iter().enumerate() {
            if self.takers[usize::from(layer.code())] == 0 {
                continue;
            }
            let Some(framer) = self.opus[i].as_deref_mut() else {
                continue;
            };
            let to = Destination::Layer { layer, except };
            let mut refused = 0;
            let pushed = framer.push(
                &self.left[at..at + n],
                &self.right[at..at + n],
                stamp_us,
                u64::from(LOCAL_RATE),
                0,
                &mut |bytes| {
                    if !sink(to, bytes) {
                        refused += 1;
                    }
                },
            );
            sent.encoded += pushed.encoded;
            sent.packets += pushed.encoded - refused;
            sent.dropped += refused + pushed.failed;
        }
        while self.filled >= self.block {
            let block = self.block;
            let header = Header {
                // The sender's audio clock in microseconds, as JackTrip stamps its packets.
                timestamp: now.saturating_sub(self.filled as u64) * 1_000_000
                    / u64::from(LOCAL_RATE),
                seq: self.seq,
                frames: block as u16,
                rate: SampleRate::Hz48000,
                format: self.format,
                channels_in: self.channels,
                channels_out: self.channels,
            };
            let main_to = match (self.echo_slot, self.layered()) {
                (except, true) => Destination::Layer {
                    layer: Layer::AsSent,
                    except,
                },
                (Some(slot), false) => Destination::AllBut(slot),
                (None, false) => Destination::All,
            };
            if self.send(&header, false, main_to, sink) {
                sent.packets += 1;
            } else {
                sent.dropped += 1;
            }
            if let Some(slot) = self.echo_slot {
                if self.send(&header, true, Destination::Only(slot), sink) {
                    sent.echoes += 1;
                } else {
                    sent.dropped += 1;
                }
                self.echo_left.copy_within(block..self.filled, 0);
                self.echo_right.copy_within(block..self.filled, 0);
            }
            self.seq = self.seq.wrapping_add(1);
            self.left.copy_within(block..self.filled, 0);
            self.right.copy_within(block..self.filled, 0);
            self.filled -= block;
        }
        sent
    }

    /// Whether any peer takes an Opus layer (else the plain destinations serve).
    fn layered(&self) -> bool {
        self.takers[0] < MAX_PEERS
    }

    /// Writes a route record for every slot whose layer the net side has not been told.
    fn announce(&mut self, sink: &mut dyn FnMut(Destination, &[u8]) -> bool, sent: &mut Sent) {
        for slot in 0..MAX_PEERS {
            if !self.unannounced[slot] {
                continue;
            }
            if !sink(Destination::Route(slot), &[self.layers[slot].code()]) {
                // Told at the next push: the ring is full now.
                sent.dropped += 1;
                return;
            }
            self.unannounced[slot] = false;
            self.pending -= 1;
            if self.pending == 0 {
                return;
            }
        }
    }

    /// Encodes the block at the start of the main lane (or of the echo lane) and hands it to
    /// `sink` for `to`. False when the sink refused it.
    fn send(
        &mut self,
        header: &Header,
        echo: bool,
        to: Destination,
        sink: &mut dyn FnMut(Destination, &[u8]) -> bool,
    ) -> bool {
        let block = self.block;
        let (l, r) = if echo {
            (&self.echo_left[..block], &self.echo_right[..block])
        } else {
            (&self.left[..block], &self.right[..block])
        };
        let planar_stereo = [l, r];
        let planar = &planar_stereo[..usize::from(self.channels)];
        match packet::encode(header, None, planar, &mut self.bytes) {
            Ok(len) => sink(to, &self.bytes[..len]),
            // Unreachable for a validated configuration; counted rather than trusted.
            Err(_) => false,
        }
    }

    fn meter_input(&mut self, x: &[f32]) {
        let mut peak = 0f32;
        let mut sum = 0f32;
        for &v in x {
            peak = peak.max(v.abs());
            sum += v * v;
        }
        if !peak.is_finite() {
            return;
        }
        let ms = sum / x.len().max(1) as f32;
        // Peak falls by about 20 dB per second; RMS is a ~300 ms one-pole on the mean square.
        self.peak = peak.max(self.peak * 0.9939);
        self.mean_square += (ms - self.mean_square) * 0.0088;
    }
}
