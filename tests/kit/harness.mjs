// What most browser test files set up the same way: the Chromium flags for fake media and
// one-machine WebRTC, the real server on the built app plus one browser for the file's tests
// (on Chromium's fake audio device, or on a private sound server with 128- or 256-frame
// callbacks), a page's logs, polling for a state, and downloads.
import { readFileSync } from 'node:fs';
import { after, before } from 'node:test';
import { browserAudio, DIST, launchChromium } from './browser.mjs';
import { pulseMicrophone, toneMicrophone } from './audio.mjs';
import { startServer } from './server.mjs';

/** Audio plays without a gesture; getUserMedia gets a fake device without asking. */
export const MEDIA_FLAGS = [
  '--autoplay-policy=no-user-gesture-required',
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
];
/** MEDIA_FLAGS plus WebRTC on 127.0.0.1 (pages join with `?ice=loopback`). */
export const ROOM_FLAGS = [
  ...MEDIA_FLAGS,
  '--allow-loopback-in-peer-connection',
  '--disable-features=WebRtcHideLocalIpsWithMdns',
];

/**
 * Starts the real server on the built app and one headless Chromium before the file's tests,
 * and stops both after them (ending the process: a harness that keeps handles would hang).
 * @param {string[]} flags
 * @param {{ backend?: import('./chromium.mjs').AudioBackend, tones?: number[], serverArgs?: string[] }} [audio]
 *   the browser's audio backend ('fake' by default); on a sound server, the microphones' tones
 *   (every tone a page of the file uses, Hz), started with the browser and stopped with it;
 *   `serverArgs`: the server's extra flags (e.g. a JackTrip handshake port). Rooms do not move
 *   to the hub by themselves here (`--hub-auto false`) unless `serverArgs` says otherwise: the
 *   tests of a mesh study the mesh, and on this starved machine its queues can grow as a full
 *   uplink's do; the hub's tests choose their topology.
 * @returns {{ server: Awaited<ReturnType<typeof startServer>>, browser: import('playwright-core').Browser }}
 *   filled in once the tests run.
 */
export function serverAndBrowser(flags, { backend = 'fake', tones, serverArgs = [] } = {}) {
  const h = /** @type {any} */ ({ server: null, browser: null });
  before(async () => {
    const args = serverArgs.includes('--hub-auto') ? serverArgs : ['--hub-auto', 'false', ...serverArgs];
    h.server = await startServer({ dist: DIST, args });
    h.browser = await launchChromium(flags, { backend, tones });
  });
  after(async () => {
    await h.browser?.close().catch(() => {});
    await h.server?.stop().catch(() => {});
    setTimeout(() => process.exit(process.exitCode ?? 0), 1000).unref();
  });
  return h;
}

/**
 * A fresh browser context whose microphone is a sine of `freq` Hz at `amplitude`: on the fake
 * audio device an oscillator in the page's own AudioContext; on a sound server the server's
 * input device of that tone (its level set to `amplitude`; pages of one tone share it).
 * @param {import('playwright-core').Browser} browser
 * @param {{ freq: number, amplitude: number }} tone
 * @param {import('playwright-core').BrowserContextOptions} [options]
 */
export async function toneContext(browser, tone, options = {}) {
  const { pulse } = browserAudio(browser);
  const source = pulse?.sources.find((s) => s.freq === tone.freq);
  if (pulse && !source) {
    throw new Error(
      `the sound server has no tone of ${tone.freq} Hz (tones: ${pulse.sources.map((s) => s.freq).join(', ')}): start it with that tone`,
    );
  }
  const context = await browser.newContext(options);
  await context.grantPermissions(['microphone']);
  if (pulse && source) {
    await pulse.setAmplitude(tone.freq, tone.amplitude);
    await context.addInitScript(pulseMicrophone, { label: source.label });
  } else {
    await context.addInitScript(toneMicrophone, tone);
  }
  return context;
}

/**
 * Keeps a page's errors (and, unless `errorsOnly`, all its console output) in `logs`.
 * @param {import('playwright-core').Page} page
 * @param {string} label
 * @param {string[]} logs
 */
