// What a self-test run reports and how it is judged: the result of a scenario (the engine's
// figures beside the schedule's ledger, the analysed audio, how disturbed the run was) and the
// pass/fail checks drawn from it (judge). Pure: the run itself is runner.ts.

import type { EngineGlobals, EnginePeerStats } from '../audio/stats-reader';
import type { ChannelAnalysis, SampleScan } from './analysis';
import { AMPLITUDE, RENDER_CLOCK_LIMIT_PPM, type Scenario } from './scenarios';
import type { BadLedger, PeerLedger } from './schedule';
import type { SendReport } from './sender-worker';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

/** The per-peer figures the report keeps, in its order: a subset of the stats reader's. */
export const PEER_FIELDS = [
  'received',
  'lost',
  'late',
  'duplicates',
  'concealed',
  'underruns',
  'discarded',
  'malformed',
  'resets',
  'targetFrames',
  'bufferedFrames',
  'jitterFrames',
  'driftPpm',
] as const satisfies readonly (keyof EnginePeerStats)[];

/** The engine-wide figures the report keeps, in its order. */
export const GLOBAL_FIELDS = [
  'quanta',
  'peers',
  'unknownPeer',
  'malformed',
  'recordsRead',
  'ringResyncs',
  'nonfinite',
  'limiterDb',
  'underruns',
] as const satisfies readonly (keyof EngineGlobals)[];

export type PeerStats = { slot: number } & Pick<EnginePeerStats, (typeof PEER_FIELDS)[number]>;
export type GlobalStats = Pick<EngineGlobals, (typeof GLOBAL_FIELDS)[number]>;

export interface ChannelResult extends ChannelAnalysis {
  /** Scan of the analysed window. */
  window: SampleScan;
  /** Scan of everything captured (start-up and drain included). */
  whole: SampleScan;
  /** Analytic bound of |x[n] - x[n-1]| for this channel's sum of sines. */
  stepBound: number;
}

export interface ScenarioResult {
  name: string;
  description: string;
  ok: boolean;
  checks: Check[];
  ledger: { peers: PeerLedger[]; bad: BadLedger; records: number };
  /** Stats when the sender finished, and after the drain (the ones compared with the ledger). */
  statsAtEnd: { global: GlobalStats; peers: PeerStats[] };
  stats: { global: GlobalStats; peers: PeerStats[] };
  audio: {
    left: ChannelResult;
    right: ChannelResult;
    windowS: number;
    capturedS: number;
    silentQuanta: number;
    droppedQuanta: number;
  };
  sender: Omit<SendReport, 'lags'>;
  /**
   * Regular packets (and copies) the sender wrote so late, through no choice of the schedule
   * (a busy machine), that they may have missed their slot: the ledger is exact only when this
   * is 0. Measured against IN_TIME_LIMIT_MS from the packet's due time. `renderStarved`: the
   * audio clock ran more than RENDER_CLOCK_LIMIT_PPM from the sender's, so the audio thread was
   * starved by a busy machine.
   */
  disturbed: {
    packets: number;
    worstDelayMs: number;
    limitMs: number;
    renderStarved: boolean;
    /**
     * Blocks the jitter buffers skipped while streaming. With a floor far above the injected
     * jitter a buffer only overshoots its target when the audio thread stalled and then caught
     * up; it then skips blocks (crossfaded, counted as discarded), which a listener barely
     * notices but which puts lines of -40 to -50 dB around the tone into an exact spectral check.
     */
    skippedBlocks: number;
  };
  /** Audio clock against the sender's clock (performance.now), ppm. */
  clockPpm: number;
  /** Stats sampled every SERIES_MS while streaming: seconds, and per peer (scenario order) the
   * buffered frames, target frames, drift in ppm and blocks concealed so far. */
  series: {
    t: number;
    buffered: number[];
    target: number[];
    driftPpm: number[];
    concealed: number[];
  }[];
  context: { sampleRate: number; baseLatency: number };
  tolerances: Scenario['tolerances'];
  wallMs: number;
  engineErrors: string[];
  /** Which run this is (1 = first); a run whose sender was disturbed is repeated. */
  attempt: number;
}

const fmt = (x: number, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : String(x));

