// A room of different engines: a page of headless Chromium (its microphone a 330 Hz tone) and a
// page of Firefox ESR over W3C WebDriver (its microphone the tests' sound server's default input,
// 440 Hz), joining by the same room link, against the real server, with real data channels on
// loopback and the real engine worklet in each.
//
// 1. As a mesh, each page hears the other's tone at its level and not its own; Firefox records
//    the room with its Record button, and its stored stems (read back through IndexedDB) are
//    the two tones at their levels.
// 2. Through the hub forwarding, the same; then the Firefox page reports congested seconds (what
//    a page on a failing link measures) and the hub moves it to an Opus layer: Firefox's worklet
//    decodes libopus frames (built with emscripten) and it still hears Chromium at level.
// 3. Through the hub mixing, the same: each page hears the other in its own mix.
// 4. WebKitGTK given the same link: where the browser's own answers say it cannot run the engine
//    or has no data channels (this build: no SharedArrayBuffer, no RTCPeerConnection), the room
//    page says so in the same words, and joining ends in that message instead of a silent room.
//
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { checkHearsOthers, toneDbMedian, toneFrequency } from '../kit/audio.mjs';
import { DIST, launchChromium } from '../kit/browser.mjs';
import {
  ROOM_FLAGS,
  collectLogs,
  joinRoom,
  startCongested,
  stopCongested,
  waitForHub,
  waitForRoomOf,
} from '../kit/harness.mjs';
import { startPulse } from '../kit/pulse.mjs';
import { startServer } from '../kit/server.mjs';
import { openEngine } from '../kit/webdriver.mjs';
import { readDatabase } from './lib/idb.mjs';

/** Chromium's tone (an oscillator as its microphone) and Firefox's (the sound server's input). */
const TONES = [330, 440];
const ROOM = 'e2e-engines';
/** The adaptive buffers settle this long after a change of path before a page is measured. */
const SETTLE_MS = 3000;
/** Firefox records the mesh this long; its stems are held to their tones' levels. */
const RECORD_MS = 5000;
const RATE = 48000;

/** @type {import('../kit/pulse.mjs').PulseServer | undefined} */
let pulse;
/** @type {any} */
let server;
/** @type {import('playwright-core').Browser | undefined} */
let chromium;
/** @type {import('../kit/webdriver.mjs').EnginePage | undefined} */
let firefox;
/** @type {string[]} */
const logs = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  pulse = await startPulse({ tones: [TONES[1]], amplitude: 0.1 });
  server = await startServer({ dist: DIST, args: ['--hub-auto', 'false'] });
  chromium = await launchChromium(ROOM_FLAGS);
});

after(async () => {
  await firefox?.close().catch(() => {});
  await chromium?.close().catch(() => {});
  await server?.stop().catch(() => {});
  await pulse?.stop().catch(() => {});
  setTimeout(() => process.exit(process.exitCode ?? 0), 1000).unref();
});

/**
 * Joins `page` (a WebDriver page) to `room` by its link as `name`, as a user does.
 * @param {import('../kit/webdriver.mjs').EnginePage} page
 * @param {string} room
 * @param {string} name
 */
async function joinByLink(page, room, name) {
  await page.goto(`${server.url}r/${room}?ice=loopback`);
  await page.waitFor(15_000, 'the join form', () => !!document.querySelector('[data-testid="join"]'));
  await page.fill('display-name', name);
  await page.click('join');
}

/** The formats page `page` receives, as its room view names them. */
function formats(page) {
  return page.evaluate(() => window.tutti.session.view.participants.map((p) => p.format));
}

/**
 * One track of a stored recording, its first channel, read back through IndexedDB itself in the
 * page (self-contained: WebDriver sends its source).
 * @param {import('../kit/webdriver.mjs').EnginePage} page
 * @param {string} id
 * @param {number} track
 * @returns {Promise<Float32Array>}
 */
async function trackSamples(page, id, track) {
  const samples = await page.evaluate(
    ([id, track]) =>
      new Promise((resolve, reject) => {
        const req = indexedDB.open('tutti');
        req.onerror = () => reject(req.error);
        req.onsuccess = () => {
          const db = req.result;
          const all = db.transaction('chunks').objectStore('chunks').getAll();
          all.onerror = () => reject(all.error);
          all.onsuccess = () => {
            db.close();
            const chunks = all.result
              .filter((c) => c.recordingId === id && c.track === track)
              .sort((a, b) => a.index - b.index);
            const out = [];
            for (const c of chunks) {
              const x = new Float32Array(c.data);
              for (let i = 0; i < c.frames; i++) out.push(x[i * c.channels]);
            }
            resolve(out);
          };
        };
      }),
    /** @type {[string, number]} */ ([id, track]),
  );
  return Float32Array.from(samples);
}

