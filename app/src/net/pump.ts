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
// that peer only, as while we echo a peer's stream back to it alone).
// Nothing is posted between threads per packet, and the steady state allocates nothing of its
// own besides one typed-array view over each received ArrayBuffer and one promise per wake-up.
//
// A channel whose send queue holds more than SEND_QUEUE_LIMIT bytes (a congested or stalled
// path) skips packets rather than queueing audio that would arrive too late to play; skips are
// counted per peer.
//
// Each link may also carry a control channel (clock.ts): the pump answers the peer's pings at
// once and pings the peer itself (a burst when the link opens, then once a second), so that the
// clock offset and RTT it publishes are measured where the audio goes, on the pump's thread.
// The same channel carries echo requests (a peer measuring its round trip to us) and their
// replies. A request is never applied on its own: the consent policy (echo-consent.ts) decides,
// the pump tells its host (`onEcho`: the session shows the user who asks and what it does) and
// only the user's yes (answerEcho) makes the pump write the engine's TAG_ECHO record; a no, or no
// answer within the bound, goes back to the asker as an echo reply. The user can stop the echo
// at any time (stopEcho). Ours go out with requestEcho(), and their replies come to `onEcho`.
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
// Counters go to a shared Float64Array (layout below) that the main thread reads when it likes.

import { HEADER_WORDS, RingReader, RingWriter, WRITE_WORD } from './../audio/ring';
import { CONTROL_PACKET_LEN, HEADER_LEN, MAX_PACKET_LEN, SAMPLE_RATES_HZ } from '../audio/packet';
import {
  CTL_ECHO,
  CTL_ECHO_REPLY,
  CTL_PING,
  CTL_PONG,
  ClockEstimator,
  ECHO_ALLOWED,
  ECHO_BUSY,
  ECHO_DECLINED,
  ECHO_LEN,
  ECHO_REPLY_LEN,
  ECHO_STOPPED,
  ECHO_UNANSWERED,
  MAX_ECHO_MS,
  PING_LEN,
  PONG_LEN,
  newControlMessage,
  nextPingAt,
  parseControl,
  writeEcho,
  writeEchoReply,
  writePing,
  writePong,
} from './clock';
import { Cancel, EchoConsent, Outcome, Verdict } from './echo-consent';

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
const NO_PAYLOAD = new Uint8Array(0);

/** What the pump tells its host about round-trip echoes (see the header). */
export type EchoEvent =
  /** The peer in `slot` asks us to echo its stream for `ms` ms: ask our user (answerEcho). */
  | { type: 'echo-request'; slot: number; ms: number }
  /** Its prompt is gone: the asker withdrew, it went unanswered, or the peer left. */
  | { type: 'echo-withdrawn'; slot: number }
  /** The peer in `slot` answered our request (ECHO_ALLOWED..ECHO_STOPPED, clock.ts). */
  | { type: 'echo-reply'; slot: number; answer: number };

/** Send-queue bytes beyond which a channel skips packets (~30 PCM16 stereo 128-frame packets). */
export const SEND_QUEUE_LIMIT = 64 * 1024;
/** Longest the outbound loop sleeps when the engine is quiet, ms. */
const IDLE_WAIT_MS = 200;
/** How often the pump looks for pings due (the burst's pings are 100 ms apart). */
const CLOCK_TICK_MS = 50;
const TWO_32 = 4294967296;

