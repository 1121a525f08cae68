//! The engine: the multi-peer session that the one AudioWorklet drives.
//!
//! One [`Engine`] serves every remote peer of a client. Per 128-frame quantum the host (the
//! worklet, or a test, or a native hub) calls, in order:
//!
//! 1. [`Engine::begin_quantum`] with the local time in frames, or [`Engine::begin_quantum_at`]
//!    with the host's wall clock too (it times the capture interval);
//! 2. [`Engine::drain`] with the inbound ring's bytes (every received packet is parsed, checked
//!    and placed in its peer's jitter buffer), or [`Engine::push_packet`] (or
//!    [`Engine::push_packet_at`], with its arrival time) per packet;
//! 3. [`Engine::render`], which plays every peer (jitter buffer → decode → drift correction →
//!    gain/pan → mix) into the output quantum and runs the master (gain, limiter, meters);
//! 4. [`Engine::capture`] with the local input quantum, which encodes it into outgoing packets
//!    handed to a sink (the outbound ring) with their destination ([`Destination`]). Capture may
//!    also come before render; after it, an echo (below) sends the peer's quantum of this very
//!    callback;
//! 5. now and then [`Engine::write_stats`] into the shared stats block, and more rarely
//!    [`Engine::write_histograms`] into the histogram block.
//!
//! Those two writers live beside the layouts they fill, in [`crate::stats`] and
//! [`crate::latency`]; this module is the engine itself.
//!
//! # Latency stages
//!
//! The engine keeps [`Histogram`]s (see [`crate::latency`]), cumulative since a peer joined or
//! since [`Engine::reset_latency`]:
//!
//! - **jitter-buffer wait**, per peer, per packet played: from its arrival (the `now` of the
//!   quantum that pushed it) to the local frame at which its first frame is played, which is
//!   the quantum's `now` plus what the resampler already holds ahead of the output when the
//!   block is popped. Exact to the frame for 48 kHz senders, within a frame or two of the
//!   interpolator's look-ahead otherwise; well within one block.
//! - **network one-way**, per peer, per packet pushed with [`Engine::push_packet_at`]:
//!   `arrival_us − timestamp` (both wall clocks, low 32 bits, wrapping) minus the peer's clock
//!   offset ([`Engine::set_clock_offset`]). Nothing is recorded while the offset is unknown; a
//!   result outside 0..10 s is counted as out of range instead.
//! - **delivery**, per peer, per packet: from its arrival at the net side (the ring record's
//!   time) to the wall clock of the quantum that drains it ([`Engine::begin_quantum_at`]): the
//!   wait for the audio thread. The worklet's clock has 1 ms steps (it passes the middle of the
//!   millisecond), so single values are ±0.5 ms; a value down to 2 ms below zero is that
//!   rounding and reads 0, anything lower means the clocks disagree and is counted as rejected.
//! - **send queue**, per peer, per packet we send it: the time the net side reports our data
//!   channel's queue held ahead of the packet ([`TAG_SEND_QUEUE`] records in the inbound ring).
//! - **transit**, per peer, per packet played whose network and delivery times are known: from
//!   the sender handing it to its channel to the frame its first frame plays, i.e. network +
//!   delivery + jitter-buffer wait of that same packet (the jitter buffer keeps the packet's
//!   send instant, in local frames, with it). Its distribution is the distribution of the sum.
//! - **added one-way**, per peer, per packet with a transit: its transit + the sender's block
//!   duration (the block's first frame waited that long to be sent) + our last send-queue time
//!   towards the peer (standing in for the peer's towards us, which we cannot see): everything
//!   between the two ends' devices. The devices' own latency ([`Engine::set_device_latency`],
//!   carried in the histogram block) is a constant the reader adds for mouth to ear; kept out of
//!   the histogram, the bins stay as fine as the added latency itself.
//! - **capture interval**, local: the wall-clock time between consecutive quanta given to
//!   [`Engine::begin_quantum_at`]. In the browser the worklet's only wall clock is `Date.now()`,
//!   whole milliseconds: single intervals are quantised to 1 ms (a steady 2.667 ms cadence reads
//!   as a mix of 2 and 3 ms), their mean and the bursts are what it shows reliably.
//!
//! # Round trip: probe and echo
//!
//! [`Engine::start_probe`] sends clicks into our outgoing stream (muting the input) and times
//! their return in a peer's stream on the local audio clock ([`crate::probe`]). For the return
//! to happen the peer echoes us: a [`TAG_ECHO`] record in its inbound ring (its net side writes
//! one when we ask over the control channel and its user allows it) or [`Engine::set_echo`]
//! makes its outgoing audio TO US our stream as it played there, for at most [`MAX_ECHO_MS`],
//! while everyone else keeps getting its input ([`crate::capture`]: a second packet per block,
//! addressed to us). A click's round trip is then our send queue + their transit + their echo
//! (none: render before capture) + our transit, which the test `core/tests/engine_roundtrip.rs`
//! checks against the stages to the frame.
//!
//! All of these are real-time safe: they never allocate, lock or log, and no input can make them
//! panic. Joining peers are built with [`Peer::new`] (which allocates) off the render path and
//! swapped in with [`Engine::insert_peer`]; [`Engine::remove_peer`] hands the retired peer back so
//! that the caller frees it elsewhere.
//!
//! ```
//! use tutti_core::engine::{Engine, EngineConfig, Peer, QUANTUM};
//! use tutti_core::packet::{encode, Header, SampleFormat, SampleRate};
//!
//! let config = EngineConfig::default();
//! let mut engine = Engine::new(config);
//! engine.insert_peer(0, Peer::new(&config)).expect("slot 0 exists");
//!
//! // A peer's packet arrives: 128 frames of stereo PCM16.
//! let tone: Vec<f32> = (0..128).map(|i| (i as f32 * 0.1).sin() * 0.5).collect();
//! let header = Header {
//!     timestamp: 0, seq: 0, frames: 128, rate: SampleRate::Hz48000,
//!     format: SampleFormat::Pcm16, channels_in: 2, channels_out: 2,
//! };
//! let mut bytes = [0u8; 1024];
//! let len = encode(&header, None, &[&tone, &tone], &mut bytes).expect("valid packet");
//!
//! let (mut left, mut right) = ([0f32; QUANTUM], [0f32; QUANTUM]);
//! engine.begin_quantum(0);
//! engine.push_packet(0, &bytes[..len]).expect("well-formed");
//! engine.render(&mut left, &mut right);
//! assert!(left.iter().all(|x| x.is_finite() && x.abs() <= 1.0));
//! ```

