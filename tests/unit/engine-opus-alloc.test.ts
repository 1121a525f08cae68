// The real engine playing an Opus stream makes no heap call in the codec module once its peers
// are set up, and its own memory does not grow: the Rust core's WASM linked, as the worklet
// links it, to libopus built with emscripten (wasm/opus), fed a peer's Opus packets through a
// real inbound ring for seconds, with frames lost (concealed by the decoder), garbage frames
// and a stream that pauses and restarts with new numbers (which resets the decoder). The codec
// module counts its own heap calls (tutti_opus_allocations); the count is watched from the
// moment the peers were added (each made its decoder then). Run `npm run build` before running
// this file alone.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createBuffers, DEFAULT_CONFIG, WasmEngineCore } from '../../app/src/audio/engine-core';
import { OpusModule } from '../../app/src/audio/opus-module';
import { encodeOpusPacket, HEADER_LEN } from '../../app/src/audio/packet';
import { RingWriter } from '../../app/src/audio/ring-ends';
import * as S from '../../app/src/audio/stats';

const engineWasm = new WebAssembly.Module(
  readFileSync(new URL('../../wasm/pkg/tutti_wasm_bg.wasm', import.meta.url)),
);
const opusWasm = new WebAssembly.Module(
  readFileSync(new URL('../../wasm/opus/pkg/tutti_opus.wasm', import.meta.url)),
);
const RATE = 48000;

describe('the engine playing Opus', () => {
  it('makes no heap call in the codec module and does not grow its memory once peers are added', () => {
    const buffers = createBuffers({ inboundBytes: 1 << 16, outboundBytes: 1 << 16 });
    const core = new WasmEngineCore(engineWasm, buffers, { ...DEFAULT_CONFIG, maxPeers: 4 }, opusWasm);
    const codec = core.opus;
    if (!codec) throw new Error('the engine has no codec module');
    const made = codec.allocations();
    core.control({ type: 'add-peer', slot: 0 });
    core.control({ type: 'add-peer', slot: 1 });
    core.control({ type: 'strip', slot: 0, gain: 1, pan: 0, mute: false, solo: false });
    core.control({ type: 'strip', slot: 1, gain: 1, pan: 0, mute: false, solo: false });
    const perPeer = (codec.allocations() - made) / 2;

    // Two senders: slot 0 in 120-sample mono frames, slot 1 in 240-sample stereo frames.
    const sender = new OpusModule(opusWasm);
    const streams = [
      { slot: 0, frames: 120, channels: 1, enc: sender.newEncoder(1, 128_000), k: 0, sent: 0, dropped: 0 },
      { slot: 1, frames: 240, channels: 2, enc: sender.newEncoder(2, 128_000), k: 0, sent: 0, dropped: 0 },
    ];
    const writer = new RingWriter(buffers.inbound);
    const packet = new Uint8Array(1500);
    const outL = new Float32Array(128);
    const outR = new Float32Array(128);
    const seconds = 6;
    const quanta = Math.floor((seconds * RATE) / 128);
    // From here on, the whole stream: its start, steady state, losses, garbage and restart.
    const before = codec.allocations();
    const bytes = core.exports.memory.buffer.byteLength;
    for (let q = 0; q < quanta; q++) {
      for (const s of streams) {
        const perSecond = RATE / s.frames;
        while ((s.k + 1) * s.frames <= q * 128) {
          const k = s.k++;
          for (let i = 0; i < s.frames; i++) {
            const v = 0.4 * Math.sin((2 * Math.PI * 440 * (k * s.frames + i)) / RATE);
            for (let c = 0; c < s.channels; c++) sender.pcm[i * s.channels + c] = v;
          }
          const n = sender.encode(s.enc, s.frames);
          expect(n).toBeGreaterThan(0);
          packet.set(sender.packet.subarray(0, n), HEADER_LEN);
          const second = k / perSecond;
          if (k === 2 * perSecond) packet[HEADER_LEN] = 0; // another length: refused
          if (k === 2 * perSecond + 10) packet.fill(0xa5, HEADER_LEN + 1, HEADER_LEN + n); // noise
          // Half a second of silence at 3 s, then numbers 10 000 further on: a restarted stream.
          const seq = (k + (second >= 3.5 ? 10_000 : 0)) & 0xffff;
          const header = {
            timestamp: 0,
            seq,
            frames: s.frames,
            rateCode: 3,
            bits: 16,
            channelsIn: s.channels,
            channelsOut: 0,
          };
          const len = encodeOpusPacket(header, 0, n, packet);
          const lost = (second >= 1 && k % 25 === 7) || (second >= 3 && second < 3.5);
          if (lost) s.dropped++;
          else {
            expect(writer.push(s.slot, 0, packet, 0, len)).toBe(true);
            s.sent++;
          }
        }
      }
      core.process([], outL, outR, q * 128);
    }
    const during = codec.allocations() - before;
    const grown = core.exports.memory.buffer.byteLength - bytes;
    core.publishStats();
    const snap = new Float64Array(S.BLOCK_LEN);
    S.readStats(new Float64Array(buffers.stats), snap);
    const counters = streams.map((s) => ({
      received: snap[S.peerIndex(s.slot, S.P_RECEIVED)],
      lost: snap[S.peerIndex(s.slot, S.P_LOST)],
      concealed: snap[S.peerIndex(s.slot, S.P_CONCEALED)],
      resets: snap[S.peerIndex(s.slot, S.P_RESETS)],
    }));
    console.log(
      `engine playing Opus for ${seconds} s: ${during} heap calls in the codec module after the peers ` +
        `were added (${perPeer} per peer added), engine memory grew by ${grown} bytes; ${JSON.stringify(counters)}`,
    );
    expect(perPeer).toBe(1);
    expect(during).toBe(0);
    expect(grown).toBe(0);
    for (const [i, s] of streams.entries()) {
      expect(counters[i].received).toBe(s.sent);
      expect(counters[i].lost).toBeGreaterThan(0);
      expect(counters[i].concealed).toBeGreaterThanOrEqual(counters[i].lost);
      expect(counters[i].resets).toBe(1);
    }
    // Removing a peer frees its decoder: the counter sees that too.
    const removed = codec.allocations();
    core.control({ type: 'remove-peer', slot: 0 });
    expect(codec.allocations() - removed).toBe(1);
    core.destroy();
  });
});
