// Main-thread side of the engine: compiles the WASM, loads the one engine worklet, and hands the
// net side the rings it exchanges packets through.

import wasmUrl from '../../../wasm/pkg/tutti_wasm_bg.wasm?url';
import opusUrl from '../../../wasm/opus/pkg/tutti_opus.wasm?url';
import workletUrl from './engine-worklet.ts?worker&url';
import {
  createBuffers,
  DEFAULT_CONFIG,
  type Control,
  type EngineBuffers,
  type EngineConfig,
} from './engine-core';

export { wasmUrl, workletUrl };

import { engineUnavailableReason } from './support';

let compiled: Promise<WebAssembly.Module> | null = null;
let compiledOpus: Promise<WebAssembly.Module> | null = null;

/** Compiles the engine's WebAssembly once per page. */
export function engineModule(): Promise<WebAssembly.Module> {
  compiled ??= WebAssembly.compileStreaming(fetch(wasmUrl));
  return compiled;
}

/** Compiles the codec module (libopus, instantiated in the worklet beside the engine) once per page. */
export function opusModule(): Promise<WebAssembly.Module> {
  compiledOpus ??= WebAssembly.compileStreaming(fetch(opusUrl));
  return compiledOpus;
}

export interface EngineHandle {
  node: AudioWorkletNode;
  buffers: EngineBuffers;
  config: EngineConfig;
  control(msg: Control): void;
}

/** How long the engine's processor may take to say it is ready before the start counts as failed. */
export const ENGINE_READY_TIMEOUT_MS = 20_000;

/** Creates the one engine node of this client in `ctx` (48 kHz expected). */
export async function createEngine(
  ctx: BaseAudioContext,
  config: EngineConfig = DEFAULT_CONFIG,
  buffers: EngineBuffers = createBuffers(),
): Promise<EngineHandle> {
  const reason = engineUnavailableReason();
  if (reason) throw new Error(reason);
  const [module, opus] = await Promise.all([
    engineModule(),
    opusModule(),
    ctx.audioWorklet.addModule(workletUrl),
  ]);
  const node = new AudioWorkletNode(ctx, 'tutti-engine', {
    numberOfInputs: 1,
    numberOfOutputs: 1,
    outputChannelCount: [2],
    channelCount: config.captureChannels,
    channelCountMode: 'explicit',
    processorOptions: { module, opus, buffers, config },
  });
  await new Promise<void>((resolve, reject) => {
    // Bounded: a processor that never answers (its thread never ran it) is an error the view
    // shows, not a join that waits for ever.
    const timer = setTimeout(
      () => reject(new Error(`the engine did not answer within ${ENGINE_READY_TIMEOUT_MS / 1000} s`)),
      ENGINE_READY_TIMEOUT_MS,
    );
    const settle = (err: Error | null): void => {
      clearTimeout(timer);
      if (err) reject(err);
      else resolve();
    };
    node.onprocessorerror = () => settle(new Error('the engine processor failed to start'));
    node.port.onmessage = (ev: MessageEvent<{ type: string; message?: string }>) => {
      if (ev.data.type === 'ready') settle(null);
      else if (ev.data.type === 'error') settle(new Error(ev.data.message));
    };
  });
  return { node, buffers, config, control: (msg) => node.port.postMessage(msg) };
}