/** The pass/fail checks of a scenario's result. */
export function judge(r: ScenarioResult): Check[] {
  const checks: Check[] = [];
  const add = (name: string, ok: boolean, detail: string) => checks.push({ name, ok, detail });
  const t = r.tolerances;

  add(
    'the sender kept its schedule',
    r.disturbed.packets === 0,
    `${r.disturbed.packets} regular packets written over ${r.disturbed.limitMs} ms after their due time ` +
      `(worst ${fmt(r.disturbed.worstDelayMs, 1)} ms): the machine was too busy for an exact ledger`,
  );
  add(
    'the audio thread kept its clock',
    !r.disturbed.renderStarved,
    `audio clock ${fmt(r.clockPpm, 0)} ppm against the sender's (limit ±${RENDER_CLOCK_LIMIT_PPM}): ` +
      'the machine was too busy for the audio thread to render in time',
  );
  add(
    'no jitter buffer skipped a block',
    r.disturbed.skippedBlocks === 0,
    `${r.disturbed.skippedBlocks} blocks skipped: the audio thread stalled and caught up, so a buffer ` +
      'overshot its target and dropped audio to come back (the machine was too busy for an exact spectrum)',
  );
  add(
    'engine ran without errors',
    r.engineErrors.length === 0,
    r.engineErrors.join('; ') || 'no error reported',
  );
  add(
    'every record was written into the ring',
    r.sender.refused === 0 && r.sender.written === r.ledger.records,
    `${r.sender.written} of ${r.ledger.records} written, ${r.sender.refused} refused (ring full)`,
  );

  for (const l of r.ledger.peers) {
    const s = r.stats.peers.find((p) => p.slot === l.slot)!;
    for (const f of ['received', 'lost', 'late', 'duplicates'] as const) {
      add(`peer ${l.slot} ${f} = ledger`, s[f] === l[f], `engine ${s[f]}, injected ${l[f]}`);
    }
    const bad = r.ledger.bad.malformedBySlot[l.slot] ?? 0;
    add(`peer ${l.slot} malformed = injected`, s.malformed === bad, `engine ${s.malformed}, injected ${bad}`);
  }
  const g = r.stats.global;
  add(
    'malformed records = injected',
    g.malformed === r.ledger.bad.malformed,
    `engine ${g.malformed}, injected ${r.ledger.bad.malformed}`,
  );
  add(
    'unknown-peer records = injected',
    g.unknownPeer === r.ledger.bad.unknownPeer,
    `engine ${g.unknownPeer}, injected ${r.ledger.bad.unknownPeer}`,
  );
  add(
    'records read = records written',
    g.recordsRead === r.ledger.records,
    `engine ${g.recordsRead}, written ${r.ledger.records}`,
  );
  add('no ring resync', g.ringResyncs === 0, `${g.ringResyncs} resyncs`);
  add('no non-finite master block', g.nonfinite === 0, `${g.nonfinite} blocks silenced`);

  for (const [side, ch] of [
    ['left', r.audio.left],
    ['right', r.audio.right],
  ] as const) {
    for (const tone of ch.tones) {
      const name = `${side} ${fmt(tone.hz)} Hz (peer ${tone.slot})`;
      if (tone.errorDb === null) {
        const db = 20 * Math.log10(Math.max(tone.measured, 1e-12) / AMPLITUDE);
        add(`${name} absent`, db <= t.spurDb, `${fmt(db, 1)} dB re ${AMPLITUDE} (limit ${t.spurDb} dB)`);
      } else {
        add(
          `${name} level`,
          Math.abs(tone.errorDb) <= t.levelDb,
          `${fmt(20 * Math.log10(tone.measured), 2)} dBFS, expected ${fmt(20 * Math.log10(tone.expected), 2)} ` +
            `(${tone.errorDb >= 0 ? '+' : ''}${fmt(tone.errorDb, 3)} dB, limit ±${t.levelDb} dB)`,
        );
      }
    }
    add(
      `${side}: nothing else above ${t.spurDb} dB`,
      ch.spur.db <= t.spurDb,
      `largest other line ${fmt(ch.spur.db, 1)} dB re ${AMPLITUDE} at ${fmt(ch.spur.hz, 1)} Hz`,
    );
    add(
      `${side}: no NaN or infinity`,
      ch.whole.nonFinite === 0,
      `${ch.whole.nonFinite} non-finite samples in ${ch.whole.samples}`,
    );
    add(
      `${side}: no sample beyond ±1`,
      ch.whole.overs === 0,
      `${ch.whole.overs} overs, peak ${fmt(ch.whole.peak, 4)}`,
    );
    const stepDetail =
      `largest step ${ch.window.maxStep.toFixed(5)}, analytic bound ${ch.stepBound.toFixed(5)} ` +
      `(x${fmt(ch.window.maxStep / ch.stepBound, 3)})`;
    if (t.stepFactor !== null) {
      add(
        `${side}: no discontinuity`,
        ch.window.maxStep <= t.stepFactor * ch.stepBound,
        `${stepDetail}, limit x${t.stepFactor}`,
      );
    }
  }
  add('capture complete', r.audio.droppedQuanta === 0, `${r.audio.droppedQuanta} quanta dropped by the tap`);
  return checks;
}
