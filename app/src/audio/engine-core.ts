// The engine as the AudioWorklet drives it: the WASM core, its rings and its stats block.
//
// This module runs inside AudioWorkletGlobalScope, which has no TextDecoder, fetch, URL or
// performance: it needs none of them. The compiled WebAssembly.Module comes from the main thread
// in processorOptions and is instantiated synchronously here.
//
// Per quantum, process() copies new inbound ring bytes into the engine's mirror in linear memory,
// runs the engine, copies its output quantum out and any new outbound bytes into the outbound
// ring, and publishes the ring counters. Every few quanta it publishes the stats block, and about
// once a second the latency histogram block (latency.ts), each under its seqlock. It allocates
// nothing: every typed-array view is made in
// the constructor (and re-made only if linear memory grew, which happens only when a peer joins).

import {
  BUFFER_CEILING_FRAMES,
  BUFFER_FLOOR_FRAMES,
  DEFAULT_BUFFER_POLICY,
  FIXED_PACKETS_DEFAULT,
  sanitizePolicy,
  type BufferPolicy,
} from './buffer-policy';
import { DATA_OFFSET } from './ring';
import { OPUS_IMPORT_MODULE, OpusModule, opusImports } from './opus-module';
import { RingWriter } from './ring-ends';
import { RingMirror } from './ring-mirror';
import { G_SEQUENCE, STATS_BYTES } from './stats';
import { HB_SEQUENCE, HISTOGRAM_BYTES } from './latency';

export interface EngineConfig {
  /** Peer slots, at most 256 (the stats block's rows). */
  maxPeers: number;
  /** Frames per outgoing packet. */
  blockFrames: 32 | 64 | 128 | 256;
  /** Outgoing sample format: PCM16, PCM24 or float32. */
  bits: 16 | 24 | 32;
  /** Outgoing channels. */
  captureChannels: 1 | 2;
  /** Jitter-buffer mode for every peer. */
  buffer: BufferPolicy;
}

export interface EngineBuffers {
  /** Net side → engine packets (ring layout in ring.ts; record tag = peer slot). */
  inbound: SharedArrayBuffer;
  /** Engine → net side packets (record tag = 0xFFFF: every peer). */
  outbound: SharedArrayBuffer;
  /** The stats block (stats.ts), published every few quanta. */
  stats: SharedArrayBuffer;
  /**
   * The latency histogram block (latency.ts), published about once a second (HISTOGRAMS_EVERY
   * quanta). createBuffers always makes it; without it the histograms are not published.
   */
  histograms?: SharedArrayBuffer;
}

export type Control =
  | { type: 'add-peer'; slot: number }
  | { type: 'remove-peer'; slot: number }
  | { type: 'strip'; slot: number; gain: number; pan: number; mute: boolean; solo: boolean }
  /**
   * The peer in `slot` takes `layer` of our stream (0 as sent, 1 Opus 128, 2 Opus 64: the
   * engine's Layer::code; HUB_LAYERS in net/protocol.ts names them in this order), encoded once per layer whatever the number
   * of its takers (core/src/capture.rs). Refused (the peer keeps what it takes) without the
   * codec module or a peer in `slot`.
   */
  | { type: 'send-layer'; slot: number; layer: number }
  | { type: 'master'; gain: number }
  /**
   * Starts (with the ring the tracks go into) or stops a recording. While recording, every
   * quantum writes one record per track into `ring` (layout: recording.ts).
   */
  | { type: 'record'; on: true; ring: SharedArrayBuffer }
  | { type: 'record'; on: false }
  /**
   * The clock offset of the peer in `slot`: our wall clock − that peer's, µs, from the net side's
   * ping/pong (NaN: unknown). The network one-way stage is recorded only while it is known.
   */
  | { type: 'clock-offset'; slot: number; offsetUs: number }
  /** Empties every latency histogram (each peer's stages and the capture interval). */
  | { type: 'reset-latency' }
  /**
   * Round-trip probe (core/src/probe.rs): `clicks` clicks (1..16) into our outgoing stream, our
   * input muted meanwhile, timed when they come back in the stream of the peer in `slot` (a
   * loopback, or a peer that echoes us). Results in the stats block (G_PROBE_*).
   */
  | { type: 'probe'; slot: number; clicks: number }
  | { type: 'probe-stop' }
  /** Echoes the stream of the peer in `slot` as our outgoing audio for `ms` ms (0: stop). */
  | { type: 'echo'; slot: number; ms: number }
  /** The devices' output and input latency, µs (NaN: unknown), for the mouth-to-ear stage. */
  | { type: 'device-latency'; outputUs: number; inputUs: number }
  | ({ type: 'buffer' } & BufferPolicy);