use crate::capture::{Capture, Destination, LayerError};
use crate::codec::{CodecError, Encoder};
use crate::continuity::Continuity;
use crate::jitter::stall::LocalStall;
use crate::jitter::{BufferMode, StreamState};
use crate::latency::Histogram;
use crate::layer::Layer;
use crate::mix::{solo_audible, GainControl, Master};
use crate::packet::{self, PacketError, SampleFormat};
use crate::probe::ClickProbe;
use crate::ring;
use crate::stats::*;

mod peer;
pub use peer::Peer;

/// Frames in one render quantum (Web Audio's fixed block).
pub const QUANTUM: usize = 128;
/// The local sample rate the engine renders at.
pub const LOCAL_RATE: u32 = 48_000;
/// Jitter-buffer capacity per peer, in frames (about 170 ms at 48 kHz).
pub const JITTER_CAPACITY_FRAMES: u32 = 8192;
/// Resampler staging per peer, in frames.
pub const STAGING_FRAMES: usize = 1024;
/// Largest network one-way delay recorded, µs; beyond it the clock offset is taken to be wrong.
pub const MAX_ONE_WAY_US: i64 = 10_000_000;
/// One quantum on the wall clock, µs.
const QUANTUM_US: f64 = QUANTUM as f64 * 1_000_000.0 / LOCAL_RATE as f64;
/// Largest delivery time recorded (arrival at the net side to the engine), µs.
pub const MAX_DELIVERY_US: f64 = 10_000_000.0;
/// A delivery time this far below zero (µs) means the two wall clocks disagree and is counted as
/// out of range; less is the worklet clock's rounding and is recorded as 0.
pub const DELIVERY_SLACK_US: f64 = 2_000.0;

