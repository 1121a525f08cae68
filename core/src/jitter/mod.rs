//! The per-peer jitter buffer: packets placed by sequence number, loss accounting, concealment,
//! and a playout depth that follows the measured arrival jitter.
//!
//! One [`JitterBuffer`] per remote peer. The engine pushes every packet it drains from the
//! inbound ring with [`JitterBuffer::push`] (its payload bytes are stored as they arrived, in
//! storage sized by [`JitterBuffer::new`]) and pops one block at a time with
//! [`JitterBuffer::pop_block`] whenever its resampler needs input: the pop decodes the payload
//! straight into the caller's slices.
//!
//! # Units and time
//!
//! - `now` is local time in frames at the local rate (48 kHz), the start of the quantum at which
//!   the engine drained the packet; nothing here reads a clock.
//! - Audio held and emitted is counted in **stream frames** (the sender's frames, the unit of
//!   [`JitterBuffer::pop_block`]): [`JitterBuffer::block_frames`],
//!   [`JitterBuffer::buffered_frames`], [`JitterBuffer::target_frames`],
//!   [`JitterConfig::capacity_frames`]. For a 48 kHz peer they equal local frames.
//! - Time-like settings and measurements are **local frames**: [`BufferMode::Adaptive`]'s floor
//!   and ceiling, [`JitterBuffer::jitter_frames`].
//!
//! # Sequence numbers
//!
//! The 16-bit sequence number is extended to 64 bits against the highest one received (the
//! nearest value modulo 65536), so wrap-around at 65535 → 0 is invisible. A bitmap of the last
//! 8192 sequence numbers tells duplicates apart from first arrivals, also for late packets.
//!
//! # Playout states
//!
//! - **Idle** (before the first packet, and after a peer stopped sending): pops emit silence (or
//!   the tail of a concealment fading out). The next arrival restarts the stream at its sequence
//!   number, in prefill.
//! - **Prefill**: pops emit silence until the fill reaches the target, then playout starts with
//!   a fade-in. In adaptive mode playout also waits until arrivals have been watched for 50 ms
//!   (so that the first target already knows the arrival pattern) and then starts at the
//!   target: the oldest blocks held more than half a block beyond it are dropped unplayed,
//!   counted in `discarded` (typically a few blocks per start). Fixed mode starts as JackTrip
//!   does, when the depth is reached, and drops nothing. Nothing is counted as underrun or loss
//!   meanwhile. A prefill that receives nothing for 200 ms restarts from the next arrival.
//! - **Playing**: each pop emits the next sequence number's block:
//!   - present: the real audio ([`PopKind::Audio`]), crossfaded back in after a concealment;
//!   - missing while later packets are buffered: a concealed block ([`crate::conceal`]) and the
//!     sequence number is passed over (its packet, if it comes, is late);
//!   - missing with nothing buffered: an **underrun**. The pop conceals *without* passing the
//!     sequence number, so playout waits (the delay grows by one block per such pop). When a
//!     packet comes, the wait is settled: if it is the one playout waited for, it was late
//!     (counted in `late_underruns`; its lateness has already raised the estimate); if numbers
//!     before it are still missing, the wait was spent on a gap, and as many of the missing
//!     numbers as blocks were stretched are passed at once (counted concealed), so a run of
//!     losses leaves the delay where it was. Packets held back by a stall of the local machine
//!     ([`stall`]) end it as `stall_underruns`. After 200 ms of waiting the buffer goes Idle: a
//!     peer that paused costs one underrun, not an endless count.
//!
//! # Depth: target and fill
//!
//! Every accepted packet (in time or late) gives a lateness `L = now − e(seq)`, where `e` is the
//! packet's nominal arrival (sequence × block duration, in local frames) relative to the start of
//! the stream. Sender bursts, network jitter and the receiver's own render bursts (a 480-frame
//! device callback renders 3-4 quanta back to back, so packets are drained in clumps) all show in
//! `L`; a packet that never arrives adds nothing to it, and nothing is learnt from underruns
//! (the depth an underrun waited its way to measures a gap as much as any lateness).
//! The lateness module turns `L` into the **jitter estimate**: per one-second window the 95th
//! percentile of `L`, the largest of the current window and the five before it (absolute,
//! carried forward by the drift trend, so a path-delay step moves the target and the fill
//! together), above the recent minimum; and recurring peaks (stalls, a heavy tail) once two fall
//! within a minute. A packet later than the ceiling plus one quantum above the recent minimum
//! never enters the percentile (no allowed depth could cover it: it is loss).
//!
//! - **Adaptive target** = jitter estimate + one quantum + half a quantum of margin, clamped to
//!   `[floor, ceiling]` and to the capacity. The quantum pays for what the consumer holds
//!   staged: the engine's resampler pops a block whenever it holds less than a quantum plus its
//!   look-ahead, so about one block (at most a quantum) sits there whenever the fill is read.
//!   `bench/native` (`jitter-oracle`) holds it against the oracle, the smallest fixed depth that
//!   plays every packet that arrived, on seeded traces.
//! - **Fixed target** = `packets × block_frames`.
//!
//! The **fill**, [`JitterBuffer::buffered_frames`], is the playout delay of the next block to
//! pop measured against the earliest recent arrivals: `D − min L`, where
//! `D = now − e(next block to pop)`. It is what the buffer would hold if every packet arrived as
//! early as the earliest recent one: smooth (it does not jump with each arrival burst), and a
//! packet is in time exactly when its `L − min L` is at most the fill when its block is popped.
//! The engine adds the resampler's staged frames and its drift controller drives that sum's
//! average to [`JitterBuffer::target_frames`]; at that balance the fill is the target minus the
//! staging, i.e. the spread plus the margin. While idle or prefilling, `buffered_frames()`
//! returns the target (no error to correct).
//!
//! The drift controller moves the delay by at most ~1000 ppm (48 frames per second), so large
//! changes are made here, by whole blocks, aiming `fill + min(block, quantum)` (the staging
//! assumed) at the target:
//! - a shortfall of a block or more (the jitter grew): pops synthesize concealed blocks without
//!   passing a sequence number until it is under half a block (counted in `stretched`);
//! - an excess above `max(1.5 blocks, 1 quantum)` for half a second (a spike has calmed, or the
//!   start overshot): blocks are skipped, one per pop, until it is under half a block, each
//!   merged into its neighbour by a crossfade and counted in `discarded`;
//! - playout starts (after prefill) at the target: blocks are dropped while it is a block or more
//!   above, and the consumer drops the rest (less than a block) from the first block, whose
//!   fade-in starts after them ([`JitterBuffer::take_start_excess`]).
//!
//! Smaller differences are the drift controller's.
//!
//! # Streams, resets, too far ahead
//!
//! - A format change (block size, rate or channel count) drops what is buffered (counted in
//!   `discarded`), counts a reset and restarts at the new packet.
//! - A packet too far ahead to fit in the storage: if blocks are buffered, the oldest are
//!   dropped to make room (counted in `discarded`; playout continues). If nothing would remain
//!   (a long outage, or a sender that restarted its sequence), the stream restarts at the new
//!   packet in prefill. When the jump in sequence numbers is larger than the time elapsed since
//!   the last arrival can explain (by more than the capacity), the sender restarted its
//!   numbering: a reset is counted and the skipped numbers are not counted as lost.
//! - A packet older than the 8192-number history ("stale") is counted in `discarded` only; eight
//!   in a row mean the sender restarted its numbering lower: the stream resets there.
//!
//! # Storage
//!
//! A packet's audio is touched twice: copied as bytes at push (512 bytes for a 128-frame PCM16
//! stereo block) and decoded at pop into the slices the engine's resampler reads next, so the
//! `f32` samples are written once, where they are used. Payloads sit in buffers of
//! `block × 8` bytes (float32 stereo, the widest format; the format is remembered per buffer,
//! since it may change within a stream), handed to slots from a free stack. A played buffer is
//! kept until [`crate::conceal::HISTORY_NEED`] frames of later blocks have been played: the
//! concealer records real audio by reference and, when a loss starts its pitch search, has the
//! kept payloads decoded again instead of copying every block it is shown. The most recently
//! released buffer is reused first, so a peer's buffers in use (its depth plus the kept ones,
//! about 6 KB for 128-frame PCM16 stereo) stay warm in cache.
//!
//! # Real-time safety
//!
//! [`JitterBuffer::new`] allocates everything (payload storage for `capacity_frames` frames of
//! float32 stereo plus the kept history, slot table, concealer). Every other method is
//! real-time safe: no allocation, lock, log or panic on any input, bounded work per call (a push
//! and a pop cost O(1): the target is recomputed only when the jitter estimate changes), output
//! always finite and within [-1, 1].

