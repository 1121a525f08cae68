// When the mesh no longer fits: the decision the room's owner's client makes to move the room to
// the hub. Pure: figures in, advice out, so that it is checked with known answers.
//
// In a mesh each participant uploads its stream once per other participant: N players upload
// (N − 1) × the stream's rate each (PCM16 stereo, 128 frames at 48 kHz: 528-byte packets 375
// times a second, 1.58 Mbit/s of packets, ~1.84 Mbit/s on the wire). Through the hub each uploads
// it once.
//
// What the uplink carries is not measured directly (nothing here probes capacity). It is
// estimated from what the packet pump already counts on our own channels: the bytes handed to
// them and the bytes still queued in them. Over a window, (sent − queued) grew by what the path
// actually delivered. While the queues stay short and nothing is skipped, that is only a lower
// bound (the uplink carried everything asked of it); once the queues grow or packets are skipped,
// the path is saturated and that rate is its capacity. Only our own uplink is known: the other
// players' clients do not report theirs.

import type { Topology } from '../net/protocol';
import { NP_BUFFERED, NP_TX_PACKETS, NP_TX_SKIPPED, netPeerIndex } from '../net/net-stats';

/** Bytes each packet costs on the wire beyond its own: IPv4 20, UDP 8, DTLS record ~29, SCTP
 * common header 12, DATA chunk 16. */
export const PACKET_OVERHEAD_BYTES = 85;
/** Queue growth over the window that means the path does not keep up, bytes. */
export const QUEUE_GROWTH_BYTES = 16 * 1024;
/** A saturated path is used up to this share of what it was measured to carry. */
export const HEADROOM = 0.9;
/** How long the mesh must not fit before the owner's client moves the room, ms. */
export const SUSTAIN_MS = 3000;
export const WINDOW_MS = 5000;

/** One packet's bytes on the wire: the JackTrip header, `frames` × `channels` × `bytes` per
 * sample, and the per-packet overhead. */
export function packetWireBytes(
  frames: number,
  channels: number,
  bytesPerSample = 2,
  overheadBytes = PACKET_OVERHEAD_BYTES,
): number {
  return 16 + frames * channels * bytesPerSample + overheadBytes;
}

/** One stream's bits per second on the wire: packets of `frames` (packetWireBytes) at
 * `sampleRate`. */
export function streamBitsPerSecond(
  frames: number,
  channels: number,
  bytesPerSample = 2,
  sampleRate = 48000,
  overheadBytes = PACKET_OVERHEAD_BYTES,
): number {
  return (packetWireBytes(frames, channels, bytesPerSample, overheadBytes) * 8 * sampleRate) / frames;
}

/** What our uplink was seen to carry: bits per second, and whether that is its capacity
 * (saturated) or only a lower bound. */
export interface Uplink {
  carriesBps: number;
  saturated: boolean;
}

/** The pump's totals over our own channels at one time. */
export interface UplinkSample {
  atMs: number;
  /** Bytes handed to the channels since they opened (packets × wire bytes). */
  sentBytes: number;
  /** Bytes the channels still hold. */
  queuedBytes: number;
  /** Packets skipped because a queue was over the limit. */
  skipped: number;
}

/** Estimates what the uplink carries from samples of the pump's totals (see the header). */
export class UplinkMeter {
  private samples: UplinkSample[] = [];

  constructor(readonly windowMs = WINDOW_MS) {}

  add(s: UplinkSample): void {
    const last = this.samples[this.samples.length - 1];
    // A channel closed (its counters went with it): what came before says nothing now.
    if (last && (s.sentBytes < last.sentBytes || s.skipped < last.skipped || s.atMs <= last.atMs)) {
      this.samples = [];
    }
    this.samples.push(s);
    while (this.samples.length > 2 && s.atMs - this.samples[1].atMs >= this.windowMs) this.samples.shift();
  }

  /** null until the samples span half a window. */
  estimate(): Uplink | null {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (!first || last.atMs - first.atMs < this.windowMs / 2) return null;
    const seconds = (last.atMs - first.atMs) / 1000;
    const delivered = last.sentBytes - last.queuedBytes - (first.sentBytes - first.queuedBytes);
    return {
      carriesBps: Math.max(0, (delivered * 8) / seconds),
      saturated: last.skipped > first.skipped || last.queuedBytes - first.queuedBytes > QUEUE_GROWTH_BYTES,
    };
  }
}

