// The shared-memory record ring (app/src/audio/ring.ts) against an array oracle, its edge cases,
// the worklet mirror, and byte-for-byte parity with the Rust golden image.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  DATA_OFFSET,
  MAX_PAYLOAD,
  MIN_CAPACITY,
  READ_WORD,
  RingStatus,
  createRing,
  readCounters,
  recordLen,
} from '../../app/src/audio/ring';
import { RingReader, RingWriter } from '../../app/src/audio/ring-ends';
import { RingMirror } from '../../app/src/audio/ring-mirror';
import { newRecordView, readRecord, writeRecord } from '../../app/src/audio/ring-record';
import { Prng } from '../../app/src/selftest/prng';

/** The shared test generator, with the payload lengths these tests draw. */
class Rng extends Prng {
  /** Mostly small, some packet-sized, some up to and at the maximum. */
  payloadLen(): number {
    const kind = this.below(10);
    if (kind <= 5) return this.below(65);
    if (kind <= 8) return this.below(2101);
    return this.below(4) === 0 ? MAX_PAYLOAD : this.below(MAX_PAYLOAD + 1);
  }
}

/** Payload byte k with fill seed `seed`, as the golden JSON states. */
function payload(seed: number, len: number): Uint8Array {
  const out = new Uint8Array(len);
  for (let k = 0; k < len; k++) out[k] = (seed + 7 * k) & 0xff;
  return out;
}

interface Entry {
  tag: number;
  time: number;
  bytes: Uint8Array;
}

/** Records in an array, space accounted with counters that never wrap (plain numbers). */
class Oracle {
  write: number;
  read: number;
  wraps = 0;
  private queue: { entry: Entry; need: number }[] = [];
  constructor(
    private capacity: number,
    start: number,
  ) {
    this.write = start;
    this.read = start;
  }
  push(entry: Entry): boolean {
    const size = 8 + Math.ceil(entry.bytes.length / 4) * 4;
    const toEnd = this.capacity - (this.write % this.capacity);
    const need = size > toEnd ? toEnd + size : size;
    if (this.write - this.read + need > this.capacity) return false;
    if (need > size) this.wraps++;
    this.write += need;
    this.queue.push({ entry, need });
    return true;
  }
  pop(): Entry | undefined {
    const item = this.queue.shift();
    if (item) this.read += item.need;
    return item?.entry;
  }
  get length(): number {
    return this.queue.length;
  }
}

function sameEntry(a: Entry | undefined, b: Entry | undefined): boolean {
  if (!a || !b) return a === b;
  if (a.tag !== b.tag || a.time !== b.time || a.bytes.length !== b.bytes.length) return false;
  for (let k = 0; k < a.bytes.length; k++) if (a.bytes[k] !== b.bytes[k]) return false;
  return true;
}

/** Exact record comparison; cheap when equal, a full diff when not. */
function expectEntry(got: Entry | undefined, want: Entry | undefined): void {
  if (!sameEntry(got, want)) expect(got).toEqual(want);
}

function take(reader: RingReader): Entry | undefined {
  let got: Entry | undefined;
  reader.pop((bytes, offset, length, tag, time) => {
    got = { tag, time, bytes: bytes.slice(offset, offset + length) };
  });
  return got;
}

/** A record with any tag and time and a payload of the generator's mix of lengths. */
function randomEntry(rng: Rng): Entry {
  return { tag: rng.below(65536), time: rng.nextU32(), bytes: payload(rng.nextU32(), rng.payloadLen()) };
}

/** Pushes `entry` through `writer` and into the oracle, which must agree on whether it fit; returns that. */
function pushBoth(writer: RingWriter, oracle: Oracle, entry: Entry): boolean {
  const ok = writer.push(entry.tag, entry.time, entry.bytes);
  const fits = oracle.push(entry);
  if (ok !== fits) expect(ok).toBe(fits);
  return ok;
}

const STARTS = [0, 2 ** 32 - 4, 2 ** 32 - 20000, 0x80000004];

