// The packet pump: moves audio packets between the peers' data channels and the engine's rings.
// It runs in the net worker (net-worker.ts) where the browser can transfer RTCDataChannels to a
// worker, else on the main thread; either way it is the only producer of the inbound ring and
// the only consumer of the outbound ring.
//
// Inbound, per message: one ring write of the browser's ArrayBuffer, tagged with the peer's slot.
// Outbound: the engine worklet publishes a packet per block and wakes the pump with
// Atomics.notify on the ring's write word; the pump copies each packet once into a buffer of its
// own (data channels refuse views of shared memory) and sends that to every open channel.
// Nothing is posted between threads per packet, and the steady state allocates nothing of its
// own besides one typed-array view over each received ArrayBuffer and one promise per wake-up.
//
// A channel whose send queue holds more than SEND_QUEUE_LIMIT bytes (a congested or stalled
// path) skips packets rather than queueing audio that would arrive too late to play; skips are
// counted per peer.
//
// Counters go to a shared Float64Array (layout below) that the main thread reads when it likes.

import { HEADER_WORDS, RingReader, RingWriter, WRITE_WORD } from './../audio/ring';
import { MAX_PACKET_LEN } from '../audio/packet';

/** Send-queue bytes beyond which a channel skips packets (~30 PCM16 stereo 128-frame packets). */
export const SEND_QUEUE_LIMIT = 64 * 1024;
/** Longest the outbound loop sleeps when the engine is quiet, ms. */
const IDLE_WAIT_MS = 200;

// Net stats block: NET_GLOBAL_LEN globals, then NET_PEER_LEN values per slot.
export const NET_GLOBAL_LEN = 8;
export const NET_PEER_LEN = 10;
export const N_WAKEUPS = 0;
export const N_OUT_PACKETS = 1;
export const N_IN_PACKETS = 2;
export const N_THREAD = 3; // 1: the pump runs in a worker, 2: on the main thread
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

/** Atomics.waitAsync (ES2024; in every browser the engine runs in). */
interface AtomicsWaitAsync {
  waitAsync(
    array: Int32Array,
    index: number,
    value: number,
    timeout?: number,
  ): { async: false; value: string } | { async: true; value: Promise<string> };
}

export const ChannelState = { None: 0, Connecting: 1, Open: 2, Closed: 3 } as const;

export function netStatsBytes(maxPeers: number): number {
  return (NET_GLOBAL_LEN + maxPeers * NET_PEER_LEN) * 8;
}

export function netPeerIndex(slot: number, field: number): number {
  return NET_GLOBAL_LEN + slot * NET_PEER_LEN + field;
}

interface Link {
  slot: number;
  channel: RTCDataChannel;
  base: number;
}

export class PacketPump {
  private readonly writer: RingWriter;
  private readonly reader: RingReader;
  private readonly outWords: Int32Array;
  /** The outbound ring as 32-bit words, for word-wise copies of aligned payloads. */
  private readonly ringWords: Uint32Array;
  private readonly stats: Float64Array;
  private readonly links: (Link | null)[];
  private readonly open: Link[] = [];
  /** Send buffers by packet length, made on first sight of each length. */
  private readonly scratch: (Uint8Array<ArrayBuffer> | undefined)[] = new Array(MAX_PACKET_LEN + 1);
  private readonly scratchWords: (Uint32Array | undefined)[] = new Array(MAX_PACKET_LEN + 1);
  private running = false;

  constructor(
    inbound: SharedArrayBuffer,
    outbound: SharedArrayBuffer,
    netStats: SharedArrayBuffer,
    readonly maxPeers: number,
    thread: 'worker' | 'main',
  ) {
    this.writer = new RingWriter(inbound);
    this.reader = new RingReader(outbound);
    this.outWords = new Int32Array(outbound, 0, HEADER_WORDS);
    this.ringWords = new Uint32Array(outbound);
    this.stats = new Float64Array(netStats);
    this.links = new Array<Link | null>(maxPeers).fill(null);
    this.stats[N_THREAD] = thread === 'worker' ? 1 : 2;
  }

