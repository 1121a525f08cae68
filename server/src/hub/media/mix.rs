//! Mix: every listener's personal mix of the room, made on the hub, one 128-frame block per tick.
//!
//! The room ticks every [`QUANTUM`] frames at 48 kHz. Tick `k` is due at `t0 + k·128/48000 s`,
//! computed from `t0` each time (integer µs, rounded down), so the schedule does not drift
//! whatever the worker's wake-ups do. At each tick every source client's block is pulled from
//! its own `tutti_core::engine::Peer` (the worklet's jitter buffer, concealment and drift
//! correction), [`MixMinus`] sums the room once and renders each listener's mix minus its own
//! voice through that listener's strips and limiter, and each listener's block is encoded for it:
//! - a browser gets a bundle of one packet: 128 frames, PCM16 stereo, stream id [`MIX_STREAM`];
//!   or, when its layer is Opus (its path is narrow: the controller's choice, as in forward
//!   mode), its mix as an Opus stream ([`OpusFramer`]: 120- or 240-sample frames, each with the
//!   previous frame's copy), a bundle of the frames each tick completes (none, one or two). A
//!   mix is personal, so it is encoded once per listener who takes Opus, and only for them;
//! - a JackTrip client gets plain JackTrip packets in its own format: its block size (64 frames:
//!   two packets a tick; 256: one every second tick), its bit depth, its channel count (mono is
//!   `(L + R) / 2`), its own sequence numbers.
//!
//! A poll that comes more than one tick after a due tick counts a late tick (and the lateness);
//! at most [`MAX_TICKS_PER_POLL`] ticks run in one poll and the rest of the overdue ticks are
//! skipped (counted), so a stalled worker catches up without sending a burst.
//!
//! Nothing here allocates after [`Mixer::new`], [`Output::new`] and [`Output::set_layer`].

use tutti_core::bundle::{BundleWriter, BUNDLE_HEADER_LEN, ENTRY_LEN_BYTES};
use tutti_core::engine::QUANTUM;
use tutti_core::mix::{MixMinus, Sources};
use tutti_core::packet::{
    encode, Extension, Header, SampleFormat, SampleRate, CODEC_PCM, MAX_FRAMES, MAX_PACKET_LEN,
};

use tutti_core::framer::{OpusFramer, Pushed};

use super::layers::{self, Layer};
use super::{ClientKind, RoomCounters, MAX_CLIENTS, MAX_STRIPS, MIX_STREAM};
use crate::hub::opus::OpusError;

/// Most ticks one poll runs; overdue ticks beyond them are skipped.
pub const MAX_TICKS_PER_POLL: u64 = 2;
/// One tick, µs (rounded down; the schedule itself is exact).
pub const TICK_US: u64 = QUANTUM as u64 * 1_000_000 / 48_000;

/// The µs offset of tick `k` from the schedule's start: `k·128/48000 s`, rounded down.
pub const fn tick_offset_us(k: u64) -> u64 {
    k * (QUANTUM as u64 * 1_000_000) / 48_000
}

/// Every slot's block of this tick.
pub struct Blocks {
    blocks: Vec<[[f32; QUANTUM]; 2]>,
    live: Vec<bool>,
}

impl Sources for Blocks {
    fn block(&self, slot: usize) -> Option<(&[f32; QUANTUM], &[f32; QUANTUM])> {
        if *self.live.get(slot)? {
            let [l, r] = &self.blocks[slot];
            Some((l, r))
        } else {
            None
        }
    }
}

impl Blocks {
    /// Makes room for slot `slot` (allocates when the room grows).
    pub fn ensure(&mut self, slot: usize) {
        if self.blocks.len() <= slot {
            self.blocks.resize(slot + 1, [[0.0; QUANTUM]; 2]);
            self.live.resize(slot + 1, false);
        }
    }

    /// Slot `slot`'s block, to fill, and whether it is live this tick.
    pub fn slot_mut(
        &mut self,
        slot: usize,
    ) -> (&mut [f32; QUANTUM], &mut [f32; QUANTUM], &mut bool) {
        let [l, r] = &mut self.blocks[slot];
        (l, r, &mut self.live[slot])
    }
}

/// The room's mix: the schedule, the mix-minus, the blocks and the encoding scratch.
pub struct Mixer {
    pub minus: MixMinus,
    pub blocks: Blocks,
    /// Whether ticks run (mix mode, or a JackTrip client present).
    running: bool,
    t0: u64,
    next: u64,
    /// The local frame of tick 0: the clock's time in frames when the ticks started, so the
    /// jitter buffers' clock only moves forward across a stop and a restart.
    base: u64,
    out_l: [f32; QUANTUM],
    out_r: [f32; QUANTUM],
    packet: Box<[u8]>,
    bundle: Box<[u8]>,
}

