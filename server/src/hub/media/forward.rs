//! Forward mode: each browser listener's pending bundle of the other clients' packets.
//!
//! A browser pays per data-channel message, so the room gathers what it forwards to one listener
//! and sends it as one bundle (`tutti_core::bundle`). Each accepted packet of sender S is staged,
//! its trailer's stream id set to S's own (a PCM trailer is added when the packet has none; a
//! trailer's codec, e.g. Opus, and its redundant copy's length are kept), for every other browser listener. A listener's staged packets leave, as bundles built with
//! [`BundleWriter`], when [`Pending::due`] says so: they hold one packet from every other client
//! that is currently sending, or the first of them has waited [`BUNDLE_WAIT_US`], or the staging
//! holds a bundle's worth ([`MAX_BUNDLE_PACKETS`]) or cannot be sure to take one more packet.
//! The staging holds [`MAX_BUNDLE_LEN`] bytes of entries, so a worker that polls late still
//! forwards more than a bundle's worth (split over several bundles); a packet that does not fit
//! is counted as the listener's overflow and dropped.
//!
//! Everything is allocated when the listener joins; staging and flushing copy bytes only.

use tutti_core::bundle::{BundleWriter, ENTRY_LEN_BYTES, MAX_BUNDLE_LEN, MAX_BUNDLE_PACKETS};
use tutti_core::packet::{CODEC_PCM, EXT_LEN, EXT_MAGIC, EXT_VERSION, MAX_PACKET_LEN};

use super::{BUNDLE_WAIT_US, MAX_CLIENTS};

/// Words of the per-listener bitset of senders staged since its last bundle.
const SENDER_WORDS: usize = MAX_CLIENTS.div_ceil(64);

/// One browser listener's staged packets: entries laid out as a bundle's (u16 LE length, packet).
pub struct Pending {
    buf: Box<[u8]>,
    len: usize,
    count: usize,
    /// Distinct senders staged (by slot), and their number.
    senders: [u64; SENDER_WORDS],
    distinct: usize,
    /// When the first staged packet arrived.
    first_us: u64,
}

impl Pending {
    /// An empty staging area. Allocates.
    pub fn new() -> Pending {
        Pending {
            buf: vec![0; MAX_BUNDLE_LEN].into_boxed_slice(),
            len: 0,
            count: 0,
            senders: [0; SENDER_WORDS],
            distinct: 0,
            first_us: 0,
        }
    }

    /// Stages `packet` (already checked by the ingest: a whole packet, its trailer absent or
    /// valid) from the sender in `slot` with stream id `stream`. `false`: no room, nothing staged.
    pub fn stage(
        &mut self,
        slot: usize,
        stream: u16,
        packet: &[u8],
        has_ext: bool,
        now_us: u64,
    ) -> bool {
        let body = if has_ext {
            packet.len() - EXT_LEN
        } else {
            packet.len()
        };
        let entry = body + EXT_LEN;
        let start = self.len + ENTRY_LEN_BYTES;
        let end = start + entry;
        if end > self.buf.len() || entry > MAX_PACKET_LEN {
            return false;
        }
        self.buf[self.len..start].copy_from_slice(&(entry as u16).to_le_bytes());
        self.buf[start..start + body].copy_from_slice(&packet[..body]);
        let [s0, s1] = stream.to_le_bytes();
        // The sender's codec and its last field (an Opus packet's redundant copy length) when
        // it wrote a trailer (an Opus packet always does; the ingest checked it), else PCM's.
        let (codec, r0, r1) = if has_ext {
            let t = packet.get(body..).unwrap_or(&[]);
            let at = |i: usize| t.get(i).copied().unwrap_or(0);
            (t.get(3).copied().unwrap_or(CODEC_PCM), at(6), at(7))
        } else {
            (CODEC_PCM, 0, 0)
        };
        self.buf[start + body..end].copy_from_slice(&[
            EXT_MAGIC[0],
            EXT_MAGIC[1],
            EXT_VERSION,
            codec,
            s0,
            s1,
            r0,
            r1,
        ]);
        if self.count == 0 {
            self.first_us = now_us;
        }
        self.len = end;
        self.count += 1;
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        if self.senders[word] & bit == 0 {
            self.senders[word] |= bit;
            self.distinct += 1;
        }
        true
    }

    /// Whether the staging holds a bundle's worth, or might not take one more packet.
    fn full(&self) -> bool {
        self.count >= MAX_BUNDLE_PACKETS
            || self.buf.len() - self.len < ENTRY_LEN_BYTES + MAX_PACKET_LEN
    }

    /// When the staged packets must leave at the latest (`None`: nothing staged).
    pub fn deadline(&self) -> Option<u64> {
        if self.count == 0 {
            None
        } else if self.full() {
            Some(self.first_us)
        } else {
            Some(self.first_us + BUNDLE_WAIT_US)
        }
    }

    /// Whether the staged packets leave at `now_us`, `others` being the number of other clients
    /// currently sending.
    pub fn due(&self, now_us: u64, others: usize) -> bool {
        self.count > 0
            && (self.distinct >= others || self.full() || now_us >= self.first_us + BUNDLE_WAIT_US)
    }

    /// Sends the staged packets as bundles built in `scratch` (at least [`MAX_BUNDLE_LEN`] bytes),
    /// calling `send` with each, and empties the staging. Returns (messages, packets, bytes)
    /// sent.
    pub fn flush(&mut self, scratch: &mut [u8], send: &mut dyn FnMut(&[u8])) -> (u64, u64, u64) {
        let (mut messages, mut packets, mut bytes) = (0, 0, 0);
        let mut at = 0;
        while at < self.len {
            let Ok(mut writer) = BundleWriter::new(scratch) else {
                break;
            };
            while at < self.len {
                let len = usize::from(u16::from_le_bytes([self.buf[at], self.buf[at + 1]]));
                let packet = &self.buf[at + ENTRY_LEN_BYTES..at + ENTRY_LEN_BYTES + len];
                if writer.push(packet).is_err() {
                    break;
                }
                packets += 1;
                at += ENTRY_LEN_BYTES + len;
            }
            let Ok(n) = writer.finish() else {
                break;
            };
            send(&scratch[..n]);
            messages += 1;
            bytes += n as u64;
        }
        self.clear();
        (messages, packets, bytes)
    }

    /// Forgets everything staged.
    pub fn clear(&mut self) {
        self.len = 0;
        self.count = 0;
        self.senders = [0; SENDER_WORDS];
        self.distinct = 0;
    }

    /// Forgets a sender that left (its staged packets still go out).
    pub fn forget_sender(&mut self, slot: usize) {
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        if self.senders[word] & bit != 0 {
            self.senders[word] &= !bit;
            self.distinct -= 1;
        }
    }
}
