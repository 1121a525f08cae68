// What the benchmark page and its worklet processors agree on (bench-worklet.ts).

import { DEFAULT_BUFFER_POLICY } from '../../app/src/audio/buffer-policy';
import type { EngineBuffers, EngineConfig } from '../../app/src/audio/engine-core';
import type { OpusPackets } from './feeder';

/** processorOptions of the bench-net, bench-wasm and bench-js processors. */
export interface BenchOptions {
  /** Synthetic peers, in slots 0..peers-1. */
  peers: number;
  /** Seed of the feeder's delays and losses (the same for all three processors). */
  seed: number;
  buffers: EngineBuffers;
  /** Float64Array of C_* values, updated by the processor after every quantum. */
  counters: SharedArrayBuffer;
  /** Packet loss probability (default 0.01). */
  loss: number;
  /** Largest arrival delay in quanta (default 3). */
  maxDelay: number;
  /** The compiled engine (bench-wasm only). */
  module?: WebAssembly.Module;
  /**
   * The compiled codec module (libopus), instantiated beside the engine as the app's worklet
   * does (bench-wasm only; the codec rows pass it for PCM16 too).
   */
  opus?: WebAssembly.Module;
  /** The peers send these Opus packets instead of PCM16 (opus-feed.ts). */
  opusPackets?: OpusPackets;
}

/** Packets the feeder's senders produced. */
export const C_SENT = 0;
/** Packets written into the inbound ring. */
export const C_DELIVERED = 1;
/** Packets dropped on purpose (1%). */
export const C_LOST = 2;
/** Packets the ring refused (full): must stay 0. */
export const C_REFUSED = 3;
/** Quanta rendered. */
export const C_QUANTA = 4;
export const COUNTERS_BYTES = 8 * 8;

/** The engine configuration both engines run with in the benchmark. */
export function benchConfig(peers: number): EngineConfig {
  return {
    maxPeers: Math.max(1, peers),
    blockFrames: 128,
    bits: 16,
    captureChannels: 2,
    buffer: DEFAULT_BUFFER_POLICY,
  };
}
