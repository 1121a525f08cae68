// The packet pump's hub path: the one data channel to the hub (hub.ts opens it), beside or
// instead of the mesh's channel per peer.
//
// - Outbound: each of our packets goes ONCE on the hub channel, whatever the number of
//   participants; the hub stamps our stream id and sends it on. A hub channel whose send queue
//   holds more than the pump's limit skips packets, as a mesh channel does.
// - Inbound: each message is a bundle (bundle.ts): checked whole first, then each packet goes to
//   the engine slot its trailer's stream id maps to (StreamSlots, filled from the signaling:
//   welcome and peer-joined carry each member's stream). In mix mode the hub sends one packet of
//   stream 0, the room's mix made for us, which the session maps to the engine slot kept for it.
//   A message that is not a whole bundle is dropped whole; a packet without a stream id, or of a
//   stream no slot is mapped to, is dropped alone; each is counted (net-stats.ts, N_HUB_*).
// - Meters (mix mode): about twenty times a second the hub sends a meters message (meters.ts),
//   every player's level as it reaches the hub; each reading goes to the net stats of the slot its
//   stream id maps to (NP_HUB_*), where the session reads it for that participant's meter.
// - Trains (forward mode, while we take less than the richest layer): a few messages back to
//   back (train.ts). Each one's arrival time goes in its place of the current train; when the
//   train is whole, or a newer one begins, its capacity estimate goes to the net stats
//   (N_HUB_TRAIN_BPS, N_HUB_TRAINS), where the session reads it for its reception reports.
//
// Nothing here allocates per message besides the Uint8Array view over the received buffer: the
// per-packet visitor is made once and reads the message it works on from fields, and a train's
// arrival times live in an array made once.

import { EXT_LEN, EXT_MAGIC, EXT_VERSION } from '../audio/packet';
import type { RingWriter } from '../audio/ring-ends';
import { checkBundle, forEachPacket } from './bundle';
import { checkMeters, isMeters, meterLevel, meterStream } from './meters';
import { PACKET_OVERHEAD_BYTES } from '../room/topology';
import { TRAIN_BYTES, TRAIN_MESSAGES, isTrain, trainCapacityBps, trainIndex, trainNumber } from './train';
import {
  ChannelState,
  N_HUB_BAD_BUNDLES,
  N_HUB_BUFFERED,
  N_HUB_BUNDLES,
  N_HUB_METERS,
  N_HUB_NO_TRAILER,
  N_HUB_RX_BYTES,
  N_HUB_RX_MESSAGES,
  N_HUB_TRAIN_BPS,
  N_HUB_TRAIN_MESSAGES,
  N_HUB_TRAINS,
  N_HUB_SEND_QUEUE_MS,
  N_HUB_STATE,
  N_HUB_TX_PACKETS,
  N_HUB_TX_SKIPPED,
  N_HUB_UNKNOWN_STREAM,
  NP_HUB_METER_MS,
  NP_HUB_PEAK_L,
  NP_RX_DROPPED,
  netPeerIndex,
  noteArrival,
  NP_HUB_RX_PACKETS,
} from './net-stats';

/** The stream id of the hub's mix (HUB-SPEC: MIX_STREAM). */
export const MIX_STREAM = 0;
/** Bytes a train message takes on the wire. */
const TRAIN_WIRE_BYTES = TRAIN_BYTES + PACKET_OVERHEAD_BYTES;
/** How many trains behind the current one a message may be and still be taken as late. */
const TRAINS_LATE = 16;
const TWO_32 = 4294967296;

/**
 * The stream id in the trailer of the packet at `bytes[offset..offset+length]`; -1 when it has no
 * trailer. The trailer is always a packet's last 8 bytes; the engine checks the whole packet
 * again when it takes it.
 */
export function trailerStream(bytes: Uint8Array, offset: number, length: number): number {
  if (length < EXT_LEN) return -1;
  const t = offset + length - EXT_LEN;
  if (bytes[t] !== EXT_MAGIC[0] || bytes[t + 1] !== EXT_MAGIC[1] || bytes[t + 2] !== EXT_VERSION) return -1;
  return bytes[t + 4] | (bytes[t + 5] << 8);
}

