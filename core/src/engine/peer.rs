//! One remote peer of the engine: its jitter buffer, drift correction and channel strip, the
//! latency histograms kept per peer, and the per-quantum playout that takes its audio from the
//! jitter buffer to the bus.

use crate::codec::Decoder;
use crate::continuity::Continuity;
use crate::drift::DriftController;
use crate::jitter::{JitterBuffer, JitterConfig, JitterCounters, PopKind, PushOutcome};
use crate::latency::Histogram;
use crate::mix::Strip;
use crate::packet;
use crate::resample::Resampler;

use super::{
    EngineConfig, DELIVERY_SLACK_US, JITTER_CAPACITY_FRAMES, LOCAL_RATE, MAX_DELIVERY_US,
    MAX_ONE_WAY_US, QUANTUM, STAGING_FRAMES,
};

/// One remote peer: its jitter buffer, drift correction and channel strip.
///
/// Built with [`Peer::new`] off the render path (it allocates its buffers there).
pub struct Peer {
    pub(crate) jitter: JitterBuffer,
    pub(crate) resampler: Resampler,
    pub(crate) drift: DriftController,
    pub(crate) strip: Strip,
    pub(crate) malformed: u64,
    /// Jitter-buffer wait per packet played, µs.
    pub(crate) wait: Histogram,
    /// Network one-way delay per packet, µs.
    pub(crate) network: Histogram,
    /// Arrival at the net side to the engine, per packet, µs.
    pub(crate) delivery: Histogram,
    /// Our send queue towards this peer, per packet sent, µs.
    pub(crate) send_queue: Histogram,
    /// Sending to playout (network + delivery + wait of the same packet), µs.
    pub(crate) transit: Histogram,
    /// Added one-way latency per packet (see [`crate::latency::STAGE_ONE_WAY`]), µs.
    pub(crate) one_way: Histogram,
    /// The last send-queue time reported towards this peer, µs.
    pub(super) last_send_queue_us: f64,
    /// Our wall clock − this peer's, µs (`None`: unknown, no one-way delay is recorded).
    pub(crate) clock_offset_us: Option<i64>,
    /// The peer's missed device callbacks, from its packets' send stamps.
    pub(crate) sender_gaps: Continuity,
    /// The last quantum as it left the jitter buffer and drift correction, before the strip
    /// (pre-fader): what a recording keeps of this peer. Written only while recording.
    pub(super) stem_l: [f32; QUANTUM],
    pub(super) stem_r: [f32; QUANTUM],
    /// The decoder of the peer's compressed frames (none: only PCM is taken from it).
    pub(crate) decoder: Option<Box<dyn Decoder>>,
}

impl Peer {
    /// Builds a peer with all of its buffers. Allocates: call it off the render path.
    pub fn new(config: &EngineConfig) -> Box<Peer> {
        Box::new(Peer {
            jitter: JitterBuffer::new(JitterConfig {
                quantum: QUANTUM as u32,
                local_rate: LOCAL_RATE,
                capacity_frames: JITTER_CAPACITY_FRAMES,
                mode: config.buffer,
            }),
            resampler: Resampler::new(STAGING_FRAMES),
            drift: DriftController::new(QUANTUM as u32, LOCAL_RATE),
            strip: Strip::new(),
            malformed: 0,
            wait: Histogram::new(),
            network: Histogram::new(),
            delivery: Histogram::new(),
            send_queue: Histogram::new(),
            transit: Histogram::new(),
            one_way: Histogram::new(),
            last_send_queue_us: 0.0,
            clock_offset_us: None,
            sender_gaps: Continuity::new(),
            stem_l: [0.0; QUANTUM],
            stem_r: [0.0; QUANTUM],
            decoder: None,
        })
    }

    /// Gives the peer a decoder for compressed (Opus) frames; without one, its Opus packets are
    /// refused as an unsupported codec. Set-up, off the render path (the decoder's state is
    /// allocated by whoever made it).
    pub fn set_decoder(&mut self, decoder: Box<dyn Decoder>) {
        self.decoder = Some(decoder);
    }

    /// Whether the peer can take packets of `pkt`'s codec.
    pub(crate) fn takes(&self, pkt: &packet::Packet<'_>) -> bool {
        !pkt.is_opus() || self.decoder.is_some()
    }

    /// The peer's channel strip (gain, pan, mute, solo, meters).
    pub fn strip(&self) -> &Strip {
        &self.strip
    }

    /// Jitter-buffer wait of the packets played so far, µs.
    pub fn jitter_wait(&self) -> &Histogram {
        &self.wait
    }

    /// Network one-way delay of the packets received with a known clock offset, µs.
    pub fn network_one_way(&self) -> &Histogram {
        &self.network
    }

