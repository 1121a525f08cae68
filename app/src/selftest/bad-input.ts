// Bad ring records for the bad-input scenario, built from a valid packet and a seed.
//
// Header bytes (see core/src/packet.rs): 0-7 timestamp, 8-9 seq, 10-11 frames, 12 rate code,
// 13 bit resolution, 14 channels in, 15 channels out; then planar audio; then an optional
// 8-byte trailer. A packet is exactly 16 + audio bytes, or that plus the 8-byte trailer.

import { Prng } from './prng';
import type { BadKind } from './schedule';

export const HEADER_LEN = 16;
/** Largest packet the engine accepts (16 + 256 frames x 2 channels x 4 bytes + 8). */
export const MAX_PACKET_LEN = 16 + 256 * 2 * 4 + 8;
/** Largest ring record payload. */
export const MAX_RECORD_PAYLOAD = 4096;

/**
 * True if the first 16 bytes could start a packet under the loosest reading of the header (a
 * known rate code and a supported bit resolution); random garbage is redrawn until this is false,
 * so that it cannot be valid by accident.
 */
export function plausibleHeader(bytes: Uint8Array): boolean {
  return (
    bytes.length >= HEADER_LEN && bytes[12] <= 6 && (bytes[13] === 16 || bytes[13] === 24 || bytes[13] === 32)
  );
}

/**
 * The bytes of a bad record of `kind`, made from `valid` (a well-formed packet without trailer)
 * and `seed`. 'unknown-peer' returns `valid` itself: the record is bad only by its tag.
 */
export function badRecord(kind: BadKind, valid: Uint8Array, seed: number): Uint8Array {
  const rng = new Prng(seed);
  switch (kind) {
    case 'truncated-header':
      // 1 .. 15 bytes: not even a header.
      return valid.slice(0, 1 + rng.int(HEADER_LEN - 1));
    case 'truncated-payload':
      // A full header, then fewer audio bytes than it announces.
      return valid.slice(0, HEADER_LEN + rng.int(valid.length - HEADER_LEN));
    case 'oversized': {
      // Longer than any packet (the ring still carries it).
      const len = MAX_PACKET_LEN + 1 + rng.int(MAX_RECORD_PAYLOAD - MAX_PACKET_LEN);
      const out = new Uint8Array(len);
      out.set(valid);
      for (let i = valid.length; i < len; i++) out[i] = rng.int(256);
      return out;
    }
    case 'garbage': {
      const len = 1 + rng.int(600);
      const out = new Uint8Array(len);
      do {
        for (let i = 0; i < len; i++) out[i] = rng.int(256);
      } while (plausibleHeader(out));
      return out;
    }
    case 'bad-bits': {
      // 8-bit audio: JackTrip has it, Tutti does not accept it.
      const out = valid.slice();
      out[13] = 8;
      return out;
    }
    case 'bad-rate': {
      // Rate code 7 is JackTrip's "undefined".
      const out = valid.slice();
      out[12] = 7;
      return out;
    }
    case 'unknown-peer':
      return valid;
  }
}
