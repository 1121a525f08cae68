// A browser that says it is offline while the server that served the page answers: on a
// machine whose only interface is loopback Chromium's navigator.onLine is false. The app asks
// the server instead: the home page shows no offline note, and joining a room works. Here the
// page's navigator.onLine is made to read false (the browser's own answer on such a machine);
// the server, the room and the data channels are real. pwa.test.mjs checks the other side: with
// the server really gone, the note shows and the sound check still works.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ROOM_FLAGS, serverAndBrowser, toneContext, waitFor } from '../kit/harness.mjs';

const h = serverAndBrowser(ROOM_FLAGS);

test(
  'a browser that reports offline joins a room of the server that answers it',
  { timeout: 60_000 },
  async () => {
    const context = await toneContext(h.browser, { freq: 440, amplitude: 0.1 });
    await context.addInitScript(() => {
      Object.defineProperty(Navigator.prototype, 'onLine', { get: () => false, configurable: true });
    });
    const page = await context.newPage();
    try {
      await page.goto(`${h.server.url}`);
      assert.equal(await page.evaluate(() => navigator.onLine), false);
      // The home page asks the server, which answers: no offline note (give the check its time).
      await page
        .getByTestId('join')
        .waitFor({ timeout: 15000 })
        .catch(() => {});
      await page.waitForTimeout(1500);
      assert.equal(await page.getByTestId('offline-note').count(), 0, 'the home page says offline');

      await page.goto(`${h.server.url}r/e2e-reach?ice=loopback`);
      await page.getByTestId('display-name').fill('Loopback only');
      await page.getByTestId('join').click();
      const joined = await waitFor('the room joined', async () => {
        const v = await page.evaluate(() => {
          const view = window.tutti?.session?.view;
          return { owner: Boolean(view?.access.isOwner), error: view?.error ?? null };
        });
        return { ok: v.owner || v.error !== null, ...v };
      });
      assert.equal(joined.error, null, `joining failed: ${JSON.stringify(joined.error)}`);
      assert.ok(joined.owner);
    } finally {
      await context.close();
    }
  },
);
