// CRC-32 as zip uses it (ISO-HDLC: reflected polynomial 0xEDB88320, initial and final XOR
// 0xFFFFFFFF). Incremental, so an entry's checksum is computed part by part as its bytes stream by.
// Slice-by-4 tables: four bytes per step, a few times faster than the byte-wise loop on long stems.

const TABLES = (() => {
  const t = new Uint32Array(4 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let k = 1; k < 4; k++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[k * 256 + n] = c >>> 0;
    }
  }
  return t;
})();

/** The running state of a CRC-32: start with `crc32Init()`, feed parts, read `crc32Final()`. */
export function crc32Init(): number {
  return 0xffffffff;
}

export function crc32Update(state: number, bytes: Uint8Array): number {
  const t = TABLES;
  let c = state >>> 0;
  let i = 0;
  const n = bytes.length;
  const end4 = n - (n % 4);
  for (; i < end4; i += 4) {
    c ^= bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    c = t[768 + (c & 0xff)]! ^ t[512 + ((c >>> 8) & 0xff)]! ^ t[256 + ((c >>> 16) & 0xff)]! ^ t[c >>> 24]!;
  }
  for (; i < n; i++) c = t[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return c >>> 0;
}

export function crc32Final(state: number): number {
  return (state ^ 0xffffffff) >>> 0;
}

/** CRC-32 of one buffer. */
export function crc32(bytes: Uint8Array): number {
  return crc32Final(crc32Update(crc32Init(), bytes));
}
