// One mesh listener's downlink narrowed to 1 Mbit/s, for real: three pages of headless Chromium
// in a mesh room of the real server that its owner keeps as a mesh (the room's own layers are
// for such rooms, or a server without a hub), in a private network namespace where
// tutti-impair rate-limits, with one bounded queue as a home router has, every UDP packet that
// reaches page 1's mesh links (one port per peer connection, one shared limit). Nothing is said
// for the page: its own reception reports (what got through from everyone, the loss, the
// delay's trend) are all the server's mesh controller hears (server/src/mesh_layers.rs).
//
// - Page 1 takes a format that fits within SWITCH_WITHIN_MS of the limit starting, and hears
//   both others at their level through its worklet's Opus decoder. Each sender's engine now
//   encodes its stream for page 1 alone and sends page 0 or 2 the packets as sent: page 1's
//   strip on each sender says what it sends it, and the others keep PCM16 from everyone.
// - Nobody sends a mesh listener packet trains, so its controller tries a layer up after each
//   hold and backs off after each try that fails: the loss of the settled stretch before the
//   first try, and over the whole limit with the tries, are printed; the settled loss must be
//   under 1 %, and the holds between tries must grow.
// - Once the limit is lifted page 1 steps back up to the packets as sent, within its longest
//   hold and two steps' holds, and hears everyone as sent again.
//
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

const ROOT_OK = typeof process.getuid !== 'function' || process.getuid() === 0;
const { reexecInNetns } = await import('../kit/netns.mjs');
if (ROOT_OK && !(await reexecInNetns(process.argv, { timeoutMs: 240_000 })))
  process.exit(process.exitCode ?? 1);

const { startImpairer } = await import('../kit/netns.mjs');
const { checkHearsOthers } = await import('../kit/audio.mjs');
const { joinRoom, ROOM_FLAGS, serverAndBrowser, waitFor, waitForRoomOf } = await import('../kit/harness.mjs');
const { firstSwitch, layerChanges, lossBetween, receivedTotals, reportsSince, watchLayers } =
  await import('../kit/layers.mjs');

const TONES = [330, 440, 550];
const RATE_KBIT = 1000;
const RATE_QUEUE = 64;
const SWITCH_WITHIN_MS = 2000;
const LOSS_SETTLED_MAX = 0.01;
/** The loss is counted from this long after the switch (the queue drains first). */
const SETTLE_MS = 2000;
const LIMIT_MS = 14_000;
/** The controller's hold and its longest (server/src/hub/controller HOLD_US, MAX_HOLD_US). */
const HOLD_MS = 4000;
const MAX_HOLD_MS = 32_000;

const h = ROOT_OK ? serverAndBrowser(ROOM_FLAGS) : null;
/** @type {string[]} */
const logs = [];
/** @type {Awaited<ReturnType<typeof startImpairer>> | null} */
let impairer = null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const skip = ROOT_OK ? false : 'needs root: a private network namespace and iptables rules';

after(async () => {
  await impairer?.stop().catch(() => {});
});

/** What each page sends each other page (its strips' `sending`) and how it hears them. */
const meshState = (pages) =>
  Promise.all(
    pages.map((p) =>
      p.evaluate(() =>
        Object.fromEntries(
          window.tutti.session.view.participants.map((q) => [
            q.name,
            { sending: q.sending, format: q.format },
          ]),
        ),
      ),
    ),
  );

