// One listener's link narrowed to 1 Mbit/s, for real: three pages of headless Chromium in a room
// in forward mode through the real server's hub, in a private network namespace where
// tutti-impair rate-limits only the UDP packets the hub sends to page 1 (its hub link's port),
// with a bounded queue as a home router has. Nothing is said for the page: its own reception
// reports (what got through, the loss, the delay's trend, the capacity its packet trains
// measured) are all the hub's controller hears.
//
// 1. The capacity controller (the server's default): page 1 takes a format that fits within
//    SWITCH_WITHIN_MS of the limit starting, loses under 1 % of its packets afterwards and hears
//    both others at their level through its worklet's Opus decoder, while pages 0 and 2 keep
//    the packets as sent (PCM). Once the limit is lifted it steps back up within the hold plus
//    a report and a train; over the minute it changes at most twice (down, then up).
// 2. The trial-and-error baseline (`--layer-policy probe`, a second server, same pages' setup,
//    same limit): it steps up after every quiet hold, overshooting the path each time. The loss
//    figures of both are printed side by side, and the baseline must change more than twice or
//    lose far more than the controller.
//
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

const ROOT_OK = typeof process.getuid !== 'function' || process.getuid() === 0;
const { reexecInNetns } = await import('../kit/netns.mjs');
if (ROOT_OK && !(await reexecInNetns(process.argv, { timeoutMs: 330_000 })))
  process.exit(process.exitCode ?? 1);

const { startImpairer } = await import('../kit/netns.mjs');
const { checkHearsOthers } = await import('../kit/audio.mjs');
const { DIST } = await import('../kit/browser.mjs');
const { startServer } = await import('../kit/server.mjs');
const { joinRoom, ROOM_FLAGS, serverAndBrowser, waitFor, waitForHub, waitForRoomOf } =
  await import('../kit/harness.mjs');
const { firstSwitch, layerChanges, lossBetween, receivedTotals, reportsSince, watchLayers } =
  await import('../kit/layers.mjs');

const TONES = [330, 440, 550];
/** The figures: the limit, how soon a fitting format, the loss after it. */
const RATE_KBIT = 1000;
const SWITCH_WITHIN_MS = 2000;
const LOSS_AFTER_MAX = 0.01;
/** Packets that may wait for the rate (a home router's queue). */
const RATE_QUEUE = 64;
/** The window of the figures, from the limit's start, and the limit's length. */
const WINDOW_MS = 60_000;
const LIMIT_MS = 30_000;
/** The loss after the switch is counted from this long after it (the queue drains first). */
const SETTLE_MS = 2000;
/** The controller's hold (server/src/hub/controller HOLD_US), plus a report and a train. The
 * hold has run out while limited; what the step up waits for is the three trains a second the
 * capacity is the lowest of (app/src/room/reception), and a report: about 4 s. */
const HOLD_MS = 4000;
const UP_WITHIN_MS = HOLD_MS + 2500;
/** The baseline runs under the same limit this long. */
const BASELINE_MS = 30_000;

const h = ROOT_OK ? serverAndBrowser(ROOM_FLAGS) : null;
/** @type {string[]} */
const logs = [];
/** @type {Awaited<ReturnType<typeof startImpairer>> | null} */
let impairer = null;
/** @type {Awaited<ReturnType<typeof startServer>> | null} */
let baselineServer = null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const skip = ROOT_OK ? false : 'needs root: a private network namespace and iptables rules';

after(async () => {
  await impairer?.stop().catch(() => {});
  await baselineServer?.stop().catch(() => {});
});

/**
 * Three pages in `room` on `server`, moved to the hub in forward mode; page 1 records each
 * change of its layer and its reports (kit/layers.mjs).
 * @param {{ server: any, browser: import('playwright-core').Browser }} hh
 */
async function forwardRoom(hh, room) {
  const pages = [];
  for (let i = 0; i < TONES.length; i++)
    pages.push(await joinRoom(hh, room, { name: `Listener ${i}`, tone: TONES[i] }, logs));
  await waitForRoomOf(pages);
  await pages[0].evaluate(() => window.tutti.session.setTopology('forward'));
  await waitForHub(pages, 'forward');
  await sleep(3000);
  for (const p of pages) await watchLayers(p);
  const port = await waitFor(
    "page 1's hub link port",
    async () => {
      const p = await pages[1].evaluate(() => window.tutti.session.links?.hub?.localPort() ?? null);
      return { ok: typeof p === 'number', port: p };
    },
    10_000,
  );
  return { pages, port: /** @type {number} */ (port.port) };
}