    /// The clock offset in force (our wall clock − the peer's), µs.
    pub fn clock_offset_us(&self) -> Option<i64> {
        self.clock_offset_us
    }

    /// Delivery time of the packets received, µs (arrival at the net side to the engine).
    pub fn delivery(&self) -> &Histogram {
        &self.delivery
    }

    /// Our send-queue time towards this peer, µs, per packet sent.
    pub fn send_queue(&self) -> &Histogram {
        &self.send_queue
    }

    /// Transit of the packets played whose network delay was known, µs: from the sender handing
    /// a packet to its data channel to the local frame at which it started to play.
    pub fn transit(&self) -> &Histogram {
        &self.transit
    }

    /// The added one-way latency of the packets played whose transit is known, µs: everything
    /// between the sender's and our devices (their own latency aside).
    pub fn one_way(&self) -> &Histogram {
        &self.one_way
    }

    /// The jitter buffer's counters (received, late, concealed, underruns ...).
    pub fn jitter_counters(&self) -> JitterCounters {
        self.jitter.counters()
    }

    /// Places one parsed packet in this peer's jitter buffer, for a host that plays its peers
    /// itself (a hub's mix) instead of through the [`Engine`](super::Engine): `now` is the local
    /// frame at which the current quantum starts. Real-time safe.
    pub fn push(&mut self, pkt: &packet::Packet<'_>, now: u64) -> PushOutcome {
        if !self.takes(pkt) {
            self.malformed += 1;
            return PushOutcome::Rejected;
        }
        let outcome = self.jitter.push_noted(pkt, now, f64::NAN);
        self.note_send_stamp(pkt, outcome);
        outcome
    }

    /// Plays one quantum of this peer, the quantum starting at local frame `now`, into
    /// `out_l`/`out_r` (overwritten) before its strip: what left the jitter buffer, concealment
    /// and drift correction. The host mixes it itself. Real-time safe.
    pub fn pull(&mut self, now: u64, out_l: &mut [f32; QUANTUM], out_r: &mut [f32; QUANTUM]) {
        let mut bus_l = [0.0; QUANTUM];
        let mut bus_r = [0.0; QUANTUM];
        self.play(now, &mut bus_l, &mut bus_r, out_l, out_r, false, true);
    }

    /// Records the network one-way delay of a packet stamped `timestamp` (the sender's wall
    /// clock, µs) that arrived at `arrival_us` (ours, low 32 bits), and returns it (µs) when the
    /// clock offset is known and the result is in range.
    pub(super) fn record_one_way(&mut self, timestamp: u64, arrival_us: u32) -> Option<f64> {
        let offset = self.clock_offset_us?;
        let raw = i64::from(arrival_us.wrapping_sub(timestamp as u32) as i32);
        let one_way = raw.saturating_sub(offset);
        if (0..=MAX_ONE_WAY_US).contains(&one_way) {
            self.network.record(one_way as f64);
            Some(one_way as f64)
        } else {
            self.network.reject();
            None
        }
    }

    /// Feeds the sender's continuity watch with a packet's send stamp (µs on the sender's wall
    /// clock) against its place in the stream; a restarted stream restarts the watch.
    pub(super) fn note_send_stamp(&mut self, pkt: &packet::Packet<'_>, outcome: PushOutcome) {
        match outcome {
            PushOutcome::Started | PushOutcome::FormatReset => self.sender_gaps.restart(),
            PushOutcome::Stored | PushOutcome::Late => {}
            _ => return,
        }
        let (Some(ext), true) = (self.jitter.last_pushed(), pkt.header.timestamp != 0) else {
            return;
        };
        let rate = f64::from(self.jitter.sender_rate().max(1));
        let audio_us = ext as f64 * self.jitter.block_frames() as f64 * 1e6 / rate;
        self.sender_gaps
            .observe(audio_us, pkt.header.timestamp as f64);
    }

    /// Records the delivery time of a packet that arrived at `arrival_us` (net side's wall
    /// clock, low 32 bits) and reached the engine in a quantum that started at `wall_us` (the
    /// host's wall clock), and returns it (µs) when in range.
    pub(super) fn record_delivery(&mut self, arrival_us: u32, wall_us: f64) -> Option<f64> {
        // Both are µs since 1970: compare the low 32 bits, wrapping.
        let low = (wall_us.rem_euclid(4_294_967_296.0)) as u32;
        let raw = f64::from(low.wrapping_sub(arrival_us) as i32) + wall_us.fract();
        if (-DELIVERY_SLACK_US..=MAX_DELIVERY_US).contains(&raw) {
            let us = raw.max(0.0);
            self.delivery.record(us);
            Some(us)
        } else {
            self.delivery.reject();
            None
        }
    }

