// The app as a PWA, against the real server and the built dist/ in headless Chromium:
//
// 1. precache: the built service worker registers, takes the page, and its cache holds every page,
//    script, style, the engine's .wasm, the worklet modules, icons and the manifest (each file of
//    dist/ the build lists, no source map), stored with the isolation headers;
// 2. offline: with the server stopped AND the browser offline, `/` and a room link render,
//    `crossOriginIsolated` is true and SharedArrayBuffer exists; the sound check plays a 440 Hz
//    tone back at its known level; joining a room says the network is needed (code "offline");
//    the recordings page opens;
//    the engine self-test plays its tones at their levels through the real worklet; the
//    benchmark page is ready to run;
// 3. install: Chromium reports no installability error, the manifest parses with the expected
//    fields, the icon PNGs are really 192 and 512 px, one of them maskable, and the header's
//    Install button appears once the browser offers the prompt;
// 4. update: a changed sw.js installs and waits; the page shows the prompt and does NOT reload by
//    itself; Reload brings the page under the new worker (its precache revision is the one used).
//
// Each test serves its own copy of dist/ (test 4 changes its sw.js) on its own port, so each has
// its own origin and so its own service worker and caches.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, DIST, ROOT, launchChromium } from '../kit/browser.mjs';
import { measureOutputTones, toneMicrophone } from '../kit/audio.mjs';
import { MEDIA_FLAGS } from '../kit/harness.mjs';
import { startServer } from '../kit/server.mjs';

const FLAGS = MEDIA_FLAGS;
/** The sound check's tone and where it comes back: a peer at centre pan, AMPLITUDE × cos(π/4). */
const TONE = 440;
const AMPLITUDE = 0.1;
const EXPECTED_DB = 20 * Math.log10(AMPLITUDE * Math.SQRT1_2);
const LEVEL_TOL_DB = 1;
/** The self-test's own level tolerance for its network scenario (engine.test.mjs states the same). */
const SELFTEST_LEVEL_TOL_DB = 1;
/** What the service worker must precache: the build's files of these kinds, no source maps. */
const PRECACHED = /\.(html|js|css|wasm|png|svg|webmanifest)$/;

/** @type {import('playwright-core').Browser} */
let browser;
/** @type {string[]} */
const temps = [];

before(async () => {
  browser = await launchChromium(FLAGS);
});

after(async () => {
  await browser?.close().catch(() => {});
  for (const t of temps) rmSync(t, { recursive: true, force: true });
  setTimeout(() => process.exit(process.exitCode ?? 0), 1000).unref();
});

/** A private copy of the built app. */
function copyDist() {
  const base = mkdtempSync(join(tmpdir(), 'tutti-pwa-'));
  temps.push(base);
  const dist = join(base, 'dist');
  cpSync(DIST, dist, { recursive: true });
  return dist;
}

/** Files under `dir`, relative, with `/` separators. */
function files(dir) {
  /** @type {string[]} */
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p).split('\\').join('/'));
    }
  };
  walk(dir);
  return out;
}

/**
 * A server on a copy of dist/ and a page whose service worker is installed, active and
 * controlling it (the first install claims the page; a reload proves it still does).
 */
async function installedPage({ tone = false, persistent = false } = {}) {
  const dist = copyDist();
  const server = await startServer({ dist });
  const context = persistent ? await persistentContext() : await browser.newContext();
  await context.grantPermissions(['microphone']);
  if (tone) await context.addInitScript(toneMicrophone, { freq: TONE, amplitude: AMPLITUDE });
  const page = await context.newPage();
  /** @type {string[]} */
  const logs = [];
  // While the browser says it is offline the app asks the server whether it answers (pwa.ts):
  // Chromium logs each failed ask, which is the check working, not an error of the app's.
  const probes = { failed: 0 };
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (m.text().startsWith('Failed to load resource') && m.location().url.endsWith('/api/config')) {
      probes.failed++;
      return;
    }
    logs.push(`console.error: ${m.text()}`);
  });
  await page.goto(server.url);
  const state = await page.evaluate(async () => {
    const reg = await navigator.serviceWorker.ready;
    return { scope: reg.scope, script: reg.active?.scriptURL ?? null };
  });
  assert.equal(state.scope, server.url, 'the worker covers the whole app');
  assert.equal(state.script, `${server.url}sw.js`);
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 15000 });
  await page.reload();
  assert.ok(
    await page.evaluate(() => navigator.serviceWorker.controller !== null),
    'controlled after a reload',
  );
  return { dist, server, context, page, logs, probes };
}

