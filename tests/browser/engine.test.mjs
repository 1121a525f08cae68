// End-to-end test of the audio engine in headless Chromium: the self-test page (app/selftest.html)
// runs the product engine worklet with the real WASM core in a realtime 48 kHz AudioContext, feeds
// it five synthetic peers (one sine each) through the inbound ring from a Worker, and captures the
// output with a tap worklet. This file opens the page once per scenario and checks its results:
//
// 1. network: 0-10 ms jitter (reordering), 2% loss, 2% duplicates, 3 packets per peer 300 ms late.
//    Per peer the engine's received / lost / late / duplicates must EQUAL the injected ledger;
//    every tone at its gain/pan level within +-1 dB (concealment of ~2.5% of the blocks costs
//    about 0.2 dB), tones panned away absent, nothing else above -50 dB re one tone (a concealment
//    that silences or repeats blocks out of phase reaches about -40 dB), no NaN, no sample beyond
//    +-1, no step between samples above 1.5 x the analytic bound of the sum of sines (room for
//    a short cross-fade, none for a click).
// 2. bad-input: clean tones (0-2 ms jitter, nothing lost) while truncated, oversized, garbage,
//    8-bit, rate-code-7 and unknown-slot records go into the same ring. Malformed and unknown-peer
//    counts must equal what was injected (globally and per peer), the peers' counters must show
//    nothing lost, and the tones must stay exact (+-0.1 dB, nothing else above -70 dB: one block
//    of garbage played as audio would read about -57 dB) with no step between samples larger
//    than 1.1 x the analytic bound of the sum of sines.
//
// The ledger is exact only if every regular packet reached the engine in time; the page measures
// how late its sender actually wrote each one and repeats a run (up to 3 times) that a busy
// machine stalled by more than the buffer absorbs. The test fails if even the last run was.
//
// Nothing is built here: `npm test` builds dist/ first.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchChromium, openPage, serveDist } from '../kit/browser.mjs';
import { checkScenario } from './lib/selftest-checks.mjs';

/** Up to three runs of ~9 s each, plus start-up. */
const PAGE_TIMEOUT_MS = 90_000;

/** @type {import('playwright-core').Browser | undefined} */
let browser;
/** @type {{ url: string, close: () => Promise<void> } | undefined} */
let server;

before(async () => {
  server = await serveDist();
  browser = await launchChromium(['--autoplay-policy=no-user-gesture-required']);
});

after(async () => {
  await browser?.close();
  await server?.close();
  // A browser child or a keep-alive socket must not keep the test process alive.
  setTimeout(() => process.exit(process.exitCode ?? 0), 1000).unref();
});

/** Opens the self-test for one scenario and returns its result object. */
async function runPage(name) {
  assert.ok(browser && server, 'browser and server are up');
  const { page, logs } = await openPage(browser, `${server.url}selftest.html?auto=1&scenario=${name}`);
  try {
    await page
      .waitForFunction(() => ['done', 'error'].includes(window.__selftest?.state ?? ''), null, {
        timeout: PAGE_TIMEOUT_MS,
        polling: 250,
      })
      .catch((e) => {
        throw new Error(
          `self-test page did not finish within ${PAGE_TIMEOUT_MS / 1000} s: ${e.message}\n${logs.join('\n')}`,
        );
      });
    const state = await page.evaluate(() => window.__selftest);
    assert.ok(state, `the self-test page left no state\npage log:\n${logs.join('\n')}`);
    const status = await page.textContent('#status');
    assert.equal(
      state.state,
      'done',
      `self-test could not run: ${state.error}\npage log:\n${logs.join('\n')}`,
    );
    assert.equal(state.scenarios.length, 1, 'one scenario ran');
    return { r: state.scenarios[0], status, logs };
  } finally {
    await page.close();
  }
}

test('five peers over jitter, reordering, loss, duplicates and late packets: exact stats, clean tones', async (t) => {
  const { r, status } = await runPage('network');
  checkScenario(t, r, status);
});

test('bad records are counted and dropped and never disturb the other peers', async (t) => {
  const { r, status } = await runPage('bad-input');
  checkScenario(t, r, status);
});