mod depth;
mod lateness;
mod pop;
mod push;
pub mod stall;
mod store;
#[cfg(test)]
mod tests;

use crate::codec::Decoder;
use crate::conceal::{fade_in_weight, Concealer, HISTORY_NEED};
use crate::packet::{Header, Packet, MAX_FRAMES, OPUS_FRAMES};
use depth::TargetInputs;
use lateness::Lateness;
use store::{Store, Stored};

/// Smallest block size accepted; sizes the slot table.
pub(crate) const MIN_BLOCK: usize = 32;
/// Sequence numbers remembered for duplicate detection.
const SEEN_BITS: u64 = 8192;
const SEEN_WORDS: usize = (SEEN_BITS / 64) as usize;
/// Marks an empty slot.
const EMPTY: u64 = u64::MAX;
/// Extended sequence number of the first packet (room below it for reordering).
const SEQ_BASE: u64 = 1 << 32;
/// Consecutive stale packets that mean a restarted sequence.
const STALE_RESTART: u32 = 8;
/// Arrivals observed (local frames since the stream's start) before playout may start, so that
/// the first target already knows the arrival pattern.
const START_OBSERVE: u64 = 2400;
/// Local frames without arrivals after which a stream counts as stopped (200 ms at 48 kHz).
const STOP_FRAMES: u64 = 9600;
/// Largest storage accepted, in frames.
const MAX_CAPACITY: usize = 1 << 20;
/// Storage beyond the capacity, in frames, for the played blocks kept for the concealer: at
/// least `HISTORY_NEED` rounded up to whole blocks of any size.
pub(crate) const KEEP_FRAMES: usize = HISTORY_NEED + MAX_FRAMES;
/// Entries of the ring of kept buffers (a power of two, at least `KEEP_FRAMES / MIN_BLOCK`).
pub(crate) const KEPT_RING: usize = 64;

