//! Payload storage of the jitter buffer: received payloads as they arrived, decoded only when
//! played (see "Storage" in the parent module). Allocated once by [`Store::new`]; every other
//! method is real-time safe.
//!
//! A compressed payload (Opus) is decoded once, in order, when played: its decoder has state, so
//! the block is then written back over it as float32 samples ([`Store::write_decoded`]), and the
//! concealer's later reads of a kept block decode that PCM like any other.

use super::{KEEP_FRAMES, KEPT_RING, MIN_BLOCK};
use crate::conceal::HISTORY_NEED;
use crate::packet::{Header, Packet, SampleFormat, SampleRate, MAX_CHANNELS, MAX_FRAMES};

/// Payload bytes per stored frame: the widest format, float32 stereo.
const BYTES_PER_FRAME: usize = MAX_CHANNELS * 4;

/// What a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stored {
    /// PCM in this sample format: `frames × channels` samples.
    Pcm(SampleFormat),
    /// An Opus frame of this many bytes, not decoded yet.
    Opus(u16),
}

/// Received payloads as they arrived, in buffers handed out from a free stack (see "Storage" in
/// the module docs). Each buffer is free, held by a slot, or kept for the concealer.
#[derive(Clone, Debug)]
#[repr(C)]
pub(super) struct Store {
    free_len: usize,
    kept_head: usize,
    kept_len: usize,
    /// Played buffers to keep: enough blocks to cover `HISTORY_NEED` frames.
    pub(super) keep: usize,
    /// Bytes per buffer and buffers in the current layout (0 before the first packet).
    pub(super) stride: usize,
    pub(super) buffers: usize,
    /// What decoding needs besides the bytes: frames, rate and channels of the stream.
    header: Header,
    channels: u8,
    /// Tokens that named a buffer written since (never expected; counted for the tests).
    pub(super) stale: u64,
    pub(super) bytes: Vec<u8>,
    /// Per buffer: the payload's kind, and a count of writes to it. Tokens carry the count,
    /// so that a reference to a buffer written since is detected (and decoded as silence)
    /// rather than decoded as other audio.
    pub(super) meta: Vec<(u16, Stored)>,
    /// Free buffers, a stack: `free[..free_len]`, the most recently released on top.
    pub(super) free: Vec<u32>,
    /// Played buffers kept for the concealer, oldest first: `kept_len` entries of a ring from
    /// `kept_head`.
    kept: [u32; KEPT_RING],
}

impl Store {
    /// Storage for `cap` frames plus the kept history, in the smallest blocks. Allocates.
    pub(super) fn new(cap: usize) -> Store {
        let frames = cap + KEEP_FRAMES;
        let max_buffers = frames / MIN_BLOCK;
        Store {
            bytes: vec![0; frames * BYTES_PER_FRAME],
            meta: vec![(0, Stored::Pcm(SampleFormat::Pcm16)); max_buffers],
            free: vec![0; max_buffers],
            free_len: 0,
            kept: [0; KEPT_RING],
            kept_head: 0,
            kept_len: 0,
            keep: 0,
            stride: 0,
            buffers: 0,
            header: Header {
                timestamp: 0,
                seq: 0,
                frames: 0,
                rate: SampleRate::Hz48000,
                format: SampleFormat::Pcm16,
                channels_in: 0,
                channels_out: 0,
            },
            channels: 0,
            stale: 0,
        }
    }

    /// Lays the storage out for blocks of `header.frames` (32..=256) frames: every buffer free.
    /// A buffer holds a block of float32 stereo, so it can take any block's payload and, after
    /// decoding, an Opus block's samples.
    pub(super) fn layout(&mut self, header: &Header, channels: u8) {
        let frames = usize::from(header.frames).clamp(MIN_BLOCK, MAX_FRAMES);
        self.stride = frames * BYTES_PER_FRAME;
        self.buffers = (self.bytes.len() / self.stride).min(self.free.len());
        self.keep = HISTORY_NEED.div_ceil(frames).min(KEPT_RING);
        self.kept_head = 0;
        self.kept_len = 0;
        for (k, f) in self.free[..self.buffers].iter_mut().enumerate() {
            *f = (self.buffers - 1 - k) as u32;
        }
        self.free_len = self.buffers;
        self.header = Header {
            timestamp: 0,
            seq: 0,
            ..*header
        };
        self.channels = channels;
    }

    /// A free buffer, if any (one always is when a slot needs one: a layout has more buffers
    /// than slots plus kept ones).
    pub(super) fn take(&mut self) -> Option<u32> {
        self.free_len = self.free_len.checked_sub(1)?;
        Some(self.free[self.free_len])
    }

