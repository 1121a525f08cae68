// libopus built with emscripten (wasm/opus/shim.c, scripts/build-opus.mjs): the codec module the
// engine worklet instantiates beside the Rust core. It has no imports and a memory that never
// grows, so the views made here at set-up stay valid for the module's life, and encoding or
// decoding a frame allocates nothing: samples and packets pass through the module's two fixed
// exchange areas (`pcm`, `packet`).
//
// Handles are addresses in the module's memory; a negative number from the module is libopus's
// error code, turned into an OpusError (with libopus's own words) by the set-up calls here. The
// per-frame calls return it as a number, for the render path to count.

/** The module's exports (the names scripts/build-opus.mjs exports). */
export interface OpusExports {
  memory: WebAssembly.Memory;
  _initialize?: () => void;
  tutti_opus_pcm(): number;
  tutti_opus_pcm_samples(): number;
  tutti_opus_packet(): number;
  tutti_opus_packet_bytes(): number;
  tutti_opus_encoder_new(channels: number, bitrate: number): number;
  tutti_opus_encoder_set_bitrate(handle: number, bitrate: number): number;
  tutti_opus_encoder_lookahead(handle: number): number;
  tutti_opus_encoder_reset(handle: number): number;
  tutti_opus_encoder_set_mono(handle: number, mono: number): number;
  tutti_opus_encode(handle: number, frames: number): number;
  tutti_opus_decoder_new(channels: number): number;
  tutti_opus_decode(handle: number, len: number, frames: number): number;
  tutti_opus_decoder_reset(handle: number): number;
  tutti_opus_free(handle: number): void;
  tutti_opus_allocations(): number;
}

/** libopus's error codes (opus_defines.h) in its own words. */
const OPUS_ERRORS: Record<number, string> = {
  [-1]: 'invalid argument',
  [-2]: 'buffer too small',
  [-3]: 'internal error',
  [-4]: 'corrupted stream',
  [-5]: 'request not implemented',
  [-6]: 'invalid state',
  [-7]: 'memory allocation failed',
};

export class OpusError extends Error {
  constructor(
    readonly step: string,
    readonly code: number,
  ) {
    super(`opus ${step}: ${OPUS_ERRORS[code] ?? 'unknown error'} (${code})`);
  }
}

/** The frame lengths Opus codes at 48 kHz, samples per channel. */
export const OPUS_FRAMES = [120, 240, 480, 960] as const;

export class OpusModule {
  readonly exports: OpusExports;
  /** The interleaved-sample exchange area (a whole stereo 20 ms frame). */
  readonly pcm: Float32Array;
  /** The packet exchange area. */
  readonly packet: Uint8Array;

  constructor(module: WebAssembly.Module) {
    const imports = WebAssembly.Module.imports(module);
    if (imports.length > 0) {
      const names = imports.map((i) => `${i.module}.${i.name}`).join(', ');
      throw new Error(`codec module has unexpected imports: ${names}`);
    }
    const instance = new WebAssembly.Instance(module, {});
    const x = instance.exports as unknown as OpusExports;
    x._initialize?.();
    this.exports = x;
    this.pcm = new Float32Array(x.memory.buffer, x.tutti_opus_pcm(), x.tutti_opus_pcm_samples());
    this.packet = new Uint8Array(x.memory.buffer, x.tutti_opus_packet(), x.tutti_opus_packet_bytes());
  }

  /** A low-delay encoder at 48 kHz (set-up: allocates in the module). */
  newEncoder(channels: number, bitrate: number): number {
    return checked('encoder', this.exports.tutti_opus_encoder_new(channels, bitrate));
  }

  /** A decoder at 48 kHz (set-up: allocates in the module). */
  newDecoder(channels: number): number {
    return checked('decoder', this.exports.tutti_opus_decoder_new(channels));
  }

  setBitrate(encoder: number, bitrate: number): void {
    checked('bitrate', this.exports.tutti_opus_encoder_set_bitrate(encoder, bitrate));
  }

  /** Samples of look-ahead (the codec's delay). */
  lookahead(encoder: number): number {
    return checked('look-ahead', this.exports.tutti_opus_encoder_lookahead(encoder));
  }

  /** Encodes `frames` interleaved samples per channel from `pcm` into `packet`: its length, or a negative error. */
  encode(encoder: number, frames: number): number {
    return this.exports.tutti_opus_encode(encoder, frames);
  }

