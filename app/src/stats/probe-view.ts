// The round-trip probe as the stats view and the sound check follow it: which sessions have one
// (probeControls), one probe's phases from start to result (ProbeWatch), and the wording of a
// finished probe (roundTripText, selfLoop). The session runs the probe; this only watches it.

import { PROBE_START_GRACE_MS, type ProbeResult } from '../room/session';
import type { DeviceLatency } from './export';
import type { LatencyStages } from './stages';

/** The session's round-trip probe (Session.startProbe and the rest), where it has one. */
export interface ProbeControls {
  startProbe(peer: string, clicks?: number): boolean;
  stopProbe(): void;
  probeResult(): ProbeResult | null;
  echoing(): string | null;
  latencyStages?(): LatencyStages;
}

/** `session` as ProbeControls when it has a probe, else null (older or fake sessions). */
export function probeControls(session: object): ProbeControls | null {
  const s = session as Partial<ProbeControls>;
  const fns = [s.startProbe, s.stopProbe, s.probeResult, s.echoing];
  return fns.every((f) => typeof f === 'function') ? (session as ProbeControls) : null;
}

/** 'asking': the peer has not allowed the echo yet; 'refused': they declined, did not answer or
 * stopped it (the result's message says which). */
export type ProbePhase = 'starting' | 'asking' | 'running' | 'done' | 'stopped' | 'failed' | 'refused';

/** How often a running probe is polled, ms. */
export const PROBE_POLL_MS = 200;
/** The stats block shows the previous probe until the engine took the new one: a probe not seen
 * running within this long after its start is taken as it then stands, ms (the session's). */
export { PROBE_START_GRACE_MS };

/**
 * One round-trip probe as the UI follows it: started once, then polled (every PROBE_POLL_MS)
 * until it is done, stopped or failed. Ignores what the stats block still says of the previous
 * probe until the new one shows as running.
 */
export class ProbeWatch {
  phase: ProbePhase = 'starting';
  /** The latest result of this probe (null before it shows). */
  result: ProbeResult | null = null;
  private seenRunning = false;
  private startedAt: number;

  constructor(
    private readonly probe: ProbeControls,
    readonly peer: string,
    clicks?: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.startedAt = now();
    const started = clicks === undefined ? probe.startProbe(peer) : probe.startProbe(peer, clicks);
    if (!started) this.phase = 'failed';
  }

  get finished(): boolean {
    return (
      this.phase === 'done' || this.phase === 'stopped' || this.phase === 'failed' || this.phase === 'refused'
    );
  }

  poll(): ProbePhase {
    if (this.finished) return this.phase;
    const r = this.probe.probeResult();
    const mine = r !== null && r.peer === this.peer ? r : null;
    if (mine?.state === 'asking') {
      // The clicks start once the peer allows the echo: the start's grace runs from then.
      this.startedAt = this.now();
      return (this.phase = 'asking');
    }
    if (mine?.state === 'refused') {
      this.result = mine;
      return (this.phase = 'refused');
    }
    if (mine?.state === 'running') {
      this.seenRunning = true;
      this.result = mine;
      return (this.phase = 'running');
    }
    if (!this.seenRunning && this.now() - this.startedAt < PROBE_START_GRACE_MS) return this.phase;
    this.result = mine;
    return (this.phase = mine?.state === 'done' ? 'done' : this.seenRunning ? 'stopped' : 'failed');
  }

  /** Stops the probe (the peer's echo too). */
  stop(): void {
    if (this.finished) return;
    this.probe.stopProbe();
    this.phase = 'stopped';
  }

  /** "click k of n" while running; "waiting for their answer…" while asking; "starting…" before. */
  get progress(): string {
    const r = this.result;
    if (this.phase === 'asking') return 'waiting for their answer…';
    if (this.phase !== 'running' || !r) return 'starting…';
    return `click ${Math.min(r.clicks, Math.max(1, r.sent))} of ${r.clicks}`;
  }
}

const ms1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '–');

/** The wording of a finished peer probe. */
export function roundTripText(r: ProbeResult, name: string): string {
  if (r.heard === 0) return `No click came back: ${name} did not echo (an older version of Tutti, or muted).`;
  const lost = r.sent - r.heard;
  return (
    `Round trip: median ${ms1(r.medianMs)} ms (min–max ${ms1(r.minMs)}–${ms1(r.maxMs)} ms over ${r.heard} ` +
    `click${r.heard === 1 ? '' : 's'})${lost > 0 ? `; ${lost} of ${r.sent} lost` : ''}`
  );
}

/** The sound check's latency measurement: the engine's round trip on itself and the devices. */
export interface SelfLoop {
  engineMs: number;
  outputMs: number;
  inputMs: number;
  /** engine + the devices that reported a latency; NaN when no click came back. */
  totalMs: number;
  engine: string;
  devices: string;
  total: string;
}

/**
 * The sound check's "Measure latency": the probe's median round trip through the engine and the
 * packet pump (no network, no devices: it is timed on the audio clock), plus the devices' output
 * and input latency where the browser reports them.
 */
export function selfLoop(r: ProbeResult, devices: DeviceLatency): SelfLoop {
  const { outputMs, inputMs } = devices;
  const engineMs = r.heard > 0 ? r.medianMs : NaN;
  const known = (v: number) => (Number.isFinite(v) ? v : 0);
  const totalMs = engineMs + known(outputMs) + known(inputMs);
  const dev = (v: number) => (Number.isFinite(v) ? `${ms1(v)} ms` : 'not reported');
  const parts = [
    'engine',
    ...(Number.isFinite(outputMs) ? ['output'] : []),
    ...(Number.isFinite(inputMs) ? ['input'] : []),
  ];
  const missing = [
    ...(Number.isFinite(outputMs) ? [] : ['output']),
    ...(Number.isFinite(inputMs) ? [] : ['input']),
  ];
  return {
    engineMs,
    outputMs,
    inputMs,
    totalMs,
    engine:
      r.heard > 0
        ? `Engine round trip ${ms1(engineMs)} ms (spread ${ms1(r.minMs)}–${ms1(r.maxMs)} ms over ${r.heard} click${r.heard === 1 ? '' : 's'})`
        : 'No click came back through the engine.',
    devices: `Devices: output ${dev(outputMs)}, input ${dev(inputMs)}`,
    total:
      `Total local I/O + engine: ${ms1(totalMs)} ms (${parts.join(' + ')}` +
      (missing.length === 2
        ? '; neither device reports its latency, so neither is included)'
        : missing.length === 1
          ? `; the ${missing[0]} device does not report its latency, so it is not included)`
          : ')'),
  };
}
