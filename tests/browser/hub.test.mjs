// A room through the hub: four pages of headless Chromium join one room, against the real server
// binary and its hub, with real WebRTC data channels on loopback (each page's one link to the
// hub) and the real engine worklet. Each page's microphone is a tone of its own; what each
// page's engine plays is captured by the app's output tap.
//
// Checks, in order:
// 1. the room forms as a mesh, and the owner moves it to the hub in forward mode: every page's
//    hub link connects, and each page hears the three other tones at their level and not its
//    own; a personal fader change on one page changes only that page's mix;
// 2. the owner moves the room to mix mode (the hub mixes for each page): the same checks, the
//    fader now applied on the server; each page's meter of each other page (its engine hears
//    only the mix now, so the hub meters the players) reads that player's tone as it arrives,
//    as the page's own engine metered it in forward mode;
// 3. a page leaves: the others stop hearing it; it rejoins and is heard again, through the hub.
//
// As in room.test.mjs, a tone below its level by less than GLITCH_DB (blocks concealed on a
// busy machine lower a short capture's level) is printed as a glitch, not failed; a tone
// missing or too loud, a page hearing itself or a fader heard on the wrong page fails
// (TUTTI_ROOM_STRICT=1 fails glitches too).
//
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { measureOutputTones } from '../kit/audio.mjs';
import { counterDelta, pageCounters } from '../kit/counters.mjs';
import {
  ROOM_FLAGS,
  hubView,
  joinRoom,
  serverAndBrowser,
  waitFor,
  waitForHub,
  waitForRoomOf,
} from '../kit/harness.mjs';

const TONES = [220, 330, 440, 550];
const BETWEEN = [275, 385, 495];
/** A remote tone arrives at 0.1 × the centre pan gain (constant power: cos(π/4)). */
const EXPECTED_DB = 20 * Math.log10(0.1 * Math.SQRT1_2);
const LEVEL_TOL_DB = 1.5;
/** A player's tone as it arrives, before any fader: the meters' peak reading (amplitude 0.1). */
const SOURCE_PEAK_DB = -20;
const METER_TOL_DB = 1;
/** A page's own tone: this far below a remote one, or within 6 dB of the floor between tones. */
const OWN_BELOW_DB = 40;
/** The personal fader step the test makes, dB (heard within LEVEL_TOL_DB). */
const FADER_DB = -6;
const WARMUP_MS = 6000;
/** A tone this far below its level at most is a glitch (printed); further down it fails. */
const GLITCH_DB = 6;
const STRICT = process.env.TUTTI_ROOM_STRICT === '1';
/** @type {string[]} */
const glitches = [];
const ROOM = 'e2e-hub';

const h = serverAndBrowser(ROOM_FLAGS);
/** @type {string[]} */
const logs = [];

/** The level (dBFS) of every tone and between-tone frequency in 2 s of a page's output. */
async function levels(page) {
  const report = await measureOutputTones(page, 2, [...TONES, ...BETWEEN]);
  return Object.fromEntries([...TONES, ...BETWEEN].map((f) => [f, report.tones[f].db]));
}

/**
 * What listener `page` knows of the sender named `name`: its hub link and, for that sender, the
 * engine's receive counters. Printed in a failure's message, which is what a run's summary keeps.
 * @param {import('playwright-core').Page} page
 * @param {string} name
 */
async function diagnose(page, name) {
  const got = await page
    .evaluate((name) => {
      const s = window.tutti.session;
      const p = s.view.participants.find((q) => q.name === name);
      const c = s.counters();
      const row = p ? c.perPeer[p.peer] : undefined;
      const pick = row && {
        received: row.received,
        lost: row.lost,
        late: row.late,
        concealed: row.concealed,
        underruns: row.underruns,
        resets: row.resets,
        bufferedMs: Math.round(row.bufferedMs * 10) / 10,
        gapMaxMs: row.gapMaxMs,
      };
      return {
        hub: s.view.topology.hub,
        link: p?.link ?? 'absent',
        format: p?.format ?? null,
        layer: s.view.topology.layer ?? null,
        counters: pick ?? null,
      };
    }, name)
    .catch((e) => ({ error: String(e) }));
  return JSON.stringify(got);
}

/**
 * Page i hears the other tones at `expected[f]` (EXPECTED_DB unless given) and not its own.
 * @returns {Promise<Record<number, number>[]>} each page's levels
 */
