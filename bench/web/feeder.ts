// A synthetic network for the benchmark: N peers, each sending one PCM16 stereo 128-frame packet
// per quantum (a sine of its own frequency), delivered into the engine's inbound ring with a
// seeded random delay of 0..3 quanta (so packets arrive in bursts and sometimes out of order) and
// a seeded 1% loss.
//
// Every packet a peer can send is encoded once, at construction: a peer's sine repeats every
// CYCLE_BLOCKS packets, so only the sequence number and timestamp change, and they are patched in
// place before the ring copies the packet. `feed()` allocates nothing.
//
// With `opus` (opus-feed.ts), the peers send Opus frames instead, the packets encoded beforehand
// on the main thread: each peer's loop of OPUS_LOOP_FRAMES stereo frames of the same sine, sent
// in turn. A frame of F samples is sent in the quantum during which its last sample would have
// been captured: frame k (samples F·k .. F·k + F − 1) goes in quantum ⌈F(k + 1) / 128⌉ − 1, so
// with F = 240 a peer sends 8 frames in every 15 quanta (1920 samples), never two in one quantum.
// Loss and delay are drawn per frame sent, as per packet for PCM.

import { RingWriter } from '../../app/src/audio/ring-ends';

/** Frames per packet (one render quantum). */
export const FRAMES = 128;
/** Packets after which every peer's sine repeats exactly. */
export const CYCLE_BLOCKS = 8;
/** Frequency step between peers: one cycle per CYCLE_BLOCKS packets (46.875 Hz). */
export const FREQ_STEP_HZ = 48000 / (FRAMES * CYCLE_BLOCKS);
/** Bytes of one PCM16 stereo packet. */
export const PACKET_BYTES = 16 + FRAMES * 2 * 2;
/** Largest arrival delay in quanta (delays are uniform in 0..MAX_DELAY). */
export const MAX_DELAY = 3;
const DELAY_SLOTS = 4; // power of two > MAX_DELAY
const BUCKET = MAX_DELAY + 1; // packets that can fall due in one quantum per peer

/** Opus packets to send instead of PCM: see opus-feed.ts. */
export interface OpusPackets {
  /** Samples per frame (120 or 240). */
  frames: number;
  /** Frames in each peer's loop (a power of two). */
  loop: number;
  /** Every packet, header and trailer included: peer k's frame i is packet k × loop + i. */
  bytes: Uint8Array;
  /** Packet j is bytes[offsets[j] .. offsets[j + 1]). */
  offsets: Uint32Array;
}

export interface FeederOptions {
  /** Peers (slots 0..peers-1). */
  peers: number;
  /** PRNG seed (any 32-bit integer except 0). */
  seed?: number;
  /** Probability that a packet is lost. */
  loss?: number;
  /** Peak amplitude of each peer's sine. */
  amplitude?: number;
  /** Largest arrival delay in quanta, 0..MAX_DELAY (default MAX_DELAY). */
  maxDelay?: number;
  /** Send these Opus packets instead of PCM16 (`amplitude` is then the encoder's business). */
  opus?: OpusPackets;
}

/** Frequency in Hz of peer `k`'s sine: (k + 3) × 46.875 Hz, from 140.6 Hz up. */
export function peerFrequency(k: number): number {
  return (k + 3) * FREQ_STEP_HZ;
}

/** Phase in radians of peer `k`'s sine at frame 0 (spread so the sum does not peak at 0). */
export function peerPhase(k: number): number {
  return (k * 2.399963) % (2 * Math.PI);
}

/**
 * Sets the sequence number and the timestamp (µs of the sender's clock at packet `seq`, low 32
 * bits; the high word stays 0) of a `frames`-frame 48 kHz packet in place.
 */
export function stampPacket(packet: Uint8Array, seq: number, frames: number = FRAMES): void {
  const us = Math.floor((seq * frames * 1e6) / 48000) >>> 0;
  packet[0] = us & 0xff;
  packet[1] = (us >>> 8) & 0xff;
  packet[2] = (us >>> 16) & 0xff;
  packet[3] = us >>> 24;
  packet[8] = seq & 0xff;
  packet[9] = (seq >>> 8) & 0xff;
}

export class Feeder {
  readonly peers: number;
  /** Packets the senders produced (including lost ones). */
  sent = 0;
  /** Packets lost on purpose. */
  lost = 0;
  /** Packets written into the ring. */
  delivered = 0;
  /** Packets the ring refused (full). */
  refused = 0;
  private readonly writer: RingWriter;
  /** packets[k * cycle + phase]: each its own view, so the ring copies it with one set(). */
  private readonly packets: Uint8Array[] = [];
  /** Packets in each peer's loop (a power of two). */
  private readonly cycle: number;
  /** Frames per packet. */
  private readonly frames: number;
  /** The next sequence number to send (the same for every peer). */
  private nextSeq = 0;
  /** Pending sequence numbers per peer and due slot: [(k * DELAY_SLOTS + slot) * BUCKET + i]. */
  private readonly pending: Int32Array;
  private readonly pendingCount: Uint8Array;
  private readonly lossThreshold: number;
  private readonly delays: number;
  private state: number;