export interface EngineCore {
  /** Applies a control message. Called from the port's message handler, never from process(). */
  control(msg: Control): void;
  /**
   * Renders one 128-frame quantum; `input` holds 0, 1 or 2 channels of local input. `wallUs` is
   * the wall clock (µs) at which this quantum reached the engine, for the capture-interval stage;
   * in a worklet that is Date.now() × 1000, whole milliseconds. Omitted: not recorded.
   */
  process(
    input: Float32Array[],
    outL: Float32Array,
    outR: Float32Array,
    nowFrames: number,
    wallUs?: number,
  ): void;
}

export const DEFAULT_CONFIG: EngineConfig = {
  maxPeers: 64,
  blockFrames: 128,
  bits: 16,
  captureChannels: 2,
  buffer: DEFAULT_BUFFER_POLICY,
};

/** Default ring sizes: 1 MiB inbound holds ~2000 PCM16 stereo packets; 64 KiB outbound. */
export const INBOUND_BYTES = 1 << 20;
export const OUTBOUND_BYTES = 1 << 16;
/** Quanta between two publications of the stats block (~21 ms). */
export const STATS_EVERY = 8;
/** Quanta between two publications of the histogram block (1 s at 48 kHz). */
export const HISTOGRAMS_EVERY = 375;
const QUANTUM = 128;

// Recording ring records: tag = track, time = quanta since the recording started, payload = one
// quantum of the track as float32, left then right (RECORD_TRACK_SAMPLES values).
export const TRACK_MIX = 0;
export const TRACK_INPUT = 1;
/** A peer's track tag is TRACK_PEER_BASE + its slot. */
export const TRACK_PEER_BASE = 2;
export const RECORD_TRACK_SAMPLES = 2 * QUANTUM;

/** Allocates the shared buffers an engine needs. */
export function createBuffers(opts: { inboundBytes?: number; outboundBytes?: number } = {}): EngineBuffers {
  return {
    inbound: new SharedArrayBuffer(DATA_OFFSET + (opts.inboundBytes ?? INBOUND_BYTES)),
    outbound: new SharedArrayBuffer(DATA_OFFSET + (opts.outboundBytes ?? OUTBOUND_BYTES)),
    stats: new SharedArrayBuffer(STATS_BYTES),
    histograms: new SharedArrayBuffer(HISTOGRAM_BYTES),
  };
}