  /**
   * Decodes `packet[0..len)` into `frames` samples per channel in `pcm`; `len` 0 conceals a lost
   * frame. Returns `frames`, or a negative error (a packet that codes another length is one).
   */
  decode(decoder: number, len: number, frames: number): number {
    return this.exports.tutti_opus_decode(decoder, len, frames);
  }

  reset(decoder: number): void {
    checked('reset', this.exports.tutti_opus_decoder_reset(decoder));
  }

  free(handle: number): void {
    this.exports.tutti_opus_free(handle);
  }

  /** Heap calls (allocations, reallocations, frees) the module has made since it was instantiated. */
  allocations(): number {
    return this.exports.tutti_opus_allocations() >>> 0;
  }
}

function checked(step: string, code: number): number {
  if (code < 0) throw new OpusError(step, code);
  return code;
}

/** The import module name under which the engine (wasm/src/opus.rs) asks for the codec. */
export const OPUS_IMPORT_MODULE = 'tutti_opus';
/**
 * libopus's OPUS_UNIMPLEMENTED: what the calls answer when there is no codec module (a host
 * built without it, e.g. a benchmark of PCM alone). Deliberate: the engine then makes no
 * decoder, and its peers' Opus packets are refused as an unsupported codec, counted.
 */
const REFUSED = -5;

/**
 * The engine's codec imports (wasm/src/opus.rs), linked to `opus`: each copies a frame between
 * the engine's memory (`memory()`, known once the engine is instantiated) and the codec
 * module's exchange areas, element by element into views made once (re-made only if the
 * engine's memory grew, which it does only when a peer joins), so a call allocates nothing.
 * Without `opus`, every call refuses and the engine's peers take no Opus.
 */
export function opusImports(opus: OpusModule | null, memory: () => WebAssembly.Memory | null) {
  if (!opus) {
    return {
      decoder_new: (): number => REFUSED,
      decode: (): number => REFUSED,
      decoder_reset: (): void => {},
      free: (): void => {},
      encoder_new: (): number => REFUSED,
      encode: (): number => REFUSED,
      encoder_reset: (): void => {},
      encoder_set_mono: (): number => REFUSED,
    };
  }
  const { packet, pcm } = opus;
  let bytes = new Uint8Array(0);
  let floats = new Float32Array(0);
  const views = (): void => {
    const m = memory();
    if (m && bytes.buffer !== m.buffer) {
      bytes = new Uint8Array(m.buffer);
      floats = new Float32Array(m.buffer);
    }
  };
  return {
    /** A stereo decoder (a mono stream decodes to both channels). */
    decoder_new: (): number => opus.exports.tutti_opus_decoder_new(2),
    decode: (handle: number, ptr: number, len: number, pcmPtr: number, frames: number): number => {
      if (len < 0 || len > packet.length || frames * 2 > pcm.length || (pcmPtr & 3) !== 0) return -1;
      views();
      if (ptr + len > bytes.length || pcmPtr + frames * 8 > bytes.length) return -1;
      for (let i = 0; i < len; i++) packet[i] = bytes[ptr + i];
      const r = opus.decode(handle, len, frames);
      if (r !== frames) return r < 0 ? r : -4;
      const base = pcmPtr >>> 2;
      const n = frames * 2;
      for (let i = 0; i < n; i++) floats[base + i] = pcm[i];
      return r;
    },
    decoder_reset: (handle: number): void => {
      opus.exports.tutti_opus_decoder_reset(handle);
    },
    free: (handle: number): void => opus.free(handle),
    /** A stereo encoder (one set mono codes its two equal channels as one). */
    encoder_new: (bitrate: number): number => opus.exports.tutti_opus_encoder_new(2, bitrate),
    encode: (handle: number, pcmPtr: number, frames: number, outPtr: number, cap: number): number => {
      if (frames * 2 > pcm.length || (pcmPtr & 3) !== 0 || cap < 0) return -1;
      views();
      if (pcmPtr + frames * 8 > bytes.length || outPtr + cap > bytes.length) return -1;
      const base = pcmPtr >>> 2;
      const n = frames * 2;
      for (let i = 0; i < n; i++) pcm[i] = floats[base + i];
      const r = opus.encode(handle, frames);
      if (r < 0) return r;
      if (r > cap) return -2;
      for (let i = 0; i < r; i++) bytes[outPtr + i] = packet[i];
      return r;
    },
    encoder_reset: (handle: number): void => {
      opus.exports.tutti_opus_encoder_reset(handle);
    },
    encoder_set_mono: (handle: number, mono: number): number =>
      opus.exports.tutti_opus_encoder_set_mono(handle, mono),
  };
}