/// Inbound ring tag bit: the record is not a packet but our send-queue time towards the peer in
/// the tag's low byte, in µs in the record's time field, with no payload (the net side writes
/// one per packet it hands to that peer's data channel).
pub const TAG_SEND_QUEUE: u16 = 0x8000;
/// Inbound ring tag bit: echo the stream of the peer in the tag's low byte back to it for the
/// record's time field in milliseconds (0: stop), at most [`MAX_ECHO_MS`]; no payload. The net
/// side writes one only for a request our user allowed (see [`Engine::set_echo`]).
pub const TAG_ECHO: u16 = 0x4000;
/// The slot part of a tagged record's tag.
pub const TAG_SLOT_MASK: u16 = 0x00FF;
/// Longest echo one request starts, ms.
pub const MAX_ECHO_MS: u32 = 10_000;

/// How a session is set up. Plain numbers, so it crosses the WASM boundary unchanged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineConfig {
    /// Peer slots (at most [`MAX_PEERS`]).
    pub max_peers: usize,
    /// Frames per outgoing packet: one of 32, 64, 128, 256.
    pub block_frames: u16,
    /// Outgoing sample format.
    pub format: SampleFormat,
    /// Outgoing channels (1 or 2).
    pub capture_channels: u8,
    /// Jitter-buffer mode for every peer.
    pub buffer: BufferMode,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_peers: 64,
            block_frames: 128,
            format: SampleFormat::Pcm16,
            capture_channels: 2,
            buffer: BufferMode::DEFAULT,
        }
    }
}

/// A configuration or control call the engine refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// The peer slot is outside `0..max_peers`.
    NoSuchSlot(usize),
    /// The block size is not one of 32, 64, 128, 256.
    BadBlockSize(u16),
    /// The channel count is not 1 or 2.
    BadChannels(u8),
    /// More peers than the stats block has rows for.
    TooManyPeers(usize),
}

impl core::fmt::Display for EngineError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EngineError::NoSuchSlot(s) => write!(f, "no peer slot {s}"),
            EngineError::BadBlockSize(b) => write!(f, "block size {b} is not 32, 64, 128 or 256"),
            EngineError::BadChannels(c) => write!(f, "{c} channels: only 1 or 2"),
            EngineError::TooManyPeers(n) => write!(f, "{n} peers: at most {MAX_PEERS}"),
        }
    }
}

impl std::error::Error for EngineError {}

/// Why a received packet was dropped. Every drop is also counted in the stats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// No peer sits in the slot the packet was tagged with.
    UnknownPeer(u16),
    /// The bytes are not a packet Tutti accepts.
    Malformed(PacketError),
}

/// Counters the engine keeps beside the per-peer ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Quanta rendered.
    pub quanta: u64,
    /// Packets tagged with a slot that holds no peer.
    pub unknown_peer: u64,
    /// Packets that did not parse.
    pub malformed: u64,
    /// Inbound ring records read.
    pub records_read: u64,
    /// Times the inbound ring was corrupt and was resynchronised.
    pub ring_resyncs: u64,
    /// Packets captured and handed to the sink.
    pub packets_sent: u64,
    /// Packets the sink refused (outbound ring full).
    pub send_dropped: u64,
    /// Packets of an echoed peer's stream handed to the sink for that peer (beside
    /// `packets_sent`, which counts our own).
    pub echo_sent: u64,
    /// Echo requests refused: for a peer muted in our mix.
    pub echo_refused: u64,
    /// Opus frames encoded for the peers that take an Opus layer of our stream (every layer;
    /// once per layer, whatever the number of its takers).
    pub opus_encoded: u64,
}

