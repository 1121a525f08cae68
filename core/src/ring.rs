//! Lock-free single-producer/single-consumer ring of variable-length records in one shared buffer.
//!
//! Packets cross threads through rings: the net side writes received packets into the *inbound*
//! ring and the audio worklet reads them; the worklet writes captured packets into the *outbound*
//! ring and the net side sends them. In the browser the buffer is a `SharedArrayBuffer`; natively
//! it is a [`SharedRing`]. This module defines the byte layout once; `app/src/audio/ring.ts`
//! mirrors every constant (a test here reads that file and compares), and a golden image
//! (`tests/vectors/ring-golden.bin`) proves both sides write and read identical bytes.
//!
//! # Layout
//!
//! ```text
//! ring image: little-endian u32 words, then the data area
//!
//! byte   0 +-----------------------------------------------+ producer cache line
//!          | w0  write            byte counter, wraps 2^32 |   (only the producer stores)
//!          | w1  dropped_records  pushes refused           |
//!          | w2  dropped_bytes    their payload bytes      |
//!          | w3..w15 reserved, 0                           |
//! byte  64 +-----------------------------------------------+ consumer cache line
//!          | w16 read             byte counter, wraps 2^32 |   (only the consumer stores)
//!          | w17 records_read     records consumed         |
//!          | w18 resyncs          corrupt data skipped     |
//!          | w19..w31 reserved, 0                          |
//! byte 128 +-----------------------------------------------+ data area, `capacity` bytes,
//!          | records; position = counter & (capacity - 1)  |   a power of two
//!          +-----------------------------------------------+
//!
//! record, at a 4-aligned position, never split across the end of the data area:
//!   +0  u16 len    payload bytes, 0..=MAX_PAYLOAD (0xFFFF = wrap marker)
//!   +2  u16 tag    peer slot (inbound) or destination (outbound)
//!   +4  u32 time   host timestamp, wrapping (e.g. microseconds)
//!   +8  payload    len bytes, then zero bytes up to a multiple of 4
//! ```
//!
//! The counters `write` and `read` count bytes since the ring was created and wrap at 2^32 (the
//! capacity divides 2^32, so positions stay consistent across the wrap). Both are multiples of 4,
//! and `write - read` (wrapping) is the number of unread bytes, `0..=capacity`.
//!
//! **Wrap.** Every record occupies `8 + len` bytes rounded up to 4. When that does not fit between
//! the write position and the end of the data area, the producer writes a wrap marker there (the 4
//! bytes `FF FF 00 00`: len = 0xFFFF, tag = 0) and puts the record at position 0; the bytes it
//! skipped count as used until the consumer passes them. A marker always fits: positions are
//! 4-aligned, so at least 4 bytes remain before the end. The producer publishes a marker only
//! together with the record that follows it.
//!
//! **Capacity.** A power of two from [`MIN_CAPACITY`] to [`MAX_CAPACITY`]. The minimum is at least
//! twice the largest record, so an empty ring accepts any record wherever its counters stand: a
//! record of `s <= capacity / 2` bytes that does not fit before the end leaves fewer than `s` bytes
//! there, so the skipped tail plus the record take less than the whole ring.
//!
//! **Overflow.** A record that does not fit in the free space is refused, never written over
//! unread data; refusals are counted in `dropped_records` / `dropped_bytes` by the owners of the
//! ring ([`Producer::push`], the TypeScript `RingWriter`), not by the pure [`write_record`].
//!
//! **Publication.** The producer copies the record into the data area, then stores `write` with
//! release ordering; the consumer loads `write` with acquire ordering before reading the bytes.
//! Symmetrically the consumer stores `read` with release ordering once it is done with a record,
//! and the producer loads `read` with acquire ordering before reusing the space. Atomics touch only
//! the header words; one side stores each word.
//!
//! **Corruption.** Counters or lengths that the layout makes impossible yield
//! [`RingError::BadIndices`] or [`RingError::BadRecord`]. The consumer then resyncs: it jumps
//! `read` to `write`, dropping whatever was unread, and counts it in `resyncs`.
//!
//! # Two ways to use it
//!
//! - [`read_record`] and [`write_record`] are pure functions over a data slice and the two counters.
//!   The WASM engine uses them on a *mirror* of the data area in its own linear memory: the worklet
//!   copies published bytes into the mirror (inbound) or published mirror bytes back into the
//!   shared buffer (outbound) and passes the counters in and out as numbers.
//! - [`SharedRing`] owns a buffer with the whole layout and splits into one [`Producer`] and one
//!   [`Consumer`] handle for native threads (tests, benchmarks, the hub).
//!
//! # Real-time safety
//!
//! [`read_record`], [`write_record`], [`Producer::push`], [`Consumer::pop`], [`SharedRing::counters`]
//! and the other accessors never allocate, lock, block or panic. Only [`SharedRing::new`] and
//! [`SharedRing::with_start`] allocate.

use core::cell::UnsafeCell;
use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

/// Bytes in a cache line; each side's header words sit on a line of their own.
pub const CACHE_LINE: usize = 64;
/// Byte offset of the data area in the ring image (two header cache lines).
pub const DATA_OFFSET: usize = 128;
/// u32 words in the header (`DATA_OFFSET / 4`).
pub const HEADER_WORDS: usize = 32;
/// Word index of `write`, the producer's byte counter.
pub const WRITE_WORD: usize = 0;
/// Word index of `dropped_records`: records the producer refused (full ring, too large, bad
/// counters). Producer-owned, wrapping.
pub const DROPPED_RECORDS_WORD: usize = 1;
/// Word index of `dropped_bytes`: payload bytes of the refused records. Producer-owned, wrapping.
pub const DROPPED_BYTES_WORD: usize = 2;
/// Word index of `read`, the consumer's byte counter (first word of the second cache line).
pub const READ_WORD: usize = 16;
/// Word index of `records_read`: records consumed. Consumer-owned, wrapping.
pub const RECORDS_READ_WORD: usize = 17;
/// Word index of `resyncs`: times the consumer found impossible data and jumped `read` to
/// `write`. Consumer-owned, wrapping.
pub const RESYNCS_WORD: usize = 18;
/// Bytes in a record header (len, tag, time).
pub const RECORD_HEADER_LEN: usize = 8;
/// Offset of the u16 payload length in a record header.
pub const LEN_OFFSET: usize = 0;
/// Offset of the u16 tag in a record header.
pub const TAG_OFFSET: usize = 2;
/// Offset of the u32 time in a record header.
pub const TIME_OFFSET: usize = 4;
/// Records start at multiples of this many bytes; payloads are zero-padded to it.
pub const RECORD_ALIGN: usize = 4;
/// Largest payload a record carries (a packet is at most `packet::MAX_PACKET_LEN` = 2072 bytes).
pub const MAX_PAYLOAD: usize = 4096;
/// Largest record: header plus the largest payload (already a multiple of 4).
pub const MAX_RECORD_LEN: usize = RECORD_HEADER_LEN + MAX_PAYLOAD;
/// `len` value of a wrap marker: the rest of the data area is skipped, the next record is at 0.
pub const WRAP_MARKER: u16 = 0xFFFF;
/// Smallest data area: the smallest power of two holding two largest records.
pub const MIN_CAPACITY: usize = 16_384;
/// Largest data area (1 GiB); keeps `write - read` unambiguous and the image within JS limits.
pub const MAX_CAPACITY: usize = 1 << 30;