impl Mixer {
    /// A mixer for [`MAX_CLIENTS`] slots. Allocates.
    pub fn new() -> Mixer {
        Mixer {
            minus: MixMinus::new(MAX_CLIENTS, MAX_STRIPS),
            blocks: Blocks {
                blocks: Vec::with_capacity(MAX_CLIENTS),
                live: Vec::with_capacity(MAX_CLIENTS),
            },
            running: false,
            t0: 0,
            next: 0,
            base: 0,
            out_l: [0.0; QUANTUM],
            out_r: [0.0; QUANTUM],
            packet: vec![0; MAX_PACKET_LEN].into_boxed_slice(),
            // Two packets: the most Opus frames one tick completes.
            bundle: vec![0; BUNDLE_HEADER_LEN + 2 * (ENTRY_LEN_BYTES + MAX_PACKET_LEN)]
                .into_boxed_slice(),
        }
    }

    /// Whether ticks run.
    pub fn running(&self) -> bool {
        self.running
    }

    /// Starts (tick 0 at `now_us`) or stops the ticks; no change when already so.
    pub fn set_running(&mut self, on: bool, now_us: u64) {
        if on && !self.running {
            self.t0 = now_us;
            self.next = 0;
            self.base = now_us * 48 / 1_000;
        }
        self.running = on;
    }

    /// When the next tick is due (`None`: not running).
    pub fn next_tick_us(&self) -> Option<u64> {
        self.running.then(|| self.t0 + tick_offset_us(self.next))
    }

    /// The local frame at which the next tick's block starts: the jitter buffers' clock.
    pub fn frame(&self) -> u64 {
        self.base + self.next * QUANTUM as u64
    }

    /// Which ticks to run at `now_us`: returns how many (0..=MAX_TICKS_PER_POLL), having counted
    /// lateness and skipped the overdue ticks beyond them. The caller runs them with
    /// [`Mixer::frame`] / [`Mixer::advance`].
    pub fn due(&mut self, now_us: u64, counters: &mut RoomCounters) -> u64 {
        let Some(first) = self.next_tick_us() else {
            return 0;
        };
        if now_us < first {
            return 0;
        }
        let lateness = now_us - first;
        if lateness > TICK_US {
            counters.late_ticks += 1;
            counters.max_tick_lateness_us = counters.max_tick_lateness_us.max(lateness);
        }
        // Ticks due: every k from `next` with t0 + offset(k) ≤ now.
        let elapsed = now_us - self.t0;
        // offset(k) ≤ e  ⇔  k·128e6 < (e + 1)·48000.
        let last = ((elapsed + 1) * 48_000 - 1) / (QUANTUM as u64 * 1_000_000);
        let due = last + 1 - self.next;
        if due > MAX_TICKS_PER_POLL {
            let skip = due - MAX_TICKS_PER_POLL;
            counters.skipped_ticks += skip;
            self.next += skip;
        }
        due.min(MAX_TICKS_PER_POLL)
    }

    /// Moves on to the next tick.
    pub fn advance(&mut self) {
        self.next += 1;
    }

