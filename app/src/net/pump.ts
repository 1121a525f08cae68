// The packet pump: moves audio packets between the peers' data channels and the engine's rings.
// It runs in the net worker (net-worker.ts) where the browser can transfer RTCDataChannels to a
// worker, else on the main thread; either way it is the only producer of the inbound ring and
// the only consumer of the outbound ring.
//
// Inbound, per message: one ring write of the browser's ArrayBuffer, tagged with the peer's slot.
// Outbound: the engine worklet publishes a packet per block and wakes the pump with
// Atomics.notify on the ring's write word; the pump copies each packet once into a buffer of its
// own (data channels refuse views of shared memory) and sends that to every open channel the
// record's tag names (OUT_ALL below: every peer; OUT_ALL_BUT | slot: every peer but one; a slot:
// that peer only, as while we echo a peer's stream back to it alone; OUT_LAYER | layer << 8:
// every peer taking that layer of our stream, Opus for a peer whose path cannot carry PCM, with
// OUT_EXCEPT | slot: but that one). Which peer takes which layer the engine says in route
// records (OUT_ROUTE | slot, one byte: the layer), written before the first packet that
// depends on them; the pump keeps them in sendLayer and shows them as NP_SEND_LAYER.
// Nothing is posted between threads per packet, and the steady state allocates nothing of its
// own besides one typed-array view over each received ArrayBuffer and one promise per wake-up.
//
// A channel whose send queue holds more than SEND_QUEUE_LIMIT bytes (a congested or stalled
// path) skips packets rather than queueing audio that would arrive too late to play; skips are
// counted per peer.
//
// Beside the links per peer there may be one link to the hub (pump-hub.ts): each of our packets
// goes once on it, and what it sends back is bundles whose packets go to the slots their stream
// ids map to. During a switch between the mesh and the hub both serve for a while: the engine
// drops the second copy of a packet (its jitter buffer places packets by sequence number).
//
// Each link may also carry a control channel (clock pings, round-trip echo requests and the
// user's consent to them): pump-control.ts serves those, on the same thread.
//
// Per packet handed to a channel the pump also writes a TAG_SEND_QUEUE record (no payload, time
// = the channel's queue ahead of it in µs) into the inbound ring: the engine's send-queue stage.
// The queue ahead of a packet is what the channel still held when this pass over the outbound
// ring began, as time at the stream's rate: packets handed over in the same pass are not a
// backlog (the browser's network thread has not run yet, so bufferedAmount counts them until the
// task ends, whatever the link's speed), while bytes left from an earlier pass, a wake-up or more
// ago, are queued behind a link that did not keep up with the stream.
//
// Times on packets, all wall clock (µs since 1970, performance.timeOrigin + performance.now()):
// - inbound, the ring record's `time` is the arrival time at the pump, low 32 bits;
// - outbound, the packet header's u64 timestamp (bytes 0..8, little-endian) is overwritten in the
//   pump's own copy with the time it is handed to the channels. The engine writes its audio
//   clock there; the wire carries the send time, which the receiver's core turns into the
//   one-way delay with the clock offset.
//
// Counters go to the net stats block (net-stats.ts, re-exported here), a shared Float64Array that
// the main thread reads when it likes.

import { HEADER_WORDS, WRITE_WORD } from '../audio/ring';
import { RingReader, RingWriter } from '../audio/ring-ends';
import { CONTROL_PACKET_LEN, HEADER_LEN, MAX_PACKET_LEN, SAMPLE_RATES_HZ } from '../audio/packet';
import { ClockEstimator } from './clock';
import {
  ChannelState,
  N_MESH_RX_BYTES,
  N_MESH_RX_MESSAGES,
  N_OUT_PACKETS,
  N_OUT_UNROUTED,
  N_THREAD,
  N_WAKEUPS,
  NP_BUFFERED,
  NP_OFFSET_US,
  NP_RTT_MIN_MS,
  NP_RTT_MS,
  NP_RX_DROPPED,
  NP_SEND_LAYER,
  NP_SEND_QUEUE_MS,
  NP_STAMP_LAG_MS,
  NP_STATE,
  NP_TX_PACKETS,
  NP_TX_SKIPPED,
  netPeerIndex,
  noteArrival,
  resetNetPeer,
} from './net-stats';
import { ControlChannels, type EchoEvent, type Link } from './pump-control';
import { HubPath } from './pump-hub';

export * from './net-stats';
export type { EchoEvent } from './pump-control';