const _: () = assert!(DATA_OFFSET == 2 * CACHE_LINE && HEADER_WORDS * 4 == DATA_OFFSET);
const _: () = assert!(READ_WORD * 4 == CACHE_LINE && RESYNCS_WORD < HEADER_WORDS);
const _: () = assert!(MAX_RECORD_LEN % RECORD_ALIGN == 0 && MAX_PAYLOAD < WRAP_MARKER as usize);
const _: () = assert!(2 * MAX_RECORD_LEN <= MIN_CAPACITY && MIN_CAPACITY.is_power_of_two());
const _: () = assert!(MAX_CAPACITY.is_power_of_two() && MAX_CAPACITY <= 1 << 31);

/// The first 4 bytes of a wrap marker as they appear in the data area.
const MARKER_BYTES: [u8; 4] = [0xFF, 0xFF, 0x00, 0x00];

/// Why a record could not be written or read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The record does not fit in the free space now; nothing was written.
    Full,
    /// The payload is longer than [`MAX_PAYLOAD`].
    TooLarge,
    /// The data area is not a power of two in `MIN_CAPACITY..=MAX_CAPACITY`.
    BadCapacity,
    /// A counter is not a multiple of 4, or `write - read` exceeds the capacity.
    BadIndices,
    /// A record header in the published bytes is impossible (length too large, record running
    /// past `write` or the end of the data area, misplaced wrap marker).
    BadRecord,
}

impl RingError {
    /// The number the TypeScript side uses for this error (`RingStatus` in `ring.ts`); negative,
    /// so it can share a return value with a counter.
    pub const fn code(self) -> i32 {
        match self {
            RingError::Full => -1,
            RingError::TooLarge => -2,
            RingError::BadCapacity => -3,
            RingError::BadIndices => -4,
            RingError::BadRecord => -5,
        }
    }
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RingError::Full => "ring full: record refused",
            RingError::TooLarge => "record payload larger than the ring's maximum",
            RingError::BadCapacity => "ring capacity is not a supported power of two",
            RingError::BadIndices => "ring counters are misaligned or further apart than capacity",
            RingError::BadRecord => "ring holds an impossible record header",
        })
    }
}

impl std::error::Error for RingError {}

/// One record read from the ring; `payload` borrows the data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Peer slot (inbound) or destination (outbound).
    pub tag: u16,
    /// Host timestamp, wrapping.
    pub time: u32,
    /// The payload bytes, without padding.
    pub payload: &'a [u8],
}

/// Whether `capacity` is a valid data-area size.
pub const fn is_valid_capacity(capacity: usize) -> bool {
    capacity.is_power_of_two() && capacity >= MIN_CAPACITY && capacity <= MAX_CAPACITY
}

/// Bytes of a whole ring image (header plus data area) for a data area of `capacity` bytes.
pub const fn ring_bytes(capacity: usize) -> usize {
    DATA_OFFSET + capacity
}

/// Bytes a record with a payload of `len` bytes occupies (header, payload, padding).
pub const fn record_len(len: usize) -> usize {
    RECORD_HEADER_LEN + len.div_ceil(RECORD_ALIGN) * RECORD_ALIGN
}

fn check_capacity(len: usize) -> Result<usize, RingError> {
    if is_valid_capacity(len) {
        Ok(len)
    } else {
        Err(RingError::BadCapacity)
    }
}

/// Unread bytes between the counters, checked against the layout's invariants.
fn unread(capacity: usize, read: u32, write: u32) -> Result<usize, RingError> {
    let align = RECORD_ALIGN as u32 - 1;
    let used = write.wrapping_sub(read) as usize;
    if read & align != 0 || write & align != 0 || used > capacity {
        return Err(RingError::BadIndices);
    }
    Ok(used)
}

/// Where a record of `len` payload bytes goes.
struct Placement {
    /// Position of the wrap marker, if the record skips to the start.
    marker: Option<usize>,
    /// Position of the record.
    start: usize,
    /// Bytes of the record.
    size: usize,
    /// `write` after the record.
    next: u32,
}

fn place(capacity: usize, write: u32, read: u32, len: usize) -> Result<Placement, RingError> {
    if len > MAX_PAYLOAD {
        return Err(RingError::TooLarge);
    }
    let free = capacity - unread(capacity, read, write)?;
    let size = record_len(len);
    let pos = write as usize & (capacity - 1);
    let to_end = capacity - pos;
    let (marker, start, skip) = if size > to_end {
        (Some(pos), 0, to_end)
    } else {
        (None, pos, 0)
    };
    if skip + size > free {
        return Err(RingError::Full);
    }
    // skip + size <= capacity <= 2^30: the sum fits a u32.
    let next = write.wrapping_add((skip + size) as u32);
    Ok(Placement {
        marker,
        start,
        size,
        next,
    })
}

/// Fill `dst` (exactly `record_len(payload.len())` bytes) with a record.
fn encode(dst: &mut [u8], tag: u16, time: u32, payload: &[u8]) {
    let len = payload.len() as u16;
    let (head, rest) = dst.split_at_mut(RECORD_HEADER_LEN);
    head[LEN_OFFSET..LEN_OFFSET + 2].copy_from_slice(&len.to_le_bytes());
    head[TAG_OFFSET..TAG_OFFSET + 2].copy_from_slice(&tag.to_le_bytes());
    head[TIME_OFFSET..TIME_OFFSET + 4].copy_from_slice(&time.to_le_bytes());
    let (body, pad) = rest.split_at_mut(payload.len());
    body.copy_from_slice(payload);
    pad.fill(0);
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

/// Decode the record at the read position from the published bytes: `first` runs from the read
/// position to `write` or to the end of the data area (`to_end` bytes away), whichever is nearer;
/// `second` holds the published bytes from position 0 (empty unless `first` reaches the end).
/// Returns the record and the bytes it consumes (including a skipped tail).
fn decode<'a>(
    first: &'a [u8],
    second: &'a [u8],
    to_end: usize,
) -> Result<(Record<'a>, usize), RingError> {
    let (bytes, skipped) = match u16_at(first, LEN_OFFSET) {
        Some(WRAP_MARKER) if first.len() == to_end => (second, to_end),
        Some(_) => (first, 0),
        None => return Err(RingError::BadRecord),
    };
    let head = bytes.get(..RECORD_HEADER_LEN).ok_or(RingError::BadRecord)?;
    let len = u16::from_le_bytes([head[0], head[1]]) as usize;
    let tag = u16::from_le_bytes([head[2], head[3]]);
    let time = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    // A marker where it cannot be (twice, or not followed by published bytes) fails here too.
    if len > MAX_PAYLOAD {
        return Err(RingError::BadRecord);
    }
    let size = record_len(len);
    let payload = bytes
        .get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + len)
        .filter(|_| size <= bytes.len())
        .ok_or(RingError::BadRecord)?;
    Ok((Record { tag, time, payload }, skipped + size))
}

