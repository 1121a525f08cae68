// Runs the engine benchmark on the main thread (bench/README.md explains the method).
//
// An AudioWorklet has no clock, so each run renders Q quanta in an OfflineAudioContext, which
// runs the same worklet code on its render thread as fast as it can, and times that with
// performance.now() (about 5 µs resolution when the page is cross-origin isolated). Every run
// first renders a warm-up (JIT tier-up, jitter buffers filling), suspends, and only the rest is
// timed. The three processors (network only, WASM engine, JS engine) run interleaved, R times
// each; per peer count the median of each is taken and the network-only time subtracted.

import { createBuffers } from '../../app/src/audio/engine-core';
import { StatsReader } from '../../app/src/audio/stats-reader';
import { PACKET_BYTES } from './feeder';
import { C_DELIVERED, C_QUANTA, C_REFUSED, COUNTERS_BYTES, type BenchOptions } from './messages';
import workletUrl from './bench-worklet.ts?worker&url';

export const QUANTUM_FRAMES = 128;
export const SAMPLE_RATE = 48000;
/** One render quantum, in ns (2.667 ms). */
export const QUANTUM_NS = (QUANTUM_FRAMES / SAMPLE_RATE) * 1e9;
/** The budget: 5% of a quantum (133 µs). */
export const BUDGET_NS = 0.05 * QUANTUM_NS;
export const DEFAULT_PEERS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

export type Kind = 'net' | 'wasm' | 'js';
const KINDS: Kind[] = ['net', 'wasm', 'js'];

export interface BenchSettings {
  peers: number[];
  /** Repetitions per processor and peer count (the median is kept). */
  reps: number;
  /** Scales the quanta rendered per run (1 = the default amount of work). */
  work: number;
  seed: number;
  /** Packet loss probability. */
  loss: number;
  /** Largest arrival delay, in quanta (0..3). */
  jitter: number;
}

export const DEFAULT_SETTINGS: BenchSettings = {
  peers: DEFAULT_PEERS,
  reps: 5,
  work: 1,
  seed: 20261121,
  loss: 0.01,
  jitter: 3,
};

export interface EngineRow {
  peers: number;
  wasm_ns_per_peer_quantum: number;
  js_ns_per_peer_quantum: number;
  underruns: number;
  /** JS time / WASM time. */
  js_over_wasm: number;
  /** WASM engine time per quantum as a fraction of the 2.667 ms quantum. */
  wasm_quantum_fraction: number;
  js_quantum_fraction: number;
  /** The synthetic network's own cost (subtracted), ns per peer-quantum. */
  net_ns_per_peer_quantum: number;
  /** Quanta timed per run, and runs per processor. */
  quanta: number;
  reps: number;
  /** Underruns of the JS engine in the timed part (for comparison). */
  js_underruns: number;
}

export interface BenchResult {
  engine: EngineRow[];
  max_peers_under_5pct: number;
  machine: Record<string, unknown>;
  date: string;
  /** Only when different from the defaults (loss 0.01, jitter 3 quanta). */
  network?: { loss: number; jitter_quanta: number };
}

/** Quanta timed per run for `peers`: about 400 000 peer-quanta, 2000..20000 quanta. */
export function quantaFor(peers: number, work: number): number {
  return Math.round(Math.min(Math.max(400_000 / peers, 2000), 20_000) * work);
}

