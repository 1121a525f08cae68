// What the layer tests read of a listener page: its layer as the server last named it, each
// change (when, the layer, why), the reception reports it sent, and its packets received and
// lost (tests/browser/hub-impaired-layers.test.mjs through the hub, mesh-layers.test.mjs in a
// mesh).
import assert from 'node:assert/strict';
import { waitFor } from './harness.mjs';

/**
 * Starts recording `page`'s layer changes and the reception reports it sends (polled every
 * 20 ms; times are the page's Date.now(), this machine's clock).
 * @param {import('playwright-core').Page} page
 */
export function watchLayers(page) {
  return page.evaluate(() => {
    const w = /** @type {any} */ (window);
    w.__layers = [];
    w.__reports = [];
    const sent = window.tutti.session.receptionSent;
    let lastReport = sent.at(-1);
    let last = 'as-sent';
    w.__layerWatch = setInterval(() => {
      const r = sent.at(-1);
      if (r !== lastReport) w.__reports.push({ at: Date.now(), r: (lastReport = r) });
      const l = window.tutti.session.view.topology.layer;
      const layer = l?.layer ?? 'as-sent';
      if (layer === last) return;
      last = layer;
      w.__layers.push({ at: Date.now(), layer, reason: l?.reason ?? null });
    }, 20);
  });
}

/**
 * The layer changes recorded on `page` so far.
 * @returns {Promise<{ at: number, layer: string, reason: string | null }[]>}
 */
export const layerChanges = (page) => page.evaluate(() => /** @type {any} */ (window).__layers);

/** Packets `page` received and lost, summed over its participants. */
export function receivedTotals(page) {
  return page.evaluate(() => {
    const c = window.tutti.session.counters();
    let got = 0;
    let lost = 0;
    for (const row of Object.values(c.perPeer)) {
      got += row.received;
      lost += row.lost;
    }
    return { got, lost };
  });
}

/** The share lost between two samples of `receivedTotals`. */
export function lossBetween(a, b) {
  const lost = b.lost - a.lost;
  const got = b.got - a.got;
  return lost + got > 0 ? lost / (lost + got) : 0;
}

/** The reception reports `page` sent since `t0` (Date.now()), one line each: when (ms after t0),
 * kbit/s got through, % lost, the delay's trend (ms/s), the capacity (kbit/s; '-': none). */
export const reportsSince = (page, t0) =>
  page.evaluate(
    (since) =>
      /** @type {any} */ (window).__reports
        .filter((r) => r.at >= since)
        .map(({ at, r }) =>
          [
            String(at - since).padStart(6),
            (r.receivedBps / 1e3).toFixed(0).padStart(6),
            (r.loss * 100).toFixed(1).padStart(5),
            r.delayRiseMsPerS.toFixed(1).padStart(6),
            r.capacityBps === null ? '     -' : (r.capacityBps / 1e3).toFixed(0).padStart(6),
          ].join(' '),
        )
        .join('\n'),
    t0,
  );

/**
 * Waits for `page`'s first layer change after a limit of `rateKbit` began at `t0` (Date.now()),
 * prints it under `name`, and checks that it came within `withinMs` and left the packets as sent.
 * @param {import('playwright-core').Page} page
 * @param {string} name the page, as the printed lines call it
 * @param {number} t0
 * @param {number} rateKbit
 * @param {number} withinMs
 * @returns {Promise<{ first: { at: number, layer: string, reason: string | null }, switchMs: number }>}
 */
export async function firstSwitch(page, name, t0, rateKbit, withinMs) {
  const down = await waitFor(
    `${name} on a fitting format`,
    async () => {
      const c = await layerChanges(page);
      return { ok: c.length > 0, c };
    },
    10_000,
    50,
  );
  const first = down.c[0];
  const switchMs = first.at - t0;
  console.log(
    `limited to ${rateKbit} kbit/s: ${name} took ${first.layer} after ${switchMs} ms (${first.reason})`,
  );
  assert.ok(switchMs <= withinMs, `a fitting format within ${withinMs} ms: ${switchMs}`);
  assert.notEqual(first.layer, 'as-sent');
  return { first, switchMs };
}