/**
 * Firefox records RECORD_MS of the mesh with the page's own Record button, as a user does; the
 * recording is stored whole, its length the wall time's, and its stems are the known tones: its
 * own input (440 Hz) and Chromium (330 Hz) at the microphones' -20 dBFS (pre-fader), the mix
 * with Chromium at centre pan (-23 dBFS).
 * @param {import('../kit/webdriver.mjs').EnginePage} page
 */
async function recordInFirefox(page) {
  await page.click('record');
  await page.waitFor(
    15_000,
    'the recording started',
    () => document.querySelector('[data-testid="record-bar"]')?.getAttribute('data-state') === 'recording',
  );
  const t0 = Date.now();
  await sleep(RECORD_MS);
  await page.click('record');
  const wallS = (Date.now() - t0) / 1000;
  await page.waitFor(
    15_000,
    'the recording saved',
    () => !!document.querySelector('[data-testid="record-saved"]'),
  );
  const metas = (await readDatabase(/** @type {any} */ (page))).recordings;
  assert.equal(metas.length, 1, 'one recording stored');
  const meta = metas[0];
  const seconds = meta.frames / RATE;
  assert.equal(meta.state, 'complete');
  assert.ok(Math.abs(seconds - wallS) <= 0.5, `recorded ${seconds.toFixed(2)} s for ${wallS.toFixed(2)} s`);
  const figures = {};
  /** @type {[string, number, number][]} */
  const expected = [
    ['input', TONES[1], -20],
    ['peer', TONES[0], -20],
    ['mix', TONES[0], 20 * Math.log10(0.1 * Math.SQRT1_2)],
  ];
  for (const [kind, tone, db] of expected) {
    const t = meta.tracks.find((x) => x.kind === kind);
    assert.ok(t, `a ${kind} track: ${JSON.stringify(meta.tracks)}`);
    const x = await trackSamples(page, meta.id, t.track);
    assert.equal(x.length, meta.frames, `the ${kind} track has the recording's length`);
    // Clear of the first and last second.
    const mid = x.subarray(RATE, x.length - RATE);
    const hz = toneFrequency(mid, tone, RATE, 3);
    const level = toneDbMedian(mid, tone, RATE);
    figures[kind] = { hz: +hz.toFixed(2), db: +level.toFixed(2) };
    assert.ok(Math.abs(hz - tone) <= 0.5, `${kind}: ${hz.toFixed(2)} Hz, expected ${tone}`);
    assert.ok(Math.abs(level - db) <= 1, `${kind}: ${level.toFixed(2)} dBFS, expected ${db.toFixed(2)}`);
  }
  console.log(
    `Firefox recorded ${seconds.toFixed(3)} s (wall ${wallS.toFixed(3)} s): ${JSON.stringify(figures)}`,
  );
}

