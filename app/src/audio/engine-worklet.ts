// The one engine AudioWorkletProcessor: every remote peer of this client is played by it.
//
// processorOptions: { module: WebAssembly.Module, opus: WebAssembly.Module | null (the codec
// module, libopus), buffers: EngineBuffers, config: EngineConfig }.
// Control messages (engine-core.ts `Control`) arrive on the port and are applied between quanta.
// If the engine cannot start, the processor posts { type: 'error', message } once and outputs
// silence.

import { WasmEngineCore, type Control, type EngineBuffers, type EngineConfig } from './engine-core';

interface EngineProcessorOptions {
  module: WebAssembly.Module;
  opus?: WebAssembly.Module | null;
  buffers: EngineBuffers;
  config: EngineConfig;
}

const NO_INPUT: Float32Array[] = [];

class EngineProcessor extends AudioWorkletProcessor {
  private core: WasmEngineCore | null = null;

  constructor(options: AudioWorkletNodeOptions) {
    super();
    const opts = options.processorOptions as EngineProcessorOptions;
    try {
      this.core = new WasmEngineCore(opts.module, opts.buffers, opts.config, opts.opus ?? null);
      this.port.postMessage({ type: 'ready' });
    } catch (err) {
      this.port.postMessage({ type: 'error', message: String(err) });
    }
    this.port.onmessage = (ev: MessageEvent<Control>) => {
      try {
        this.core?.control(ev.data);
      } catch (err) {
        this.port.postMessage({ type: 'error', message: String(err) });
      }
    };
  }

  process(inputs: Float32Array[][], outputs: Float32Array[][]): boolean {
    const out = outputs[0];
    if (!this.core || !out || out.length === 0) return true;
    const left = out[0];
    const right = out.length > 1 ? out[1] : out[0];
    // Date.now() is the only wall clock in AudioWorkletGlobalScope (no performance): whole
    // milliseconds, so single capture intervals are quantised to 1 ms (see core/src/engine.rs).
    // The true time lies anywhere in the millisecond Date.now() names: pass its middle, so that
    // the delivery stage (arrival at the pump, in µs, to this quantum) is not biased by 0.5 ms.
    this.core.process(inputs[0] ?? NO_INPUT, left, right, currentFrame, Date.now() * 1000 + 500);
    return true;
  }
}

registerProcessor('tutti-engine', EngineProcessor);