export function collectLogs(page, label, logs, { errorsOnly = false } = {}) {
  page.on('console', (m) => {
    if (!errorsOnly || m.type() === 'error') logs.push(`${label} console.${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => logs.push(`${label} pageerror: ${e.message}`));
  return logs;
}

/**
 * Calls `fn` until it returns `{ ok: true, ... }`; throws with the last state after `timeoutMs`.
 * @template {{ ok: boolean }} T
 * @param {string} what
 * @param {() => Promise<T>} fn
 */
export async function waitFor(what, fn, timeoutMs = 30000, everyMs = 200) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last?.ok) return last;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`${what}: not reached in ${timeoutMs / 1000} s; last: ${JSON.stringify(last)}`);
}

/**
 * Waits until every page of a room hears every other: each has `pages.length − 1` participants
 * connected and sending (a stream format known). Throws with the counts after `timeoutMs`.
 * @param {import('playwright-core').Page[]} pages
 */
export function waitForRoomOf(pages, timeoutMs = 45000) {
  return waitFor(
    `room of ${pages.length}`,
    async () => {
      const seen = await Promise.all(
        pages.map((page) =>
          page.evaluate(() => {
            const v = window.tutti?.session?.view;
            if (!v) return { n: 0, state: 'no session' };
            const ps = v.participants;
            return {
              n: ps.filter((p) => p.link === 'connected' && p.format).length,
              // What the page says of itself and each participant, for a room that does not form.
              state: {
                joined: v.joined,
                error: v.error?.code ?? null,
                signaling: v.signaling,
                mode: v.topology.mode,
                running: window.tutti.session.ctx?.state ?? null,
                peers: ps.map(
                  (p) => `${p.name}:${p.link}:${p.format || '-'}:${JSON.stringify(p.restarts ?? {})}`,
                ),
              },
            };
          }),
        ),
      );
      const n = seen.map((s) => s.n);
      return { ok: n.every((x) => x === pages.length - 1), n, pages: seen.map((s) => s.state) };
    },
    timeoutMs,
  );
}

/**
 * What a page's room view says of the room's topology and its participants.
 * @param {import('playwright-core').Page} page
 */
export function hubView(page) {
  return page.evaluate(() => {
    const v = window.tutti.session.view;
    return {
      self: v.self.peer,
      topology: v.topology.mode,
      hub: v.topology.hub,
      peers: v.participants.map((p) => ({ peer: p.peer, name: p.name, kind: p.kind, link: p.link })),
    };
  });
}

/**
 * Waits until every page uses the hub in `mode` with its hub link connected.
 * @param {import('playwright-core').Page[]} pages
 * @param {'forward' | 'mix'} mode
 */
export function waitForHub(pages, mode, timeoutMs = 30000) {
  return waitFor(
    `hub links in ${mode} mode`,
    async () => {
      const views = await Promise.all(pages.map(hubView));
      return { ok: views.every((v) => v.topology === mode && v.hub === 'connected'), views };
    },
    timeoutMs,
  );
}

/** Clicks `locator` and returns the file it downloads: suggested name and bytes. */
export async function download(page, locator) {
  const [dl] = await Promise.all([page.waitForEvent('download'), locator.click()]);
  return { name: dl.suggestedFilename(), bytes: new Uint8Array(readFileSync(await dl.path())) };
}

/**
 * A fresh context whose microphone is `tone`, joining `room` by its link as `name` (one-machine
 * WebRTC). `audio`: settings put where the previous release kept them, imported by the app.
 */
export async function joinRoom(h, room, { name, tone }, logs, { audio = null, options = {} } = {}) {
  const context = await toneContext(h.browser, { freq: tone, amplitude: 0.1 }, options);
  if (audio)
    await context.addInitScript((a) => localStorage.setItem('tutti.audio', JSON.stringify(a)), audio);
  const page = await context.newPage();
  collectLogs(page, name, logs, { errorsOnly: true });
  await page.goto(`${h.server.url}r/${room}?ice=loopback`);
  await page.getByTestId('display-name').fill(name);
  await page.getByTestId('join').click();
  return page;
}

/** Starts the sound check on a fresh page and waits until the tone comes back through it. */
export async function runSoundCheck(page) {
  await page.getByTestId('soundcheck-toggle').click();
  const end = Date.now() + 20000;
  let last = null;
  while (Date.now() < end) {
    last = await page.evaluate(() => {
      const v = window.tutti?.session?.view;
      const p = v?.participants[0];
      return v
        ? {
            error: v.error,
            format: p?.format ?? '',
            bufferMs: p?.bufferMs ?? 0,
            peak: p?.levels.peakL ?? -Infinity,
          }
        : null;
    });
    if (last?.error) throw new Error(`sound check failed: ${JSON.stringify(last.error)}`);
    if (last && last.format && last.peak > -40) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the sound check did not play: ${JSON.stringify(last)}`);
}

/**
 * Congested seconds reported for `page` once a second from now (what a page on a failing link
 * would measure: 30 % lost, 600 kbit/s through); its own clean reports go on between them. A
 * page of Playwright or of WebDriver (tests/kit/webdriver.mjs): only its `evaluate` is used.
 * @param {{ evaluate: (fn: () => unknown) => Promise<unknown> }} page
 */
export function startCongested(page) {
  return page.evaluate(() => {
    const congested = () =>
      window.tutti.session.reportReception({
        receivedBps: 600000,
        loss: 0.3,
        delayRiseMsPerS: 20,
        rttMs: 5,
        capacityBps: null,
      });
    congested();
    /** @type {any} */ (window).__congested = setInterval(congested, 1000);
  });
}

/**
 * Ends `startCongested`'s reports.
 * @param {{ evaluate: (fn: () => unknown) => Promise<unknown> }} page
 */
export function stopCongested(page) {
  return page.evaluate(() => clearInterval(/** @type {any} */ (window).__congested));
}
