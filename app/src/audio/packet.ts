// Tutti's wire format in TypeScript, with the same semantics as core/src/packet.rs (the byte
// diagram and the JackTrip facts are documented there). tests/unit/packet.test.ts checks both
// sides against the same golden vectors in tests/vectors/packets.json.
//
// Layout (little-endian): 16-byte JackTrip header | planar audio (channel 0's N samples, then
// channel 1's) | optional 8-byte trailer 'T' 'U' version=1 codec=0 streamId:u16 reserved:u16=0.
// An Opus packet (codec 1) is: header with frames 120 or 240, rate code 3 (48 kHz), bits 16 |
// 1 to frames × channels × 2 Opus bytes | the previous frame's Opus bytes again (0 to
// frames × channels × 2) | mandatory trailer with codec 1, whose reserved field is that copy's
// length. Frames 120/240 are never PCM block sizes, so the frames field tells the two kinds
// apart.
//
// Nothing here throws on bad input: parsePacket returns an error code, encodePacket and
// encodeOpusPacket a negative one. parsePacket, decodeStereo, encodePacket and encodeOpusPacket
// allocate nothing in steady state (typed-array views of a buffer are made once per
// ArrayBuffer/SharedArrayBuffer and reused), so a plain-JS engine can call them per packet.

export const HEADER_LEN = 16;
export const EXT_LEN = 8;
export const MAX_FRAMES = 256;
export const MAX_CHANNELS = 2;
export const MAX_PACKET_LEN = HEADER_LEN + MAX_FRAMES * MAX_CHANNELS * 4 + EXT_LEN;
export const BLOCK_SIZES: readonly number[] = [32, 64, 128, 256];
/** JackTrip's control datagram length; 63 bytes of 0xFF means "the sender stopped". */
export const CONTROL_PACKET_LEN = 63;
export const EXT_VERSION = 1;
/** 'T' and 'U', the first two bytes of the trailer. */
export const EXT_MAGIC: readonly [number, number] = [0x54, 0x55];
export const CODEC_PCM = 0;
/** Codec id of an Opus packet (one Opus frame, low-delay mode). */
export const CODEC_OPUS = 1;
/** Samples per channel of one Opus frame at 48 kHz (2.5 ms and 5 ms): an Opus packet's frames. */
export const OPUS_FRAMES: readonly number[] = [120, 240];
/** Shortest Opus packet: header, one Opus byte, trailer. */
const OPUS_MIN_LEN = HEADER_LEN + 1 + EXT_LEN;
/** JackTrip's byte-15 value for "this sender transmits no audio". */
export const CHANNELS_NONE = 0xff;
/** Hz for each JackTrip sample-rate code (index = code); 7 and above are invalid. */
export const SAMPLE_RATES_HZ: readonly number[] = [22050, 32000, 44100, 48000, 88200, 96000, 192000];

/** Error codes, identical to `PacketError::code()` in core/src/packet.rs. 0 means OK. */
export const PacketError = {
  Truncated: 1,
  TrailingBytes: 2,
  Oversized: 3,
  BadRate: 4,
  BadBits: 5,
  BadChannels: 6,
  BadFrames: 7,
  BadExtension: 8,
  UnsupportedVersion: 9,
  UnsupportedCodec: 10,
  ExitSignal: 11,
  BufferTooSmall: 12,
  ChannelMismatch: 13,
  ShortInput: 14,
  BadOpusPayload: 15,
} as const;
export type PacketErrorName = keyof typeof PacketError;

const ERROR_NAMES: readonly string[] = (() => {
  const names: string[] = ['Ok'];
  for (const [name, code] of Object.entries(PacketError)) names[code] = name;
  return names;
})();

/** The name of an error code ('Ok' for 0), as the golden vectors spell it. */
export function packetErrorName(code: number): string {
  return ERROR_NAMES[code] ?? `Unknown(${code})`;
}

