// Packet trains: a few messages the hub sends back to back on our channel, so that their spacing
// on arrival gives the capacity of the path from the hub (the narrowest link spreads them by its
// serialization time) without the hub sending more audio than the path carries. The layout and
// its reasons are documented in core/src/train.rs; this is the reader the net side uses, and a
// test compares these constants with the Rust ones.
//
// Nothing here allocates: the pump reads a message in place, and the estimate works in scratch
// space made once.

/** 'T' and 'P', the first two bytes of every train message. */
export const TRAIN_MAGIC: readonly [number, number] = [0x54, 0x50];
export const TRAIN_VERSION = 1;
/** Messages per train. */
export const TRAIN_MESSAGES = 4;
/** Bytes of each message, exactly. */
export const TRAIN_BYTES = 1100;
/**
 * The shortest spacing the estimate tells apart, ms. A median gap under it means "faster than
 * the clock can tell" (a coarse performance.now(), or messages handed over in one batch): the
 * estimate is then wireBytes × 8 / this, a floor-limited figure (1185 wire bytes: 189.6 Mbit/s),
 * not a measurement of the path.
 */
export const MIN_GAP_MS = 0.05;

/** True when `bytes` claims to be a train message (its magic), whole or not. */
export function isTrain(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === TRAIN_MAGIC[0] && bytes[1] === TRAIN_MAGIC[1];
}

/** The message's place in its train: 0 ..< TRAIN_MESSAGES; -1 when `bytes` is not a whole,
 * valid train message. */
export function trainIndex(bytes: Uint8Array): number {
  if (bytes.length !== TRAIN_BYTES || !isTrain(bytes) || bytes[2] !== TRAIN_VERSION) return -1;
  return bytes[3] < TRAIN_MESSAGES ? bytes[3] : -1;
}

/** The train number of a message `trainIndex` accepted (u32 little-endian at 4). */
export function trainNumber(bytes: Uint8Array): number {
  return (bytes[4] | (bytes[5] << 8) | (bytes[6] << 16) | (bytes[7] << 24)) >>> 0;
}

/** A train message as read (tests and diagnostics; the pump uses trainIndex/trainNumber, which
 * allocate nothing); null when `bytes` is not one. */
export function parseTrainMessage(bytes: Uint8Array): { index: number; train: number } | null {
  const index = trainIndex(bytes);
  return index < 0 ? null : { index, train: trainNumber(bytes) };
}

const times = new Float64Array(TRAIN_MESSAGES);
const gaps = new Float64Array(TRAIN_MESSAGES);

/** Sorts the first `n` entries of `a` in place (n is at most TRAIN_MESSAGES). */
function sortFirst(a: Float64Array, n: number): void {
  for (let i = 1; i < n; i++) {
    const x = a[i];
    let j = i - 1;
    while (j >= 0 && a[j] > x) {
      a[j + 1] = a[j];
      j--;
    }
    a[j + 1] = x;
  }
}

/**
 * The path's capacity, bits per second, from one train's arrival times (ms, by index; NaN where
 * a message did not come) and the bytes each message takes on the wire (payload and per-message
 * overhead).
 *
 * Only the messages from index 1 on count: the first may pass on a token bucket's burst and come
 * right behind the previous traffic, whatever the path's rate. Their arrival times are sorted
 * (a message reordered on the way still took its turn at the narrowest link), each gap between
 * neighbours is one message's serialization there, and the median gap gives the capacity:
 * wireBytes × 8 / gap. A median gap under MIN_GAP_MS gives the floor-limited figure (see there).
 * Null unless every message from index 1 on came (a missing one makes the gap that spans it
 * ambiguous: it was lost before the narrowest link or after it) or when a time is not finite.
 */
export function trainCapacityBps(arrivalsMs: ArrayLike<number>, wireBytes: number): number | null {
  if (!(wireBytes > 0) || arrivalsMs.length < TRAIN_MESSAGES) return null;
  let n = 0;
  for (let i = 1; i < TRAIN_MESSAGES; i++) {
    const t = arrivalsMs[i];
    if (!Number.isFinite(t)) return null;
    times[n++] = t;
  }
  sortFirst(times, n);
  for (let i = 1; i < n; i++) gaps[i - 1] = times[i] - times[i - 1];
  const m = n - 1;
  sortFirst(gaps, m);
  const mid = m >> 1;
  const gap = m % 2 === 1 ? gaps[mid] : (gaps[mid - 1] + gaps[mid]) / 2;
  return (wireBytes * 8) / (Math.max(gap, MIN_GAP_MS) / 1000);
}