/** Which engine slot each hub stream id plays in: a table over every u16, -1 where none. */
export class StreamSlots {
  private readonly slots = new Int16Array(65536).fill(-1);

  /** Plays `stream` in `slot` from now on (-1: in none). */
  set(stream: number, slot: number): void {
    if (!Number.isInteger(stream) || stream < 0 || stream > 0xffff) return;
    this.slots[stream] = Number.isInteger(slot) && slot >= 0 && slot < 0x7fff ? slot : -1;
  }

  /** The slot of `stream`, or -1. */
  slotOf(stream: number): number {
    return stream >= 0 && stream <= 0xffff ? this.slots[stream] : -1;
  }

  clear(): void {
    this.slots.fill(-1);
  }
}

export class HubPath {
  readonly streams = new StreamSlots();
  private channel: RTCDataChannel | null = null;
  /** bufferedAmount when the current pass over the outbound ring began (-1: not read yet). */
  private queuedAtPass = -1;
  private readonly timeOrigin = performance.timeOrigin;
  // The message the visitor works on (see the header).
  private msg: Uint8Array = new Uint8Array(0);
  private msgNowMs = 0;
  private msgArrivalUs = 0;
  // The train being received: its number (-1: none), each message's arrival time (NaN: not
  // come), how many came, and whether its estimate is out already.
  private train = -1;
  private readonly trainArrivals = new Float64Array(TRAIN_MESSAGES).fill(NaN);
  private trainCount = 0;
  private trainDone = false;

  constructor(
    private readonly writer: RingWriter,
    private readonly stats: Float64Array,
    private readonly maxPeers: number,
  ) {
    stats[N_HUB_TRAIN_BPS] = NaN;
  }

  /** Serves `channel` as the hub link (replacing and closing any earlier one); null: none. */
  set(channel: RTCDataChannel | null): void {
    const old = this.channel;
    if (old) {
      old.onmessage = null;
      old.onopen = null;
      old.onclose = null;
      old.close();
    }
    this.channel = channel;
    // A new link's trains are numbered afresh.
    this.train = -1;
    this.trainDone = false;
    const s = this.stats;
    if (!channel) {
      s[N_HUB_STATE] = ChannelState.None;
      return;
    }
    channel.binaryType = 'arraybuffer';
    s[N_HUB_STATE] = channel.readyState === 'open' ? ChannelState.Open : ChannelState.Connecting;
    channel.onopen = () => (s[N_HUB_STATE] = ChannelState.Open);
    channel.onclose = () => (s[N_HUB_STATE] = ChannelState.Closed);
    channel.onmessage = (ev: MessageEvent) => this.receive(ev.data, performance.now());
  }

  get active(): boolean {
    return this.channel !== null;
  }

  /** One message from the hub, arrived at `nowMs` (performance.now()). */
  receive(data: unknown, nowMs: number): void {
    const s = this.stats;
    if (!(data instanceof ArrayBuffer)) {
      s[N_HUB_BAD_BUNDLES]++;
      return;
    }
    const bytes = new Uint8Array(data);
    s[N_HUB_RX_BYTES] += bytes.length;
    s[N_HUB_RX_MESSAGES]++;
    if (isMeters(bytes)) {
      this.meters(bytes, nowMs);
      return;
    }
    if (isTrain(bytes)) {
      this.trainMessage(bytes, nowMs);
      return;
    }
    if (typeof checkBundle(bytes) !== 'number') {
      s[N_HUB_BAD_BUNDLES]++;
      return;
    }
    s[N_HUB_BUNDLES]++;
    this.msg = bytes;
    this.msgNowMs = nowMs;
    this.msgArrivalUs = Math.round((this.timeOrigin + nowMs) * 1000);
    forEachPacket(bytes, this.dispatch);
  }

  /** A meters message: each reading to its participant's slot (see the header). */
  private meters(bytes: Uint8Array, nowMs: number): void {
    const s = this.stats;
    const count = checkMeters(bytes);
    if (typeof count !== 'number') {
      s[N_HUB_BAD_BUNDLES]++;
      return;
    }
    s[N_HUB_METERS]++;
    for (let k = 0; k < count; k++) {
      const slot = this.streams.slotOf(meterStream(bytes, k));
      if (slot < 0 || slot >= this.maxPeers) continue;
      const base = netPeerIndex(slot, NP_HUB_PEAK_L);
      // Peak left, peak right, RMS left, RMS right: the layout's order and NP_HUB_*'s.
      for (let level = 0; level < 4; level++) s[base + level] = meterLevel(bytes, k, level);
      s[netPeerIndex(slot, NP_HUB_METER_MS)] = this.timeOrigin + nowMs;
    }
  }

