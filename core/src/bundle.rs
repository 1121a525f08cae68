//! Bundles: several whole packets in one data-channel message, so that a hub forwarding N − 1
//! streams to a listener sends it one message per block instead of N − 1.
//!
//! A browser pays its data-channel cost per message (about 5-10 µs each, measured by the net
//! benchmark), not per byte, so a listener of a 15-player room that receives one bundle per block
//! pays once where it paid 14 times. Each packet in a bundle is a complete packet of
//! [`crate::packet`] — the JackTrip header, its audio and the version-1 trailer whose stream id
//! says which player it comes from — so the receiver hands each one to the engine exactly as if it
//! had arrived alone, and a bad packet inside a well-formed bundle is counted by the engine like
//! any other.
//!
//! # Byte layout
//!
//! ```text
//! offset  size  field
//! ------  ----  ------------------------------------------------------------------------
//!      0     2  magic 'T' 'B'          0x54 0x42
//!      2     1  version                1
//!      3     1  count K                1 ..= MAX_BUNDLE_PACKETS
//!      4     …  K entries, each:
//!                 +0  2  length L      u16 LE, HEADER_LEN ..= MAX_PACKET_LEN
//!                 +2  L  one packet    as crate::packet lays it out
//! ```
//!
//! A bundle is exactly its header and its K entries: a length that runs past the end, bytes
//! left after the K-th entry, a count of 0 or above [`MAX_BUNDLE_PACKETS`] make the whole bundle
//! an error, since once one length is wrong no later boundary can be trusted. [`parse`] checks
//! the whole structure before it yields a single packet, so a receiver never plays part of a
//! bundle it then rejects. At most 64 packets of at most [`MAX_PACKET_LEN`] bytes bound a bundle
//! to [`MAX_BUNDLE_LEN`] bytes; a sender splits what does not fit the channel's message size.
//!
//! `app/src/net/bundle.ts` reads the same layout; the golden vectors in
//! `tests/vectors/bundles.json` (and its constants, compared with this module's in the tests)
//! hold both sides to it.
//!
//! # Real-time safety
//!
//! [`parse`], [`Bundle::packets`] and [`BundleWriter`] never allocate, lock or panic: the writer
//! fills a buffer its caller owns.

use core::fmt;

use crate::packet::{HEADER_LEN, MAX_PACKET_LEN};

/// The first two bytes of every bundle.
pub const BUNDLE_MAGIC: [u8; 2] = *b"TB";
/// The layout version this module reads and writes.
pub const BUNDLE_VERSION: u8 = 1;
/// Bytes before the first entry: magic, version, count.
pub const BUNDLE_HEADER_LEN: usize = 4;
/// Bytes of an entry's length field.
pub const ENTRY_LEN_BYTES: usize = 2;
/// Most packets one bundle carries.
pub const MAX_BUNDLE_PACKETS: usize = 64;
/// Longest possible bundle, in bytes.
pub const MAX_BUNDLE_LEN: usize =
    BUNDLE_HEADER_LEN + MAX_BUNDLE_PACKETS * (ENTRY_LEN_BYTES + MAX_PACKET_LEN);

/// Why bytes are not a bundle, or why a packet could not be added to one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BundleError {
    /// Shorter than its header, or than an entry it announces.
    Truncated { len: usize, needed: usize },
    /// Not starting with [`BUNDLE_MAGIC`].
    BadMagic,
    /// A version this module does not read.
    UnsupportedVersion(u8),
    /// A count of 0 or above [`MAX_BUNDLE_PACKETS`].
    BadCount(u8),
    /// An entry shorter than a packet header or longer than [`MAX_PACKET_LEN`].
    BadEntryLength(usize),
    /// Bytes after the last entry.
    TrailingBytes { len: usize, expected: usize },
    /// [`BundleWriter::push`]: the buffer, or the count, has no room for this packet.
    Full,
    /// [`BundleWriter::finish`]: no packet was added.
    Empty,
}

impl BundleError {
    /// The variant's name, as the golden vectors spell it (and `bundle.ts` reports it).
    pub const fn name(&self) -> &'static str {
        match self {
            BundleError::Truncated { .. } => "Truncated",
            BundleError::BadMagic => "BadMagic",
            BundleError::UnsupportedVersion(_) => "UnsupportedVersion",
            BundleError::BadCount(_) => "BadCount",
            BundleError::BadEntryLength(_) => "BadEntryLength",
            BundleError::TrailingBytes { .. } => "TrailingBytes",
            BundleError::Full => "Full",
            BundleError::Empty => "Empty",
        }
    }
}

impl fmt::Display for BundleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BundleError::Truncated { len, needed } => {
                write!(f, "bundle of {len} bytes is cut short (needs {needed})")
            }
            BundleError::TrailingBytes { len, expected } => {
                write!(
                    f,
                    "bundle of {len} bytes has bytes after its last packet (ends at {expected})"
                )
            }
            BundleError::UnsupportedVersion(v) => write!(f, "bundle version {v} is not read here"),
            BundleError::BadCount(k) => write!(f, "bundle announces {k} packets"),
            BundleError::BadEntryLength(l) => {
                write!(f, "bundle entry of {l} bytes cannot be a packet")
            }
            _ => f.write_str(self.name()),
        }
    }
}

