// Runs the engine benchmark on the main thread (bench/README.md explains the method).
//
// An AudioWorklet has no clock, so each run renders Q quanta in an OfflineAudioContext, which
// runs the same worklet code on its render thread as fast as it can, and times that with
// performance.now() (about 5 µs resolution when the page is cross-origin isolated). Every run
// first renders a warm-up (JIT tier-up, jitter buffers filling), suspends, and only the rest is
// timed. The three processors (network only, WASM engine, JS engine) run interleaved, R times
// each; per peer count the median of each is taken and the network-only time subtracted.
//
// The codec rows then measure the WASM engine at CODEC_PEERS peers sending PCM16, Opus at
// 128 kbit/s and Opus at 64 kbit/s (stereo 240-sample frames, encoded once here: opus-feed.ts),
// the same way: a network-only run and an engine run per codec, interleaved, R times, medians,
// the network-only time of the same codec subtracted. The engine is linked to the codec module in
// all three, as in the app, and each Opus run must show in the engine's stats that every peer's
// frames were received and decoded.

import { createBuffers } from '../../app/src/audio/engine-core';
import { StatsReader } from '../../app/src/audio/stats-reader';
import * as S from '../../app/src/audio/stats';
import { PACKET_BYTES, type OpusPackets } from './feeder';
import { C_DELIVERED, C_QUANTA, C_REFUSED, C_SENT, COUNTERS_BYTES, type BenchOptions } from './messages';
import { CODECS, encodeOpusLoops, OPUS_FRAMES, type CodecName } from './opus-feed';
import workletUrl from './bench-worklet.ts?worker&url';

export const QUANTUM_FRAMES = 128;
export const SAMPLE_RATE = 48000;
/** One render quantum, in ns (2.667 ms). */
export const QUANTUM_NS = (QUANTUM_FRAMES / SAMPLE_RATE) * 1e9;
/** The budget: 5% of a quantum (133 µs). */
export const BUDGET_NS = 0.05 * QUANTUM_NS;
export const DEFAULT_PEERS = [1, 2, 4, 8, 16, 32, 64, 128, 256];
/** Peers of the codec rows. */
export const CODEC_PEERS = 16;
/** Peak amplitude of every peer's sine (the feeder's default). */
const AMPLITUDE = 0.25;

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

/** The WASM engine's cost at CODEC_PEERS peers sending one codec. */
export interface CodecRow {
  codec: CodecName;
  peers: number;
  wasm_ns_per_peer_quantum: number;
  /** This row's time over the PCM16 row's. */
  over_pcm16: number;
  wasm_quantum_fraction: number;
  /** The synthetic network's own cost with this codec's packets (subtracted). */
  net_ns_per_peer_quantum: number;
  /** Samples per packet; Opus frames are stereo, as the PCM16 packets. */
  frames: number;
  channels: number;
  /** The encoder's target, kbit/s (PCM16: its raw rate, 1536). */
  kbps: number;
  /** Mean payload bytes per packet (Opus: the encoded frame). */
  payload_bytes: number;
  /** Underruns in the timed part, the worst of the runs. */
  underruns: number;
  /**
   * The engine's counters over the whole of the last run, summed over the peers: packets
   * received, lost and concealed, frames the decoder refused, packets that did not parse.
   */
  received: number;
  lost: number;
  concealed: number;
  undecodable: number;
  malformed: number;
  /** The quietest peer's pre-fader RMS (left) at the end of the last run. */
  min_peer_rms: number;
  quanta: number;
  reps: number;
}

export interface BenchResult {
  engine: EngineRow[];
  /** Per codec at CODEC_PEERS peers (absent when the codec module is not given). */
  codec?: CodecRow[];
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
  /** The engine's per-peer counters, summed (engine runs only). */
  counters?: PeerTotals;
}

interface PeerTotals {
  received: number;
  lost: number;
  concealed: number;
  undecodable: number;
  malformed: number;
  minRms: number;
}

/** What a codec run feeds the engine: PCM16 (no packets) or Opus, with the codec module. */
interface CodecFeed {
  module: WebAssembly.Module;
  packets: OpusPackets | null;
}