/// Read the record at `read` from a data area (`data.len()` = capacity) holding the bytes published
/// up to `write`. Returns the record and the new `read`, or `None` when the ring is empty.
///
/// The caller stores the new `read` only when it is done with the record. On an error it resyncs
/// (sets `read = write` and counts it); each success moves `read` at least 8 bytes towards
/// `write`, so a drain loop ends. Real-time safe: no allocation, no panic.
pub fn read_record(
    data: &[u8],
    read: u32,
    write: u32,
) -> Result<Option<(Record<'_>, u32)>, RingError> {
    let capacity = check_capacity(data.len())?;
    let used = unread(capacity, read, write)?;
    if used == 0 {
        return Ok(None);
    }
    let pos = read as usize & (capacity - 1);
    let to_end = capacity - pos;
    let first_len = used.min(to_end);
    let first = data
        .get(pos..pos + first_len)
        .ok_or(RingError::BadIndices)?;
    let second = data.get(..used - first_len).ok_or(RingError::BadIndices)?;
    let (record, consumed) = decode(first, second, to_end)?;
    // consumed <= used <= capacity <= 2^30.
    Ok(Some((record, read.wrapping_add(consumed as u32))))
}

/// Write a record at `write` into a data area (`data.len()` = capacity) whose consumer has reached
/// `read`. Returns the new `write`, which the caller publishes after this returns; nothing is
/// written on an error, and counting a refusal is the caller's job.
///
/// Only free bytes are touched. Padding is zeroed, so equal sequences give equal bytes. Real-time
/// safe: no allocation, no panic.
pub fn write_record(
    data: &mut [u8],
    write: u32,
    read: u32,
    tag: u16,
    time: u32,
    payload: &[u8],
) -> Result<u32, RingError> {
    let capacity = check_capacity(data.len())?;
    let at = place(capacity, write, read, payload.len())?;
    if let Some(pos) = at.marker {
        data[pos..pos + MARKER_BYTES.len()].copy_from_slice(&MARKER_BYTES);
    }
    encode(&mut data[at.start..at.start + at.size], tag, time, payload);
    Ok(at.next)
}

/// All header counters at one moment (each loaded on its own; they may be mid-update).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Producer's byte counter.
    pub write: u32,
    /// Consumer's byte counter.
    pub read: u32,
    /// Records the producer refused.
    pub dropped_records: u32,
    /// Payload bytes of the refused records.
    pub dropped_bytes: u32,
    /// Records the consumer consumed.
    pub records_read: u32,
    /// Times the consumer skipped impossible data.
    pub resyncs: u32,
}

/// One cache line of the ring image.
#[repr(C, align(64))]
struct Line(UnsafeCell<[u8; CACHE_LINE]>);

/// A native ring: one 64-byte-aligned buffer with the full layout (header lines and data area),
/// byte for byte what the browser keeps in its `SharedArrayBuffer`.
///
/// [`SharedRing::split`] hands out the only [`Producer`] and [`Consumer`]; they may live on two
/// threads (e.g. with `std::thread::scope`).
pub struct SharedRing {
    lines: Box<[Line]>,
    capacity: usize,
}

// SAFETY: shared access goes through atomics on the header words, or through the one Producer and
// one Consumer (`split` takes `&mut self`), each touching only the data bytes the counter protocol
// gives it at that moment: the producer the free bytes, the consumer the published unread bytes.
unsafe impl Sync for SharedRing {}

impl SharedRing {
    /// A ring with a data area of `capacity` bytes and both counters at 0. Allocates.
    pub fn new(capacity: usize) -> Result<Self, RingError> {
        Self::with_start(capacity, 0)
    }

    /// A ring whose counters both start at `start` (a multiple of 4), e.g. near 2^32 to exercise
    /// the counter wrap. Allocates.
    pub fn with_start(capacity: usize, start: u32) -> Result<Self, RingError> {
        let capacity = check_capacity(capacity)?;
        unread(capacity, start, start)?;
        let lines = (0..ring_bytes(capacity) / CACHE_LINE)
            .map(|_| Line(UnsafeCell::new([0; CACHE_LINE])))
            .collect();
        let ring = SharedRing { lines, capacity };
        ring.word(WRITE_WORD).store(start, Ordering::Relaxed);
        ring.word(READ_WORD).store(start, Ordering::Relaxed);
        Ok(ring)
    }

    /// Bytes in the data area.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The header counters, each loaded relaxed. Real-time safe.
    pub fn counters(&self) -> Counters {
        let load = |i| self.word(i).load(Ordering::Relaxed);
        Counters {
            write: load(WRITE_WORD),
            read: load(READ_WORD),
            dropped_records: load(DROPPED_RECORDS_WORD),
            dropped_bytes: load(DROPPED_BYTES_WORD),
            records_read: load(RECORDS_READ_WORD),
            resyncs: load(RESYNCS_WORD),
        }
    }

    /// The one producer and the one consumer of this ring.
    pub fn split(&mut self) -> (Producer<'_>, Consumer<'_>) {
        let ring: &SharedRing = self;
        (Producer { ring }, Consumer { ring })
    }

    /// The whole ring image, header and data (no handle is alive while this borrow lasts).
    pub fn image(&mut self) -> &[u8] {
        // SAFETY: `&mut self` excludes every other access; the lines are one allocation of
        // `ring_bytes(capacity)` initialized bytes.
        unsafe { core::slice::from_raw_parts(self.base(), ring_bytes(self.capacity)) }
    }