/** A parsed packet's fields. Reused across calls: see newPacketInfo(). */
export interface PacketInfo {
  /** Low and high 32 bits of the u64 timestamp (JackTrip: microseconds since the epoch). */
  timestampLo: number;
  timestampHi: number;
  seq: number;
  frames: number;
  rateCode: number;
  rateHz: number;
  /** Header byte 13: 16, 24 or 32 (float); always 16 for Opus. */
  bits: number;
  bytesPerSample: number;
  /** Header byte 14 and 15, raw. */
  channelsIn: number;
  channelsOut: number;
  /** Payload channels: byte 15, or byte 14 when byte 15 is 0 (JackTrip's rule); 1 or 2. */
  channels: number;
  hasExt: boolean;
  streamId: number;
  /** CODEC_PCM, or CODEC_OPUS (then the payload is the Opus bytes). */
  codec: number;
  /** Index of the first audio (or Opus) byte in the array given to parsePacket. */
  payloadOffset: number;
  payloadLength: number;
  /** Opus only: the previous frame's Opus bytes, right after the payload (0: none). */
  redundantLength: number;
  /** Whole packet length (header + audio + trailer). */
  length: number;
}

export function newPacketInfo(): PacketInfo {
  return {
    timestampLo: 0,
    timestampHi: 0,
    seq: 0,
    frames: 0,
    rateCode: 0,
    rateHz: 0,
    bits: 0,
    bytesPerSample: 0,
    channelsIn: 0,
    channelsOut: 0,
    channels: 0,
    hasExt: false,
    streamId: 0,
    codec: 0,
    payloadOffset: 0,
    payloadLength: 0,
    redundantLength: 0,
    length: 0,
  };
}

/** The u64 timestamp of a parsed packet. Allocates a BigInt: not for the render path. */
export function packetTimestamp(info: PacketInfo): bigint {
  return (BigInt(info.timestampHi) << 32n) | BigInt(info.timestampLo);
}

// --- Views, made once per buffer ----------------------------------------------------------------

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

type AnyBuffer = ArrayBufferLike;
let viewBuffer: AnyBuffer | null = null;
let viewU8: Uint8Array<AnyBuffer> = new Uint8Array(0);
let viewI16: Int16Array<AnyBuffer> = new Int16Array(0);
let viewF32: Float32Array<AnyBuffer> = new Float32Array(0);
let viewData: DataView<AnyBuffer> = new DataView(new ArrayBuffer(0));

function useBuffer(buffer: AnyBuffer): void {
  if (buffer === viewBuffer && viewU8.byteLength === buffer.byteLength) return;
  viewBuffer = buffer;
  viewU8 = new Uint8Array(buffer);
  viewI16 = new Int16Array(buffer, 0, buffer.byteLength >> 1);
  viewF32 = new Float32Array(buffer, 0, buffer.byteLength >> 2);
  viewData = new DataView(buffer);
}

/** Uint8Array view over the whole buffer, plus the absolute index of `offset` in `src`. */
function absolute(src: Uint8Array | DataView, offset: number): number {
  useBuffer(src.buffer);
  return src.byteOffset + offset;
}

function isBlockSize(frames: number): boolean {
  return frames === 32 || frames === 64 || frames === 128 || frames === 256;
}

function isOpusFrames(frames: number): boolean {
  return frames === 120 || frames === 240;
}

function bytesForBits(bits: number): number {
  return bits === 16 ? 2 : bits === 24 ? 3 : bits === 32 ? 4 : 0;
}

// --- parse --------------------------------------------------------------------------------------

/**
 * Parses the `length` bytes at `offset` of `src` into `out`. Returns 0 when the packet is valid,
 * else a PacketError code (and `out` holds whatever was read so far). Checks run in the same
 * order as the Rust parser, so both report the same error for the same bytes: exit signal,
 * Oversized, Truncated (< 16), BadRate (unknown code), BadBits (not 16/24/32), BadChannels, then
 * frames. PCM frames: Truncated, then the exact length and the trailer (magic, version, codec 0,
 * reserved). Opus frames (120/240): Truncated (< 25), the last 8 bytes a trailer (magic, version,
 * codec: 0 is BadFrames, 2+ UnsupportedCodec), BadRate (not 48 kHz), BadBits (not 16),
 * BadOpusPayload (the frame or its redundant copy longer than frames × channels × 2 bytes, or
 * a copy that leaves no byte of the frame).
 */
