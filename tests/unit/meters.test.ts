// Parity of app/src/net/meters.ts with core/src/meters.rs: the golden vectors
// (tests/vectors/meters.json, also read by the Rust tests) must give the same levels and the
// same errors, and every cut of a message is refused.
import { describe, expect, it } from 'vitest';
import { checkMeters, codeToLinear, isMeters, meterLevel, meterStream } from '../../app/src/net/meters.ts';
import vectorFile from '../vectors/meters.json';
import { fromHex } from './hex';

const dbfs = (linear: number): number | null => (linear > 0 ? 20 * Math.log10(linear) : null);

describe('meters messages', () => {
  it.each(vectorFile.valid)('$name reads as its players and levels', (v) => {
    const bytes = fromHex(v.hex);
    expect(isMeters(bytes)).toBe(true);
    expect(checkMeters(bytes)).toBe(v.entries.length);
    v.entries.forEach((e, k) => {
      expect(meterStream(bytes, k)).toBe(e.stream);
      e.dbfs.forEach((want, level) => {
        const got = dbfs(meterLevel(bytes, k, level));
        if (want === null) expect(got).toBeNull();
        else expect(got).toBeCloseTo(want, 2);
      });
    });
  });

  it.each(vectorFile.invalid)('$name is refused as $error', (v) => {
    expect(checkMeters(fromHex(v.hex))).toBe(v.error);
  });

  it('refuses every cut of a message', () => {
    const bytes = fromHex(vectorFile.valid[1].hex);
    for (let cut = 0; cut < bytes.length; cut++) {
      expect(typeof checkMeters(bytes.subarray(0, cut)), `cut at ${cut}`).toBe('string');
    }
  });

  it('reads level codes as hundredths of a dB below full scale', () => {
    expect(codeToLinear(0)).toBe(1);
    expect(codeToLinear(2000)).toBeCloseTo(0.1, 12);
    expect(codeToLinear(65535)).toBe(0);
  });
});