/** Warm-up quanta before the timed part: enough calls for the JIT and a settled buffer. */
export function warmupFor(peers: number): number {
  return Math.round(Math.min(Math.max(32_000 / peers, 400), 3000));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

interface RunResult {
  ms: number;
  underruns: number;
}

/** One timed run of one processor. Rejects if the run was not valid (the engine skipped work). */
async function timeRun(
  kind: Kind,
  peers: number,
  quanta: number,
  warmup: number,
  settings: BenchSettings,
  module: WebAssembly.Module,
): Promise<RunResult> {
  const ctx = new OfflineAudioContext(2, (warmup + quanta) * QUANTUM_FRAMES, SAMPLE_RATE);
  await ctx.audioWorklet.addModule(workletUrl);
  // Room for four quanta of worst-case bursts.
  const perQuantum = peers * (PACKET_BYTES + 8) * 4;
  let inboundBytes = 1 << 16;
  while (inboundBytes < perQuantum) inboundBytes *= 2;
  const buffers = createBuffers({ inboundBytes, outboundBytes: 1 << 16 });
  const counters = new SharedArrayBuffer(COUNTERS_BYTES);
  const options: BenchOptions = {
    peers,
    seed: settings.seed,
    loss: settings.loss,
    maxDelay: settings.jitter,
    buffers,
    counters,
  };
  if (kind === 'wasm') options.module = module;
  const node = new AudioWorkletNode(ctx, `bench-${kind}`, {
    numberOfInputs: 0,
    numberOfOutputs: 1,
    outputChannelCount: [2],
    processorOptions: options,
  });
  await new Promise<void>((resolve, reject) => {
    node.port.onmessage = (ev: MessageEvent<{ type: string; message?: string }>) => {
      if (ev.data.type === 'ready') resolve();
      else reject(new Error(`bench-${kind}: ${ev.data.message}`));
    };
  });
  node.connect(ctx.destination);
  const stats = new StatsReader();
  stats.attach(buffers.stats);
  // The offline context is suspended or finished whenever the block is read, so each refresh
  // takes a consistent copy.
  const engine = () => {
    stats.refresh();
    return stats.globals();
  };
  const count = new Float64Array(counters);
  let t0 = 0;
  let underrunsBefore = 0;
  ctx.suspend((warmup * QUANTUM_FRAMES) / SAMPLE_RATE).then(() => {
    underrunsBefore = engine().underruns;
    t0 = performance.now();
    ctx.resume();
  });
  const rendered = await ctx.startRendering();
  const ms = performance.now() - t0;
  node.port.close();

  // Validity: every quantum rendered, nothing refused, and the engine read every packet and
  // produced sound.
  if (count[C_QUANTA] < warmup + quanta) {
    throw new Error(`bench-${kind}: rendered ${count[C_QUANTA]} of ${warmup + quanta} quanta`);
  }
  if (count[C_REFUSED] !== 0) throw new Error(`bench-${kind}: the inbound ring refused packets`);
  if (kind !== 'net') {
    // Stats are published every 8 quanta: the last few quanta's packets may not show yet.
    const { recordsRead: read, master } = engine();
    const delivered = count[C_DELIVERED];
    if (!(read <= delivered && read >= delivered - 8 * 4 * peers)) {
      throw new Error(`bench-${kind}: engine read ${read} records of ${delivered} delivered`);
    }
    if (!(master.rmsL > 1e-4)) throw new Error(`bench-${kind}: the mix is silent`);
    const tail = rendered.getChannelData(0).subarray(rendered.length - 4096);
    let energy = 0;
    for (let i = 0; i < tail.length; i++) energy += tail[i] * tail[i];
    if (!(energy > 0)) throw new Error(`bench-${kind}: the rendered output is silent`);
  }
  return { ms, underruns: engine().underruns - underrunsBefore };
}

export interface Progress {
  peers: number;
  kind: Kind;
  rep: number;
  done: number;
  total: number;
}

/** Runs the whole suite; `onRow` sees each peer count's row as soon as it is measured. */
export async function runBench(
  module: WebAssembly.Module,
  settings: BenchSettings,
  onProgress: (p: Progress) => void = () => {},
  onRow: (row: EngineRow) => void = () => {},
): Promise<BenchResult> {
  const total = settings.peers.length * settings.reps * KINDS.length + settings.peers.length;
  let done = 0;
  const n = settings.peers.length;
  const times = settings.peers.map(() => ({ net: [] as number[], wasm: [] as number[], js: [] as number[] }));
  const under = settings.peers.map(() => ({ net: [] as number[], wasm: [] as number[], js: [] as number[] }));
  const rows: (EngineRow | null)[] = settings.peers.map(() => null);
  // A short untimed run of each processor per peer count first, so that the browser has
  // compiled everything once.
  for (const peers of settings.peers) {
    onProgress({ peers, kind: 'wasm', rep: -1, done, total });
    for (const kind of KINDS) await timeRun(kind, peers, 200, 200, settings, module);
    done++;
  }
  // Repetitions outermost: a burst of other activity on the machine then touches one repetition
  // of several peer counts (which the median drops) rather than every repetition of one.
  for (let rep = 0; rep < settings.reps; rep++) {
    for (let i = 0; i < n; i++) {
      const peers = settings.peers[i];
      const quanta = quantaFor(peers, settings.work);
      const warmup = warmupFor(peers);
      // Rotate the order so no processor always runs right after another.
      for (let k = 0; k < KINDS.length; k++) {
        const kind = KINDS[(k + rep + i) % KINDS.length];
        onProgress({ peers, kind, rep, done, total });
        const r = await timeRun(kind, peers, quanta, warmup, settings, module);
        times[i][kind].push(r.ms);
        under[i][kind].push(r.underruns);
        done++;
      }
      const row = makeRow(peers, quanta, rep + 1, times[i], under[i]);
      rows[i] = row;
      onRow(row);
    }
  }
  const doneRows = rows.filter((r): r is EngineRow => r !== null);
  let maxPeers = 0;
  for (const r of doneRows) {
    if (r.wasm_quantum_fraction * QUANTUM_NS < BUDGET_NS) maxPeers = Math.max(maxPeers, r.peers);
  }
  const network =
    settings.loss !== DEFAULT_SETTINGS.loss || settings.jitter !== DEFAULT_SETTINGS.jitter
      ? { loss: settings.loss, jitter_quanta: settings.jitter }
      : undefined;
  return {
    ...(network ? { network } : {}),
    engine: doneRows,
    max_peers_under_5pct: maxPeers,
    machine: {
      userAgent: navigator.userAgent,
      hardwareConcurrency: navigator.hardwareConcurrency,
      crossOriginIsolated: globalThis.crossOriginIsolated,
    },
    date: new Date().toISOString(),
  };
}

/** A peer count's row from the runs so far (medians; underruns: the worst run). */
function makeRow(
  peers: number,
  quanta: number,
  reps: number,
  times: Record<Kind, number[]>,
  under: Record<Kind, number[]>,
): EngineRow {
  const net = median(times.net);
  const wasm = median(times.wasm) - net;
  const js = median(times.js) - net;
  const perPeerQuantum = (ms: number) => (ms * 1e6) / (quanta * peers);
  return {
    peers,
    wasm_ns_per_peer_quantum: round(perPeerQuantum(wasm), 1),
    js_ns_per_peer_quantum: round(perPeerQuantum(js), 1),
    underruns: Math.max(...under.wasm),
    js_over_wasm: round(js / wasm, 2),
    wasm_quantum_fraction: round((wasm * 1e6) / quanta / QUANTUM_NS, 5),
    js_quantum_fraction: round((js * 1e6) / quanta / QUANTUM_NS, 5),
    net_ns_per_peer_quantum: round(perPeerQuantum(net), 1),
    quanta,
    reps,
    js_underruns: Math.max(...under.js),
  };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