describe('ring records', () => {
  it('writes the documented bytes for one record', () => {
    const data = new Uint8Array(MIN_CAPACITY).fill(0x55);
    const next = writeRecord(
      data,
      0,
      MIN_CAPACITY,
      0,
      0,
      0x0102,
      0x03040506,
      Uint8Array.of(0xaa, 0xbb, 0xcc),
      0,
      3,
    );
    expect(next).toBe(12);
    expect([...data.subarray(0, 13)]).toEqual([3, 0, 2, 1, 6, 5, 4, 3, 0xaa, 0xbb, 0xcc, 0, 0x55]);
    const view = newRecordView();
    expect(readRecord(data, 0, MIN_CAPACITY, 0, 12, view)).toBe(RingStatus.Record);
    expect(view).toEqual({ tag: 0x0102, time: 0x03040506, offset: 8, length: 3, next: 12 });
    expect([0, 1, 4, 5, MAX_PAYLOAD].map(recordLen)).toEqual([8, 12, 12, 16, 4104]);
  });

  // Exact: every push result, record and counter must equal the oracle's.
  it.each(STARTS.map((start, i) => [i + 1, start]))(
    'random push/pop sequence %i (start %i) matches the oracle',
    (seed, start) => {
      const rng = new Rng(seed * 0x9e3779b1);
      const sab = createRing(MIN_CAPACITY, start);
      const writer = new RingWriter(sab);
      const reader = new RingReader(sab);
      const oracle = new Oracle(MIN_CAPACITY, start);
      let refused = 0;
      let empties = 0;
      let popped = 0;
      for (let step = 0; step < 20000; step++) {
        const pushPercent = Math.floor(step / 700) % 2 === 0 ? 75 : 35;
        if (rng.below(100) < pushPercent) {
          if (!pushBoth(writer, oracle, randomEntry(rng))) {
            refused++;
            expect(writer.lastError).toBe(RingStatus.Full);
          }
        } else {
          const want = oracle.pop();
          const got = take(reader);
          expectEntry(got, want);
          if (got) popped++;
          else empties++;
        }
        const c = readCounters(sab);
        const want = [oracle.write % 2 ** 32, oracle.read % 2 ** 32, refused, popped, 0];
        const got = [c.write, c.read, c.droppedRecords, c.recordsRead, c.resyncs];
        if (got.some((v, i) => v !== want[i])) expect(got).toEqual(want);
      }
      expect(refused).toBeGreaterThan(100);
      expect(empties).toBeGreaterThan(100);
      expect(oracle.wraps).toBeGreaterThan(100);
      if (start > 0xffff0000) expect(oracle.write).toBeGreaterThan(2 ** 32);
    },
  );

  it('keeps positions right as the counters cross 2^32', () => {
    const sab = createRing(MIN_CAPACITY, 2 ** 32 - 8);
    const writer = new RingWriter(sab);
    const reader = new RingReader(sab);
    for (let i = 0; i < 3; i++) expect(writer.push(i, i, payload(i, 100))).toBe(true);
    expect(writer.used()).toBe(8 + 3 * 108); // skipped tail + three records
    for (let i = 0; i < 3; i++) expect(take(reader)).toEqual({ tag: i, time: i, bytes: payload(i, 100) });
    expect(take(reader)).toBeUndefined();
    const c = readCounters(sab);
    expect([c.write, c.read]).toEqual([324, 324]);
    const bytes = new Uint8Array(sab);
    expect([...bytes.subarray(DATA_OFFSET + MIN_CAPACITY - 8, DATA_OFFSET + MIN_CAPACITY - 4)]).toEqual([
      255, 255, 0, 0,
    ]);
    expect([...bytes.subarray(DATA_OFFSET, DATA_OFFSET + 4)]).toEqual([100, 0, 0, 0]);
  });

  it('refuses records that do not fit and counts them', () => {
    const sab = createRing(MIN_CAPACITY);
    const writer = new RingWriter(sab);
    const reader = new RingReader(sab);
    const big = payload(9, 1000); // 1008-byte records: 16 fit, 256 bytes remain
    for (let i = 0; i < 16; i++) expect(writer.push(i, 0, big)).toBe(true);
    const before = new Uint8Array(sab).slice(12);
    expect(writer.push(16, 0, big)).toBe(false);
    expect(writer.push(16, 0, big)).toBe(false);
    expect(new Uint8Array(sab).slice(12)).toEqual(before); // only the drop counters changed
    expect([writer.droppedRecords, writer.droppedBytes]).toEqual([2, 2000]);
    expect(writer.push(100, 0, new Uint8Array(0))).toBe(true);
    expect(writer.push(17, 0, big)).toBe(false);
    expect(take(reader)?.tag).toBe(0);
    expect(writer.push(17, 0, big)).toBe(true); // marker tail 248 + 1008 = exactly the free space
    expect(writer.used()).toBe(MIN_CAPACITY);
    expect(writer.push(18, 0, new Uint8Array(0))).toBe(false);
    const tags: number[] = [];
    for (let e = take(reader); e; e = take(reader)) tags.push(e.tag);
    expect(tags).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 100, 17]);
    const c = readCounters(sab);
    expect([c.droppedRecords, c.droppedBytes, c.recordsRead]).toEqual([4, 3000, 18]);
  });

  it('refuses oversized payloads and rejects bad shapes', () => {
    const sab = createRing(MIN_CAPACITY);
    const writer = new RingWriter(sab);
    expect(writer.push(0, 0, new Uint8Array(MAX_PAYLOAD + 1))).toBe(false);
    expect(writer.lastError).toBe(RingStatus.TooLarge);
    expect([writer.droppedRecords, writer.droppedBytes]).toEqual([1, MAX_PAYLOAD + 1]);
    expect(writer.push(1, 0, payload(1, 10), 4, 3)).toBe(true); // a slice of the source
    expect(take(new RingReader(sab))?.bytes).toEqual(payload(1, 10).subarray(4, 7));
    expect(() => writer.push(65536, 0, new Uint8Array(1))).toThrow(RangeError);
    expect(() => writer.push(0, 0, new Uint8Array(4), 2, 3)).toThrow(RangeError);
    expect(() => createRing(8192)).toThrow(RangeError);
    expect(() => createRing(MIN_CAPACITY, 2)).toThrow(RangeError);
    const data = new Uint8Array(MIN_CAPACITY);
    const view = newRecordView();
    for (const [read, write] of [
      [2, 2],
      [0, 6],
      [0, MIN_CAPACITY + 4],
      [8, 4],
    ]) {
      expect(readRecord(data, 0, MIN_CAPACITY, read, write, view)).toBe(RingStatus.BadIndices);
      expect(writeRecord(data, 0, MIN_CAPACITY, write, read, 0, 0, data, 0, 0)).toBe(RingStatus.BadIndices);
    }
    expect(readRecord(data, 0, 8192, 0, 0, view)).toBe(RingStatus.BadCapacity);
    expect(readRecord(data, 4, MIN_CAPACITY, 0, 0, view)).toBe(RingStatus.BadCapacity);
  });

  it('resyncs the reader on a corrupt length or counter', () => {
    const sab = createRing(MIN_CAPACITY);
    const writer = new RingWriter(sab);
    const reader = new RingReader(sab);
    for (let i = 0; i < 3; i++) writer.push(i, 0, Uint8Array.of(1, 2, 3));
    const bytes = new Uint8Array(sab);
    bytes[DATA_OFFSET + 12] = 0x00; // second record's len = 0x2000
    bytes[DATA_OFFSET + 13] = 0x20;
    expect(take(reader)?.tag).toBe(0);
    expect(take(reader)).toBeUndefined();
    expect(reader.lastError).toBe(RingStatus.BadRecord);
    expect(reader.used()).toBe(0);
    writer.push(9, 0, Uint8Array.of(4));
    expect(take(reader)?.tag).toBe(9);
    new Uint32Array(sab)[READ_WORD] ^= 2; // misaligned read counter
    expect(take(reader)).toBeUndefined();
    expect(reader.lastError).toBe(RingStatus.BadIndices);
    const c = readCounters(sab);
    expect([c.resyncs, c.recordsRead, c.read]).toEqual([2, 2, c.write]);
  });

  // Random data and counters: reading never throws, and each record moves `read` strictly
  // towards `write`, so a drain ends within capacity / 8 records.
  it('never throws or stalls on random data (20 000 cases)', () => {
    const rng = new Rng(0x2545f491);
    const data = new Uint8Array(MIN_CAPACITY);
    const view = newRecordView();
    const seen = { record: 0, empty: 0, error: 0 };
    for (let i = 0; i < 20000; i++) {
      if (i % 256 === 0) for (let k = 0; k < data.length; k++) data[k] = rng.nextU32();
      const read = rng.below(4) === 0 ? rng.nextU32() : (rng.nextU32() & ~3) >>> 0;
      const pick = rng.below(5);
      const write =
        pick === 0
          ? rng.nextU32()
          : pick === 1
            ? (read + (rng.below(MIN_CAPACITY + 1) & ~3)) >>> 0
            : pick === 2
              ? (read + 4 * rng.below(64)) >>> 0
              : pick === 3
                ? (read + MIN_CAPACITY) >>> 0
                : read;
      if (rng.below(2) === 0) {
        const pos = read & (MIN_CAPACITY - 1) & ~3;
        const len = [0xffff, rng.below(MAX_PAYLOAD + 1), rng.below(64), rng.below(65536)][rng.below(4)];
        data[pos] = len & 0xff;
        data[pos + 1] = len >>> 8;
      }
      let at = read >>> 0;
      for (let steps = 0; ; steps++) {
        expect(steps).toBeLessThanOrEqual(MIN_CAPACITY / 8);
        const status = readRecord(data, 0, MIN_CAPACITY, at, write, view);
        if (status === RingStatus.Record) {
          const before = (write - at) >>> 0;
          const after = (write - view.next) >>> 0;
          expect(after < before && before <= MIN_CAPACITY).toBe(true);
          expect(before - after).toBeGreaterThanOrEqual(recordLen(view.length));
          expect(view.offset + view.length).toBeLessThanOrEqual(MIN_CAPACITY);
          at = view.next;
          seen.record++;
        } else {
          if (status === RingStatus.Empty) seen.empty++;
          else seen.error++;
          break;
        }
      }
    }
    expect(Math.min(seen.record, seen.empty, seen.error)).toBeGreaterThan(2000);
  });
});

