// Bundles: several whole packets in one data-channel message, as a hub forwarding the room's
// streams to one listener sends them (one message per block instead of one per stream). The
// layout, its reasons and its errors are documented in core/src/bundle.rs; this is the reader
// the net side uses. The golden vectors in tests/vectors/bundles.json hold both sides to the
// same bytes, and a core test compares these constants with the Rust ones.
//
// Nothing here allocates: the pump checks a message once, then visits its packets in place.
import { HEADER_LEN, MAX_PACKET_LEN } from '../audio/packet.ts';

/** 'T' and 'B', the first two bytes of every bundle. */
export const BUNDLE_MAGIC: readonly [number, number] = [0x54, 0x42];
export const BUNDLE_VERSION = 1;
/** Bytes before the first entry: magic, version, count. */
export const BUNDLE_HEADER_LEN = 4;
/** Bytes of an entry's little-endian length. */
export const ENTRY_LEN_BYTES = 2;
/** Most packets one bundle carries. */
export const MAX_BUNDLE_PACKETS = 64;

/** Why bytes are not a bundle (the names of core/src/bundle.rs's BundleError). */
export type BundleErrorName =
  'Truncated' | 'BadMagic' | 'UnsupportedVersion' | 'BadCount' | 'BadEntryLength' | 'TrailingBytes';

/**
 * Checks a whole bundle before any of it is used: the number of packets it carries, or the first
 * thing wrong with it (then none of it may be played: once one length is wrong, no later
 * boundary can be trusted).
 */
export function checkBundle(bytes: Uint8Array): number | BundleErrorName {
  if (bytes.length < BUNDLE_HEADER_LEN) return 'Truncated';
  if (bytes[0] !== BUNDLE_MAGIC[0] || bytes[1] !== BUNDLE_MAGIC[1]) return 'BadMagic';
  if (bytes[2] !== BUNDLE_VERSION) return 'UnsupportedVersion';
  const count = bytes[3];
  if (count === 0 || count > MAX_BUNDLE_PACKETS) return 'BadCount';
  let at = BUNDLE_HEADER_LEN;
  for (let k = 0; k < count; k++) {
    if (bytes.length - at < ENTRY_LEN_BYTES) return 'Truncated';
    const len = bytes[at] | (bytes[at + 1] << 8);
    if (len < HEADER_LEN || len > MAX_PACKET_LEN) return 'BadEntryLength';
    at += ENTRY_LEN_BYTES;
    if (bytes.length - at < len) return 'Truncated';
    at += len;
  }
  return at === bytes.length ? count : 'TrailingBytes';
}

/**
 * Visits each packet of a bundle that `checkBundle` accepted, in order, as its offset and
 * length within `bytes`.
 */
export function forEachPacket(bytes: Uint8Array, onPacket: (offset: number, length: number) => void): void {
  let at = BUNDLE_HEADER_LEN;
  for (let k = 0; k < bytes[3]; k++) {
    const len = bytes[at] | (bytes[at + 1] << 8);
    onPacket(at + ENTRY_LEN_BYTES, len);
    at += ENTRY_LEN_BYTES + len;
  }
}
