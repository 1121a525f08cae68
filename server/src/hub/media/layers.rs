//! Forward mode's layers: each sender's stream made available in the formats its listeners
//! take, encoded once per format and frame, never per listener (the bridge of seeds/003 keeps a
//! source in layers and lets a controller pick per receiver; the choice is
//! [`super::MediaRoom::set_layer`]'s, this module only makes the layers).
//!
//! A listener takes a sender's packets as they were sent ([`Layer::AsSent`]) or re-encoded as
//! Opus ([`Layer::Opus128`], [`Layer::Opus64`]). The sender's blocks (32 to 256 frames) are
//! decoded and gathered into Opus frames (120 samples at 128 kbit/s: 2.5 ms, for the least
//! delay; 240 at 64 kbit/s, where 2.5 ms frames lose 12 dB of SNR): a frame leaves as soon as its
//! last sample arrived, so the reframing adds less than one frame. Each layer numbers its frames
//! itself. A gap in the sender's numbers (loss) is concealed into the layers, with the engine's
//! own concealment ([`Concealer`]: the signal continued, then faded out over 50 ms), and the
//! layers' numbers are skipped only for what is lost after the fade: an encoder must never see
//! the signal jump where its listeners' decoders conceal (the frame after such a jump came out
//! up to 7 dB over the tone's level; see [`tutti_core::framer`]). The real blocks after a concealment
//! fade back in from it. Concealment is bounded by time, not by packets: a sender's lost blocks
//! are concealed out of a budget of audio time that refills as the hub's clock runs and holds
//! one full concealment (hold, fade and a block: 55 ms), so a sender that skips numbers before
//! every packet makes the encoders code at most one more real time of its stream (the ingest
//! already holds its real blocks to twice real time), not up to 75 blocks per packet; what the
//! budget does not cover is skipped and counted. A packet older than one already taken is not
//! re-encoded (its listeners on that layer lose nothing they would still play).
//!
//! Each Opus packet also carries the previous frame's bytes (the packet format's redundant copy):
//! a listener that lost a frame plays it from the next packet instead of concealing it, for the
//! cost of the Opus bytes once more (libopus's own FEC does nothing for these CELT-only frames).
//! After a gap, or when a layer is taken again, the first frame carries none.
//!
//! Each layer is an [`OpusFramer`] (a mono sender's layers are coded mono), made when the layer
//! is first taken ([`SenderLayers::ensure`], on the control path); feeding a block
//! allocates nothing.

use tutti_core::conceal::{Concealer, FADE_FRAMES, HOLD_FRAMES};
use tutti_core::packet::{Packet, MAX_FRAMES};

use tutti_core::framer::OpusFramer;

use crate::hub::opus::OpusError;
use crate::hub::opus_stream::StreamEncoder;

pub use tutti_core::layer::{Layer, OPUS_LAYERS};

/// A new Opus stream in `layer`'s format (`None` for [`Layer::AsSent`]), coded by libopus.
/// Allocates.
pub fn framer(layer: Layer) -> Option<Result<Box<OpusFramer>, OpusError>> {
    layer.opus().map(|(bitrate, frame)| {
        let encoder = StreamEncoder::new(2, bitrate)?;
        Ok(OpusFramer::new(Box::new(encoder), frame))
    })
}

/// Audio time a sender's concealment may fill at once, µs at 48 kHz: the concealment's hold and
/// fade and one block. The budget refills at the hub clock's pace up to this.
const CONCEAL_BUDGET_US: u64 =
    ((HOLD_FRAMES + FADE_FRAMES + MAX_FRAMES) as u64) * 1_000_000 / 48_000;

/// What one sender's layers counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerCounters {
    /// Opus frames encoded, all layers.
    pub encoded: u64,
    /// Layer numbers skipped for a gap in the sender's stream (what was lost after the
    /// concealment faded out).
    pub skipped: u64,
    /// Lost sender blocks concealed into the layers.
    pub concealed: u64,
    /// Lost sender blocks not concealed because the sender's concealment budget was spent
    /// (gaps faster than time passes; their numbers are skipped).
    pub over_budget: u64,
    /// Sender packets older than one already taken: not re-encoded.
    pub late: u64,
    /// Frames the encoder refused (never expected; counted).
    pub failed: u64,
}

/// One sender's Opus layers.
pub struct SenderLayers {
    layers: [Option<Box<OpusFramer>>; 2],
    /// What the layers were fed, continued where the sender's blocks were lost; made with the
    /// first layer.
    concealer: Option<Box<Concealer>>,
    /// Audio time the concealment may still fill, µs ([`CONCEAL_BUDGET_US`] at most), as of
    /// `budget_at` (the hub's clock, µs).
    budget_us: u64,
    budget_at: Option<u64>,
    /// The sender's next expected sequence number, once one packet was taken.
    next: Option<u16>,
    /// One decoded block of the sender's.
    block_l: [f32; MAX_FRAMES],
    block_r: [f32; MAX_FRAMES],
    pub counters: LayerCounters,
}

