// The benchmark's AudioWorklet processors. Each renders one quantum per process() call, in an
// OfflineAudioContext that the page times from the main thread (bench/README.md):
//
//   bench-net   the synthetic network only (feeder → inbound ring; the ring is emptied without
//               reading it): the baseline subtracted from the two engines;
//   bench-wasm  feeder, then the WASM engine (WasmEngineCore) renders the quantum;
//   bench-js    feeder, then the plain-JavaScript engine (JsEngineCore) renders the quantum.
//
// processorOptions: BenchOptions (messages.ts); with `opusPackets` the feeder sends Opus frames,
// and bench-wasm links the engine to the codec module in `opus`. `counters` receives the feeder's
// totals after every quantum, so the page can check that the engine read every packet it was sent.
// The constructor posts { type: 'ready' } or { type: 'error', message } on the port.

import { WasmEngineCore, type EngineCore } from '../../app/src/audio/engine-core';
import { JsEngineCore } from './js-engine-core';
import { HEADER_WORDS, READ_WORD, WRITE_WORD } from '../../app/src/audio/ring';
import { Feeder } from './feeder';
import { benchConfig, C_DELIVERED, C_LOST, C_QUANTA, C_REFUSED, C_SENT, type BenchOptions } from './messages';

const NO_INPUT: Float32Array[] = [];

type Kind = 'net' | 'wasm' | 'js';

class BenchProcessor extends AudioWorkletProcessor {
  private readonly feeder: Feeder | null = null;
  private readonly engine: EngineCore | null = null;
  private readonly ringWords: Uint32Array | null = null;
  private readonly counters: Float64Array | null = null;
  private quantum = 0;

  constructor(options: AudioWorkletNodeOptions, kind: Kind) {
    super();
    try {
      const opts = options.processorOptions as BenchOptions;
      const peers = opts.peers | 0;
      this.feeder = new Feeder(opts.buffers.inbound, {
        peers,
        seed: opts.seed,
        loss: opts.loss,
        maxDelay: opts.maxDelay,
        opus: opts.opusPackets,
      });
      this.counters = new Float64Array(opts.counters);
      if (kind === 'net') {
        this.ringWords = new Uint32Array(opts.buffers.inbound, 0, HEADER_WORDS);
      } else {
        const config = benchConfig(peers);
        if (kind === 'wasm') {
          if (!opts.module) throw new Error('bench-wasm needs the compiled engine module');
          this.engine = new WasmEngineCore(opts.module, opts.buffers, config, opts.opus ?? null);
        } else {
          this.engine = new JsEngineCore(opts.buffers, config);
        }
        for (let k = 0; k < peers; k++) this.engine.control({ type: 'add-peer', slot: k });
      }
      this.port.postMessage({ type: 'ready' });
    } catch (err) {
      this.port.postMessage({ type: 'error', message: String(err) });
    }
  }

  process(_inputs: Float32Array[][], outputs: Float32Array[][]): boolean {
    const feeder = this.feeder;
    if (!feeder) return false;
    feeder.feed(this.quantum++);
    if (this.engine) {
      const out = outputs[0];
      this.engine.process(NO_INPUT, out[0], out[1], currentFrame);
    } else if (this.ringWords) {
      // Network only: empty the ring without reading it, so the producer never finds it full.
      Atomics.store(this.ringWords, READ_WORD, Atomics.load(this.ringWords, WRITE_WORD));
    }
    const c = this.counters!;
    c[C_SENT] = feeder.sent;
    c[C_DELIVERED] = feeder.delivered;
    c[C_LOST] = feeder.lost;
    c[C_REFUSED] = feeder.refused;
    c[C_QUANTA] = this.quantum;
    return true;
  }
}

registerProcessor(
  'bench-net',
  class extends BenchProcessor {
    constructor(options: AudioWorkletNodeOptions) {
      super(options, 'net');
    }
  },
);
registerProcessor(
  'bench-wasm',
  class extends BenchProcessor {
    constructor(options: AudioWorkletNodeOptions) {
      super(options, 'wasm');
    }
  },
);
registerProcessor(
  'bench-js',
  class extends BenchProcessor {
    constructor(options: AudioWorkletNodeOptions) {
      super(options, 'js');
    }
  },
);
