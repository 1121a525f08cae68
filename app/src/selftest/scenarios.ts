// The two self-test scenarios, their engine configuration, and what their output must be.
//
// Five synthetic peers, each a sine on its own FFT bin (300.29, 499.51, 700.20, 1100.10 and
// 1299.32 Hz: no tone is within 8 bins of another's 2nd-4th harmonic), amplitude 0.15 in PCM16
// stereo 128-frame packets, each with its own gain and pan. With the engine's constant-power pan
// law (left x cos theta, right x sin theta, theta = (pan + 1) pi / 4) a tone must come out at
// 0.15 x gain x cos theta on the left and 0.15 x gain x sin theta on the right. The largest bus
// peak (every tone in phase) is 0.38 left and 0.43 right, far below the limiter's threshold
// (-1 dBFS = 0.891), so the limiter is transparent and the levels are exact.

import type { EngineConfig } from '../audio/engine-core';
import { Prng } from './prng';
import { FFT_LEN, toneHz, type PeerSpec, type ScenarioSpec } from './schedule';

export const AMPLITUDE = 0.15;

/** Slot, FFT bin, gain, pan of the five peers (slots 3, 4 and 6 stay free on purpose). */
const PEERS: [number, number, number, number][] = [
  [0, 205, 1.0, 0],
  [1, 341, 0.8, -0.5],
  [2, 478, 1.0, 0.5],
  [5, 751, 0.7, -1],
  [7, 887, 0.9, 1],
];

/** Tags the bad-input scenario uses for records that name no peer. */
export const UNKNOWN_TAGS = [3, 6, 8, 255, 300, 0xffff];

export const ENGINE_CONFIG: EngineConfig = {
  maxPeers: 8,
  blockFrames: 128,
  bits: 16,
  captureChannels: 2,
  // This test checks counting and mixing, not how low the buffer can go: the floor (100 ms) is
  // far above the injected jitter (at most 10 ms) so that a sender or audio thread stalled for
  // tens of milliseconds by a busy machine still delivers every regular packet in time. Late
  // packets are sent 300 ms after they were due, far beyond the ceiling (125 ms).
  buffer: { mode: 'adaptive', floorFrames: 4800, ceilingFrames: 6000 },
};

/**
 * A regular packet written more than this after its due time (scheduled jitter included) may
 * miss its slot: the buffer floor (100 ms) minus a device callback's burst of quanta rendered
 * back to back (~10 ms) and a quantum. The injected jitter stays at or under 10 ms, so only a
 * sender stalled for over 75 ms (a very busy machine) gets here; such a run is repeated.
 */
export const IN_TIME_LIMIT_MS = 85;
/**
 * How far the audio clock may run from the sender's (performance.now) before the run counts as
 * disturbed: sound-card crystals differ by a few hundred ppm (a healthy headless run here reads
 * about -4 ppm), so thousands of ppm mean the audio thread itself was starved of CPU and skipped
 * ahead or fell behind, which no jitter buffer can hide from an exact spectral check.
 */
export const RENDER_CLOCK_LIMIT_PPM = 2000;

export interface Tolerances {
  /** Largest |measured - expected| tone level, dB. */
  levelDb: number;
  /** Largest spectral line outside the tones, dB relative to AMPLITUDE. */
  spurDb: number;
  /** Largest sample step relative to the analytic bound of the sum of sines (null: reported only). */
  stepFactor: number | null;
}

export interface Scenario {
  spec: ScenarioSpec;
  tolerances: Tolerances;
  /** Seconds analysed, ending `tailMarginS` before the last regular packet was sent. */
  analysisS: number;
  tailMarginS: number;
  /** Wait after the last send before the stats are read, ms. */
  drainMs: number;
  description: string;
}

function peers(seed: number): PeerSpec[] {
  // Sequence numbers and phases differ per peer; slot 1 wraps past 65535 mid-run.
  const rng = new Prng(seed);
  return PEERS.map(([slot, bin, gain, pan], i) => ({
    slot,
    bin,
    amplitude: AMPLITUDE,
    gain,
    pan,
    firstSeq: slot === 1 ? 65536 - 900 : rng.nextU32() & 0xffff,
    phase: rng.nextU32() % FFT_LEN,
    offsetMs: i * 0.5,
  }));
}

export const NETWORK: Scenario = {
  description:
    'Five peers over an impaired network: 0-10 ms jitter (reordering), 2% loss, 2% duplicates, ' +
    'three packets per peer 300 ms late.',
  spec: {
    name: 'network',
    seed: 20261121,
    durationMs: 7000,
    peers: peers(11),
    net: { jitterMs: 10, lossRate: 0.02, dupRate: 0.02, latePerPeer: 3, lateDelayMs: 300 },
    headGuard: 8,
    tailGuard: 150,
  },
  // Concealment replaces ~2.5% of each stream (loss + late). If a concealed block held silence
  // the tone's level would drop by 20 log10(0.975) = -0.22 dB; a repetition or extension with a
  // phase error spreads some energy to neighbouring frequencies. +-1 dB leaves room for that and
  // still catches a wrong pan law (a linear law puts the centre 3 dB lower), a gain not applied
  // or a stream played twice.
  // Spurs: a block replaced by silence, or repeated without matching its phase, leaves an error
  // of up to the tone's own amplitude over 128 frames, whose spectrum spreads ~375 Hz around the
  // tone: for 2.5% of the blocks that is about -40 dB re one tone. -50 dB asks for concealment
  // that continues a steady tone smoothly (this engine measures about -70 dB).
  // Steps: a cross-fade between two phases of a tone over L frames adds up to 2a/L to the step
  // of the sum of sines (40% of the bound for a = 0.14, L = 16); 1.5x the bound allows that and
  // still fails on a click (a jump to or from silence is 2x to 9x the bound).
  tolerances: { levelDb: 1.0, spurDb: -50, stepFactor: 1.5 },
  analysisS: 4,
  tailMarginS: 0.1,
  drainMs: 500,
};

export const BAD_INPUT: Scenario = {
  description:
    'Five clean peers (0-2 ms jitter, nothing lost) while truncated, oversized, garbage, ' +
    'wrong-format and unknown-peer records are injected into the same ring every 10 ms.',
  spec: {
    name: 'bad-input',
    seed: 424242,
    durationMs: 7000,
    peers: peers(23),
    net: { jitterMs: 2, lossRate: 0, dupRate: 0, latePerPeer: 0, lateDelayMs: 0 },
    bad: { everyMs: 10, startMs: 300, unknownTags: UNKNOWN_TAGS },
    headGuard: 8,
    tailGuard: 150,
  },
  // Nothing is lost, so the tones must be exact: PCM16 quantization (-98 dB) and drift
  // correction's interpolation (well under 0.01 dB at 1.3 kHz) are the only errors.
  tolerances: { levelDb: 0.1, spurDb: -70, stepFactor: 1.1 },
  analysisS: 4,
  tailMarginS: 0.1,
  drainMs: 500,
};

export const SCENARIOS: Scenario[] = [NETWORK, BAD_INPUT];

/** Expected amplitude of each peer's tone on the left and right outputs. */
export function expectedLevels(p: PeerSpec): { hz: number; left: number; right: number } {
  const theta = ((p.pan + 1) * Math.PI) / 4;
  // cos(pi/2) is 6e-17 in floating point: a hard pan means exactly nothing on the other side.
  const side = (g: number) => (g < 1e-9 ? 0 : g);
  return {
    hz: toneHz(p.bin),
    left: p.amplitude * p.gain * side(Math.cos(theta)),
    right: p.amplitude * p.gain * side(Math.sin(theta)),
  };
}
