// Independent readers for the record tests, written from the formats' specifications (RIFF/WAVE
// and PKWARE's APPNOTE), sharing no code with the writers they check: the unit tests of the
// writers and the browser test of a recording's export both read with them.

/**
 * CRC-32 (IEEE), bit by bit.
 * @param {Uint8Array} bytes
 * @returns {number}
 */
export function crcBitwise(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

/**
 * A WAV file's header fields and its samples (`samples` interleaved, as floats: PCM divided by
 * 2^(bits-1)).
 * @typedef {{
 *   formatTag: number, channels: number, sampleRate: number, byteRate: number, blockAlign: number,
 *   bits: number, factFrames: number | null, frames: number, samples: Float64Array, chunkIds: string[],
 * }} ParsedWav
 */

/** @type {(b: Uint8Array, at: number) => string} */
const ascii = (b, at) => String.fromCharCode(...b.subarray(at, at + 4));

/**
 * Walks the RIFF chunks; throws on any inconsistency a player would trip over.
 * @param {Uint8Array} b
 * @returns {ParsedWav}
 */
export function readWav(b) {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (ascii(b, 0) !== 'RIFF' || ascii(b, 8) !== 'WAVE') throw new Error('not RIFF/WAVE');
  if (v.getUint32(4, true) !== b.length - 8)
    throw new Error(`RIFF size ${v.getUint32(4, true)} for ${b.length} bytes`);
  let at = 12;
  /** @type {string[]} */
  const ids = [];
  /** @type {DataView | null} */
  let fmt = null;
  /** @type {number | null} */
  let fact = null;
  /** @type {Uint8Array | null} */
  let data = null;
  while (at + 8 <= b.length) {
    const id = ascii(b, at);
    const size = v.getUint32(at + 4, true);
    ids.push(id);
    const body = at + 8;
    if (body + size > b.length) throw new Error(`chunk ${id} runs past the end`);
    if (id === 'fmt ') fmt = new DataView(b.buffer, b.byteOffset + body, size);
    if (id === 'fact') fact = v.getUint32(body, true);
    if (id === 'data') data = b.subarray(body, body + size);
    at = body + size + (size & 1);
  }
  if (at !== b.length) throw new Error('trailing bytes');
  if (!fmt || !data) throw new Error('fmt or data missing');
  const formatTag = fmt.getUint16(0, true);
  const channels = fmt.getUint16(2, true);
  const bits = fmt.getUint16(14, true);
  const blockAlign = fmt.getUint16(12, true);
  if (blockAlign !== (channels * bits) / 8) throw new Error('block align');
  if (data.length % blockAlign !== 0) throw new Error('partial frame');
  const n = data.length / (bits / 8);
  const samples = new Float64Array(n);
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let i = 0; i < n; i++) {
    if (formatTag === 3 && bits === 32) samples[i] = dv.getFloat32(i * 4, true);
    else if (formatTag === 1 && bits === 16) samples[i] = dv.getInt16(i * 2, true) / 32768;
    else if (formatTag === 1 && bits === 24) {
      const u = dv.getUint8(i * 3) | (dv.getUint8(i * 3 + 1) << 8) | (dv.getUint8(i * 3 + 2) << 16);
      samples[i] = ((u << 8) >> 8) / 8388608;
    } else throw new Error(`format ${formatTag}/${bits}`);
  }
  return {
    formatTag,
    channels,
    sampleRate: fmt.getUint32(4, true),
    byteRate: fmt.getUint32(8, true),
    blockAlign,
    bits,
    factFrames: fact,
    frames: data.length / blockAlign,
    samples,
    chunkIds: ids,
  };
}

/**
 * One entry of a zip as its headers describe it, with its stored bytes.
 * @typedef {{ name: string, flags: number, method: number, crc: number, data: Uint8Array, localOffset: number }} ParsedZipEntry
 */

/** @type {(v: DataView, at: number) => number} */
const u64 = (v, at) => v.getUint32(at, true) + v.getUint32(at + 4, true) * 2 ** 32;

/**
 * Reads a stored (method 0) zip from its end: EOCD (and the ZIP64 records when flagged), the
 * central directory, then each local header, checking that both headers agree and every CRC.
 * @param {Uint8Array} b
 * @returns {{ entries: ParsedZipEntry[], zip64: boolean }}
 */