test(
  'a mesh listener limited to 1 Mbit/s takes Opus from every sender, the others keep PCM, and it steps back up when lifted',
  { skip, timeout: 220_000 },
  async () => {
    const hh = /** @type {NonNullable<typeof h>} */ (h);
    try {
      const pages = [];
      for (let i = 0; i < TONES.length; i++)
        pages.push(await joinRoom(hh, 'e2e-mesh-layers', { name: `Listener ${i}`, tone: TONES[i] }, logs));
      await waitForRoomOf(pages);
      // The owner (page 0 made the room) keeps the mesh: on a server with a hub, that is what
      // gives a mesh its own layers (server/src/mesh_layers.rs).
      await pages[0].evaluate(() => window.tutti.session.setTopology('mesh'));
      await sleep(3000);
      await watchLayers(pages[1]);
      assert.equal(await pages[1].evaluate(() => window.tutti.session.view.topology.mode), 'mesh');
      assert.deepEqual(await layerChanges(pages[1]), [], 'no change on the open path');
      const ports = await pages[1].evaluate(() => window.tutti.session.links?.mesh?.localPorts() ?? []);
      assert.equal(ports.length, 2, `page 1's two mesh links: ${JSON.stringify(ports)}`);
      impairer = await startImpairer({
        rateKbit: RATE_KBIT,
        rateQueue: RATE_QUEUE,
        dports: ports,
        durationS: 120,
      });
      const t0 = Date.now();
      const start = await receivedTotals(pages[1]);
      const { first, switchMs } = await firstSwitch(pages[1], 'page 1', t0, RATE_KBIT, SWITCH_WITHIN_MS);
      await sleep(Math.max(0, first.at + SETTLE_MS - Date.now()));
      const settled = await receivedTotals(pages[1]);
      // The settled stretch: until just before the first try up, a hold after the switch.
      await sleep(Math.max(0, first.at + HOLD_MS - 200 - Date.now()));
      const beforeTry = await receivedTotals(pages[1]);
      const lossSettled = lossBetween(settled, beforeTry);
      await checkHearsOthers(pages, 1, TONES, `page 1 on ${first.layer}, limited`);
      // Each sender sends page 1 its layer, and the other page the packets as sent.
      const state = await meshState(pages);
      console.log(`while limited: ${JSON.stringify(state)}`);
      for (const i of [0, 2]) {
        const other = `Listener ${2 - i}`;
        assert.equal(state[i]['Listener 1'].sending, first.layer, `page ${i} sends page 1 ${first.layer}`);
        assert.equal(state[i][other].sending, 'as-sent', `page ${i} sends ${other} the packets as sent`);
        assert.match(state[i][other].format, /PCM16/, `page ${i} hears ${other} as sent`);
        assert.match(state[1][`Listener ${i}`].format, /opus/i, `page 1 hears page ${i} as Opus`);
      }
      await sleep(Math.max(0, t0 + LIMIT_MS - Date.now()));
      const limitedEnd = await receivedTotals(pages[1]);
      const lossLimited = lossBetween(start, limitedEnd);
      const stats = await impairer.stop();
      impairer = null;
      const lifted = Date.now();
      const limited = await layerChanges(pages[1]);
      console.log(
        `changes while limited: ${JSON.stringify(limited.map((c) => [c.at - t0, c.layer, c.reason]))}`,
      );
      console.log(`page 1's reports while limited (ms, kbit/s got through, % lost, delay ms/s, capacity):`);
      console.log(await reportsSince(pages[1], t0));
      console.log(
        `mesh controller: loss ${(lossSettled * 100).toFixed(2)} % settled (${SETTLE_MS} ms after the ` +
          `switch to the first try), ${(lossLimited * 100).toFixed(2)} % over the ${LIMIT_MS / 1000} s limit ` +
          `with its tries; the impairer passed ${stats.packets_seen} packets, dropped ` +
          `${stats.dropped_queue_full} at its full queue`,
      );
      assert.ok(
        lossSettled < LOSS_SETTLED_MAX,
        `under 1 % lost once settled: ${(lossSettled * 100).toFixed(2)} %`,
      );
      // Tries up while limited each failed, and each waited longer than the one before.
      const tries = limited.filter((c) => /trying the next layer up/.test(c.reason ?? ''));
      const gaps = tries.slice(1).map((c, k) => c.at - tries[k].at);
      assert.ok(
        gaps.every((g, k) => k === 0 || g >= gaps[k - 1] - 1500),
        `the holds between tries grow: ${JSON.stringify(gaps)}`,
      );

      const up = await waitFor(
        'page 1 back on as-sent',
        async () => {
          const c = await layerChanges(pages[1]);
          return { ok: c.at(-1)?.layer === 'as-sent', c };
        },
        MAX_HOLD_MS + 2 * HOLD_MS + 8000,
        100,
      );
      const last = /** @type {{ at: number, reason: string | null }} */ (up.c.at(-1));
      const upMs = last.at - lifted;
      console.log(`lifted: page 1 back on as-sent after ${upMs} ms (${last.reason})`);
      await sleep(3000);
      await checkHearsOthers(pages, 1, TONES, 'page 1 back as sent');
      const back = await meshState(pages);
      for (const i of [0, 2]) assert.equal(back[i]['Listener 1'].sending, 'as-sent');
      assert.match(back[1]['Listener 0'].format, /PCM16/);
      console.log(
        `figures: ${JSON.stringify({ switchMs, lossSettled, lossLimited, tries: tries.length, upMs })}`,
      );
      assert.deepEqual(logs, [], 'no page errors');
    } catch (e) {
      console.log(logs.slice(-40).join('\n'));
      console.log(hh.server.logs.filter((l) => /mesh layer/.test(l)).join('\n'));
      throw e;
    }
  },
);