const _: () = assert!(KEPT_RING.is_power_of_two() && KEPT_RING >= KEEP_FRAMES / MIN_BLOCK);
const _: () = assert!((MAX_CAPACITY + KEEP_FRAMES) / MIN_BLOCK < 1 << 16);

/// The adaptive floor's default: one render quantum.
pub const DEFAULT_FLOOR_FRAMES: u32 = 128;
/// The adaptive ceiling's default: 160 ms at 48 kHz. Far above what anyone can play in time
/// with, but a ceiling that cannot cover a starved machine's stalls or a bursty path underruns
/// every few seconds instead. The app's copy (app/src/audio/buffer-policy.ts) is checked against
/// this line by a unit test.
pub const DEFAULT_CEILING_FRAMES: u32 = 7680;

/// How the target depth is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferMode {
    /// Follow the measured jitter, within `[floor_frames, ceiling_frames]` (local frames).
    Adaptive {
        /// Lowest target, in local frames.
        floor_frames: u32,
        /// Highest target, in local frames.
        ceiling_frames: u32,
    },
    /// A fixed depth of `packets` blocks (JackTrip-WebRTC uses 8).
    Fixed {
        /// Blocks of depth.
        packets: u32,
    },
}

impl BufferMode {
    /// Adaptive between [`DEFAULT_FLOOR_FRAMES`] and [`DEFAULT_CEILING_FRAMES`]: what a room runs.
    pub const DEFAULT: BufferMode = BufferMode::Adaptive {
        floor_frames: DEFAULT_FLOOR_FRAMES,
        ceiling_frames: DEFAULT_CEILING_FRAMES,
    };
}