/** A region of real WASM memory standing in for the engine's mirror. */
function wasmRegion(capacity: number): { memory: WebAssembly.Memory; ptr: number; view: () => Uint8Array } {
  const memory = new WebAssembly.Memory({ initial: Math.ceil((capacity + 4096) / 65536), maximum: 64 });
  const ptr = 1000; // deliberately not chunk-aligned
  return { memory, ptr, view: () => new Uint8Array(memory.buffer, ptr, capacity) };
}

describe('ring mirror', () => {
  // Inbound: writer on the shared ring, engine reads the mirror. Exact against the oracle; after
  // every pull the mirror holds the ring's unread bytes.
  it.each([64, 1024, MIN_CAPACITY])('inbound copies give the ring bytes (chunk %i)', (chunk) => {
    const rng = new Rng(77 + chunk);
    const sab = createRing(MIN_CAPACITY, 2 ** 32 - 6000);
    const writer = new RingWriter(sab);
    const ringBytes = new Uint8Array(sab, DATA_OFFSET, MIN_CAPACITY);
    const region = wasmRegion(MIN_CAPACITY);
    const mirror = new RingMirror(sab, region.view(), chunk);
    const oracle = new Oracle(MIN_CAPACITY, 2 ** 32 - 6000);
    const view = newRecordView();
    let received = 0;
    for (let quantum = 0; quantum < 3000; quantum++) {
      for (let n = rng.below(6); n > 0; n--) {
        pushBoth(writer, oracle, randomEntry(rng));
      }
      if (quantum === 1500) {
        region.memory.grow(1);
        expect(mirror.detached).toBe(true);
        mirror.rebind(region.view());
      }
      if (rng.below(3) === 0) continue; // the worklet sometimes lags
      const write = mirror.pull();
      let read = mirror.loadRead();
      const m = region.view();
      for (let k = read; k !== write; k = (k + 4) >>> 0) {
        const p = k & (MIN_CAPACITY - 1);
        if (m[p] !== ringBytes[p]) throw new Error(`mirror differs at ${p}`);
      }
      let records = 0;
      // Drain at most a few records per quantum so unread bytes stay across pulls.
      for (let budget = rng.below(8); budget > 0; budget--) {
        const status = readRecord(m, 0, MIN_CAPACITY, read, write, view);
        if (status !== RingStatus.Record) {
          expect(status).toBe(RingStatus.Empty);
          break;
        }
        expectEntry(
          { tag: view.tag, time: view.time, bytes: m.subarray(view.offset, view.offset + view.length) },
          oracle.pop(),
        );
        read = view.next;
        records++;
      }
      mirror.commitRead(read, records);
      received += records;
    }
    expect(received).toBeGreaterThan(2000);
    expect(readCounters(sab).recordsRead).toBe(received);
    expect(oracle.wraps).toBeGreaterThan(20);
  });

  // Outbound: engine writes the mirror, the worklet publishes by chunks, the net side reads the
  // shared ring. Exact against the oracle; at the end the ring's data area equals the mirror.
  it.each([64, 1024, MIN_CAPACITY])('outbound copies give the mirror bytes (chunk %i)', (chunk) => {
    const rng = new Rng(91 + chunk);
    const start = 2 ** 32 - 3000;
    const sab = createRing(MIN_CAPACITY, start);
    const reader = new RingReader(sab);
    const region = wasmRegion(MIN_CAPACITY);
    const mirror = new RingMirror(sab, region.view(), chunk);
    mirror.syncMirror();
    const oracle = new Oracle(MIN_CAPACITY, start);
    for (let quantum = 0; quantum < 3000; quantum++) {
      const m = region.view();
      const write = mirror.loadWrite();
      const read = mirror.loadRead();
      let next = write;
      let dropped = 0;
      for (let n = rng.below(5); n > 0; n--) {
        const entry = randomEntry(rng);
        const result = writeRecord(
          m,
          0,
          MIN_CAPACITY,
          next,
          read,
          entry.tag,
          entry.time,
          entry.bytes,
          0,
          entry.bytes.length,
        );
        const fits = oracle.push(entry);
        if (result >= 0 !== fits) expect(result >= 0).toBe(fits);
        if (result >= 0) next = result;
        else dropped++;
      }
      mirror.publish(write, next);
      mirror.addDropped(dropped, 0);
      // The reader keeps up on average, less than the writer produces, so the ring fills.
      for (let n = rng.below(4); n > 0; n--) expectEntry(take(reader), oracle.pop());
    }
    for (let e = take(reader); e; e = take(reader)) expectEntry(e, oracle.pop());
    expect(oracle.length).toBe(0);
    expect(new Uint8Array(sab, DATA_OFFSET)).toEqual(region.view());
    expect(readCounters(sab).droppedRecords).toBeGreaterThan(10);
  });
});

