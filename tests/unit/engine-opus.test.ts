// Opus through the real engine: the Rust core's WASM linked, as the worklet links it, to libopus
// built with emscripten (wasm/opus), fed a peer's Opus packets through a real inbound ring. A
// 440 Hz sine encoded at 128 kbit/s must come out at 440 Hz at its level; lost frames must be
// counted and concealed by the decoder; an engine without the codec module must refuse Opus
// and stay silent. The benchmark's Opus feed (bench/web/opus-feed.ts, feeder.ts) must send each
// frame in the quantum that captures its last sample and be decoded whole. npm test builds both
// modules first; run `npm run build` before running this file alone.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createBuffers, DEFAULT_CONFIG, WasmEngineCore } from '../../app/src/audio/engine-core';
import { OpusModule } from '../../app/src/audio/opus-module';
import { encodeOpusPacket, HEADER_LEN } from '../../app/src/audio/packet';
import { RingWriter } from '../../app/src/audio/ring-ends';
import * as S from '../../app/src/audio/stats';
import { Feeder } from '../../bench/web/feeder';
import { encodeOpusLoops, OPUS_FRAMES, OPUS_LOOP_FRAMES } from '../../bench/web/opus-feed';

const engineWasm = new WebAssembly.Module(
  readFileSync(new URL('../../wasm/pkg/tutti_wasm_bg.wasm', import.meta.url)),
);
const opusWasm = new WebAssembly.Module(
  readFileSync(new URL('../../wasm/opus/pkg/tutti_opus.wasm', import.meta.url)),
);
const RATE = 48000;
const AMP = 0.4;

/** Amplitude of `freq` in `x` (48 kHz), Hann-windowed single-bin DFT. */
function amplitudeAt(x: Float32Array, freq: number): number {
  let re = 0,
    im = 0,
    w = 0;
  for (let i = 0; i < x.length; i++) {
    const h = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / x.length);
    const ph = (2 * Math.PI * freq * i) / RATE;
    re += h * x[i] * Math.cos(ph);
    im -= h * x[i] * Math.sin(ph);
    w += h;
  }
  return (2 * Math.hypot(re, im)) / w;
}

/**
 * A peer sending a mono 440 Hz sine as Opus frames of `frames` samples to slot 0, in real time
 * (a frame is pushed once its last sample would have been captured), `lose(k)` dropping frame k.
 * Returns the engine's left output and its stats.
 */
function run(opts: { frames: number; seconds: number; codec: boolean; lose?: (k: number) => boolean }) {
  const buffers = createBuffers({ inboundBytes: 1 << 16, outboundBytes: 1 << 16 });
  const core = new WasmEngineCore(
    engineWasm,
    buffers,
    { ...DEFAULT_CONFIG, maxPeers: 4 },
    opts.codec ? opusWasm : null,
  );
  core.control({ type: 'add-peer', slot: 0 });
  core.control({ type: 'strip', slot: 0, gain: 1, pan: 0, mute: false, solo: false });
  const sender = new OpusModule(opusWasm);
  const enc = sender.newEncoder(1, 128_000);
  const writer = new RingWriter(buffers.inbound);
  const packet = new Uint8Array(1500);
  const header = {
    timestamp: 0,
    seq: 0,
    frames: opts.frames,
    rateCode: 3,
    bits: 16,
    channelsIn: 1,
    channelsOut: 0,
  };
  const quanta = Math.floor((opts.seconds * RATE) / 128);
  const left = new Float32Array(quanta * 128);
  const outL = new Float32Array(128);
  const outR = new Float32Array(128);
  let k = 0;
  let dropped = 0;
  for (let q = 0; q < quanta; q++) {
    while ((k + 1) * opts.frames <= q * 128) {
      for (let i = 0; i < opts.frames; i++) {
        sender.pcm[i] = AMP * Math.sin((2 * Math.PI * 440 * (k * opts.frames + i)) / RATE);
      }
      const n = sender.encode(enc, opts.frames);
      expect(n).toBeGreaterThan(0);
      packet.set(sender.packet.subarray(0, n), HEADER_LEN);
      const len = encodeOpusPacket({ ...header, seq: k & 0xffff }, 0, n, packet);
      expect(len).toBe(HEADER_LEN + n + 8);
      if (opts.lose?.(k)) dropped++;
      else expect(writer.push(0, 0, packet, 0, len)).toBe(true);
      k++;
    }
    core.process([], outL, outR, q * 128);
    left.set(outL, q * 128);
  }
  core.publishStats();
  const snap = new Float64Array(S.BLOCK_LEN);
  S.readStats(new Float64Array(buffers.stats), snap);
  core.destroy();
  return { left, snap, dropped, sent: k };
}

