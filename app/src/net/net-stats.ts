// The net stats block: a Float64Array in shared memory that the packet pump writes (pump.ts) and
// the main thread reads when it likes (the room's counters, the stats view). NET_GLOBAL_LEN
// pump-wide figures, then NET_PEER_LEN figures per engine slot. Only the pump writes it; a reader
// sees each figure whole (a float64 store) but not a consistent set.

import { CONTROL_PACKET_LEN as EXIT_PACKET_BYTES, HEADER_LEN as HEADER_BYTES } from '../audio/packet';

export const NET_GLOBAL_LEN = 22;
export const NET_PEER_LEN = 26;
export const N_WAKEUPS = 0;
export const N_OUT_PACKETS = 1;
export const N_IN_PACKETS = 2;
export const N_THREAD = 3; // 1: the pump runs in a worker, 2: on the main thread
export const N_OUT_UNROUTED = 4; // outbound records whose tag names no destination: dropped
// The hub link (pump-hub.ts): one channel for every participant reached through the hub.
export const N_HUB_STATE = 5; // ChannelState of the hub channel (None: no hub link)
export const N_HUB_BUNDLES = 6; // bundles received from the hub and played
export const N_HUB_BAD_BUNDLES = 7; // hub messages not binary, or none of a whole bundle, meters or train message: dropped
export const N_HUB_UNKNOWN_STREAM = 8; // packets of a bundle whose stream id maps to no slot: dropped
export const N_HUB_NO_TRAILER = 9; // packets of a bundle without a stream id: dropped
export const N_HUB_TX_PACKETS = 10; // our packets handed to the hub channel (once each)
export const N_HUB_TX_SKIPPED = 11; // ours not sent: hub channel not open, or its send queue over the limit
export const N_HUB_BUFFERED = 12; // the hub channel's bufferedAmount at the last send, bytes
export const N_HUB_SEND_QUEUE_MS = 13; // its backlog as time at the last send (as NP_SEND_QUEUE_MS)
export const N_HUB_RX_BYTES = 14; // bytes of every message from the hub
export const N_HUB_METERS = 15; // meters messages received from the hub (mix mode; meters.ts)
/** Binary messages from the hub, of every kind (with N_HUB_RX_BYTES: what reached us, each
 * message costing PACKET_OVERHEAD_BYTES more on the wire). */
export const N_HUB_RX_MESSAGES = 16;
/** Train messages received from the hub (train.ts: trains measure the path's capacity). */
export const N_HUB_TRAIN_MESSAGES = 17;
/** Trains that gave a capacity estimate (a train whose messages from index 1 on all came). */
export const N_HUB_TRAINS = 18;
/** The last train's capacity estimate, bits per second (train.ts trainCapacityBps); NaN: none
 * yet. Read it when N_HUB_TRAINS changes. */
export const N_HUB_TRAIN_BPS = 19;
/** Bytes and messages of every peer's data channel in the mesh (with PACKET_OVERHEAD_BYTES a
 * message: what reached us from the mesh, for a mesh listener's reception report). */
export const N_MESH_RX_BYTES = 20;
export const N_MESH_RX_MESSAGES = 21;
export const NP_STATE = 0; // ChannelState
export const NP_RX_PACKETS = 1;
export const NP_RX_BYTES = 2;
export const NP_RX_DROPPED = 3; // not binary, or refused by a full inbound ring
export const NP_TX_PACKETS = 4;
export const NP_TX_SKIPPED = 5; // channel not open, or its send queue was over the limit
export const NP_BUFFERED = 6; // bufferedAmount at the last send, bytes
export const NP_LAST_RX_MS = 7; // performance.now() of the last packet (pump's clock)
export const NP_GAP_MAX_MS = 8; // longest time between two packets, ms
export const NP_GAPS_OVER_20MS = 9; // times between two packets over 20 ms
export const NP_RTT_MS = 10; // median RTT of the last exchanges on the control channel; NaN: none yet
export const NP_OFFSET_US = 11; // our wall clock − the peer's, µs (min-RTT exchange); NaN: unknown
/** The last send's backlog as time: bytes the channel still held when the pass began / the stream's bytes per second, the
 * latter computed from the packet itself (length × sample rate / frames per packet). */
export const NP_SEND_QUEUE_MS = 12;
export const NP_CTL_BAD = 13; // control messages malformed (or refused as exchanges): dropped
export const NP_PINGS = 14; // pings sent
export const NP_EXCHANGES = 15; // pongs taken as clock samples
/** The last packet's arrival time − the send time in its header, ms: the one-way delay plus the
 * clock offset (a diagnostic; NaN until a packet with a header arrives). */
export const NP_STAMP_LAG_MS = 16;
/** Echo requests from the peer dropped unasked: one pending already, its echo running, or in the
 * cooldown after a denial, an unanswered or withdrawn request or a stop (echo-consent.ts). */
