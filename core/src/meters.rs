//! Meters: how loud each player arrives, in one data-channel message from a hub to a listener.
//!
//! In mix mode a listener receives one stream, the mix made for it, so its own engine can no
//! longer meter the players in it. The hub meters every source as it sums the room
//! ([`crate::mix::MixMinus::source_meter`], the pre-fader meter of a strip) and sends each browser
//! listener about twenty times a second one message with every player's reading, which the
//! listener's mixer shows where its own meters would be.
//!
//! # Byte layout
//!
//! ```text
//! offset  size  field
//! ------  ----  ------------------------------------------------------------------------
//!      0     2  magic 'T' 'M'          0x54 0x4D
//!      2     1  version                1
//!      3     2  count K                u16 LE, 1 ..= MAX_METER_ENTRIES
//!      5     …  K entries of 10 bytes:
//!                 +0  2  stream id     u16 LE, the player's (the packet trailer's)
//!                 +2  2  peak left     u16 LE, level code (below)
//!                 +4  2  peak right
//!                 +6  2  RMS left
//!                 +8  2  RMS right
//! ```
//!
//! A **level code** is hundredths of a dB below full scale: code `c` reads `−c / 100` dBFS, so
//! 0 is full scale (louder reads 0 too) and 6,000 is −60 dBFS; [`SILENT_CODE`] (0xFFFF) is
//! silence. Hundredths of a dB are finer than any meter shows, and two bytes a level keep a room
//! of 500 players to 5 kB per message.
//!
//! A message is exactly its header and its K entries: a count of 0 or above
//! [`MAX_METER_ENTRIES`], a length other than `5 + 10·K` make the whole message an error.
//! `app/src/net/meters.ts` reads the same layout; the golden vectors in
//! `tests/vectors/meters.json` (and its constants, compared with this module's in the tests)
//! hold both sides to it.
//!
//! # Real-time safety
//!
//! [`parse`], [`Meters::entries`] and [`MetersWriter`] never allocate, lock or panic: the writer
//! fills a buffer its caller owns.

use core::fmt;

/// The first two bytes of every meters message.
pub const METERS_MAGIC: [u8; 2] = *b"TM";
/// The layout version this module reads and writes.
pub const METERS_VERSION: u8 = 1;
/// Bytes before the first entry: magic, version, count.
pub const METERS_HEADER_LEN: usize = 5;
/// Bytes of one entry: the stream id and four level codes.
pub const METER_ENTRY_LEN: usize = 10;
/// Most entries one message carries (a hub room's clients).
pub const MAX_METER_ENTRIES: usize = 512;
/// Longest possible message, in bytes.
pub const MAX_METERS_LEN: usize = METERS_HEADER_LEN + MAX_METER_ENTRIES * METER_ENTRY_LEN;
/// The level code of silence.
pub const SILENT_CODE: u16 = 0xFFFF;

/// Why bytes are not a meters message, or why an entry could not be added to one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetersError {
    /// Shorter than its header, or than the entries it announces.
    Truncated { len: usize, needed: usize },
    /// Not starting with [`METERS_MAGIC`].
    BadMagic,
    /// A version this module does not read.
    UnsupportedVersion(u8),
    /// A count of 0 or above [`MAX_METER_ENTRIES`].
    BadCount(u16),
    /// Bytes after the last entry.
    TrailingBytes { len: usize, expected: usize },
    /// [`MetersWriter::push`]: the buffer, or the count, has no room for this entry.
    Full,
    /// [`MetersWriter::finish`]: no entry was added.
    Empty,
}

impl MetersError {
    /// The variant's name, as the golden vectors spell it (and `meters.ts` reports it).
    pub const fn name(&self) -> &'static str {
        match self {
            MetersError::Truncated { .. } => "Truncated",
            MetersError::BadMagic => "BadMagic",
            MetersError::UnsupportedVersion(_) => "UnsupportedVersion",
            MetersError::BadCount(_) => "BadCount",
            MetersError::TrailingBytes { .. } => "TrailingBytes",
            MetersError::Full => "Full",
            MetersError::Empty => "Empty",
        }
    }
}

impl fmt::Display for MetersError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MetersError::Truncated { len, needed } => {
                write!(
                    f,
                    "meters message of {len} bytes is cut short (needs {needed})"
                )
            }
            MetersError::TrailingBytes { len, expected } => write!(
                f,
                "meters message of {len} bytes has bytes after its last entry (ends at {expected})"
            ),
            MetersError::UnsupportedVersion(v) => {
                write!(f, "meters version {v} is not read here")
            }
            MetersError::BadCount(k) => write!(f, "meters message announces {k} entries"),
            _ => f.write_str(self.name()),
        }
    }
}

impl std::error::Error for MetersError {}