/**
 * A context with a profile on disk: Chromium reports an app in an incognito profile (what
 * `browser.newContext()` gives) as not installable, whatever its manifest.
 */
async function persistentContext() {
  const profile = mkdtempSync(join(tmpdir(), 'tutti-pwa-profile-'));
  temps.push(profile);
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS, ...FLAGS],
  });
}

/** Every URL in the page's caches, with the headers of each cached response. */
async function cached(page) {
  return page.evaluate(async () => {
    /** @type {{ url: string, headers: Record<string, string> }[]} */
    const out = [];
    for (const name of await caches.keys()) {
      const cache = await caches.open(name);
      for (const req of await cache.keys()) {
        const res = await cache.match(req);
        out.push({ url: req.url, headers: Object.fromEntries(res ? res.headers.entries() : []) });
      }
    }
    return out;
  });
}

test('the service worker precaches the shell, the WASM and the worklets', async () => {
  const { dist, server, context, page, logs } = await installedPage();
  try {
    const entries = await cached(page);
    const paths = entries.map((e) => new URL(e.url).pathname);
    const expected = files(dist).filter((f) => PRECACHED.test(f) && f !== 'sw.js');
    for (const f of expected) assert.ok(paths.includes(`/${f}`), `/${f} is precached`);
    assert.equal(paths.length, expected.length, `nothing else is cached: ${paths.join(', ')}`);
    assert.ok(
      paths.some((p) => /^\/assets\/[^/]+\.wasm$/.test(p)),
      'the engine .wasm is precached',
    );
    assert.ok(
      paths.some((p) => /^\/assets\/engine-worklet-[^/]+\.js$/.test(p)),
      'the engine worklet is precached',
    );
    assert.ok(
      paths.includes('/index.html') && paths.includes('/selftest.html') && paths.includes('/bench.html'),
    );
    assert.ok(!paths.some((p) => p.endsWith('.map')), 'no source map is precached');
    for (const e of entries) {
      assert.equal(e.headers['cross-origin-embedder-policy'], 'require-corp', `COEP on ${e.url}`);
      assert.equal(e.headers['cross-origin-resource-policy'], 'same-origin', `CORP on ${e.url}`);
      assert.equal(e.headers['cross-origin-opener-policy'], 'same-origin', `COOP on ${e.url}`);
    }
    console.log(`pwa: ${entries.length} files precached`);
    assert.deepEqual(logs, []);
  } finally {
    await context.close();
    await server.stop();
  }
});