interface GoldenOp {
  op: 'push' | 'pop';
  tag?: number;
  time?: number;
  len?: number;
  seed?: number;
  ok?: boolean;
  record?: { tag: number; time: number; len: number; seed: number } | null;
}

interface Golden {
  capacity: number;
  start: number;
  image_bytes: number;
  ops: GoldenOp[];
  counters: Record<string, number>;
}

const golden: Golden = JSON.parse(
  readFileSync(new URL('../vectors/ring-golden.json', import.meta.url), 'utf8'),
);
const goldenImage = new Uint8Array(readFileSync(new URL('../vectors/ring-golden.bin', import.meta.url)));

function expectedRecord(r: NonNullable<GoldenOp['record']>): Entry {
  return { tag: r.tag, time: r.time, bytes: payload(r.seed, r.len) };
}

describe('ring golden image (written by core/src/ring.rs)', () => {
  it('replaying the sequence gives the same bytes, results and counters', () => {
    const sab = createRing(golden.capacity, golden.start);
    const writer = new RingWriter(sab);
    const reader = new RingReader(sab);
    for (const op of golden.ops) {
      if (op.op === 'push') {
        expect(writer.push(op.tag!, op.time!, payload(op.seed!, op.len!))).toBe(op.ok);
      } else {
        expect(take(reader)).toEqual(op.record ? expectedRecord(op.record) : undefined);
      }
    }
    expect(sab.byteLength).toBe(golden.image_bytes);
    expect(new Uint8Array(sab)).toEqual(goldenImage);
    const c = readCounters(sab);
    const g = golden.counters;
    expect([c.write, c.read, c.droppedRecords, c.droppedBytes, c.recordsRead, c.resyncs]).toEqual([
      g.write,
      g.read,
      g.dropped_records,
      g.dropped_bytes,
      g.records_read,
      g.resyncs,
    ]);
  });

  it('the same sequence through the outbound mirror gives the same bytes', () => {
    const sab = createRing(golden.capacity, golden.start);
    const region = wasmRegion(golden.capacity);
    const mirror = new RingMirror(sab, region.view());
    const reader = new RingReader(sab);
    let dropped = 0;
    let droppedBytes = 0;
    for (const op of golden.ops) {
      if (op.op === 'push') {
        const write = mirror.loadWrite();
        const bytes = payload(op.seed!, op.len!);
        const next = writeRecord(
          region.view(),
          0,
          golden.capacity,
          write,
          mirror.loadRead(),
          op.tag!,
          op.time!,
          bytes,
          0,
          bytes.length,
        );
        expect(next >= 0).toBe(op.ok);
        if (next >= 0) mirror.publish(write, next);
        else mirror.addDropped(1, bytes.length);
        dropped += next >= 0 ? 0 : 1;
        droppedBytes += next >= 0 ? 0 : bytes.length;
      } else {
        expect(take(reader)).toEqual(op.record ? expectedRecord(op.record) : undefined);
      }
    }
    expect([dropped, droppedBytes]).toEqual([golden.counters.dropped_records, golden.counters.dropped_bytes]);
    expect(new Uint8Array(sab)).toEqual(goldenImage);
  });

  it('reads the unread records back from the Rust image, directly and through the inbound mirror', () => {
    // What the sequence leaves unread, by the oracle.
    const oracle = new Oracle(golden.capacity, golden.start);
    for (const op of golden.ops) {
      if (op.op === 'push') oracle.push({ tag: op.tag!, time: op.time!, bytes: payload(op.seed!, op.len!) });
      else oracle.pop();
    }
    const unread: Entry[] = [];
    for (let e = oracle.pop(); e; e = oracle.pop()) unread.push(e);
    expect(unread.length).toBeGreaterThan(0);

    const direct = new SharedArrayBuffer(goldenImage.length);
    new Uint8Array(direct).set(goldenImage);
    const reader = new RingReader(direct);
    const got: Entry[] = [];
    for (let e = take(reader); e; e = take(reader)) got.push(e);
    expect(got).toEqual(unread);

    const viaMirror = new SharedArrayBuffer(goldenImage.length);
    new Uint8Array(viaMirror).set(goldenImage);
    const region = wasmRegion(golden.capacity);
    const mirror = new RingMirror(viaMirror, region.view());
    const write = mirror.pull();
    let read = mirror.loadRead();
    const view = newRecordView();
    const m = region.view();
    const fromMirror: Entry[] = [];
    while (readRecord(m, 0, golden.capacity, read, write, view) === RingStatus.Record) {
      fromMirror.push({
        tag: view.tag,
        time: view.time,
        bytes: m.slice(view.offset, view.offset + view.length),
      });
      read = view.next;
    }
    expect(fromMirror).toEqual(unread);
    expect(read).toBe(write);
  });
});
