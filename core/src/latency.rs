//! Latency histograms: fixed-size, log-spaced, allocation-free distributions of the delays a
//! packet meets on its way from a peer's microphone to our speaker, and the shared block that
//! carries them to the UI.
//!
//! # Bins
//!
//! A [`Histogram`] counts values in microseconds into [`BINS`] bins held inline (no heap):
//!
//! ```text
//! bin 0                 underflow   [0, 10 µs)
//! bin b, 1..=160        regular     [edge(b − 1), edge(b))
//! bin 161               overflow    [edge(160), ∞)          edge(160) ≈ 10.49 s
//! edge(k) = 10 µs × 2^(k / 8)
//! ```
//!
//! Eight bins per octave: each regular bin is 2^(1/8) ≈ 1.0905 times as wide as the one below,
//! so every bin spans about 9 % of its values. [`bin_edge_us`] is the one formula; the TypeScript
//! reader (`app/src/audio/latency.ts`) computes the same edges, and both sides' tests check the
//! same known values.
//!
//! # Quantiles and their error
//!
//! [`Histogram::quantile`] finds the bin in which the cumulative count reaches `q × count` and
//! interpolates linearly inside it, taking the bins that hold the smallest and the largest value
//! seen to end there (so the overflow bin spans its lower edge..the maximum). The sample
//! of rank ⌈q·n⌉ lies in that same bin, so the estimate is off by less than one bin width:
//!
//! - for values of 10 µs..10.49 s, by less than 2^(1/8) − 1 ≈ **9.05 % of the true value**
//!   ([`MAX_RELATIVE_ERROR`]); evenly spread values come out much closer, since the
//!   interpolation assumes exactly that;
//! - below 10 µs, by less than 10 µs; above 10.49 s, by less than the span up to the maximum.
//!
//! Count, mean, minimum and maximum are exact.
//!
//! # The histogram block
//!
//! Like the stats block ([`crate::stats`]), a fixed layout of `f64` that the engine fills with
//! [`crate::engine::Engine::write_histograms`] and the worklet publishes about once a second into
//! a `SharedArrayBuffer` under the same seqlock (index 0 odd while it is being written). Times in
//! it are milliseconds.
//!
//! ```text
//! index                                   value
//! 0                                       sequence (seqlock: odd while writing)
//! 1..HB_GLOBAL_LEN                        HB_* globals
//! CAPTURE_AT .. + HIST_LEN                the capture-interval histogram
//! hist_index(slot, stage) .. + HIST_LEN   stage `stage` (STAGE_*) of peer slot `slot`
//! ```
//!
//! One histogram record is [`HIST_LEN`] values: the `H_*` summary (count, mean, min, max,
//! p50/p95/p99, rejected) followed by the [`BINS`] counts from index [`H_BINS_AT`]. An empty
//! histogram has count 0 and zeros for its times.
//!
//! Everything here is real-time safe: no allocation, no lock, no panic on any input.

use crate::engine::Engine;

/// Lower edge of the first regular bin, microseconds.
pub const MIN_US: f64 = 10.0;
/// Regular bins per doubling of the value.
pub const BINS_PER_OCTAVE: usize = 8;
/// Regular bins: 20 octaves, 10 µs .. about 10.49 s.
pub const REGULAR_BINS: usize = 160;
/// All bins: underflow, the regular ones, overflow.
pub const BINS: usize = REGULAR_BINS + 2;
/// Index of the underflow bin (values below [`MIN_US`]).
pub const UNDERFLOW: usize = 0;
/// Index of the overflow bin (values from `bin_edge_us(REGULAR_BINS)` up).
pub const OVERFLOW: usize = BINS - 1;
/// Largest relative error of a quantile inside the regular range: 2^(1/8) − 1.
pub const MAX_RELATIVE_ERROR: f64 = 0.090_507_732_665_257_66;

/// Edge `k` (0..=[`REGULAR_BINS`]) of the regular bins in microseconds: `10 × 2^(k/8)`. Regular
/// bin `b` (1..=160) spans `[bin_edge_us(b − 1), bin_edge_us(b))`.
pub fn bin_edge_us(k: usize) -> f64 {
    MIN_US * (k as f64 / BINS_PER_OCTAVE as f64).exp2()
}

