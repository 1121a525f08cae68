//! The stats block: a fixed layout of `f64` values that the engine publishes and the UI reads on
//! its own clock.
//!
//! The engine fills a `[f64]` of [`BLOCK_LEN`] values (in WASM linear memory); the worklet copies
//! it into a `SharedArrayBuffer` every few quanta. Readers use the sequence word as a seqlock: it
//! is odd while a copy is being written and even when the block is consistent, so a reader copies
//! the block, checks that the word was even and unchanged, and retries otherwise.
//!
//! Every value is an `f64` so that counters stay exact up to 2^53 and TypeScript reads one
//! `Float64Array`. The same constants live in `app/src/audio/stats.ts`; a test in
//! `stats/tests.rs` reads that file and checks they agree.
//!
//! [`Engine::write_stats`], at the end of this file, fills the block from an engine.
//!
//! ```text
//! index                     value
//! 0                         sequence (seqlock: odd while writing)
//! 1..GLOBAL_LEN             global values (G_* below)
//! GLOBAL_LEN + slot*PEER_LEN + P_*   per-peer values for peer slot `slot`
//! ```

use crate::engine::{Engine, LOCAL_RATE};

/// Values before the first peer row.
pub const GLOBAL_LEN: usize = 64;
/// Values per peer row.
pub const PEER_LEN: usize = 48;
/// Peer slots the block has rows for.
pub const MAX_PEERS: usize = 256;
/// Total `f64` values in the block.
pub const BLOCK_LEN: usize = GLOBAL_LEN + MAX_PEERS * PEER_LEN;

/// Seqlock word: odd while the block is being written.
pub const G_SEQUENCE: usize = 0;
/// Quanta rendered since the engine started.
pub const G_QUANTA: usize = 1;
/// Local time of the last render, in frames.
pub const G_NOW_FRAMES: usize = 2;
/// Peers currently in the session.
pub const G_PEERS: usize = 3;
/// Records dropped because their tag named no peer.
pub const G_UNKNOWN_PEER: usize = 4;
/// Records dropped because the packet did not parse.
pub const G_MALFORMED: usize = 5;
/// Inbound ring records read.
pub const G_RECORDS_READ: usize = 6;
/// Times the inbound ring was found corrupt and resynchronised.
pub const G_RING_RESYNCS: usize = 7;
/// Master peak, left (linear).
pub const G_MASTER_PEAK_L: usize = 8;
/// Master peak, right (linear).
pub const G_MASTER_PEAK_R: usize = 9;
/// Master RMS, left (linear).
pub const G_MASTER_RMS_L: usize = 10;
/// Master RMS, right (linear).
pub const G_MASTER_RMS_R: usize = 11;
/// Limiter gain reduction in dB (0 when transparent).
pub const G_LIMITER_DB: usize = 12;
/// Packets captured and queued for sending.
pub const G_PACKETS_SENT: usize = 13;
/// Outgoing packets dropped because the outbound ring was full.
pub const G_SEND_DROPPED: usize = 14;
/// Local input peak (linear).
pub const G_INPUT_PEAK: usize = 15;
/// Local input RMS (linear).
pub const G_INPUT_RMS: usize = 16;
/// Non-finite master blocks that were silenced.
pub const G_NONFINITE: usize = 17;
/// Total underruns over all peers.
pub const G_UNDERRUNS: usize = 18;
/// Capture interval (between consecutive input quanta reaching the engine, host wall clock):
/// median, ms. The capture fields summarise the histogram of [`crate::latency`]; they are 0
/// while its count is 0.
pub const G_CAPTURE_P50_MS: usize = 19;
/// Capture interval, 95th percentile, ms.
pub const G_CAPTURE_P95_MS: usize = 20;
/// Capture interval, 99th percentile, ms.
pub const G_CAPTURE_P99_MS: usize = 21;
/// Capture interval, maximum, ms.
pub const G_CAPTURE_MAX_MS: usize = 22;
/// Capture interval, mean, ms.
pub const G_CAPTURE_MEAN_MS: usize = 23;
/// Capture intervals recorded.
pub const G_CAPTURE_COUNT: usize = 24;
/// Round-trip probe ([`crate::probe`]): 0 idle, 1 running, 2 done.
pub const G_PROBE_STATE: usize = 25;
/// The slot the probe measures (or measured).
pub const G_PROBE_SLOT: usize = 26;
/// Clicks the probe was asked to send.
pub const G_PROBE_CLICKS: usize = 27;
/// Clicks sent so far.
pub const G_PROBE_SENT: usize = 28;
/// Clicks heard back so far.
pub const G_PROBE_HEARD: usize = 29;
/// The slot whose stream we echo back as our outgoing audio, or −1 when not echoing.
pub const G_ECHO_SLOT: usize = 30;
/// First of [`crate::probe::MAX_CLICKS`] values: each sent click's round trip, ms on the local
/// audio clock (NaN: lost); values past the clicks sent are NaN.
pub const G_PROBE_RESULTS_AT: usize = 32;
/// Our own audio device's missed callbacks ([`crate::continuity`]): gaps seen.
pub const G_CAPTURE_GAPS: usize = 48;
/// Their total length, ms.
pub const G_CAPTURE_GAP_MS: usize = 49;
/// Stalls of this machine: every peer's packets stopped and came back together
/// ([`crate::jitter::stall`]).
pub const G_LOCAL_STALLS: usize = 50;