    /// The whole ring image, writable (e.g. to restore a saved image or to inject corruption).
    pub fn image_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `image`.
        unsafe { core::slice::from_raw_parts_mut(self.base(), ring_bytes(self.capacity)) }
    }

    fn base(&self) -> *mut u8 {
        // The lines are all `UnsafeCell`, so writing through this pointer is interior mutation.
        self.lines.as_ptr() as *mut u8
    }

    fn word(&self, index: usize) -> &AtomicU32 {
        debug_assert!(index < HEADER_WORDS);
        // SAFETY: the header words are 4-aligned (the buffer is 64-aligned), inside the buffer,
        // live as long as `self`, and are only ever accessed atomically while shared.
        unsafe { AtomicU32::from_ptr(self.base().add(index * 4).cast::<u32>()) }
    }

    fn data_ptr(&self) -> *mut u8 {
        // SAFETY: DATA_OFFSET < ring_bytes(capacity).
        unsafe { self.base().add(DATA_OFFSET) }
    }

    /// Add `by` to a counter this side owns (only this side stores it, so load + store is exact).
    fn bump(&self, index: usize, by: u32) {
        let word = self.word(index);
        word.store(
            word.load(Ordering::Relaxed).wrapping_add(by),
            Ordering::Relaxed,
        );
    }
}

/// The writing end of a [`SharedRing`].
pub struct Producer<'a> {
    ring: &'a SharedRing,
}

impl Producer<'_> {
    /// Copy a record into the ring and publish it. A refused record (any error) is counted in
    /// `dropped_records` and `dropped_bytes`. Real-time safe.
    pub fn push(&mut self, tag: u16, time: u32, payload: &[u8]) -> Result<(), RingError> {
        let ring = self.ring;
        let write = ring.word(WRITE_WORD).load(Ordering::Relaxed);
        let read = ring.word(READ_WORD).load(Ordering::Acquire);
        let at = match place(ring.capacity, write, read, payload.len()) {
            Ok(at) => at,
            Err(e) => {
                ring.bump(DROPPED_RECORDS_WORD, 1);
                ring.bump(DROPPED_BYTES_WORD, payload.len() as u32);
                return Err(e);
            }
        };
        // SAFETY: `place` checked that the marker and the record lie in free bytes inside the data
        // area; the consumer reads no free byte until `write` is published below.
        unsafe {
            if let Some(pos) = at.marker {
                let marker = ring.data_ptr().add(pos);
                core::ptr::copy_nonoverlapping(MARKER_BYTES.as_ptr(), marker, MARKER_BYTES.len());
            }
            let dst = core::slice::from_raw_parts_mut(ring.data_ptr().add(at.start), at.size);
            encode(dst, tag, time, payload);
        }
        ring.word(WRITE_WORD).store(at.next, Ordering::Release);
        Ok(())
    }

    /// Unread bytes as the producer sees them (the consumer may have read more meanwhile).
    pub fn used(&self) -> usize {
        let write = self.ring.word(WRITE_WORD).load(Ordering::Relaxed);
        let read = self.ring.word(READ_WORD).load(Ordering::Relaxed);
        (write.wrapping_sub(read) as usize).min(self.ring.capacity)
    }
}

/// The reading end of a [`SharedRing`].
pub struct Consumer<'a> {
    ring: &'a SharedRing,
}

