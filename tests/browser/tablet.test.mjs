// The room on a tablet: one headless Chromium page of the built app with a touch screen, in a
// room of eight (seven emulated mesh peers of bench/loadgen's `tutti-mesh-peers` beside it), at
// 768 × 1024 and at 1024 × 768. At each size, for the room with its mixer strips and again with
// the stats view open:
// - nothing is wider than the screen: the page does not scroll sideways and no element reaches
//   past its right edge (the stats table turns into a block of labelled figures per participant
//   where it would not fit);
// - every control a finger uses (buttons, links, inputs, selects, a checkbox with its label) is
//   at least 44 px both ways (Apple's and WCAG's target size);
// - a horizontal touch drag on a participant's fader moves that fader and does not scroll the
//   page.
// With TUTTI_SCREENSHOTS=dir set, the views are saved there (the README's pictures come from it).
//
// Nothing is built here but the peers' binary: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOM_FLAGS, joinRoom, serverAndBrowser, waitFor } from '../kit/harness.mjs';
import { buildMeshPeers, startMeshPeers, waitForPeersHeard } from '../kit/mesh-peers.mjs';

const ROOM = 'e2e-tablet';
/** Emulated players beside the page: a room of eight. */
const PEERS = 7;
const SIZES = [
  { width: 768, height: 1024 },
  { width: 1024, height: 768 },
];
/** Least size of a touch target, CSS px. */
const TOUCH_PX = 44;
const SHOTS = process.env.TUTTI_SCREENSHOTS ?? '';
/** How far a finger dragging a fader sideways drifts up on the way, px. */
const DRIFT_PX = 60;

const h = serverAndBrowser(ROOM_FLAGS);

/**
 * Runs in the page: how far the page scrolls sideways, the elements reaching past the screen's
 * right edge, and the touch targets smaller than `min` px (an input inside a label counts with
 * its label, which takes its touches).
 * @param {number} min
 */
function layoutAudit(min) {
  const name = (/** @type {Element} */ e) => {
    const el = /** @type {HTMLElement} */ (e);
    const id = el.dataset?.testid ? `[${el.dataset.testid}]` : '';
    const label = el.getAttribute('aria-label') ?? el.textContent?.trim().slice(0, 30) ?? '';
    return `${el.tagName.toLowerCase()}${id} "${label}"`;
  };
  const shown = (/** @type {Element} */ e) => {
    const r = e.getBoundingClientRect();
    const s = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none';
  };
  const root = document.documentElement;
  const wide = [...document.querySelectorAll('body *')]
    .filter((e) => shown(e) && e.getBoundingClientRect().right > root.clientWidth + 0.5)
    .map((e) => `${name(e)} reaches ${Math.round(e.getBoundingClientRect().right)} px`);
  const small = [...document.querySelectorAll('button, a[href], input, select, textarea, summary')]
    .filter(shown)
    .map((e) => {
      const box = (e.closest('label') ?? e).getBoundingClientRect();
      return { what: name(e), width: Math.round(box.width), height: Math.round(box.height) };
    })
    .filter((t) => t.width < min || t.height < min);
  return { sideways: root.scrollWidth - root.clientWidth, wide: wide.slice(0, 10), small };
}

/**
 * A finger's drag from (`x`, `y`) by (`dx`, `dy`) in ten moves (Chromium's own touch events,
 * over the DevTools protocol).
 * @param {import('playwright-core').Page} page
 */
async function touchDrag(page, x, y, dx, dy) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [{ x, y }] });
  for (let k = 1; k <= 10; k++) {
    const touchPoints = [{ x: x + (dx * k) / 10, y: y + (dy * k) / 10 }];
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints });
  }
  await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
  await cdp.detach();
  await new Promise((r) => setTimeout(r, 300));
}

/** The page's scroll offsets. */
const scrolled = (page) => page.evaluate(() => [Math.round(window.scrollX), Math.round(window.scrollY)]);

/**
 * Remote participant `n`'s gain fader dragged by a finger from its middle to a quarter of its
 * width, drifting up `DRIFT_PX` on the way as a finger does; then the same gesture on the
 * strip's name. The fader's value and the page's scroll offsets before and after each.
 * @param {import('playwright-core').Page} page
 * @param {number} n
 */