describe('Opus through the real engine and the real codec module', () => {
  for (const frames of [120, 240]) {
    it(`plays a peer's 440 Hz Opus stream in ${frames}-sample frames at its level`, () => {
      const { left, snap, sent } = run({ frames, seconds: 3, codec: true });
      const steady = left.subarray(left.length - RATE);
      // Centre pan, constant power: each side carries cos(π/4) of the source.
      const db = 20 * Math.log10(amplitudeAt(steady, 440) / (AMP * Math.SQRT1_2));
      const stray = Math.max(amplitudeAt(steady, 880), amplitudeAt(steady, 660));
      console.log(
        `${frames}-sample Opus frames: 440 Hz at ${db.toFixed(2)} dB, stray ${stray.toExponential(1)}`,
      );
      expect(Math.abs(db)).toBeLessThan(0.5);
      expect(stray).toBeLessThan(1e-3);
      expect(snap[S.peerIndex(0, S.P_RECEIVED)]).toBe(sent);
      expect(snap[S.peerIndex(0, S.P_LOST)]).toBe(0);
      expect(snap[S.peerIndex(0, S.P_UNDECODABLE)]).toBe(0);
      expect(snap[S.G_MALFORMED]).toBe(0);
    });
  }

  it('counts lost Opus frames and conceals them with the decoder, keeping the tone', () => {
    const { left, snap, dropped } = run({ frames: 240, seconds: 4, codec: true, lose: (k) => k % 25 === 7 });
    const lost = snap[S.peerIndex(0, S.P_LOST)];
    const concealed = snap[S.peerIndex(0, S.P_CONCEALED)];
    const steady = left.subarray(left.length - 2 * RATE);
    const db = 20 * Math.log10(amplitudeAt(steady, 440) / (AMP * Math.SQRT1_2));
    let worst = 0;
    for (let i = 1; i < steady.length; i++) worst = Math.max(worst, Math.abs(steady[i] - steady[i - 1]));
    console.log(
      `4 % of Opus frames lost: ${lost} lost, ${concealed} concealed; 440 Hz at ${db.toFixed(2)} dB, largest step ${worst.toFixed(3)}`,
    );
    // The frames dropped after the stream began (the first one starts it): all counted.
    expect(lost).toBe(dropped);
    expect(concealed).toBe(lost);
    expect(Math.abs(db)).toBeLessThan(1);
    // A sine of this level steps at most 0.4·cos(π/4)·2π·440/48000 = 0.016 per sample.
    expect(worst).toBeLessThan(0.05);
  });

  it('without the codec module, refuses Opus packets as malformed and stays silent', () => {
    const { left, snap, sent } = run({ frames: 240, seconds: 1, codec: false });
    expect(left.every((x) => x === 0)).toBe(true);
    expect(snap[S.G_MALFORMED]).toBe(sent);
    expect(snap[S.peerIndex(0, S.P_RECEIVED)]).toBe(0);
  });

  it("paces the benchmark's Opus frames by capture time, and the engine decodes them all", () => {
    const peers = 3;
    const packets = encodeOpusLoops(opusWasm, peers, 64_000, 0.25);
    expect(packets.offsets.length).toBe(peers * OPUS_LOOP_FRAMES + 1);
    const buffers = createBuffers({ inboundBytes: 1 << 16, outboundBytes: 1 << 16 });
    const core = new WasmEngineCore(engineWasm, buffers, { ...DEFAULT_CONFIG, maxPeers: peers }, opusWasm);
    for (let k = 0; k < peers; k++) core.control({ type: 'add-peer', slot: k });
    const feeder = new Feeder(buffers.inbound, { peers, loss: 0, maxDelay: 0, opus: packets });
    const outL = new Float32Array(128);
    const outR = new Float32Array(128);
    // Two seconds: 750 quanta, 50 runs of 15 quanta holding 8 frames each.
    const quanta = 750;
    for (let q = 0; q < quanta; q++) {
      feeder.feed(q);
      // Without delay, a frame arrives in the quantum that captures its last sample.
      expect(feeder.delivered).toBe(peers * Math.floor(((q + 1) * 128) / OPUS_FRAMES));
      core.process([], outL, outR, q * 128);
    }
    expect(feeder.sent).toBe((peers * quanta * 8) / 15);
    core.publishStats();
    const snap = new Float64Array(S.BLOCK_LEN);
    S.readStats(new Float64Array(buffers.stats), snap);
    core.destroy();
    expect(snap[S.G_MALFORMED]).toBe(0);
    for (let k = 0; k < peers; k++) {
      expect(snap[S.peerIndex(k, S.P_RECEIVED)]).toBe(feeder.sent / peers);
      expect(snap[S.peerIndex(k, S.P_UNDECODABLE)]).toBe(0);
      expect(snap[S.peerIndex(k, S.P_BLOCK_FRAMES)]).toBe(OPUS_FRAMES);
      // The tone at 0.25 has an RMS of 0.177; decoded at 64 kbit/s it stays within 1 dB.
      const db = 20 * Math.log10(snap[S.peerIndex(k, S.P_RMS_L)] / (0.25 * Math.SQRT1_2));
      expect(Math.abs(db)).toBeLessThan(1);
    }
  });
});