/// The span `[low, high)` of bin `b` in microseconds; the overflow bin reaches to infinity.
pub fn bin_bounds_us(b: usize) -> (f64, f64) {
    match b {
        UNDERFLOW => (0.0, MIN_US),
        b if b >= OVERFLOW => (bin_edge_us(REGULAR_BINS), f64::INFINITY),
        b => (bin_edge_us(b - 1), bin_edge_us(b)),
    }
}

/// The bin a value (µs, finite, not negative) falls in.
pub fn bin_of(us: f64) -> usize {
    if us.is_nan() || us < MIN_US {
        return UNDERFLOW;
    }
    if us >= bin_edge_us(REGULAR_BINS) {
        return OVERFLOW;
    }
    let guess = ((us / MIN_US).log2() * BINS_PER_OCTAVE as f64).floor();
    let mut k = (guess.max(0.0) as usize).min(REGULAR_BINS - 1);
    // `log2` may round across an edge: settle on the edge formula itself.
    if k > 0 && us < bin_edge_us(k) {
        k -= 1;
    } else if k + 1 < REGULAR_BINS && us >= bin_edge_us(k + 1) {
        k += 1;
    }
    k + 1
}

/// A fixed-size latency histogram (see the module docs). Real-time safe; no heap.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    counts: [u64; BINS],
    count: u64,
    sum_us: f64,
    min_us: f64,
    max_us: f64,
    rejected: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub const fn new() -> Histogram {
        Histogram {
            counts: [0; BINS],
            count: 0,
            sum_us: 0.0,
            min_us: f64::INFINITY,
            max_us: 0.0,
            rejected: 0,
        }
    }

    /// Counts one value in microseconds. A negative or non-finite value is not a latency: it is
    /// counted in [`Histogram::rejected`] and otherwise ignored.
    pub fn record(&mut self, us: f64) {
        if !us.is_finite() || us < 0.0 {
            self.rejected += 1;
            return;
        }
        self.counts[bin_of(us)] += 1;
        self.count += 1;
        self.sum_us += us;
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
    }

    /// Counts a value that was measured but lies outside what this histogram accepts (for
    /// example a one-way delay outside 0..10 s).
    pub fn reject(&mut self) {
        self.rejected += 1;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Values refused (negative, non-finite, or out of range as the recorder judged).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Mean of the values recorded, µs (`None` when empty).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_us / self.count as f64)
    }

    /// Smallest value recorded, µs.
    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then_some(self.min_us)
    }

    /// Largest value recorded, µs.
    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max_us)
    }

    /// The bin counts, bin 0 (underflow) to [`OVERFLOW`].
    pub fn counts(&self) -> &[u64; BINS] {
        &self.counts
    }

    /// The `q`-quantile (0..=1, clamped), µs, interpolated inside its bin; `None` when empty. See
    /// the module docs for its error bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.quantiles([q]).map(|[v]| v)
    }

    /// Several quantiles in one pass over the bins; `qs` must be ascending (an out-of-order one
    /// is answered from where the pass stands, never wrongly indexed). `None` when empty.
    pub fn quantiles<const N: usize>(&self, qs: [f64; N]) -> Option<[f64; N]> {
        if self.count == 0 {
            return None;
        }
        let mut out = [0.0; N];
        let n = self.count as f64;
        let mut bin = 0;
        let mut before = 0u64;
        for (k, &q) in qs.iter().enumerate() {
            let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
            let target = q * n;
            // Advance to the first non-empty bin whose cumulative count reaches the target.
            while bin < OVERFLOW
                && (self.counts[bin] == 0 || ((before + self.counts[bin]) as f64) < target)
            {
                before += self.counts[bin];
                bin += 1;
            }
            let c = self.counts[bin];
            // The bins that hold the extremes are filled only up to them.
            let (low, high) = bin_bounds_us(bin);
            let (low, high) = (low.max(self.min_us), high.min(self.max_us));
            let frac = if c == 0 {
                1.0
            } else {
                ((target - before as f64) / c as f64).clamp(0.0, 1.0)
            };
            out[k] = (low + frac * (high - low)).clamp(self.min_us, self.max_us);
        }
        Some(out)
    }

    /// Empties the histogram.
    pub fn reset(&mut self) {
        *self = Histogram::new();
    }

    /// Writes this histogram as one record of the histogram block (`out` at least
    /// [`HIST_LEN`] values; shorter is left alone). Times in milliseconds.
    pub fn write_record(&self, out: &mut [f64]) {
        let Some(out) = out.get_mut(..HIST_LEN) else {
            return;
        };
        let ms = |us: f64| us / 1000.0;
        let [p50, p95, p99] = self.quantiles([0.5, 0.95, 0.99]).unwrap_or([0.0; 3]);
        out[H_COUNT] = self.count as f64;
        out[H_MEAN_MS] = ms(self.mean().unwrap_or(0.0));
        out[H_MIN_MS] = ms(self.min().unwrap_or(0.0));
        out[H_MAX_MS] = ms(self.max().unwrap_or(0.0));
        out[H_P50_MS] = ms(p50);
        out[H_P95_MS] = ms(p95);
        out[H_P99_MS] = ms(p99);
        out[H_REJECTED] = self.rejected as f64;
        for (o, &c) in out[H_BINS_AT..].iter_mut().zip(self.counts.iter()) {
            *o = c as f64;
        }
    }

    /// The summary the stats block carries: p50, p95, p99, max, mean (ms) and count; zeros when
    /// empty.
    pub fn summary_ms(&self) -> [f64; 6] {
        let [p50, p95, p99] = self.quantiles([0.5, 0.95, 0.99]).unwrap_or([0.0; 3]);
        let max = self.max().unwrap_or(0.0);
        let mean = self.mean().unwrap_or(0.0);
        [
            p50 / 1000.0,
            p95 / 1000.0,
            p99 / 1000.0,
            max / 1000.0,
            mean / 1000.0,
            self.count as f64,
        ]
    }
}