export function parsePacket(
  src: Uint8Array | DataView,
  offset: number,
  length: number,
  out: PacketInfo,
): number {
  if (offset < 0 || length < 0 || offset + length > src.byteLength) return PacketError.Truncated;
  const at = absolute(src, offset);
  const b = viewU8;
  if (length === CONTROL_PACKET_LEN) {
    let all = true;
    for (let i = 0; i < CONTROL_PACKET_LEN; i++) {
      if (b[at + i] !== 0xff) {
        all = false;
        break;
      }
    }
    if (all) return PacketError.ExitSignal;
  }
  if (length > MAX_PACKET_LEN) return PacketError.Oversized;
  if (length < HEADER_LEN) return PacketError.Truncated;

  const rateCode = b[at + 12];
  if (rateCode > 6) return PacketError.BadRate;
  const bits = b[at + 13];
  const size = bytesForBits(bits);
  if (size === 0) return PacketError.BadBits;
  const channelsIn = b[at + 14];
  const channelsOut = b[at + 15];
  const channels = channelsOut === 0 ? channelsIn : channelsOut;
  if (channels < 1 || channels > MAX_CHANNELS) return PacketError.BadChannels;
  const frames = b[at + 10] | (b[at + 11] << 8);
  const opus = isOpusFrames(frames);
  if (!opus && !isBlockSize(frames)) return PacketError.BadFrames;

  out.timestampLo = (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24)) >>> 0;
  out.timestampHi = (b[at + 4] | (b[at + 5] << 8) | (b[at + 6] << 16) | (b[at + 7] << 24)) >>> 0;
  out.seq = b[at + 8] | (b[at + 9] << 8);
  out.frames = frames;
  out.rateCode = rateCode;
  out.rateHz = SAMPLE_RATES_HZ[rateCode];
  out.bits = bits;
  out.bytesPerSample = size;
  out.channelsIn = channelsIn;
  out.channelsOut = channelsOut;
  out.channels = channels;
  if (opus) return parseOpus(b, at, offset, length, out);

  const audio = frames * channels * size;
  const end = HEADER_LEN + audio;
  if (length < end) return PacketError.Truncated;
  out.payloadOffset = offset + HEADER_LEN;
  out.payloadLength = audio;
  out.redundantLength = 0;
  out.length = length;
  out.hasExt = false;
  out.streamId = 0;
  out.codec = CODEC_PCM;
  if (length === end) return 0;
  if (length !== end + EXT_LEN) return PacketError.TrailingBytes;
  const t = at + end;
  if (b[t] !== 0x54 || b[t + 1] !== 0x55) return PacketError.BadExtension;
  if (b[t + 2] !== EXT_VERSION) return PacketError.UnsupportedVersion;
  if (b[t + 3] !== CODEC_PCM) return PacketError.UnsupportedCodec;
  if (b[t + 6] !== 0 || b[t + 7] !== 0) return PacketError.BadExtension;
  out.hasExt = true;
  out.streamId = b[t + 4] | (b[t + 5] << 8);
  out.codec = b[t + 3];
  return 0;
}

