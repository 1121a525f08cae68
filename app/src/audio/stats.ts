// The stats block layout, mirrored from core/src/stats.rs (a Rust test checks they agree).
// Every value is an f64; index 0 is a seqlock word (odd while the engine writes the block).

export const GLOBAL_LEN = 64;
export const PEER_LEN = 48;
export const MAX_PEERS = 256;
export const BLOCK_LEN = 12352;
export const G_SEQUENCE = 0;
export const G_QUANTA = 1;
export const G_NOW_FRAMES = 2;
export const G_PEERS = 3;
export const G_UNKNOWN_PEER = 4;
export const G_MALFORMED = 5;
export const G_RECORDS_READ = 6;
export const G_RING_RESYNCS = 7;
export const G_MASTER_PEAK_L = 8;
export const G_MASTER_PEAK_R = 9;
export const G_MASTER_RMS_L = 10;
export const G_MASTER_RMS_R = 11;
export const G_LIMITER_DB = 12;
export const G_PACKETS_SENT = 13;
export const G_SEND_DROPPED = 14;
export const G_INPUT_PEAK = 15;
export const G_INPUT_RMS = 16;
export const G_NONFINITE = 17;
export const G_UNDERRUNS = 18;
// Capture interval (host wall clock between input quanta; in the worklet Date.now(), so 1 ms
// resolution): ms, 0 while the count is 0.
export const G_CAPTURE_P50_MS = 19;
export const G_CAPTURE_P95_MS = 20;
export const G_CAPTURE_P99_MS = 21;
export const G_CAPTURE_MAX_MS = 22;
export const G_CAPTURE_MEAN_MS = 23;
export const G_CAPTURE_COUNT = 24;
// Round-trip probe (core/src/probe.rs): state 0 idle, 1 running, 2 done; the slot it measures;
// clicks asked, sent, heard; the slot we echo (−1: none); from G_PROBE_RESULTS_AT, up to
// PROBE_MAX_CLICKS round trips in ms (NaN: lost or not sent).
export const G_PROBE_STATE = 25;
export const G_PROBE_SLOT = 26;
export const G_PROBE_CLICKS = 27;
export const G_PROBE_SENT = 28;
export const G_PROBE_HEARD = 29;
export const G_ECHO_SLOT = 30;
export const G_PROBE_RESULTS_AT = 32;
export const PROBE_MAX_CLICKS = 16;
/** Our own audio device's missed callbacks (core/src/continuity.rs): gaps, and their total ms. */
export const G_CAPTURE_GAPS = 48;
export const G_CAPTURE_GAP_MS = 49;
/** Stalls of this machine: every peer's packets stopped and came back together. */
export const G_LOCAL_STALLS = 50;
export const P_ACTIVE = 0;
export const P_RECEIVED = 1;
export const P_LOST = 2;
export const P_LATE = 3;
export const P_DUPLICATES = 4;
export const P_CONCEALED = 5;
export const P_UNDERRUNS = 6;
export const P_DISCARDED = 7;
export const P_MALFORMED = 8;
export const P_BUFFERED_FRAMES = 9;
export const P_TARGET_FRAMES = 10;
export const P_DRIFT_PPM = 11;
export const P_PEAK_L = 12;
export const P_PEAK_R = 13;
export const P_RMS_L = 14;
export const P_RMS_R = 15;
export const P_BLOCK_FRAMES = 16;
export const P_SAMPLE_RATE = 17;
export const P_CHANNELS = 18;
export const P_BITS = 19;
export const P_JITTER_FRAMES = 20;
export const P_RESETS = 21;
// Jitter-buffer wait (arrival to playout) since the peer joined or the last reset-latency: ms,
// 0 while the count is 0.
export const P_WAIT_P50_MS = 22;
export const P_WAIT_P95_MS = 23;
export const P_WAIT_P99_MS = 24;
export const P_WAIT_MAX_MS = 25;
export const P_WAIT_MEAN_MS = 26;
export const P_WAIT_COUNT = 27;
// Network one-way delay (needs the clock offset; nothing is recorded until it is known): ms.
export const P_NET_P50_MS = 28;
export const P_NET_P95_MS = 29;
export const P_NET_P99_MS = 30;
export const P_NET_MAX_MS = 31;
export const P_NET_MEAN_MS = 32;
export const P_NET_COUNT = 33;
/** One-way delays outside 0..10 s (offset wrong or stale): counted, not recorded. */
export const P_NET_OUT_OF_RANGE = 34;
/** Clock offset in force (our wall clock − the peer's), µs; NaN while unknown. */
export const P_CLOCK_OFFSET_US = 35;
/** Underruns that waited for a late packet (the others ended with a gap or a local stall). */
export const P_LATE_UNDERRUNS = 36;
/** Underruns ended by packets a stall of this machine held back. */
export const P_STALL_UNDERRUNS = 37;
/** The peer's own missed device callbacks, seen in its send stamps: gaps, and their total ms. */
export const P_SENDER_GAPS = 38;
export const P_SENDER_GAP_MS = 39;
/** Blocks synthesized without passing a sequence number (underrun waits, depth raised). */
export const P_STRETCHED = 40;
/** The oracle: the smallest fixed depth that would have played every packet that arrived in the
 * last two minutes, frames (a yardstick for P_TARGET_FRAMES). */
export const P_ORACLE_FRAMES = 41;
/** Compressed (Opus) frames played that their decoder refused: each concealed instead. Counted
 * in P_RECEIVED, not in P_CONCEALED. */
export const P_UNDECODABLE = 42;
/** Compressed frames lost on the way but played from the copy the next packet carried: counted
 * in P_LOST, not in P_CONCEALED. */
export const P_RECOVERED = 43;

/** Index of value `field` of peer `slot`. */
export function peerIndex(slot: number, field: number): number {
  return GLOBAL_LEN + slot * PEER_LEN + field;
}

/** Bytes a stats SharedArrayBuffer needs. */
export const STATS_BYTES = BLOCK_LEN * 8;

/**
 * Copies a consistent snapshot of the shared stats block into `into` (allocation-free).
 * Returns false when the engine kept writing during every attempt; the caller retries later.
 */
export function readStats(shared: Float64Array, into: Float64Array, attempts = 4): boolean {
  for (let i = 0; i < attempts; i++) {
    const before = shared[G_SEQUENCE];
    if (before % 2 !== 0) continue;
    into.set(shared);
    if (shared[G_SEQUENCE] === before) return true;
  }
  return false;
}
