// The session's link to its audio engine: the AudioContext, the engine worklet, the microphone
// that feeds it, the local monitor path, the packet pump that moves the engine's packets to and
// from the network, and the taps on what the engine publishes (its stats block, its latency
// histograms, its output for captureOutput). It knows nothing of rooms or participants: the
// session tells it which slots to serve through `control`.

import { createEngine, type EngineHandle } from '../audio/host';
import { DEFAULT_CONFIG, type Control } from '../audio/engine-core';
import { StatsReader } from '../audio/stats-reader';
import { createTapBuffer, TAP_ARMED, TAP_WRITTEN, tapViews } from '../audio/tap';
import tapUrl from '../audio/tap-worklet.ts?worker&url';
import { HB_BLOCK_LEN, HB_SEQUENCE, readLatency, type LatencySnapshot } from '../audio/latency';
import { createPumpHost, type PumpHost } from '../net/net-host';
import type { EchoEvent } from '../net/pump';
import type { AudioSettings, RoomError } from './types';
import { dbToGain } from './view';
import { DEFAULT_BUFFER_SETTING, policyOf } from '../audio/buffer-policy';

export const SAMPLE_RATE = 48000;
/** Engine slots: more than any room the server admits by default (16). */
export const MAX_PEERS = 64;
/** The engine slot the hub's mix plays in (mix mode); participants get the others. */
export const HUB_MIX_SLOT = MAX_PEERS - 1;

export interface OutputCapture {
  left: Float32Array;
  right: Float32Array;
  sampleRate: number;
}

export class EngineLink {
  ctx: AudioContext | null = null;
  stream: MediaStream | null = null;
  engine: EngineHandle | null = null;
  pump: PumpHost | null = null;
  /** The engine's stats block, as last read (refresh()). */
  readonly stats = new StatsReader();
  private monitorGain: GainNode | null = null;
  /** The microphone as the graph delivers it to the engine. */
  private source: MediaStreamAudioSourceNode | null = null;
  private tapLoaded: Promise<void> | null = null;
  private readonly latencyScratch = new Float64Array(HB_BLOCK_LEN);
  /** The last histogram block read and the publication (its sequence word) it came from: the
   * engine publishes about once a second, the view and the history ask more often. */
  private latencyRead: { sequence: number; snap: LatencySnapshot } | null = null;
  /** The devices' latency last told to the engine, µs. */
  private deviceLatencySent = { outputUs: NaN, inputUs: NaN };

  /** `ended`: the session was left (long waits give up, a start in progress stops). */
  constructor(private readonly ended: () => boolean) {}

  /**
   * Opens the audio context on the chosen output, the microphone and the engine, and wires them:
   * microphone → engine → output, and microphone → monitor gain (silent) → output. 'ended' when
   * the session was left meanwhile; an error the view shows when something would not open.
   */
  async open(audio: AudioSettings): Promise<'ok' | 'ended' | RoomError> {
    const ctx = new AudioContext({ sampleRate: SAMPLE_RATE, latencyHint: 'interactive' });
    this.ctx = ctx;
    const sinkable = ctx as AudioContext & { setSinkId?: (id: string) => Promise<void> };
    if (audio.outputDeviceId && typeof sinkable.setSinkId === 'function') {
      await sinkable.setSinkId(audio.outputDeviceId).catch((err: unknown) => {
        console.warn(`output device not available, using the default: ${String(err)}`);
      });
    }
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({
        audio: {
          deviceId: audio.inputDeviceId ? { exact: audio.inputDeviceId } : undefined,
          channelCount: { ideal: audio.channels },
          echoCancellation: false,
          noiseSuppression: false,
          autoGainControl: false,
          latency: 0,
        } as MediaTrackConstraints,
      });
    } catch (err) {
      const name = err instanceof DOMException ? err.name : '';
      return {
        code: 'no-microphone',
        message:
          name === 'NotAllowedError'
            ? 'Microphone access was refused. Allow it for this site to play in a room.'
            : `No microphone could be opened (${name || String(err)}). Check the input device in the settings.`,
      };
    }
    if (this.ended()) return 'ended';

