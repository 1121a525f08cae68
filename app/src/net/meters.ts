// Meters messages: the hub's reading of how loud each player arrives, sent to a listener in mix
// mode about twenty times a second (its own engine then hears only the mix, so it cannot meter
// the players itself). The layout, its reasons and its errors are documented in
// core/src/meters.rs; this is the reader the net side uses. The golden vectors in
// tests/vectors/meters.json hold both sides to the same bytes, and a core test compares these
// constants with the Rust ones.
//
// Nothing here allocates: the pump checks a message once, then reads its entries in place.

/** 'T' and 'M', the first two bytes of every meters message. */
export const METERS_MAGIC: readonly [number, number] = [0x54, 0x4d];
export const METERS_VERSION = 1;
/** Bytes before the first entry: magic, version, count (u16 LE). */
export const METERS_HEADER_LEN = 5;
/** Bytes of one entry: the stream id, then peak left, peak right, RMS left, RMS right. */
export const METER_ENTRY_LEN = 10;
/** Most entries one message carries. */
export const MAX_METER_ENTRIES = 512;
/** The level code of silence; any other code c reads −c / 100 dBFS. */
export const SILENT_CODE = 65535;

/** Why bytes are not a meters message (the names of core/src/meters.rs's MetersError). */
export type MetersErrorName = 'Truncated' | 'BadMagic' | 'UnsupportedVersion' | 'BadCount' | 'TrailingBytes';

/** True when `bytes` claims to be a meters message (its magic), whole or not. */
export function isMeters(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === METERS_MAGIC[0] && bytes[1] === METERS_MAGIC[1];
}

/** Checks a whole message before any of it is used: the number of entries, or what is wrong. */
export function checkMeters(bytes: Uint8Array): number | MetersErrorName {
  if (bytes.length < METERS_HEADER_LEN) return 'Truncated';
  if (!isMeters(bytes)) return 'BadMagic';
  if (bytes[2] !== METERS_VERSION) return 'UnsupportedVersion';
  const count = bytes[3] | (bytes[4] << 8);
  if (count === 0 || count > MAX_METER_ENTRIES) return 'BadCount';
  const expected = METERS_HEADER_LEN + count * METER_ENTRY_LEN;
  if (bytes.length < expected) return 'Truncated';
  return bytes.length === expected ? count : 'TrailingBytes';
}

/** The stream id of entry `k` of a checked message. */
export function meterStream(bytes: Uint8Array, k: number): number {
  const at = METERS_HEADER_LEN + k * METER_ENTRY_LEN;
  return bytes[at] | (bytes[at + 1] << 8);
}

/** The linear level (full scale 1) a level code stands for; 0 for silence. */
export function codeToLinear(code: number): number {
  return code === SILENT_CODE ? 0 : Math.pow(10, -code / 2000);
}

/**
 * Level `level` (0 peak left, 1 peak right, 2 RMS left, 3 RMS right) of entry `k` of a checked
 * message, linear.
 */
export function meterLevel(bytes: Uint8Array, k: number, level: number): number {
  const at = METERS_HEADER_LEN + k * METER_ENTRY_LEN + 2 + 2 * level;
  return codeToLinear(bytes[at] | (bytes[at + 1] << 8));
}