/// 1 when the slot holds a peer, else 0.
pub const P_ACTIVE: usize = 0;
/// Unique packets that arrived (in time or late).
pub const P_RECEIVED: usize = 1;
/// Packets that never arrived (expected − received).
pub const P_LOST: usize = 2;
/// Packets that arrived after their slot was played.
pub const P_LATE: usize = 3;
/// Copies of packets already received.
pub const P_DUPLICATES: usize = 4;
/// Blocks concealed.
pub const P_CONCEALED: usize = 5;
/// Underrun events (buffer empty while the stream was active).
pub const P_UNDERRUNS: usize = 6;
/// Packets dropped for overflow.
pub const P_DISCARDED: usize = 7;
/// Packets for this peer that did not parse.
pub const P_MALFORMED: usize = 8;
/// Frames buffered (jitter buffer plus resampler staging).
pub const P_BUFFERED_FRAMES: usize = 9;
/// Target buffer depth in frames.
pub const P_TARGET_FRAMES: usize = 10;
/// The sender's clock offset against ours in ppm, as the drift loop estimates it.
pub const P_DRIFT_PPM: usize = 11;
/// Peak, left (linear, pre-fader).
pub const P_PEAK_L: usize = 12;
/// Peak, right (linear, pre-fader).
pub const P_PEAK_R: usize = 13;
/// RMS, left (linear, pre-fader).
pub const P_RMS_L: usize = 14;
/// RMS, right (linear, pre-fader).
pub const P_RMS_R: usize = 15;
// A meter reading is written as one run of four ([`crate::mix::Meter::to_f64s`]).
const _: () = assert!(P_RMS_R == P_PEAK_L + 3 && G_MASTER_RMS_R == G_MASTER_PEAK_L + 3);
/// Sender's block size in frames (0 before the first packet).
pub const P_BLOCK_FRAMES: usize = 16;
/// Sender's sample rate in Hz.
pub const P_SAMPLE_RATE: usize = 17;
/// Sender's channel count.
pub const P_CHANNELS: usize = 18;
/// Sender's bit resolution.
pub const P_BITS: usize = 19;
/// Jitter estimate in frames.
pub const P_JITTER_FRAMES: usize = 20;
/// Stream resets (format changes, long gaps).
pub const P_RESETS: usize = 21;
/// Jitter-buffer wait (arrival to the local frame its first frame plays), median, ms. The
/// latency fields summarise the histograms of [`crate::latency`] since the peer joined (or the
/// last reset); they are 0 while their count is 0.
pub const P_WAIT_P50_MS: usize = 22;
/// Jitter-buffer wait, 95th percentile, ms.
pub const P_WAIT_P95_MS: usize = 23;
/// Jitter-buffer wait, 99th percentile, ms.
pub const P_WAIT_P99_MS: usize = 24;
/// Jitter-buffer wait, maximum, ms.
pub const P_WAIT_MAX_MS: usize = 25;
/// Jitter-buffer wait, mean, ms.
pub const P_WAIT_MEAN_MS: usize = 26;
/// Packets whose jitter-buffer wait was recorded.
pub const P_WAIT_COUNT: usize = 27;
/// Network one-way delay (sender's wall clock at sending to ours at arrival, corrected by the
/// clock offset), median, ms.
pub const P_NET_P50_MS: usize = 28;
/// Network one-way delay, 95th percentile, ms.
pub const P_NET_P95_MS: usize = 29;
/// Network one-way delay, 99th percentile, ms.
pub const P_NET_P99_MS: usize = 30;
/// Network one-way delay, maximum, ms.
pub const P_NET_MAX_MS: usize = 31;
/// Network one-way delay, mean, ms.
pub const P_NET_MEAN_MS: usize = 32;
/// Packets whose one-way delay was recorded (none until the clock offset is known).
pub const P_NET_COUNT: usize = 33;
/// One-way delays measured outside 0..10 s (clock offset wrong or stale), not recorded.
pub const P_NET_OUT_OF_RANGE: usize = 34;
/// The clock offset in force (our wall clock − the peer's), µs; NaN while unknown.
pub const P_CLOCK_OFFSET_US: usize = 35;
/// Underruns that waited for a late packet (the rest of [`P_UNDERRUNS`] ended with a gap or a
/// local stall).
pub const P_LATE_UNDERRUNS: usize = 36;
/// Underruns ended by packets a stall of this machine held back.
pub const P_STALL_UNDERRUNS: usize = 37;
/// The peer's own missed device callbacks, seen in its packets' send stamps
/// ([`crate::continuity`]): every listener hears them at the same moment.
pub const P_SENDER_GAPS: usize = 38;
/// Their total length, ms.
pub const P_SENDER_GAP_MS: usize = 39;
/// Blocks synthesized without passing a sequence number (underrun waits, depth raised).
pub const P_STRETCHED: usize = 40;
/// The oracle ([`crate::jitter::JitterBuffer::oracle_frames`]): the smallest fixed depth that
/// would have played every packet that arrived in the last two minutes, frames.
pub const P_ORACLE_FRAMES: usize = 41;
/// Compressed frames played that their decoder refused (or that had no decoder): each was
/// concealed instead. Counted in [`P_RECEIVED`], not in [`P_CONCEALED`].
pub const P_UNDECODABLE: usize = 42;
/// Compressed frames lost on the way but played from the copy the next packet carried:
/// counted in [`P_LOST`], not in [`P_CONCEALED`].
pub const P_RECOVERED: usize = 43;