impl SenderLayers {
    /// No layer yet. Allocates.
    pub fn new() -> Box<SenderLayers> {
        Box::new(SenderLayers {
            layers: [None, None],
            concealer: None,
            budget_us: CONCEAL_BUDGET_US,
            budget_at: None,
            next: None,
            block_l: [0.0; MAX_FRAMES],
            block_r: [0.0; MAX_FRAMES],
            counters: LayerCounters::default(),
        })
    }

    /// Makes `layer`'s encoder if it has none. Allocates (libopus's state): the control path.
    pub fn ensure(&mut self, layer: Layer) -> Result<(), OpusError> {
        let Some(i) = layer.index() else {
            return Ok(());
        };
        if self.layers[i].is_none() {
            if let Some(framer) = framer(layer) {
                self.layers[i] = Some(framer?);
            }
        }
        if self.concealer.is_none() {
            self.concealer = Some(Box::new(Concealer::new()));
        }
        Ok(())
    }

    /// Takes one of the sender's packets (checked by the ingest) arriving at `now_us` for the
    /// layers in `taken` (by index; a layer nobody takes is not fed, and restarts when taken
    /// again) and calls `emit(layer, packet)` for every Opus frame it completes. No allocation.
    pub fn feed(
        &mut self,
        pkt: &Packet<'_>,
        now_us: u64,
        taken: [bool; 2],
        emit: &mut dyn FnMut(Layer, &[u8]),
    ) {
        let since = self.budget_at.map_or(0, |t| now_us.saturating_sub(t));
        self.budget_us = self.budget_us.saturating_add(since).min(CONCEAL_BUDGET_US);
        self.budget_at = Some(now_us);
        if pkt.is_opus() {
            // Already compressed: its listeners take it as sent.
            return;
        }
        let seq = pkt.header.seq;
        let gap = match self.next {
            Some(next) => seq.wrapping_sub(next) as i16,
            None => 0,
        };
        if gap < 0 {
            self.counters.late += 1;
            return;
        }
        self.next = Some(seq.wrapping_add(1));
        let frames = pkt.frames().min(MAX_FRAMES);
        // The sender's clock for the block's first sample, µs (its header's stamp).
        let stamp = pkt.header.timestamp;
        let rate = u64::from(pkt.header.rate.hz()).max(1);
        let channels = pkt.channels;
        let Some(concealer) = self.concealer.as_deref_mut() else {
            return; // no layer was ever made
        };
        for (framer, &taken) in self.layers.iter_mut().zip(&taken) {
            if let (Some(framer), false) = (framer.as_deref_mut(), taken) {
                framer.reset();
            }
        }
        if !taken.iter().any(|&t| t) {
            concealer.reset();
            return;
        }
        let mut feed = |layers: &mut [Option<Box<OpusFramer>>; 2],
                        l: &[f32],
                        r: &[f32],
                        stamp: u64,
                        counters: &mut LayerCounters| {
            for (i, slot) in layers.iter_mut().enumerate() {
                let Some(framer) = slot.as_deref_mut().filter(|_| taken[i]) else {
                    continue;
                };
                if framer.set_channels(channels).is_err() {
                    // Never expected (a field of the encoder's state); the frames go on as before.
                    counters.failed += 1;
                }
                let layer = OPUS_LAYERS[i];
                let pushed = framer.push(l, r, stamp, rate, 0, &mut |packet| emit(layer, packet));
                counters.encoded += pushed.encoded;
                counters.failed += pushed.failed;
            }
        };
        if gap > 0 {
            // Lost blocks: continued by the concealment until it has faded out (at most 50 ms,
            // so at most 75 blocks of 32 frames) or the budget is spent, the rest skipped in
            // every layer.
            let missing = usize::from(gap as u16);
            let (l, r) = (&mut self.block_l[..frames], &mut self.block_r[..frames]);
            let cost = frames as u64 * 1_000_000 / rate;
            let mut filled = 0;
            while filled < missing && !concealer.is_silent() {
                if self.budget_us < cost {
                    self.counters.over_budget += 1;
                    break;
                }
                self.budget_us -= cost;
                concealer.conceal(l, r);
                let ago = ((missing - filled) * frames) as u64 * 1_000_000 / rate;
                feed(
                    &mut self.layers,
                    l,
                    r,
                    stamp.saturating_sub(ago),
                    &mut self.counters,
                );
                self.counters.concealed += 1;
                filled += 1;
            }
            if filled < missing {
                for (framer, &taken) in self.layers.iter_mut().zip(&taken) {
                    if let (Some(framer), true) = (framer.as_deref_mut(), taken) {
                        let skipped = framer.gap((missing - filled) * frames);
                        self.counters.skipped += u64::from(skipped);
                    }
                }
            }
        }
        let n = pkt.decode_stereo(&mut self.block_l[..frames], &mut self.block_r[..frames]);
        let (l, r) = (&mut self.block_l[..n], &mut self.block_r[..n]);
        // Fades in from a concealment; otherwise kept for the next one.
        concealer.play(l, r);
        feed(&mut self.layers, l, r, stamp, &mut self.counters);
    }
}
