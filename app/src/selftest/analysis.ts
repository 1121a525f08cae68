// Analysis of the captured engine output: tone levels and spurious content from an averaged Hann
// spectrum, and sample-level checks (non-finite values, overs, largest step between samples).
//
// Units: amplitudes are linear sample values; a sine of amplitude a that sits on a bin reads a.
// A tone's amplitude is measured from the energy of the bins around it (so a small frequency
// offset from drift correction, which moves energy between neighbouring bins, does not bias it):
// for a windowed sine, the one-sided sum of |X[k]|^2 is N x a^2/4 x sum(w^2) (Parseval).

import { Fft, hann } from './fft';

export interface Spectrum {
  /** Mean |X[k]|^2 over the segments, k = 0 .. n/2. */
  power: Float64Array;
  n: number;
  segments: number;
  windowSum: number;
  windowSquares: number;
}

/** Welch estimate: Hann segments of fft.size with 50% overlap, power averaged. */
export function welch(x: ArrayLike<number>, fft: Fft, window: Float64Array = hann(fft.size)): Spectrum {
  const n = fft.size;
  const hop = n / 2;
  if (x.length < n) throw new Error(`${x.length} samples: fewer than one ${n}-point segment`);
  const power = new Float64Array(n / 2 + 1);
  const re = new Float64Array(n);
  const im = new Float64Array(n);
  let segments = 0;
  for (let start = 0; start + n <= x.length; start += hop) {
    for (let i = 0; i < n; i++) {
      re[i] = x[start + i] * window[i];
      im[i] = 0;
    }
    fft.transform(re, im);
    for (let k = 0; k <= n / 2; k++) power[k] += re[k] * re[k] + im[k] * im[k];
    segments++;
  }
  for (let k = 0; k <= n / 2; k++) power[k] /= segments;
  let windowSum = 0;
  let windowSquares = 0;
  for (let i = 0; i < n; i++) {
    windowSum += window[i];
    windowSquares += window[i] * window[i];
  }
  return { power, n, segments, windowSum, windowSquares };
}

/** Amplitude of a sine near `bin`, from the energy of bins bin-halfWidth .. bin+halfWidth. */
export function toneAmplitude(s: Spectrum, bin: number, halfWidth = 4): number {
  let sum = 0;
  for (let k = Math.max(1, bin - halfWidth); k <= Math.min(s.n / 2, bin + halfWidth); k++) sum += s.power[k];
  return 2 * Math.sqrt(sum / (s.n * s.windowSquares));
}

/** Amplitude a sine exactly on bin k would have to give this bin's power. */
export function binAmplitude(s: Spectrum, k: number): number {
  return (2 * Math.sqrt(s.power[k])) / s.windowSum;
}

export interface ToneSpec {
  slot: number;
  bin: number;
  hz: number;
  /** Expected amplitude on this channel (0: the tone must be absent). */
  expected: number;
}

export interface ToneResult extends ToneSpec {
  measured: number;
  /** 20 log10(measured / expected), or null when the tone is expected absent. */
  errorDb: number | null;
}

export interface SpurResult {
  hz: number;
  amplitude: number;
  /** Relative to the reference amplitude, dB. */
  db: number;
}

export interface SampleScan {
  samples: number;
  nonFinite: number;
  /** Samples with |x| > 1. */
  overs: number;
  peak: number;
  /** Largest |x[n] - x[n-1]| over finite neighbours. */
  maxStep: number;
  /** Index of that step. */
  maxStepAt: number;
}

export interface ChannelAnalysis {
  tones: ToneResult[];
  /** Largest bin outside the guard bands of the tones expected present (from `lowestBin` up). */
  spur: SpurResult;
  segments: number;
}

export interface AnalysisOptions {
  /** Amplitude the spur level is relative to. */
  reference: number;
  /** Bins on either side of a present tone excluded from the spur search. */
  guardBins: number;
  /** Lowest bin searched for spurs (the window's DC lobe lies below). */
  lowestBin: number;
  /** Half width, in bins, of the tone energy sum. */
  toneHalfWidth: number;
}

export function analyseChannel(
  x: ArrayLike<number>,
  tones: ToneSpec[],
  fft: Fft,
  opts: AnalysisOptions,
  window?: Float64Array,
): ChannelAnalysis {
  const s = welch(x, fft, window);
  const results = tones.map((t): ToneResult => {
    const measured = toneAmplitude(s, t.bin, opts.toneHalfWidth);
    return {
      ...t,
      measured,
      errorDb: t.expected > 0 ? 20 * Math.log10(measured / t.expected) : null,
    };
  });
  const present = tones.filter((t) => t.expected > 0).map((t) => t.bin);
  let worst = 0;
  let worstBin = opts.lowestBin;
  for (let k = opts.lowestBin; k <= s.n / 2; k++) {
    if (present.some((b) => Math.abs(k - b) <= opts.guardBins)) continue;
    const a = binAmplitude(s, k);
    if (a > worst) {
      worst = a;
      worstBin = k;
    }
  }
  const sampleRate = 48000;
  return {
    tones: results,
    spur: {
      hz: (worstBin * sampleRate) / s.n,
      amplitude: worst,
      db: 20 * Math.log10(Math.max(worst, 1e-12) / opts.reference),
    },
    segments: s.segments,
  };
}

/** Scans samples for non-finite values, overs, the peak and the largest step. */
export function scanSamples(x: ArrayLike<number>): SampleScan {
  let nonFinite = 0;
  let overs = 0;
  let peak = 0;
  let maxStep = 0;
  let maxStepAt = -1;
  let prev = NaN;
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    if (!Number.isFinite(v)) {
      nonFinite++;
      prev = NaN;
      continue;
    }
    const a = Math.abs(v);
    if (a > 1) overs++;
    if (a > peak) peak = a;
    if (Number.isFinite(prev)) {
      const d = Math.abs(v - prev);
      if (d > maxStep) {
        maxStep = d;
        maxStepAt = i;
      }
    }
    prev = v;
  }
  return { samples: x.length, nonFinite, overs, peak, maxStep, maxStepAt };
}

/**
 * Largest possible |x[n] - x[n-1]| of a sum of sines sampled at `sampleRate`: each sine of
 * amplitude a and frequency f contributes at most 2 a sin(pi f / sampleRate).
 */
export function stepBound(tones: { hz: number; expected: number }[], sampleRate = 48000): number {
  let sum = 0;
  for (const t of tones) sum += 2 * t.expected * Math.sin((Math.PI * t.hz) / sampleRate);
  return sum;
}
