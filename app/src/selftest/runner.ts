// Runs one self-test scenario through the real engine: a realtime AudioContext, the product
// engine worklet with the WASM core, a Worker playing the injected network into the inbound ring,
// and a tap worklet capturing the engine's output. Then compares the engine's stats with the
// schedule's ledger and analyses the captured audio into a ScenarioResult, which report.ts
// judges (its types and judge are re-exported here).

import { createBuffers } from '../audio/engine-core';
import { createEngine } from '../audio/host';
import * as S from '../audio/stats';
import { readGlobals, readPeer } from '../audio/stats-reader';
import { analyseChannel, scanSamples, stepBound, type ToneSpec } from './analysis';
import { Fft } from './fft';
import {
  GLOBAL_FIELDS,
  judge,
  PEER_FIELDS,
  type ChannelResult,
  type GlobalStats,
  type PeerStats,
  type ScenarioResult,
} from './report';
import {
  AMPLITUDE,
  ENGINE_CONFIG,
  expectedLevels,
  IN_TIME_LIMIT_MS,
  RENDER_CLOCK_LIMIT_PPM,
  type Scenario,
} from './scenarios';
import { BLOCK_MS, buildSchedule, EventKind, FFT_LEN, SAMPLE_RATE } from './schedule';
import type { SendReport } from './sender-worker';
import { createTapBuffer, TAP_ARMED, TAP_FULL, TAP_SILENT, TAP_WRITTEN, tapViews } from '../audio/tap';
import tapUrl from '../audio/tap-worklet.ts?worker&url';

export {
  judge,
  type ChannelResult,
  type Check,
  type GlobalStats,
  type PeerStats,
  type ScenarioResult,
} from './report';

const SERIES_MS = 100;
/**
 * How often the audio clock is read against the wall clock during a run. A reading is only as
 * exact as the device's callback period (Firefox on a sound server reads its clock in steps of
 * 10 ms and more): two readings 9 s apart could differ by 2,000 ppm from that alone, so the
 * clock's rate is the slope through all of them (about 450, an error near 100 ppm).
 */
const STAMP_MS = 20;
/**
 * Bins (23 Hz) on either side of a tone left out of the spur search. Drift correction moves a
 * tone by up to 1000 ppm (1.3 Hz, 0.9 bin at 1.3 kHz), and off its bin a Hann window leaks:
 * about -65 dB re the tone 9 bins away, under -80 dB beyond 16.
 */
const GUARD_BINS = 16;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** How long a consistent read of the stats block may take (see readBlock). */
const READ_BLOCK_MS = 1000;

/**
 * A consistent copy of the stats block. The engine writes it under a sequence word on the audio
 * thread; a machine short of CPU can preempt that thread in the middle of a write, and then no
 * number of immediate retries sees the write end: between bursts of attempts this yields for a
 * millisecond, for up to READ_BLOCK_MS.
 */
async function readBlock(shared: Float64Array): Promise<Float64Array> {
  const into = new Float64Array(S.BLOCK_LEN);
  const until = performance.now() + READ_BLOCK_MS;
  for (;;) {
    for (let i = 0; i < 20; i++) if (S.readStats(shared, into)) return into;
    if (performance.now() > until) {
      throw new Error(`the stats block stayed busy (odd sequence word) for ${READ_BLOCK_MS} ms`);
    }
    await sleep(1);
  }
}

/** The fields `keys` of `o`, in that order. */
function pick<T, K extends keyof T>(o: T, keys: readonly K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const k of keys) out[k] = o[k];
  return out;
}

function globalStats(b: Float64Array): GlobalStats {
  return pick(readGlobals(b), GLOBAL_FIELDS);
}

function peerStats(b: Float64Array, slot: number): PeerStats {
  return { slot, ...pick(readPeer(b, slot), PEER_FIELDS) };
}

