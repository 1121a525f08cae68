// The plain-JavaScript engine (bench/web/js-engine-core.ts) against known answers: a sine in
// comes out as the same sine (through ring → jitter buffer → decode → resampler → mix), a known
// loss schedule gives exactly the counters it should, and the strip, limiter and concealment do
// what they promise. The benchmark's feeder is checked here too.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WasmEngineCore, type EngineBuffers, type EngineConfig } from '../../app/src/audio/engine-core';
import { JsEngineCore } from '../../bench/web/js-engine-core';
import { newPacketInfo, parsePacket } from '../../app/src/audio/packet';
import { createRing } from '../../app/src/audio/ring';
import { RingWriter } from '../../app/src/audio/ring-ends';
import * as S from '../../app/src/audio/stats';
import { Feeder, FRAMES, PACKET_BYTES, peerFrequency, peerPhase } from '../../bench/web/feeder';

const Q = 128;
const CONFIG: EngineConfig = {
  maxPeers: 16,
  blockFrames: 128,
  bits: 16,
  captureChannels: 2,
  buffer: { mode: 'adaptive', floorFrames: 128, ceilingFrames: 4096 },
};

function buffers(): EngineBuffers {
  return {
    inbound: createRing(1 << 20),
    outbound: createRing(1 << 16),
    stats: new SharedArrayBuffer(S.STATS_BYTES),
  };
}

/**
 * Runs `quanta` quanta from quantum `start` (the engine's clock: now = quantum × 128); `before(q)`
 * may write packets; returns the rendered left/right.
 */
function render(
  engine: JsEngineCore,
  quanta: number,
  before: (q: number) => void,
  start = 0,
): { left: Float32Array; right: Float32Array } {
  const left = new Float32Array(quanta * Q);
  const right = new Float32Array(quanta * Q);
  for (let q = 0; q < quanta; q++) {
    before(start + q);
    const at = q * Q;
    engine.process([], left.subarray(at, at + Q), right.subarray(at, at + Q), (start + q) * Q);
  }
  return { left, right };
}

/** Least-squares fit of a·sin(wt) + b·cos(wt) + c over x; returns amplitude and residual RMS. */
function fitSine(x: Float32Array, hz: number): { amplitude: number; residual: number } {
  const w = (2 * Math.PI * hz) / 48000;
  // Normal equations for [sin, cos, 1].
  const m = [0, 0, 0, 0, 0, 0, 0, 0, 0];
  const v = [0, 0, 0];
  for (let i = 0; i < x.length; i++) {
    const f = [Math.sin(w * i), Math.cos(w * i), 1];
    for (let r = 0; r < 3; r++) {
      v[r] += f[r] * x[i];
      for (let c = 0; c < 3; c++) m[r * 3 + c] += f[r] * f[c];
    }
  }
  const sol = solve3(m, v);
  let ss = 0;
  for (let i = 0; i < x.length; i++) {
    const e = x[i] - (sol[0] * Math.sin(w * i) + sol[1] * Math.cos(w * i) + sol[2]);
    ss += e * e;
  }
  return { amplitude: Math.hypot(sol[0], sol[1]), residual: Math.sqrt(ss / x.length) };
}

function solve3(m: number[], v: number[]): number[] {
  const a = [
    [m[0], m[1], m[2], v[0]],
    [m[3], m[4], m[5], v[1]],
    [m[6], m[7], m[8], v[2]],
  ];
  for (let i = 0; i < 3; i++) {
    let p = i;
    for (let r = i + 1; r < 3; r++) if (Math.abs(a[r][i]) > Math.abs(a[p][i])) p = r;
    [a[i], a[p]] = [a[p], a[i]];
    for (let r = 0; r < 3; r++) {
      if (r === i) continue;
      const f = a[r][i] / a[i][i];
      for (let c = i; c < 4; c++) a[r][c] -= f * a[i][c];
    }
  }
  return [a[0][3] / a[0][0], a[1][3] / a[1][1], a[2][3] / a[2][2]];
}

