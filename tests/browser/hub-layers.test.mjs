// A listener's layer through the hub, end to end: three pages of headless Chromium in a room in
// forward mode, against the real server and its hub, real data channels on loopback, the real
// engine worklet with libopus built with emscripten beside it.
//
// 1. Every page hears the two others at their level, as sent (PCM).
// 2. Page 1 reports congested seconds (what a page on a failing link would measure: 30 % lost,
//    600 kbit/s through): the hub's controller moves it at once to the richest layer that fits
//    (two senders: Opus at 64 kbit/s; Opus 128 needs more than 70 % of 600 kbit/s) and says why; page 1's
//    topology bar shows it; page 1's engine now receives Opus frames of 240 samples, decodes
//    them in its worklet, and hears both others at their level; pages 0 and 2 still get PCM.
// 3. Page 1's own reports go on, clean, with the capacity its packet trains measure on loopback:
//    after the controller's hold it is back on the packets as sent, the trains stop, and the bar
//    says the path carries the rate it measured.
// 4. The room goes to mix mode and the same happens to page 1's own mix: congested seconds make
//    the hub encode page 1's mix as Opus 64 (for page 1 alone: its mix is its own), its worklet
//    decodes it and page 1 hears both others at their level, pages 0 and 2 keep PCM16 mixes;
//    its clean reports and the trains' capacity bring it back to PCM16.
//
// The congested second is said for page 1 through its own signaling (no impairment here, so
// nothing would be lost): this checks the loop and the codec in the real browser. The tests of
// an impaired link are separate (they need a network namespace).
//
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkHearsOthers } from '../kit/audio.mjs';
import {
  ROOM_FLAGS,
  joinRoom,
  serverAndBrowser,
  startCongested,
  stopCongested,
  waitFor,
  waitForHub,
  waitForRoomOf,
} from '../kit/harness.mjs';

const TONES = [330, 440, 550];
const WARMUP_MS = 4000;
const ROOM = 'e2e-layers';

const h = serverAndBrowser(ROOM_FLAGS);
/** @type {string[]} */
const logs = [];

/** The server's log lines of layer decisions, so far. */
const layerLog = () => h.server.logs.filter((l) => l.includes('hub layer'));

/** What page `page` takes from the hub, as its view says, and its receive figures per sender. */
function layerState(page) {
  return page.evaluate(() => {
    const s = window.tutti.session;
    const c = s.counters();
    const peers = s.view.participants.map((p) => {
      const row = c.perPeer[p.peer];
      return { name: p.name, format: p.format ?? null, received: row?.received ?? 0, lost: row?.lost ?? 0 };
    });
    const bar = document.querySelector('[data-testid="topology-layer"]')?.textContent?.trim() ?? null;
    return { layer: s.view.topology.layer, bar, peers };
  });
}

/** Waits until page `page`'s view says the hub gives it `layer`; its state then. */
function waitForLayer(page, layer, ms) {
  return waitFor(
    `the page on ${layer}`,
    async () => {
      const s = await layerState(page);
      return { ok: s.layer?.layer === layer, ...s };
    },
    ms,
  );
}