export const NP_ECHO_DROPPED = 17;
/** The hub's meter of this participant (mix mode, where our engine hears only the mix): peak
 * left, peak right, RMS left, RMS right, linear, as its last meters message read them, and when
 * that came (ms since the epoch, timeOrigin + now(), comparable across threads; 0: never). */
export const NP_HUB_PEAK_L = 18;
export const NP_HUB_PEAK_R = 19;
export const NP_HUB_RMS_L = 20;
export const NP_HUB_RMS_R = 21;
export const NP_HUB_METER_MS = 22;
/** Packets into this slot from the hub's bundles (forward mode): how a switch to the hub knows
 * the hub carries this participant to us. */
export const NP_HUB_RX_PACKETS = 23;
/** The smallest RTT of the same exchanges, ms: the path's best case, whose exchange gives the
 * clock offset (half of it bounds the offset's error); NaN: none yet. */
export const NP_RTT_MIN_MS = 24;
/** The layer of our stream this peer takes (0 as sent, 1 Opus 128, 2 Opus 64: the engine's
 * Layer::code), as the engine's route records told the pump. */
export const NP_SEND_LAYER = 25;

export const ChannelState = { None: 0, Connecting: 1, Open: 2, Closed: 3 } as const;

/** How old the hub's last reading of a participant may be and still show, ms (it sends one
 * every ~51 ms). */
export const HUB_METER_FRESH_MS = 500;

/**
 * The hub's meter of the participant in `slot` (linear: peak left, peak right, RMS left, RMS
 * right), or null when none came in the last HUB_METER_FRESH_MS before `epochMs` (ms since the
 * epoch).
 */
export function hubMeter(
  s: Float64Array,
  slot: number,
  epochMs: number,
): { peakL: number; peakR: number; rmsL: number; rmsR: number } | null {
  const at = s[netPeerIndex(slot, NP_HUB_METER_MS)];
  if (!(at > 0) || epochMs - at > HUB_METER_FRESH_MS) return null;
  const base = netPeerIndex(slot, NP_HUB_PEAK_L);
  return { peakL: s[base], peakR: s[base + 1], rmsL: s[base + 2], rmsR: s[base + 3] };
}

export function netStatsBytes(maxPeers: number): number {
  return (NET_GLOBAL_LEN + maxPeers * NET_PEER_LEN) * 8;
}

export function netPeerIndex(slot: number, field: number): number {
  return NET_GLOBAL_LEN + slot * NET_PEER_LEN + field;
}

/** Sets slot `slot`'s figures as for a peer with nothing yet: counters 0, and NaN where a
 * figure is "none yet" (the round trips, the clock offset, the stamp lag). */
export function resetNetPeer(s: Float64Array, slot: number): void {
  const base = netPeerIndex(slot, 0);
  for (let f = 0; f < NET_PEER_LEN; f++) s[base + f] = 0;
  s[base + NP_RTT_MS] = NaN;
  s[base + NP_RTT_MIN_MS] = NaN;
  s[base + NP_OFFSET_US] = NaN;
  s[base + NP_STAMP_LAG_MS] = NaN;
}

/**
 * Counts one packet's arrival for the peer whose figures start at `base`: packets, bytes, the
 * stamp lag (from the header's send time), the gaps between arrivals. `bytes[offset..+length]` is
 * the packet; `nowMs` is performance.now() and `arrivalUs` the wall clock, µs, at its arrival.
 */
export function noteArrival(
  s: Float64Array,
  base: number,
  bytes: Uint8Array,
  offset: number,
  length: number,
  nowMs: number,
  arrivalUs: number,
): void {
  s[base + NP_RX_PACKETS]++;
  s[base + NP_RX_BYTES] += length;
  s[N_IN_PACKETS]++;
  if (length >= HEADER_BYTES && length !== EXIT_PACKET_BYTES) {
    s[base + NP_STAMP_LAG_MS] = (arrivalUs - readU64(bytes, offset)) / 1000;
  }
  const last = s[base + NP_LAST_RX_MS];
  if (last > 0) {
    const gap = nowMs - last;
    if (gap > s[base + NP_GAP_MAX_MS]) s[base + NP_GAP_MAX_MS] = gap;
    if (gap > 20) s[base + NP_GAPS_OVER_20MS]++;
  }
  s[base + NP_LAST_RX_MS] = nowMs;
}

/** The u64 little-endian at `at` in `b`, as a number (exact below 2^53). */
export function readU64(b: Uint8Array, at = 0): number {
  const lo = (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24)) >>> 0;
  const hi = (b[at + 4] | (b[at + 5] << 8) | (b[at + 6] << 16) | (b[at + 7] << 24)) >>> 0;
  return hi * 4294967296 + lo;
}