  /** A train message: its arrival time in its place of the current train (see the header). */
  private trainMessage(bytes: Uint8Array, nowMs: number): void {
    const s = this.stats;
    const index = trainIndex(bytes);
    if (index < 0) {
      s[N_HUB_BAD_BUNDLES]++;
      return;
    }
    s[N_HUB_TRAIN_MESSAGES]++;
    const train = trainNumber(bytes);
    if (train !== this.train) {
      // A newer train (or the first): the one before is as whole as it will be. A late message
      // of one of the last few trains is only counted; a number far behind is a numbering
      // started afresh, hence a newer train.
      if (this.train >= 0 && (this.train - train) >>> 0 <= TRAINS_LATE) return;
      this.finishTrain();
      this.train = train;
      this.trainArrivals.fill(NaN);
      this.trainCount = 0;
      this.trainDone = false;
    }
    if (this.trainDone || !Number.isNaN(this.trainArrivals[index])) return;
    this.trainArrivals[index] = nowMs;
    if (++this.trainCount === TRAIN_MESSAGES) this.finishTrain();
  }

  /** The current train's estimate to the net stats, once (none when it gives none). */
  private finishTrain(): void {
    if (this.train < 0 || this.trainDone) return;
    this.trainDone = true;
    const bps = trainCapacityBps(this.trainArrivals, TRAIN_WIRE_BYTES);
    if (bps === null) return;
    const s = this.stats;
    s[N_HUB_TRAIN_BPS] = bps;
    s[N_HUB_TRAINS]++;
  }

  private readonly dispatch = (offset: number, length: number): void => {
    const s = this.stats;
    const bytes = this.msg;
    const stream = trailerStream(bytes, offset, length);
    if (stream < 0) {
      s[N_HUB_NO_TRAILER]++;
      return;
    }
    const slot = this.streams.slotOf(stream);
    if (slot < 0 || slot >= this.maxPeers) {
      s[N_HUB_UNKNOWN_STREAM]++;
      return;
    }
    const base = netPeerIndex(slot, 0);
    noteArrival(s, base, bytes, offset, length, this.msgNowMs, this.msgArrivalUs);
    s[base + NP_HUB_RX_PACKETS]++;
    if (!this.writer.push(slot, this.msgArrivalUs % TWO_32, bytes, offset, length)) s[base + NP_RX_DROPPED]++;
  };

  /** A new pass over the outbound ring begins (see pump.ts on the send queue). */
  beginPass(): void {
    this.queuedAtPass = -1;
  }

  /**
   * Sends one of our packets to the hub, unless its queue is over `limit` bytes. `bytesPerSecond`
   * is the stream's rate (0: not an audio packet). Returns the backlog ahead of it in seconds,
   * or -1 when it was not sent.
   */
  send(buf: Uint8Array<ArrayBuffer>, bytesPerSecond: number, limit: number): number {
    const ch = this.channel;
    const s = this.stats;
    if (!ch) return -1;
    if (ch.readyState !== 'open') {
      s[N_HUB_TX_SKIPPED]++;
      return -1;
    }
    const queued = ch.bufferedAmount;
    if (this.queuedAtPass < 0) this.queuedAtPass = queued;
    s[N_HUB_BUFFERED] = queued;
    const backlog = bytesPerSecond > 0 ? this.queuedAtPass / bytesPerSecond : 0;
    if (bytesPerSecond > 0) s[N_HUB_SEND_QUEUE_MS] = backlog * 1000;
    if (queued > limit) {
      s[N_HUB_TX_SKIPPED]++;
      return -1;
    }
    try {
      ch.send(buf);
      s[N_HUB_TX_PACKETS]++;
      return backlog;
    } catch {
      s[N_HUB_TX_SKIPPED]++;
      return -1;
    }
  }
}
