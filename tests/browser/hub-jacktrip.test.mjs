// A real JackTrip client and two browsers in one room mixed by the hub: two pages of headless
// Chromium join a public room on the real server binary, the owner moves it to the hub's mix
// mode, and Debian's `jacktrip -C 127.0.0.1` joins it through the server's JackTrip handshake
// port as `<room>/Ann`, on a JACK server of its own (`jackd -d dummy`), its input
// `jack_simple_client`'s sine pair (240 Hz left, 720 Hz right). Each page's microphone is a tone
// of its own; what each page plays is captured by the app's output tap, and what jacktrip
// receives is recorded from its JACK receive ports with `jack_rec`.
//
// Checks: the pages list the JackTrip client as a participant of kind 'jacktrip'; each page
// hears jacktrip's 240 Hz (left) and 720 Hz (right) and the other page's tone at their level, and
// not its own tone; jacktrip's received audio holds both pages' tones at their level on both
// channels and not its own 240 and 720 Hz (the hub sends it the mix minus its own voice).
//
// As in hub.test.mjs, a tone below its level by less than GLITCH_DB (blocks concealed on a busy
// machine lower a short capture's level) is printed as a glitch, not failed; a tone missing or too
// loud, or a member hearing itself, fails (TUTTI_ROOM_STRICT=1 fails glitches too).
//
// Skipped, with the reason, when a JACK or JackTrip program is missing, except under CI=true
// (where it fails). Every process started here is stopped by its pid, also after a failure.
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { captureOutput, measureTones } from '../kit/audio.mjs';
import { ROOM_FLAGS, joinRoom, serverAndBrowser } from '../kit/harness.mjs';
import { hubView, waitFor, waitForHub, waitForRoomOf } from '../kit/harness.mjs';
import { JackRun, SIMPLE_CLIENT_AMPLITUDE, SIMPLE_CLIENT_HZ, jackToolsMissing } from '../kit/jack.mjs';
import { freeTcpPort, freeUdpPort } from '../kit/ports.mjs';

const ROOM = 'e2e-jacktrip';
/** The pages' microphone tones (joinRoom: amplitude 0.1), far from jacktrip's and each other. */
const TONES = [400, 1000];
const [JT_LEFT, JT_RIGHT] = SIMPLE_CLIENT_HZ;
/** Between the tones: the floor a member's own tone is compared with. */
const BETWEEN = [320, 560, 860];
// Expected levels. The hub's mix gives every source the room's default strip: unity gain,
// centre pan, i.e. the constant-power law's cos(π/4) on the left and sin(π/4) on the right
// (core/src/mix: for a stereo source this is a balance, left input to left output only).
// - A page's tone (amplitude 0.1) reaches each side of a mix at 0.1·cos(π/4) = −23.0 dBFS: in the
//   other page's mix (the page plays the hub's mix at unity: the engine's centre pan is undone on
//   its slot) and on both channels jacktrip receives (its stereo mix, 16 bit, written to its
//   receive ports as is).
// - jacktrip's input is jack_simple_client's pair, 0.2 each: 240 Hz on its send_1 (left), 720 Hz
//   on send_2 (right); in a page's mix 240 Hz is on the left only and 720 Hz on the right only,
//   each at 0.2·cos(π/4) = −17.0 dBFS. No limiting: the loudest side's peak, 0.2·cos(π/4) +
//   0.1·cos(π/4) = 0.21, is far below the limiter's −1 dBFS.
const PAGE_DB = 20 * Math.log10(0.1 * Math.SQRT1_2);
const JT_DB = 20 * Math.log10(SIMPLE_CLIENT_AMPLITUDE * Math.SQRT1_2);
const LEVEL_TOL_DB = 1.5;
/** A member's own tone: this far below a heard one, or within 6 dB of the floor between tones. */
const OWN_BELOW_DB = 40;
/** A tone this far below its level at most is a glitch (printed); further down it fails. */
const GLITCH_DB = 6;
const STRICT = process.env.TUTTI_ROOM_STRICT === '1';
const WARMUP_MS = 8000;
const CAPTURE_S = 2;
const RECORD_S = 3;

const jacktripPort = await freeTcpPort();
const udpBase = await freeUdpPort();
const h = serverAndBrowser(ROOM_FLAGS, {
  serverArgs: ['--jacktrip-port', String(jacktripPort), '--jacktrip-udp-base', String(udpBase)],
});
/** @type {string[]} */
const logs = [];
/** @type {string[]} */
const glitches = [];

/**
 * One check of a tone heard at `want` dBFS, into `failures` (or `glitches` when a little low).
 * @param {string[]} failures
 */
function checkLevel(failures, who, hz, db, want) {
  const low = want - db;
  if (!STRICT && low > LEVEL_TOL_DB && low <= GLITCH_DB) {
    glitches.push(`${who} hears ${hz} Hz ${low.toFixed(1)} dB low`);
  } else if (!(Math.abs(db - want) <= LEVEL_TOL_DB)) {
    failures.push(
      `${who} hears ${hz} Hz at ${db.toFixed(1)} dBFS, expected ${want.toFixed(1)} ± ${LEVEL_TOL_DB}`,
    );
  }
}

/**
 * One check of a member's own tone: absent (far below `heard`, or near the floor `levels` gives
 * between the tones).
 * @param {string[]} failures
 * @param {Record<number, { db: number }>} levels
 */
function checkAbsent(failures, who, hz, levels, heard) {
  const floor = Math.max(...BETWEEN.map((b) => levels[b].db));
  const db = levels[hz].db;
  if (!(db < heard - OWN_BELOW_DB || db <= floor + 6)) {
    failures.push(`${who} hears itself: ${hz} Hz at ${db.toFixed(1)} dBFS (floor ${floor.toFixed(1)})`);
  }
}