impl Consumer<'_> {
    /// Hand the next record to `visit`, then release its bytes. `Ok(None)` when the ring is empty.
    ///
    /// On an error the consumer has already resynced (`read` = `write`, `resyncs` + 1); the unread
    /// records are lost. Real-time safe if `visit` is.
    pub fn pop<R>(&mut self, visit: impl FnOnce(Record<'_>) -> R) -> Result<Option<R>, RingError> {
        let ring = self.ring;
        let read = ring.word(READ_WORD).load(Ordering::Relaxed);
        let write = ring.word(WRITE_WORD).load(Ordering::Acquire);
        let capacity = ring.capacity;
        let decoded = unread(capacity, read, write).and_then(|used| {
            if used == 0 {
                return Ok(None);
            }
            let pos = read as usize & (capacity - 1);
            let to_end = capacity - pos;
            let first_len = used.min(to_end);
            // SAFETY: both slices lie inside the data area and hold published unread bytes, which
            // the producer does not touch until `read` moves past them (after `visit` returns).
            let (first, second) = unsafe {
                (
                    core::slice::from_raw_parts(ring.data_ptr().add(pos), first_len),
                    core::slice::from_raw_parts(ring.data_ptr(), used - first_len),
                )
            };
            decode(first, second, to_end).map(Some)
        });
        match decoded {
            Ok(None) => Ok(None),
            Ok(Some((record, consumed))) => {
                let out = visit(record);
                let next = read.wrapping_add(consumed as u32);
                ring.word(READ_WORD).store(next, Ordering::Release);
                ring.bump(RECORDS_READ_WORD, 1);
                Ok(Some(out))
            }
            Err(e) => {
                ring.word(READ_WORD).store(write, Ordering::Release);
                ring.bump(RESYNCS_WORD, 1);
                Err(e)
            }
        }
    }

    /// Whether no published record is waiting.
    pub fn is_empty(&self) -> bool {
        let read = self.ring.word(READ_WORD).load(Ordering::Relaxed);
        self.ring.word(WRITE_WORD).load(Ordering::Acquire) == read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::time::{Duration, Instant};

    use crate::testing::XorShift64 as Rng;

    /// Payload sizes: mostly small, some packet-sized, some up to and at the maximum.
    fn payload_len(rng: &mut Rng) -> usize {
        match rng.below(10) {
            0..=5 => rng.below(65) as usize,
            6..=8 => rng.below(2101) as usize,
            _ if rng.below(4) == 0 => MAX_PAYLOAD,
            _ => rng.below(MAX_PAYLOAD as u64 + 1) as usize,
        }
    }

    /// Payload byte `k` of a record with fill seed `seed` (the golden JSON states the same rule).
    fn fill_byte(seed: u32, k: usize) -> u8 {
        (seed as usize + 7 * k) as u8
    }

    fn payload(seed: u32, len: usize) -> Vec<u8> {
        (0..len).map(|k| fill_byte(seed, k)).collect()
    }

    type Entry = (u16, u32, Vec<u8>);

    /// The oracle: a queue of records, and byte accounting with u64 counters that never wrap,
    /// following the layout's rules in their plainest form.
    struct Oracle {
        capacity: u64,
        write: u64,
        read: u64,
        queue: VecDeque<(Entry, u64)>,
        wraps: u32,
    }

    impl Oracle {
        fn new(capacity: usize, start: u32) -> Self {
            let start = start as u64;
            let capacity = capacity as u64;
            Oracle {
                capacity,
                write: start,
                read: start,
                queue: VecDeque::new(),
                wraps: 0,
            }
        }

        fn push(&mut self, entry: Entry) -> bool {
            let size = 8 + (entry.2.len() as u64).div_ceil(4) * 4;
            let to_end = self.capacity - self.write % self.capacity;
            let need = if size > to_end { to_end + size } else { size };
            if self.write - self.read + need > self.capacity {
                return false;
            }
            self.wraps += u32::from(need > size);
            self.write += need;
            self.queue.push_back((entry, need));
            true
        }

        fn pop(&mut self) -> Option<Entry> {
            let (entry, need) = self.queue.pop_front()?;
            self.read += need;
            Some(entry)
        }
    }

    fn owned(record: Record<'_>) -> Entry {
        (record.tag, record.time, record.payload.to_vec())
    }

    /// Seeded random interleavings of pushes and pops, run in lockstep on the pure functions over
    /// a plain buffer and on a `SharedRing`, both against the oracle. Exact: every result, record
    /// and counter must match; at the end both data areas must be byte-identical.
    #[test]
    fn random_sequences_match_oracle() {
        let starts = [
            0,
            0u32.wrapping_sub(4),
            0u32.wrapping_sub(20_000),
            0x8000_0004,
        ];
        for (seed, &start) in (1u64..).zip(starts.iter()) {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut oracle = Oracle::new(MIN_CAPACITY, start);
            let mut data = vec![0u8; MIN_CAPACITY];
            let (mut write, mut read) = (start, start);
            let mut ring = SharedRing::with_start(MIN_CAPACITY, start).expect("valid ring");
            let (mut refused, mut popped, mut empties, mut wrapped_counter) =
                (0u32, 0u32, 0, false);
            for step in 0..30_000u32 {
                // Alternate push-heavy and pop-heavy phases so the ring fills and drains.
                let push_percent = if (step / 700) % 2 == 0 { 75 } else { 35 };
                let (mut producer, mut consumer) = ring.split();
                if rng.below(100) < push_percent {
                    let entry = (rng.next() as u16, rng.next() as u32, {
                        let len = payload_len(&mut rng);
                        payload(rng.next() as u32, len)
                    });
                    let pure = write_record(&mut data, write, read, entry.0, entry.1, &entry.2);
                    let shared = producer.push(entry.0, entry.1, &entry.2);
                    let expected = oracle.push(entry);
                    assert_eq!(pure.is_ok(), expected, "seed {seed} step {step}");
                    match pure {
                        Ok(next) => {
                            wrapped_counter |= next < write;
                            write = next;
                            assert_eq!(shared, Ok(()));
                        }
                        Err(e) => {
                            assert_eq!(e, RingError::Full);
                            assert_eq!(shared, Err(RingError::Full));
                            refused += 1;
                        }
                    }
                    assert_eq!(write, oracle.write as u32);
                } else {
                    let expected = oracle.pop();
                    let pure = read_record(&data, read, write).expect("valid ring");
                    let shared = consumer.pop(owned).expect("valid ring");
                    assert_eq!(
                        pure.map(|(r, _)| owned(r)),
                        expected,
                        "seed {seed} step {step}"
                    );
                    assert_eq!(shared, expected);
                    match pure {
                        Some((_, next)) => {
                            read = next;
                            popped += 1;
                        }
                        None => empties += 1,
                    }
                    assert_eq!(read, oracle.read as u32);
                }
                let c = ring.counters();
                assert_eq!((c.write, c.read), (write, read));
                assert_eq!(
                    (c.dropped_records, c.records_read, c.resyncs),
                    (refused, popped, 0)
                );
            }
            assert_eq!(&ring.image()[DATA_OFFSET..], &data[..]);
            // The sequence must have exercised every path.
            assert!(
                refused > 100 && empties > 100 && oracle.wraps > 100,
                "seed {seed}"
            );
            if start > 0xFFFF_0000 {
                assert!(wrapped_counter, "seed {seed}: counter never wrapped");
            }
        }
    }

    #[test]
    fn record_bytes_known_answer() {
        let mut data = vec![0x55u8; MIN_CAPACITY];
        let next = write_record(&mut data, 0, 0, 0x0102, 0x0304_0506, &[0xAA, 0xBB, 0xCC]);
        assert_eq!(next, Ok(12));
        let expected = [
            0x03, 0x00, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0xAA, 0xBB, 0xCC, 0x00,
        ];
        assert_eq!(&data[..12], &expected);
        assert_eq!(data[12], 0x55, "bytes past the record untouched");
        let (record, read) = read_record(&data, 0, 12)
            .expect("valid")
            .expect("one record");
        assert_eq!(
            record,
            Record {
                tag: 0x0102,
                time: 0x0304_0506,
                payload: &[0xAA, 0xBB, 0xCC]
            }
        );
        assert_eq!(read, 12);
        // Sizes: header + payload rounded up to 4.
        let sizes = [
            (0, 8),
            (1, 12),
            (4, 12),
            (5, 16),
            (MAX_PAYLOAD, MAX_RECORD_LEN),
        ];
        for (len, size) in sizes {
            assert_eq!(record_len(len), size);
        }
    }

    /// Counters crossing 2^32: positions and unread counts stay right. The counters start 8 bytes
    /// before the end of the data area, so the first record leaves a wrap marker there.
    #[test]
    fn counters_wrap_past_2_pow_32() {
        let start = 0u32.wrapping_sub(8);
        let mut ring = SharedRing::with_start(MIN_CAPACITY, start).expect("valid ring");
        let (mut producer, mut consumer) = ring.split();
        for i in 0..3u32 {
            producer.push(i as u16, i, &payload(i, 100)).expect("room");
        }
        assert_eq!(
            producer.used(),
            8 + 3 * 108,
            "skipped tail + three 108-byte records"
        );
        for i in 0..3u32 {
            let got = consumer.pop(owned).expect("valid").expect("a record");
            assert_eq!(got, (i as u16, i, payload(i, 100)));
        }
        assert!(consumer.is_empty());
        let c = ring.counters();
        assert_eq!((c.write, c.read), (324, 324), "start + 332 wraps to 324");
        assert_eq!(
            &ring.image()[DATA_OFFSET + MIN_CAPACITY - 8..][..4],
            &MARKER_BYTES
        );
        assert_eq!(
            &ring.image()[DATA_OFFSET..][..4],
            &[100, 0, 0, 0],
            "first record at 0"
        );
    }

    #[test]
    fn full_ring_refuses_and_counts() {
        let mut ring = SharedRing::new(MIN_CAPACITY).expect("valid ring");
        let big = payload(9, 1000); // 1008-byte records: 16 fit, 256 bytes remain
        {
            let (mut producer, _) = ring.split();
            for i in 0..16u16 {
                producer.push(i, 0, &big).expect("room");
            }
            assert_eq!(producer.push(16, 0, &big), Err(RingError::Full));
        }
        let before = ring.image().to_vec();
        {
            let (mut producer, _) = ring.split();
            assert_eq!(producer.push(16, 0, &big), Err(RingError::Full));
        }
        let c = ring.counters();
        assert_eq!((c.dropped_records, c.dropped_bytes), (2, 2000));
        // A refused push changes nothing but the drop counters.
        let after = ring.image();
        assert_eq!(after[12..], before[12..]);
        {
            let (mut producer, mut consumer) = ring.split();
            producer.push(100, 0, &[]).expect("8 bytes fit in 256");
            assert_eq!(producer.push(17, 0, &big), Err(RingError::Full));
            // Freeing 1008 bytes leaves 248 + 1008: exactly the marker tail plus the record.
            assert_eq!(consumer.pop(|r| r.tag).expect("valid"), Some(0));
            producer.push(17, 0, &big).expect("fits exactly");
            assert_eq!(producer.used(), MIN_CAPACITY);
            assert_eq!(producer.push(18, 0, &[]), Err(RingError::Full));
            let mut tags = Vec::new();
            while let Some(tag) = consumer.pop(|r| r.tag).expect("valid") {
                tags.push(tag);
            }
            let expected: Vec<u16> = (1..16).chain([100, 17]).collect();
            assert_eq!(tags, expected);
        }
        let c = ring.counters();
        assert_eq!(
            (c.dropped_records, c.dropped_bytes, c.records_read),
            (4, 3000, 18)
        );
        assert_eq!(&ring.image()[DATA_OFFSET + 16_136..][..4], &MARKER_BYTES);
    }

    #[test]
    fn too_large_and_bad_shapes_are_errors() {
        let mut data = vec![0u8; MIN_CAPACITY];
        let big = vec![1u8; MAX_PAYLOAD + 1];
        assert_eq!(
            write_record(&mut data, 0, 0, 0, 0, &big),
            Err(RingError::TooLarge)
        );
        let mut ring = SharedRing::new(MIN_CAPACITY).expect("valid ring");
        {
            let (mut producer, _) = ring.split();
            assert_eq!(producer.push(0, 0, &big), Err(RingError::TooLarge));
        }
        let c = ring.counters();
        assert_eq!((c.write, c.dropped_records, c.dropped_bytes), (0, 1, 4097));
        for len in [0, 8192, MIN_CAPACITY + 4, 3 * MIN_CAPACITY] {
            let mut odd = vec![0u8; len];
            assert_eq!(
                write_record(&mut odd, 0, 0, 0, 0, &[]),
                Err(RingError::BadCapacity)
            );
            assert_eq!(read_record(&odd, 0, 0), Err(RingError::BadCapacity));
            assert!(SharedRing::new(len).is_err());
        }
        assert!(SharedRing::with_start(MIN_CAPACITY, 2).is_err());
        for (read, write) in [(2, 2), (0, 6), (0, MIN_CAPACITY as u32 + 4), (8, 4)] {
            assert_eq!(read_record(&data, read, write), Err(RingError::BadIndices));
            assert_eq!(
                write_record(&mut data, write, read, 0, 0, &[]),
                Err(RingError::BadIndices)
            );
        }
    }

    /// The capacity rule: an empty ring takes the largest record wherever its counters stand.
    #[test]
    fn empty_ring_accepts_largest_record_anywhere() {
        let mut data = vec![0u8; MIN_CAPACITY];
        let big = payload(3, MAX_PAYLOAD);
        for pos in (0..MIN_CAPACITY as u32).step_by(RECORD_ALIGN) {
            let start = pos.wrapping_add(0xFFFF_0000);
            let write = write_record(&mut data, start, start, 7, pos, &big).expect("empty ring");
            let (record, read) = read_record(&data, start, write)
                .expect("valid")
                .expect("record");
            assert_eq!(
                (record.tag, record.time, record.payload),
                (7, pos, &big[..])
            );
            assert_eq!(read, write);
        }
    }

    /// Consumer resync on a corrupt length and on a corrupt counter.
    #[test]
    fn pop_resyncs_on_corrupt_data() {
        let mut ring = SharedRing::new(MIN_CAPACITY).expect("valid ring");
        {
            let (mut producer, _) = ring.split();
            for i in 0..3u16 {
                producer.push(i, 0, &[1, 2, 3]).expect("room");
            }
        }
        ring.image_mut()[DATA_OFFSET + 12..][..2].copy_from_slice(&0x2000u16.to_le_bytes());
        {
            let (mut producer, mut consumer) = ring.split();
            assert_eq!(consumer.pop(|r| r.tag), Ok(Some(0)));
            assert_eq!(consumer.pop(|r| r.tag), Err(RingError::BadRecord));
            assert!(consumer.is_empty());
            producer.push(9, 0, &[4]).expect("room");
            assert_eq!(consumer.pop(|r| r.tag), Ok(Some(9)));
        }
        ring.image_mut()[READ_WORD * 4] ^= 2; // misaligned read counter
        {
            let (_, mut consumer) = ring.split();
            assert_eq!(consumer.pop(|r| r.tag), Err(RingError::BadIndices));
            assert_eq!(consumer.pop(|r| r.tag), Ok(None));
        }
        let c = ring.counters();
        assert_eq!((c.resyncs, c.records_read, c.read), (2, 2, c.write));
    }

    /// 100 000 random data areas and counters: reading never panics, each success moves `read`
    /// strictly towards `write` (so a drain ends within capacity / 8 records), and writing never
    /// panics and never claims more than the free space.
    #[test]
    fn corrupt_data_never_panics_or_loops() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        let mut data = vec![0u8; MIN_CAPACITY];
        let capacity = MIN_CAPACITY as u64;
        let (mut records, mut empties, mut errors, mut writes) = (0u32, 0u32, 0u32, 0u32);
        for case in 0..100_000 {
            if case % 256 == 0 {
                data.iter_mut().for_each(|b| *b = rng.next() as u8);
            }
            let read = match rng.below(4) {
                0 => rng.next() as u32,
                _ => rng.next() as u32 & !3,
            };
            let write = match rng.below(5) {
                0 => rng.next() as u32,
                1 => read.wrapping_add(rng.below(capacity + 1) as u32 & !3),
                2 => read.wrapping_add(rng.below(64) as u32 * 4),
                3 => read.wrapping_add(capacity as u32),
                _ => read,
            };
            if rng.below(2) == 0 {
                // A plausible length at the read position reaches the deeper checks.
                let pos = read as usize & (MIN_CAPACITY - 1) & !3;
                let len = match rng.below(4) {
                    0 => WRAP_MARKER,
                    1 => rng.below(MAX_PAYLOAD as u64 + 1) as u16,
                    2 => rng.below(64) as u16,
                    _ => rng.next() as u16,
                };
                data[pos..pos + 2].copy_from_slice(&len.to_le_bytes());
            }
            let mut at = read;
            for steps in 0.. {
                assert!(
                    steps <= MIN_CAPACITY / RECORD_HEADER_LEN,
                    "case {case}: no progress"
                );
                match read_record(&data, at, write) {
                    Ok(Some((record, next))) => {
                        let before = write.wrapping_sub(at) as usize;
                        let after = write.wrapping_sub(next) as usize;
                        assert!(after < before && before <= MIN_CAPACITY, "case {case}");
                        assert!(before - after >= record_len(record.payload.len()));
                        at = next;
                        records += 1;
                    }
                    Ok(None) => {
                        assert_eq!(at, write);
                        empties += 1;
                        break;
                    }
                    Err(_) => {
                        errors += 1;
                        break;
                    }
                }
            }
            let len = rng.below(MAX_PAYLOAD as u64 + 2) as usize;
            let body = &payload(case, len);
            if let Ok(next) = write_record(&mut data, write, read, case as u16, case, body) {
                let free = MIN_CAPACITY - write.wrapping_sub(read) as usize;
                assert!(next.wrapping_sub(write) as usize <= free, "case {case}");
                writes += 1;
            }
        }
        // The cases reached records, empty rings, errors and accepted writes in numbers.
        assert!(records > 10_000 && empties > 10_000 && errors > 10_000 && writes > 10_000);
    }

    fn stress_len(i: u32) -> usize {
        let h = i.wrapping_mul(2_654_435_761) >> 7;
        if h % 64 == 0 {
            MAX_PAYLOAD - (h % 3) as usize
        } else {
            (h % 600) as usize
        }
    }

    fn stress_byte(i: u32, k: usize) -> u8 {
        (i.wrapping_mul(13) as usize + 7 * k) as u8
    }

    /// A producer and a consumer thread move 200 000 records through a small ring; every record
    /// arrives once, in order, with its content. Bounded by a 120 s deadline.
    #[test]
    fn two_threads_keep_order_and_content() {
        const RECORDS: u32 = 200_000;
        let deadline = Instant::now() + Duration::from_secs(120);
        let start = 0u32.wrapping_sub(100_000);
        let mut ring = SharedRing::with_start(MIN_CAPACITY, start).expect("valid ring");
        let (mut producer, mut consumer) = ring.split();
        let full = std::thread::scope(|s| {
            let feeder = s.spawn(move || {
                let mut buf = [0u8; MAX_PAYLOAD];
                let mut full = 0u32;
                for i in 0..RECORDS {
                    let body = &mut buf[..stress_len(i)];
                    for (k, b) in body.iter_mut().enumerate() {
                        *b = stress_byte(i, k);
                    }
                    loop {
                        match producer.push(i as u16, i, body) {
                            Ok(()) => break,
                            Err(RingError::Full) => {
                                full += 1;
                                assert!(Instant::now() < deadline, "producer stuck");
                                std::thread::yield_now();
                            }
                            Err(e) => panic!("push {i}: {e}"),
                        }
                    }
                }
                full
            });
            let mut next = 0u32;
            while next < RECORDS {
                let check = |r: Record<'_>| {
                    r.tag == next as u16
                        && r.time == next
                        && r.payload.len() == stress_len(next)
                        && r.payload
                            .iter()
                            .enumerate()
                            .all(|(k, &b)| b == stress_byte(next, k))
                };
                match consumer.pop(check) {
                    Ok(Some(good)) => {
                        assert!(good, "record {next} wrong");
                        next += 1;
                    }
                    Ok(None) => {
                        assert!(Instant::now() < deadline, "consumer stuck at {next}");
                        std::thread::yield_now();
                    }
                    Err(e) => panic!("pop {next}: {e}"),
                }
            }
            feeder.join().expect("producer thread")
        });
        let c = ring.counters();
        assert_eq!(
            (c.records_read, c.dropped_records, c.resyncs),
            (RECORDS, full, 0)
        );
        assert_eq!(c.read, c.write);
    }

    fn repo_file(relative: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(relative)
    }

    fn parse_int(text: &str) -> Option<i64> {
        let text = text.trim().replace('_', "");
        match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(hex) => i64::from_str_radix(hex, 16).ok(),
            None => text.parse().ok(),
        }
    }

    /// Every layout constant in ring.ts equals the one here, and ring.ts has no other numeric
    /// constant; its `RingStatus` codes equal `RingError::code`.
    #[test]
    fn typescript_layout_matches() {
        let ts = std::fs::read_to_string(repo_file("app/src/audio/ring.ts")).expect("ring.ts");
        let layout: [(&str, i64); 19] = [
            ("CACHE_LINE", CACHE_LINE as i64),
            ("DATA_OFFSET", DATA_OFFSET as i64),
            ("HEADER_WORDS", HEADER_WORDS as i64),
            ("WRITE_WORD", WRITE_WORD as i64),
            ("DROPPED_RECORDS_WORD", DROPPED_RECORDS_WORD as i64),
            ("DROPPED_BYTES_WORD", DROPPED_BYTES_WORD as i64),
            ("READ_WORD", READ_WORD as i64),
            ("RECORDS_READ_WORD", RECORDS_READ_WORD as i64),
            ("RESYNCS_WORD", RESYNCS_WORD as i64),
            ("RECORD_HEADER_LEN", RECORD_HEADER_LEN as i64),
            ("LEN_OFFSET", LEN_OFFSET as i64),
            ("TAG_OFFSET", TAG_OFFSET as i64),
            ("TIME_OFFSET", TIME_OFFSET as i64),
            ("RECORD_ALIGN", RECORD_ALIGN as i64),
            ("MAX_PAYLOAD", MAX_PAYLOAD as i64),
            ("MAX_RECORD_LEN", MAX_RECORD_LEN as i64),
            ("WRAP_MARKER", WRAP_MARKER as i64),
            ("MIN_CAPACITY", MIN_CAPACITY as i64),
            ("MAX_CAPACITY", MAX_CAPACITY as i64),
        ];
        let mut found: Vec<(String, i64)> = ts
            .lines()
            .filter_map(|line| {
                let rest = line.trim().strip_prefix("export const ")?;
                let (name, value) = rest.split_once('=')?;
                let value = parse_int(value.trim().strip_suffix(';')?)?;
                Some((name.trim().to_string(), value))
            })
            .collect();
        found.sort();
        let mut wanted: Vec<(String, i64)> =
            layout.iter().map(|&(n, v)| (n.to_string(), v)).collect();
        wanted.sort();
        assert_eq!(found, wanted);

        let status_at = ts
            .find("export const RingStatus")
            .expect("RingStatus in ring.ts");
        let block = &ts[status_at..];
        let block = &block[block.find('{').expect("{")..block.find('}').expect("}")];
        let mut codes: Vec<(String, i64)> = block
            .split([',', '{', '\n'])
            .filter_map(|item| {
                let (name, value) = item.split_once(':')?;
                Some((name.trim().to_string(), parse_int(value)?))
            })
            .collect();
        codes.sort();
        let errors = [
            RingError::Full,
            RingError::TooLarge,
            RingError::BadCapacity,
            RingError::BadIndices,
            RingError::BadRecord,
        ];
        let mut expected: Vec<(String, i64)> = errors
            .iter()
            .map(|e| (format!("{e:?}"), e.code() as i64))
            .chain([("Empty".to_string(), 0), ("Record".to_string(), 1)])
            .collect();
        expected.sort();
        assert_eq!(codes, expected);
    }

    enum Op {
        Push {
            tag: u16,
            time: u32,
            len: usize,
            seed: u32,
        },
        Pop,
    }

    const GOLDEN_START: u32 = 0u32.wrapping_sub(12_288); // data position 4096
    const T: u32 = 0u32.wrapping_sub(3); // times cross 2^32 too

    fn push(tag: u16, len: usize, seed: u32) -> Op {
        Op::Push {
            tag,
            time: T.wrapping_add(tag as u32),
            len,
            seed,
        }
    }

    /// The golden sequence: small odd sizes (padding), a packet-sized and maximum records, a wrap
    /// marker, refusals, an exactly full ring, popping an empty ring, counters crossing 2^32.
    fn golden_ops() -> Vec<Op> {
        use Op::Pop;
        vec![
            push(1, 0, 11),
            push(2, 1, 22),
            push(3, 2, 33),
            push(4, 3, 44),
            push(5, 5, 55),
            Pop,
            Pop,
            push(6, 2072, 66),
            push(7, MAX_PAYLOAD, 77),
            push(8, MAX_PAYLOAD, 88),
            push(9, MAX_PAYLOAD, 99),   // marker at 14444, record at 0
            push(10, MAX_PAYLOAD, 110), // refused
            push(11, 4, 121),           // fills the ring exactly
            push(12, 0, 132),           // refused
            Pop,
            Pop,
            Pop,
            Pop,
            push(13, 1000, 143),
            Pop,
            Pop,
            Pop,
            Pop,
            Pop,
            Pop, // empty
            push(14, 17, 154),
            push(15, 4093, 165),
            push(16, 6, 176),
            Pop,
        ]
    }

    fn record_json(entry: &Option<(Entry, u32)>) -> String {
        match entry {
            None => "null".to_string(),
            Some(((tag, time, body), seed)) => format!(
                "{{\"tag\": {tag}, \"time\": {time}, \"len\": {}, \"seed\": {seed}}}",
                body.len()
            ),
        }
    }

    /// The golden image: the sequence above on a `SharedRing` and on the pure functions gives the
    /// bytes in tests/vectors/ring-golden.bin; ring-golden.json states the sequence and what each
    /// step returns, for the TypeScript test to replay. Set TUTTI_BLESS=1 to rewrite both files.
    #[test]
    fn golden_image() {
        let mut ring = SharedRing::with_start(MIN_CAPACITY, GOLDEN_START).expect("valid ring");
        let mut data = vec![0u8; MIN_CAPACITY];
        let (mut write, mut read) = (GOLDEN_START, GOLDEN_START);
        let mut seeds = VecDeque::new();
        let mut steps = Vec::new();
        let (mut refusals, mut was_full, mut empty_pops) = (0, false, 0);
        {
            let (mut producer, mut consumer) = ring.split();
            for op in golden_ops() {
                match op {
                    Op::Push {
                        tag,
                        time,
                        len,
                        seed,
                    } => {
                        let body = payload(seed, len);
                        let ok = producer.push(tag, time, &body).is_ok();
                        let pure = write_record(&mut data, write, read, tag, time, &body);
                        assert_eq!(pure.is_ok(), ok);
                        if let Ok(next) = pure {
                            write = next;
                            seeds.push_back(seed);
                        }
                        refusals += u32::from(!ok);
                        was_full |= producer.used() == MIN_CAPACITY;
                        steps.push(format!(
                            "{{\"op\": \"push\", \"tag\": {tag}, \"time\": {time}, \"len\": {len}, \
                             \"seed\": {seed}, \"ok\": {ok}}}"
                        ));
                    }
                    Op::Pop => {
                        let got = consumer.pop(owned).expect("valid ring");
                        let pure = read_record(&data, read, write).expect("valid ring");
                        assert_eq!(got, pure.map(|(r, _)| owned(r)));
                        if let Some((_, next)) = pure {
                            read = next;
                        }
                        empty_pops += u32::from(got.is_none());
                        let got = got.map(|e| (e, seeds.pop_front().expect("pushed before")));
                        if let Some((e, seed)) = &got {
                            assert_eq!(e.2, payload(*seed, e.2.len()), "content");
                        }
                        steps.push(format!(
                            "{{\"op\": \"pop\", \"record\": {}}}",
                            record_json(&got)
                        ));
                    }
                }
            }
        }
        let c = ring.counters();
        let image = ring.image().to_vec();
        assert_eq!(
            &image[DATA_OFFSET..],
            &data[..],
            "pure functions and SharedRing agree"
        );
        assert_eq!((c.write, c.read), (write, read));
        // The sequence covers what it claims to.
        assert_eq!((refusals, was_full, empty_pops), (2, true, 1));
        assert_eq!(
            &image[DATA_OFFSET + 14_444..][..4],
            &MARKER_BYTES,
            "wrap marker"
        );
        assert!(
            c.write < GOLDEN_START && c.read < GOLDEN_START,
            "counters crossed 2^32"
        );
        assert!(c.write != c.read, "records left unread");

        let json = format!(
            "{{\n  \"capacity\": {MIN_CAPACITY},\n  \"start\": {GOLDEN_START},\n  \
             \"payload\": \"byte k of a payload = (seed + 7 * k) mod 256\",\n  \
             \"image_bytes\": {},\n  \"ops\": [\n    {}\n  ],\n  \"counters\": {{\"write\": {}, \
             \"read\": {}, \"dropped_records\": {}, \"dropped_bytes\": {}, \"records_read\": {}, \
             \"resyncs\": {}}}\n}}\n",
            image.len(),
            steps.join(",\n    "),
            c.write,
            c.read,
            c.dropped_records,
            c.dropped_bytes,
            c.records_read,
            c.resyncs
        );
        let bin_path = repo_file("tests/vectors/ring-golden.bin");
        let json_path = repo_file("tests/vectors/ring-golden.json");
        if std::env::var_os("TUTTI_BLESS").is_some() {
            std::fs::write(&bin_path, &image).expect("write golden image");
            std::fs::write(&json_path, &json).expect("write golden json");
        }
        let golden = std::fs::read(&bin_path).expect("golden image (TUTTI_BLESS=1 writes it)");
        assert!(
            golden == image,
            "ring image differs from tests/vectors/ring-golden.bin"
        );
        let golden_json = std::fs::read_to_string(&json_path).expect("golden json");
        assert_eq!(golden_json, json);
    }
}