/** The rest of parsePacket for Opus frames; `out`'s header fields are filled in. */
function parseOpus(b: Uint8Array, at: number, offset: number, length: number, out: PacketInfo): number {
  if (length < OPUS_MIN_LEN) return PacketError.Truncated;
  const t = at + length - EXT_LEN;
  if (b[t] !== 0x54 || b[t + 1] !== 0x55) return PacketError.BadExtension;
  if (b[t + 2] !== EXT_VERSION) return PacketError.UnsupportedVersion;
  // A PCM trailer: PCM has no block of 120 or 240 frames.
  if (b[t + 3] === CODEC_PCM) return PacketError.BadFrames;
  if (b[t + 3] !== CODEC_OPUS) return PacketError.UnsupportedCodec;
  if (out.rateCode !== 3) return PacketError.BadRate;
  if (out.bits !== 16) return PacketError.BadBits;
  // The reserved field is the redundant copy's length (the previous frame, after this one's).
  const redundant = b[t + 6] | (b[t + 7] << 8);
  const opus = length - HEADER_LEN - EXT_LEN;
  const max = out.frames * out.channels * 2;
  if (redundant > max || redundant >= opus || opus - redundant > max) return PacketError.BadOpusPayload;
  out.payloadOffset = offset + HEADER_LEN;
  out.payloadLength = opus - redundant;
  out.redundantLength = redundant;
  out.length = length;
  out.hasExt = true;
  out.streamId = b[t + 4] | (b[t + 5] << 8);
  out.codec = CODEC_OPUS;
  return 0;
}

// --- decode -------------------------------------------------------------------------------------

const SCALE16 = 1 / 32768;
const SCALE24 = 1 / 8388608;

/**
 * Decodes a PCM packet parsed from `src` (same array, same offsets) into `left` and `right`:
 * min(frames, left.length, right.length) samples each, which it returns; mono is copied to
 * both. Output is finite and within [-1, 1]: float NaN/Inf become 0 and floats are clamped. An
 * Opus packet (codec CODEC_OPUS) is decoded by the Opus codec, not here: nothing is written and
 * 0 is returned.
 */
export function decodeStereo(
  src: Uint8Array | DataView,
  info: PacketInfo,
  left: Float32Array,
  right: Float32Array,
): number {
  if (info.codec === CODEC_OPUS) return 0;
  const n = Math.min(info.frames, left.length, right.length);
  const at = absolute(src, info.payloadOffset);
  const perChannel = info.frames * info.bytesPerSample;
  decodeChannel(info.bits, at, left, n);
  if (info.channels >= 2) decodeChannel(info.bits, at + perChannel, right, n);
  else for (let k = 0; k < n; k++) right[k] = left[k];
  return n;
}

/** Finite values clamped to [-1, 1] (keeping -0); NaN and ±Inf → 0. Same as the Rust decoder. */
function clampFinite(x: number): number {
  if (x >= -1 && x <= 1) return x;
  if (x > 1) return x === Infinity ? 0 : 1;
  if (x < -1) return x === -Infinity ? 0 : -1;
  return 0; // NaN
}

/** Decodes n samples of one channel starting at absolute byte `at` of the current buffer. */
function decodeChannel(bits: number, at: number, dst: Float32Array, n: number): void {
  const b = viewU8;
  if (bits === 16) {
    if (LITTLE_ENDIAN_HOST && (at & 1) === 0) {
      const i16 = viewI16;
      const base = at >> 1;
      for (let k = 0; k < n; k++) dst[k] = i16[base + k] * SCALE16;
    } else {
      for (let k = 0, i = at; k < n; k++, i += 2) {
        dst[k] = (((b[i] | (b[i + 1] << 8)) << 16) >> 16) * SCALE16;
      }
    }
  } else if (bits === 24) {
    // JackTrip's layout: int16 (v >> 8) little-endian, then the low byte of v.
    for (let k = 0, i = at; k < n; k++, i += 3) {
      const hi = ((b[i] | (b[i + 1] << 8)) << 16) >> 16;
      dst[k] = (hi * 256 + b[i + 2]) * SCALE24;
    }
  } else {
    if (LITTLE_ENDIAN_HOST && (at & 3) === 0) {
      const f32 = viewF32;
      const base = at >> 2;
      for (let k = 0; k < n; k++) dst[k] = clampFinite(f32[base + k]);
    } else {
      const dv = viewData;
      for (let k = 0, i = at; k < n; k++, i += 4) dst[k] = clampFinite(dv.getFloat32(i, true));
    }
  }
}

