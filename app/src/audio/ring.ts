/**
 * Lock-free single-producer/single-consumer ring of variable-length records in a
 * SharedArrayBuffer: the TypeScript end of `core/src/ring.rs`.
 *
 * The byte layout is defined once, in ring.rs (byte diagram there). Every numeric constant below
 * mirrors one there under the same name, and a Rust test reads this file and compares them, so a
 * change to the layout is made in both files or fails the build. The golden image
 * `tests/vectors/ring-golden.bin` proves that both ends write and read the same bytes.
 *
 * In short: header words (little-endian u32) `write`, `dropped_records`, `dropped_bytes` on the
 * producer's cache line, `read`, `records_read`, `resyncs` on the consumer's; then the data area
 * of `capacity` bytes (a power of two). `write` and `read` are byte counters wrapping at 2^32;
 * position = counter & (capacity - 1). A record is u16 len, u16 tag, u32 time, payload, zero
 * padding to a multiple of 4; it never wraps: a wrap marker (len 0xFFFF) sends the reader to
 * position 0. A record that does not fit is refused and counted, never written over unread data.
 *
 * This module is the layout: its constants, sizes, a new ring and its header counters. The rest
 * of the TypeScript end works on it, one module each:
 * - ring-record.ts: `readRecord` / `writeRecord`, one record at a time on a data area, the same
 *   rules and bytes as Rust's `read_record` / `write_record`;
 * - ring-ends.ts: the net side produces into the inbound ring with `RingWriter` and consumes the
 *   outbound ring with `RingReader`;
 * - ring-mirror.ts: the worklet's `RingMirror` copies ring bytes to and from a region of the WASM
 *   engine's linear memory, where Rust's `read_record` / `write_record` work on them, and moves
 *   the counters.
 *
 * Real-time safety: `countDropped` and `countRead` allocate nothing and never blocks; `createRing` and `readCounters`
 * allocate and run off the audio path.
 */

// Layout constants: mirrored from core/src/ring.rs (checked by a Rust test).
export const CACHE_LINE = 64;
export const DATA_OFFSET = 128;
export const HEADER_WORDS = 32;
export const WRITE_WORD = 0;
export const DROPPED_RECORDS_WORD = 1;
export const DROPPED_BYTES_WORD = 2;
export const READ_WORD = 16;
export const RECORDS_READ_WORD = 17;
export const RESYNCS_WORD = 18;
export const RECORD_HEADER_LEN = 8;
export const LEN_OFFSET = 0;
export const TAG_OFFSET = 2;
export const TIME_OFFSET = 4;
export const RECORD_ALIGN = 4;
export const MAX_PAYLOAD = 4096;
export const MAX_RECORD_LEN = 4104;
export const WRAP_MARKER = 0xffff;
export const MIN_CAPACITY = 16384;
export const MAX_CAPACITY = 1073741824;

/**
 * Results of `readRecord` and `writeRecord`. The negative codes equal `RingError::code()` in
 * Rust, so the WASM engine can hand them across as plain numbers.
 */
export const RingStatus = Object.freeze({
  Empty: 0,
  Record: 1,
  Full: -1,
  TooLarge: -2,
  BadCapacity: -3,
  BadIndices: -4,
  BadRecord: -5,
});

/** Whether `capacity` is a valid data-area size: a power of two in MIN_CAPACITY..MAX_CAPACITY. */
export function isValidCapacity(capacity: number): boolean {
  return (
    Number.isInteger(capacity) &&
    capacity >= MIN_CAPACITY &&
    capacity <= MAX_CAPACITY &&
    (capacity & (capacity - 1)) === 0
  );
}

/** Bytes of a whole ring (header plus data area) for a data area of `capacity` bytes. */
export function ringBytes(capacity: number): number {
  if (!isValidCapacity(capacity)) throw new RangeError(`ring capacity ${capacity} not supported`);
  return DATA_OFFSET + capacity;
}

/** Bytes a record with `length` payload bytes occupies (header, payload, padding). */
export function recordLen(length: number): number {
  return RECORD_HEADER_LEN + ((length + RECORD_ALIGN - 1) & ~(RECORD_ALIGN - 1));
}

/**
 * A zeroed ring with a data area of `capacity` bytes, both counters at `start` (a multiple of 4;
 * values near 2^32 exercise the counter wrap).
 */
export function createRing(capacity: number, start = 0): SharedArrayBuffer {
  if (!Number.isInteger(start) || start < 0 || start > 0xffffffff || start % RECORD_ALIGN !== 0) {
    throw new RangeError(`ring start counter ${start} must be a multiple of 4 below 2^32`);
  }
  const sab = new SharedArrayBuffer(ringBytes(capacity));
  const words = new Uint32Array(sab, 0, HEADER_WORDS);
  words[WRITE_WORD] = start;
  words[READ_WORD] = start;
  return sab;
}

/** Header counters of a ring; each loaded on its own. */
export interface RingCounters {
  write: number;
  read: number;
  droppedRecords: number;
  droppedBytes: number;
  recordsRead: number;
  resyncs: number;
}

/** Load the header counters (allocates the result; for stats and tests, not the audio path). */
export function readCounters(sab: ArrayBufferLike): RingCounters {
  const w = new Uint32Array(sab, 0, HEADER_WORDS);
  return {
    write: Atomics.load(w, WRITE_WORD),
    read: Atomics.load(w, READ_WORD),
    droppedRecords: Atomics.load(w, DROPPED_RECORDS_WORD),
    droppedBytes: Atomics.load(w, DROPPED_BYTES_WORD),
    recordsRead: Atomics.load(w, RECORDS_READ_WORD),
    resyncs: Atomics.load(w, RESYNCS_WORD),
  };
}

/** The data area's size of the ring `buffer`; throws if it has none valid. */
export function capacityOf(buffer: ArrayBufferLike): number {
  const capacity = buffer.byteLength - DATA_OFFSET;
  if (!isValidCapacity(capacity)) {
    throw new RangeError(`ring buffer of ${buffer.byteLength} bytes has no valid capacity`);
  }
  return capacity;
}

/** Add to a counter this side owns (only this side stores it, so load + store is exact). */
function bump(words: Uint32Array, index: number, by: number): void {
  Atomics.store(words, index, (Atomics.load(words, index) + by) >>> 0);
}

/** The producer counts `records` it refused, of `bytes` payload bytes (nothing when 0). */
export function countDropped(words: Uint32Array, records: number, bytes: number): void {
  if (records === 0) return;
  bump(words, DROPPED_RECORDS_WORD, records);
  bump(words, DROPPED_BYTES_WORD, bytes);
}

/** The consumer counts `records` it consumed and `resyncs` it made (either may be 0). */
export function countRead(words: Uint32Array, records: number, resyncs: number): void {
  if (records !== 0) bump(words, RECORDS_READ_WORD, records);
  if (resyncs !== 0) bump(words, RESYNCS_WORD, resyncs);
}