/** The engine's exports: numbers only (see wasm/src/lib.rs). */
export interface TuttiExports {
  memory: WebAssembly.Memory;
  tutti_create(
    maxPeers: number,
    blockFrames: number,
    bits: number,
    channels: number,
    inboundBytes: number,
    outboundBytes: number,
  ): number;
  tutti_destroy(h: number): void;
  tutti_inbound_ptr(h: number): number;
  tutti_outbound_ptr(h: number): number;
  tutti_input_ptr(h: number, ch: number): number;
  tutti_output_ptr(h: number, ch: number): number;
  tutti_stats_ptr(h: number): number;
  tutti_io_ptr(h: number): number;
  tutti_histograms_ptr(h: number): number;
  tutti_histograms_len(h: number): number;
  tutti_write_histograms(h: number): void;
  tutti_set_clock_offset(h: number, slot: number, offsetUs: number): number;
  tutti_reset_latency(h: number): void;
  tutti_start_probe(h: number, slot: number, clicks: number): number;
  tutti_stop_probe(h: number): void;
  tutti_set_echo(h: number, slot: number, ms: number): number;
  tutti_set_device_latency(h: number, outputUs: number, inputUs: number): void;
  tutti_add_peer(h: number, slot: number): number;
  tutti_remove_peer(h: number, slot: number): number;
  tutti_set_strip(h: number, slot: number, gain: number, pan: number, mute: number, solo: number): number;
  tutti_set_send_layer(h: number, slot: number, layer: number): number;
  tutti_set_master(h: number, gain: number): void;
  tutti_set_recording(h: number, on: number): void;
  tutti_stem_ptr(h: number, slot: number, channel: number): number;
  tutti_set_buffer(h: number, fixed: number, floor: number, ceiling: number, packets: number): void;
  tutti_process(h: number, now: number, wallUs: number, inputChannels: number): void;
  tutti_write_stats(h: number): void;
  tutti_stats_len(h: number): number;
}

// I/O words shared with tutti_process (wasm/src/lib.rs).
const IO_IN_READ = 0;
const IO_IN_WRITE = 1;
const IO_OUT_READ = 2;
const IO_OUT_WRITE = 3;
const IO_RECORDS = 4;
const IO_RESYNCS = 5;
const IO_SEND_DROPPED = 6;
const IO_SEND_DROPPED_BYTES = 7;

/**
 * Instantiates the engine module synchronously. wasm-bindgen leaves one import in a module whose
 * API is numbers only: a hook that seeds the table of JavaScript values passed across the
 * boundary. No JavaScript value ever crosses it here, so that table is never read and the hook
 * has nothing to do. The engine also imports the codec module's calls (`tutti_opus`, see
 * wasm/src/opus.rs): linked to `opus` when given, else to calls that refuse (its peers then take
 * no Opus). Any other import means the module is not the one this host was written for.
 */
export function instantiateEngine(module: WebAssembly.Module, opus: OpusModule | null = null): TuttiExports {
  let memory: WebAssembly.Memory | null = null;
  const codec = opusImports(opus, () => memory);
  const imports: Record<string, Record<string, (...args: number[]) => number | void>> = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.kind === 'function' && imp.module === OPUS_IMPORT_MODULE && imp.name in codec) {
      (imports[imp.module] ??= {})[imp.name] = codec[imp.name as keyof typeof codec];
      continue;
    }
    if (imp.kind !== 'function' || !imp.name.includes('init_externref_table')) {
      throw new Error(`engine module has an unexpected import: ${imp.module}.${imp.name}`);
    }
    (imports[imp.module] ??= {})[imp.name] = () => {};
  }
  const instance = new WebAssembly.Instance(module, imports);
  const exports = instance.exports as unknown as TuttiExports & { __wbindgen_start?: () => void };
  memory = exports.memory;
  exports.__wbindgen_start?.();
  return exports;
}

export class WasmEngineCore implements EngineCore {
  readonly exports: TuttiExports;
  /** The codec module instantiated for the engine's peers (null without one). */
  readonly opus: OpusModule | null;
  private readonly handle: number;
  private readonly buffers: EngineBuffers;
  private readonly inboundMirror: RingMirror;
  private readonly outboundMirror: RingMirror;
  private readonly statsShared: Float64Array;
  private memoryBuffer!: ArrayBuffer;
  private io!: Uint32Array;
  private inL!: Float32Array;
  private inR!: Float32Array;
  private outLView!: Float32Array;
  private outRView!: Float32Array;
  private statsView!: Float64Array;
  private readonly histogramsShared: Float64Array | null;
  private histogramsView!: Float64Array;
  private quanta = 0;
  private statsDirty = true;
  private histogramsDirty = true;
  /** Recording: the ring, the quantum count since it started, the slots that hold a peer. */
  private recordWriter: RingWriter | null = null;
  private recordQuanta = 0;
  private readonly slots: Int32Array;
  private slotCount = 0;
  private stemL: (Float32Array | null)[] = [];
  private stemR: (Float32Array | null)[] = [];
  /** One track's quantum, planar (left then right), and its bytes for the ring. */
  private readonly trackScratch = new Float32Array(RECORD_TRACK_SAMPLES);
  private readonly trackBytes = new Uint8Array(this.trackScratch.buffer);