/** Amplitude of the tone at `hz` in x (Hann-windowed single-bin DFT, scaled for a sine). */
function toneLevel(x: Float32Array, hz: number): number {
  const w = (2 * Math.PI * hz) / 48000;
  let re = 0;
  let im = 0;
  let norm = 0;
  for (let i = 0; i < x.length; i++) {
    const h = 0.5 - 0.5 * Math.cos((2 * Math.PI * (i + 0.5)) / x.length);
    re += h * x[i] * Math.cos(w * i);
    im += h * x[i] * Math.sin(w * i);
    norm += h;
  }
  return (2 * Math.hypot(re, im)) / norm;
}

/** Frequency from upward zero crossings (linear interpolation between samples). */
function zeroCrossingHz(x: Float32Array): number {
  let first = -1;
  let last = -1;
  let count = 0;
  for (let i = 1; i < x.length; i++) {
    if (x[i - 1] < 0 && x[i] >= 0) {
      const t = i - 1 + -x[i - 1] / (x[i] - x[i - 1]);
      if (first < 0) first = t;
      else count++;
      last = t;
    }
  }
  return (count * 48000) / (last - first);
}

/** A PCM16 packet of `frames` frames (stereo, planar): left = f(i), right = g(i); send stamp
 * `us` (µs, below 2^53). */
function packet(seq: number, frames: number, f: (i: number) => number, g = f, us = 0): Uint8Array {
  const b = new Uint8Array(16 + frames * 4);
  const v = new DataView(b.buffer);
  v.setUint32(0, us % 4294967296, true);
  v.setUint32(4, Math.floor(us / 4294967296), true);
  v.setUint16(8, seq & 0xffff, true);
  v.setUint16(10, frames, true);
  b[12] = 3;
  b[13] = 16;
  b[14] = 2;
  b[15] = 2;
  for (let i = 0; i < frames; i++) {
    v.setInt16(16 + 2 * i, Math.round(f(i) * 32767), true);
    v.setInt16(16 + 2 * (frames + i), Math.round(g(i) * 32767), true);
  }
  return b;
}

/** A JS engine on fresh buffers with CONFIG and a peer added in each of `slots`. */
function engineWith(...slots: number[]): { buf: EngineBuffers; engine: JsEngineCore } {
  const buf = buffers();
  const engine = new JsEngineCore(buf, CONFIG);
  for (const slot of slots) engine.control({ type: 'add-peer', slot });
  return { buf, engine };
}

function peerStat(stats: SharedArrayBuffer, slot: number, field: number): number {
  return new Float64Array(stats)[S.peerIndex(slot, field)];
}

function globalStat(stats: SharedArrayBuffer, field: number): number {
  return new Float64Array(stats)[field];
}

