// The self-test's network: a dedicated Worker that writes the scheduled records into the engine's
// inbound ring at their times. It sleeps with Atomics.wait (allowed in a dedicated worker, and
// precise to well under a millisecond) rather than on timers, whose 4 ms clamping and background
// throttling would add jitter of their own. Every packet is encoded before the clock starts.
//
// in:  { type: 'run', inbound: SharedArrayBuffer, spec: ScenarioSpec, events: SendEvent[] }
// out: { type: 'started' } when the first send is 20 ms away, then { type: 'done', ...SendReport }
//      or { type: 'error', message }.

import { RingWriter } from '../audio/ring-ends';
import { badRecord } from './bad-input';
import { EventKind, type ScenarioSpec, type SendEvent } from './schedule';
import { PeerSynth } from './synth';

export interface SendReport {
  /** Records written into the ring. */
  written: number;
  /** Records the ring refused (full): the ledger no longer holds if this is not 0. */
  refused: number;
  /** How late the writes were against the schedule, ms. */
  lagMeanMs: number;
  lagP99Ms: number;
  lagMaxMs: number;
  elapsedMs: number;
  /** Per event, in schedule order: how late its write was, ms. */
  lags: Float64Array;
}

interface RunMessage {
  type: 'run';
  inbound: SharedArrayBuffer;
  spec: ScenarioSpec;
  events: SendEvent[];
}

/** The dedicated worker scope (the DOM typings describe a window). */
const scope = self as unknown as {
  onmessage: ((ev: MessageEvent<RunMessage>) => void) | null;
  postMessage(message: unknown): void;
};

scope.onmessage = (ev: MessageEvent<RunMessage>) => {
  if (ev.data?.type !== 'run') return;
  try {
    const report = run(ev.data);
    scope.postMessage({ type: 'done', ...report });
  } catch (err) {
    scope.postMessage({ type: 'error', message: err instanceof Error ? err.message : String(err) });
  }
};

function run({ inbound, spec, events }: RunMessage): SendReport {
  const writer = new RingWriter(inbound);
  const synths = new Map(spec.peers.map((p) => [p.slot, new PeerSynth(p)]));
  const records: Uint8Array[] = events.map((e) => {
    const synth = synths.get(e.slot);
    if (!synth) throw new Error(`event for slot ${e.slot}, which has no peer`);
    const valid = synth.packet(e.index);
    return e.kind === EventKind.Bad ? badRecord(e.bad!, valid, e.badSeed!) : valid;
  });

  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  const lags = new Float64Array(events.length);
  let written = 0;
  let refused = 0;
  const t0 = performance.now() + 20;
  scope.postMessage({ type: 'started' });
  for (let i = 0; i < events.length; i++) {
    const due = t0 + events[i].at;
    for (;;) {
      const wait = due - performance.now();
      if (wait <= 0) break;
      Atomics.wait(sleeper, 0, 0, wait);
    }
    const bytes = records[i];
    if (writer.push(events[i].tag, 0, bytes)) written++;
    else refused++;
    lags[i] = performance.now() - due;
  }
  const elapsedMs = performance.now() - t0;
  const sorted = lags.slice().sort();
  let sum = 0;
  for (const l of lags) sum += l;
  return {
    written,
    refused,
    lagMeanMs: lags.length ? sum / lags.length : 0,
    lagP99Ms: sorted.length ? sorted[Math.floor(0.99 * (sorted.length - 1))] : 0,
    lagMaxMs: sorted.length ? sorted[sorted.length - 1] : 0,
    elapsedMs,
    lags,
  };
}