export interface TopologyInput {
  mode: Topology;
  /** Players in the room, us included. */
  players: number;
  /** One stream's bits per second (streamBitsPerSecond). */
  streamBps: number;
  uplink: Uplink | null;
}

export interface TopologyAdvice {
  /** What each player uploads in a mesh of this many, bits per second. */
  needBps: number;
  /** Whether the mesh fits our uplink; null when not known. */
  fits: boolean | null;
  /** The topology to move to, if any. */
  propose: Topology | null;
  /** Why, for the room view ("5 players: 4 streams × 1.8 Mbit/s = 7.4 Mbit/s up; …"). */
  reason: string | null;
}

/** "1.8 Mbit/s", "6 Mbit/s", "12 Mbit/s". */
export function formatMbit(bps: number): string {
  const m = bps / 1e6;
  const text = m >= 10 ? String(Math.round(m)) : String(Math.round(m * 10) / 10);
  return `${text} Mbit/s`;
}

/** Whether the mesh fits, and what to propose when it does not (see the header). */
export function adviseTopology(input: TopologyInput): TopologyAdvice {
  const streams = Math.max(0, input.players - 1);
  const needBps = streams * input.streamBps;
  const uplink = input.uplink;
  let fits: boolean | null = null;
  if (uplink) {
    if (uplink.saturated) fits = needBps <= uplink.carriesBps * HEADROOM;
    else if (needBps <= uplink.carriesBps * 1.1) fits = true;
  }
  // Two players send one stream each either way: the hub would not help.
  if (fits !== false || streams < 2 || !uplink) return { needBps, fits, propose: null, reason: null };
  const reason =
    `${input.players} players: ${streams} streams × ${formatMbit(input.streamBps)} = ` +
    `${formatMbit(needBps)} up; your uplink carries ~${formatMbit(uplink.carriesBps).replace(' Mbit/s', '')}`;
  return { needBps, fits, propose: input.mode === 'mesh' ? 'forward' : null, reason };
}

/** Proposes only advice that held for SUSTAIN_MS without a break. */
export class SustainedAdvice {
  private since: number | null = null;

  constructor(readonly sustainMs = SUSTAIN_MS) {}

  /** The proposal of `advice` once it has held for the sustain time; null before. */
  update(advice: TopologyAdvice, nowMs: number): Topology | null {
    if (!advice.propose) {
      this.since = null;
      return null;
    }
    this.since ??= nowMs;
    return nowMs - this.since >= this.sustainMs ? advice.propose : null;
  }
}

/**
 * Whether the mesh still fits our uplink, watched over the session: samples of what the pump's
 * channels were handed and still hold (its net stats), the uplink estimate, and advice that must
 * hold for SUSTAIN_MS before it is given.
 */
export class MeshFitWatch {
  private readonly uplink = new UplinkMeter();
  private readonly sustained = new SustainedAdvice();

  /**
   * One look, in a mesh of `players` (us included) sending `blockFrames` × `channels` PCM16
   * packets, our peers in `slots` of the pump's `net` stats. Once the mesh has not fitted for a
   * while: the reason to move, what the mesh asks of our uplink and what it carries (bits/s);
   * null otherwise.
   */
  update(
    nowMs: number,
    mode: Topology,
    players: number,
    audio: { blockFrames: number; channels: number },
    net: Float64Array,
    slots: Iterable<number>,
  ): { reason: string; needBps: number; carriesBps: number } | null {
    const wireBytes = packetWireBytes(audio.blockFrames, audio.channels);
    let sentBytes = 0;
    let queuedBytes = 0;
    let skipped = 0;
    for (const slot of slots) {
      sentBytes += net[netPeerIndex(slot, NP_TX_PACKETS)] * wireBytes;
      queuedBytes += net[netPeerIndex(slot, NP_BUFFERED)];
      skipped += net[netPeerIndex(slot, NP_TX_SKIPPED)];
    }
    this.uplink.add({ atMs: nowMs, sentBytes, queuedBytes, skipped });
    const uplink = this.uplink.estimate();
    const advice = adviseTopology({
      mode,
      players,
      streamBps: streamBitsPerSecond(audio.blockFrames, audio.channels),
      uplink,
    });
    if (!this.sustained.update(advice, nowMs) || !advice.reason || !uplink) return null;
    return { reason: advice.reason, needBps: advice.needBps, carriesBps: uplink.carriesBps };
  }
}