describe('JsEngineCore', () => {
  it('plays a jittered sine back as the same sine (amplitude within 1%, frequency within 0.05%)', () => {
    const { buf, engine } = engineWith(0);
    const amplitude = 0.5;
    const feeder = new Feeder(buf.inbound, { peers: 1, seed: 7, loss: 0, amplitude });
    const quanta = 3000;
    let underrunsAt1000 = -1;
    const { left, right } = render(engine, quanta, (q) => {
      if (q === 1000) underrunsAt1000 = peerStat(buf.stats, 0, S.P_UNDERRUNS);
      feeder.feed(q);
    });
    const hz = peerFrequency(0);
    // Skip the start (buffering, drift loop settling); check the last 2000 quanta in windows.
    const expected = amplitude * Math.SQRT1_2; // centre pan: −3.01 dB per side
    for (let w = 1000; w + 100 <= quanta; w += 100) {
      const seg = left.subarray(w * Q, (w + 100) * Q);
      const fit = fitSine(seg, hz);
      expect(Math.abs(fit.amplitude / expected - 1)).toBeLessThan(0.01);
      // PCM16 quantisation and the cubic leave well under -60 dB of residual.
      expect(fit.residual / expected).toBeLessThan(1e-3);
    }
    const measured = zeroCrossingHz(right.subarray(1000 * Q));
    expect(Math.abs(measured / hz - 1)).toBeLessThan(5e-4);
    // Start-up may underrun while the jitter estimate forms (each raises the depth); after
    // that, none.
    expect(underrunsAt1000).toBeLessThanOrEqual(2);
    expect(peerStat(buf.stats, 0, S.P_UNDERRUNS)).toBe(underrunsAt1000);
    // Nothing lost: only packets still in flight at the end (delays up to 3 quanta) count.
    expect(peerStat(buf.stats, 0, S.P_LOST)).toBeLessThanOrEqual(3);
    expect(peerStat(buf.stats, 0, S.P_CONCEALED)).toBe(0);
    // The adaptive target covers the 0..3 quanta of arrival spread.
    expect(peerStat(buf.stats, 0, S.P_JITTER_FRAMES)).toBeGreaterThanOrEqual(3 * Q - 1);
    expect(Math.abs(peerStat(buf.stats, 0, S.P_DRIFT_PPM))).toBeLessThan(1000);
    // Meters read the pre-fader source: peak = amplitude, RMS = amplitude/√2, within 1%.
    expect(Math.abs(peerStat(buf.stats, 0, S.P_PEAK_L) / amplitude - 1)).toBeLessThan(0.01);
    expect(Math.abs(peerStat(buf.stats, 0, S.P_RMS_L) / (amplitude * Math.SQRT1_2) - 1)).toBeLessThan(0.01);
  });

  it('counts a known loss schedule exactly and conceals every lost block without an underrun', () => {
    const { buf, engine } = engineWith(0);
    const writer = new RingWriter(buf.inbound);
    // Single losses and one pair: with a depth of three blocks a later packet is always buffered,
    // so each loss is concealed (a longer run would empty the buffer: an underrun).
    const lostSeqs = new Set([5, 17, 18, 40, 99, 123, 150, 177]);
    const total = 200;
    const hz = 375;
    const sine = (seq: number) => (i: number) => 0.5 * Math.sin((2 * Math.PI * hz * (seq * Q + i)) / 48000);
    // In order, one packet per quantum, starting with a few quanta of head start.
    let seq = 0;
    const { left } = render(engine, total + 20, (q) => {
      if (q === 0) {
        for (; seq < 3; seq++) writer.push(0, 0, packet(seq, Q, sine(seq)));
      }
      if (seq < total) {
        if (!lostSeqs.has(seq)) writer.push(0, 0, packet(seq, Q, sine(seq)));
        seq++;
      }
    });
    engine.control({ type: 'master', gain: 1 }); // publishes the stats
    expect(peerStat(buf.stats, 0, S.P_RECEIVED)).toBe(total - lostSeqs.size);
    expect(peerStat(buf.stats, 0, S.P_LOST)).toBe(lostSeqs.size);
    expect(peerStat(buf.stats, 0, S.P_LATE)).toBe(0);
    expect(peerStat(buf.stats, 0, S.P_DUPLICATES)).toBe(0);
    // Every lost block concealed (passed over); when the stream ends, the emptied buffer counts
    // exactly one underrun (one per run of empty pops).
    expect(peerStat(buf.stats, 0, S.P_CONCEALED)).toBe(lostSeqs.size);
    expect(peerStat(buf.stats, 0, S.P_UNDERRUNS)).toBe(1);
    expect(globalStat(buf.stats, S.G_UNDERRUNS)).toBe(1);
    // No clicks: sample-to-sample steps stay far below a hard discontinuity (a 0.35 step here).
    let maxStep = 0;
    for (let i = 1; i < (total - 5) * Q; i++) maxStep = Math.max(maxStep, Math.abs(left[i] - left[i - 1]));
    const sineStep = 0.5 * Math.SQRT1_2 * ((2 * Math.PI * hz) / 48000);
    expect(maxStep).toBeLessThan(4 * sineStep);
  });

  it('counts duplicates, late packets, malformed packets and unknown peers', () => {
    const { buf, engine } = engineWith(2);
    const writer = new RingWriter(buf.inbound);
    const tone = (i: number) => 0.1 * Math.sin(i / 10);
    let seq = 0;
    render(engine, 60, (q) => {
      if (q === 0) for (; seq < 4; seq++) writer.push(2, 0, packet(seq, Q, tone));
      if (q >= 1 && seq < 40) {
        // Packet 10 is held back and sent at quantum 30, long after its turn.
        if (seq !== 10) writer.push(2, 0, packet(seq, Q, tone));
        if (seq === 20) writer.push(2, 0, packet(20, Q, tone)); // a duplicate
        seq++;
      }
      if (q === 30) writer.push(2, 0, packet(10, Q, tone));
      if (q === 31) writer.push(2, 0, packet(10, Q, tone)); // a copy of the late one
      if (q === 5) writer.push(2, 0, new Uint8Array(40)); // not a packet
      if (q === 6) writer.push(9, 0, packet(0, Q, tone)); // slot 9 holds no peer
    });
    engine.control({ type: 'master', gain: 1 });
    expect(peerStat(buf.stats, 2, S.P_RECEIVED)).toBe(40);
    expect(peerStat(buf.stats, 2, S.P_DUPLICATES)).toBe(2);
    expect(peerStat(buf.stats, 2, S.P_LATE)).toBe(1);
    expect(peerStat(buf.stats, 2, S.P_LOST)).toBe(0);
    expect(peerStat(buf.stats, 2, S.P_MALFORMED)).toBe(1);
    expect(globalStat(buf.stats, S.G_MALFORMED)).toBe(1);
    expect(globalStat(buf.stats, S.G_UNKNOWN_PEER)).toBe(1);
    expect(globalStat(buf.stats, S.G_RECORDS_READ)).toBe(39 + 1 + 2 + 1 + 1);
  });

  it('excuses the clump that ends a stall of every peer: a stall underrun, the depth unmoved', () => {
    const { buf, engine } = engineWith(0, 1);
    const writer = new RingWriter(buf.inbound);
    const tone = (i: number) => 0.2 * Math.sin(i / 7);
    // Two peers, each packet in its own quantum; at quantum 1000 nothing reaches the engine for
    // 15 quanta (40 ms, more than LOCAL_STALL_FRAMES), then all of it at once.
    const stallFrom = 1000;
    const stallTo = 1015;
    let targetBefore = -1;
    render(engine, 3000, (q) => {
      if (q === stallFrom) targetBefore = peerStat(buf.stats, 0, S.P_TARGET_FRAMES);
      if (q >= stallFrom && q < stallTo) return;
      const first = q === stallTo ? stallFrom : q;
      for (let seq = first; seq <= q; seq++) {
        for (const slot of [0, 1]) writer.push(slot, 0, packet(seq, Q, tone));
      }
    });
    engine.control({ type: 'master', gain: 1 });
    expect(globalStat(buf.stats, S.G_LOCAL_STALLS)).toBe(1);
    for (const slot of [0, 1]) {
      // One underrun (playout waited through the stall), settled by the excused clump: neither a
      // late packet nor a loss.
      expect(peerStat(buf.stats, slot, S.P_UNDERRUNS)).toBe(1);
      expect(peerStat(buf.stats, slot, S.P_STALL_UNDERRUNS)).toBe(1);
      expect(peerStat(buf.stats, slot, S.P_LATE_UNDERRUNS)).toBe(0);
      expect(peerStat(buf.stats, slot, S.P_LOST)).toBe(0);
      expect(peerStat(buf.stats, slot, S.P_LATE)).toBe(0);
      expect(peerStat(buf.stats, slot, S.P_CONCEALED)).toBe(0);
      // The wait stretched playout by a block per empty pop (about the 15 quanta of the stall).
      expect(peerStat(buf.stats, slot, S.P_STRETCHED)).toBeGreaterThanOrEqual(12);
      // The clump's lateness taught the estimate nothing: the target is where it was.
      expect(targetBefore).toBe(Q + Q / 2);
      expect(peerStat(buf.stats, slot, S.P_TARGET_FRAMES)).toBe(targetBefore);
    }
  });

  it('counts our missed callbacks from the wall clock and a sender’s from its send stamps', () => {
    const { buf, engine } = engineWith(0);
    const writer = new RingWriter(buf.inbound);
    const tone = (i: number) => 0.2 * Math.sin(i / 7);
    const quantumUs = (Q * 1e6) / 48000;
    const left = new Float32Array(Q);
    const right = new Float32Array(Q);
    for (let q = 0; q < 3000; q++) {
      // The sender's device missed 30 ms of callbacks before packet 1500: its stamps step.
      const stamp = 1.7e15 + Math.floor(q * quantumUs) + (q >= 1500 ? 30000 : 0);
      writer.push(0, 0, packet(q, Q, tone, tone, stamp));
      // Ours missed 20 ms before quantum 2000; the wall clock has 1 ms resolution and callbacks
      // of 4 quanta share a time, as in a worklet.
      const callbackMs = Math.floor((Math.floor(q / 4) * 4 * quantumUs) / 1000);
      const wall = 1.6e15 + callbackMs * 1000 + (q >= 2000 ? 20000 : 0);
      engine.process([], left, right, q * Q, wall);
    }
    engine.control({ type: 'master', gain: 1 });
    expect(globalStat(buf.stats, S.G_CAPTURE_GAPS)).toBe(1);
    expect(Math.abs(globalStat(buf.stats, S.G_CAPTURE_GAP_MS) - 20)).toBeLessThan(2);
    expect(peerStat(buf.stats, 0, S.P_SENDER_GAPS)).toBe(1);
    expect(Math.abs(peerStat(buf.stats, 0, S.P_SENDER_GAP_MS) - 30)).toBeLessThan(0.01);
    // One peer: a silence of its path is no stall of ours.
    expect(globalStat(buf.stats, S.G_LOCAL_STALLS)).toBe(0);
  });

  it('pans with constant power, mutes and solos with ramps', () => {
    const { buf, engine } = engineWith(0, 1);
    const feeder = new Feeder(buf.inbound, { peers: 2, seed: 3, loss: 0, amplitude: 0.3 });
    let next = 0;
    const run = (n: number) => {
      const out = render(engine, n, (q) => feeder.feed(q), next);
      next += n;
      return out;
    };
    run(600);
    // Peer 0 hard left, peer 1 muted: the right channel goes silent, the left carries peer 0 at
    // full level (cos 0 = 1).
    engine.control({ type: 'strip', slot: 0, gain: 1, pan: -1, mute: false, solo: false });
    engine.control({ type: 'strip', slot: 1, gain: 1, pan: 0, mute: true, solo: false });
    const a = run(300);
    const rightPeak = a.right.subarray(Q).reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    expect(rightPeak).toBe(0);
    // Levels by tone (Hann-windowed DFT: a drift of up to 0.1% or a skipped block barely moves
    // them): peer 0 at full level on the left, nothing of peer 1.
    const leftA = a.left.subarray(100 * Q);
    expect(Math.abs(toneLevel(leftA, peerFrequency(0)) / 0.3 - 1)).toBeLessThan(0.02);
    expect(toneLevel(leftA, peerFrequency(1))).toBeLessThan(1e-3);
    // Solo peer 1 while it is still muted: mute wins, so nobody is heard.
    engine.control({ type: 'strip', slot: 1, gain: 2, pan: 0, mute: true, solo: true });
    const silent = run(50);
    expect(silent.left.subarray(Q).every((x) => x === 0)).toBe(true);
    // Unmute it: only peer 1 is heard, centred, at gain 2.
    engine.control({ type: 'strip', slot: 1, gain: 2, pan: 0, mute: false, solo: true });
    const b = run(300);
    const leftB = b.left.subarray(100 * Q);
    expect(Math.abs(toneLevel(leftB, peerFrequency(1)) / (0.6 * Math.SQRT1_2) - 1)).toBeLessThan(0.02);
    // Peer 0 is not soloed: gone (at least 60 dB below peer 1).
    expect(toneLevel(leftB, peerFrequency(0))).toBeLessThan(0.6 * Math.SQRT1_2 * 1e-3);
    // The change was ramped: no step larger than the loudest sine's slope allows.
    let maxStep = 0;
    for (let i = 1; i < b.left.length; i++) maxStep = Math.max(maxStep, Math.abs(b.left[i] - b.left[i - 1]));
    expect(maxStep).toBeLessThan(0.05);
  });

  it('limits a loud mix below full scale', () => {
    const buf = buffers();
    const engine = new JsEngineCore(buf, CONFIG);
    for (let k = 0; k < 12; k++) engine.control({ type: 'add-peer', slot: k });
    engine.control({ type: 'master', gain: 4 });
    const feeder = new Feeder(buf.inbound, { peers: 12, seed: 11, loss: 0.01, amplitude: 0.9 });
    const { left, right } = render(engine, 800, (q) => feeder.feed(q));
    let peak = 0;
    for (let i = 0; i < left.length; i++) peak = Math.max(peak, Math.abs(left[i]), Math.abs(right[i]));
    expect(peak).toBeLessThan(1);
    expect(peak).toBeGreaterThan(0.85);
    expect(globalStat(buf.stats, S.G_LIMITER_DB)).toBeGreaterThan(6);
    expect(globalStat(buf.stats, S.G_NONFINITE)).toBe(0);
  });
});