  constructor(inbound: SharedArrayBuffer, opts: FeederOptions) {
    this.peers = Math.max(0, opts.peers | 0);
    this.writer = new RingWriter(inbound);
    this.state = (opts.seed ?? 0x9e3779b9) | 0 || 1;
    this.lossThreshold = Math.floor((opts.loss ?? 0.01) * 4294967296);
    this.delays = Math.min(Math.max(Math.floor(opts.maxDelay ?? MAX_DELAY), 0), MAX_DELAY) + 1;
    this.pending = new Int32Array(this.peers * DELAY_SLOTS * BUCKET);
    this.pendingCount = new Uint8Array(this.peers * DELAY_SLOTS);
    const opus = opts.opus;
    if (opus) {
      const { loop, bytes, offsets } = opus;
      if (!(loop > 0 && (loop & (loop - 1)) === 0) || offsets.length !== this.peers * loop + 1) {
        throw new Error(`Opus packets for ${this.peers} peers: bad loop (${loop}) or offsets`);
      }
      this.cycle = loop;
      this.frames = opus.frames;
      for (let j = 0; j < this.peers * loop; j++) {
        this.packets.push(bytes.subarray(offsets[j], offsets[j + 1]));
      }
      return;
    }
    this.cycle = CYCLE_BLOCKS;
    this.frames = FRAMES;
    const amplitude = opts.amplitude ?? 0.25;
    const storage = new Uint8Array(this.peers * CYCLE_BLOCKS * PACKET_BYTES);
    const view = new DataView(storage.buffer);
    for (let k = 0; k < this.peers; k++) {
      const w = (2 * Math.PI * peerFrequency(k)) / 48000;
      const phase = peerPhase(k);
      for (let b = 0; b < CYCLE_BLOCKS; b++) {
        const at = (k * CYCLE_BLOCKS + b) * PACKET_BYTES;
        view.setUint16(at + 10, FRAMES, true);
        storage[at + 12] = 3; // 48 kHz
        storage[at + 13] = 16; // PCM16
        storage[at + 14] = 2; // channels in
        storage[at + 15] = 2; // channels out = payload channels
        for (let i = 0; i < FRAMES; i++) {
          const x = amplitude * Math.sin(w * (b * FRAMES + i) + phase);
          const s = Math.round(Math.max(-1, Math.min(x, 1)) * 32767);
          view.setInt16(at + 16 + 2 * i, s, true); // left
          view.setInt16(at + 16 + 2 * (FRAMES + i), s, true); // right
        }
        this.packets.push(storage.subarray(at, at + PACKET_BYTES));
      }
    }
  }

  /**
   * Quantum `q` (0, 1, 2, ... in order): every peer sends the packet that falls due in it (PCM:
   * packet `q`; Opus: the frame whose last sample this quantum captures, if any), which is lost
   * or scheduled 0..maxDelay quanta later; then every packet due at `q` is written into the
   * ring, tagged with its peer's slot. Allocation-free.
   */
  feed(q: number): void {
    const due = q & (DELAY_SLOTS - 1);
    const pending = this.pending;
    const counts = this.pendingCount;
    const cycle = this.cycle;
    // At most one packet per quantum: frames are at least a quantum long.
    const seq = this.nextSeq;
    const sends = (seq + 1) * this.frames <= (q + 1) * FRAMES;
    if (sends) this.nextSeq++;
    // xorshift32, kept in a local so no call returns a double (which would be boxed).
    let x = this.state;
    for (let k = 0; k < this.peers; k++) {
      if (sends) {
        this.sent++;
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        const r = x >>> 0;
        if (r < this.lossThreshold) {
          this.lost++;
        } else {
          // Delay from bits independent of the loss draw (which uses the high bits).
          const delay = ((r & 0xffff) * this.delays) >>> 16;
          const slot = k * DELAY_SLOTS + ((q + delay) & (DELAY_SLOTS - 1));
          pending[slot * BUCKET + counts[slot]] = seq;
          counts[slot]++;
        }
      }
      const slot = k * DELAY_SLOTS + due;
      const n = counts[slot];
      for (let i = 0; i < n; i++) {
        const s = pending[slot * BUCKET + i];
        const packet = this.packets[k * cycle + (s & (cycle - 1))];
        stampPacket(packet, s, this.frames);
        if (this.writer.push(k, 0, packet, 0, packet.length)) this.delivered++;
        else this.refused++;
      }
      counts[slot] = 0;
    }
    this.state = x;
  }
}