impl std::error::Error for BundleError {}

/// A bundle whose structure has been checked: its packets, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bundle<'a> {
    count: usize,
    entries: &'a [u8],
}

impl<'a> Bundle<'a> {
    /// How many packets it carries (1 ..= [`MAX_BUNDLE_PACKETS`]).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Never true: a bundle carries at least one packet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Its packets' bytes, in the order they were written.
    pub fn packets(&self) -> Packets<'a> {
        Packets { rest: self.entries }
    }
}

/// The packets of a checked [`Bundle`].
#[derive(Clone, Debug)]
pub struct Packets<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Packets<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (len, rest) = split_entry(self.rest).ok()?;
        let (packet, rest) = rest.split_at(len);
        self.rest = rest;
        Some(packet)
    }
}

/// The entry length at the front of `bytes`, and what follows it; checked against the bounds.
fn split_entry(bytes: &[u8]) -> Result<(usize, &[u8]), BundleError> {
    let [lo, hi, rest @ ..] = bytes else {
        return Err(BundleError::Truncated {
            len: bytes.len(),
            needed: ENTRY_LEN_BYTES,
        });
    };
    let len = usize::from(u16::from_le_bytes([*lo, *hi]));
    if !(HEADER_LEN..=MAX_PACKET_LEN).contains(&len) {
        return Err(BundleError::BadEntryLength(len));
    }
    if rest.len() < len {
        return Err(BundleError::Truncated {
            len: rest.len(),
            needed: len,
        });
    }
    Ok((len, rest))
}

/// Checks a whole bundle and returns it, or the first thing wrong with it.
pub fn parse(bytes: &[u8]) -> Result<Bundle<'_>, BundleError> {
    let [m0, m1, version, count, entries @ ..] = bytes else {
        return Err(BundleError::Truncated {
            len: bytes.len(),
            needed: BUNDLE_HEADER_LEN,
        });
    };
    if [*m0, *m1] != BUNDLE_MAGIC {
        return Err(BundleError::BadMagic);
    }
    if *version != BUNDLE_VERSION {
        return Err(BundleError::UnsupportedVersion(*version));
    }
    let k = usize::from(*count);
    if k == 0 || k > MAX_BUNDLE_PACKETS {
        return Err(BundleError::BadCount(*count));
    }
    let mut rest = entries;
    for _ in 0..k {
        let (len, after) = split_entry(rest)?;
        rest = &after[len..];
    }
    if !rest.is_empty() {
        return Err(BundleError::TrailingBytes {
            len: bytes.len(),
            expected: bytes.len() - rest.len(),
        });
    }
    Ok(Bundle { count: k, entries })
}

/// Writes a bundle into a buffer its caller owns: [`BundleWriter::push`] each packet, then
/// [`BundleWriter::finish`] for the bundle's length.
#[derive(Debug)]
pub struct BundleWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
    count: usize,
}

impl<'b> BundleWriter<'b> {
    /// Starts a bundle at the front of `buf` (which needs room for the header at least).
    pub fn new(buf: &'b mut [u8]) -> Result<BundleWriter<'b>, BundleError> {
        let Some(header) = buf.get_mut(..BUNDLE_HEADER_LEN) else {
            return Err(BundleError::Full);
        };
        header.copy_from_slice(&[BUNDLE_MAGIC[0], BUNDLE_MAGIC[1], BUNDLE_VERSION, 0]);
        Ok(BundleWriter {
            buf,
            len: BUNDLE_HEADER_LEN,
            count: 0,
        })
    }

    /// Adds one packet. Refused, leaving the bundle as it was, when its length cannot be a
    /// packet's or when the buffer or the count is full (then finish this bundle and start
    /// another).
    pub fn push(&mut self, packet: &[u8]) -> Result<(), BundleError> {
        if !(HEADER_LEN..=MAX_PACKET_LEN).contains(&packet.len()) {
            return Err(BundleError::BadEntryLength(packet.len()));
        }
        let end = self.len + ENTRY_LEN_BYTES + packet.len();
        if self.count == MAX_BUNDLE_PACKETS || end > self.buf.len() {
            return Err(BundleError::Full);
        }
        let len = (packet.len() as u16).to_le_bytes();
        self.buf[self.len..self.len + ENTRY_LEN_BYTES].copy_from_slice(&len);
        self.buf[self.len + ENTRY_LEN_BYTES..end].copy_from_slice(packet);
        self.len = end;
        self.count += 1;
        Ok(())
    }

    /// Packets added so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Writes the count and returns the bundle's length in the buffer.
    pub fn finish(self) -> Result<usize, BundleError> {
        if self.count == 0 {
            return Err(BundleError::Empty);
        }
        self.buf[3] = self.count as u8;
        Ok(self.len)
    }
}

#[cfg(test)]
mod tests;
