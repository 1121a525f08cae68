// The real WASM engine, driven through WasmEngineCore exactly as the worklet drives it, with real
// SharedArrayBuffer rings: a peer's 440 Hz sine must come out at 440 Hz at its expected level,
// captured input must leave as packets on the outbound ring, and stats must be published.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createBuffers, WasmEngineCore, DEFAULT_CONFIG } from '../../app/src/audio/engine-core';
import { encodePacket, newPacketInfo, parsePacket } from '../../app/src/audio/packet';
import { RingReader, RingWriter } from '../../app/src/audio/ring-ends';
import * as S from '../../app/src/audio/stats';
import { readLatency } from '../../app/src/audio/latency';

const WASM = new URL('../../wasm/pkg/tutti_wasm_bg.wasm', import.meta.url);

function sineBlock(seq: number, freq: number, amp: number): Float32Array {
  const x = new Float32Array(128);
  for (let i = 0; i < 128; i++) x[i] = amp * Math.sin((2 * Math.PI * freq * (seq * 128 + i)) / 48000);
  return x;
}

/**
 * Encodes quantum `q` of a peer's 440 Hz sine at `amp` into `packet` (the same block on both
 * channels, 16-bit, 128 frames at 48 kHz, sequence number `q`) and returns its length.
 */
function sinePacket(packet: Uint8Array, q: number, amp: number, timestamp: number | bigint): number {
  const block = sineBlock(q, 440, amp);
  const header = {
    timestamp,
    seq: q & 0xffff,
    frames: 128,
    rateCode: 3,
    bits: 16,
    channelsIn: 2,
    channelsOut: 2,
  };
  return encodePacket(header, null, [block, block], packet);
}

/** Amplitude of `freq` in `x` (48 kHz), Hann-windowed single-bin DFT. */
function amplitudeAt(x: Float32Array, freq: number): number {
  let re = 0;
  let im = 0;
  let w = 0;
  for (let i = 0; i < x.length; i++) {
    const h = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / x.length);
    const ph = (2 * Math.PI * freq * i) / 48000;
    re += h * x[i] * Math.cos(ph);
    im -= h * x[i] * Math.sin(ph);
    w += h;
  }
  return (2 * Math.hypot(re, im)) / w;
}