async function checkRoom(pages, label, expected = /** @type {Record<number, number>[]} */ ([])) {
  const all = await Promise.all(pages.map(levels));
  all.forEach((db, i) => {
    const line = TONES.map((f) => `${f} Hz ${db[f].toFixed(1)}`).join(', ');
    console.log(`${label}: page ${i} hears ${line} dBFS`);
  });
  /** @type {{ page: number, from: number, text: string }[]} */
  const failures = [];
  all.forEach((db, i) => {
    TONES.forEach((f, j) => {
      if (j === i) {
        const floor = Math.max(...BETWEEN.map((b) => db[b]));
        if (!(db[f] < EXPECTED_DB - OWN_BELOW_DB || db[f] <= floor + 6)) {
          failures.push({ page: i, from: j, text: `hears itself (${f} Hz at ${db[f].toFixed(1)} dBFS)` });
        }
        return;
      }
      const want = expected[i]?.[f] ?? EXPECTED_DB;
      const low = want - db[f];
      if (!STRICT && low > LEVEL_TOL_DB && low <= GLITCH_DB) {
        glitches.push(`${label}: page ${i} hears ${f} Hz ${low.toFixed(1)} dB low`);
        return;
      }
      if (Math.abs(db[f] - want) > LEVEL_TOL_DB) {
        failures.push({
          page: i,
          from: j,
          text: `hears ${f} Hz at ${db[f].toFixed(1)} dBFS, expected ${want.toFixed(1)} ± ${LEVEL_TOL_DB}`,
        });
      }
    });
  });
  if (failures.length) {
    const lines = await Promise.all(
      failures.map(
        async ({ page, from, text }) =>
          `${label}: page ${page} ${text}; of Hub ${from} it knows ${await diagnose(pages[page], `Hub ${from}`)}`,
      ),
    );
    assert.fail(lines.join('\n'));
  }
  return all;
}

/**
 * Each page's meter of each other page reads that player's tone (peak, dBFS) as it arrives,
 * whatever the faders: in forward mode from the page's own engine, in mix mode from the hub.
 * @returns {Promise<Record<string, number>[]>} each page's readings by name
 */
async function checkMeters(pages, label) {
  const read = (page) =>
    page.evaluate(() => {
      const v = window.tutti.session.view;
      return {
        byName: Object.fromEntries(
          v.participants.map((q) => [q.name, Math.max(q.levels.peakL, q.levels.peakR)]),
        ),
        input: v.input.levels.peakL,
      };
    });
  const all = await Promise.all(pages.map(read));
  /** @type {{ page: number, from: number, db: number }[]} */
  const failures = [];
  all.forEach(({ byName, input }, i) => {
    const line = Object.entries(byName)
      .map(([name, db]) => `${name} ${db.toFixed(1)}`)
      .join(', ');
    console.log(`${label}: page ${i}'s meters (peak dBFS): ${line}; its own input ${input.toFixed(1)}`);
    pages.forEach((_, j) => {
      if (j === i) return;
      const db = byName[`Hub ${j}`];
      if (!(Math.abs(db - SOURCE_PEAK_DB) <= METER_TOL_DB)) failures.push({ page: i, from: j, db });
    });
  });
  if (failures.length) {
    // A peak meter holds a transient for a moment (it falls 20 dB/s): on a starved machine
    // with loss, one concealed frame's peak read 2.3 dB over the tone once in CI while the
    // tone's level was exact (its fit -23.0 dBFS). Read again a second later: a meter that
    // reads the wrong level (the layer click read 5.7 dB over on every listener) stays off.
    await new Promise((r) => setTimeout(r, 1000));
    const again = await Promise.all(failures.map(({ page }) => read(pages[page])));
    const still = failures.filter(({ from }, k) => {
      const db = again[k].byName[`Hub ${from}`];
      return !(Math.abs(db - SOURCE_PEAK_DB) <= METER_TOL_DB);
    });
    failures.forEach(({ page, from, db }, k) =>
      console.log(
        `${label}: page ${page}'s meter of Hub ${from} read ${db.toFixed(1)} dBFS, a second later ` +
          `${again[k].byName[`Hub ${from}`].toFixed(1)}`,
      ),
    );
    failures.splice(0, failures.length, ...still);
  }
  if (failures.length) {
    // What the listener's engine counted for that player, and the player's own input meter
    // now: a reading off at the source shows there too.
    const lines = await Promise.all(
      failures.map(async ({ page, from, db }) => {
        const [known, source] = await Promise.all([diagnose(pages[page], `Hub ${from}`), read(pages[from])]);
        return (
          `${label}: page ${page}'s meter of Hub ${from} reads ${db.toFixed(1)} dBFS, its tone peaks at ` +
          `${SOURCE_PEAK_DB} (Hub ${from}'s own input meter now ${source.input.toFixed(1)}); of Hub ${from} ` +
          `it knows ${known}`
        );
      }),
    );
    assert.fail(lines.join('\n'));
  }
  return all.map((a) => a.byName);
}