    try {
      this.engine = await createEngine(ctx, {
        ...DEFAULT_CONFIG,
        maxPeers: MAX_PEERS,
        blockFrames: audio.blockFrames,
        captureChannels: audio.channels,
        // The user's choice (audio setup); adaptive unless a fixed depth was picked.
        buffer: policyOf(audio.buffer ?? DEFAULT_BUFFER_SETTING),
      });
    } catch (err) {
      return { code: 'engine-unavailable', message: `The audio engine did not start: ${String(err)}` };
    }
    if (this.ended()) return 'ended';
    this.stats.attach(this.engine.buffers.stats);
    const source = ctx.createMediaStreamSource(this.stream);
    this.source = source;
    source.connect(this.engine.node);
    this.engine.node.connect(ctx.destination);
    this.monitorGain = ctx.createGain();
    this.monitorGain.gain.value = 0;
    source.connect(this.monitorGain).connect(ctx.destination);
    await ctx.resume().catch(() => {});
    return 'ok';
  }

  /**
   * Starts the packet pump on the engine's rings: in the net worker where this browser can hand
   * it channels, else on this thread. `onEcho` hears the pump's round-trip requests and answers.
   */
  openPump(where: 'worker' | 'main', onEcho?: (ev: EchoEvent) => void): PumpHost {
    const engine = this.engine;
    if (!engine) throw new Error('the engine is not open');
    this.pump = createPumpHost(engine.buffers.inbound, engine.buffers.outbound, MAX_PEERS, where, onEcho);
    return this.pump;
  }

  control(msg: Control): void {
    this.engine?.control(msg);
  }

  /** Fades the local monitor path in (at `gainDb`) or out. */
  setMonitor(on: boolean, gainDb: number): void {
    if (this.monitorGain && this.ctx) {
      this.monitorGain.gain.setTargetAtTime(on ? dbToGain(gainDb) : 0, this.ctx.currentTime, 0.01);
    }
  }

  /** The output device's latency as the context says it without blocking (outputSeconds), ms;
   * 0 before the context. */
  outputMs(): number {
    const ctx = this.ctx;
    return ctx ? outputSeconds(ctx) * 1000 : 0;
  }

  /** Stops the pump, the microphone and the engine, and closes the context. */
  async close(): Promise<void> {
    this.pump?.stop();
    this.stream?.getTracks().forEach((t) => t.stop());
    this.engine?.node.disconnect();
    await this.ctx?.close().catch(() => {});
  }

  /** Records `seconds` of what the engine sends to the output, or with `from` 'input' of the
   * microphone as the browser hands it to the engine (diagnostics and tests: what the engine
   * added is the difference). */
  async captureOutput(seconds: number, from: 'engine' | 'input' = 'engine'): Promise<OutputCapture> {
    const ctx = this.ctx;
    const engine = from === 'input' ? this.source : this.engine?.node;
    if (!ctx || !engine) throw new Error('the session has no audio yet');
    this.tapLoaded ??= ctx.audioWorklet.addModule(tapUrl);
    await this.tapLoaded;
    const frames = Math.ceil(seconds * ctx.sampleRate);
    const shared = createTapBuffer(frames);
    const views = tapViews(shared);
    const node = new AudioWorkletNode(ctx, 'tutti-tap', {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      channelCount: 2,
      channelCountMode: 'explicit',
      processorOptions: { shared },
    });
    engine.connect(node);
    // The tap outputs silence; it must reach the destination to be pulled by the graph.
    node.connect(ctx.destination);
    Atomics.store(views.header, TAP_ARMED, 1);
    // Bounded: a context that stopped rendering (suspended, closed) yields what it has.
    const deadline = performance.now() + seconds * 2000 + 2000;
    while (Atomics.load(views.header, TAP_WRITTEN) < frames) {
      await new Promise((r) => setTimeout(r, 50));
      if (this.ended() || performance.now() > deadline) break;
    }
    engine.disconnect(node);
    node.disconnect();
    const n = Math.min(frames, Atomics.load(views.header, TAP_WRITTEN));
    return { left: views.left.slice(0, n), right: views.right.slice(0, n), sampleRate: ctx.sampleRate };
  }

  /** The histogram block decoded, read again only when the engine has published since. */
  latencySnapshot(): LatencySnapshot | null {
    const shared = this.engine?.buffers.histograms;
    if (!shared) return null;
    const block = new Float64Array(shared);
    const sequence = block[HB_SEQUENCE];
    if (this.latencyRead?.sequence === sequence) return this.latencyRead.snap;
    const snap = readLatency(block, this.latencyScratch);
    // An odd word means a copy was being written: that read is not kept.
    if (snap && sequence % 2 === 0 && block[HB_SEQUENCE] === sequence) this.latencyRead = { sequence, snap };
    return snap;
  }

  /**
   * Tells the engine the devices' latency when it changed by more than 0.1 ms: output from the
   * audio context (base + output latency), input from the microphone track's settings where the
   * browser reports it (else unknown).
   */
  forwardDeviceLatency(): void {
    const ctx = this.ctx;
    const engine = this.engine;
    if (!ctx || !engine) return;
    const outputUs = outputSeconds(ctx) * 1e6;
    const track = this.stream?.getAudioTracks()[0];
    const reported = (track?.getSettings() as { latency?: number } | undefined)?.latency;
    const inputUs = typeof reported === 'number' && Number.isFinite(reported) ? reported * 1e6 : NaN;
    const moved = (a: number, b: number) =>
      Number.isFinite(a) !== Number.isFinite(b) || (Number.isFinite(a) && Math.abs(a - b) > 100);
    const last = this.deviceLatencySent;
    if (!moved(outputUs, last.outputUs) && !moved(inputUs, last.inputUs)) return;
    engine.control({ type: 'device-latency', outputUs, inputUs });
    this.deviceLatencySent = { outputUs, inputUs };
  }
}

/**
 * The output latency the page may ask of `ctx` while it plays: its base latency only.
 * `AudioContext.outputLatency` is not read here. Firefox answers its first read of it (later ones
 * are cached) by asking the audio device, across processes, while holding the lock of its audio
 * graph; when an audio callback is in flight at that moment, the callback waits for the graph,
 * the device's reply waits for the callback, and the page's main thread never comes back (seen
 * with Firefox ESR on PulseAudio: one join in twenty, for ever, before the first peer link). No
 * property of the browser tells whether its read can block, so none is made. What the device
 * adds beyond the base latency is left out of the figures (in Chromium, a few tens of ms).
 */
function outputSeconds(ctx: AudioContext): number {
  const base = ctx.baseLatency;
  return Number.isFinite(base) && base > 0 ? base : 0;
}