/** @param {Record<number, { db: number }>} levels */
const line = (levels, tones) => tones.map((f) => `${f} Hz ${levels[f].db.toFixed(1)}`).join(', ');

test(
  'a real jacktrip client and two pages share a room through the hub in mix mode',
  { timeout: 180000 },
  async (t) => {
    const missing = jackToolsMissing();
    if (missing) {
      t.skip(missing);
      return;
    }
    const run = new JackRun('tutti-jtb');
    const jackReady = run.jackd();
    jackReady.catch(() => {}); // awaited below; a failure meanwhile is not unhandled
    /** @type {import('playwright-core').Page[]} */
    const pages = [];
    let passed = false;
    try {
      for (let i = 0; i < TONES.length; i++) {
        pages.push(await joinRoom(h, ROOM, { name: `Page ${i}`, tone: TONES[i] }, logs));
      }
      await waitForRoomOf(pages);
      await pages[0].evaluate(() => window.tutti.session.setTopology('mix'));
      await waitForHub(pages, 'mix');

      // The real client and its tone, once jackd serves clients.
      await jackReady;
      const client = `jtb${process.pid}`;
      await run.jacktrip(client, jacktripPort, await freeUdpPort(), `${ROOM}/Ann`);
      await run.toneInto(client);
      await waitFor(
        'the JackTrip client among the pages’ participants',
        async () => {
          const views = await Promise.all(pages.map(hubView));
          const ok = views.every((v) => v.peers.some((p) => p.kind === 'jacktrip' && p.name === 'Ann'));
          return { ok, views };
        },
        20000,
      );
      await new Promise((r) => setTimeout(r, WARMUP_MS));

      // What each page plays and what jacktrip receives, over the same seconds.
      const [caps, wav] = await Promise.all([
        Promise.all(pages.map((p) => captureOutput(p, CAPTURE_S))),
        run.record(client, RECORD_S),
      ]);
      /** @type {string[]} */
      const failures = [];
      caps.forEach((cap, i) => {
        const left = measureTones(cap.left, cap.rate, [JT_LEFT, ...TONES, ...BETWEEN]);
        const right = measureTones(cap.right, cap.rate, [JT_RIGHT, ...TONES, ...BETWEEN]);
        console.log(
          `page ${i} hears: left ${line(left.tones, [JT_LEFT, ...TONES])}; right ${line(right.tones, [JT_RIGHT, ...TONES])} dBFS`,
        );
        const who = `page ${i}`;
        checkLevel(failures, who, JT_LEFT, left.tones[JT_LEFT].db, JT_DB);
        checkLevel(failures, who, JT_RIGHT, right.tones[JT_RIGHT].db, JT_DB);
        checkLevel(failures, who, TONES[1 - i], left.tones[TONES[1 - i]].db, PAGE_DB);
        checkAbsent(failures, `${who} (left)`, TONES[i], left.tones, PAGE_DB);
        checkAbsent(failures, `${who} (right)`, TONES[i], right.tones, PAGE_DB);
      });

      assert.equal(wav.sampleRate, 48000, 'jack_rec records at jackd’s rate');
      assert.equal(wav.channels, 2, 'jack_rec records both receive ports');
      assert.ok(wav.frames >= (RECORD_S - 0.5) * 48000, `jack_rec wrote ${wav.frames} frames`);
      wav.data.forEach((x, ch) => {
        const own = SIMPLE_CLIENT_HZ[ch];
        const got = measureTones(x, wav.sampleRate, [own, ...TONES, ...BETWEEN]);
        console.log(`jacktrip receives on channel ${ch + 1}: ${line(got.tones, [...TONES, own])} dBFS`);
        const who = `jacktrip (channel ${ch + 1})`;
        for (const f of TONES) checkLevel(failures, who, f, got.tones[f].db, PAGE_DB);
        checkAbsent(failures, who, own, got.tones, PAGE_DB);
      });
      // The mixer's meters, made on the hub (each page hears only its mix): the JackTrip player
      // as it arrives (its tones peak at SIMPLE_CLIENT_AMPLITUDE on each side) and the other page.
      const meters = await Promise.all(
        pages.map((p) =>
          p.evaluate(() =>
            Object.fromEntries(
              window.tutti.session.view.participants.map((q) => [q.name, [q.levels.peakL, q.levels.peakR]]),
            ),
          ),
        ),
      );
      meters.forEach((byName, i) => {
        console.log(`page ${i}'s meters (peak dBFS, left/right): ${JSON.stringify(byName)}`);
        const want = { Ann: 20 * Math.log10(SIMPLE_CLIENT_AMPLITUDE), [`Page ${1 - i}`]: -20 };
        for (const [name, db] of Object.entries(want)) {
          for (const got of byName[name] ?? [NaN]) {
            if (!(Math.abs(got - db) <= 1)) {
              failures.push(
                `page ${i}'s meter of ${name} reads ${got} dBFS, its tone peaks at ${db.toFixed(1)}`,
              );
            }
          }
        }
      });
      if (glitches.length) console.log(`glitches (not failed):\n${glitches.join('\n')}`);
      if (failures.length) assert.fail(failures.join('\n'));
      passed = true;
    } catch (e) {
      console.log(logs.slice(-40).join('\n'));
      console.log(h.server?.logs.filter((l) => /hub|jacktrip/i.test(l)).join('\n'));
      console.log(`JACK logs kept in ${run.dir}`);
      throw e;
    } finally {
      await run.stop(passed);
      for (const page of pages)
        await page
          .context()
          .close()
          .catch(() => {});
    }
  },
);