export function readZip(b) {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const eocd = b.length - 22; // no archive comment
  if (v.getUint32(eocd, true) !== 0x06054b50) throw new Error('no end of central directory');
  if (v.getUint16(eocd + 20, true) !== 0) throw new Error('comment');
  let count = v.getUint16(eocd + 10, true);
  let cdSize = v.getUint32(eocd + 12, true);
  let cdOffset = v.getUint32(eocd + 16, true);
  const zip64 = cdOffset === 0xffffffff;
  if (zip64) {
    const loc = eocd - 20;
    if (v.getUint32(loc, true) !== 0x07064b50) throw new Error('no zip64 locator');
    const rec = u64(v, loc + 8);
    if (v.getUint32(rec, true) !== 0x06064b50) throw new Error('no zip64 end record');
    if (u64(v, rec + 4) !== 44) throw new Error('zip64 end record size');
    count = u64(v, rec + 32);
    if (u64(v, rec + 24) !== count) throw new Error('zip64 entry counts differ');
    cdSize = u64(v, rec + 40);
    cdOffset = u64(v, rec + 48);
    if (cdOffset + cdSize !== rec) throw new Error('zip64 central directory does not end at its end record');
  } else if (cdOffset + cdSize !== eocd) throw new Error('central directory does not end at the EOCD');
  if (v.getUint16(eocd + 8, true) !== v.getUint16(eocd + 10, true)) throw new Error('entry counts differ');

  const dec = new TextDecoder('utf-8', { fatal: true });
  /** @type {ParsedZipEntry[]} */
  const entries = [];
  let at = cdOffset;
  for (let i = 0; i < count; i++) {
    if (v.getUint32(at, true) !== 0x02014b50) throw new Error(`central header ${i} signature`);
    const flags = v.getUint16(at + 8, true);
    const method = v.getUint16(at + 10, true);
    const crc = v.getUint32(at + 16, true);
    let csize = v.getUint32(at + 20, true);
    let usize = v.getUint32(at + 24, true);
    const nameLen = v.getUint16(at + 28, true);
    const extraLen = v.getUint16(at + 30, true);
    const commentLen = v.getUint16(at + 32, true);
    let offset = v.getUint32(at + 42, true);
    const name = dec.decode(b.subarray(at + 46, at + 46 + nameLen));
    // ZIP64 extended information: only the fields that were 0xFFFFFFFF, in order.
    let x = at + 46 + nameLen;
    const xEnd = x + extraLen;
    while (x + 4 <= xEnd) {
      const id = v.getUint16(x, true);
      const size = v.getUint16(x + 2, true);
      if (id === 1) {
        let f = x + 4;
        if (usize === 0xffffffff) {
          usize = u64(v, f);
          f += 8;
        }
        if (csize === 0xffffffff) {
          csize = u64(v, f);
          f += 8;
        }
        if (offset === 0xffffffff) offset = u64(v, f);
      }
      x += 4 + size;
    }
    if (csize !== usize) throw new Error('stored entry with different sizes');

    if (v.getUint32(offset, true) !== 0x04034b50) throw new Error(`local header ${i} signature`);
    if (v.getUint16(offset + 6, true) !== flags) throw new Error('flags differ');
    if (v.getUint16(offset + 8, true) !== method) throw new Error('method differs');
    if (v.getUint32(offset + 14, true) !== crc) throw new Error('crc differs');
    const lNameLen = v.getUint16(offset + 26, true);
    const lExtraLen = v.getUint16(offset + 28, true);
    if (dec.decode(b.subarray(offset + 30, offset + 30 + lNameLen)) !== name) throw new Error('names differ');
    const start = offset + 30 + lNameLen + lExtraLen;
    const data = b.subarray(start, start + usize);
    if (crcBitwise(data) !== crc) throw new Error(`crc of ${name}`);
    entries.push({ name, flags, method, crc, data, localOffset: offset });
    at += 46 + nameLen + extraLen + commentLen;
  }
  if (at !== cdOffset + cdSize) throw new Error('central directory size');
  return { entries, zip64 };
}
