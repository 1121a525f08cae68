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
 * Who uses what:
 * - the net side produces into the inbound ring with {@link RingWriter} and consumes the outbound
 *   ring with {@link RingReader};
 * - the worklet uses {@link RingMirror}: it copies ring bytes to and from a region of the WASM
 *   engine's linear memory, where Rust's `read_record` / `write_record` work on them, and moves
 *   the counters.
 *
 * Real-time safety: `writeRecord`, `readRecord`, `RingWriter.push`, `RingReader.peek/consume/pop`
 * and every `RingMirror` method except the constructor and `rebind` allocate nothing and never
 * block. Constructors allocate views; they run before audio starts.
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

function capacityOf(buffer: ArrayBufferLike): number {
  const capacity = buffer.byteLength - DATA_OFFSET;
  if (!isValidCapacity(capacity)) {
    throw new RangeError(`ring buffer of ${buffer.byteLength} bytes has no valid capacity`);
  }
  return capacity;
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

/** Add to a counter this side owns (only this side stores it, so load + store is exact). */
function bump(words: Uint32Array, index: number, by: number): void {
  Atomics.store(words, index, (Atomics.load(words, index) + by) >>> 0);
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

/**
 * The producing end of a ring in shared memory (the net side, for the inbound ring). Exactly one
 * RingWriter may exist per ring.
 */
export class RingWriter {
  /** Bytes in the data area. */
  readonly capacity: number;
  /** The whole ring as bytes. */
  readonly bytes: Uint8Array;
  /** Why the last refused push was refused (a negative `RingStatus`), 0 if none was. */
  lastError = 0;
  private readonly words: Uint32Array;
  private readonly words32: Int32Array;

  constructor(buffer: ArrayBufferLike) {
    this.capacity = capacityOf(buffer);
    this.bytes = new Uint8Array(buffer);
    this.words = new Uint32Array(buffer, 0, HEADER_WORDS);
    this.words32 = new Int32Array(buffer, 0, HEADER_WORDS);
  }

  /**
   * Copy `src[offset, offset + length)` into the ring as one record and publish it. Returns false
   * if the record was refused (ring full, payload over MAX_PAYLOAD, corrupt counters; see
   * `lastError`); refusals are counted in `dropped_records` / `dropped_bytes`.
   */
  push(tag: number, time: number, src: Uint8Array, offset = 0, length = src.length - offset): boolean {
    const write = Atomics.load(this.words, WRITE_WORD);
    const read = Atomics.load(this.words, READ_WORD);
    const next = writeRecord(
      this.bytes,
      DATA_OFFSET,
      this.capacity,
      write,
      read,
      tag,
      time >>> 0,
      src,
      offset,
      length,
    );
    if (next < 0) {
      this.lastError = next;
      bump(this.words, DROPPED_RECORDS_WORD, 1);
      bump(this.words, DROPPED_BYTES_WORD, length);
      return false;
    }
    Atomics.store(this.words, WRITE_WORD, next);
    return true;
  }

  /**
   * Wake a consumer waiting with `Atomics.waitAsync(new Int32Array(buffer), WRITE_WORD, seen)`
   * (`seen` = the write counter it last saw, `| 0`). Call once per batch of pushes, not per push.
   */
  notify(): number {
    return Atomics.notify(this.words32, WRITE_WORD);
  }

  /** Unread bytes as the producer sees them. */
  used(): number {
    const used = (Atomics.load(this.words, WRITE_WORD) - Atomics.load(this.words, READ_WORD)) >>> 0;
    return used < this.capacity ? used : this.capacity;
  }

  get droppedRecords(): number {
    return Atomics.load(this.words, DROPPED_RECORDS_WORD);
  }

  get droppedBytes(): number {
    return Atomics.load(this.words, DROPPED_BYTES_WORD);
  }
}

/** Called by `RingReader.pop` with a record's place in `bytes` (the whole ring). */
export type RecordVisitor = (
  bytes: Uint8Array,
  offset: number,
  length: number,
  tag: number,
  time: number,
) => void;

/**
 * The consuming end of a ring in shared memory (the net side, for the outbound ring). Exactly one
 * RingReader may exist per ring.
 *
 * `peek()` describes the next record in `tag`, `time`, `offset`, `length`, with `offset` indexing
 * `bytes` (the whole ring); the bytes stay valid until `consume()`. A caller that hands them to an
 * API refusing shared memory (e.g. `RTCDataChannel.send`) copies them into its own buffer first.
 */
export class RingReader {
  readonly capacity: number;
  /** The whole ring as bytes; `offset` indexes this array. */
  readonly bytes: Uint8Array;
  tag = 0;
  time = 0;
  offset = 0;
  length = 0;
  /** Why the last resync happened (a negative `RingStatus`), 0 if none did. */
  lastError = 0;
  private readonly words: Uint32Array;
  private readonly view = newRecordView();
  private pending = false;

  constructor(buffer: ArrayBufferLike) {
    this.capacity = capacityOf(buffer);
    this.bytes = new Uint8Array(buffer);
    this.words = new Uint32Array(buffer, 0, HEADER_WORDS);
  }

  /**
   * Describe the next record without consuming it; false when none is published. Impossible data
   * makes the reader resync (`read` jumps to `write`, `resyncs` + 1, unread records are lost) and
   * return false.
   */
  peek(): boolean {
    const read = Atomics.load(this.words, READ_WORD);
    const write = Atomics.load(this.words, WRITE_WORD);
    const status = readRecord(this.bytes, DATA_OFFSET, this.capacity, read, write, this.view);
    this.pending = status === RingStatus.Record;
    if (this.pending) {
      this.tag = this.view.tag;
      this.time = this.view.time;
      this.offset = this.view.offset;
      this.length = this.view.length;
      return true;
    }
    if (status < 0) {
      this.lastError = status;
      Atomics.store(this.words, READ_WORD, write);
      bump(this.words, RESYNCS_WORD, 1);
    }
    return false;
  }

  /** Release the record `peek()` described; false if there was none. */
  consume(): boolean {
    if (!this.pending) return false;
    this.pending = false;
    Atomics.store(this.words, READ_WORD, this.view.next);
    bump(this.words, RECORDS_READ_WORD, 1);
    return true;
  }

  /** Hand the next record to `visit`, then release it; false when none is published. */
  pop(visit: RecordVisitor): boolean {
    if (!this.peek()) return false;
    visit(this.bytes, this.offset, this.length, this.tag, this.time);
    this.consume();
    return true;
  }

  /** Unread bytes as the consumer sees them. */
  used(): number {
    const used = (Atomics.load(this.words, WRITE_WORD) - Atomics.load(this.words, READ_WORD)) >>> 0;
    return used < this.capacity ? used : this.capacity;
  }

  get recordsRead(): number {
    return Atomics.load(this.words, RECORDS_READ_WORD);
  }

  get resyncs(): number {
    return Atomics.load(this.words, RESYNCS_WORD);
  }
}

/**
 * The worklet's bridge between a ring in shared memory and a same-sized copy of its data area (the
 * *mirror*) inside the WASM engine's linear memory, where Rust's `read_record` / `write_record`
 * run. The engine sees only numbers: the mirror's address and the counters.
 *
 * Copies move whole fixed-size chunks with `TypedArray.set` between views made once in the
 * constructor, so the steady state allocates nothing. A chunk may carry bytes outside the range
 * asked for; see the two copy methods for why that is harmless.
 *
 * Inbound ring (the worklet consumes), once per quantum:
 * ```
 * const write = mirror.pull();                 // copy newly published bytes into the mirror
 * let read = mirror.loadRead();
 * // engine: while read_record(mirror, read, write) gives a record, handle it and advance read;
 * //         on an error, read = write and count a resync
 * mirror.commitRead(read, records, resyncs);
 * ```
 * Outbound ring (the worklet produces):
 * ```
 * const write = mirror.loadWrite(), read = mirror.loadRead();
 * // engine: write_record(mirror, write, read, ...) for each packet; refusals counted
 * mirror.publish(write, newWrite);             // copy the new records out, then store write
 * mirror.addDropped(records, bytes);
 * ```
 *
 * A typed-array view on `WebAssembly.Memory.buffer` stops working when the memory grows (the old
 * ArrayBuffer is detached and the view's length drops to 0). After any call that may grow the
 * memory, check `detached` and call `rebind` with a fresh view of the same region (`rebind`
 * allocates its chunk views; growth is rare and happens outside the steady state).
 */
export class RingMirror {
  /** Default bytes per copied chunk. */
  static readonly DEFAULT_CHUNK = 1024;
  readonly capacity: number;
  readonly chunkBytes: number;
  private readonly chunks: number;
  private readonly shift: number;
  private readonly words: Uint32Array;
  private readonly words32: Int32Array;
  private readonly ringData: Uint8Array;
  private readonly ringChunks: Uint8Array[];
  private mirror: Uint8Array;
  private mirrorChunks: Uint8Array[] = [];
  /** Inbound: the write counter up to which the mirror holds the published bytes. */
  private copied: number;

  /**
   * `buffer` is the ring; `mirror` a view of `capacity` bytes in WASM memory (e.g.
   * `new Uint8Array(memory.buffer, ptr, capacity)`). For an outbound ring the mirror must start
   * equal to the ring's data area: both zeroed, or call `syncMirror()` once.
   */
  constructor(buffer: ArrayBufferLike, mirror: Uint8Array, chunkBytes = RingMirror.DEFAULT_CHUNK) {
    this.capacity = capacityOf(buffer);
    if (
      !Number.isInteger(chunkBytes) ||
      chunkBytes < RECORD_ALIGN ||
      chunkBytes > this.capacity ||
      (chunkBytes & (chunkBytes - 1)) !== 0
    ) {
      throw new RangeError(`mirror chunk of ${chunkBytes} bytes must be a power of two <= capacity`);
    }
    this.chunkBytes = chunkBytes;
    this.chunks = this.capacity / chunkBytes;
    this.shift = Math.log2(chunkBytes);
    this.words = new Uint32Array(buffer, 0, HEADER_WORDS);
    this.words32 = new Int32Array(buffer, 0, HEADER_WORDS);
    this.ringData = new Uint8Array(buffer, DATA_OFFSET, this.capacity);
    this.ringChunks = this.makeChunks(this.ringData);
    this.mirror = mirror;
    this.rebind(mirror);
    this.copied = Atomics.load(this.words, READ_WORD);
  }

  /** Point at a new view of the mirror region (after WASM memory growth). Allocates. */
  rebind(mirror: Uint8Array): void {
    if (mirror.length !== this.capacity) {
      throw new RangeError(`mirror of ${mirror.length} bytes, ring data area is ${this.capacity}`);
    }
    this.mirror = mirror;
    this.mirrorChunks = this.makeChunks(mirror);
  }

  /** Whether the mirror view's memory was detached by growth: call `rebind` before using it. */
  get detached(): boolean {
    return this.mirror.byteLength === 0;
  }

  /**
   * Copy the ring's bytes between counters `from` and `to` into the mirror, by whole chunks.
   * The extra bytes a chunk carries lie outside `[from, to)`: either already copied unread bytes
   * (the producer does not change unread bytes, so they arrive unchanged), or bytes the consumer
   * never interprets (behind `read` or at/after `to`, possibly half-written by the producer);
   * a later copy that covers them again brings them up to date.
   */
  copyToMirror(from: number, to: number): void {
    const n = (to - from) >>> 0;
    if (n === 0) return;
    let c = this.firstChunk(from, n);
    for (let left = this.chunkCount(from, n); left > 0; left--) {
      this.mirror.set(this.ringChunks[c], c << this.shift);
      c = (c + 1) & (this.chunks - 1);
    }
  }

  /**
   * Copy the mirror's bytes between counters `from` and `to` into the ring, by whole chunks.
   * Rewriting bytes outside `[from, to)` is safe because the mirror is the producer's
   * authoritative copy: every byte of it was already copied to the ring, and the producer writes
   * only free bytes, of which it changed only `[from, to)` since the last copy. So a chunk rewrites
   * unread published bytes (which the consumer may be reading right now) with the values they
   * already have, and free bytes, which the consumer does not read. The ring's data area and the
   * mirror must start equal (`syncMirror`).
   */
  copyFromMirror(from: number, to: number): void {
    const n = (to - from) >>> 0;
    if (n === 0) return;
    let c = this.firstChunk(from, n);
    for (let left = this.chunkCount(from, n); left > 0; left--) {
      this.ringData.set(this.mirrorChunks[c], c << this.shift);
      c = (c + 1) & (this.chunks - 1);
    }
  }

  /** Copy the ring's whole data area into the mirror (to start an outbound mirror equal). */
  syncMirror(): void {
    for (let c = 0; c < this.chunks; c++) this.mirror.set(this.ringChunks[c], c << this.shift);
  }

  /** Inbound: copy the bytes published since the last pull into the mirror; returns `write`. */
  pull(): number {
    const write = Atomics.load(this.words, WRITE_WORD);
    this.copyToMirror(this.copied, write);
    this.copied = write;
    return write;
  }

  /** The consumer's `read` counter. */
  loadRead(): number {
    return Atomics.load(this.words, READ_WORD);
  }

  /** The producer's `write` counter. */
  loadWrite(): number {
    return Atomics.load(this.words, WRITE_WORD);
  }

  /** Inbound: release everything before `read`, and count consumed records and resyncs. */
  commitRead(read: number, records: number, resyncs = 0): void {
    Atomics.store(this.words, READ_WORD, read >>> 0);
    if (records !== 0) bump(this.words, RECORDS_READ_WORD, records);
    if (resyncs !== 0) bump(this.words, RESYNCS_WORD, resyncs);
  }

  /** Outbound: copy the records in `[write, next)` from the mirror to the ring, then publish. */
  publish(write: number, next: number): void {
    this.copyFromMirror(write, next);
    Atomics.store(this.words, WRITE_WORD, next >>> 0);
  }

  /**
   * Outbound: wake a consumer parked in `Atomics.waitAsync` on the write word (the net side's
   * pump). Once per quantum that published something; it neither blocks nor allocates.
   */
  notify(): void {
    Atomics.notify(this.words32, WRITE_WORD);
  }

  /** Outbound: count records the engine refused. */
  addDropped(records: number, bytes: number): void {
    if (records === 0) return;
    bump(this.words, DROPPED_RECORDS_WORD, records);
    bump(this.words, DROPPED_BYTES_WORD, bytes);
  }

  private makeChunks(region: Uint8Array): Uint8Array[] {
    const views: Uint8Array[] = [];
    for (let c = 0; c < this.chunks; c++) {
      views.push(region.subarray(c * this.chunkBytes, (c + 1) * this.chunkBytes));
    }
    return views;
  }

  private firstChunk(from: number, n: number): number {
    return n > this.capacity - this.chunkBytes ? 0 : (from & (this.capacity - 1)) >>> this.shift;
  }

  /** Chunks covering `n` bytes from counter `from` (all of them when the span nearly laps). */
  private chunkCount(from: number, n: number): number {
    if (n > this.capacity - this.chunkBytes) return this.chunks;
    const mask = this.capacity - 1;
    const first = (from & mask) >>> this.shift;
    const last = ((from + n - 1) & mask) >>> this.shift;
    return ((last - first) & (this.chunks - 1)) + 1;
  }
}