/// The level code of a linear magnitude (full scale 1.0): silence for 0, a negative or a
/// non-finite value.
pub fn level_code(linear: f32) -> u16 {
    if !(linear > 0.0 && linear.is_finite()) {
        return SILENT_CODE;
    }
    let centi_db_below = -2000.0 * linear.log10();
    if centi_db_below <= 0.0 {
        0
    } else {
        centi_db_below.round().min(f32::from(SILENT_CODE - 1)) as u16
    }
}

/// The dBFS a level code reads; `None` for silence.
pub fn code_dbfs(code: u16) -> Option<f32> {
    (code != SILENT_CODE).then(|| -f32::from(code) / 100.0)
}

/// One player's reading: its stream id and its level codes (peak left, peak right, RMS left,
/// RMS right).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterEntry {
    pub stream: u16,
    pub levels: [u16; 4],
}

/// A meters message whose structure has been checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meters<'a> {
    entries: &'a [u8],
}

impl<'a> Meters<'a> {
    /// How many entries it carries (1 ..= [`MAX_METER_ENTRIES`]).
    pub fn len(&self) -> usize {
        self.entries.len() / METER_ENTRY_LEN
    }

    /// Never true: a message carries at least one entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Its entries, in the order they were written.
    pub fn entries(&self) -> impl Iterator<Item = MeterEntry> + 'a {
        self.entries.chunks_exact(METER_ENTRY_LEN).map(|e| {
            let u = |k: usize| u16::from_le_bytes([e[k], e[k + 1]]);
            MeterEntry {
                stream: u(0),
                levels: [u(2), u(4), u(6), u(8)],
            }
        })
    }
}

/// Checks a whole meters message and returns it, or the first thing wrong with it.
pub fn parse(bytes: &[u8]) -> Result<Meters<'_>, MetersError> {
    let [m0, m1, version, c0, c1, entries @ ..] = bytes else {
        return Err(MetersError::Truncated {
            len: bytes.len(),
            needed: METERS_HEADER_LEN,
        });
    };
    if [*m0, *m1] != METERS_MAGIC {
        return Err(MetersError::BadMagic);
    }
    if *version != METERS_VERSION {
        return Err(MetersError::UnsupportedVersion(*version));
    }
    let count = u16::from_le_bytes([*c0, *c1]);
    let k = usize::from(count);
    if k == 0 || k > MAX_METER_ENTRIES {
        return Err(MetersError::BadCount(count));
    }
    let expected = METERS_HEADER_LEN + k * METER_ENTRY_LEN;
    if bytes.len() < expected {
        return Err(MetersError::Truncated {
            len: bytes.len(),
            needed: expected,
        });
    }
    if bytes.len() > expected {
        return Err(MetersError::TrailingBytes {
            len: bytes.len(),
            expected,
        });
    }
    Ok(Meters { entries })
}

/// Writes a meters message into a buffer its caller owns: [`MetersWriter::push`] each player,
/// then [`MetersWriter::finish`] for the message's length.
#[derive(Debug)]
pub struct MetersWriter<'b> {
    buf: &'b mut [u8],
    count: usize,
}

impl<'b> MetersWriter<'b> {
    /// Starts a message at the front of `buf` (which needs room for the header at least).
    pub fn new(buf: &'b mut [u8]) -> Result<MetersWriter<'b>, MetersError> {
        let Some(header) = buf.get_mut(..METERS_HEADER_LEN) else {
            return Err(MetersError::Full);
        };
        header.copy_from_slice(&[METERS_MAGIC[0], METERS_MAGIC[1], METERS_VERSION, 0, 0]);
        Ok(MetersWriter { buf, count: 0 })
    }

    /// Adds one player's reading: `levels` linear (peak left, peak right, RMS left, RMS right,
    /// as [`crate::mix::Meter::to_f64s`] orders them). Refused, leaving the message as it was,
    /// when the buffer or the count is full.
    pub fn push(&mut self, stream: u16, levels: [f32; 4]) -> Result<(), MetersError> {
        let at = METERS_HEADER_LEN + self.count * METER_ENTRY_LEN;
        if self.count == MAX_METER_ENTRIES || at + METER_ENTRY_LEN > self.buf.len() {
            return Err(MetersError::Full);
        }
        let entry = &mut self.buf[at..at + METER_ENTRY_LEN];
        entry[..2].copy_from_slice(&stream.to_le_bytes());
        for (k, level) in levels.into_iter().enumerate() {
            entry[2 + 2 * k..4 + 2 * k].copy_from_slice(&level_code(level).to_le_bytes());
        }
        self.count += 1;
        Ok(())
    }

    /// Entries added so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Writes the count and returns the message's length in the buffer.
    pub fn finish(self) -> Result<usize, MetersError> {
        if self.count == 0 {
            return Err(MetersError::Empty);
        }
        self.buf[3..5].copy_from_slice(&(self.count as u16).to_le_bytes());
        Ok(METERS_HEADER_LEN + self.count * METER_ENTRY_LEN)
    }
}

#[cfg(test)]
mod tests;
