/**
 * The two ends of a ring in shared memory as the net side holds them: `RingWriter` produces (the
 * inbound ring: packets from the peers to the engine) and `RingReader` consumes (the outbound ring:
 * the engine's packets to the peers). Each moves only the counters its side owns (ring.ts), and
 * does the record work with ring-record.ts.
 *
 * Real-time safety: `RingWriter.push` and `RingReader.peek/consume/pop` allocate nothing and never
 * block. Constructors allocate views; they run before audio starts.
 */

import {
  capacityOf,
  countDropped,
  countRead,
  DATA_OFFSET,
  DROPPED_BYTES_WORD,
  DROPPED_RECORDS_WORD,
  HEADER_WORDS,
  READ_WORD,
  RECORDS_READ_WORD,
  RESYNCS_WORD,
  RingStatus,
  WRITE_WORD,
} from './ring';
import { newRecordView, readRecord, writeRecord } from './ring-record';

/** What both ends hold of a ring in shared memory: its bytes, its header and its fill. */
abstract class RingEnd {
  /** Bytes in the data area. */
  readonly capacity: number;
  /** The whole ring as bytes; record offsets index this array. */
  readonly bytes: Uint8Array;
  /** Why the last refused push or resync happened (a negative `RingStatus`), 0 if none did. */
  lastError = 0;
  protected readonly words: Uint32Array;

  constructor(buffer: ArrayBufferLike) {
    this.capacity = capacityOf(buffer);
    this.bytes = new Uint8Array(buffer);
    this.words = new Uint32Array(buffer, 0, HEADER_WORDS);
  }

  /** Unread bytes as this end sees them. */
  used(): number {
    const used = (Atomics.load(this.words, WRITE_WORD) - Atomics.load(this.words, READ_WORD)) >>> 0;
    return used < this.capacity ? used : this.capacity;
  }
}

/**
 * The producing end of a ring in shared memory (the net side, for the inbound ring). Exactly one
 * RingWriter may exist per ring.
 */
export class RingWriter extends RingEnd {
  private readonly words32: Int32Array;

  constructor(buffer: ArrayBufferLike) {
    super(buffer);
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
      countDropped(this.words, 1, length);
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
export class RingReader extends RingEnd {
  tag = 0;
  time = 0;
  offset = 0;
  length = 0;
  private readonly view = newRecordView();
  private pending = false;

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
      countRead(this.words, 0, 1);
    }
    return false;
  }

  /** Release the record `peek()` described; false if there was none. */
  consume(): boolean {
    if (!this.pending) return false;
    this.pending = false;
    Atomics.store(this.words, READ_WORD, this.view.next);
    countRead(this.words, 1, 0);
    return true;
  }

  /** Hand the next record to `visit`, then release it; false when none is published. */
  pop(visit: RecordVisitor): boolean {
    if (!this.peek()) return false;
    visit(this.bytes, this.offset, this.length, this.tag, this.time);
    this.consume();
    return true;
  }

  get recordsRead(): number {
    return Atomics.load(this.words, RECORDS_READ_WORD);
  }

  get resyncs(): number {
    return Atomics.load(this.words, RESYNCS_WORD);
  }
}