// Ring tags, written once in Rust (core/src/engine.rs, core/src/capture.rs); a core test reads
// these lines and compares.
/** Inbound ring tags that are notes to the engine, not packets, with the peer's slot. */
export const TAG_SEND_QUEUE = 0x8000;
export const TAG_ECHO = 0x4000;
export const TAG_SLOT_MASK = 0x00ff;
/** Outbound ring tags: the packet's destination. */
export const OUT_ALL = 0xffff;
export const OUT_ALL_BUT = 0x8000;
export const OUT_SLOT_MASK = 0x00ff;
/** Every peer taking the layer in bits 8..10 (0 as sent, 1 Opus 128, 2 Opus 64), with
 * OUT_EXCEPT: but the one in the low byte. */
export const OUT_LAYER = 0x4000;
export const OUT_EXCEPT = 0x0800;
export const OUT_LAYER_MASK = 0x0300;
/** Not a packet: the peer in the low byte takes the layer in the record's one byte from now on. */
export const OUT_ROUTE = 0x2000;
const NO_PAYLOAD = new Uint8Array(0);
/** Layers of our stream a peer may take (the engine's Layer::code: as sent, Opus 128, Opus 64). */
const LAYER_COUNT = 3;

/** Send-queue bytes beyond which a channel skips packets (~30 PCM16 stereo 128-frame packets). */
export const SEND_QUEUE_LIMIT = 64 * 1024;
/** What a held channel's queue reads (PacketPump.holdSend): over the limit, as measured when an
 * SCTP association stopped draining. */
export const HELD_SEND_BYTES = 66_000;
/** Longest the outbound loop sleeps when the engine is quiet, ms. */
const IDLE_WAIT_MS = 200;
/** How often the pump looks for pings due (the burst's pings are 100 ms apart). */
const CLOCK_TICK_MS = 50;
const TWO_32 = 4294967296;

/** Atomics.waitAsync (ES2024; in every browser the engine runs in). */
interface AtomicsWaitAsync {
  waitAsync(
    array: Int32Array,
    index: number,
    value: number,
    timeout?: number,
  ): { async: false; value: string } | { async: true; value: Promise<string> };
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
  private readonly scratchViews: (DataView | undefined)[] = new Array(MAX_PACKET_LEN + 1);
  private readonly control: ControlChannels;
  private readonly hub: HubPath;
  /** The layer of our stream each slot's peer takes, from the engine's route records. */
  private readonly sendLayer: Uint8Array;
  private readonly timeOrigin = performance.timeOrigin;
  private running = false;
  private clockTimer: ReturnType<typeof setInterval> | null = null;

  constructor(
    inbound: SharedArrayBuffer,
    outbound: SharedArrayBuffer,
    netStats: SharedArrayBuffer,
    readonly maxPeers: number,
    thread: 'worker' | 'main',
    /** Round-trip requests to show our user, and answers to ours (see the header). */
    onEcho: (ev: EchoEvent) => void = () => {},
  ) {
    this.writer = new RingWriter(inbound);
    this.reader = new RingReader(outbound);
    this.outWords = new Int32Array(outbound, 0, HEADER_WORDS);
    this.ringWords = new Uint32Array(outbound);
    this.stats = new Float64Array(netStats);
    this.links = new Array<Link | null>(maxPeers).fill(null);
    this.sendLayer = new Uint8Array(maxPeers);
    this.stats[N_THREAD] = thread === 'worker' ? 1 : 2;
    this.hub = new HubPath(this.writer, this.stats, maxPeers);
    this.control = new ControlChannels(this.links, this.stats, onEcho, (slot, ms) =>
      this.tellEngine(slot, ms),
    );
  }