/// Index of value `field` of peer `slot`.
pub const fn peer_index(slot: usize, field: usize) -> usize {
    GLOBAL_LEN + slot * PEER_LEN + field
}

/// Writing the block: the engine's figures in this layout.
impl Engine {
    /// Values of the stats block this engine writes: the globals and one row per slot.
    pub fn stats_len(&self) -> usize {
        GLOBAL_LEN + self.peers.len() * PEER_LEN
    }

    /// Fills the first [`Engine::stats_len`] values of a stats block (layout in
    /// [`crate::stats`]) with the current figures, except the sequence word, which the publisher
    /// owns. Rows past this engine's slots are left alone. Real-time safe.
    pub fn write_stats(&self, out: &mut [f64]) {
        if out.len() < self.stats_len() {
            return;
        }
        let c = &self.counters;
        let m = self.master.meter();
        let input = self.capture.meter();
        let mut underruns = 0u64;
        for (slot, place) in self.peers.iter().enumerate() {
            let row = &mut out[peer_index(slot, 0)..peer_index(slot, 0) + PEER_LEN];
            row.fill(0.0);
            let Some(peer) = place else { continue };
            let j = peer.jitter.counters();
            let meter = peer.strip.meter();
            underruns += j.underruns;
            row[P_ACTIVE] = 1.0;
            row[P_RECEIVED] = j.received as f64;
            row[P_LOST] = j.lost as f64;
            row[P_LATE] = j.late as f64;
            row[P_DUPLICATES] = j.duplicates as f64;
            row[P_CONCEALED] = j.concealed as f64;
            row[P_UNDERRUNS] = j.underruns as f64;
            row[P_DISCARDED] = j.discarded as f64;
            row[P_MALFORMED] = peer.malformed as f64;
            row[P_BUFFERED_FRAMES] =
                f64::from(peer.jitter.buffered_frames()) + peer.resampler.buffered_frames();
            row[P_TARGET_FRAMES] = f64::from(peer.jitter.target_frames());
            row[P_DRIFT_PPM] = peer.drift.offset_ppm();
            row[P_PEAK_L..=P_RMS_R].copy_from_slice(&meter.to_f64s());
            row[P_BLOCK_FRAMES] = peer.jitter.block_frames() as f64;
            row[P_SAMPLE_RATE] = f64::from(peer.jitter.sender_rate());
            row[P_CHANNELS] = f64::from(peer.jitter.channels());
            row[P_BITS] = f64::from(peer.jitter.bits());
            row[P_JITTER_FRAMES] = f64::from(peer.jitter.jitter_frames());
            row[P_RESETS] = j.resets as f64;
            row[P_WAIT_P50_MS..=P_WAIT_COUNT].copy_from_slice(&peer.wait.summary_ms());
            row[P_NET_P50_MS..=P_NET_COUNT].copy_from_slice(&peer.network.summary_ms());
            row[P_NET_OUT_OF_RANGE] = peer.network.rejected() as f64;
            row[P_CLOCK_OFFSET_US] = peer.clock_offset_us.map_or(f64::NAN, |o| o as f64);
            row[P_LATE_UNDERRUNS] = j.late_underruns as f64;
            row[P_STALL_UNDERRUNS] = j.stall_underruns as f64;
            row[P_SENDER_GAPS] = peer.sender_gaps.gaps() as f64;
            row[P_SENDER_GAP_MS] = peer.sender_gaps.gap_ms();
            row[P_STRETCHED] = j.stretched as f64;
            row[P_ORACLE_FRAMES] = f64::from(peer.jitter.oracle_frames(peer.drift.offset_ppm()));
            row[P_UNDECODABLE] = j.undecodable as f64;
            row[P_RECOVERED] = j.recovered as f64;
        }
        out[G_CAPTURE_P50_MS..=G_CAPTURE_COUNT]
            .copy_from_slice(&self.capture_interval.summary_ms());
        out[G_QUANTA] = c.quanta as f64;
        out[G_NOW_FRAMES] = self.now as f64;
        out[G_PEERS] = self.active as f64;
        out[G_UNKNOWN_PEER] = c.unknown_peer as f64;
        out[G_MALFORMED] = c.malformed as f64;
        out[G_RECORDS_READ] = c.records_read as f64;
        out[G_RING_RESYNCS] = c.ring_resyncs as f64;
        out[G_MASTER_PEAK_L..=G_MASTER_RMS_R].copy_from_slice(&m.to_f64s());
        out[G_LIMITER_DB] = f64::from(self.master.gain_reduction_db());
        out[G_PACKETS_SENT] = c.packets_sent as f64;
        out[G_SEND_DROPPED] = c.send_dropped as f64;
        out[G_INPUT_PEAK] = f64::from(input.0);
        out[G_INPUT_RMS] = f64::from(input.1);
        out[G_NONFINITE] = self.master.nonfinite_blocks() as f64;
        out[G_UNDERRUNS] = underruns as f64;
        out[G_CAPTURE_GAPS] = self.local_gaps.gaps() as f64;
        out[G_CAPTURE_GAP_MS] = self.local_gaps.gap_ms();
        out[G_LOCAL_STALLS] = self.local_stall.stalls() as f64;
        let p = &self.probe;
        out[G_PROBE_STATE] = p.state().code();
        out[G_PROBE_SLOT] = p.slot() as f64;
        out[G_PROBE_CLICKS] = p.clicks() as f64;
        out[G_PROBE_SENT] = p.sent() as f64;
        out[G_PROBE_HEARD] = p.heard() as f64;
        out[G_ECHO_SLOT] = self.echoing().map_or(-1.0, |s| s as f64);
        let results = &mut out[G_PROBE_RESULTS_AT..G_PROBE_RESULTS_AT + crate::probe::MAX_CLICKS];
        results.fill(f64::NAN);
        for (o, frames) in results.iter_mut().zip(p.results()) {
            *o = frames * 1000.0 / f64::from(LOCAL_RATE);
        }
    }
}

#[cfg(test)]
mod tests;
