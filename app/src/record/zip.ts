// A zip writer for exporting stems: method 0 (stored, no compression — WAV barely compresses and
// storing keeps memory flat), names in UTF-8 (general purpose flag bit 11), the result a Blob made
// of the entries' own Blobs plus small headers, so nothing is copied into one big buffer.
//
// Layout (PKWARE APPNOTE 6.3, all integers little-endian):
//   per entry:  local file header (30 bytes + name [+ zip64 extra 20]) then the bytes
//   then:       central directory, one header per entry (46 bytes + name [+ zip64 extra 28])
//   [zip64:     zip64 end of central directory record (56) and its locator (20)]
//   then:       end of central directory record (22 bytes, no comment)
//
// ZIP64 is used only when the archive needs it (a size or offset past 0xFFFFFFFE, or more than
// 65534 entries), so ordinary archives stay readable by the oldest tools; `zip64: 'always'` forces
// it (tests). Without it a long multitrack rehearsal in float32 would not fit.

import { crc32Final, crc32Init, crc32Update } from './crc32';

export interface ZipEntry {
  /** Path inside the archive, '/'-separated; stored as UTF-8. */
  name: string;
  data: Blob;
  /** CRC-32 of `data` when already known (computed while the data was made); else read from it. */
  crc32?: number;
  /** Modification time shown by unzip tools; defaults to now. */
  modified?: Date;
}

export interface ZipOptions {
  zip64?: 'auto' | 'always';
}

const SIG_LOCAL = 0x04034b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_END = 0x06054b50;
const SIG_END64 = 0x06064b50;
const SIG_LOCATOR64 = 0x07064b50;
const FLAG_UTF8 = 0x0800;
const U32_LIMIT = 0xfffffffe;
const U16_LIMIT = 0xfffe;
const MAX_SAFE_BYTES = Number.MAX_SAFE_INTEGER;

/** CRC-32 of a Blob, read as a stream: the blob never sits whole in memory. */
export async function blobCrc32(blob: Blob): Promise<number> {
  let state = crc32Init();
  const reader = blob.stream().getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    state = crc32Update(state, value);
  }
  return crc32Final(state);
}

/** MS-DOS date and time (local time, 2-second resolution, 1980..2107). */
export function dosDateTime(d: Date): { date: number; time: number } {
  let year = d.getFullYear();
  if (!Number.isFinite(year) || year < 1980) return { date: (1 << 5) | 1, time: 0 };
  if (year > 2107) year = 2107;
  return {
    date: ((year - 1980) << 9) | ((d.getMonth() + 1) << 5) | d.getDate(),
    time: (d.getHours() << 11) | (d.getMinutes() << 5) | (d.getSeconds() >> 1),
  };
}

function setU64(v: DataView, at: number, n: number): void {
  v.setUint32(at, n % 2 ** 32, true);
  v.setUint32(at + 4, Math.floor(n / 2 ** 32), true);
}