// --- encode -------------------------------------------------------------------------------------

/** Header fields for encodePacket (byte 14/15 raw, as on the wire). */
export interface HeaderFields {
  /** u64; a number must be a non-negative integer below 2^53. */
  timestamp: number | bigint;
  seq: number;
  frames: number;
  rateCode: number;
  bits: number;
  channelsIn: number;
  channelsOut: number;
}

export interface ExtensionFields {
  streamId: number;
  codec: number;
}

/** Rust's round (half away from zero); exact for the products below (see encodePacket). */
function roundHalfAway(p: number): number {
  return p < 0 ? -Math.floor(-p + 0.5) : Math.floor(p + 0.5);
}

/** Clamp to [-1, 1] keeping -0; NaN → 0. The input is first rounded to f32, as Rust sees it. */
function clampInput(v: number): number {
  const x = Math.fround(v);
  return x < -1 ? -1 : x > 1 ? 1 : x === x ? x : 0;
}

/**
 * Encodes one block into `out` at `offset`; returns the packet length, or minus a PacketError
 * code (BadFrames, BadChannels, BadRate, BadBits, ChannelMismatch, ShortInput,
 * UnsupportedCodec, BufferTooSmall). Inputs are clamped to [-1, 1], NaN is written as 0; the
 * rounding is bit-identical to the Rust encoder. On error `out` is untouched.
 */
export function encodePacket(
  h: HeaderFields,
  ext: ExtensionFields | null,
  planar: readonly ArrayLike<number>[],
  out: Uint8Array,
  offset = 0,
): number {
  if (!isBlockSize(h.frames)) return -PacketError.BadFrames;
  const channels = h.channelsOut === 0 ? h.channelsIn : h.channelsOut;
  if (channels < 1 || channels > MAX_CHANNELS) return -PacketError.BadChannels;
  if (!(h.rateCode >= 0 && h.rateCode <= 6)) return -PacketError.BadRate;
  const size = bytesForBits(h.bits);
  if (size === 0) return -PacketError.BadBits;
  if (planar.length !== channels) return -PacketError.ChannelMismatch;
  const frames = h.frames;
  for (let c = 0; c < channels; c++) if (planar[c].length < frames) return -PacketError.ShortInput;
  if (ext !== null && ext.codec !== CODEC_PCM) return -PacketError.UnsupportedCodec;
  const audio = frames * channels * size;
  const total = HEADER_LEN + audio + (ext !== null ? EXT_LEN : 0);
  if (offset < 0 || out.length - offset < total) return -PacketError.BufferTooSmall;

  const at = absolute(out, offset);
  const b = viewU8;
  writeHeader(h, b, at);

  let i = at + HEADER_LEN;
  for (let c = 0; c < channels; c++) {
    const s = planar[c];
    if (size === 2) {
      for (let k = 0; k < frames; k++, i += 2) {
        // As Rust: f32 product, then round half away from zero (exact: |p| < 2^15, 24 bits).
        const v = roundHalfAway(Math.fround(clampInput(s[k]) * 32767));
        b[i] = v;
        b[i + 1] = v >> 8;
      }
    } else if (size === 3) {
      for (let k = 0; k < frames; k++, i += 3) {
        // The double product is exact (24 × 23 bits), as Rust's f64 product.
        const v = roundHalfAway(clampInput(s[k]) * 8388607);
        b[i] = v >> 8;
        b[i + 1] = v >> 16;
        b[i + 2] = v;
      }
    } else {
      const dv = viewData;
      for (let k = 0; k < frames; k++, i += 4) dv.setFloat32(i, clampInput(s[k]), true);
    }
  }
  if (ext !== null) writeTrailer(ext.codec, ext.streamId, b, i);
  return total;
}