// ----- the histogram block ------------------------------------------------------------------

/// Record field: values recorded.
pub const H_COUNT: usize = 0;
/// Record field: mean, ms.
pub const H_MEAN_MS: usize = 1;
/// Record field: minimum, ms.
pub const H_MIN_MS: usize = 2;
/// Record field: maximum, ms.
pub const H_MAX_MS: usize = 3;
/// Record field: median, ms.
pub const H_P50_MS: usize = 4;
/// Record field: 95th percentile, ms.
pub const H_P95_MS: usize = 5;
/// Record field: 99th percentile, ms.
pub const H_P99_MS: usize = 6;
/// Record field: values refused (negative, non-finite, out of range).
pub const H_REJECTED: usize = 7;
/// Record field: the first of the [`BINS`] bin counts.
pub const H_BINS_AT: usize = 8;
/// Values per histogram record.
pub const HIST_LEN: usize = H_BINS_AT + BINS;

/// Per-peer stage: jitter-buffer wait, from a packet's arrival to the local frame at which its
/// first frame plays.
pub const STAGE_JITTER_WAIT: usize = 0;
/// Per-peer stage: network one-way delay, from the sender's wall clock at sending to ours at
/// arrival, corrected by the clock offset.
pub const STAGE_NETWORK: usize = 1;
/// Per-peer stage: delivery, from a packet's arrival at the net side (the ring record's time)
/// to the quantum that takes it into the engine, on the host's wall clock. It is how long a
/// packet waits for the audio thread to run; with audio callbacks that come in bursts it is most
/// of a burst period.
pub const STAGE_DELIVERY: usize = 2;
/// Per-peer stage: our send queue towards this peer, per packet sent: the data channel's queued
/// bytes at the moment the packet was handed to it, as time at the stream's rate (the net side
/// reports each one with a [`crate::engine::TAG_SEND_QUEUE`] ring record).
pub const STAGE_SEND_QUEUE: usize = 3;
/// Per-peer stage: transit, per packet played whose network delay is known, from the sender
/// handing it to its data channel to the local frame at which it starts to play: network +
/// delivery + jitter-buffer wait of the same packet, so its tail is the tail of the sum, not a
/// sum of tails.
pub const STAGE_TRANSIT: usize = 4;
/// Per-peer stage: the added one-way latency per packet with a transit: transit + the sender's
/// block duration + our send queue towards the peer (for theirs); mouth to ear is this plus the
/// devices' latency ([`HB_OUTPUT_US`], [`HB_INPUT_US`]). See [`crate::engine`].
pub const STAGE_ONE_WAY: usize = 5;
/// Stages per peer.
pub const STAGES: usize = 6;