/** One timed run of one processor. Rejects if the run was not valid (the engine skipped work). */
async function timeRun(
  kind: Kind,
  peers: number,
  quanta: number,
  warmup: number,
  settings: BenchSettings,
  module: WebAssembly.Module,
  codec: CodecFeed | null = null,
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
  if (codec) {
    if (kind === 'wasm') options.opus = codec.module;
    if (codec.packets) options.opusPackets = codec.packets;
  }
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
  const underruns = engine().underruns - underrunsBefore;
  if (kind !== 'wasm' || !codec) return { ms, underruns };
  const totals = peerTotals(stats.block, peers);
  if (codec.packets) checkDecoded(totals, stats.block, peers, count[C_SENT]);
  return { ms, underruns, counters: totals };
}

/** The engine's per-peer counters from a stats snapshot, summed over slots 0..peers-1. */
function peerTotals(block: Float64Array, peers: number): PeerTotals {
  const t = { received: 0, lost: 0, concealed: 0, undecodable: 0, malformed: 0, minRms: Infinity };
  for (let k = 0; k < peers; k++) {
    const at = (field: number) => block[S.peerIndex(k, field)];
    t.received += at(S.P_RECEIVED);
    t.lost += at(S.P_LOST);
    t.concealed += at(S.P_CONCEALED);
    t.undecodable += at(S.P_UNDECODABLE);
    t.malformed += at(S.P_MALFORMED);
    t.minRms = Math.min(t.minRms, at(S.P_RMS_L));
  }
  return t;
}

/**
 * Fails the run unless the engine took the Opus path for every peer: nothing malformed or for an
 * unknown slot, every peer's stream known as 240-sample frames with most of its frames received,
 * no frame refused by the decoder, and every peer's decoded tone near its level (a decoder that
 * produced nothing, or a path that played silence, would show here).
 */
function checkDecoded(t: PeerTotals, block: Float64Array, peers: number, sent: number): void {
  const fail = (why: string) => {
    throw new Error(`bench-wasm with Opus: ${why}; the decode path was not measured`);
  };
  if (block[S.G_MALFORMED] !== 0) fail(`${block[S.G_MALFORMED]} packets malformed`);
  if (block[S.G_UNKNOWN_PEER] !== 0) fail(`${block[S.G_UNKNOWN_PEER]} packets for unknown peers`);
  if (t.undecodable !== 0) fail(`${t.undecodable} frames refused by the decoder`);
  // The last few quanta's packets may still be in flight (delays of up to 3 quanta).
  if (!(t.received >= 0.97 * sent - 4 * peers)) fail(`${t.received} of ${sent} frames received`);
  // A sine of this amplitude has an RMS of AMPLITUDE / √2 (0.177); decoded, it stays near it.
  const floor = (0.5 * AMPLITUDE) / Math.SQRT2;
  for (let k = 0; k < peers; k++) {
    const frames = block[S.peerIndex(k, S.P_BLOCK_FRAMES)];
    const rms = block[S.peerIndex(k, S.P_RMS_L)];
    if (frames !== OPUS_FRAMES) fail(`peer ${k}'s stream has ${frames}-sample blocks`);
    if (!(rms > floor)) fail(`peer ${k}'s decoded tone has an RMS of ${rms.toExponential(2)}`);
  }
}

export interface Progress {
  peers: number;
  kind: Kind;
  /** The codec rows' codec (absent in the engine rows). */
  codec?: CodecName;
  rep: number;
  done: number;
  total: number;
}

/**
 * Runs the whole suite; `onRow` sees each peer count's row as soon as it is measured. With
 * `codecs`, the codec rows follow (`codecs.onRow` sees each, refined after every repetition).
 */
export async function runBench(
  module: WebAssembly.Module,
  settings: BenchSettings,
  onProgress: (p: Progress) => void = () => {},
  onRow: (row: EngineRow) => void = () => {},
  codecs: { module: WebAssembly.Module; onRow?: (row: CodecRow) => void } | null = null,
): Promise<BenchResult> {
  const codecRuns = codecs ? CODECS.length * (2 * settings.reps + 1) : 0;
  const total = settings.peers.length * settings.reps * KINDS.length + settings.peers.length + codecRuns;
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
  const codecRows = codecs
    ? await runCodecs(
        module,
        codecs.module,
        settings,
        (p) => onProgress({ ...p, done: done++, total }),
        codecs.onRow,
      )
    : null;
  const network =
    settings.loss !== DEFAULT_SETTINGS.loss || settings.jitter !== DEFAULT_SETTINGS.jitter
      ? { loss: settings.loss, jitter_quanta: settings.jitter }
      : undefined;
  return {
    ...(network ? { network } : {}),
    engine: doneRows,
    ...(codecRows ? { codec: codecRows } : {}),
    max_peers_under_5pct: maxPeers,
    machine: {
      userAgent: navigator.userAgent,
      hardwareConcurrency: navigator.hardwareConcurrency,
      crossOriginIsolated: globalThis.crossOriginIsolated,
    },
    date: new Date().toISOString(),
  };
}