  /**
   * Serves `channel` as the link to the peer in `slot` (replacing any earlier one), and
   * `control`, if given, as its control channel (clock pings).
   */
  add(slot: number, channel: RTCDataChannel, control: RTCDataChannel | null = null): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxPeers) {
      throw new RangeError(`slot ${slot} is outside 0..${this.maxPeers - 1}`);
    }
    this.remove(slot);
    const link: Link = {
      slot,
      channel,
      control,
      base: netPeerIndex(slot, 0),
      clock: new ClockEstimator(),
      queuedAtPass: -1,
      held: false,
      pingsSent: 0,
      lastPingMs: 0,
    };
    this.links[slot] = link;
    const s = this.stats;
    resetNetPeer(s, slot);
    s[link.base + NP_SEND_LAYER] = this.sendLayer[slot];
    s[link.base + NP_STATE] = channel.readyState === 'open' ? ChannelState.Open : ChannelState.Connecting;
    channel.binaryType = 'arraybuffer';
    const writer = this.writer;
    const base = link.base;
    const origin = this.timeOrigin;
    channel.onmessage = (ev: MessageEvent) => {
      const now = performance.now();
      const data = ev.data;
      if (!(data instanceof ArrayBuffer)) {
        s[base + NP_RX_DROPPED]++;
        return;
      }
      const arrivalUs = Math.round((origin + now) * 1000);
      const bytes = new Uint8Array(data);
      s[N_MESH_RX_MESSAGES]++;
      s[N_MESH_RX_BYTES] += bytes.length;
      noteArrival(s, base, bytes, 0, bytes.length, now, arrivalUs);
      if (!writer.push(slot, arrivalUs % TWO_32, bytes)) s[base + NP_RX_DROPPED]++;
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
    if (control) this.control.serve(link, control);
  }

  /** Serves `channel` as the link to the hub (replacing and closing any earlier one; null:
   * none). It is handed over fresh, as `add`'s channels are. */
  setHub(channel: RTCDataChannel | null): void {
    this.hub.set(channel);
  }

  /** Plays the hub's packets of `stream` in engine slot `slot` (-1: drops them). */
  mapStream(stream: number, slot: number): void {
    if (slot >= 0 && this.hub.streams.slotOf(stream) !== slot) {
      // The slot's stamp lag was on another clock (another stream, or none yet: 0): the next
      // packet starts it afresh, so a delay trend never spans two clocks.
      this.stats[netPeerIndex(slot, NP_STAMP_LAG_MS)] = NaN;
    }
    this.hub.streams.set(stream, slot);
  }

  /**
   * Our user's answer to the round-trip request of the peer in `slot`: allowed, the engine echoes
   * that peer's stream back to it (only to it) for the time it asked; declined, the peer is told.
   * An answer to a prompt that is gone (withdrawn, timed out) does nothing.
   */
  answerEcho(slot: number, allow: boolean): void {
    this.control.answerEcho(slot, allow);
  }

  /** Our user stops the echo of the peer in `slot` (if one runs); the peer is told. */
  stopEcho(slot: number): void {
    this.control.stopEcho(slot);
  }

  /** "Allow round-trip requests without asking", for this session (off by default). */
  setEchoAutoAllow(on: boolean): void {
    this.control.setEchoAutoAllow(on);
  }

  /** The engine's TAG_ECHO record: echo the peer in `slot` for `ms` ms (0: stop). */
  private tellEngine(slot: number, ms: number): void {
    const link = this.links[slot];
    if (!this.writer.push(TAG_ECHO | slot, ms, NO_PAYLOAD) && link) this.stats[link.base + NP_RX_DROPPED]++;
  }

  /**
   * Sends the pings that are due: right away on a new link, a burst, then one a second; and times
   * out round-trip prompts nobody answered. Called by the pump's timer (and by tests).
   */
  tickClock(nowMs = performance.now()): void {
    this.control.tick(nowMs);
  }

  /**
   * Asks the peer in `slot` to echo our stream for `ms` milliseconds (0: stop), for a round-trip
   * probe. Returns false when the link has no open control channel.
   */
  requestEcho(slot: number, ms: number): boolean {
    return this.control.requestEcho(slot, ms);
  }

  /**
   * For tests of the mesh's stall recovery only: from now on the channel of `slot` is taken to
   * hold HELD_SEND_BYTES, so every packet towards that peer is skipped as if its send queue had
   * stopped draining. The channel itself is untouched; the hold ends with the link (a new channel
   * for the slot is served normally). False when the slot has no link.
   */
  holdSend(slot: number): boolean {
    const link = this.links[slot];
    if (!link) return false;
    link.held = true;
    return true;
  }

  /** Stops serving `slot` and closes its channel. */
  remove(slot: number): void {
    const link = this.links[slot];
    if (!link) return;
    // The engine drops the peer's echo with the peer; a prompt for it goes too.
    this.control.remove(slot);
    this.links[slot] = null;
    this.dropOpen(link);
    link.channel.onmessage = null;
    link.channel.onopen = null;
    link.channel.onclose = null;
    link.channel.close();
    if (link.control) {
      link.control.onmessage = null;
      link.control.onopen = null;
      link.control.close();
    }
    this.stats[link.base + NP_STATE] = ChannelState.Closed;
    // Whoever takes the slot next is another peer, with a clock of its own.
    this.stats[link.base + NP_OFFSET_US] = NaN;
    this.stats[link.base + NP_RTT_MS] = NaN;
    this.stats[link.base + NP_RTT_MIN_MS] = NaN;
  }

  /** Starts the outbound loop. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.clockTimer = setInterval(() => this.tickClock(), CLOCK_TICK_MS);
    void this.loop();
  }

  stop(): void {
    this.running = false;
    if (this.clockTimer !== null) clearInterval(this.clockTimer);
    this.clockTimer = null;
    for (let slot = 0; slot < this.maxPeers; slot++) this.remove(slot);
    this.hub.set(null);
    // Wake the loop so that it sees `running` is false.
    Atomics.notify(this.outWords, WRITE_WORD);
  }

  /** Sends every packet the engine has published; returns how many. */
  drainOutbound(): number {
    const reader = this.reader;
    const open = this.open;
    const s = this.stats;
    let n = 0;
    for (let i = 0; i < open.length; i++) open[i].queuedAtPass = -1;
    const hub = this.hub;
    hub.beginPass();
    while (reader.peek()) {
      const length = reader.length;
      // The destination: every peer (-1, -1), every peer but `except`, or `only`; with `layer`,
      // only those of them taking that layer.
      const tag = reader.tag;
      const high = tag & ~OUT_SLOT_MASK;
      let only = -1;
      let except = -1;
      let layer = -1;
      if (tag !== OUT_ALL) {
        if (high === OUT_ALL_BUT) except = tag & OUT_SLOT_MASK;
        else if (high === 0) only = tag;
        else if (high === OUT_ROUTE) {
          this.route(tag & OUT_SLOT_MASK, length === 1 ? reader.bytes[reader.offset] : LAYER_COUNT);
          reader.consume();
          continue;
        } else if (
          (high & ~(OUT_LAYER_MASK | OUT_EXCEPT)) === OUT_LAYER &&
          (high & OUT_LAYER_MASK) >>> 8 < LAYER_COUNT &&
          ((high & OUT_EXCEPT) !== 0 || (tag & OUT_SLOT_MASK) === 0)
        ) {
          layer = (high & OUT_LAYER_MASK) >>> 8;
          if ((high & OUT_EXCEPT) !== 0) except = tag & OUT_SLOT_MASK;
        } else {
          reader.consume();
          s[N_OUT_UNROUTED]++;
          continue;
        }
      }
      let buf = this.scratch[length];
      if (!buf) {
        buf = this.scratch[length] = new Uint8Array(length);
        this.scratchWords[length] = new Uint32Array(buf.buffer, 0, length >>> 2);
        this.scratchViews[length] = new DataView(buf.buffer);
      }
      copyOut(reader.bytes, this.ringWords, reader.offset, buf, this.scratchWords[length]!, length);
      reader.consume();
      n++;
      // The stream's bytes per second, from this packet's own header (0: not an audio packet).
      let bytesPerSecond = 0;
      // A JackTrip exit signal (63 bytes of 0xFF) must stay as it is; audio packets are never 63
      // bytes long (their length is even).
      if (length >= HEADER_LEN && length !== CONTROL_PACKET_LEN) {
        const us = Math.round((this.timeOrigin + performance.now()) * 1000);
        const view = this.scratchViews[length]!;
        view.setUint32(0, us % TWO_32, true);
        view.setUint32(4, Math.floor(us / TWO_32), true);
        const frames = buf[10] | (buf[11] << 8);
        const rate = SAMPLE_RATES_HZ[buf[12]] ?? 0;
        if (frames > 0 && rate > 0) bytesPerSecond = (length * rate) / frames;
      }
      // Through the hub, once for everyone, as sent (a packet for one peer only has no way
      // there, and the hub makes its own layers).
      if (only < 0 && layer <= 0 && hub.active) hub.send(buf, bytesPerSecond, SEND_QUEUE_LIMIT);
      for (let i = 0; i < open.length; i++) {
        const link = open[i];
        if (link.slot === except || (only >= 0 && link.slot !== only)) continue;
        if (layer >= 0 && this.sendLayer[link.slot] !== layer) continue;
        const ch = link.channel;
        const queued = link.held ? HELD_SEND_BYTES : ch.bufferedAmount;
        if (link.queuedAtPass < 0) link.queuedAtPass = queued;
        s[link.base + NP_BUFFERED] = queued;
        const backlogSeconds = bytesPerSecond > 0 ? link.queuedAtPass / bytesPerSecond : 0;
        if (bytesPerSecond > 0) s[link.base + NP_SEND_QUEUE_MS] = backlogSeconds * 1000;
        if (queued > SEND_QUEUE_LIMIT) {
          s[link.base + NP_TX_SKIPPED]++;
          continue;
        }
        try {
          ch.send(buf);
          s[link.base + NP_TX_PACKETS]++;
          if (bytesPerSecond > 0) {
            this.writer.push(TAG_SEND_QUEUE | link.slot, Math.round(backlogSeconds * 1e6), NO_PAYLOAD);
          }
        } catch {
          // The channel closed between its close event and now.
          s[link.base + NP_TX_SKIPPED]++;
        }
      }
    }
    s[N_OUT_PACKETS] += n;
    return n;
  }

  /** The engine's route record: the peer in `slot` takes `layer` of our stream from now on (a
   * record naming no layer is counted and dropped). */
  private route(slot: number, layer: number): void {
    if (slot >= this.maxPeers || layer >= LAYER_COUNT) {
      this.stats[N_OUT_UNROUTED]++;
      return;
    }
    this.sendLayer[slot] = layer;
    this.stats[netPeerIndex(slot, NP_SEND_LAYER)] = layer;
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