test(
  'a listener told of congestion takes Opus from the hub (the others, then its mix), decodes it in its worklet, and comes back',
  { timeout: 180_000 },
  async () => {
    const pages = [];
    for (let i = 0; i < TONES.length; i++) {
      pages.push(await joinRoom(h, ROOM, { name: `Layer ${i}`, tone: TONES[i] }, logs));
    }
    await waitForRoomOf(pages);
    await pages[0].evaluate(() => window.tutti.session.setTopology('forward'));
    await waitForHub(pages, 'forward');
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    for (let i = 0; i < pages.length; i++) await checkHearsOthers(pages, i, TONES, 'as sent');
    // Clean loopback links: no page's own reports moved it.
    assert.deepEqual(layerLog(), [], 'no layer change before the congested report');

    // 2. Congested seconds, reported for page 1 once a second (its own clean reports go on
    // between them) until its checks are done.
    await startCongested(pages[1]);
    const t0 = Date.now();
    const down = await waitForLayer(pages[1], 'opus-64', 5000);
    console.log(`down after ${Date.now() - t0} ms: ${JSON.stringify(down.layer)}; bar "${down.bar}"`);
    assert.equal(down.layer.reason, '30.0 % of packets lost; 600 kbit/s got through');
    assert.match(down.bar ?? '', /Opus 64 kbit\/s/);
    const before = await layerState(pages[1]);
    await new Promise((r) => setTimeout(r, 1500));
    await checkHearsOthers(pages, 1, TONES, 'page 1 on opus-64');
    const after = await layerState(pages[1]);
    for (const p of after.peers) {
      const was = before.peers.find((q) => q.name === p.name);
      console.log(
        `page 1 from ${p.name}: format ${p.format}, received ${p.received - (was?.received ?? 0)} meanwhile`,
      );
    }
    const opusFormats = after.peers.filter((p) => /opus/i.test(p.format ?? ''));
    assert.equal(
      opusFormats.length,
      2,
      `page 1 decodes Opus from both others: ${JSON.stringify(after.peers)}`,
    );
    for (const i of [0, 2]) await checkHearsOthers(pages, i, TONES, 'others as sent');
    await stopCongested(pages[1]);
    const sentBefore = await pages[1].evaluate(() => window.tutti.session.receptionSent.length);
    const stopped = Date.now();

    // 3. Page 1's own clean reports, with its trains' capacity, bring it back after the hold.
    const up = await waitForLayer(pages[1], 'as-sent', 15_000).finally(async () => {
      const reports = await pages[1].evaluate(
        (from) => window.tutti.session.receptionSent.slice(from),
        sentBefore,
      );
      console.log(`page 1's own reports after the congested ones: ${JSON.stringify(reports)}`);
      console.log(layerLog().join('\n'));
    });
    console.log(
      `up ${Date.now() - stopped} ms after the last congested report: ${JSON.stringify(up.layer)}; bar "${up.bar}"`,
    );
    // Only a measured capacity steps up: page 1's packet trains measured one.
    assert.match(up.layer.reason, /^the path carries \d+(\.\d)? Mbit\/s$/);
    await new Promise((r) => setTimeout(r, 1500));
    await checkHearsOthers(pages, 1, TONES, 'page 1 back as sent');
    const back = await layerState(pages[1]);
    assert.ok(
      back.peers.every((p) => !/opus/i.test(p.format ?? '')),
      `PCM again: ${JSON.stringify(back.peers)}`,
    );

    // 4. Mix mode: the hub makes each page's mix. Congested seconds for page 1 again: its own
    // mix now comes as Opus (one stream: Opus 64 fits 70 % of 600 kbit/s with its copies, Opus
    // 128 does not at one frame a message), encoded for it alone and decoded in its worklet;
    // the others' mixes stay PCM16. Its clean reports and trains bring it back as before.
    const beforeMix = layerLog().length;
    await pages[0].evaluate(() => window.tutti.session.setTopology('mix'));
    await waitForHub(pages, 'mix');
    const mixes = () => Promise.all(pages.map((p) => p.evaluate(() => window.tutti.session.hubMix())));
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const made = await mixes();
    const sinceMix = layerLog().slice(beforeMix);
    for (const m of made)
      assert.equal(m?.format, 'PCM16 stereo 128', `the mix as made (${sinceMix.join('; ')})`);
    // The switch itself is no congestion: the mix's stamps are on the hub's clock, a new one
    // for each page's delay trend.
    assert.deepEqual(sinceMix, [], 'no layer change from the switch to mix mode');
    const decisions = layerLog().length;
    await startCongested(pages[1]);
    const t1 = Date.now();
    const mixDown = await waitForLayer(pages[1], 'opus-64', 5000);
    console.log(
      `mix mode: down after ${Date.now() - t1} ms: ${JSON.stringify(mixDown.layer)}; bar "${mixDown.bar}"`,
    );
    assert.equal(mixDown.layer.reason, '30.0 % of packets lost; 600 kbit/s got through');
    assert.match(mixDown.bar ?? '', /^Your mix from the hub: Opus 64 kbit\/s/);
    await new Promise((r) => setTimeout(r, 1500));
    await checkHearsOthers(pages, 1, TONES, "page 1's mix as opus-64");
    const opusMixes = await mixes();
    console.log(`mix mode, the engines' mix streams: ${JSON.stringify(opusMixes)}`);
    assert.equal(opusMixes[1]?.format, 'Opus stereo 240', "page 1's mix is Opus");
    for (const i of [0, 2]) {
      assert.equal(opusMixes[i]?.format, 'PCM16 stereo 128', `page ${i}'s mix stays PCM16`);
      await checkHearsOthers(pages, i, TONES, 'others mixed as made');
    }
    await stopCongested(pages[1]);
    const mixStopped = Date.now();
    const mixUp = await waitForLayer(pages[1], 'as-sent', 15_000).finally(() =>
      console.log(layerLog().slice(decisions).join('\n')),
    );
    console.log(
      `mix mode: up ${Date.now() - mixStopped} ms after the last congested report: ${JSON.stringify(mixUp.layer)}`,
    );
    assert.match(mixUp.layer.reason, /^the path carries \d+(\.\d)? Mbit\/s$/);
    await new Promise((r) => setTimeout(r, 1500));
    await checkHearsOthers(pages, 1, TONES, "page 1's mix back as made");
    assert.equal((await mixes())[1]?.format, 'PCM16 stereo 128', "page 1's mix is PCM16 again");
    assert.deepEqual(logs, [], 'no page errors');
  },
);