    /// Returns a buffer to the free stack.
    pub(super) fn release(&mut self, buf: u32) {
        if let Some(f) = self.free.get_mut(self.free_len) {
            *f = buf;
            self.free_len += 1;
        }
    }

    /// A played buffer: kept for the concealer; the oldest kept one is released.
    pub(super) fn retire(&mut self, buf: u32) {
        if self.keep == 0 {
            // Only before the first layout (no block is stored then); stay consistent anyway.
            self.release(buf);
            return;
        }
        if self.kept_len >= self.keep {
            let old = self.kept[self.kept_head];
            self.kept_head = (self.kept_head + 1) % KEPT_RING;
            self.kept_len -= 1;
            self.release(old);
        }
        self.kept[(self.kept_head + self.kept_len) % KEPT_RING] = buf;
        self.kept_len += 1;
    }

    /// Stores a payload (at most one block of float32 stereo) in `buf`.
    pub(super) fn write(&mut self, buf: u32, payload: &[u8], kind: Stored) {
        let b = buf as usize;
        let off = b * self.stride;
        if let Some(dst) = self.bytes.get_mut(off..off + payload.len()) {
            dst.copy_from_slice(payload);
        }
        if let Some((generation, k)) = self.meta.get_mut(b) {
            *generation = generation.wrapping_add(1);
            *k = kind;
        }
    }

    /// The bytes of an Opus frame in `buf`, not yet decoded (`None` for PCM).
    pub(super) fn opus_payload(&self, buf: u32) -> Option<&[u8]> {
        let b = buf as usize;
        let Some(&(_, Stored::Opus(len))) = self.meta.get(b) else {
            return None;
        };
        let off = b * self.stride;
        self.bytes.get(off..off + usize::from(len))
    }

    /// Writes a decoded block over `buf` as float32 PCM (the stream's channels; `left` alone for
    /// mono), so later reads decode it as PCM.
    pub(super) fn write_decoded(&mut self, buf: u32, left: &[f32], right: &[f32]) {
        let b = buf as usize;
        let frames = usize::from(self.header.frames)
            .min(left.len())
            .min(right.len());
        let off = b * self.stride;
        let channels: [&[f32]; 2] = [&left[..frames], &right[..frames]];
        let n = usize::from(self.channels).clamp(1, 2);
        if let Some(dst) = self.bytes.get_mut(off..off + n * frames * 4) {
            for (ch, dst) in channels
                .iter()
                .take(n)
                .zip(dst.chunks_exact_mut(frames * 4))
            {
                for (x, d) in ch.iter().zip(dst.chunks_exact_mut(4)) {
                    d.copy_from_slice(&x.to_le_bytes());
                }
            }
        }
        if let Some((generation, k)) = self.meta.get_mut(b) {
            *generation = generation.wrapping_add(1);
            *k = Stored::Pcm(SampleFormat::Float32);
        }
    }

    /// Decodes the PCM in `buf` into `left`/`right` (one block each) with the packet module's
    /// decoder; silence for a payload that is not PCM.
    pub(super) fn decode(&self, buf: u32, left: &mut [f32], right: &mut [f32]) {
        let b = buf as usize;
        let format = match self.meta.get(b) {
            Some(&(_, Stored::Pcm(f))) => Some(f),
            _ => None,
        };
        let len = format.map_or(0, |f| {
            usize::from(self.header.frames) * usize::from(self.channels) * f.bytes()
        });
        let off = b * self.stride;
        let (Some(format), Some(payload)) = (format, self.bytes.get(off..off + len)) else {
            left.fill(0.0);
            right.fill(0.0);
            return;
        };
        let view = Packet {
            header: Header {
                format,
                ..self.header
            },
            channels: self.channels,
            ext: None,
            payload,
            redundant: &[],
        };
        view.decode_stereo(left, right);
    }

    /// The concealer's name for the current contents of `buf`.
    pub(super) fn token(&self, buf: u32) -> u32 {
        let g = self.meta.get(buf as usize).map_or(0, |m| m.0);
        buf | u32::from(g) << 16
    }

    /// Decodes the block a token names; silence if its buffer was written since.
    pub(super) fn decode_token(&mut self, token: u32, left: &mut [f32], right: &mut [f32]) {
        let buf = token & 0xFFFF;
        let current = (buf as usize) < self.buffers && self.token(buf) == token;
        if current {
            self.decode(buf, left, right);
        } else {
            self.stale += 1;
            left.fill(0.0);
            right.fill(0.0);
        }
    }
}
