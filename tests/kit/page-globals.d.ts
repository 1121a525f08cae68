// What the pages under test put on `window`, for the code the browser tests and benchmarks run
// in the page (page.evaluate, waitForFunction). The app's own handles come with the app's types,
// so a test that reaches for a renamed member fails the type check.
import type { browserFeatures } from '../../app/src/audio/support.ts';
import type { Session } from '../../app/src/room/session.ts';
import type {} from '../../app/src/selftest/main.ts';
import type {} from '../../bench/web/bench-page.ts';
import type {} from '../../bench/web/net-bench.ts';

/** What audio-backend.test.mjs's probe page measures. */
export interface ProbeResult {
  baseLatencyMs: number;
  outputLatencyMs: number;
  inputLatencyMs: number;
  inputLabel: string;
  calls: number[];
  input: number[];
}

declare global {
  interface Window {
    /** The diagnostics handle openSession() leaves (app/src/room/session.ts). */
    tutti: { session: Session };
    /** The app page's feature answers (app/src/ui/main.ts). */
    tuttiFeatures?: typeof browserFeatures;
    /** record.test.mjs: when the recording state was first seen (performance.now()). */
    __recordingAt?: number | null;
    /** audio-backend.test.mjs's probe page. */
    probe: (warmupMs: number, windowMs: number) => Promise<ProbeResult>;
  }
}