/** Builds the archive. Throws on duplicate or over-long names. */
export async function zipBlob(entries: readonly ZipEntry[], opts: ZipOptions = {}): Promise<Blob> {
  const enc = new TextEncoder();
  const names = entries.map((e) => enc.encode(e.name));
  const seen = new Set<string>();
  for (let i = 0; i < entries.length; i++) {
    const name = entries[i]!.name;
    if (names[i]!.length === 0 || names[i]!.length > 0xffff)
      throw new RangeError(`bad zip entry name "${name}"`);
    if (seen.has(name)) throw new RangeError(`two zip entries are named "${name}"`);
    seen.add(name);
  }

  // Decide zip64 from the archive's size as it would be without it.
  let plain = 22;
  for (let i = 0; i < entries.length; i++) plain += 30 + 46 + 2 * names[i]!.length + entries[i]!.data.size;
  const zip64 = opts.zip64 === 'always' || plain > U32_LIMIT || entries.length > U16_LIMIT;

  const parts: BlobPart[] = [];
  const central: Uint8Array<ArrayBuffer>[] = [];
  let offset = 0;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    const name = names[i]!;
    const size = e.data.size;
    const crc = e.crc32 ?? (await blobCrc32(e.data));
    const { date, time } = dosDateTime(e.modified ?? new Date());
    const version = zip64 ? 45 : 20;

    const local = new Uint8Array(30 + name.length + (zip64 ? 20 : 0));
    const lv = new DataView(local.buffer);
    lv.setUint32(0, SIG_LOCAL, true);
    lv.setUint16(4, version, true);
    lv.setUint16(6, FLAG_UTF8, true);
    lv.setUint16(8, 0, true); // stored
    lv.setUint16(10, time, true);
    lv.setUint16(12, date, true);
    lv.setUint32(14, crc, true);
    lv.setUint32(18, zip64 ? 0xffffffff : size, true);
    lv.setUint32(22, zip64 ? 0xffffffff : size, true);
    lv.setUint16(26, name.length, true);
    lv.setUint16(28, zip64 ? 20 : 0, true);
    local.set(name, 30);
    if (zip64) {
      const x = 30 + name.length;
      lv.setUint16(x, 0x0001, true);
      lv.setUint16(x + 2, 16, true);
      setU64(lv, x + 4, size); // original size
      setU64(lv, x + 12, size); // compressed size
    }

    const cd = new Uint8Array(46 + name.length + (zip64 ? 28 : 0));
    const cv = new DataView(cd.buffer);
    cv.setUint32(0, SIG_CENTRAL, true);
    cv.setUint16(4, version, true); // made by: MS-DOS attributes, this spec version
    cv.setUint16(6, version, true); // needed to extract
    cv.setUint16(8, FLAG_UTF8, true);
    cv.setUint16(10, 0, true);
    cv.setUint16(12, time, true);
    cv.setUint16(14, date, true);
    cv.setUint32(16, crc, true);
    cv.setUint32(20, zip64 ? 0xffffffff : size, true);
    cv.setUint32(24, zip64 ? 0xffffffff : size, true);
    cv.setUint16(28, name.length, true);
    cv.setUint16(30, zip64 ? 28 : 0, true);
    // comment length, disk number start, internal and external attributes: 0
    cv.setUint32(42, zip64 ? 0xffffffff : offset, true);
    cd.set(name, 46);
    if (zip64) {
      const x = 46 + name.length;
      cv.setUint16(x, 0x0001, true);
      cv.setUint16(x + 2, 24, true);
      setU64(cv, x + 4, size);
      setU64(cv, x + 12, size);
      setU64(cv, x + 20, offset);
    }

    parts.push(local, e.data);
    central.push(cd);
    offset += local.length + size;
    if (offset > MAX_SAFE_BYTES) throw new RangeError('the archive is too large');
  }

  const cdOffset = offset;
  let cdSize = 0;
  for (const c of central) {
    parts.push(c);
    cdSize += c.length;
  }

  if (zip64) {
    const rec = new Uint8Array(56 + 20);
    const v = new DataView(rec.buffer);
    v.setUint32(0, SIG_END64, true);
    setU64(v, 4, 44); // size of the rest of this record
    v.setUint16(12, 45, true);
    v.setUint16(14, 45, true);
    // this disk, disk with the central directory: 0
    setU64(v, 24, entries.length);
    setU64(v, 32, entries.length);
    setU64(v, 40, cdSize);
    setU64(v, 48, cdOffset);
    v.setUint32(56, SIG_LOCATOR64, true);
    v.setUint32(60, 0, true);
    setU64(v, 64, cdOffset + cdSize);
    v.setUint32(72, 1, true); // total disks
    parts.push(rec);
  }

  const end = new Uint8Array(22);
  const ev = new DataView(end.buffer);
  ev.setUint32(0, SIG_END, true);
  const count = zip64 ? 0xffff : entries.length;
  ev.setUint16(8, count, true);
  ev.setUint16(10, count, true);
  ev.setUint32(12, zip64 ? 0xffffffff : cdSize, true);
  ev.setUint32(16, zip64 ? 0xffffffff : cdOffset, true);
  parts.push(end);
  return new Blob(parts, { type: 'application/zip' });
}
