// Reading WAV files in the tests, written from the format's definition (RIFF/WAVE: a "fmt "
// chunk with the format tag, channels, rate and bits; a "data" chunk of interleaved samples).
// Independent of the app's writer on purpose: the tests check its files with this.

/**
 * @param {Uint8Array} bytes a whole .wav file
 * @returns {{ format: number, channels: number, sampleRate: number, bits: number, frames: number, data: Float32Array[] }}
 *   `data` holds one Float32Array per channel, PCM scaled to [-1, 1).
 */
export function parseWav(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (at) => String.fromCharCode(...bytes.subarray(at, at + 4));
  if (tag(0) !== 'RIFF' || tag(8) !== 'WAVE') throw new Error('not a RIFF/WAVE file');
  if (view.getUint32(4, true) !== bytes.length - 8)
    throw new Error(`RIFF size ${view.getUint32(4, true)} != file size - 8 (${bytes.length - 8})`);
  let fmt = null;
  let data = null;
  for (let at = 12; at + 8 <= bytes.length;) {
    const id = tag(at);
    const size = view.getUint32(at + 4, true);
    const body = at + 8;
    if (body + size > bytes.length) throw new Error(`chunk ${id} runs past the end`);
    if (id === 'fmt ') {
      let format = view.getUint16(body, true);
      const bits = view.getUint16(body + 14, true);
      if (format === 0xfffe) format = view.getUint16(body + 24, true); // WAVE_FORMAT_EXTENSIBLE sub-format
      fmt = {
        format,
        channels: view.getUint16(body + 2, true),
        sampleRate: view.getUint32(body + 4, true),
        byteRate: view.getUint32(body + 8, true),
        blockAlign: view.getUint16(body + 12, true),
        bits,
      };
    } else if (id === 'data') {
      data = { at: body, size };
    }
    at = body + size + (size & 1);
  }
  if (!fmt || !data) throw new Error('no fmt or data chunk');
  const { format, channels, bits, blockAlign } = fmt;
  if (blockAlign !== channels * (bits / 8))
    throw new Error(`block align ${blockAlign} for ${channels} × ${bits} bits`);
  if (fmt.byteRate !== fmt.sampleRate * blockAlign) throw new Error('byte rate does not match');
  const frames = data.size / blockAlign;
  if (!Number.isInteger(frames)) throw new Error('data is not a whole number of frames');
  const out = Array.from({ length: channels }, () => new Float32Array(frames));
  for (let i = 0; i < frames; i++) {
    for (let c = 0; c < channels; c++) {
      const p = data.at + i * blockAlign + c * (bits / 8);
      let v;
      if (format === 3 && bits === 32) v = view.getFloat32(p, true);
      else if (format === 1 && bits === 16) v = view.getInt16(p, true) / 32768;
      else if (format === 1 && bits === 24)
        v = (view.getUint8(p) | (view.getUint8(p + 1) << 8) | (view.getInt8(p + 2) << 16)) / 8388608;
      else throw new Error(`unsupported WAV format ${format} with ${bits} bits`);
      out[c][i] = v;
    }
  }
  return { ...fmt, frames, data: out };
}