/// Construction parameters of a [`JitterBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JitterConfig {
    /// Frames of one render quantum (128).
    pub quantum: u32,
    /// Local sample rate in Hz (48000).
    pub local_rate: u32,
    /// Storage in stream frames; rounded up to a power of two, at least 1024 (8192 ≈ 170 ms).
    pub capacity_frames: u32,
    /// Target depth policy; can be changed later with [`JitterBuffer::set_mode`].
    pub mode: BufferMode,
}

impl Default for JitterConfig {
    fn default() -> Self {
        JitterConfig {
            quantum: 128,
            local_rate: 48_000,
            capacity_frames: 8192,
            mode: BufferMode::DEFAULT,
        }
    }
}

/// What [`JitterBuffer::push`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushOutcome {
    /// Stored in its slot; it will be played.
    Stored,
    /// Stored, and it (re)started the stream: playout prefills from it.
    Started,
    /// Its format differs from the stream's: the buffer was reset and it starts the new stream.
    FormatReset,
    /// A copy of a packet already received; dropped.
    Duplicate,
    /// Arrived after its slot was played or passed; counted, dropped.
    Late,
    /// Older than the duplicate history; counted in `discarded`, dropped.
    Stale,
    /// Not a block this buffer can hold (block size not 32/64/128/256, channels not 1-2, payload
    /// length wrong); counted in `discarded`, dropped. Of what [`crate::packet::parse`] accepts,
    /// only an Opus packet (120 or 240 frames) is one: the buffer holds PCM.
    Rejected,
}

/// What a pop emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PopKind {
    /// The peer's audio (possibly crossfaded out of a concealment or merged by a catch-up skip).
    Audio,
    /// Synthesized continuation of the peer's audio (not all zeros).
    Concealed,
    /// Zeros: before the stream starts, while prefilling or idle, or once a concealment has
    /// faded out.
    Silence,
}

/// Result of [`JitterBuffer::pop_block`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pop {
    /// What was written.
    pub kind: PopKind,
    /// Frames written to the front of each output slice (0 when the slices were too short).
    pub frames: usize,
}

/// Where playout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamState {
    /// No stream: before the first packet, or after the peer stopped sending.
    Idle,
    /// Waiting for the fill to reach the target.
    Prefill,
    /// Emitting blocks.
    Playing,
}

/// Cumulative counters (never reset by the stream; [`JitterBuffer::reset_counters`] clears
/// them). "Packet" means one sequence number.
///
/// Identities, while no packet was stale or rejected and playout never restarted (reset, jump,
/// pause): `lost = (highest − lowest + 1) − received` (extended sequence numbers);
/// `received = played + late + discarded + held` (`held`: stored, not yet played); and once
/// playout has passed the highest sequence number received, `concealed = lost + late`. The
/// tests check these exactly against injected schedules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JitterCounters {
    /// Unique packets that arrived, in time or late (duplicates and stale packets excluded).
    pub received: u64,
    /// Copies of a packet already received (detected within the last 8192 sequence numbers).
    pub duplicates: u64,
    /// Unique packets that arrived after their slot was played, concealed or passed.
    pub late: u64,
    /// Expected − received, RTP-style: per stream segment, expected = highest − lowest extended
    /// sequence number received + 1. A segment ends at a reset (format change, restarted
    /// numbering); a peer that stops sending adds nothing (its numbers stop too).
    pub lost: u64,
    /// Sequence numbers that playout passed over without their packet: packets lost, or arriving
    /// late. Each is a concealed block, except at the start of playout, where the sequence
    /// numbers dropped to start at the target are passed silently.
    pub concealed: u64,
    /// Underrun events: a pop found no packet buffered while playing. One per run of
    /// consecutive empty pops, however long (a peer that stops sending costs exactly one).
    pub underruns: u64,
    /// Underruns that ended with the very packet playout was waiting for: it came, late (the
    /// others ended with a later packet, the missing ones lost or later still).
    pub late_underruns: u64,
    /// Underruns ended by packets that a stall of the local machine held back (see
    /// [`stall`]): neither a loss nor the peer's lateness.
    pub stall_underruns: u64,
    /// Received packets dropped unplayed: merged away by a catch-up skip, dropped to start
    /// playout at the target depth (oldest blocks held beyond it when prefill ends), dropped to
    /// make room for a packet too far ahead, dropped by a reset or by a prefill that waited
    /// through a pause; plus stale and rejected packets.
    pub discarded: u64,
    /// Stream resets: format changes and restarted sequence numbering.
    pub resets: u64,
    /// Packets played as audio.
    pub played: u64,
    /// Compressed packets (counted in `played`) that their decoder refused: concealed instead.
    pub undecodable: u64,
    /// Compressed frames that were lost (counted in `lost`) but played from the redundant copy
    /// the next packet carried (see `packet`'s Opus section): not concealed. So
    /// concealed + recovered = lost + late.
    pub recovered: u64,
    /// Blocks synthesized without passing a sequence number, each adding one block of delay:
    /// pops during underruns (at most 200 ms worth per underrun) and pops that raise the delay
    /// to a target that grew.
    pub stretched: u64,
}