// Net stats block: NET_GLOBAL_LEN globals, then NET_PEER_LEN values per slot.
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
  control: RTCDataChannel | null;
  base: number;
  clock: ClockEstimator;
  /** bufferedAmount when the current pass over the outbound ring began (-1: not read yet). */
  queuedAtPass: number;
  pingsSent: number;
  /** performance.now() of the last ping. */
  lastPingMs: number;
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
  /** Control messages out (one at a time: each is sent before the next is written). */
  private readonly pingBuf = new ArrayBuffer(PING_LEN);
  private readonly pingView = new DataView(this.pingBuf);
  private readonly pongBuf = new ArrayBuffer(PONG_LEN);
  private readonly pongView = new DataView(this.pongBuf);
  private readonly echoBuf = new ArrayBuffer(ECHO_LEN);
  private readonly echoView = new DataView(this.echoBuf);
  private readonly replyBuf = new ArrayBuffer(ECHO_REPLY_LEN);
  private readonly replyView = new DataView(this.replyBuf);
  private readonly consent: EchoConsent;
  private readonly ctlIn = newControlMessage();
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
    private readonly onEcho: (ev: EchoEvent) => void = () => {},
  ) {
    this.consent = new EchoConsent(maxPeers);
    this.writer = new RingWriter(inbound);
    this.reader = new RingReader(outbound);
    this.outWords = new Int32Array(outbound, 0, HEADER_WORDS);
    this.ringWords = new Uint32Array(outbound);
    this.stats = new Float64Array(netStats);
    this.links = new Array<Link | null>(maxPeers).fill(null);
    this.stats[N_THREAD] = thread === 'worker' ? 1 : 2;
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
      pingsSent: 0,
      lastPingMs: 0,
    };
    this.links[slot] = link;
    const s = this.stats;
    for (let f = 0; f < NET_PEER_LEN; f++) s[link.base + f] = 0;
    s[link.base + NP_RTT_MS] = NaN;
    s[link.base + NP_OFFSET_US] = NaN;
    s[link.base + NP_STAMP_LAG_MS] = NaN;
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
      s[base + NP_RX_PACKETS]++;
      s[base + NP_RX_BYTES] += data.byteLength;
      s[N_IN_PACKETS]++;
      if (bytes.length >= HEADER_LEN && bytes.length !== CONTROL_PACKET_LEN) {
        const sentUs = readU64(bytes);
        s[base + NP_STAMP_LAG_MS] = (arrivalUs - sentUs) / 1000;
      }
      const last = s[base + NP_LAST_RX_MS];
      if (last > 0) {
        const gap = now - last;
        if (gap > s[base + NP_GAP_MAX_MS]) s[base + NP_GAP_MAX_MS] = gap;
        if (gap > 20) s[base + NP_GAPS_OVER_20MS]++;
      }
      s[base + NP_LAST_RX_MS] = now;
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
    if (control) this.serveControl(link, control);
  }

  /** Answers the peer's pings and takes our pings' answers as clock samples. */
  private serveControl(link: Link, control: RTCDataChannel): void {
    const s = this.stats;
    const base = link.base;
    const origin = this.timeOrigin;
    const msg = this.ctlIn;
    control.binaryType = 'arraybuffer';
    control.onmessage = (ev: MessageEvent) => {
      // The receive time first: everything after it counts as the peer's processing time.
      const tIn = (origin + performance.now()) * 1000;
      const data = ev.data;
      if (!(data instanceof ArrayBuffer) || !parseControl(new DataView(data), msg)) {
        s[base + NP_CTL_BAD]++;
        return;
      }
      if (msg.type === CTL_PING) {
        writePong(this.pongView, msg.t1, tIn, (origin + performance.now()) * 1000);
        this.sendControl(link, this.pongBuf);
      } else if (msg.type === CTL_PONG) {
        if (!link.clock.add(msg.t1, msg.t2, msg.t3, tIn)) {
          s[base + NP_CTL_BAD]++;
          return;
        }
        s[base + NP_EXCHANGES]++;
        s[base + NP_RTT_MS] = link.clock.medianRttUs() / 1000;
        s[base + NP_OFFSET_US] = link.clock.offsetUs();
      } else if (msg.type === CTL_ECHO) {
        this.echoRequested(link, msg.ms);
      } else if (msg.type === CTL_ECHO_REPLY) {
        this.onEcho({ type: 'echo-reply', slot: link.slot, answer: msg.answer });
      }
    };
    control.onopen = () => this.tickClock();
  }

  /** A peer's echo request (ms > 0) or its "stop" (0), through the consent policy. */
  private echoRequested(link: Link, ms: number): void {
    const now = performance.now();
    const slot = link.slot;
    if (ms === 0) {
      const c = this.consent.cancel(slot, now);
      if (c === Cancel.Withdrawn) this.onEcho({ type: 'echo-withdrawn', slot });
      else if (c === Cancel.Stop) this.tellEngine(slot, 0);
      return;
    }
    switch (this.consent.request(slot, ms, now)) {
      case Verdict.Drop:
        this.stats[link.base + NP_ECHO_DROPPED]++;
        break;
      case Verdict.Ask:
        this.onEcho({ type: 'echo-request', slot, ms });
        break;
      case Verdict.Grant:
        this.tellEngine(slot, ms);
        this.reply(slot, ECHO_ALLOWED);
        break;
      case Verdict.Busy:
        this.reply(slot, ECHO_BUSY);
        break;
    }
  }

  /**
   * Our user's answer to the round-trip request of the peer in `slot`: allowed, the engine echoes
   * that peer's stream back to it (only to it) for the time it asked; declined, the peer is told.
   * An answer to a prompt that is gone (withdrawn, timed out) does nothing.
   */
  answerEcho(slot: number, allow: boolean): void {
    switch (this.consent.answer(slot, allow, performance.now())) {
      case Outcome.Grant:
        this.tellEngine(slot, this.consent.grantedMs(slot));
        this.reply(slot, ECHO_ALLOWED);
        break;
      case Outcome.Declined:
        this.reply(slot, ECHO_DECLINED);
        break;
      case Outcome.Busy:
        this.reply(slot, ECHO_BUSY);
        break;
    }
  }

  /** Our user stops the echo of the peer in `slot` (if one runs); the peer is told. */
  stopEcho(slot: number): void {
    if (!this.consent.stop(slot, performance.now())) return;
    this.tellEngine(slot, 0);
    this.reply(slot, ECHO_STOPPED);
  }

  /** "Allow round-trip requests without asking", for this session (off by default). */
  setEchoAutoAllow(on: boolean): void {
    this.consent.autoAllow = on;
  }

  /** The engine's TAG_ECHO record: echo the peer in `slot` for `ms` ms (0: stop). */
  private tellEngine(slot: number, ms: number): void {
    const link = this.links[slot];
    if (!this.writer.push(TAG_ECHO | slot, ms, NO_PAYLOAD) && link) this.stats[link.base + NP_RX_DROPPED]++;
  }

  /** A prompt went unanswered for too long: the asker is told, the prompt goes. */
  private readonly unanswered = (slot: number): void => {
    this.reply(slot, ECHO_UNANSWERED);
    this.onEcho({ type: 'echo-withdrawn', slot });
  };

  private reply(slot: number, answer: number): void {
    const link = this.links[slot];
    if (!link) return;
    writeEchoReply(this.replyView, answer);
    this.sendControl(link, this.replyBuf);
  }

  /**
   * Sends the pings that are due: right away on a new link, a burst, then one a second; and times
   * out round-trip prompts nobody answered. Called by the pump's timer (and by tests).
   */
  tickClock(nowMs = performance.now()): void {
    this.consent.tick(nowMs, this.unanswered);
    for (let slot = 0; slot < this.links.length; slot++) {
      const link = this.links[slot];
      if (!link || !link.control || link.control.readyState !== 'open') continue;
      if (nowMs < nextPingAt(link.pingsSent, link.lastPingMs)) continue;
      writePing(this.pingView, (this.timeOrigin + performance.now()) * 1000);
      link.pingsSent++;
      link.lastPingMs = nowMs;
      if (this.sendControl(link, this.pingBuf)) this.stats[link.base + NP_PINGS]++;
    }
  }

  /**
   * Asks the peer in `slot` to echo our stream for `ms` milliseconds (0: stop), for a round-trip
   * probe. Returns false when the link has no open control channel.
   */
  requestEcho(slot: number, ms: number): boolean {
    const link = this.links[slot];
    if (!link) return false;
    writeEcho(this.echoView, Math.max(0, Math.min(MAX_ECHO_MS, Math.round(ms) || 0)));
    return this.sendControl(link, this.echoBuf);
  }

  private sendControl(link: Link, buf: ArrayBuffer): boolean {
    const ch = link.control;
    if (!ch || ch.readyState !== 'open') return false;
    try {
      ch.send(buf);
      return true;
    } catch {
      // Closed between its close event and now: the exchange is simply lost.
      return false;
    }
  }

  /** Stops serving `slot` and closes its channel. */
  remove(slot: number): void {
    const link = this.links[slot];
    if (!link) return;
    // The engine drops the peer's echo with the peer; a prompt for it goes too.
    if (this.consent.remove(slot)) this.onEcho({ type: 'echo-withdrawn', slot });
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
    while (reader.peek()) {
      const length = reader.length;
      // The destination: every peer (-1, -1), every peer but `except`, or `only`.
      const tag = reader.tag;
      let only = -1;
      let except = -1;
      if (tag !== OUT_ALL) {
        if ((tag & ~OUT_SLOT_MASK) === OUT_ALL_BUT) except = tag & OUT_SLOT_MASK;
        else if ((tag & ~OUT_SLOT_MASK) === 0) only = tag;
        else {
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
      for (let i = 0; i < open.length; i++) {
        const link = open[i];
        if (link.slot === except || (only >= 0 && link.slot !== only)) continue;
        const ch = link.channel;
        const queued = ch.bufferedAmount;
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

/** The u64 little-endian at the start of `b`, as a number (exact below 2^53). */
function readU64(b: Uint8Array): number {
  const lo = (b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)) >>> 0;
  const hi = (b[4] | (b[5] << 8) | (b[6] << 16) | (b[7] << 24)) >>> 0;
  return hi * TWO_32 + lo;
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