  /**
   * `opus`: the codec module's compiled WebAssembly (wasm/opus), instantiated here beside the
   * engine so that its peers decode Opus; without it they take PCM only.
   */
  constructor(
    module: WebAssembly.Module,
    buffers: EngineBuffers,
    config: EngineConfig,
    opus: WebAssembly.Module | null = null,
  ) {
    this.opus = opus ? new OpusModule(opus) : null;
    this.exports = instantiateEngine(module, this.opus);
    this.buffers = buffers;
    this.slots = new Int32Array(config.maxPeers);
    const inCap = buffers.inbound.byteLength - DATA_OFFSET;
    const outCap = buffers.outbound.byteLength - DATA_OFFSET;
    const e = this.exports;
    this.handle = e.tutti_create(
      config.maxPeers,
      config.blockFrames,
      config.bits,
      config.captureChannels,
      inCap,
      outCap,
    );
    if (this.handle === 0) {
      throw new Error(
        `engine refused its configuration: ${config.maxPeers} peers, ${config.blockFrames}-frame ` +
          `blocks, ${config.bits} bits, ${config.captureChannels} channels, rings ${inCap}/${outCap} bytes`,
      );
    }
    // Only the globals and this engine's rows are published; rows past maxPeers stay zero.
    this.statsShared = new Float64Array(buffers.stats, 0, e.tutti_stats_len(this.handle));
    const histogramsLen = e.tutti_histograms_len(this.handle);
    this.histogramsShared =
      buffers.histograms && buffers.histograms.byteLength >= histogramsLen * 8
        ? new Float64Array(buffers.histograms, 0, histogramsLen)
        : null;
    this.inboundMirror = new RingMirror(buffers.inbound, this.memoryView(e.tutti_inbound_ptr, inCap));
    this.outboundMirror = new RingMirror(buffers.outbound, this.memoryView(e.tutti_outbound_ptr, outCap));
    // The outbound mirror must start equal to the ring's data area.
    this.outboundMirror.syncMirror();
    this.bind();
    // The engine starts where the rings are now (they may have been used before).
    this.io[IO_IN_READ] = this.inboundMirror.loadRead();
    this.io[IO_OUT_WRITE] = this.outboundMirror.loadWrite();
    this.control({ type: 'buffer', ...config.buffer });
  }

  private memoryView(ptrOf: (h: number) => number, bytes: number): Uint8Array {
    return new Uint8Array(this.exports.memory.buffer, ptrOf(this.handle), bytes);
  }

  /** (Re)creates every view on linear memory; needed after the memory grew. */
  private bind(): void {
    const e = this.exports;
    const h = this.handle;
    const buf = e.memory.buffer;
    this.memoryBuffer = buf;
    this.io = new Uint32Array(buf, e.tutti_io_ptr(h), 8);
    this.inL = new Float32Array(buf, e.tutti_input_ptr(h, 0), QUANTUM);
    this.inR = new Float32Array(buf, e.tutti_input_ptr(h, 1), QUANTUM);
    this.outLView = new Float32Array(buf, e.tutti_output_ptr(h, 0), QUANTUM);
    this.outRView = new Float32Array(buf, e.tutti_output_ptr(h, 1), QUANTUM);
    this.statsView = new Float64Array(buf, e.tutti_stats_ptr(h), e.tutti_stats_len(h));
    this.histogramsView = new Float64Array(buf, e.tutti_histograms_ptr(h), e.tutti_histograms_len(h));
    this.stemL = [];
    this.stemR = [];
    for (let i = 0; i < this.slots.length; i++) {
      const l = e.tutti_stem_ptr(h, i, 0);
      this.stemL.push(l === 0 ? null : new Float32Array(buf, l, QUANTUM));
      this.stemR.push(l === 0 ? null : new Float32Array(buf, e.tutti_stem_ptr(h, i, 1), QUANTUM));
    }
    this.inboundMirror.rebind(this.memoryView(e.tutti_inbound_ptr, this.inboundMirror.capacity));
    this.outboundMirror.rebind(this.memoryView(e.tutti_outbound_ptr, this.outboundMirror.capacity));
  }