/// Block global: the seqlock word.
pub const HB_SEQUENCE: usize = 0;
/// Block global: peer slots the engine writes rows for.
pub const HB_SLOTS: usize = 1;
/// Block global: stages per peer ([`STAGES`]).
pub const HB_STAGES: usize = 2;
/// Block global: bins per histogram ([`BINS`]).
pub const HB_BINS: usize = 3;
/// Block global: the local output latency the host reported (the device's, from the audio
/// context), µs; NaN while unknown. See [`crate::engine::Engine::set_device_latency`].
pub const HB_OUTPUT_US: usize = 4;
/// Block global: the local input latency the host reported, µs; NaN while unknown.
pub const HB_INPUT_US: usize = 5;
/// Values before the capture histogram.
pub const HB_GLOBAL_LEN: usize = 8;
/// Start of the capture-interval histogram record.
pub const CAPTURE_AT: usize = HB_GLOBAL_LEN;
/// Start of the first peer's records.
pub const SLOTS_AT: usize = CAPTURE_AT + HIST_LEN;
/// Peer slots the block has rows for (as the stats block).
pub const HB_MAX_PEERS: usize = crate::stats::MAX_PEERS;
/// Total `f64` values in the block.
pub const HB_BLOCK_LEN: usize = SLOTS_AT + HB_MAX_PEERS * STAGES * HIST_LEN;

/// Start of the record of stage `stage` of peer `slot`.
pub const fn hist_index(slot: usize, stage: usize) -> usize {
    SLOTS_AT + (slot * STAGES + stage) * HIST_LEN
}

/// Writing the block: every histogram of the engine in this layout.
impl Engine {
    /// Values of the histogram block this engine writes: the globals, the capture histogram
    /// and one row of stages per slot.
    pub fn histograms_len(&self) -> usize {
        SLOTS_AT + self.peers.len() * STAGES * HIST_LEN
    }

    /// Fills the first [`Engine::histograms_len`] values of a histogram block (layout in
    /// [`crate::latency`]) except the sequence word, which the publisher owns. An empty slot's
    /// records are zeros. Shorter blocks are left alone. Real-time safe.
    pub fn write_histograms(&self, out: &mut [f64]) {
        if out.len() < self.histograms_len() {
            return;
        }
        out[HB_SLOTS] = self.peers.len() as f64;
        out[HB_STAGES] = STAGES as f64;
        out[HB_BINS] = BINS as f64;
        out[HB_OUTPUT_US] = self.output_latency_us;
        out[HB_INPUT_US] = self.input_latency_us;
        self.capture_interval
            .write_record(&mut out[CAPTURE_AT..CAPTURE_AT + HIST_LEN]);
        for (slot, place) in self.peers.iter().enumerate() {
            let row = &mut out[hist_index(slot, 0)..hist_index(slot + 1, 0)];
            let Some(peer) = place else {
                row.fill(0.0);
                continue;
            };
            let stages = [
                (STAGE_JITTER_WAIT, &peer.wait),
                (STAGE_NETWORK, &peer.network),
                (STAGE_DELIVERY, &peer.delivery),
                (STAGE_SEND_QUEUE, &peer.send_queue),
                (STAGE_TRANSIT, &peer.transit),
                (STAGE_ONE_WAY, &peer.one_way),
            ];
            for (stage, hist) in stages {
                hist.write_record(&mut row[stage * HIST_LEN..(stage + 1) * HIST_LEN]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
