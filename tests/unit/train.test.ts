// Packet trains: app/src/net/train.ts against core/src/train.rs (the same constants, the same
// bytes accepted and refused), and the capacity estimate with known answers.
import { describe, expect, it } from 'vitest';
import {
  MIN_GAP_MS,
  TRAIN_BYTES,
  TRAIN_MAGIC,
  TRAIN_MESSAGES,
  TRAIN_VERSION,
  parseTrainMessage,
  trainCapacityBps,
} from '../../app/src/net/train';
import { PACKET_OVERHEAD_BYTES } from '../../app/src/room/topology';
import rustSource from '../../core/src/train.rs?raw';

/** Message `index` of train `train`, laid out as core/src/train.rs's write does. */
function trainMessage(index: number, train: number): Uint8Array {
  const m = new Uint8Array(TRAIN_BYTES);
  m.set([0x54, 0x50, 1, index]);
  new DataView(m.buffer).setUint32(4, train, true);
  return m;
}

const WIRE = TRAIN_BYTES + PACKET_OVERHEAD_BYTES; // 1185

describe('train layout', () => {
  it('has the constants of core/src/train.rs', () => {
    const rust = (name: string): string => {
      const m = new RegExp(`pub const ${name}: [^=]+= ([^;]+);`).exec(rustSource);
      expect(m, name).not.toBeNull();
      return m![1].trim();
    };
    expect(rust('TRAIN_MAGIC')).toBe('*b"TP"');
    expect(TRAIN_MAGIC).toEqual([...'TP'].map((c) => c.charCodeAt(0)));
    expect(Number(rust('TRAIN_VERSION'))).toBe(TRAIN_VERSION);
    expect(Number(rust('TRAIN_MESSAGES'))).toBe(TRAIN_MESSAGES);
    expect(Number(rust('TRAIN_BYTES').replace(/_/g, ''))).toBe(TRAIN_BYTES);
  });

  it("reads the Rust test's message byte by byte", () => {
    // core/src/train.rs: write(2, 0x0102_0304) begins 54 50 01 02 04 03 02 01, then zeros.
    const m = new Uint8Array(TRAIN_BYTES);
    m.set([0x54, 0x50, 1, 2, 4, 3, 2, 1]);
    expect(parseTrainMessage(m)).toEqual({ index: 2, train: 0x01020304 });
    expect(parseTrainMessage(trainMessage(3, 0xffffffff))).toEqual({ index: 3, train: 0xffffffff });
    expect(parseTrainMessage(trainMessage(0, 0))).toEqual({ index: 0, train: 0 });
  });

  it('refuses what is not a whole train message', () => {
    const good = trainMessage(1, 7);
    expect(parseTrainMessage(good.subarray(0, TRAIN_BYTES - 1))).toBeNull();
    const longer = new Uint8Array(TRAIN_BYTES + 1);
    longer.set(good);
    expect(parseTrainMessage(longer)).toBeNull();
    expect(parseTrainMessage(new Uint8Array(0))).toBeNull();
    for (const [at, value] of [
      [1, 0x42], // a bundle's magic
      [1, 0x4d], // a meters message's
      [0, 0x00],
      [2, 2], // another version
      [3, 4], // index out of range
      [3, 255],
    ]) {
      const bad = good.slice();
      bad[at] = value;
      expect(parseTrainMessage(bad), `byte ${at} = ${value}`).toBeNull();
    }
  });
});

describe('train capacity', () => {
  it('gives 1 Mbit/s for 1185 wire bytes every 9.48 ms', () => {
    const t = [100, 109.48, 118.96, 128.44];
    expect(trainCapacityBps(t, WIRE)).toBeCloseTo(1e6, 3);
    // 100 Mbit/s: 94.8 µs apart.
    expect(trainCapacityBps([0, 0.0948, 0.1896, 0.2844], WIRE)).toBeCloseTo(1e8, -2);
  });

  it("ignores the first gap (a token bucket's burst)", () => {
    // Message 1 comes right behind message 0, then the path's 2 Mbit/s spacing (4.74 ms).
    expect(trainCapacityBps([50, 50.01, 54.75, 59.49], WIRE)).toBeCloseTo(2e6, 3);
    // Message 0 missing changes nothing.
    expect(trainCapacityBps([NaN, 50.01, 54.75, 59.49], WIRE)).toBeCloseTo(2e6, 3);
  });

  it('sorts reordered arrivals: each gap is one turn at the narrowest link', () => {
    // Messages 2 and 3 swapped on the way: arrivals still 9.48 ms apart.
    expect(trainCapacityBps([0, 9.48, 28.44, 18.96], WIRE)).toBeCloseTo(1e6, 3);
  });

  it('takes the median gap: one of two jittered gaps does not dominate', () => {
    // Two gaps: the median is their mean.
    expect(trainCapacityBps([0, 10, 18, 30], WIRE)).toBeCloseTo((WIRE * 8) / 0.01, 3);
  });

  it('is null when a message from index 1 on is missing, or a time is not a number', () => {
    expect(trainCapacityBps([0, 9.48, NaN, 28.44], WIRE)).toBeNull();
    expect(trainCapacityBps([0, NaN, 18.96, 28.44], WIRE)).toBeNull();
    expect(trainCapacityBps([0, 9.48, 18.96, NaN], WIRE)).toBeNull();
    expect(trainCapacityBps([NaN, NaN, NaN, NaN], WIRE)).toBeNull();
    expect(trainCapacityBps([0, 9.48, Infinity, 28.44], WIRE)).toBeNull();
    expect(trainCapacityBps([0, 9.48, 18.96], WIRE)).toBeNull();
    expect(trainCapacityBps([0, 9.48, 18.96, 28.44], 0)).toBeNull();
    expect(trainCapacityBps([0, 9.48, 18.96, 28.44], NaN)).toBeNull();
  });

  it('gives the floor-limited figure when the gaps are under what the clock tells apart', () => {
    const floor = (WIRE * 8) / (MIN_GAP_MS / 1000);
    expect(floor).toBeCloseTo(189.6e6, -3);
    expect(trainCapacityBps([5, 5, 5, 5], WIRE)).toBe(floor);
    expect(trainCapacityBps([5, 5.1, 5.1, 5.12], WIRE)).toBe(floor);
  });
});
