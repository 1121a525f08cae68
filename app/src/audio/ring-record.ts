/**
 * One record at a time on a ring's data area: `readRecord` and `writeRecord`, the same rules,
 * results and bytes as Rust's `read_record` / `write_record` (core/src/ring.rs; the layout and its
 * constants are in ring.ts). They take the data area as a byte array with its base and the two
 * counters as numbers, so the same code serves a ring in shared memory (ring-ends.ts) and a test's
 * plain array; they neither load nor store the counters, which is the caller's part.
 *
 * Real-time safety: both allocate nothing and never block.
 */

import {
  isValidCapacity,
  LEN_OFFSET,
  MAX_PAYLOAD,
  RECORD_ALIGN,
  RECORD_HEADER_LEN,
  recordLen,
  RingStatus,
  TAG_OFFSET,
  TIME_OFFSET,
  WRAP_MARKER,
} from './ring';

/** Where `readRecord` found a record; reused between calls so reading allocates nothing. */
export interface RecordView {
  /** Peer slot (inbound) or destination (outbound), 0..65535. */
  tag: number;
  /** Host timestamp, u32 wrapping. */
  time: number;
  /** Index of the first payload byte in the array given to `readRecord`. */
  offset: number;
  /** Payload bytes. */
  length: number;
  /** The `read` counter after this record. */
  next: number;
}

export function newRecordView(): RecordView {
  return { tag: 0, time: 0, offset: 0, length: 0, next: 0 };
}

function validRegion(bytes: Uint8Array, base: number, capacity: number): boolean {
  return isValidCapacity(capacity) && base >>> 0 === base && base + capacity <= bytes.length;
}

/** Unread bytes between the counters, or -1 if they break the layout's invariants. */
function unread(capacity: number, read: number, write: number): number {
  if (((read | write) & (RECORD_ALIGN - 1)) !== 0) return -1;
  const used = (write - read) >>> 0;
  return used > capacity ? -1 : used;
}

/**
 * Read the record at `read` from the data area `bytes[base, base + capacity)`, which holds the
 * bytes published up to `write`. Returns `RingStatus.Record` (and fills `out`), `RingStatus.Empty`,
 * or a negative error (`BadCapacity`, `BadIndices`, `BadRecord`); on an error the caller resyncs
 * by moving `read` to `write`. Same rules and results as Rust's `read_record`.
 */
export function readRecord(
  bytes: Uint8Array,
  base: number,
  capacity: number,
  read: number,
  write: number,
  out: RecordView,
): number {
  if (!validRegion(bytes, base, capacity)) return RingStatus.BadCapacity;
  const used = unread(capacity, read, write);
  if (used < 0) return RingStatus.BadIndices;
  if (used === 0) return RingStatus.Empty;
  const pos = read & (capacity - 1);
  const toEnd = capacity - pos;
  // Published bytes from `at`: up to write or to the end of the data area (at least 4: both
  // counters are multiples of 4).
  let at = base + pos;
  let avail = used < toEnd ? used : toEnd;
  let skipped = 0;
  let len = bytes[at + LEN_OFFSET] | (bytes[at + LEN_OFFSET + 1] << 8);
  if (len === WRAP_MARKER && avail === toEnd) {
    at = base;
    avail = used - toEnd;
    skipped = toEnd;
    if (avail < RECORD_HEADER_LEN) return RingStatus.BadRecord;
    len = bytes[at + LEN_OFFSET] | (bytes[at + LEN_OFFSET + 1] << 8);
  } else if (avail < RECORD_HEADER_LEN) {
    return RingStatus.BadRecord;
  }
  // A misplaced or second marker has len 0xFFFF > MAX_PAYLOAD and fails here.
  if (len > MAX_PAYLOAD) return RingStatus.BadRecord;
  const size = recordLen(len);
  if (size > avail) return RingStatus.BadRecord;
  out.tag = bytes[at + TAG_OFFSET] | (bytes[at + TAG_OFFSET + 1] << 8);
  out.time =
    (bytes[at + TIME_OFFSET] |
      (bytes[at + TIME_OFFSET + 1] << 8) |
      (bytes[at + TIME_OFFSET + 2] << 16) |
      (bytes[at + TIME_OFFSET + 3] << 24)) >>>
    0;
  out.offset = at + RECORD_HEADER_LEN;
  out.length = len;
  out.next = (read + skipped + size) >>> 0;
  return RingStatus.Record;
}

/**
 * Write a record at `write` into the data area `bytes[base, base + capacity)` whose consumer has
 * reached `read`. Returns the new `write` counter (>= 0), for the caller to publish, or a negative
 * error (`BadCapacity`, `TooLarge`, `BadIndices`, `Full`), in which case nothing was written.
 * Only free bytes are touched; padding is zeroed. Same rules and bytes as Rust's `write_record`.
 * `tag` must be an integer in 0..65535 and `src[srcOffset, srcOffset + length)` inside `src`;
 * breaking that is a programming error and throws a RangeError.
 */
export function writeRecord(
  bytes: Uint8Array,
  base: number,
  capacity: number,
  write: number,
  read: number,
  tag: number,
  time: number,
  src: Uint8Array,
  srcOffset: number,
  length: number,
): number {
  if (tag >>> 0 !== tag || tag > 0xffff) throw new RangeError(`record tag ${tag} not a u16`);
  if (srcOffset >>> 0 !== srcOffset || length >>> 0 !== length || srcOffset + length > src.length) {
    throw new RangeError(`record bytes [${srcOffset}, +${length}) outside the source`);
  }
  if (!validRegion(bytes, base, capacity)) return RingStatus.BadCapacity;
  if (length > MAX_PAYLOAD) return RingStatus.TooLarge;
  const used = unread(capacity, read, write);
  if (used < 0) return RingStatus.BadIndices;
  const size = recordLen(length);
  const pos = write & (capacity - 1);
  const toEnd = capacity - pos;
  const skip = size > toEnd ? toEnd : 0;
  if (skip + size > capacity - used) return RingStatus.Full;
  let at = base + pos;
  if (skip > 0) {
    bytes[at] = 0xff; // wrap marker: len 0xFFFF, tag 0
    bytes[at + 1] = 0xff;
    bytes[at + 2] = 0;
    bytes[at + 3] = 0;
    at = base;
  }
  bytes[at + LEN_OFFSET] = length & 0xff;
  bytes[at + LEN_OFFSET + 1] = length >>> 8;
  bytes[at + TAG_OFFSET] = tag & 0xff;
  bytes[at + TAG_OFFSET + 1] = tag >>> 8;
  bytes[at + TIME_OFFSET] = time & 0xff;
  bytes[at + TIME_OFFSET + 1] = (time >>> 8) & 0xff;
  bytes[at + TIME_OFFSET + 2] = (time >>> 16) & 0xff;
  bytes[at + TIME_OFFSET + 3] = (time >>> 24) & 0xff;
  const body = at + RECORD_HEADER_LEN;
  if (srcOffset === 0 && length === src.length) {
    bytes.set(src, body);
  } else {
    for (let k = 0; k < length; k++) bytes[body + k] = src[srcOffset + k];
  }
  for (let k = body + length; k < at + size; k++) bytes[k] = 0;
  return (write + skip + size) >>> 0;
}
