// The build's staleness rules (scripts/build.mjs) name real files: an input that does not exist
// can never make its step stale, so a typo there would silently serve a stale build.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { steps } from '../../scripts/build.mjs';
import { ROOT } from '../../scripts/lib/run.mjs';

describe('build steps', () => {
  for (const step of steps()) {
    it(`${step.name}: every input exists`, () => {
      expect(step.inputs.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
    });
  }
});