/// A place in the slot table: the extended sequence number it holds (or `EMPTY`) and, when it
/// holds one, the storage buffer of its payload.
#[derive(Clone, Copy, Debug)]
struct Slot {
    ext: u64,
    buf: u32,
    /// Local time (frames) of the quantum the packet arrived in.
    arrival: u64,
    /// The caller's note on the packet ([`JitterBuffer::push_noted`]; NaN: none).
    note: f64,
}

/// A per-peer jitter buffer. See the module documentation.
///
/// `repr(C)`, fields in the order written: what every push and pop reads or writes comes first
/// and shares a few cache lines (an engine's peers do not all fit in the first-level cache, so
/// each line a quantum touches per peer costs a second-level access); the large arrays, of
/// which a push or pop touches one line, come last.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct JitterBuffer {
    state: StreamState,
    /// Sender rate equals the local rate (no conversion of frame counts).
    same_rate: bool,
    /// Stream format (`block == 0`: nothing received yet).
    channels: u8,
    bits: u8,
    rate: u32,
    /// Blocks to synthesize (without passing a sequence number) to raise the delay.
    grow_pending: u32,
    /// Blocks to merge away to lower the delay.
    skip_pending: u32,
    stale_run: u32,
    /// The stream is Opus: blocks are decoded by the decoder handed to each pop.
    opus: bool,
    /// The decoder must forget its history before the next frame (a stream (re)started).
    decoder_stale: bool,
    block: usize,
    n_slots: usize,
    /// `n_slots - 1` (`n_slots` is a power of two).
    slot_mask: u64,
    /// One block in local frames.
    block_local: i64,
    /// Extended sequence number of the next block to play.
    play: u64,
    /// Packets stored in the slots.
    buffered: usize,
    /// Highest extended sequence number received (valid once `block > 0`).
    highest: u64,
    /// Playout delay D of the next block to play, local frames (see the module docs).
    delay: i64,
    /// Lateness reference: local time and sequence number of the stream's (re)start.
    t_base: u64,
    s_base: u64,
    last_arrival: u64,
    /// Arrival time (local frames) and note of the last packet played as audio, until taken.
    played_arrival: Option<(u64, f64)>,
    /// The note of the packet being pushed.
    pushed_note: f64,
    /// Arrivals at or before this local time were held back by a local stall ([`stall`]).
    excused_until: Option<u64>,
    /// Whether the current underrun is ended by excused arrivals.
    excused_now: bool,
    /// See [`JitterBuffer::take_start_excess`].
    start_excess: u32,
    /// See [`JitterBuffer::last_pushed`].
    last_ext: u64,
    /// Current segment of the loss accounting.
    seg_active: bool,
    seg_lowest: u64,
    seg_highest: u64,
    seg_received: u64,
    /// Target, local frames.
    target_local: i64,
    /// What `target_local` was computed from (`None`: to be computed).
    target_inputs: Option<TargetInputs>,
    /// Frames emitted in the current run of empty pops (0: not in a run).
    empty_frames: usize,
    over_since: Option<u64>,
    counters: JitterCounters,
    cfg: JitterConfig,
    /// Capacity in stream frames (multiple of `MAX_FRAMES`).
    cap: usize,
    slots: Vec<Slot>,
    store: Store,
    concealer: Concealer,
    lat: Lateness,
    lost_closed: u64,
    /// Scratch for the second block of a catch-up merge.
    merge_l: Vec<f32>,
    merge_r: Vec<f32>,
    seen: [u64; SEEN_WORDS],
}

