// The self-test's analysis against known answers: the FFT against a direct DFT, tone levels of
// analytic sines, a planted spur, and the sample scan on planted defects.

import { describe, expect, it } from 'vitest';
import { Fft, hann } from '../../app/src/selftest/fft';
import {
  analyseChannel,
  scanSamples,
  stepBound,
  toneAmplitude,
  welch,
} from '../../app/src/selftest/analysis';
import { Prng } from '../../app/src/selftest/prng';

const FS = 48000;
const db = (x: number) => 20 * Math.log10(x);

function sines(len: number, parts: { bin: number; n: number; amp: number; phase: number }[]): Float32Array {
  const x = new Float32Array(len);
  for (let i = 0; i < len; i++) {
    let v = 0;
    for (const p of parts) v += p.amp * Math.sin((2 * Math.PI * p.bin * i) / p.n + p.phase);
    x[i] = v;
  }
  return x;
}

describe('Fft', () => {
  it('matches a direct DFT on seeded random input (tolerance 1e-9 absolute)', () => {
    const n = 64;
    const rng = new Prng(7);
    const xr = Float64Array.from({ length: n }, () => rng.uniform(-1, 1));
    const xi = Float64Array.from({ length: n }, () => rng.uniform(-1, 1));
    const re = xr.slice();
    const im = xi.slice();
    new Fft(n).transform(re, im);
    for (let k = 0; k < n; k++) {
      let sr = 0;
      let si = 0;
      for (let t = 0; t < n; t++) {
        const a = (-2 * Math.PI * k * t) / n;
        sr += xr[t] * Math.cos(a) - xi[t] * Math.sin(a);
        si += xr[t] * Math.sin(a) + xi[t] * Math.cos(a);
      }
      expect(Math.abs(re[k] - sr)).toBeLessThan(1e-9);
      expect(Math.abs(im[k] - si)).toBeLessThan(1e-9);
    }
  });

  it('rejects sizes that are not powers of two', () => {
    expect(() => new Fft(48)).toThrow();
  });
});

describe('tone levels', () => {
  const n = 4096;
  const fft = new Fft(n);

  it('reads the amplitude of on-bin sines within 0.01 dB', () => {
    const parts = [
      { bin: 26, n, amp: 0.1, phase: 0.3 },
      { bin: 43, n, amp: 0.05, phase: 1.1 },
      { bin: 60, n, amp: 0.2, phase: 2.0 },
    ];
    const s = welch(sines(n * 4, parts), fft);
    expect(s.segments).toBe(7);
    for (const p of parts) expect(Math.abs(db(toneAmplitude(s, p.bin) / p.amp))).toBeLessThan(0.01);
  });

  it('reads a sine 0.4 bin off its bin within 0.05 dB (energy over +-4 bins)', () => {
    const x = sines(n * 4, [{ bin: 100.4, n, amp: 0.1, phase: 0 }]);
    expect(Math.abs(db(toneAmplitude(welch(x, fft), 100) / 0.1))).toBeLessThan(0.05);
  });

  it('finds a planted spur at -35 dB within 0.1 dB and reports tones expected absent', () => {
    const ref = 0.1;
    const x = sines(n * 4, [
      { bin: 200, n, amp: ref, phase: 0 },
      { bin: 310, n, amp: ref * 10 ** (-35 / 20), phase: 0.5 },
    ]);
    const r = analyseChannel(
      x,
      [
        { slot: 0, bin: 200, hz: (200 * FS) / n, expected: ref },
        { slot: 1, bin: 250, hz: (250 * FS) / n, expected: 0 },
      ],
      fft,
      { reference: ref, guardBins: 8, lowestBin: 3, toneHalfWidth: 4 },
    );
    expect(r.spur.hz).toBeCloseTo((310 * FS) / n, 6);
    expect(Math.abs(r.spur.db + 35)).toBeLessThan(0.1);
    expect(Math.abs(r.tones[0].errorDb!)).toBeLessThan(0.01);
    expect(r.tones[1].errorDb).toBeNull();
    expect(r.tones[1].measured).toBeLessThan(ref * 1e-3);
  });

  it('puts the noise floor of clean float sines below -120 dB', () => {
    const x = Float64Array.from(sines(n * 2, [{ bin: 64, n, amp: 0.3, phase: 0 }]));
    const r = analyseChannel(x, [{ slot: 0, bin: 64, hz: 750, expected: 0.3 }], fft, {
      reference: 0.3,
      guardBins: 8,
      lowestBin: 3,
      toneHalfWidth: 4,
    });
    expect(r.spur.db).toBeLessThan(-120);
  });
});

describe('sample scan', () => {
  it('counts non-finite values and overs, and finds the largest step', () => {
    const x = new Float32Array(100).fill(0.25);
    x[10] = NaN;
    x[20] = Infinity;
    x[30] = 1.5;
    x[40] = -0.75;
    const s = scanSamples(x);
    expect(s.nonFinite).toBe(2);
    expect(s.overs).toBe(1);
    expect(s.peak).toBe(1.5);
    expect(s.maxStep).toBe(1.25);
    expect([30, 31]).toContain(s.maxStepAt);
  });

  it('bounds the step of a sum of sines, and the bound is reached when the slopes align', () => {
    const tones = [
      { hz: 300, expected: 0.1 },
      { hz: 700, expected: 0.05 },
      { hz: 1300, expected: 0.08 },
    ];
    const bound = stepBound(tones);
    // All three cross zero upwards half a sample after t = 0: their steps there add up exactly.
    const x = new Float64Array(4800);
    for (let i = 0; i < x.length; i++) {
      for (const t of tones) x[i] += t.expected * Math.sin((2 * Math.PI * t.hz * (i - 1000.5)) / FS);
    }
    const s = scanSamples(x);
    expect(s.maxStep).toBeLessThanOrEqual(bound * (1 + 1e-12));
    expect(s.maxStep).toBeGreaterThan(bound * 0.9999);
    // The sum repeats every 480 samples (all three are multiples of 100 Hz).
    expect((s.maxStepAt - 1001) % 480).toBe(0);
  });
});

describe('hann', () => {
  it('sums to n/2 (periodic window)', () => {
    const w = hann(1024);
    expect(Math.abs(w.reduce((a, b) => a + b, 0) - 512)).toBeLessThan(1e-9);
  });
});