// npm test builds wasm/pkg first; run `npm run build` before running this file alone.
describe('WasmEngineCore with the real WASM', () => {
  const module = new WebAssembly.Module(readFileSync(WASM));

  it('plays a peer sine at the expected level and sends captured input', () => {
    const buffers = createBuffers({ inboundBytes: 1 << 16, outboundBytes: 1 << 16 });
    const core = new WasmEngineCore(module, buffers, { ...DEFAULT_CONFIG, maxPeers: 4 });
    core.control({ type: 'add-peer', slot: 2 });
    core.control({ type: 'strip', slot: 2, gain: 1, pan: 0, mute: false, solo: false });
    const writer = new RingWriter(buffers.inbound);
    const reader = new RingReader(buffers.outbound);
    const packet = new Uint8Array(2048);
    const outL = new Float32Array(128);
    const outR = new Float32Array(128);
    const input = [sineBlock(0, 1000, 0.5), sineBlock(0, 1000, 0.5)];
    const quanta = 1200;
    const left = new Float32Array(quanta * 128);
    const info = newPacketInfo();
    let sent = 0;
    for (let q = 0; q < quanta; q++) {
      const len = sinePacket(packet, q, 0.4, q * 128);
      expect(len).toBeGreaterThan(0);
      expect(writer.push(2, 0, packet, 0, len)).toBe(true);
      core.process(input, outL, outR, q * 128);
      left.set(outL, q * 128);
      while (reader.peek()) {
        expect(parsePacket(reader.bytes, reader.offset, reader.length, info)).toBe(0);
        expect(reader.tag).toBe(0xffff);
        sent++;
        reader.consume();
      }
    }
    // Centre pan, constant power: each side carries cos(π/4) of the source.
    const steady = left.subarray(600 * 128, 600 * 128 + 48000);
    const level = amplitudeAt(steady, 440);
    expect(Math.abs(20 * Math.log10(level / (0.4 * Math.SQRT1_2)))).toBeLessThan(0.2);
    expect(amplitudeAt(steady, 1000)).toBeLessThan(1e-4); // own input is not in the mix
    expect(left.every((x) => Number.isFinite(x) && Math.abs(x) <= 1)).toBe(true);
    expect(sent).toBe(quanta); // one 128-frame packet per quantum

    const stats = new Float64Array(buffers.stats);
    const snap = new Float64Array(S.BLOCK_LEN);
    expect(S.readStats(stats, snap)).toBe(true);
    expect(snap[S.G_QUANTA]).toBeGreaterThan(quanta - S.PEER_LEN);
    expect(snap[S.peerIndex(2, S.P_ACTIVE)]).toBe(1);
    expect(snap[S.peerIndex(2, S.P_RECEIVED)]).toBeGreaterThan(quanta - 16);
    expect(snap[S.peerIndex(2, S.P_LOST)]).toBe(0);
    expect(snap[S.peerIndex(1, S.P_ACTIVE)]).toBe(0);
    expect(snap[S.G_PACKETS_SENT]).toBeGreaterThan(quanta - 16);
    core.destroy();
  });

  it('counts garbage and unknown peers without disturbing the output', () => {
    const buffers = createBuffers({ inboundBytes: 1 << 16, outboundBytes: 1 << 16 });
    const core = new WasmEngineCore(module, buffers, { ...DEFAULT_CONFIG, maxPeers: 4 });
    core.control({ type: 'add-peer', slot: 0 });
    const writer = new RingWriter(buffers.inbound);
    const junk = new Uint8Array(700).map((_, i) => (i * 37) & 0xff);
    const outL = new Float32Array(128);
    const outR = new Float32Array(128);
    for (let q = 0; q < 50; q++) {
      writer.push(0, 0, junk, 0, 100 + q); // malformed, for a present peer
      writer.push(3, 0, junk, 0, 20); // a slot with no peer
      core.process([], outL, outR, q * 128);
      expect(outL.every((x) => x === 0)).toBe(true);
    }
    core.publishStats();
    const snap = new Float64Array(S.BLOCK_LEN);
    S.readStats(new Float64Array(buffers.stats), snap);
    expect(snap[S.G_MALFORMED]).toBe(50);
    expect(snap[S.G_UNKNOWN_PEER]).toBe(50);
    expect(snap[S.peerIndex(0, S.P_MALFORMED)]).toBe(50);
    core.destroy();
  });

  it('records the latency stages and publishes them in both blocks', () => {
    const buffers = createBuffers({ inboundBytes: 1 << 16, outboundBytes: 1 << 16 });
    const core = new WasmEngineCore(module, buffers, {
      ...DEFAULT_CONFIG,
      maxPeers: 4,
      buffer: { mode: 'fixed', packets: 3 },
    });
    core.control({ type: 'add-peer', slot: 1 });
    const writer = new RingWriter(buffers.inbound);
    const packet = new Uint8Array(2048);
    const outL = new Float32Array(128);
    const outR = new Float32Array(128);
    const period = (128 / 48000) * 1e6;
    // The sender's wall clock (µs since 1970) and ours, 2.5 s ahead of it; 5 ms on the way.
    const sentAt = (q: number): number => 1_795_000_000_000_000 + Math.round(q * period);
    const offsetUs = 2_500_000;
    const run = (from: number, to: number): void => {
      for (let q = from; q < to; q++) {
        const ts = sentAt(q);
        const len = sinePacket(packet, q, 0.2, BigInt(ts));
        const arrival = (ts + offsetUs + 5000) % 2 ** 32;
        expect(writer.push(1, arrival, packet, 0, len)).toBe(true);
        core.process([], outL, outR, q * 128, 1e12 + q * period);
      }
    };
    // No clock offset yet: the network stage stays empty.
    run(0, 400);
    core.publishHistograms();
    let snap = readLatency(new Float64Array(buffers.histograms!))!;
    expect(snap.peers.map((p) => p.slot)).toEqual([1]);
    expect(snap.peers[0].network.count).toBe(0);
    expect(snap.peers[0].jitterWait.count).toBeGreaterThan(350);

    core.control({ type: 'clock-offset', slot: 1, offsetUs });
    run(400, 1200);
    core.publishHistograms();
    core.publishStats();
    snap = readLatency(new Float64Array(buffers.histograms!))!;
    const peer = snap.peers[0];
    expect(peer.network.count).toBe(800);
    expect(Math.abs(peer.network.p50 - 5)).toBeLessThan(0.05);
    expect(Math.abs(peer.network.max - 5)).toBeLessThan(0.05);
    // A fixed buffer of 3 blocks of 128 frames waits 8 ms, within a block (2.667 ms).
    expect(Math.abs(peer.jitterWait.p50 - 8)).toBeLessThan(2.667);
    expect(peer.jitterWait.counts.reduce((a, b) => a + b, 0)).toBe(peer.jitterWait.count);
    expect(snap.capture.count).toBe(1199);
    expect(Math.abs(snap.capture.p50 - 2.6667)).toBeLessThan(0.001);

    const stats = new Float64Array(S.BLOCK_LEN);
    expect(S.readStats(new Float64Array(buffers.stats), stats)).toBe(true);
    expect(stats[S.peerIndex(1, S.P_NET_P50_MS)]).toBe(peer.network.p50);
    expect(stats[S.peerIndex(1, S.P_NET_COUNT)]).toBe(800);
    expect(stats[S.peerIndex(1, S.P_WAIT_P50_MS)]).toBe(peer.jitterWait.p50);
    expect(stats[S.peerIndex(1, S.P_CLOCK_OFFSET_US)]).toBe(offsetUs);
    expect(Math.abs(stats[S.G_CAPTURE_P50_MS] - 2.6667)).toBeLessThan(0.001);

    // Unknown again (NaN), then a reset: everything starts over and the network stays empty.
    core.control({ type: 'clock-offset', slot: 1, offsetUs: NaN });
    core.control({ type: 'reset-latency' });
    run(1200, 1300);
    core.publishHistograms();
    snap = readLatency(new Float64Array(buffers.histograms!))!;
    expect(snap.peers[0].network.count).toBe(0);
    expect(snap.peers[0].jitterWait.count).toBeGreaterThan(90);
    expect(snap.capture.count).toBe(99);
    core.destroy();
  });
});