test('offline: the app, a room link, the sound check, the self-test and the benchmark work', async () => {
  const { server, context, page, logs, probes } = await installedPage({ tone: true });
  try {
    // Really offline: nothing answers on the origin, and the browser says it is offline.
    await server.stop();
    await context.setOffline(true);

    await page.reload();
    await page.getByTestId('join').waitFor({ timeout: 15000 });
    await page.getByTestId('offline-note').waitFor();
    assert.match(await page.getByTestId('offline-note').innerText(), /offline/i);
    // It says so because the server did not answer, not because the browser said offline.
    assert.ok(probes.failed >= 1, 'the app asked the server before it said offline');
    const isolation = await page.evaluate(() => ({
      isolated: crossOriginIsolated,
      sab: typeof SharedArrayBuffer,
      online: navigator.onLine,
    }));
    assert.deepEqual(isolation, { isolated: true, sab: 'function', online: false });

    // The sound check: a 440 Hz microphone through the engine and back, no network.
    await page.getByTestId('soundcheck-toggle').click();
    await page.waitForFunction(
      () => {
        const v = /** @type {any} */ (window).tutti?.session?.view;
        if (v?.error) return true;
        const p = v?.participants[0];
        return Boolean(p && p.format && p.levels.peakL > -40);
      },
      null,
      { timeout: 20000, polling: 200 },
    );
    const error = await page.evaluate(() => /** @type {any} */ (window).tutti.session.view.error);
    assert.equal(error, null, `sound check offline: ${JSON.stringify(error)}`);
    await page.waitForTimeout(2000);
    const report = await measureOutputTones(page, 2, [TONE, 330, 550]);
    const db = report.tones[TONE].db;
    console.log(
      `pwa: offline sound check 440 Hz at ${db.toFixed(2)} dBFS (expected ${EXPECTED_DB.toFixed(2)})`,
    );
    assert.ok(Math.abs(db - EXPECTED_DB) <= LEVEL_TOL_DB, `440 Hz at ${db.toFixed(2)} dBFS offline`);
    for (const f of [330, 550])
      assert.ok(report.tones[f].db < EXPECTED_DB - 50, `${f} Hz at ${report.tones[f].db}`);
    await page.getByTestId('soundcheck-toggle').click();

    // A room link opens; joining says plainly that the network is needed.
    await page.goto(`${server.url}r/offline-room`);
    await page.getByTestId('display-name').fill('Ada');
    await page.getByTestId('join').click();
    const banner = page.getByTestId('room-error');
    await banner.waitFor({ timeout: 10000 });
    assert.equal(await banner.getAttribute('data-code'), 'offline');
    assert.match(await banner.innerText(), /needs the network/);
    assert.ok(await page.evaluate(() => crossOriginIsolated), 'room page isolated offline');

    // The recordings kept on this device are there offline too.
    await page.goto(`${server.url}recordings`);
    await page
      .locator('[data-testid="recordings-empty"], [data-testid="recordings-list"]')
      .first()
      .waitFor({ timeout: 10000 });

    // The engine self-test, through the real worklet and WASM, from the precache.
    const st = await context.newPage();
    st.on('pageerror', (e) => logs.push(`selftest pageerror: ${e.message}`));
    await st.goto(`${server.url}selftest.html?auto=1&scenario=network`);
    await st.waitForFunction(() => ['done', 'error'].includes(window.__selftest?.state ?? ''), null, {
      timeout: 90000,
      polling: 250,
    });
    const result = await st.evaluate(() => window.__selftest);
    assert.ok(result, 'the self-test page left its state');
    assert.equal(result.state, 'done', `self-test offline: ${result.error}`);
    const r = result.scenarios[0];
    const present = [...r.audio.left.tones, ...r.audio.right.tones].flatMap(({ hz, errorDb }) =>
      errorDb === null ? [] : [{ hz, errorDb }],
    );
    assert.ok(present.length >= 5, `${present.length} tones expected in the output`);
    for (const t of present) {
      assert.ok(
        Math.abs(t.errorDb) <= SELFTEST_LEVEL_TOL_DB,
        `self-test tone ${t.hz} Hz off by ${t.errorDb.toFixed(3)} dB offline`,
      );
    }
    console.log(
      `pwa: offline self-test played ${present.length} tones, worst level error ` +
        `${Math.max(...present.map((t) => Math.abs(t.errorDb))).toFixed(3)} dB (run ${r.attempt})`,
    );
    await st.close();

    // The benchmark page loads and is ready to run (it checks isolation, worklet and WASM).
    const bench = await context.newPage();
    await bench.goto(`${server.url}bench.html`);
    await bench.waitForFunction(
      () => !(/** @type {HTMLButtonElement} */ (document.getElementById('run')).disabled),
      null,
      {
        timeout: 15000,
      },
    );
    assert.match((await bench.getAttribute('#status', 'class')) ?? '', /\bok\b/);
    await bench.close();

    assert.deepEqual(logs, []);
  } finally {
    await context.close();
    await server.stop();
  }
});