    /// Plays one quantum of this peer, the quantum starting at local frame `now`, into the bus `bus_l`/`bus_r` (added, through the strip,
    /// which meters it), `audible` being the strip's [`solo_audible`](crate::mix::solo_audible) state. A 48 kHz peer is
    /// interpolated, metered and mixed in one pass; a peer nobody hears is metered from its
    /// staged input without interpolating; anything else (44.1 kHz peers, a short staging) goes
    /// through `tmp_l`/`tmp_r` (scratch, as long as the bus). With `record`, every peer takes
    /// that last path and its pre-fader signal is kept in its stem. Real-time safe.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn play(
        &mut self,
        now: u64,
        bus_l: &mut [f32],
        bus_r: &mut [f32],
        tmp_l: &mut [f32],
        tmp_r: &mut [f32],
        audible: bool,
        record: bool,
    ) {
        let frames = bus_l.len().min(bus_r.len());
        let block = self.jitter.block_frames();
        if block == 0 {
            // Nothing has arrived yet: the peer is silent.
            tmp_l.fill(0.0);
            tmp_r.fill(0.0);
            if record {
                self.stem_l.fill(0.0);
                self.stem_r.fill(0.0);
            }
            self.drift.reset();
            self.strip.mix_into(tmp_l, tmp_r, bus_l, bus_r, audible);
            return;
        }
        let nominal = f64::from(self.jitter.sender_rate()) / f64::from(LOCAL_RATE);
        let fill = f64::from(self.jitter.buffered_frames()) + self.resampler.buffered_frames();
        let target = f64::from(self.jitter.target_frames());
        let ratio = nominal * self.drift.update(fill, target);
        let mut need = self.resampler.frames_needed(frames, ratio);
        let mut playing = true;
        while need > 0 {
            // What the resampler holds ahead of the output plays before this block does.
            let ahead = self.resampler.buffered_frames();
            let (l, r) = self.resampler.append_slots(block);
            if l.len() < block {
                break;
            }
            let pop = self
                .jitter
                .pop_block_with(l, r, self.decoder.as_deref_mut());
            if let Some((arrival, sent)) = self.jitter.take_played() {
                let ahead_local = if ratio > 0.0 { ahead / ratio } else { ahead };
                let starts = now as f64 + ahead_local.max(0.0);
                self.wait
                    .record((starts - arrival as f64) * 1_000_000.0 / f64::from(LOCAL_RATE));
                // The note is the local frame at which the sender handed the packet over.
                if sent.is_finite() {
                    let transit = (starts - sent) * 1_000_000.0 / f64::from(LOCAL_RATE);
                    self.transit.record(transit);
                    // The block's first frame waited a block's duration to be sent; our send
                    // queue towards the peer stands in for theirs towards us.
                    let block_us =
                        block as f64 * 1_000_000.0 / f64::from(self.jitter.sender_rate());
                    self.one_way
                        .record(transit + block_us + self.last_send_queue_us);
                }
            }
            if pop.kind == PopKind::Silence {
                playing = false;
            }
            if pop.frames == 0 {
                break;
            }
            need = need.saturating_sub(pop.frames);
            let excess = self.jitter.take_start_excess();
            if excess > 0 {
                // Playout started above its target by less than a block: drop that much (the
                // block is silent there and fades in after it) so that it starts exactly at
                // the target.
                self.resampler.skip(excess, 1.0);
                need = self.resampler.frames_needed(frames, ratio);
            }
        }
        if !playing {
            // Prefilling or idle: no drift to correct yet.
            self.drift.reset();
        }
        let strip = &mut self.strip;
        if record {
            let (tmp_l, tmp_r) = (&mut tmp_l[..frames], &mut tmp_r[..frames]);
            self.resampler.process(ratio, tmp_l, tmp_r);
            self.stem_l[..frames].copy_from_slice(tmp_l);
            self.stem_r[..frames].copy_from_slice(tmp_r);
            strip.mix_into(tmp_l, tmp_r, bus_l, bus_r, audible);
            return;
        }
        if strip.is_silent(audible) {
            let (l, r) = self.resampler.staged(frames);
            strip.mix_into(l, r, bus_l, bus_r, audible);
            self.resampler.skip(frames, ratio);
            return;
        }
        let fused = self.resampler.interpolate_with(ratio, frames, |groups| {
            strip.mix_groups_into(groups, bus_l, bus_r, audible)
        });
        if fused.is_none() {
            let (tmp_l, tmp_r) = (&mut tmp_l[..frames], &mut tmp_r[..frames]);
            self.resampler.process(ratio, tmp_l, tmp_r);
            strip.mix_into(tmp_l, tmp_r, bus_l, bus_r, audible);
        }
    }
}