describe('Feeder', () => {
  it('delivers every packet not lost, loses ~1%, and the engine counts the same losses', () => {
    const buf = buffers();
    const peers = 8;
    const engine = new JsEngineCore(buf, { ...CONFIG, maxPeers: peers });
    for (let k = 0; k < peers; k++) engine.control({ type: 'add-peer', slot: k });
    const feeder = new Feeder(buf.inbound, { peers, seed: 12345 });
    const quanta = 5000;
    let underrunsAt1000 = -1;
    let lateUnderrunsAt1000 = -1;
    const lateUnderruns = () => {
      let n = 0;
      for (let k = 0; k < peers; k++) n += peerStat(buf.stats, k, S.P_LATE_UNDERRUNS);
      return n;
    };
    render(engine, quanta, (q) => {
      if (q === 1000) {
        underrunsAt1000 = globalStat(buf.stats, S.G_UNDERRUNS);
        lateUnderrunsAt1000 = lateUnderruns();
      }
      feeder.feed(q);
    });
    expect(feeder.sent).toBe(peers * quanta);
    expect(feeder.refused).toBe(0);
    // Everything sent before the last MAX_DELAY quanta has arrived.
    expect(feeder.delivered + feeder.lost).toBeGreaterThan(peers * (quanta - 3));
    expect(feeder.delivered + feeder.lost).toBeLessThanOrEqual(peers * quanta);
    // 1% ± 0.3% (40000 draws: the binomial σ is 0.05%).
    expect(Math.abs(feeder.lost / feeder.sent - 0.01)).toBeLessThan(0.003);
    engine.control({ type: 'master', gain: 1 });
    let lost = 0;
    let received = 0;
    for (let k = 0; k < peers; k++) {
      lost += peerStat(buf.stats, k, S.P_LOST);
      received += peerStat(buf.stats, k, S.P_RECEIVED);
    }
    expect(received).toBe(feeder.delivered);
    // lost = expected − received: at the end up to 3 packets per peer are still in flight
    // (counted lost by the engine, not by the feeder), and the feeder's last losses may not be
    // known yet (no later packet arrived).
    expect(Math.abs(lost - feeder.lost)).toBeLessThanOrEqual(peers * 3);
    // Loss is concealed, and nothing is learnt from it: after start-up no underrun waits for a
    // late packet. An underrun now and then is a loss that emptied the buffer (its successors
    // still in flight); it ends by passing the missing numbers, so each needs a packet lost (or
    // late).
    expect(underrunsAt1000).toBeLessThanOrEqual(3 * peers);
    expect(lateUnderruns()).toBe(lateUnderrunsAt1000);
    for (let k = 0; k < peers; k++) {
      const gapUnderruns =
        peerStat(buf.stats, k, S.P_UNDERRUNS) -
        peerStat(buf.stats, k, S.P_LATE_UNDERRUNS) -
        peerStat(buf.stats, k, S.P_STALL_UNDERRUNS);
      const missing = peerStat(buf.stats, k, S.P_LOST) + peerStat(buf.stats, k, S.P_LATE);
      expect(gapUnderruns).toBeLessThanOrEqual(missing);
    }
  });

  it('encodes valid packets of its peers’ sines', () => {
    const ring = createRing(1 << 16);
    const feeder = new Feeder(ring, { peers: 3, seed: 1, loss: 0, amplitude: 0.5 });
    feeder.feed(0);
    const info = newPacketInfo();
    // The ring holds records (8-byte header) back to back from byte 128.
    const bytes = new Uint8Array(ring);
    let at = 128;
    let seen = 0;
    while (bytes[at] | (bytes[at + 1] << 8)) {
      const len = bytes[at] | (bytes[at + 1] << 8);
      const tag = bytes[at + 2];
      expect(len).toBe(PACKET_BYTES);
      expect(parsePacket(bytes, at + 8, len, info)).toBe(0);
      expect([info.seq, info.frames, info.rateHz, info.bits, info.channels]).toEqual([
        0,
        FRAMES,
        48000,
        16,
        2,
      ]);
      const view = new DataView(ring, at + 8 + 16);
      const w = (2 * Math.PI * peerFrequency(tag)) / 48000;
      for (let i = 0; i < FRAMES; i += 17) {
        const want = 0.5 * Math.sin(w * i + peerPhase(tag));
        expect(Math.abs(view.getInt16(2 * i, true) / 32767 - want)).toBeLessThan(1 / 32767);
      }
      at += 8 + len;
      seen++;
    }
    // With delays of 0..3, packet 0 of each peer arrives at quantum 0 only for delay 0.
    expect(seen).toBe(feeder.delivered);
  });
});