/** What the other pages take: their layer and whether any participant arrives as Opus. */
const othersState = (pages) =>
  Promise.all(
    [0, 2].map((i) =>
      pages[i].evaluate(() => ({
        layer: window.tutti.session.view.topology.layer?.layer ?? 'as-sent',
        opus: window.tutti.session.view.participants.some((p) => /opus/i.test(p.format ?? '')),
      })),
    ),
  );

/**
 * Checks that the limit on page 1 moved nobody else: pages 0 and 2 keep the packets as sent,
 * unless their own reports showed congestion (a starved machine loses packets on every page:
 * once, under CI, page 2 lost 2.2 % and took Opus 128). Such a change is printed, with its
 * reason, which must be that page's own loss or delay.
 */
async function checkOthersKeepPcm(pages) {
  const others = await othersState(pages);
  for (const [k, i] of [0, 2].entries()) {
    const own = await layerChanges(pages[i]);
    if (own.length === 0) {
      assert.deepEqual(others[k], { layer: 'as-sent', opus: false }, `page ${i} keeps the packets as sent`);
      continue;
    }
    console.log(`page ${i} changed by its own reports (this machine's load): ${JSON.stringify(own)}`);
    for (const c of own)
      assert.match(c.reason ?? '', /packets lost|delay rising|the path carries/, `page ${i}'s own reason`);
  }
}