/** Width and height from a PNG's IHDR chunk. */
function pngSize(path) {
  const b = readFileSync(path);
  assert.equal(b.subarray(0, 8).toString('hex'), '89504e470d0a1a0a', `${path} is a PNG`);
  assert.equal(b.subarray(12, 16).toString('ascii'), 'IHDR');
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

test('installable: valid manifest, real icon sizes, no installability error', async () => {
  const { dist, server, context, page } = await installedPage({ persistent: true });
  try {
    const cdp = await context.newCDPSession(page);
    const { installabilityErrors } = await cdp.send('Page.getInstallabilityErrors');
    assert.deepEqual(installabilityErrors, [], 'Chromium reports the app installable');
    const got = await cdp.send('Page.getAppManifest');
    assert.equal(got.url, `${server.url}manifest.webmanifest`);
    assert.deepEqual(got.errors, [], 'the manifest parses without errors');
    assert.ok(got.data, 'the manifest has a body');
    const m = JSON.parse(got.data);
    const bg = /--bg:\s*(#[0-9a-f]{6})/i.exec(readFileSync(join(ROOT, 'app/src/ui/app.css'), 'utf8'))?.[1];
    assert.equal(m.name, 'Tutti');
    assert.equal(m.short_name, 'Tutti');
    assert.equal(m.start_url, '/');
    assert.equal(m.scope, '/');
    assert.equal(m.display, 'standalone');
    assert.ok(m.description);
    assert.equal(m.theme_color, bg, 'theme colour is the app background');
    assert.equal(m.background_color, bg);
    const icons = /** @type {{ src: string, sizes: string, type: string, purpose?: string }[]} */ (m.icons);
    for (const [size, purpose] of /** @type {[number, string][]} */ ([
      [192, 'any'],
      [512, 'any'],
      [512, 'maskable'],
    ])) {
      const icon = icons.find(
        (i) => i.sizes === `${size}x${size}` && (i.purpose ?? 'any').split(' ').includes(purpose),
      );
      assert.ok(icon, `a ${size} px ${purpose} icon`);
      assert.equal(icon.type, 'image/png');
      assert.deepEqual(pngSize(join(dist, icon.src)), { width: size, height: size }, `${icon.src} pixels`);
      const res = await page.request.get(`${server.url}${icon.src.slice(1)}`);
      assert.equal(res.status(), 200, icon.src);
    }
    // The browser offered the install prompt: the header shows the Install button.
    await page.getByTestId('install').waitFor({ timeout: 15000 });
    const head = await page.evaluate(() => ({
      manifest: document.querySelector('link[rel="manifest"]')?.getAttribute('href'),
      theme: document.querySelector('meta[name="theme-color"]')?.getAttribute('content'),
      icon: document.querySelector('link[rel="icon"]')?.getAttribute('href'),
      apple: document.querySelector('link[rel="apple-touch-icon"]')?.getAttribute('href'),
    }));
    assert.deepEqual(head, {
      manifest: '/manifest.webmanifest',
      theme: bg,
      icon: '/icons/icon.svg',
      apple: '/icons/apple-touch-icon.png',
    });
  } finally {
    await context.close();
    await server.stop();
  }
});

test('update: a new version waits for the user, and Reload brings it in', async () => {
  const { dist, server, context, page, logs } = await installedPage();
  try {
    // The new release: index.html under a new precache revision, so that the cache shows which
    // worker is in charge (the old worker's entry goes when the new one activates).
    const swPath = join(dist, 'sw.js');
    const sw = readFileSync(swPath, 'utf8');
    const m = /\{"revision":"([0-9a-f]+)","url":"index\.html"\}/.exec(sw);
    assert.ok(m, 'sw.js lists index.html with a revision');
    const oldRev = m[1];
    const newRev = 'release-2';
    writeFileSync(swPath, sw.replace(m[0], `{"revision":"${newRev}","url":"index.html"}`));
    const indexKeys = async () =>
      (await cached(page))
        .map((e) => new URL(e.url))
        .filter((u) => u.pathname === '/index.html')
        .map((u) => u.searchParams.get('__WB_REVISION__'));
    assert.deepEqual(await indexKeys(), [oldRev]);

    await page.evaluate(() => {
      /** @type {any} */ (window).__marker = 1;
    });
    await page.evaluate(async () => (await navigator.serviceWorker.getRegistration())?.update());
    await page.getByTestId('update-prompt').waitFor({ timeout: 20000 });
    assert.match(await page.getByTestId('update-prompt').innerText(), /A new version of Tutti is ready/);
    // It must not apply by itself.
    await page.waitForTimeout(3000);
    const waiting = await page.evaluate(async () => {
      const reg = await navigator.serviceWorker.getRegistration();
      return { marker: /** @type {any} */ (window).__marker, waiting: Boolean(reg?.waiting) };
    });
    assert.deepEqual(
      waiting,
      { marker: 1, waiting: true },
      'the page did not reload and the new worker waits',
    );
    assert.ok(await page.getByTestId('update-prompt').isVisible());
    assert.deepEqual(
      (await indexKeys()).sort(),
      [newRev, oldRev].sort(),
      'both versions cached while waiting',
    );

    await Promise.all([
      page.waitForEvent('load', { timeout: 20000 }),
      page.getByTestId('update-reload').click(),
    ]);
    await page.getByTestId('join').waitFor();
    const after = await page.evaluate(async () => {
      const reg = await navigator.serviceWorker.getRegistration();
      return {
        marker: /** @type {any} */ (window).__marker ?? null,
        waiting: Boolean(reg?.waiting),
        controlled: navigator.serviceWorker.controller !== null,
      };
    });
    assert.deepEqual(after, { marker: null, waiting: false, controlled: true });
    assert.deepEqual(await indexKeys(), [newRev], 'the new worker is in charge');
    assert.equal(await page.getByTestId('update-prompt').count(), 0, 'no prompt after the update');
    assert.deepEqual(logs, []);
  } finally {
    await context.close();
    await server.stop();
  }
});