// The benchmark compares the two engines: they must do the same work. npm test builds wasm/pkg
// first; run `npm run build` before running this file alone.
describe('JsEngineCore beside the WASM engine', () => {
  it('renders the benchmark input to the same output (within 1e-5) and the same counters', () => {
    const module = new WebAssembly.Module(
      readFileSync(new URL('../../wasm/pkg/tutti_wasm_bg.wasm', import.meta.url)),
    );
    const peers = 6;
    const quanta = 4000;
    const config = { ...CONFIG, maxPeers: peers };
    const runs = [true, false].map((wasm) => {
      const buf = buffers();
      const engine = wasm ? new WasmEngineCore(module, buf, config) : new JsEngineCore(buf, config);
      for (let k = 0; k < peers; k++) engine.control({ type: 'add-peer', slot: k });
      engine.control({ type: 'strip', slot: 1, gain: 0.5, pan: -0.5, mute: false, solo: false });
      engine.control({ type: 'strip', slot: 2, gain: 1, pan: 0, mute: true, solo: false });
      const feeder = new Feeder(buf.inbound, { peers, seed: 424242, loss: 0.02 });
      const left = new Float32Array(quanta * Q);
      const right = new Float32Array(quanta * Q);
      for (let q = 0; q < quanta; q++) {
        feeder.feed(q);
        engine.process([], left.subarray(q * Q, (q + 1) * Q), right.subarray(q * Q, (q + 1) * Q), q * Q);
      }
      engine.control({ type: 'master', gain: 1 });
      return { left, right, stats: new Float64Array(buf.stats).slice() };
    });
    const [wasm, js] = runs;
    let maxDiff = 0;
    for (let i = 0; i < wasm.left.length; i++) {
      maxDiff = Math.max(maxDiff, Math.abs(wasm.left[i] - js.left[i]), Math.abs(wasm.right[i] - js.right[i]));
    }
    // f32 arithmetic in Rust, f64 in JavaScript: rounding-level differences only.
    expect(maxDiff).toBeLessThan(1e-5);
    const counters = [
      S.P_RECEIVED,
      S.P_LOST,
      S.P_LATE,
      S.P_DUPLICATES,
      S.P_CONCEALED,
      S.P_UNDERRUNS,
      S.P_LATE_UNDERRUNS,
      S.P_STALL_UNDERRUNS,
      S.P_STRETCHED,
      S.P_DISCARDED,
      S.P_JITTER_FRAMES,
      S.P_SENDER_GAPS,
    ];
    for (let k = 0; k < peers; k++) {
      for (const field of counters) {
        expect(js.stats[S.peerIndex(k, field)], `peer ${k} field ${field}`).toBe(
          wasm.stats[S.peerIndex(k, field)],
        );
      }
      expect(js.stats[S.peerIndex(k, S.P_TARGET_FRAMES)]).toBe(wasm.stats[S.peerIndex(k, S.P_TARGET_FRAMES)]);
      // The drift loop's offset estimate, ppm.
      const ppm = wasm.stats[S.peerIndex(k, S.P_DRIFT_PPM)];
      expect(Math.abs(js.stats[S.peerIndex(k, S.P_DRIFT_PPM)] - ppm)).toBeLessThan(1e-3);
      // Meters (the muted peer's too: it is metered from its input, not interpolated).
      for (const field of [S.P_PEAK_L, S.P_PEAK_R, S.P_RMS_L, S.P_RMS_R]) {
        const w = wasm.stats[S.peerIndex(k, field)];
        expect(Math.abs(js.stats[S.peerIndex(k, field)] - w), `peer ${k} meter ${field}`).toBeLessThan(1e-5);
      }
    }
    for (const field of [S.G_RECORDS_READ, S.G_LOCAL_STALLS, S.G_CAPTURE_GAPS]) {
      expect(js.stats[field], `global ${field}`).toBe(wasm.stats[field]);
    }
  });
});
