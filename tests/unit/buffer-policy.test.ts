// The jitter buffer's policy: one type and one set of defaults on the TypeScript side
// (app/src/audio/buffer-policy.ts), and what a partial or hostile control message becomes.
import { describe, expect, it } from 'vitest';
import {
  BUFFER_CEILING_FRAMES,
  BUFFER_FLOOR_FRAMES,
  DEFAULT_BUFFER_POLICY,
  FIXED_PACKETS_DEFAULT,
  policyOf,
  sanitizePolicy,
} from '../../app/src/audio/buffer-policy';
import { DEFAULT_CONFIG } from '../../app/src/audio/engine-core';
import { benchConfig } from '../../bench/web/messages';
import jitterRs from '../../core/src/jitter/mod.rs?raw';

/** `pub const NAME: u32 = N;` from the Rust source. */
function rustConst(name: string): number {
  const m = new RegExp(`pub const ${name}: u32 = (\\d+);`).exec(jitterRs);
  if (!m) throw new Error(`${name} not found in core/src/jitter/mod.rs`);
  return Number(m[1]);
}

describe('buffer policy', () => {
  it('adaptive spans one quantum to 160 ms at 48 kHz', () => {
    expect(BUFFER_FLOOR_FRAMES).toBe(128);
    expect(BUFFER_CEILING_FRAMES / 48).toBe(160);
    expect(DEFAULT_BUFFER_POLICY).toEqual({ mode: 'adaptive', floorFrames: 128, ceilingFrames: 7680 });
  });

  it('the Rust core has the same defaults', () => {
    expect(rustConst('DEFAULT_FLOOR_FRAMES')).toBe(BUFFER_FLOOR_FRAMES);
    expect(rustConst('DEFAULT_CEILING_FRAMES')).toBe(BUFFER_CEILING_FRAMES);
  });

  it('the engine and the benchmark run the one default', () => {
    expect(DEFAULT_CONFIG.buffer).toEqual(DEFAULT_BUFFER_POLICY);
    expect(benchConfig(8).buffer).toEqual(DEFAULT_BUFFER_POLICY);
  });

  it("the user's choice becomes the engine's policy", () => {
    expect(policyOf({ mode: 'adaptive' })).toEqual(DEFAULT_BUFFER_POLICY);
    expect(policyOf({ mode: 'fixed', packets: 5 })).toEqual({ mode: 'fixed', packets: 5 });
  });

  it('a partial or hostile message gets defaults and bounds', () => {
    expect(sanitizePolicy({ mode: 'fixed' })).toEqual({ mode: 'fixed', packets: FIXED_PACKETS_DEFAULT });
    expect(sanitizePolicy({ mode: 'fixed', packets: NaN })).toEqual({
      mode: 'fixed',
      packets: FIXED_PACKETS_DEFAULT,
    });
    expect(sanitizePolicy({ mode: 'fixed', packets: 0 })).toEqual({ mode: 'fixed', packets: 1 });
    expect(sanitizePolicy({ mode: 'fixed', packets: 1e9 })).toEqual({ mode: 'fixed', packets: 4096 });
    expect(sanitizePolicy({ mode: 'fixed', packets: 3.9 })).toEqual({ mode: 'fixed', packets: 3 });
    expect(sanitizePolicy({ mode: 'adaptive' })).toEqual(DEFAULT_BUFFER_POLICY);
    expect(sanitizePolicy({ mode: 'adaptive', floorFrames: -5, ceilingFrames: Infinity })).toEqual({
      mode: 'adaptive',
      floorFrames: 0,
      ceilingFrames: BUFFER_CEILING_FRAMES,
    });
    expect(sanitizePolicy({ mode: 'adaptive', floorFrames: 256.7, ceilingFrames: 1024 })).toEqual({
      mode: 'adaptive',
      floorFrames: 256,
      ceilingFrames: 1024,
    });
  });
});
