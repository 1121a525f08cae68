// The worklet's end of both rings: RingMirror (below) keeps a copy of a ring's data area in the
// WASM engine's linear memory and moves bytes and counters between the two. Layout in ring.ts.

import {
  capacityOf,
  countDropped,
  countRead,
  DATA_OFFSET,
  HEADER_WORDS,
  READ_WORD,
  RECORD_ALIGN,
  WRITE_WORD,
} from './ring';

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
    this.copyChunks(from, to, this.ringChunks, this.mirror);
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
    this.copyChunks(from, to, this.mirrorChunks, this.ringData);
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
    countRead(this.words, records, resyncs);
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
    countDropped(this.words, records, bytes);
  }

  /** Copy the chunks of `source` covering counters `from` to `to` into `target` at their place. */
  private copyChunks(from: number, to: number, source: Uint8Array[], target: Uint8Array): void {
    const n = (to - from) >>> 0;
    if (n === 0) return;
    let c = this.firstChunk(from, n);
    for (let left = this.chunkCount(from, n); left > 0; left--) {
      target.set(source[c], c << this.shift);
      c = (c + 1) & (this.chunks - 1);
    }
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
