// The worklet's codec module: libopus built with emscripten (npm test builds it first; run
// `npm run build` before running this file alone). Known answers, as the hub's native tests
// (server/src/hub/opus.rs) state them for the same libopus source: a two-tone signal comes back
// through encode and decode at each bit rate and frame length with the SNR stated, 120 samples
// late (the low-delay mode's look-ahead); a lost frame is concealed; bad arguments and garbage
// packets are errors, never a trap.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { OpusError, OpusModule } from '../../app/src/audio/opus-module';

const WASM = new URL('../../wasm/opus/pkg/tutti_opus.wasm', import.meta.url);
const RATE = 48000;
const compiled = new WebAssembly.Module(readFileSync(WASM));

/** 440 Hz at 0.25 plus 1234.5 Hz at 0.1 (the hub's test signal), `n` samples per channel. */
function signal(n: number): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const t = i / RATE;
    x[i] = 0.25 * Math.sin(2 * Math.PI * 440 * t) + 0.1 * Math.sin(2 * Math.PI * 1234.5 * t);
  }
  return x;
}

/** SNR (dB) of `y` against `x` delayed by `delay`, over the second half. */
function snrDb(x: Float32Array, y: Float32Array, delay: number): number {
  let s = 0,
    e = 0;
  for (let i = x.length / 2; i < x.length - delay; i++) {
    s += x[i] ** 2;
    e += (y[i + delay] - x[i]) ** 2;
  }
  return 10 * Math.log10(s / e);
}

/** Mono round trip of `x`, frame by frame: the output and the bytes sent. */
function roundTrip(m: OpusModule, x: Float32Array, frames: number, bitrate: number) {
  const enc = m.newEncoder(1, bitrate);
  const dec = m.newDecoder(1);
  const y = new Float32Array(x.length);
  let bytes = 0;
  for (let at = 0; at + frames <= x.length; at += frames) {
    m.pcm.set(x.subarray(at, at + frames));
    const n = m.encode(enc, frames);
    expect(n).toBeGreaterThan(0);
    bytes += n;
    expect(m.decode(dec, n, frames)).toBe(frames);
    y.set(m.pcm.subarray(0, frames), at);
  }
  m.free(enc);
  m.free(dec);
  return { y, bytes };
}

