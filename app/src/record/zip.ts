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

/** What an entry's local header and its central directory record both say of it. */
interface EntryFields {
  /** Version needed to extract (4.5 with zip64, else 2.0). */
  version: number;
  time: number;
  date: number;
  crc: number;
  size: number;
  nameLength: number;
  zip64: boolean;
}

/**
 * The run of fields the local header (at 4) and the central directory record (at 6) have in
 * common, in the spec's order: version needed, flags, method (0, stored), time, date, CRC-32,
 * compressed and uncompressed size (0xFFFFFFFF when zip64 carries them), name and extra lengths.
 */
function writeEntryFields(v: DataView, at: number, f: EntryFields, extraLength: number): void {
  v.setUint16(at, f.version, true);
  v.setUint16(at + 2, FLAG_UTF8, true);
  v.setUint16(at + 4, 0, true); // stored
  v.setUint16(at + 6, f.time, true);
  v.setUint16(at + 8, f.date, true);
  v.setUint32(at + 10, f.crc, true);
  v.setUint32(at + 14, f.zip64 ? 0xffffffff : f.size, true);
  v.setUint32(at + 18, f.zip64 ? 0xffffffff : f.size, true);
  v.setUint16(at + 22, f.nameLength, true);
  v.setUint16(at + 24, extraLength, true);
}

/**
 * The zip64 extended information extra field at `at`: original and compressed size, then, in the
 * central directory only (`offset` not null), the local header's offset.
 */
function writeZip64Extra(v: DataView, at: number, size: number, offset: number | null): void {
  v.setUint16(at, 0x0001, true);
  v.setUint16(at + 2, offset === null ? 16 : 24, true);
  setU64(v, at + 4, size); // original size
  setU64(v, at + 12, size); // compressed size
  if (offset !== null) setU64(v, at + 20, offset);
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

    const fields: EntryFields = { version, time, date, crc, size, nameLength: name.length, zip64 };

    const local = new Uint8Array(30 + name.length + (zip64 ? 20 : 0));
    const lv = new DataView(local.buffer);
    lv.setUint32(0, SIG_LOCAL, true);
    writeEntryFields(lv, 4, fields, zip64 ? 20 : 0);
    local.set(name, 30);
    if (zip64) writeZip64Extra(lv, 30 + name.length, size, null);

    const cd = new Uint8Array(46 + name.length + (zip64 ? 28 : 0));
    const cv = new DataView(cd.buffer);
    cv.setUint32(0, SIG_CENTRAL, true);
    cv.setUint16(4, version, true); // made by: MS-DOS attributes, this spec version
    writeEntryFields(cv, 6, fields, zip64 ? 28 : 0);
    // comment length, disk number start, internal and external attributes: 0
    cv.setUint32(42, zip64 ? 0xffffffff : offset, true);
    cd.set(name, 46);
    if (zip64) writeZip64Extra(cv, 46 + name.length, size, offset);

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