/** Page 1 turns page 2 down by FADER_DB; only page 1's mix changes; then it is put back. */
async function checkFader(pages, label) {
  const target = (await hubView(pages[2])).self;
  await pages[1].evaluate(
    ([peer, gainDb]) => window.tutti.session.setStrip(peer, { gainDb }),
    /** @type {[string, number]} */ ([target, FADER_DB]),
  );
  await new Promise((r) => setTimeout(r, 1500));
  await checkRoom(pages, `${label}, page 1's fader for page 2 at ${FADER_DB} dB`, [
    {},
    { [TONES[2]]: EXPECTED_DB + FADER_DB },
  ]);
  await pages[1].evaluate((peer) => window.tutti.session.setStrip(peer, { gainDb: 0 }), target);
}

test(
  'four pages through the hub: forward, mix, a fader, a leave and a rejoin',
  { timeout: 360000 },
  async () => {
    const pages = [];
    for (let i = 0; i < TONES.length; i++) {
      pages.push(await joinRoom(h, ROOM, { name: `Hub ${i}`, tone: TONES[i] }, logs));
    }
    try {
      await waitForRoomOf(pages);

      // The switch from the mesh keeps each player's stream in its slot, so what it cost shows
      // in the engines' counters across it (printed: a busy machine conceals and underruns
      // without any switch, so the figures are not judged here).
      // Beside it, the same window of the mesh alone before the switch.
      const report = (label, before, after) =>
        after.forEach((a, i) => {
          const d = counterDelta(before[i], a);
          const sum = (k) => d.peers.reduce((n, q) => n + q[k], 0);
          console.log(
            `${label}, page ${i} over ${((d.quanta * 128) / 48).toFixed(0)} ms: underruns ${d.underruns} ` +
              `(late ${sum('lateUnderruns')}, stall ${sum('stallUnderruns')}), from its ${d.peers.length} peers ` +
              `received ${sum('received')}, lost ${sum('lost')}, concealed ${sum('concealed')}, late ${sum('late')}`,
          );
        });
      const meshFrom = await Promise.all(pages.map(pageCounters));
      await new Promise((r) => setTimeout(r, WARMUP_MS));
      const beforeSwitch = await Promise.all(pages.map(pageCounters));
      report('mesh alone', meshFrom, beforeSwitch);
      await pages[0].evaluate(() => window.tutti.session.setTopology('forward'));
      await waitForHub(pages, 'forward');
      await new Promise((r) => setTimeout(r, WARMUP_MS));
      report('switch mesh -> forward', beforeSwitch, await Promise.all(pages.map(pageCounters)));
      await checkRoom(pages, 'forward');
      await checkMeters(pages, 'forward');
      await checkFader(pages, 'forward');

      await pages[0].evaluate(() => window.tutti.session.setTopology('mix'));
      await waitForHub(pages, 'mix');
      await new Promise((r) => setTimeout(r, 2 * WARMUP_MS));
      await checkRoom(pages, 'mix');
      await checkMeters(pages, 'mix');
      await checkFader(pages, 'mix');
      // A fader on the hub leaves the meters alone: they are the players', not the mix's.
      const target = (await hubView(pages[2])).self;
      await pages[1].evaluate((peer) => window.tutti.session.setStrip(peer, { gainDb: -30 }), target);
      await new Promise((r) => setTimeout(r, 1000));
      await checkMeters(pages, 'mix, page 1 has page 2 at -30 dB');
      await pages[1].evaluate((peer) => window.tutti.session.setStrip(peer, { gainDb: 0 }), target);

      // Page 3 leaves; the others stop hearing it.
      await pages[3].getByTestId('leave').click();
      const rest = pages.slice(0, 3);
      await waitFor(
        'page 3 gone from the others',
        async () => {
          const views = await Promise.all(rest.map(hubView));
          return { ok: views.every((v) => v.peers.length === 2), views };
        },
        20000,
      );
      await new Promise((r) => setTimeout(r, 2000));
      const gone = await Promise.all(rest.map(levels));
      gone.forEach((db, i) =>
        assert.ok(
          db[TONES[3]] < EXPECTED_DB - 20,
          `after the leave, page ${i} still hears page 3 at ${db[TONES[3]].toFixed(1)} dBFS`,
        ),
      );
      // It rejoins (the room is still in mix mode) and is heard again.
      await pages[3].close();
      pages[3] = await joinRoom(h, ROOM, { name: 'Hub 3', tone: TONES[3] }, logs);
      await waitForHub(pages, 'mix');
      await new Promise((r) => setTimeout(r, WARMUP_MS));
      await checkRoom(pages, 'mix, after the rejoin');
      if (glitches.length) console.log(`glitches (not failed):\n${glitches.join('\n')}`);
    } catch (e) {
      console.log(logs.slice(-40).join('\n'));
      console.log(h.server.logs.filter((l) => l.includes('hub')).join('\n'));
      for (const page of pages) {
        console.log(
          JSON.stringify(await page.evaluate(() => window.tutti.session.counters()).catch(() => null)),
        );
      }
      throw e;
    }
  },
);