  control(msg: Control): void {
    const e = this.exports;
    const h = this.handle;
    switch (msg.type) {
      case 'add-peer':
        e.tutti_add_peer(h, msg.slot);
        this.setSlot(msg.slot, true);
        break;
      case 'remove-peer':
        e.tutti_remove_peer(h, msg.slot);
        this.setSlot(msg.slot, false);
        break;
      case 'record':
        e.tutti_set_recording(h, msg.on ? 1 : 0);
        this.recordWriter = msg.on ? new RingWriter(msg.ring) : null;
        this.recordQuanta = 0;
        break;
      case 'strip':
        e.tutti_set_strip(h, msg.slot, msg.gain, msg.pan, msg.mute ? 1 : 0, msg.solo ? 1 : 0);
        break;
      case 'send-layer':
        e.tutti_set_send_layer(h, msg.slot, msg.layer >>> 0);
        break;
      case 'master':
        e.tutti_set_master(h, msg.gain);
        break;
      case 'clock-offset':
        // NaN (unknown) and any other non-finite value clear the offset in the engine.
        e.tutti_set_clock_offset(h, msg.slot, Number(msg.offsetUs));
        break;
      case 'reset-latency':
        e.tutti_reset_latency(h);
        this.histogramsDirty = true;
        break;
      case 'probe':
        e.tutti_start_probe(h, msg.slot, msg.clicks);
        break;
      case 'probe-stop':
        e.tutti_stop_probe(h);
        break;
      case 'echo':
        e.tutti_set_echo(h, msg.slot, Math.max(0, Math.min(0xffffffff, Math.round(msg.ms) || 0)));
        break;
      case 'device-latency':
        e.tutti_set_device_latency(h, Number(msg.outputUs), Number(msg.inputUs));
        this.histogramsDirty = true;
        break;
      case 'buffer': {
        const b = sanitizePolicy(msg);
        e.tutti_set_buffer(
          h,
          b.mode === 'fixed' ? 1 : 0,
          b.mode === 'adaptive' ? b.floorFrames : BUFFER_FLOOR_FRAMES,
          b.mode === 'adaptive' ? b.ceilingFrames : BUFFER_CEILING_FRAMES,
          b.mode === 'fixed' ? b.packets : FIXED_PACKETS_DEFAULT,
        );
        break;
      }
    }
    // A peer's stem moved (added or removed) or memory grew: re-make the views.
    if (msg.type === 'add-peer' || msg.type === 'remove-peer' || e.memory.buffer !== this.memoryBuffer) {
      this.bind();
    }
    // A slot's histograms appear or go: publish them with the next quantum.
    if (msg.type === 'add-peer' || msg.type === 'remove-peer') this.histogramsDirty = true;
    this.statsDirty = true;
  }

