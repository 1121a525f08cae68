// What the app remembers, in headless Chromium against the real server and the built app:
// 1. display name, audio settings (stereo, 64-frame blocks, a fixed buffer of 6 packets) and the
//    recent room survive a reload, and the session uses those settings (its peer's buffer target
//    is 6 x 64 frames = 8 ms, the adaptive mode's would move);
// 2. the strip set for a participant (fader, pan, mute) comes back when the same name is met in
//    the same room again; solo does not; the session's history record names who was there;
// 3. a database of version 1 made in the page's origin before the app opens it (raw IndexedDB)
//    is upgraded with every value kept;
// 4. the values the localStorage era kept are imported once, and the old keys removed.
//
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { collectLogs, ROOM_FLAGS, serverAndBrowser, toneContext, waitFor } from '../kit/harness.mjs';
import { createV1, readDatabase } from './lib/idb.mjs';

/** Fixed depth 6 at 64-frame blocks, ms at 48 kHz. */
const FIXED_TARGET_MS = (6 * 64 * 1000) / 48000;

const h = serverAndBrowser(ROOM_FLAGS);

function newContext() {
  return toneContext(h.browser, { freq: 440, amplitude: 0.1 });
}

async function newPage(context, label) {
  const page = await context.newPage();
  return { page, logs: collectLogs(page, label, []) };
}

/**
 * Runs `body` with a page per label, each in a tone context of its own that closes after the test;
 * if `body` fails, the pages' console lines are printed before the error.
 */
async function withPages(t, labels, body) {
  const contexts = [];
  for (let k = 0; k < labels.length; k++) contexts.push(await newContext());
  t.after(() => Promise.all(contexts.map((c) => c.close())));
  const pages = [];
  for (const [k, label] of labels.entries()) pages.push(await newPage(contexts[k], label));
  try {
    await body(pages);
  } catch (err) {
    console.log(pages.flatMap((p) => p.logs).join('\n'));
    throw err;
  }
}

/** The session's view as the page has it (window.tutti, set by the session for diagnostics). */
function sessionView(page) {
  return page.evaluate(() => {
    const s = window.tutti?.session;
    if (!s) return null;
    const v = s.view;
    return {
      joined: v.joined,
      signaling: v.signaling,
      error: v.error,
      engine: v.engine,
      input: { channels: v.input.channels },
      participants: v.participants.map((p) => ({
        name: p.name,
        link: p.link,
        strip: p.strip,
        targetMs: p.targetMs,
      })),
    };
  });
}

async function joinFromLink(page, room, name) {
  await page.goto(`${h.server.url}r/${room}?ice=loopback`);
  await page.getByTestId('display-name').fill(name);
  await page.getByTestId('join').click();
}

async function leaveRoom(page) {
  await page.getByTestId('leave').click();
  // Leaving ends on the home page once what the session remembers is written.
  await page.getByTestId('room-name').waitFor();
}