/// The multi-peer session. See the module docs for the call order.
pub struct Engine {
    config: EngineConfig,
    pub(crate) peers: Vec<Option<Box<Peer>>>,
    pub(crate) active: usize,
    solos: usize,
    pub(crate) master: Master,
    scratch_l: [f32; QUANTUM],
    scratch_r: [f32; QUANTUM],
    pub(crate) now: u64,
    /// Peers playing at the last render (for the local-stall detector).
    streaming: usize,
    /// Tells a stall of this machine from the peers' lateness.
    pub(crate) local_stall: LocalStall,
    /// Our own device's missed callbacks, from the wall clock of each quantum.
    pub(crate) local_gaps: Continuity,
    pub(crate) counters: EngineCounters,
    pub(crate) capture: Box<Capture>,
    recording: bool,
    /// Interval between consecutive quanta on the host's wall clock, µs.
    pub(crate) capture_interval: Histogram,
    /// Wall clock of the last quantum, µs (`None` before the first, or after a bad value).
    last_wall_us: Option<f64>,
    /// Wall clock of the current quantum, µs (`None`: the host gave none).
    wall_us: Option<f64>,
    /// The current quantum begins an audio callback (see [`Engine::begin_quantum_at`]).
    callback_start: bool,
    /// The round-trip probe, and the outgoing quantum it writes.
    pub(crate) probe: ClickProbe,
    probe_l: [f32; QUANTUM],
    probe_r: [f32; QUANTUM],
    /// The slot whose stream we echo as our outgoing audio, and the frame the echo ends at.
    echo: Option<(usize, u64)>,
    /// The devices' output and input latency the host reported, µs (NaN: unknown).
    pub(crate) output_latency_us: f64,
    pub(crate) input_latency_us: f64,
}