impl JitterBuffer {
    /// A buffer with storage for `config.capacity_frames` stereo frames (rounded up to a power
    /// of two, at least 1024). Allocates: call it off the render path.
    pub fn new(config: JitterConfig) -> Self {
        let cap = (config.capacity_frames as usize)
            .clamp(4 * MAX_FRAMES, MAX_CAPACITY)
            .next_power_of_two();
        let cfg = JitterConfig {
            quantum: if config.quantum == 0 {
                128
            } else {
                config.quantum
            },
            local_rate: if config.local_rate == 0 {
                48_000
            } else {
                config.local_rate
            },
            capacity_frames: cap as u32,
            mode: config.mode,
        };
        let mut jb = JitterBuffer {
            cfg,
            cap,
            store: Store::new(cap),
            slots: vec![
                Slot {
                    ext: EMPTY,
                    buf: 0,
                    arrival: 0,
                    note: f64::NAN,
                };
                cap / MIN_BLOCK
            ],
            opus: false,
            decoder_stale: true,
            merge_l: vec![0.0; MAX_FRAMES],
            merge_r: vec![0.0; MAX_FRAMES],
            block: 0,
            rate: cfg.local_rate,
            channels: 0,
            bits: 0,
            n_slots: 0,
            slot_mask: 0,
            same_rate: true,
            block_local: i64::from(cfg.quantum),
            state: StreamState::Idle,
            play: 0,
            buffered: 0,
            highest: 0,
            seen: [0; SEEN_WORDS],
            seg_active: false,
            seg_lowest: 0,
            seg_highest: 0,
            seg_received: 0,
            lost_closed: 0,
            t_base: 0,
            s_base: 0,
            last_arrival: 0,
            played_arrival: None,
            pushed_note: f64::NAN,
            excused_until: None,
            excused_now: false,
            start_excess: 0,
            last_ext: 0,
            delay: 0,
            lat: Lateness::new(),
            target_local: 0,
            target_inputs: None,
            empty_frames: 0,
            grow_pending: 0,
            skip_pending: 0,
            over_since: None,
            stale_run: 0,
            concealer: Concealer::new(),
            counters: JitterCounters::default(),
        };
        jb.update_target();
        jb
    }

    // ----- accessors -------------------------------------------------------------------------

    /// Frames per block of the current stream (stream frames); 0 before the first packet.
    pub fn block_frames(&self) -> usize {
        self.block
    }

    /// Sender's sample rate in Hz (the local rate before the first packet).
    pub fn sender_rate(&self) -> u32 {
        self.rate
    }

    /// Payload channels of the current stream (1 or 2; 0 before the first packet).
    pub fn channels(&self) -> u8 {
        self.channels
    }

    /// Sender's bit resolution (16, 24, 32; 0 before the first packet).
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// Where playout stands.
    pub fn state(&self) -> StreamState {
        self.state
    }

    /// The counters (see [`JitterCounters`] for exact definitions).
    pub fn counters(&self) -> JitterCounters {
        let mut c = self.counters;
        c.lost = self.lost_closed + self.segment_lost();
        c
    }