test(
  'name, audio settings and the recent room survive a reload; the session uses them',
  { timeout: 90_000 },
  (t) =>
    withPages(t, ['solo'], async ([{ page }]) => {
      await page.goto(`${h.server.url}?ice=loopback`);
      await page.getByTestId('display-name').fill('Ada');
      await page.getByLabel('Stereo').check();
      await page.locator('input[name="block"][value="64"]').check();
      await page.getByTestId('buffer-fixed').check();
      const packets = page.getByTestId('buffer-packets');
      await packets.fill('6');
      await packets.press('Tab');
      await page.getByTestId('room-name').fill('store-solo');
      const before = Date.now();
      await page.getByTestId('join').click();
      await waitFor('joined', async () => {
        const v = await sessionView(page);
        return { ok: !!v?.joined, v };
      });
      const v = await sessionView(page);
      assert.equal(v.engine.blockFrames, 64);
      assert.equal(v.input.channels, 2);
      await leaveRoom(page);
      const joinedBy = Date.now();

      await page.reload();
      await page.getByTestId('display-name').waitFor();
      assert.equal(await page.getByTestId('display-name').inputValue(), 'Ada');
      assert.equal(await page.getByLabel('Stereo').isChecked(), true);
      assert.equal(await page.locator('input[name="block"][value="64"]').isChecked(), true);
      assert.equal(await page.getByTestId('buffer-fixed').isChecked(), true);
      assert.equal(await page.getByTestId('buffer-packets').inputValue(), '6');
      assert.deepEqual(await page.getByTestId('recent-name').allTextContents(), ['store-solo']);
      assert.match(await page.getByTestId('recent-room').first().textContent(), /today \d\d:\d\d/);
      assert.equal(await page.getByTestId('history-entry').count(), 1);
      assert.match(await page.getByTestId('history-entry').first().textContent(), /store-solo/);

      const stored = await readDatabase(page);
      assert.equal(stored.version, 2);
      const room = stored.rooms.find((r) => r.name === 'store-solo');
      assert.ok(room, `room stored: ${JSON.stringify(stored.rooms)}`);
      assert.ok(
        room.lastJoined >= before && room.lastJoined <= joinedBy,
        `lastJoined ${room.lastJoined} in [${before}, ${joinedBy}]`,
      );
      const settings = Object.fromEntries(stored.settingsKeys.map((k, i) => [k, stored.settings[i]]));
      assert.equal(settings.name, 'Ada');
      assert.deepEqual(settings.audio, {
        inputDeviceId: '',
        outputDeviceId: '',
        channels: 2,
        blockFrames: 64,
        buffer: { mode: 'fixed', packets: 6 },
      });
      assert.equal(stored.sessions.length, 1);
      assert.ok(stored.sessions[0].endedAt >= stored.sessions[0].startedAt);
    }),
);

test(
  "a participant's strip is remembered per room and name; the fixed buffer holds its depth",
  { timeout: 120_000 },
  (t) =>
    withPages(t, ['Ann', 'Ben'], async ([a, b]) => {
      // Both pages send 64-frame blocks with a fixed buffer of 6 packets (set through the setup card).
      for (const { page } of [a, b]) {
        await page.goto(`${h.server.url}?ice=loopback`);
        await page.locator('input[name="block"][value="64"]').check();
        await page.getByTestId('buffer-fixed').check();
        await page.getByTestId('buffer-packets').fill('6');
        await page.getByTestId('buffer-packets').press('Tab');
      }
      const benSeen = async () => {
        const v = await sessionView(a.page);
        const ben = v?.participants.find((p) => p.name === 'Ben');
        return { ok: ben?.link === 'connected', ben, v };
      };
      await joinFromLink(a.page, 'store-duo', 'Ann');
      await joinFromLink(b.page, 'store-duo', 'Ben');
      await waitFor('Ann sees Ben connected', benSeen);
      // The fixed depth: 6 packets of 64 frames, whatever the network does.
      const fixed = await waitFor("Ben's buffer target", async () => {
        const r = await benSeen();
        return { ok: Math.abs((r.ben?.targetMs ?? 0) - FIXED_TARGET_MS) < 1e-6, ben: r.ben };
      });
      assert.ok(fixed.ok);

      // Ann turns Ben down 10 dB with the keyboard, pans him, mutes and solos him.
      const strip = a.page.getByTestId('strip').filter({ hasText: 'Ben' });
      await strip.getByTestId('strip-fader').focus();
      for (let i = 0; i < 20; i++) await a.page.keyboard.press('ArrowLeft');
      await strip.getByTestId('strip-pan').focus();
      for (let i = 0; i < 5; i++) await a.page.keyboard.press('ArrowRight');
      await strip.getByTestId('strip-mute').click();
      await strip.getByTestId('strip-solo').click();
      const set = (await benSeen()).ben.strip;
      assert.ok(set.gainDb < -1, `fader moved: ${set.gainDb} dB`);
      assert.ok(set.pan > 0, `pan moved: ${set.pan}`);
      assert.equal(set.mute, true);
      assert.equal(set.solo, true);

      await leaveRoom(a.page);
      await joinFromLink(a.page, 'store-duo', 'Ann');
      const back = await waitFor('Ann sees Ben again', benSeen);
      assert.deepEqual(back.ben.strip, { gainDb: set.gainDb, pan: set.pan, mute: true, solo: false });

      // The history record of the first visit names Ben.
      const stored = await readDatabase(a.page);
      const first = stored.sessions.find((s) => s.endedAt !== null);
      assert.ok(first, `an ended session: ${JSON.stringify(stored.sessions)}`);
      assert.deepEqual(first.participants, ['Ben']);
      assert.ok('Ben' in first.summary.participants);
      assert.equal(stored.rooms.find((r) => r.name === 'store-duo').mix.Ben.gainDb, set.gainDb);
      // Another room does not get Ben's strip.
      assert.deepEqual(
        stored.rooms.filter((r) => Object.keys(r.mix).length > 0).map((r) => r.name),
        ['store-duo'],
      );
    }),
);

