// Generated room names and room keys: readable, and too many to guess.
//
// A room name such as "warm-cello-k3v9q2m7xd1ft" is two words for the ear plus a suffix of
// SUFFIX_CHARS base-32 characters (5 bits each, SUFFIX_BITS in all) drawn from the platform's
// CSPRNG: whoever probes names at a server's rate will not hit one. The words add a few bits
// more (ROOM_NAME_BITS counts them) but are not counted on. A private room also has a key of
// KEY_BYTES random bytes, carried in the link's fragment (route.ts) and sent only in `join`.
//
// Every random draw comes from `crypto.getRandomValues` (or the `fill` a test passes in), never
// from a non-cryptographic generator, whose state a page can predict.

const ADJECTIVES = [
  'warm',
  'bright',
  'mellow',
  'swift',
  'gentle',
  'bold',
  'quiet',
  'lively',
  'deep',
  'golden',
  'silver',
  'velvet',
  'crisp',
  'sunny',
  'misty',
  'brisk',
  'calm',
  'happy',
  'grand',
  'little',
];
const INSTRUMENTS = [
  'cello',
  'viola',
  'violin',
  'oboe',
  'flute',
  'horn',
  'tuba',
  'harp',
  'banjo',
  'piano',
  'organ',
  'drum',
  'bass',
  'guitar',
  'trumpet',
  'clarinet',
  'bassoon',
  'sax',
  'lute',
  'marimba',
];

/** Crockford's base 32 in lower case: digits and letters without i, l, o, u (no 1/l, 0/o mix-ups). */
export const SUFFIX_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
export const SUFFIX_CHARS = 13;
/** Random bits in the suffix alone: 13 characters of 5 bits. */
export const SUFFIX_BITS = SUFFIX_CHARS * Math.log2(SUFFIX_ALPHABET.length);
/** Random bits in a whole generated name: the two words' choices and the suffix. */
export const ROOM_NAME_BITS = Math.log2(ADJECTIVES.length) + Math.log2(INSTRUMENTS.length) + SUFFIX_BITS;
/** What a generated name looks like. */
export const GENERATED_ROOM_NAME = /^[a-z]+-[a-z]+-[0-9a-hjkmnp-tv-z]{13}$/;

/** A private room's key: 16 random bytes (128 bits), base64url without padding (22 chars). */
export const KEY_BYTES = 16;

/** Fills `bytes` with random values (the shape of crypto.getRandomValues). */
export type RandomFill = (bytes: Uint8Array) => Uint8Array;

const cryptoFill: RandomFill = (bytes) => crypto.getRandomValues(bytes);

/**
 * A uniform index below `n` (n ≤ 256) from random bytes: bytes at or above the largest multiple
 * of n are drawn again, so no index is favoured.
 */
function uniformIndex(n: number, fill: RandomFill): number {
  const limit = 256 - (256 % n);
  const one = new Uint8Array(1);
  // Each draw is accepted with probability limit/256 ≥ 1/2: 64 draws all rejected has odds
  // below 2^-64; an endless loop would mean a broken source.
  for (let i = 0; i < 64; i++) {
    const b = fill(one)[0]!;
    if (b < limit) return b % n;
  }
  throw new Error('the random source keeps returning out-of-range bytes');
}

/** `chars` characters of SUFFIX_ALPHABET, 5 random bits each. */
export function randomSuffix(chars = SUFFIX_CHARS, fill: RandomFill = cryptoFill): string {
  // 32 divides 256: the low five bits of a byte are uniform.
  const bytes = fill(new Uint8Array(chars));
  let s = '';
  for (const b of bytes) s += SUFFIX_ALPHABET[b & 31];
  return s;
}

/** A readable, unguessable room name such as "warm-cello-k3v9q2m7xd1ft". */
export function randomRoomName(fill: RandomFill = cryptoFill): string {
  const adjective = ADJECTIVES[uniformIndex(ADJECTIVES.length, fill)]!;
  const instrument = INSTRUMENTS[uniformIndex(INSTRUMENTS.length, fill)]!;
  return `${adjective}-${instrument}-${randomSuffix(SUFFIX_CHARS, fill)}`;
}

/** A private room's key: KEY_BYTES random bytes as base64url (22 chars of [A-Za-z0-9_-]). */
export function randomRoomKey(fill: RandomFill = cryptoFill): string {
  return base64url(fill(new Uint8Array(KEY_BYTES)));
}

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** base64url without padding (RFC 4648 §5). */
export function base64url(bytes: Uint8Array): string {
  let s = '';
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      s += B64URL[(acc >> bits) & 63];
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) s += B64URL[(acc << (6 - bits)) & 63];
  return s;
}