  /** Serves `channel` as the link to the peer in `slot` (replacing any earlier one). */
  add(slot: number, channel: RTCDataChannel): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxPeers) {
      throw new RangeError(`slot ${slot} is outside 0..${this.maxPeers - 1}`);
    }
    this.remove(slot);
    const link: Link = { slot, channel, base: netPeerIndex(slot, 0) };
    this.links[slot] = link;
    const s = this.stats;
    for (let f = 0; f < NET_PEER_LEN; f++) s[link.base + f] = 0;
    s[link.base + NP_STATE] = channel.readyState === 'open' ? ChannelState.Open : ChannelState.Connecting;
    channel.binaryType = 'arraybuffer';
    const writer = this.writer;
    const base = link.base;
    channel.onmessage = (ev: MessageEvent) => {
      const data = ev.data;
      if (!(data instanceof ArrayBuffer)) {
        s[base + NP_RX_DROPPED]++;
        return;
      }
      s[base + NP_RX_PACKETS]++;
      s[base + NP_RX_BYTES] += data.byteLength;
      s[N_IN_PACKETS]++;
      const now = performance.now();
      const last = s[base + NP_LAST_RX_MS];
      if (last > 0) {
        const gap = now - last;
        if (gap > s[base + NP_GAP_MAX_MS]) s[base + NP_GAP_MAX_MS] = gap;
        if (gap > 20) s[base + NP_GAPS_OVER_20MS]++;
      }
      s[base + NP_LAST_RX_MS] = now;
      if (!writer.push(slot, (now * 1000) >>> 0, new Uint8Array(data))) s[base + NP_RX_DROPPED]++;
    };
    channel.onopen = () => {
      s[base + NP_STATE] = ChannelState.Open;
      if (!this.open.includes(link)) this.open.push(link);
    };
    channel.onclose = () => {
      s[base + NP_STATE] = ChannelState.Closed;
      this.dropOpen(link);
    };
    if (channel.readyState === 'open') this.open.push(link);
  }

  /** Stops serving `slot` and closes its channel. */
  remove(slot: number): void {
    const link = this.links[slot];
    if (!link) return;
    this.links[slot] = null;
    this.dropOpen(link);
    link.channel.onmessage = null;
    link.channel.onopen = null;
    link.channel.onclose = null;
    link.channel.close();
    this.stats[link.base + NP_STATE] = ChannelState.Closed;
  }

  /** Starts the outbound loop. */
  start(): void {
    if (this.running) return;
    this.running = true;
    void this.loop();
  }

  stop(): void {
    this.running = false;
    for (let slot = 0; slot < this.maxPeers; slot++) this.remove(slot);
    // Wake the loop so that it sees `running` is false.
    Atomics.notify(this.outWords, WRITE_WORD);
  }

  /** Sends every packet the engine has published; returns how many. */
  drainOutbound(): number {
    const reader = this.reader;
    const open = this.open;
    const s = this.stats;
    let n = 0;
    while (reader.peek()) {
      const length = reader.length;
      let buf = this.scratch[length];
      if (!buf) {
        buf = this.scratch[length] = new Uint8Array(length);
        this.scratchWords[length] = new Uint32Array(buf.buffer, 0, length >>> 2);
      }
      copyOut(reader.bytes, this.ringWords, reader.offset, buf, this.scratchWords[length]!, length);
      reader.consume();
      n++;
      for (let i = 0; i < open.length; i++) {
        const link = open[i];
        const ch = link.channel;
        const queued = ch.bufferedAmount;
        s[link.base + NP_BUFFERED] = queued;
        if (queued > SEND_QUEUE_LIMIT) {
          s[link.base + NP_TX_SKIPPED]++;
          continue;
        }
        try {
          ch.send(buf);
          s[link.base + NP_TX_PACKETS]++;
        } catch {
          // The channel closed between its close event and now.
          s[link.base + NP_TX_SKIPPED]++;
        }
      }
    }
    s[N_OUT_PACKETS] += n;
    return n;
  }

  private async loop(): Promise<void> {
    const words = this.outWords;
    while (this.running) {
      this.drainOutbound();
      const seen = Atomics.load(words, WRITE_WORD);
      if (this.reader.used() > 0) continue;
      this.stats[N_WAKEUPS]++;
      const wait = (Atomics as unknown as AtomicsWaitAsync).waitAsync(words, WRITE_WORD, seen, IDLE_WAIT_MS);
      if (wait.async) await wait.value;
    }
  }

  private dropOpen(link: Link): void {
    const i = this.open.indexOf(link);
    if (i >= 0) this.open.splice(i, 1);
  }
}

/**
 * Copies `length` payload bytes at `offset` of a ring into `dst` without making a view: word by
 * word (record payloads are 4-byte aligned in the ring), then the tail byte by byte.
 */
function copyOut(
  bytes: Uint8Array,
  words: Uint32Array,
  offset: number,
  dst: Uint8Array,
  dstWords: Uint32Array,
  length: number,
): void {
  const whole = length & ~3;
  if ((offset & 3) === 0) {
    const w0 = offset >>> 2;
    for (let i = 0, n = whole >>> 2; i < n; i++) dstWords[i] = words[w0 + i];
  } else {
    for (let i = 0; i < whole; i++) dst[i] = bytes[offset + i];
  }
  for (let i = whole; i < length; i++) dst[i] = bytes[offset + i];
}
