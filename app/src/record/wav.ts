// WAV (RIFF/WAVE) writing for exported stems: a header and sample encoders, so that a stem can be
// assembled as a Blob from many small parts without ever holding the whole file in one buffer.
//
// Layout (all integers little-endian):
//
//   offset size  field
//   0      4     "RIFF"
//   4      4     RIFF size = file size - 8 (includes the data chunk's pad byte, if any)
//   8      4     "WAVE"
//   12     4     "fmt "
//   16     4     fmt size: 16 for PCM, 18 for IEEE float (cbSize present and 0)
//   20     2     format tag: 1 = PCM, 3 = IEEE float
//   22     2     channels
//   24     4     sample rate
//   28     4     byte rate = rate * block align
//   32     2     block align = channels * bytes per sample
//   34     2     bits per sample: 16, 24 or 32
//   (float only) 36 2 cbSize = 0, then 38 "fact", 42 size 4, 46 frames per channel
//   ...    4     "data", then 4 data size (bytes of samples, without the pad byte), then samples
//   a pad byte follows the samples when their byte count is odd (24-bit mono, odd frame count).
//
// Headers are 44 bytes (PCM) or 58 bytes (float). Sizes are u32: a file whose RIFF size would not
// fit in 32 bits (about 4 GiB) is refused with an error rather than written with a wrong header.
//
// Quantisation to PCM is plain rounding with clipping, no dither, and matches the wire format's
// encoder (core/src/packet.rs): 16-bit `round(x * 32767)` and 24-bit `round(x * 8388607)`, clamped
// to ±full scale (the most negative code is never produced, so the scale is symmetric). Ties round
// away from zero. NaN becomes 0. Float32 is written as is: lossless for what the engine produced.

export type WavFormat = 'f32' | 'pcm24' | 'pcm16';

export const WAV_FORMATS: readonly WavFormat[] = ['f32', 'pcm24', 'pcm16'];

/** The largest RIFF size field (the file is 8 bytes more). */
const MAX_RIFF_SIZE = 0xffff_ffff;

export function bytesPerSample(format: WavFormat): number {
  return format === 'pcm16' ? 2 : format === 'pcm24' ? 3 : 4;
}

export function headerBytes(format: WavFormat): number {
  return format === 'f32' ? 58 : 44;
}

/** Bytes of sample data (without the pad byte) for `frames` frames. */
export function dataBytes(format: WavFormat, channels: number, frames: number): number {
  return frames * channels * bytesPerSample(format);
}

/** The whole file's size in bytes, pad byte included. */
export function wavFileBytes(format: WavFormat, channels: number, frames: number): number {
  const data = dataBytes(format, channels, frames);
  return headerBytes(format) + data + (data & 1);
}

export class WavTooLargeError extends Error {
  constructor(bytes: number) {
    super(
      `This track would make a WAV file of ${(bytes / 2 ** 30).toFixed(2)} GiB; ` +
        'WAV files stop at 4 GiB. Export it as 24-bit or 16-bit, which take less space.',
    );
    this.name = 'WavTooLargeError';
  }
}

/** The header for a file of `frames` frames. Throws WavTooLargeError past 4 GiB. */
export function wavHeader(
  format: WavFormat,
  channels: number,
  sampleRate: number,
  frames: number,
): Uint8Array {
  if (!Number.isInteger(channels) || channels < 1 || channels > 2) {
    throw new RangeError(`WAV export supports 1 or 2 channels, not ${channels}`);
  }
  if (!Number.isInteger(sampleRate) || sampleRate < 1 || sampleRate > 0xffff_ffff) {
    throw new RangeError(`bad sample rate ${sampleRate}`);
  }
  if (!Number.isInteger(frames) || frames < 0) throw new RangeError(`bad frame count ${frames}`);
  const fileBytes = wavFileBytes(format, channels, frames);
  if (fileBytes - 8 > MAX_RIFF_SIZE) throw new WavTooLargeError(fileBytes);

  const size = headerBytes(format);
  const bytes = new Uint8Array(size);
  const v = new DataView(bytes.buffer);
  const ascii = (at: number, s: string): void => {
    for (let i = 0; i < 4; i++) bytes[at + i] = s.charCodeAt(i);
  };
  const bps = bytesPerSample(format);
  const data = dataBytes(format, channels, frames);
  ascii(0, 'RIFF');
  v.setUint32(4, fileBytes - 8, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  v.setUint32(16, format === 'f32' ? 18 : 16, true);
  v.setUint16(20, format === 'f32' ? 3 : 1, true);
  v.setUint16(22, channels, true);
  v.setUint32(24, sampleRate, true);
  v.setUint32(28, sampleRate * channels * bps, true);
  v.setUint16(32, channels * bps, true);
  v.setUint16(34, bps * 8, true);
  let at = 36;
  if (format === 'f32') {
    v.setUint16(36, 0, true); // cbSize
    ascii(38, 'fact');
    v.setUint32(42, 4, true);
    v.setUint32(46, frames, true);
    at = 50;
  }
  ascii(at, 'data');
  v.setUint32(at + 4, data, true);
  return bytes;
}

/** The pad byte that follows odd-sized sample data (empty when none is needed). */
export function wavTrailer(format: WavFormat, channels: number, frames: number): Uint8Array {
  return new Uint8Array(dataBytes(format, channels, frames) & 1);
}

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function quantise(x: number, scale: number): number {
  if (!(x === x)) return 0; // NaN
  const y = x * scale;
  if (y >= scale) return scale;
  if (y <= -scale) return -scale;
  return y < 0 ? -Math.floor(0.5 - y) : Math.floor(y + 0.5);
}

/**
 * Encodes interleaved float32 samples as WAV sample bytes. For 'f32' on a little-endian host the
 * result shares `samples`' memory (no copy); otherwise it is a new array.
 */
export function encodeSamples(format: WavFormat, samples: Float32Array): Uint8Array {
  const n = samples.length;
  if (format === 'f32') {
    if (LITTLE_ENDIAN_HOST) return new Uint8Array(samples.buffer, samples.byteOffset, n * 4);
    const out = new Uint8Array(n * 4);
    const v = new DataView(out.buffer);
    for (let i = 0; i < n; i++) v.setFloat32(i * 4, samples[i]!, true);
    return out;
  }
  if (format === 'pcm16') {
    const out = new Uint8Array(n * 2);
    for (let i = 0, o = 0; i < n; i++, o += 2) {
      const q = quantise(samples[i]!, 32767);
      out[o] = q & 0xff;
      out[o + 1] = (q >> 8) & 0xff;
    }
    return out;
  }
  const out = new Uint8Array(n * 3);
  for (let i = 0, o = 0; i < n; i++, o += 3) {
    const q = quantise(samples[i]!, 8388607);
    out[o] = q & 0xff;
    out[o + 1] = (q >> 8) & 0xff;
    out[o + 2] = (q >> 16) & 0xff;
  }
  return out;
}

/** A whole small WAV file in one array (tests, short clips); long stems go through stems.ts. */
export function encodeWav(
  format: WavFormat,
  channels: number,
  sampleRate: number,
  interleaved: Float32Array,
): Uint8Array {
  if (interleaved.length % channels !== 0) {
    throw new RangeError(`${interleaved.length} samples do not make whole frames of ${channels} channels`);
  }
  const frames = interleaved.length / channels;
  const header = wavHeader(format, channels, sampleRate, frames);
  const body = encodeSamples(format, interleaved);
  const out = new Uint8Array(wavFileBytes(format, channels, frames));
  out.set(header, 0);
  out.set(body, header.length);
  return out;
}