/**
 * Frames an Opus packet whose `payloadLen` Opus bytes the caller has already written at
 * `out[offset + 16 .. offset + 16 + payloadLen]`: writes the header before them and the trailer
 * (codec CODEC_OPUS, `streamId`) after them. With `redundantLen`, the previous frame's Opus
 * bytes follow the payload (written by the caller too) and the trailer says their length.
 * Returns the packet length, 16 + payloadLen + redundantLen + 8, or minus a PacketError code,
 * checked in this order: BadFrames (not 120/240), BadRate (not code 3, 48 kHz), BadBits (not
 * 16), BadChannels, BadOpusPayload (not 1 to frames × channels × 2, or a copy longer than
 * that), BufferTooSmall. On error `out` is untouched. Same checks as `encode_opus_redundant` in
 * Rust.
 */
export function encodeOpusPacket(
  h: HeaderFields,
  streamId: number,
  payloadLen: number,
  out: Uint8Array,
  offset = 0,
  redundantLen = 0,
): number {
  if (!isOpusFrames(h.frames)) return -PacketError.BadFrames;
  if (h.rateCode !== 3) return -PacketError.BadRate;
  if (h.bits !== 16) return -PacketError.BadBits;
  const channels = h.channelsOut === 0 ? h.channelsIn : h.channelsOut;
  if (channels < 1 || channels > MAX_CHANNELS) return -PacketError.BadChannels;
  if (!(Number.isInteger(payloadLen) && payloadLen >= 1 && payloadLen <= h.frames * channels * 2)) {
    return -PacketError.BadOpusPayload;
  }
  if (!(Number.isInteger(redundantLen) && redundantLen >= 0 && redundantLen <= h.frames * channels * 2)) {
    return -PacketError.BadOpusPayload;
  }
  const total = HEADER_LEN + payloadLen + redundantLen + EXT_LEN;
  if (offset < 0 || out.length - offset < total) return -PacketError.BufferTooSmall;
  const at = absolute(out, offset);
  const b = viewU8;
  writeHeader(h, b, at);
  const t = at + HEADER_LEN + payloadLen + redundantLen;
  writeTrailer(CODEC_OPUS, streamId, b, t);
  b[t + 6] = redundantLen & 0xff;
  b[t + 7] = redundantLen >> 8;
  return total;
}

/** The 16 header bytes at absolute index `at` of `b`. */
function writeHeader(h: HeaderFields, b: Uint8Array, at: number): void {
  let lo: number;
  let hi: number;
  if (typeof h.timestamp === 'bigint') {
    const t = BigInt.asUintN(64, h.timestamp);
    lo = Number(t & 0xffffffffn);
    hi = Number(t >> 32n);
  } else {
    lo = h.timestamp >>> 0;
    hi = Math.floor(h.timestamp / 4294967296) >>> 0;
  }
  b[at] = lo;
  b[at + 1] = lo >>> 8;
  b[at + 2] = lo >>> 16;
  b[at + 3] = lo >>> 24;
  b[at + 4] = hi;
  b[at + 5] = hi >>> 8;
  b[at + 6] = hi >>> 16;
  b[at + 7] = hi >>> 24;
  b[at + 8] = h.seq;
  b[at + 9] = h.seq >>> 8;
  b[at + 10] = h.frames;
  b[at + 11] = h.frames >>> 8;
  b[at + 12] = h.rateCode;
  b[at + 13] = h.bits;
  b[at + 14] = h.channelsIn;
  b[at + 15] = h.channelsOut;
}

/** The 8 trailer bytes at absolute index `at` of `b`. */
function writeTrailer(codec: number, streamId: number, b: Uint8Array, at: number): void {
  b[at] = 0x54;
  b[at + 1] = 0x55;
  b[at + 2] = EXT_VERSION;
  b[at + 3] = codec;
  b[at + 4] = streamId;
  b[at + 5] = streamId >>> 8;
  b[at + 6] = 0;
  b[at + 7] = 0;
}