test(
  'a listener limited to 1 Mbit/s gets a fitting format from its own reports, and back when lifted; trial and error overshoots',
  { skip, timeout: 300_000 },
  async () => {
    const hh = /** @type {NonNullable<typeof h>} */ (h);
    const figures = {};
    try {
      // 1. The capacity controller.
      const { pages, port } = await forwardRoom(hh, 'e2e-layers-limited');
      assert.deepEqual(await layerChanges(pages[1]), [], 'no change on the open path');
      impairer = await startImpairer({
        rateKbit: RATE_KBIT,
        rateQueue: RATE_QUEUE,
        dport: port,
        durationS: 120,
      });
      const t0 = Date.now();
      const start = await receivedTotals(pages[1]);
      const { first, switchMs } = await firstSwitch(pages[1], 'page 1', t0, RATE_KBIT, SWITCH_WITHIN_MS);
      await sleep(Math.max(0, first.at + SETTLE_MS - Date.now()));
      const settled = await receivedTotals(pages[1]);
      await checkHearsOthers(pages, 1, TONES, `page 1 on ${first.layer}, limited`);
      await checkOthersKeepPcm(pages);
      await sleep(Math.max(0, t0 + LIMIT_MS - Date.now()));
      const limitedEnd = await receivedTotals(pages[1]);
      const lossAfter = lossBetween(settled, limitedEnd);
      const lossLimited = lossBetween(start, limitedEnd);
      const stats = await impairer.stop();
      impairer = null;
      const lifted = Date.now();
      console.log(
        `capacity controller: loss ${(lossAfter * 100).toFixed(2)} % from ${SETTLE_MS} ms after the switch ` +
          `to the lift, ${(lossLimited * 100).toFixed(2)} % over the whole limit; the impairer passed ` +
          `${stats.packets_seen} packets, dropped ${stats.dropped_queue_full} at its full queue`,
      );
      console.log(
        `changes while limited: ${JSON.stringify((await layerChanges(pages[1])).map((c) => [c.at - t0, c.layer, c.reason]))}`,
      );
      console.log(
        `page 1's reports while limited (kbit/s got through, % lost, delay ms/s, capacity kbit/s):`,
      );
      console.log(await reportsSince(pages[1], t0));
      assert.ok(
        lossAfter < LOSS_AFTER_MAX,
        `under 1 % lost after the switch: ${(lossAfter * 100).toFixed(2)} %`,
      );

      const up = await waitFor(
        'page 1 back on as-sent',
        async () => {
          const c = await layerChanges(pages[1]);
          return { ok: c.at(-1)?.layer === 'as-sent', c };
        },
        20_000,
        50,
      );
      const last = /** @type {{ at: number, reason: string | null }} */ (up.c.at(-1));
      const upMs = last.at - lifted;
      console.log(`lifted: page 1 back on as-sent after ${upMs} ms (${last.reason})`);
      assert.ok(upMs <= UP_WITHIN_MS, `back up within the hold and a report: ${upMs} ms`);
      await sleep(Math.max(0, t0 + WINDOW_MS - Date.now()));
      const all = (await layerChanges(pages[1])).filter((c) => c.at - t0 <= WINDOW_MS);
      console.log(`changes in ${WINDOW_MS / 1000} s: ${JSON.stringify(all)}`);
      assert.ok(all.length <= 2, `no oscillation: ${all.length} changes`);
      await checkHearsOthers(pages, 1, TONES, 'page 1 back as sent');
      figures.capacity = { switchMs, upMs, lossAfter, lossLimited, changes: all.length };
      for (const p of pages) await p.context().close();

      // 2. The trial-and-error baseline, same room setup and limit, on its own server.
      baselineServer = await startServer({
        dist: DIST,
        args: ['--hub-auto', 'false', '--layer-policy', 'probe'],
      });
      const b = await forwardRoom({ server: baselineServer, browser: hh.browser }, 'e2e-layers-probe');
      impairer = await startImpairer({
        rateKbit: RATE_KBIT,
        rateQueue: RATE_QUEUE,
        dport: b.port,
        durationS: 120,
      });
      const b0 = Date.now();
      const bStart = await receivedTotals(b.pages[1]);
      const bDown = await waitFor(
        'baseline: page 1 off as-sent',
        async () => {
          const c = await layerChanges(b.pages[1]);
          return { ok: c.length > 0, c };
        },
        10_000,
        50,
      );
      await sleep(Math.max(0, bDown.c[0].at + SETTLE_MS - Date.now()));
      const bSettled = await receivedTotals(b.pages[1]);
      await sleep(Math.max(0, b0 + BASELINE_MS - Date.now()));
      const bEnd = await receivedTotals(b.pages[1]);
      await impairer.stop();
      impairer = null;
      const bChanges = await layerChanges(b.pages[1]);
      figures.probe = {
        switchMs: bDown.c[0].at - b0,
        lossAfter: lossBetween(bSettled, bEnd),
        lossLimited: lossBetween(bStart, bEnd),
        changes: bChanges.length,
      };
      console.log(`trial and error: ${JSON.stringify(bChanges.map((c) => [c.at - b0, c.layer]))}`);
      console.log(`page 1's reports under trial and error:`);
      console.log(await reportsSince(b.pages[1], b0));
      console.log(
        `loss on a ${RATE_KBIT} kbit/s path (after the first switch / over the limit): capacity controller ` +
          `${(figures.capacity.lossAfter * 100).toFixed(2)} % / ${(figures.capacity.lossLimited * 100).toFixed(2)} % ` +
          `in ${LIMIT_MS / 1000} s with ${figures.capacity.changes} changes in the minute; trial and error ` +
          `${(figures.probe.lossAfter * 100).toFixed(2)} % / ${(figures.probe.lossLimited * 100).toFixed(2)} % in ` +
          `${BASELINE_MS / 1000} s with ${figures.probe.changes} changes`,
      );
      console.log(`figures: ${JSON.stringify(figures)}`);
      // Trial and error overshoots: it tries richer layers at every hold, more changes than the
      // capacity policy's two (its loss then depends on how much of each overshoot the path's
      // queue absorbs: printed), or its first overshoot left the path lossy for good (once in
      // six runs its data channel lost a fifth of the packets at Opus 64 from then on, 844
      // kbit/s still arriving: it never had the clean hold it would step up after).
      assert.ok(
        figures.probe.changes > 2 || figures.probe.lossAfter > figures.capacity.lossAfter + 0.05,
        `trial and error overshoots: ${figures.probe.changes} changes, ` +
          `${(figures.probe.lossAfter * 100).toFixed(2)} % lost after its first switch`,
      );
      assert.deepEqual(logs, [], 'no page errors');
    } catch (e) {
      console.log(logs.slice(-40).join('\n'));
      console.log(hh.server.logs.filter((l) => /hub layer|DEBUG/.test(l)).join('\n'));
      console.log(baselineServer?.logs.filter((l) => /hub layer/.test(l)).join('\n') ?? '');
      throw e;
    }
  },
);