/**
 * The codec rows at CODEC_PEERS peers: per codec, a network-only run and a WASM engine run,
 * interleaved as the engine rows are, R times. Reports progress once per run (untimed first runs
 * included).
 */
async function runCodecs(
  module: WebAssembly.Module,
  opus: WebAssembly.Module,
  settings: BenchSettings,
  onProgress: (p: Omit<Progress, 'done' | 'total'>) => void,
  onRow: (row: CodecRow) => void = () => {},
): Promise<CodecRow[]> {
  const peers = CODEC_PEERS;
  const quanta = quantaFor(peers, settings.work);
  const warmup = warmupFor(peers);
  // Every packet encoded once, before anything is timed.
  const feeds = CODECS.map((c) => {
    if (c.bitrate === 0) return { feed: { module: opus, packets: null }, payloadBytes: PACKET_BYTES - 16 };
    const packets = encodeOpusLoops(opus, peers, c.bitrate, AMPLITUDE);
    return { feed: { module: opus, packets }, payloadBytes: packets.payloadBytes };
  });
  const kinds = ['net', 'wasm'] as const;
  const times = CODECS.map(() => ({ net: [] as number[], wasm: [] as number[] }));
  const under = CODECS.map(() => [] as number[]);
  const last: (PeerTotals | undefined)[] = CODECS.map(() => undefined);
  for (let c = 0; c < CODECS.length; c++) {
    onProgress({ peers, kind: 'wasm', codec: CODECS[c].codec, rep: -1 });
    for (const kind of kinds) await timeRun(kind, peers, 200, 200, settings, module, feeds[c].feed);
  }
  let rows: CodecRow[] = [];
  for (let rep = 0; rep < settings.reps; rep++) {
    for (let c = 0; c < CODECS.length; c++) {
      for (let k = 0; k < kinds.length; k++) {
        const kind = kinds[(k + rep + c) % kinds.length];
        onProgress({ peers, kind, codec: CODECS[c].codec, rep });
        const r = await timeRun(kind, peers, quanta, warmup, settings, module, feeds[c].feed);
        times[c][kind].push(r.ms);
        if (kind === 'wasm') {
          under[c].push(r.underruns);
          last[c] = r.counters;
        }
      }
    }
    const perPeerQuantum = (ms: number) => (ms * 1e6) / (quanta * peers);
    const wasm = times.map((t) => median(t.wasm) - median(t.net));
    rows = CODECS.map((codec, c) => {
      const t = last[c]!;
      const opus = codec.bitrate > 0;
      return {
        codec: codec.codec,
        peers,
        wasm_ns_per_peer_quantum: round(perPeerQuantum(wasm[c]), 1),
        over_pcm16: round(wasm[c] / wasm[0], 2),
        wasm_quantum_fraction: round((wasm[c] * 1e6) / quanta / QUANTUM_NS, 5),
        net_ns_per_peer_quantum: round(perPeerQuantum(median(times[c].net)), 1),
        frames: opus ? OPUS_FRAMES : QUANTUM_FRAMES,
        channels: 2,
        kbps: opus ? codec.bitrate / 1000 : (SAMPLE_RATE * 2 * 16) / 1000,
        payload_bytes: round(feeds[c].payloadBytes, 1),
        underruns: Math.max(...under[c]),
        received: t.received,
        lost: t.lost,
        concealed: t.concealed,
        undecodable: t.undecodable,
        malformed: t.malformed,
        min_peer_rms: round(t.minRms, 4),
        quanta,
        reps: rep + 1,
      };
    });
    for (const row of rows) onRow(row);
  }
  return rows;
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