impl Engine {
    /// Builds an engine with `config.max_peers` empty slots. Allocates.
    ///
    /// An invalid configuration is corrected to the nearest valid one (block size 128, stereo,
    /// at most [`MAX_PEERS`] slots); use [`EngineConfig::validate`] first to report it instead.
    pub fn new(config: EngineConfig) -> Engine {
        let mut config = config;
        if config.validate().is_err() {
            let fallback = EngineConfig::default();
            if !packet::BLOCK_SIZES.contains(&config.block_frames) {
                config.block_frames = fallback.block_frames;
            }
            if !(1..=2).contains(&config.capture_channels) {
                config.capture_channels = fallback.capture_channels;
            }
            config.max_peers = config.max_peers.min(MAX_PEERS);
        }
        let mut peers = Vec::with_capacity(config.max_peers);
        peers.resize_with(config.max_peers, || None);
        Engine {
            config,
            peers,
            active: 0,
            solos: 0,
            master: Master::new(),
            scratch_l: [0.0; QUANTUM],
            scratch_r: [0.0; QUANTUM],
            now: 0,
            streaming: 0,
            local_stall: LocalStall::new(),
            local_gaps: Continuity::new(),
            counters: EngineCounters::default(),
            capture: Capture::new(config.block_frames, config.format, config.capture_channels),
            recording: false,
            capture_interval: Histogram::new(),
            last_wall_us: None,
            wall_us: None,
            callback_start: true,
            probe: ClickProbe::new(),
            probe_l: [0.0; QUANTUM],
            probe_r: [0.0; QUANTUM],
            echo: None,
            output_latency_us: f64::NAN,
            input_latency_us: f64::NAN,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Puts `peer` into `slot` and returns the peer it displaced, if any (free it off the render
    /// path). Real-time safe.
    pub fn insert_peer(
        &mut self,
        slot: usize,
        peer: Box<Peer>,
    ) -> Result<Option<Box<Peer>>, EngineError> {
        let place = self
            .peers
            .get_mut(slot)
            .ok_or(EngineError::NoSuchSlot(slot))?;
        let old = place.replace(peer);
        // A new peer takes our stream as sent until it asks for another layer.
        let _ = self.capture.set_layer(slot, Layer::AsSent);
        self.recount();
        Ok(old)
    }

    /// Takes the peer out of `slot`; the caller frees it off the render path. Real-time safe.
    pub fn remove_peer(&mut self, slot: usize) -> Option<Box<Peer>> {
        let old = self.peers.get_mut(slot).and_then(Option::take);
        if old.is_some() {
            let _ = self.capture.set_layer(slot, Layer::AsSent);
        }
        self.recount();
        old
    }

    /// Makes `layer` of our stream sendable, coded by the host's `encoder` (see
    /// [`Capture::set_encoder`]). Set-up: allocates.
    pub fn set_encoder(
        &mut self,
        layer: Layer,
        encoder: Box<dyn Encoder>,
    ) -> Result<(), CodecError> {
        self.capture.set_encoder(layer, encoder)
    }

    /// Whether `layer` of our stream can be sent (an Opus layer needs its encoder).
    pub fn can_send(&self, layer: Layer) -> bool {
        self.capture.can_send(layer)
    }

    /// The peer in `slot` takes `layer` of our stream from the next block on (see
    /// [`crate::capture`]). Real-time safe.
    pub fn set_send_layer(&mut self, slot: usize, layer: Layer) -> Result<(), LayerError> {
        if self.peers.get(slot).is_none_or(Option::is_none) {
            return Err(LayerError::NoSuchSlot(slot));
        }
        self.capture.set_layer(slot, layer)
    }

    /// The layer the peer in `slot` takes of our stream.
    pub fn send_layer(&self, slot: usize) -> Layer {
        self.capture.layer(slot)
    }

    /// The peer in `slot`, if any.
    pub fn peer(&self, slot: usize) -> Option<&Peer> {
        self.peers.get(slot).and_then(|p| p.as_deref())
    }

    fn peer_mut(&mut self, slot: usize) -> Result<&mut Peer, EngineError> {
        self.peers
            .get_mut(slot)
            .and_then(|p| p.as_deref_mut())
            .ok_or(EngineError::NoSuchSlot(slot))
    }

    /// Sets a peer's gain (linear), pan (−1 left … 1 right), mute and solo. Muting the peer we
    /// echo stops the echo: whoever the user does not want to hear gets nothing sent back.
    /// Real-time safe.
    pub fn set_strip(
        &mut self,
        slot: usize,
        gain: f32,
        pan: f32,
        mute: bool,
        solo: bool,
    ) -> Result<(), EngineError> {
        let peer = self.peer_mut(slot)?;
        peer.strip.set_gain(gain);
        peer.strip.set_pan(pan);
        peer.strip.set_mute(mute);
        peer.strip.set_solo(solo);
        if mute && self.echoing() == Some(slot) {
            self.echo = None;
        }
        self.recount();
        Ok(())
    }

    /// Sets the master gain (linear). Real-time safe.
    pub fn set_master_gain(&mut self, gain: f32) {
        self.master.set_gain(gain);
    }

    /// Changes the jitter-buffer mode of every peer, and of peers that join later.
    pub fn set_buffer_mode(&mut self, mode: BufferMode) {
        self.config.buffer = mode;
        for peer in self.peers.iter_mut().flatten() {
            peer.jitter.set_mode(mode);
        }
    }

    fn recount(&mut self) {
        self.active = self.peers.iter().flatten().count();
        self.solos = self
            .peers
            .iter()
            .flatten()
            .filter(|p| p.strip.solo())
            .count();
    }

    /// Starts a quantum at local time `now` (frames). Packets pushed until the next call are
    /// stamped with this time.
    pub fn begin_quantum(&mut self, now: u64) {
        self.now = now;
        self.wall_us = None;
        self.callback_start = true;
        self.expire_echo();
    }

    /// [`Engine::begin_quantum`], with the host's wall clock `wall_us` (µs, any origin) at which
    /// this quantum's input reached the engine: the interval since the previous such call is
    /// recorded as the capture interval. A non-finite time is ignored and restarts the
    /// intervals; a clock that went back is counted as rejected. Real-time safe.
    pub fn begin_quantum_at(&mut self, now: u64, wall_us: f64) {
        self.now = now;
        self.expire_echo();
        if !wall_us.is_finite() {
            self.last_wall_us = None;
            self.wall_us = None;
            self.local_gaps.restart();
            return;
        }
        self.local_gaps
            .observe(now as f64 * 1e6 / f64::from(LOCAL_RATE), wall_us);
        self.wall_us = Some(wall_us);
        // A callback that carries several quanta runs them back to back: a quantum that starts
        // less than half a quantum after the previous one continues the same callback.
        self.callback_start = true;
        if let Some(last) = self.last_wall_us {
            self.capture_interval.record(wall_us - last);
            self.callback_start = wall_us - last >= QUANTUM_US / 2.0;
        }
        self.last_wall_us = Some(wall_us);
    }

    /// The capture intervals recorded so far, µs.
    pub fn capture_interval(&self) -> &Histogram {
        &self.capture_interval
    }

    /// Sets the clock offset of the peer in `slot`: our wall clock − the peer's, µs, as the net
    /// side estimates it (`None`: unknown; one-way delays stop being recorded). Real-time safe.
    pub fn set_clock_offset(
        &mut self,
        slot: usize,
        offset_us: Option<i64>,
    ) -> Result<(), EngineError> {
        let peer = self.peer_mut(slot)?;
        peer.clock_offset_us = offset_us;
        Ok(())
    }

    /// Empties every latency histogram (every peer's stages and the capture interval); they
    /// fill again from the next packet. Real-time safe.
    pub fn reset_latency(&mut self) {
        for peer in self.peers.iter_mut().flatten() {
            peer.wait.reset();
            peer.network.reset();
            peer.delivery.reset();
            peer.send_queue.reset();
            peer.transit.reset();
            peer.one_way.reset();
        }
        self.capture_interval.reset();
        self.last_wall_us = None;
    }

    /// Places one received packet for the peer in `slot`. Bad input is counted and dropped: it
    /// never touches another peer. Real-time safe.
    pub fn push_packet(&mut self, slot: u16, bytes: &[u8]) -> Result<(), DropReason> {
        self.push(slot, bytes, None)
    }

    /// [`Engine::push_packet`] for a packet that arrived at `arrival_us` on our wall clock
    /// (µs since 1970, low 32 bits): also records its network one-way delay once the peer's
    /// clock offset is known. Real-time safe.
    pub fn push_packet_at(
        &mut self,
        slot: u16,
        bytes: &[u8],
        arrival_us: u32,
    ) -> Result<(), DropReason> {
        self.push(slot, bytes, Some(arrival_us))
    }

    fn push(&mut self, slot: u16, bytes: &[u8], arrival_us: Option<u32>) -> Result<(), DropReason> {
        let Some(peer) = self
            .peers
            .get_mut(usize::from(slot))
            .and_then(|p| p.as_deref_mut())
        else {
            self.counters.unknown_peer += 1;
            return Err(DropReason::UnknownPeer(slot));
        };
        match packet::parse(bytes) {
            Ok(pkt) if !peer.takes(&pkt) => {
                // A codec this peer has no decoder for: refused whole, so that its PCM stream
                // (if any) is not reset by a format it cannot play.
                peer.malformed += 1;
                self.counters.malformed += 1;
                Err(DropReason::Malformed(
                    packet::PacketError::UnsupportedCodec(packet::CODEC_OPUS),
                ))
            }
            Ok(pkt) => {
                // The local frame at which the sender handed the packet over, when both the
                // network and the delivery time are known: the start of its transit.
                let mut sent = f64::NAN;
                if let Some(arrival) = arrival_us {
                    let one_way = peer.record_one_way(pkt.header.timestamp, arrival);
                    let delivery = self
                        .wall_us
                        .and_then(|wall| peer.record_delivery(arrival, wall));
                    if let (Some(one_way), Some(delivery)) = (one_way, delivery) {
                        sent = self.now as f64
                            - (one_way + delivery) * f64::from(LOCAL_RATE) / 1_000_000.0;
                    }
                }
                if let Some(until) = self.local_stall.arrival(self.now, self.streaming) {
                    peer.jitter.excuse_until(until);
                }
                let outcome = peer.jitter.push_noted(&pkt, self.now, sent);
                peer.note_send_stamp(&pkt, outcome);
                Ok(())
            }
            Err(e) => {
                peer.malformed += 1;
                self.counters.malformed += 1;
                Err(DropReason::Malformed(e))
            }
        }
    }

    /// Reads every record of an inbound ring between the counters `read` and `write` from its
    /// data area `data` (a record's tag is the peer slot, its time the arrival on our wall clock
    /// as for [`Engine::push_packet_at`], its payload the packet) and returns the
    /// new read counter. A corrupt ring is resynchronised (everything up to `write` is skipped and
    /// counted). Real-time safe.
    pub fn drain(&mut self, data: &[u8], mut read: u32, write: u32) -> u32 {
        loop {
            match ring::read_record(data, read, write) {
                Ok(Some((record, next))) => {
                    self.counters.records_read += 1;
                    if record.tag & (TAG_SEND_QUEUE | TAG_ECHO) != 0 {
                        self.note(record.tag, record.time);
                    } else {
                        // A drop is already counted; the other peers are unaffected.
                        let _ = self.push_packet_at(record.tag, record.payload, record.time);
                    }
                    read = next;
                }
                Ok(None) => return read,
                Err(_) => {
                    self.counters.ring_resyncs += 1;
                    return write;
                }
            }
        }
    }

    /// A tagged inbound record that is not a packet (see [`TAG_SEND_QUEUE`], [`TAG_ECHO`]).
    /// One for a slot without a peer is counted as for an unknown peer.
    fn note(&mut self, tag: u16, value: u32) {
        let slot = usize::from(tag & TAG_SLOT_MASK);
        let Some(peer) = self.peers.get_mut(slot).and_then(|p| p.as_deref_mut()) else {
            self.counters.unknown_peer += 1;
            return;
        };
        if tag & TAG_SEND_QUEUE != 0 {
            peer.send_queue.record(f64::from(value));
            peer.last_send_queue_us = f64::from(value);
        } else if value == 0 {
            // A stop ends only this peer's echo.
            if self.echoing() == Some(slot) {
                self.echo = None;
            }
        } else if peer.strip.mute() {
            self.counters.echo_refused += 1;
        } else {
            let frames = u64::from(value.min(MAX_ECHO_MS)) * u64::from(LOCAL_RATE) / 1000;
            self.echo = Some((slot, self.now + frames));
        }
    }

    /// Takes one quantum of local input (`left`, and `right` for stereo; pass the same slice twice
    /// for a mono input) and hands every completed outgoing packet to `sink` with its
    /// [`Destination`]; `sink` returns false when it could not take it (counted as a send drop).
    /// While the round-trip probe runs, the probe's silence and clicks go out instead of the
    /// input. While echoing a peer, that peer gets its own stream as it last played here (call
    /// [`Engine::render`] first for an echo without a quantum's delay) and everyone else the
    /// input ([`crate::capture`]). Real-time safe.
    pub fn capture(
        &mut self,
        left: &[f32],
        right: &[f32],
        sink: &mut dyn FnMut(Destination, &[u8]) -> bool,
    ) {
        let now = self.now;
        let start = self.callback_start;
        let probing = self
            .probe
            .outgoing(now, start, &mut self.probe_l, &mut self.probe_r);
        let (left, right): (&[f32], &[f32]) = if probing {
            (&self.probe_l, &self.probe_r)
        } else {
            (left, right)
        };
        let peers = &self.peers;
        let echo = self.echo.and_then(|(slot, _)| {
            let peer = peers.get(slot)?.as_deref()?;
            Some((slot, &peer.stem_l[..], &peer.stem_r[..]))
        });
        let sent = self.capture.push(left, right, echo, now, sink);
        self.counters.packets_sent += sent.packets;
        self.counters.echo_sent += sent.echoes;
        self.counters.send_dropped += sent.dropped;
        self.counters.opus_encoded += sent.encoded;
    }

    /// Starts the round-trip probe ([`crate::probe`]) towards the peer in `slot`: `clicks`
    /// clicks (1..=16), our outgoing audio muted meanwhile. Real-time safe.
    pub fn start_probe(&mut self, slot: usize, clicks: usize) -> Result<(), EngineError> {
        self.peer_mut(slot)?;
        self.probe.start(slot, clicks, self.now);
        Ok(())
    }

    /// Stops the probe; its results stay readable.
    pub fn stop_probe(&mut self) {
        self.probe.stop();
    }

    /// The round-trip probe.
    pub fn probe(&self) -> &ClickProbe {
        &self.probe
    }

    /// Sends the peer in `slot` its own stream back for `ms` milliseconds (at most
    /// [`MAX_ECHO_MS`]; 0 stops that peer's echo), as a [`TAG_ECHO`] record does: the peer then
    /// measures the round trip to us with its probe. Only that peer gets the echo; everyone else
    /// keeps getting our input. One peer at a time: a new echo replaces the previous one. A peer
    /// muted in our mix is refused (counted in [`EngineCounters::echo_refused`]), and muting the
    /// echoed peer stops its echo. The host asks the user first (the net side writes the record
    /// only for a request the user allowed). Real-time safe.
    pub fn set_echo(&mut self, slot: usize, ms: u32) -> Result<(), EngineError> {
        self.peer_mut(slot)?;
        self.note(TAG_ECHO | (slot as u16 & TAG_SLOT_MASK), ms);
        Ok(())
    }

    /// The slot being echoed, if any.
    pub fn echoing(&self) -> Option<usize> {
        self.echo.map(|(slot, _)| slot)
    }

    fn expire_echo(&mut self) {
        if let Some((slot, until)) = self.echo {
            let gone = !matches!(self.peers.get(slot), Some(Some(_)));
            if gone || self.now >= until {
                self.echo = None;
            }
        }
    }

    /// The devices' output and input latency as the host knows them (µs; NaN: unknown), carried
    /// in the histogram block for the UI's mouth-to-ear sum. Real-time safe.
    pub fn set_device_latency(&mut self, output_us: f64, input_us: f64) {
        let valid = |v: f64| {
            if v.is_finite() && v >= 0.0 {
                v
            } else {
                f64::NAN
            }
        };
        self.output_latency_us = valid(output_us);
        self.input_latency_us = valid(input_us);
    }

    /// Renders one quantum of every peer into `left`/`right` (overwritten; each QUANTUM frames)
    /// and runs the master. Real-time safe.
    pub fn render(&mut self, left: &mut [f32], right: &mut [f32]) {
        let frames = left.len().min(right.len()).min(QUANTUM);
        let (left, right) = (&mut left[..frames], &mut right[..frames]);
        left.fill(0.0);
        right.fill(0.0);
        let any_solo = self.solos > 0;
        let (tmp_l, tmp_r) = (&mut self.scratch_l[..frames], &mut self.scratch_r[..frames]);
        let now = self.now;
        let echo = self.echo.map(|(slot, _)| slot);
        let mut streaming = 0;
        for (slot, peer) in self.peers.iter_mut().enumerate() {
            let Some(peer) = peer.as_deref_mut() else {
                continue;
            };
            streaming += usize::from(peer.jitter.state() == StreamState::Playing);
            let audible = solo_audible(any_solo, peer.strip.solo(), peer.strip.mute());
            let probed = self.probe.listens_to(slot);
            let keep = self.recording || probed || echo == Some(slot);
            peer.play(now, left, right, tmp_l, tmp_r, audible, keep);
            if probed {
                self.probe
                    .incoming(now, &peer.stem_l[..frames], &peer.stem_r[..frames]);
            }
        }
        self.streaming = streaming;
        self.master.process(left, right);
        self.counters.quanta += 1;
    }

    /// Keeps (or stops keeping) each peer's pre-fader quantum for [`Engine::stem`]. Recording
    /// costs the fused interpolate-and-mix pass; the output is the same. Real-time safe.
    pub fn set_recording(&mut self, on: bool) {
        self.recording = on;
    }

    /// Whether stems are kept.
    pub fn recording(&self) -> bool {
        self.recording
    }

    /// The last rendered quantum of the peer in `slot` before its strip (fader, pan, mute): its
    /// stream as it left the jitter buffer, concealment and drift correction. Zeros while the
    /// peer has sent nothing. Meaningful only while recording; `None` for an empty slot.
    pub fn stem(&self, slot: usize) -> Option<(&[f32; QUANTUM], &[f32; QUANTUM])> {
        let peer = self.peers.get(slot)?.as_deref()?;
        Some((&peer.stem_l, &peer.stem_r))
    }

    /// The engine-wide counters.
    pub fn counters(&self) -> &EngineCounters {
        &self.counters
    }
}

impl EngineConfig {
    /// Checks the configuration; [`Engine::new`] corrects what this reports.
    pub fn validate(&self) -> Result<(), EngineError> {
        if !packet::BLOCK_SIZES.contains(&self.block_frames) {
            return Err(EngineError::BadBlockSize(self.block_frames));
        }
        if !(1..=2).contains(&self.capture_channels) {
            return Err(EngineError::BadChannels(self.capture_channels));
        }
        if self.max_peers > MAX_PEERS {
            return Err(EngineError::TooManyPeers(self.max_peers));
        }
        Ok(())
    }
}