async function waitFor(what: string, ms: number, cond: () => boolean): Promise<void> {
  const until = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** The captured output of a run, for inspection (see `keep` in runScenario). */
export interface Capture {
  left: Float32Array;
  right: Float32Array;
  /** The analysed window, in frames of the capture. */
  start: number;
  end: number;
  sampleRate: number;
}

/**
 * Runs one scenario. `keep`, when given, receives a copy of the captured output.
 */
export async function runScenario(
  sc: Scenario,
  log: (msg: string) => void = () => {},
  keep?: (capture: Capture) => void,
): Promise<ScenarioResult> {
  const started = performance.now();
  const spec = sc.spec;
  const schedule = buildSchedule(spec);
  const engineErrors: string[] = [];

  const ctx = new AudioContext({ sampleRate: SAMPLE_RATE, latencyHint: 'interactive' });
  const worker = new Worker(new URL('./sender-worker.ts', import.meta.url), { type: 'module' });
  try {
    if (ctx.state !== 'running') {
      await Promise.race([
        ctx.resume(),
        sleep(3000).then(() => {
          throw new Error('the AudioContext did not start (the browser wants a click on the page first)');
        }),
      ]);
    }
    if (ctx.sampleRate !== SAMPLE_RATE)
      throw new Error(`the AudioContext runs at ${ctx.sampleRate} Hz, not 48000`);

    log('loading the engine');
    const buffers = createBuffers();
    const engine = await createEngine(ctx, ENGINE_CONFIG, buffers);
    engine.node.port.onmessage = (ev: MessageEvent<{ type: string; message?: string }>) => {
      if (ev.data?.type === 'error') engineErrors.push(String(ev.data.message));
    };
    engine.node.onprocessorerror = () => engineErrors.push('the engine processor threw (processorerror)');

    const captureFrames = Math.ceil(((spec.durationMs + sc.drainMs + 3000) / 1000) * SAMPLE_RATE);
    const tapShared = createTapBuffer(captureFrames);
    const tap = tapViews(tapShared);
    await ctx.audioWorklet.addModule(tapUrl);
    const tapNode = new AudioWorkletNode(ctx, 'tutti-tap', {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      channelCount: 2,
      channelCountMode: 'explicit',
      channelInterpretation: 'discrete',
      processorOptions: { shared: tapShared },
    });
    engine.node.connect(tapNode);
    engine.node.connect(ctx.destination);
    tapNode.connect(ctx.destination);

    const statsShared = new Float64Array(buffers.stats);
    for (const p of spec.peers) {
      engine.control({ type: 'add-peer', slot: p.slot });
      engine.control({
        type: 'strip',
        slot: p.slot,
        gain: p.gain,
        pan: p.pan,
        mute: false,
        solo: false,
      });
    }
    const polled = new Float64Array(S.BLOCK_LEN);
    await waitFor('the engine to add the five peers', 3000, () => {
      // A read that meets a write in progress counts as not yet: the next poll reads again.
      if (!S.readStats(statsShared, polled)) return false;
      return (
        readGlobals(polled).peers === spec.peers.length &&
        spec.peers.every((p) => readPeer(polled, p.slot).active === 1)
      );
    });

    log(`sending ${schedule.records} records for ${spec.durationMs / 1000} s`);
    Atomics.store(tap.header, TAP_ARMED, 1);
    const series: ScenarioResult['series'] = [];
    const sampleStarted = performance.now();
    const sampler = setInterval(() => {
      const into = new Float64Array(S.BLOCK_LEN);
      if (!S.readStats(statsShared, into)) return;
      const peers = spec.peers.map((p) => readPeer(into, p.slot));
      series.push({
        t: (performance.now() - sampleStarted) / 1000,
        buffered: peers.map((p) => p.bufferedFrames),
        target: peers.map((p) => p.targetFrames),
        driftPpm: peers.map((p) => p.driftPpm),
        concealed: peers.map((p) => p.concealed),
      });
    }, SERIES_MS);
    let captureEnd = 0;
    const stamps: ClockPair[] = [];
    const stamp = () => stamps.push({ contextTime: ctx.currentTime, performanceTime: performance.now() });
    let stamper: ReturnType<typeof setInterval> | undefined;
    const { lags, ...sender } = await new Promise<SendReport>((resolve, reject) => {
      worker.onmessage = (ev: MessageEvent<{ type: string; message?: string } & SendReport>) => {
        if (ev.data.type === 'started') {
          stamp();
          stamper = setInterval(stamp, STAMP_MS);
        } else if (ev.data.type === 'done') {
          captureEnd = Atomics.load(tap.header, TAP_WRITTEN);
          clearInterval(stamper);
          stamp();
          resolve(ev.data);
        } else if (ev.data.type === 'error') {
          clearInterval(stamper);
          reject(new Error(`sender: ${ev.data.message}`));
        }
      };
      worker.onerror = (ev) => {
        clearInterval(stamper);
        reject(new Error(`sender worker failed: ${ev.message}`));
      };
      worker.postMessage({ type: 'run', inbound: buffers.inbound, spec, events: schedule.events });
    });
    const atEnd = await readBlock(statsShared);
    clearInterval(sampler);
    const clockPpm = clockOffsetPpm(stamps);

    // Regular packets written later than the schedule meant, by more than the buffer absorbs.
    const offsets = new Map(spec.peers.map((p) => [p.slot, p.offsetMs]));
    let disturbedPackets = 0;
    let worstDelayMs = 0;
    schedule.events.forEach((e, i) => {
      if (e.kind !== EventKind.Packet && e.kind !== EventKind.Duplicate) return;
      const delay = e.at + lags[i] - (offsets.get(e.slot)! + e.index * BLOCK_MS);
      worstDelayMs = Math.max(worstDelayMs, delay);
      if (delay > IN_TIME_LIMIT_MS) disturbedPackets++;
    });

    log('draining');
    await sleep(sc.drainMs);
    const drained = await readBlock(statsShared);
    Atomics.store(tap.header, TAP_ARMED, 0);
    const captured = Atomics.load(tap.header, TAP_WRITTEN);
    const silentQuanta = Atomics.load(tap.header, TAP_SILENT);
    const droppedQuanta = Atomics.load(tap.header, TAP_FULL);
    engine.node.disconnect();
    tapNode.disconnect();

    log('analysing');
    const end = captureEnd - Math.round(sc.tailMarginS * SAMPLE_RATE);
    const start = end - Math.round(sc.analysisS * SAMPLE_RATE);
    if (start < SAMPLE_RATE) {
      throw new Error(
        `only ${(captureEnd / SAMPLE_RATE).toFixed(2)} s captured: too little to skip 1 s of warm-up`,
      );
    }
    const expected = spec.peers.map((p) => ({ p, e: expectedLevels(p) }));
    const tonesL: ToneSpec[] = expected.map(({ p, e }) => ({
      slot: p.slot,
      bin: p.bin,
      hz: e.hz,
      expected: e.left,
    }));
    const tonesR: ToneSpec[] = expected.map(({ p, e }) => ({
      slot: p.slot,
      bin: p.bin,
      hz: e.hz,
      expected: e.right,
    }));
    const fft = new Fft(FFT_LEN);
    const opts = { reference: AMPLITUDE, guardBins: GUARD_BINS, lowestBin: 3, toneHalfWidth: 4 };
    const channel = (x: Float32Array, tones: ToneSpec[]): ChannelResult => {
      const w = x.slice(start, end);
      return {
        ...analyseChannel(w, tones, fft, opts),
        window: scanSamples(w),
        whole: scanSamples(x.subarray(0, captured)),
        stepBound: stepBound(tones),
      };
    };
    const left = channel(tap.left, tonesL);
    const right = channel(tap.right, tonesR);
    keep?.({
      left: tap.left.slice(0, captured),
      right: tap.right.slice(0, captured),
      start,
      end,
      sampleRate: SAMPLE_RATE,
    });

    const result: ScenarioResult = {
      name: spec.name,
      description: sc.description,
      ok: false,
      checks: [],
      ledger: { peers: schedule.peers, bad: schedule.bad, records: schedule.records },
      statsAtEnd: {
        global: globalStats(atEnd),
        peers: spec.peers.map((p) => peerStats(atEnd, p.slot)),
      },
      stats: {
        global: globalStats(drained),
        peers: spec.peers.map((p) => peerStats(drained, p.slot)),
      },
      audio: {
        left,
        right,
        windowS: (end - start) / SAMPLE_RATE,
        capturedS: captured / SAMPLE_RATE,
        silentQuanta,
        droppedQuanta,
      },
      sender,
      disturbed: {
        packets: disturbedPackets,
        worstDelayMs,
        limitMs: IN_TIME_LIMIT_MS,
        renderStarved: !(Math.abs(clockPpm) <= RENDER_CLOCK_LIMIT_PPM),
        skippedBlocks: spec.peers.reduce((n, p) => n + peerStats(atEnd, p.slot).discarded, 0),
      },
      clockPpm,
      series,
      context: {
        sampleRate: ctx.sampleRate,
        baseLatency: ctx.baseLatency,
      },
      tolerances: sc.tolerances,
      wallMs: 0,
      engineErrors,
      attempt: 1,
    };
    result.checks = judge(result);
    result.ok = result.checks.every((c) => c.ok);
    result.wallMs = performance.now() - started;
    return result;
  } finally {
    worker.terminate();
    await ctx.close().catch(() => {});
  }
}

/**
 * The context's time and the wall clock's, read together on the main thread. Not
 * `getOutputTimestamp()` (nor `outputLatency`): Firefox's timestamp subtracts its output
 * latency, whose first read asks the audio device across processes while holding the audio
 * graph's lock, and that can deadlock the page for good (see `outputSeconds` in
 * room/engine-link.ts). The slope is all the run needs, and no offset moves it. `currentTime`
 * moves in render quanta (2.7 ms); over a run's 450 pairs the fitted slope is good to about
 * 15 ppm, against a limit of 2,000.
 */
interface ClockPair {
  contextTime: number;
  performanceTime: number;
}

/** (audio clock rate / performance.now rate - 1) in ppm over a run's clock pairs. */
function clockOffsetPpm(stamps: ClockPair[]): number {
  // Least squares of the context's time on the wall clock's, over every pair of the run.
  const pts = stamps.filter((x) => Number.isFinite(x.contextTime) && Number.isFinite(x.performanceTime));
  if (pts.length < 2) return NaN;
  const n = pts.length;
  const mx = pts.reduce((a, x) => a + x.performanceTime / 1000, 0) / n;
  const my = pts.reduce((a, x) => a + x.contextTime, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const x of pts) {
    const dx = x.performanceTime / 1000 - mx;
    sxy += dx * (x.contextTime - my);
    sxx += dx * dx;
  }
  return sxx > 0 ? (sxy / sxx - 1) * 1e6 : NaN;
}