  /** Keeps `slots[0..slotCount)` equal to the slots that hold a peer. */
  private setSlot(slot: number, present: boolean): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots.length) return;
    let at = -1;
    for (let i = 0; i < this.slotCount; i++) if (this.slots[i] === slot) at = i;
    if (present && at < 0) this.slots[this.slotCount++] = slot;
    if (!present && at >= 0) this.slots[at] = this.slots[--this.slotCount];
  }

  /** Writes this quantum's tracks into the recording ring: the mix, the input, each peer. */
  private recordQuantum(channels: number): void {
    const w = this.recordWriter!;
    const t = this.recordQuanta++;
    const s = this.trackScratch;
    s.set(this.outLView, 0);
    s.set(this.outRView, QUANTUM);
    w.push(TRACK_MIX, t, this.trackBytes);
    if (channels === 0) s.fill(0);
    else {
      s.set(this.inL, 0);
      s.set(channels === 2 ? this.inR : this.inL, QUANTUM);
    }
    w.push(TRACK_INPUT, t, this.trackBytes);
    for (let i = 0; i < this.slotCount; i++) {
      const slot = this.slots[i];
      const l = this.stemL[slot];
      const r = this.stemR[slot];
      if (!l || !r) continue;
      s.set(l, 0);
      s.set(r, QUANTUM);
      w.push(TRACK_PEER_BASE + slot, t, this.trackBytes);
    }
  }

  process(
    input: Float32Array[],
    outL: Float32Array,
    outR: Float32Array,
    nowFrames: number,
    wallUs = NaN,
  ): void {
    const e = this.exports;
    if (e.memory.buffer !== this.memoryBuffer) this.bind();
    const io = this.io;

    // Inbound: copy what the net side published since the last quantum into the mirror.
    io[IO_IN_WRITE] = this.inboundMirror.pull();
    // Outbound: the engine may fill up to what the net side has consumed.
    const outWriteBefore = io[IO_OUT_WRITE];
    io[IO_OUT_READ] = this.outboundMirror.loadRead();

    let channels = 0;
    if (input.length > 0 && input[0].length === QUANTUM) {
      this.inL.set(input[0]);
      channels = 1;
      if (input.length > 1 && input[1].length === QUANTUM) {
        this.inR.set(input[1]);
        channels = 2;
      }
    }

    e.tutti_process(this.handle, nowFrames, wallUs, channels);

    this.inboundMirror.commitRead(io[IO_IN_READ], io[IO_RECORDS], io[IO_RESYNCS]);
    if (io[IO_OUT_WRITE] !== outWriteBefore) {
      this.outboundMirror.publish(outWriteBefore, io[IO_OUT_WRITE]);
      this.outboundMirror.notify();
    }
    this.outboundMirror.addDropped(io[IO_SEND_DROPPED], io[IO_SEND_DROPPED_BYTES]);

    outL.set(this.outLView);
    outR.set(this.outRView);
    if (this.recordWriter) this.recordQuantum(channels);

    this.quanta++;
    if (this.statsDirty || this.quanta % STATS_EVERY === 0) this.publishStats();
    if (this.histogramsDirty || this.quanta % HISTOGRAMS_EVERY === 0) this.publishHistograms();
  }

  /** Copies the engine's stats into the shared block under the seqlock. */
  publishStats(): void {
    this.exports.tutti_write_stats(this.handle);
    const shared = this.statsShared;
    const seq = shared[G_SEQUENCE];
    shared[G_SEQUENCE] = seq + 1;
    // Index 0 of the engine's block is the sequence word, which only this publisher owns.
    this.statsView[G_SEQUENCE] = seq + 1;
    shared.set(this.statsView);
    shared[G_SEQUENCE] = seq + 2;
    this.statsDirty = false;
  }

  /** Copies the engine's latency histograms into the shared histogram block under its seqlock. */
  publishHistograms(): void {
    this.histogramsDirty = false;
    const shared = this.histogramsShared;
    if (!shared) return;
    this.exports.tutti_write_histograms(this.handle);
    const seq = shared[HB_SEQUENCE];
    shared[HB_SEQUENCE] = seq + 1;
    this.histogramsView[HB_SEQUENCE] = seq + 1;
    shared.set(this.histogramsView);
    shared[HB_SEQUENCE] = seq + 2;
  }

  /** Frees the engine. */
  destroy(): void {
    this.exports.tutti_destroy(this.handle);
  }
}