test(
  'a version 1 database made before the app opens is upgraded with its values kept',
  { timeout: 60_000 },
  (t) =>
    withPages(t, ['upgrade'], async ([{ page }]) => {
      // Same origin, a page that does not open the database.
      await page.goto(`${h.server.url}bench.html`);
      await page.evaluate(createV1, {
        name: 'tutti',
        rooms: [
          { name: 'old-room', lastJoined: Date.now() - 3 * 86_400_000 },
          { name: 'older-room', lastJoined: Date.now() - 5 * 86_400_000 },
        ],
        settings: [
          ['name', 'Vera'],
          ['audio', { inputDeviceId: '', outputDeviceId: '', channels: 2, blockFrames: 256 }],
          ['legacyImport', { at: 1 }],
        ],
      });
      await page.goto(h.server.url);
      await page.getByTestId('display-name').waitFor();
      assert.equal(await page.getByTestId('display-name').inputValue(), 'Vera');
      assert.equal(await page.getByLabel('Stereo').isChecked(), true);
      assert.equal(await page.locator('input[name="block"][value="256"]').isChecked(), true);
      assert.equal(await page.getByTestId('buffer-adaptive').isChecked(), true);
      assert.deepEqual(await page.getByTestId('recent-name').allTextContents(), ['old-room', 'older-room']);
      const stored = await readDatabase(page);
      assert.equal(stored.version, 2);
      assert.deepEqual([...stored.stores].sort(), ['chunks', 'recordings', 'rooms', 'sessions', 'settings']);
      for (const r of stored.rooms) assert.deepEqual(r.mix, {});
      assert.equal(await page.getByTestId('storage-note').count(), 0);
    }),
);

test("the localStorage era's values are imported once, and the old keys removed", { timeout: 60_000 }, (t) =>
  withPages(t, ['import'], async ([{ page }]) => {
    await page.goto(`${h.server.url}bench.html`);
    await page.evaluate(() => {
      localStorage.setItem('tutti.name', JSON.stringify('Lou'));
      localStorage.setItem('tutti.recent', JSON.stringify(['first-room', 'not a room', 'second-room']));
      localStorage.setItem(
        'tutti.audio',
        JSON.stringify({ inputDeviceId: '', outputDeviceId: '', channels: 2, blockFrames: 32 }),
      );
    });
    await page.goto(h.server.url);
    await page.getByTestId('display-name').waitFor();
    assert.equal(await page.getByTestId('display-name').inputValue(), 'Lou');
    assert.equal(await page.locator('input[name="block"][value="32"]').isChecked(), true);
    assert.deepEqual(await page.getByTestId('recent-name').allTextContents(), ['first-room', 'second-room']);
    const left = await page.evaluate(() =>
      ['tutti.name', 'tutti.recent', 'tutti.audio'].map((k) => localStorage.getItem(k)),
    );
    assert.deepEqual(left, [null, null, null]);
    // Once: an old key written again is not imported on the next load.
    await page.evaluate(() => localStorage.setItem('tutti.name', JSON.stringify('Someone')));
    await page.reload();
    await page.getByTestId('display-name').waitFor();
    assert.equal(await page.getByTestId('display-name').inputValue(), 'Lou');
  }),
);
