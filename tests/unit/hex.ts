// Hex text and bytes, for the tests that hold golden vectors (tests/vectors/*.json).

/** The bytes a string of hex digit pairs spells. */
export const fromHex = (s: string): Uint8Array =>
  Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));

/** Bytes as lower-case hex digit pairs. */
export const toHex = (b: Uint8Array): string =>
  Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
