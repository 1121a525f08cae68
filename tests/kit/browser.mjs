// Shared helpers of the browser tests: serve the built app (dist/) with the headers the engine
// needs, and launch headless Chromium through playwright-core.
//
// Environment: TUTTI_DIST (default <repo>/dist), CHROMIUM_PATH (default /usr/bin/chromium).
// The tests build nothing: `npm test` builds dist/ first (scripts/build.mjs).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serveStatic } from './serve.mjs';

export {
  AUDIO_BACKENDS,
  browserAudio,
  CHROMIUM,
  CHROMIUM_ARGS,
  isAudioBackend,
  launchChromium,
} from './chromium.mjs';
/** @typedef {import('./chromium.mjs').AudioBackend} AudioBackend */

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DIST = process.env.TUTTI_DIST ?? join(ROOT, 'dist');
/**
 * Serves `root` on a free loopback port with COOP/COEP/CSP headers.
 * @param {string} [root]
 * @returns {Promise<{ url: string, port: number, close: () => Promise<void> }>}
 */
export async function serveDist(root = DIST) {
  if (!existsSync(join(root, 'index.html'))) {
    throw new Error(`${root}/index.html is missing: build the app first (npm run build)`);
  }
  return serveStatic({ root, port: 0, host: '127.0.0.1' });
}

/**
 * Opens `url` in a new page of `browser`, keeping the page's console output and errors.
 * @param {import('playwright-core').Browser} browser
 * @param {string} url
 */
export async function openPage(browser, url) {
  const page = await browser.newPage();
  /** @type {string[]} */
  const logs = [];
  page.on('console', (m) => logs.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.on('response', (r) => {
    if (r.status() >= 400) logs.push(`http ${r.status()}: ${r.url()}`);
  });
  page.on('requestfailed', (r) => logs.push(`requestfailed: ${r.url()} ${r.failure()?.errorText ?? ''}`));
  await page.goto(url);
  return { page, logs };
}