describe('the codec module (libopus, emscripten)', () => {
  const m = new OpusModule(compiled);

  it('has no imports and a fixed memory', () => {
    expect(WebAssembly.Module.imports(compiled)).toEqual([]);
    expect(m.pcm.length).toBe(960 * 2);
    expect(m.packet.length).toBeGreaterThanOrEqual(1275);
  });

  it('brings a two-tone signal back at each bit rate and frame length, 120 samples late', () => {
    const x = signal(RATE);
    const bytesBefore = m.exports.memory.buffer.byteLength;
    const lines: string[] = [];
    for (const frames of [120, 240]) {
      for (const [bitrate, minSnr] of [
        [256_000, 30],
        [128_000, 25],
        [64_000, 12],
      ]) {
        const { y, bytes } = roundTrip(m, x, frames, bitrate);
        const snr = snrDb(x, y, 120);
        const kbps = (bytes * 8) / 1000;
        lines.push(
          `${frames} samples, ${bitrate / 1000} kbit/s: ${kbps.toFixed(0)} kbit/s sent, SNR ${snr.toFixed(1)} dB`,
        );
        expect(snr, lines.at(-1)).toBeGreaterThanOrEqual(minSnr);
        expect(Math.abs(kbps - bitrate / 1000), lines.at(-1)).toBeLessThan((0.15 * bitrate) / 1000);
        // The delay is the look-ahead: no other alignment fits better.
        let best = 0;
        for (let d = 0; d < 400; d++) if (snrDb(x, y, d) > snrDb(x, y, best)) best = d;
        expect(best, lines.at(-1)).toBe(120);
      }
    }
    console.log(lines.join('\n'));
    const enc = m.newEncoder(2, 128_000);
    expect(m.lookahead(enc)).toBe(120);
    m.free(enc);
    expect(m.exports.memory.buffer.byteLength).toBe(bytesBefore);
  });

  it('conceals a lost frame from the decoder state', () => {
    const x = signal(RATE / 2);
    const frames = 240;
    const enc = m.newEncoder(1, 128_000);
    const dec = m.newDecoder(1);
    const y = new Float32Array(x.length);
    const lost = Math.floor(x.length / frames / 2) + 1;
    for (let k = 0; k * frames + frames <= x.length; k++) {
      m.pcm.set(x.subarray(k * frames, k * frames + frames));
      const n = m.encode(enc, frames);
      expect(m.decode(dec, k === lost ? 0 : n, frames)).toBe(frames);
      y.set(m.pcm.subarray(0, frames), k * frames);
    }
    // The concealed frame against what it replaced (delayed by the look-ahead).
    let s = 0,
      e = 0;
    for (let i = lost * frames; i < (lost + 1) * frames; i++) {
      s += x[i - 120] ** 2;
      e += (y[i] - x[i - 120]) ** 2;
    }
    const snr = 10 * Math.log10(s / e);
    console.log(`a lost 5 ms frame concealed at ${snr.toFixed(1)} dB SNR`);
    expect(snr).toBeGreaterThan(10);
    m.free(enc);
    m.free(dec);
  });

  it('turns bad arguments and garbage packets into errors', () => {
    expect(() => m.newEncoder(3, 128_000)).toThrow(OpusError);
    expect(() => m.newDecoder(0)).toThrow(/invalid argument/);
    expect(() => m.newEncoder(1, -5)).toThrow(OpusError);
    const enc = m.newEncoder(1, 128_000);
    const dec = m.newDecoder(2);
    expect(m.encode(enc, 128)).toBe(-1); // not an Opus frame length
    expect(m.decode(dec, 10, 100)).toBe(-1);
    expect(m.decode(dec, m.packet.length + 1, 240)).toBe(-1);
    // A real packet of another length than asked for is refused, not decoded short.
    m.pcm.fill(0.1);
    const n120 = m.encode(enc, 120);
    expect(m.decode(dec, n120, 240)).toBe(-4);
    // Garbage: every length, every fill. Each is a frame of 240 or an error code.
    let errors = 0;
    for (let len = 1; len <= 300; len += 7) {
      for (let i = 0; i < len; i++) m.packet[i] = (i * 97 + len * 31) & 0xff;
      const r = m.decode(dec, len, 240);
      if (r < 0) errors++;
      else expect(r).toBe(240);
      for (const v of m.pcm) expect(Number.isFinite(v)).toBe(true);
    }
    console.log(`garbage packets: ${errors} of 43 refused, the rest decoded to finite samples`);
    m.reset(dec);
    m.free(enc);
    m.free(dec);
  });

  it('allocates only when a coder is made: thousands of frames, losses and garbage make no heap call', () => {
    const encoders = [m.newEncoder(1, 128_000), m.newEncoder(2, 256_000)];
    const decoders = [m.newDecoder(1), m.newDecoder(2)];
    const x = signal(RATE);
    const before = m.allocations();
    const bytes = m.exports.memory.buffer.byteLength;
    let errors = 0;
    for (let k = 0; k < 4000; k++) {
      const frames = k % 2 === 0 ? 120 : 240;
      const c = k % 4 < 2 ? 0 : 1;
      for (let i = 0; i < frames * (c + 1); i++) m.pcm[i] = x[(k * 240 + i) % x.length];
      const n = m.encode(encoders[c], frames);
      expect(n).toBeGreaterThan(0);
      const dec = decoders[c];
      if (k % 25 === 7) {
        expect(m.decode(dec, 0, frames)).toBe(frames); // lost: concealed
      } else if (k % 100 === 50) {
        for (let i = 1; i < n; i++) m.packet[i] = (i * 97 + k) & 0xff; // garbage after the TOC
        if (m.decode(dec, n, frames) < 0) errors++;
        m.packet[0] = (m.packet[0] & 0xfc) | 3; // one frame, padding past the end
        m.packet[1] = 0x41;
        m.packet[2] = 0xfe;
        expect(m.decode(dec, n, frames)).toBe(-4);
        expect(m.decode(dec, n, frames === 120 ? 240 : 120)).toBe(-4); // another length
      } else {
        expect(m.decode(dec, n, frames)).toBe(frames);
      }
      if (k % 1000 === 999) m.reset(dec);
    }
    const during = m.allocations() - before;
    const made = m.allocations();
    const another = m.newDecoder(2);
    const madeOne = m.allocations() - made;
    m.free(another);
    console.log(
      `codec module: ${during} heap calls over 4000 frames encoded and decoded (160 concealed, ` +
        `${errors} of 40 noise frames refused, 80 bad packets refused, 4 resets); making a decoder: ${madeOne}, ` +
        `freeing it: ${m.allocations() - made - madeOne}`,
    );
    expect(during).toBe(0);
    expect(madeOne).toBe(1);
    expect(m.allocations() - made).toBe(2);
    expect(m.exports.memory.buffer.byteLength).toBe(bytes);
    for (const h of [...encoders, ...decoders]) m.free(h);
  });
});
