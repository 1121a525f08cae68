// The net stats block: a Float64Array in shared memory that the packet pump writes (pump.ts) and
// the main thread reads when it likes (the room's counters, the stats view). NET_GLOBAL_LEN
// pump-wide figures, then NET_PEER_LEN figures per engine slot. Only the pump writes it; a reader
// sees each figure whole (a float64 store) but not a consistent set.

export const NET_GLOBAL_LEN = 8;
export const NET_PEER_LEN = 18;
export const N_WAKEUPS = 0;
export const N_OUT_PACKETS = 1;
export const N_IN_PACKETS = 2;
export const N_THREAD = 3; // 1: the pump runs in a worker, 2: on the main thread
export const N_OUT_UNROUTED = 4; // outbound records whose tag names no destination: dropped
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

export const ChannelState = { None: 0, Connecting: 1, Open: 2, Closed: 3 } as const;

export function netStatsBytes(maxPeers: number): number {
  return (NET_GLOBAL_LEN + maxPeers * NET_PEER_LEN) * 8;
}

export function netPeerIndex(slot: number, field: number): number {
  return NET_GLOBAL_LEN + slot * NET_PEER_LEN + field;
}