    /// Zeroes the counters. Real-time safe.
    pub fn reset_counters(&mut self) {
        self.counters = JitterCounters::default();
        self.lost_closed = 0;
        // Loss is counted from the next sequence number on.
        self.seg_lowest = self.seg_highest + 1;
        self.seg_received = 0;
    }

    /// Arrivals pushed with `now` up to `until` were held back by a stall of the local machine
    /// (see [`stall`]): they do not feed the lateness estimate. Real-time safe.
    pub fn excuse_until(&mut self, until: u64) {
        self.excused_until = Some(until);
    }

    /// The extended sequence number of the last unique packet pushed (`None` before the first):
    /// its place in the stream, counted from the stream's first packet's number plus 2^32.
    pub fn last_pushed(&self) -> Option<u64> {
        (self.block > 0).then_some(self.last_ext)
    }

    /// Frames (stream frames, less than a block) by which the fill exceeded the target when
    /// playout started, taken once: the consumer drops that many from the start of the block
    /// just popped (silence there: its fade-in starts after them), so playout starts exactly at
    /// the target. The buffer counts them as played already. Real-time safe.
    pub fn take_start_excess(&mut self) -> usize {
        std::mem::take(&mut self.start_excess) as usize
    }

    /// The configuration in use (capacity after rounding).
    pub fn config(&self) -> JitterConfig {
        self.cfg
    }

    /// Drops the stream: buffered packets (counted in `discarded`), format, timing and jitter
    /// history; the next packet starts afresh. Counters are kept. Real-time safe.
    pub fn reset(&mut self) {
        self.drop_all();
        self.close_segment();
        self.block = 0;
        self.rate = self.cfg.local_rate;
        self.channels = 0;
        self.bits = 0;
        self.n_slots = 0;
        self.slot_mask = 0;
        self.same_rate = true;
        self.block_local = i64::from(self.cfg.quantum);
        self.state = StreamState::Idle;
        self.seen = [0; SEEN_WORDS];
        self.lat.forget();
        self.empty_frames = 0;
        self.grow_pending = 0;
        self.skip_pending = 0;
        self.over_since = None;
        self.stale_run = 0;
        self.concealer.reset();
        self.target_inputs = None;
        self.update_target();
    }

    // ----- internals -------------------------------------------------------------------------

    /// Adopts the block format of `header` (validated) and lays the storage out for it.
    fn set_format(&mut self, header: &Header, channels: u8, opus: bool) {
        let (frames, rate) = (usize::from(header.frames), header.rate.hz());
        // The concealer's references name buffers of the old layout: it copies what it needs.
        let store = &mut self.store;
        self.concealer
            .detach_with(|t, l, r| store.decode_token(t, l, r));
        self.store.layout(header, channels);
        self.block = frames;
        self.rate = rate;
        self.channels = channels;
        // Slots are a power of two (sequence numbers map to them by mask): as many as the
        // capacity holds, rounded down (an Opus block of 120 or 240 frames leaves a remainder).
        let fit = (self.cap / frames).max(1);
        self.n_slots = 1 << (usize::BITS - 1 - fit.leading_zeros());
        self.opus = opus;
        self.decoder_stale = true;
        self.slot_mask = self.n_slots as u64 - 1;
        self.same_rate = rate == self.cfg.local_rate;
        self.block_local = self.to_local(frames as i64);
        self.target_inputs = None;
    }

    /// Starts (or restarts) playout at `ext`, in prefill, with a fresh lateness reference.
    fn restart(&mut self, ext: u64, now: u64) {
        self.state = StreamState::Prefill;
        self.decoder_stale = true;
        self.play = ext;
        self.t_base = now;
        self.s_base = ext;
        self.delay = 0;
        self.lat.rebase();
        self.empty_frames = 0;
        self.grow_pending = 0;
        self.skip_pending = 0;
        self.over_since = None;
    }

    fn new_segment(&mut self, ext: u64) {
        self.seg_active = true;
        self.seg_lowest = ext;
        self.seg_highest = ext;
        self.seg_received = 0;
        self.highest = ext;
        self.seen = [0; SEEN_WORDS];
    }