async function dragFader(page, n) {
  const strip = page.getByTestId('strip').nth(n);
  const fader = strip.locator('input[type="range"]').first();
  await strip.scrollIntoViewIfNeeded();
  const box = await fader.boundingBox();
  assert.ok(box, 'the fader is on screen');
  const before = { value: await fader.inputValue(), scroll: await scrolled(page) };
  await touchDrag(page, box.x + box.width / 2, box.y + box.height / 2, -box.width / 4, -DRIFT_PX);
  const after = { value: await fader.inputValue(), scroll: await scrolled(page) };
  const name = await strip.locator('h3, header, .name').first().boundingBox();
  assert.ok(name, "the strip's name is on screen");
  await touchDrag(page, name.x + name.width / 2, name.y + name.height / 2, -box.width / 4, -DRIFT_PX);
  return { before, after, name: await scrolled(page) };
}

/** Checks the audit of the page as it is now under `label`. */
async function checkLayout(page, label) {
  const a = await page.evaluate(layoutAudit, TOUCH_PX);
  console.log(
    `${label}: sideways ${a.sideways} px, ${a.wide.length} too wide, ${a.small.length} small targets`,
  );
  assert.equal(a.sideways, 0, `${label}: the page scrolls sideways`);
  assert.deepEqual(a.wide, [], `${label}: elements past the right edge`);
  assert.deepEqual(a.small, [], `${label}: touch targets under ${TOUCH_PX} px`);
}

test(
  'a room of eight fits a tablet either way up: no sideways scroll, 44 px touch targets, faders that do not scroll',
  { timeout: 240_000 },
  async () => {
    await buildMeshPeers();
    /** @type {string[]} */
    const logs = [];
    const page = await joinRoom(h, ROOM, { name: 'Tablet', tone: 440 }, logs, {
      options: { viewport: SIZES[0], hasTouch: true },
    });
    await waitFor('the page in the room', async () => ({
      ok: await page.evaluate(() => Boolean(window.tutti?.session?.view.access.isOwner)),
    }));
    const peers = startMeshPeers({ port: h.server.port, room: ROOM, peers: PEERS, seconds: 90 });
    try {
      await peers.playing;
      await waitForPeersHeard(page, PEERS);
      for (const [i, size] of SIZES.entries()) {
        const at = `${size.width}×${size.height}`;
        await page.setViewportSize(size);
        await page.evaluate(() => window.scrollTo(0, 0));
        await new Promise((r) => setTimeout(r, 1000));
        if (SHOTS)
          await page.screenshot({ path: join(SHOTS, `tablet-${size.width}x${size.height}-room.png`) });
        await checkLayout(page, `room at ${at}`);
        const drag = await dragFader(page, 1 + i);
        console.log(`touch drag at ${at}: ${JSON.stringify(drag)}`);
        assert.ok(Number(drag.after.value) < Number(drag.before.value), `${at}: the fader did not move`);
        assert.deepEqual(
          drag.after.scroll,
          drag.before.scroll,
          `${at}: the drag on the fader scrolled the page`,
        );
        // The same gesture anywhere else does scroll: the check above could fail.
        assert.ok(drag.name[1] > drag.after.scroll[1], `${at}: the gesture scrolls nothing: ${drag.name}`);
        await page.evaluate(() => window.scrollTo(0, 0));

        await page.getByTestId('stats-toggle').click();
        await page.getByTestId('stats-table').waitFor();
        await new Promise((r) => setTimeout(r, 1000));
        await checkLayout(page, `stats view at ${at}`);
        if (SHOTS) {
          await page.getByTestId('stats-panel').evaluate((e) => e.scrollIntoView());
          await page.screenshot({ path: join(SHOTS, `tablet-${size.width}x${size.height}-stats.png`) });
        }
        await page.getByTestId('stats-toggle').click();
      }
      assert.deepEqual(logs, [], 'no page errors');
    } finally {
      peers.stop();
      await peers.done.catch(() => {});
    }
  },
);