    /// Renders listener `slot`'s mix of this tick (after [`MixMinus::sum`]), with `extra` (the
    /// home hub's mix, when the room spans hubs) added at unit gain, and encodes it for `kind`
    /// into `out`, calling `send` with each message. Returns (messages, packets, bytes).
    pub fn render_for(
        &mut self,
        slot: usize,
        kind: ClientKind,
        out: &mut Output,
        now_us: u64,
        extra: Option<(&[f32; QUANTUM], &[f32; QUANTUM])>,
        send: &mut dyn FnMut(&[u8]),
    ) -> (u64, u64, u64) {
        if self
            .minus
            .render_plus(slot, &self.blocks, extra, &mut self.out_l, &mut self.out_r)
            .is_err()
        {
            return (0, 0, 0);
        }
        match kind {
            ClientKind::Browser => {
                if let Some(framer) = out.opus.as_deref_mut() {
                    // Its mix as Opus: the frames this tick completes, in one bundle.
                    let Ok(mut writer) = BundleWriter::new(&mut self.bundle) else {
                        return (0, 0, 0);
                    };
                    let mut packets = 0;
                    let pushed = framer.push(
                        &self.out_l,
                        &self.out_r,
                        now_us,
                        48_000,
                        MIX_STREAM,
                        &mut |packet| {
                            if writer.push(packet).is_ok() {
                                packets += 1;
                            }
                        },
                    );
                    out.opus_frames.encoded += pushed.encoded;
                    out.opus_frames.failed += pushed.failed;
                    if packets == 0 {
                        return (0, 0, 0);
                    }
                    let Ok(len) = writer.finish() else {
                        return (0, 0, 0);
                    };
                    send(&self.bundle[..len]);
                    return (1, packets, len as u64);
                }
                let header = Header {
                    timestamp: now_us,
                    seq: out.seq,
                    frames: QUANTUM as u16,
                    rate: SampleRate::Hz48000,
                    format: SampleFormat::Pcm16,
                    channels_in: 2,
                    channels_out: 0,
                };
                let ext = Extension {
                    stream_id: MIX_STREAM,
                    codec: CODEC_PCM,
                };
                let planar: [&[f32]; 2] = [&self.out_l, &self.out_r];
                let Ok(n) = encode(&header, Some(&ext), &planar, &mut self.packet) else {
                    return (0, 0, 0);
                };
                out.seq = out.seq.wrapping_add(1);
                let Ok(mut writer) = BundleWriter::new(&mut self.bundle) else {
                    return (0, 0, 0);
                };
                if writer.push(&self.packet[..n]).is_err() {
                    return (0, 0, 0);
                }
                let Ok(len) = writer.finish() else {
                    return (0, 0, 0);
                };
                send(&self.bundle[..len]);
                (1, 1, len as u64)
            }
            ClientKind::JackTrip(f) => {
                let frames = usize::from(f.frames);
                let at = out.filled;
                out.acc_l[at..at + QUANTUM].copy_from_slice(&self.out_l);
                out.acc_r[at..at + QUANTUM].copy_from_slice(&self.out_r);
                out.filled += QUANTUM;
                let format = if f.bits == 24 {
                    SampleFormat::Pcm24
                } else {
                    SampleFormat::Pcm16
                };
                let (mut messages, mut bytes) = (0, 0);
                let mut start = 0;
                while out.filled - start >= frames {
                    let header = Header {
                        timestamp: now_us,
                        seq: out.seq,
                        frames: f.frames,
                        rate: SampleRate::Hz48000,
                        format,
                        channels_in: f.channels,
                        channels_out: 0,
                    };
                    let l = &out.acc_l[start..start + frames];
                    let r = &out.acc_r[start..start + frames];
                    let result = if f.channels == 1 {
                        let mono = &mut out.mono[..frames];
                        for ((m, a), b) in mono.iter_mut().zip(l).zip(r) {
                            *m = 0.5 * (a + b);
                        }
                        encode(&header, None, &[&out.mono[..frames]], &mut self.packet)
                    } else {
                        encode(&header, None, &[l, r], &mut self.packet)
                    };
                    start += frames;
                    if let Ok(n) = result {
                        out.seq = out.seq.wrapping_add(1);
                        send(&self.packet[..n]);
                        messages += 1;
                        bytes += n as u64;
                    }
                }
                out.acc_l.copy_within(start..out.filled, 0);
                out.acc_r.copy_within(start..out.filled, 0);
                out.filled -= start;
                (messages, messages, bytes)
            }
        }
    }
}

/// One listener's outgoing mix state: its sequence numbers; for a JackTrip client whose block
/// is not 128 frames, the frames not yet sent; for a browser that takes Opus, its stream.
pub struct Output {
    seq: u16,
    layer: Layer,
    opus: Option<Box<OpusFramer>>,
    /// Its mix's Opus frames: encoded, and refused by the encoder (never expected).
    pub opus_frames: Pushed,
    acc_l: [f32; MAX_FRAMES + QUANTUM],
    acc_r: [f32; MAX_FRAMES + QUANTUM],
    mono: [f32; MAX_FRAMES],
    filled: usize,
}

impl Output {
    /// A fresh output, sequence numbers from 0.
    pub fn new() -> Output {
        Output {
            seq: 0,
            layer: Layer::AsSent,
            opus: None,
            opus_frames: Pushed::default(),
            acc_l: [0.0; MAX_FRAMES + QUANTUM],
            acc_r: [0.0; MAX_FRAMES + QUANTUM],
            mono: [0.0; MAX_FRAMES],
            filled: 0,
        }
    }

    /// The format of this browser listener's mix: PCM16 ([`Layer::AsSent`]: the mix as the
    /// hub makes it) or an Opus layer, whose stream is made here. Allocates when it changes:
    /// the control path.
    pub fn set_layer(&mut self, layer: Layer) -> Result<(), OpusError> {
        if layer != self.layer {
            self.opus = layers::framer(layer).transpose()?;
            self.layer = layer;
        }
        Ok(())
    }

    /// The mix starts afresh (the room went back to mix mode): nothing gathered is kept.
    pub fn restart(&mut self) {
        if let Some(f) = self.opus.as_deref_mut() {
            f.reset();
        }
    }
}