    fn segment_lost(&self) -> u64 {
        if !self.seg_active {
            return 0;
        }
        (self.seg_highest + 1 - self.seg_lowest).saturating_sub(self.seg_received)
    }

    fn close_segment(&mut self) {
        self.lost_closed += self.segment_lost();
        self.seg_active = false;
    }

    /// Drops every stored packet (counted in `discarded`).
    fn drop_all(&mut self) {
        for i in 0..self.n_slots {
            if self.slots[i].ext != EMPTY {
                self.free_slot(i);
                self.counters.discarded += 1;
            }
        }
        self.buffered = 0;
    }

    /// Stored packets with numbers in `[from, to)` (wherever `to` lies: the range may be
    /// wider than the slots).
    fn held_between(&self, from: u64, to: u64) -> u64 {
        self.slots[..self.n_slots]
            .iter()
            .filter(|s| s.ext != EMPTY && (from..to).contains(&s.ext))
            .count() as u64
    }

    /// Moves the play position forward to `to`, dropping stored packets on the way.
    fn pass_to(&mut self, to: u64) {
        let n = self.n_slots as u64;
        let from = self.play.max(to.saturating_sub(n));
        let mut held = 0;
        for s in from..to {
            let i = self.slot_of(s);
            if self.slots[i].ext == s {
                self.free_slot(i);
                self.buffered -= 1;
                self.counters.discarded += 1;
                held += 1;
            }
        }
        // The numbers passed without their packet were concealed (the audio jumps from a
        // continuation), so that concealed = lost + late still holds.
        if to > self.play {
            self.counters.concealed += (to - self.play) - held;
        }
        self.play = to;
    }

    fn slot_of(&self, ext: u64) -> usize {
        (ext & self.slot_mask) as usize
    }

    /// Extends a 16-bit sequence number to the value nearest the highest received.
    fn extend(&self, seq: u16) -> u64 {
        let d = seq.wrapping_sub(self.highest as u16) as i16;
        self.highest.wrapping_add_signed(i64::from(d))
    }

    fn is_seen(&self, ext: u64) -> bool {
        if ext > self.highest || ext + SEEN_BITS <= self.highest {
            return false;
        }
        let bit = ext % SEEN_BITS;
        self.seen[(bit / 64) as usize] & (1 << (bit % 64)) != 0
    }

    fn mark_seen(&mut self, ext: u64) {
        if ext > self.highest {
            let gap = ext - self.highest;
            if gap >= SEEN_BITS {
                self.seen = [0; SEEN_WORDS];
            } else {
                for s in self.highest + 1..ext {
                    let bit = s % SEEN_BITS;
                    self.seen[(bit / 64) as usize] &= !(1 << (bit % 64));
                }
            }
            self.highest = ext;
        }
        if ext + SEEN_BITS > self.highest {
            let bit = ext % SEEN_BITS;
            self.seen[(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }

    /// Local frames since the stream's (re)start.
    fn elapsed(&self, now: u64) -> i64 {
        (now as i64).wrapping_sub(self.t_base as i64)
    }

    /// Nominal arrival of `ext` relative to the stream's (re)start, local frames.
    fn nominal(&self, ext: u64) -> i64 {
        let k = (ext as i64).wrapping_sub(self.s_base as i64);
        let frames = k.wrapping_mul(self.block as i64);
        if self.same_rate {
            return frames;
        }
        // |k| < 2^40 in any session (years of 32-frame blocks): no overflow.
        frames
            .wrapping_mul(i64::from(self.cfg.local_rate))
            .div_euclid(i64::from(self.rate.max(1)))
    }

    fn block_local(&self) -> i64 {
        self.block_local
    }

    fn to_local(&self, stream: i64) -> i64 {
        if self.same_rate {
            return stream;
        }
        stream * i64::from(self.cfg.local_rate) / i64::from(self.rate.max(1))
    }

    fn to_stream(&self, local: i64) -> i64 {
        if self.same_rate {
            return local;
        }
        local * i64::from(self.rate) / i64::from(self.cfg.local_rate)
    }
}
