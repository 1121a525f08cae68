//! Lock-free single-producer/single-consumer ring of variable-length records in one shared buffer.
//!
//! Packets cross threads through rings: the net side writes received packets into the *inbound*
//! ring and the audio worklet reads them; the worklet writes captured packets into the *outbound*
//! ring and the net side sends them. In the browser the buffer is a `SharedArrayBuffer`; natively
//! it is a [`SharedRing`]. This module defines the byte layout once; `app/src/audio/ring.ts`
//! mirrors every constant (a test in `ring/tests.rs` reads that file and compares), and a
//! golden image (`tests/vectors/ring-golden.bin`) proves both sides write and read identical
//! bytes.
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
mod tests;