test(
  'a Chromium page and a Firefox page hear each other at their levels: as a mesh, through the hub forwarding (PCM and Opus) and mixing',
  { timeout: 240_000 },
  async () => {
    const h = { browser: chromium, server };
    const cp = await joinRoom(h, ROOM, { name: 'Chromium', tone: TONES[0] }, logs);
    collectLogs(cp, 'Chromium', logs, { errorsOnly: true });
    firefox = await openEngine('firefox', { env: /** @type {any} */ (pulse).env });
    await joinByLink(firefox, ROOM, 'Firefox');
    const pages = /** @type {any[]} */ ([cp, firefox]);
    try {
      // 1. The mesh.
      await waitForRoomOf(pages);
      await sleep(SETTLE_MS);
      for (const i of [0, 1]) await checkHearsOthers(pages, i, TONES, 'mesh');
      await recordInFirefox(firefox);

      // 2. The hub, forwarding: the packets as sent, then an Opus layer for Firefox.
      await cp.evaluate(() => window.tutti.session.setTopology('forward'));
      await waitForHub(pages, 'forward');
      await sleep(SETTLE_MS);
      for (const i of [0, 1]) await checkHearsOthers(pages, i, TONES, 'forward');
      await startCongested(firefox);
      const moved = await firefox.waitFor(10_000, "Firefox's page on an Opus layer", () => {
        const v = window.tutti.session.view;
        const layer = v.topology.layer;
        return layer && layer.layer !== 'as-sent' && v.participants.every((p) => /^Opus/.test(p.format ?? ''))
          ? layer
          : null;
      });
      console.log(`Firefox moved to ${moved.layer}: ${moved.reason}`);
      await sleep(SETTLE_MS);
      await checkHearsOthers(pages, 1, TONES, `forward, Firefox on ${moved.layer}`);
      assert.ok(
        (await formats(firefox)).every((f) => /^Opus/.test(f ?? '')),
        "Firefox's worklet decoded Opus all along",
      );
      assert.ok(
        (await formats(cp)).every((f) => /^PCM/.test(f ?? '')),
        'Chromium kept the packets as sent',
      );
      await stopCongested(firefox);

      // 3. The hub, mixing.
      await cp.evaluate(() => window.tutti.session.setTopology('mix'));
      await waitForHub(pages, 'mix');
      await sleep(SETTLE_MS);
      for (const i of [0, 1]) await checkHearsOthers(pages, i, TONES, 'mix');

      const errors = await firefox.evaluate(() => window.tutti.session.view.error);
      assert.equal(errors, null, "Firefox's room shows no error");
      assert.deepEqual(logs, [], 'no page errors');
    } catch (e) {
      console.log(logs.join('\n'));
      console.log(firefox.logs.slice(-20).join('\n'));
      throw e;
    } finally {
      await firefox.close();
      firefox = undefined;
      await cp.context().close();
    }
  },
);

test(
  'WebKitGTK given the room link says what the browser lacks, in the page and on joining',
  { timeout: 120_000 },
  async () => {
    const webkit = await openEngine('webkit', { env: /** @type {any} */ (pulse).env });
    try {
      await webkit.goto(server.url);
      await webkit.waitFor(15_000, 'the app', () => typeof window.tuttiFeatures === 'function');
      const features = await webkit.evaluate(() => window.tuttiFeatures?.());
      assert.ok(features, 'the app answered');
      console.log(
        `WebKitGTK: engine ${features.engine} (${features.engineReason}), data channels ${features.dataChannels}`,
      );
      assert.ok(
        !(features.engine && features.dataChannels),
        'WebKitGTK now runs the engine and has data channels: it belongs in the room above',
      );
      // The room link's join form already says it, with the home page's notice.
      await webkit.goto(`${server.url}r/${ROOM}?ice=loopback`);
      await webkit
        .waitFor(15_000, 'the join form', () => !!document.querySelector('[data-testid="join"]'))
        .catch(async (e) => {
          const seen = () =>
            webkit.evaluate(() => ({
              url: location.href,
              ready: document.readyState,
              controlled: navigator.serviceWorker?.controller != null,
              html: document.documentElement.outerHTML.length,
              main: document.querySelector('main')?.innerHTML.slice(0, 1500) ?? null,
            }));
          console.log(`WebKitGTK's room page after 15 s: ${JSON.stringify(await seen())}`);
          throw e;
        });
      const notice = await webkit.evaluate(() => {
        const el = document.querySelector('[data-testid="engine-support"]');
        return el ? { ok: el.getAttribute('data-ok'), text: el.textContent ?? '' } : null;
      });
      assert.ok(notice, 'the join form shows whether the engine can run');
      assert.equal(notice.ok, String(features.engine));
      if (!features.engine) {
        const title = features.engineReason?.split(': ')[1]?.split('.')[0] ?? '?';
        assert.ok(notice.text.includes(title), `the join form names the missing feature: ${notice.text}`);
      }
      // Joining ends in the same words, not in a silent room.
      await webkit.fill('display-name', 'WebKit');
      await webkit.click('join');
      const shown = await webkit.waitFor(15_000, 'the room refusing', () => {
        const error = document.querySelector('[data-testid="room-error"]');
        return error
          ? {
              code: error.getAttribute('data-code'),
              message: document.querySelector('[data-testid="room-error-message"]')?.textContent ?? '',
            }
          : null;
      });
      console.log(`WebKitGTK's room page: ${JSON.stringify(shown)}`);
      if (features.engine) {
        assert.equal(shown.code, 'no-webrtc');
        assert.match(shown.message, /no RTCPeerConnection/);
      } else {
        assert.equal(shown.code, 'engine-unavailable');
        assert.equal(shown.message.trim(), features.engineReason, 'the room says what is missing');
      }
    } finally {
      await webkit.close();
    }
  },
);
