// Recording a session, end to end against the real server, real data channels and the real
// worklet: three pages in a room, each microphone a tone of its own. One page records 10 s; the
// stems exported from the recordings page must be, per participant, that participant's tone at
// the level it was sent (stems are pre-fader), the user's own input, and the mix, all of the
// same length and sample-aligned (the mix equals the panned sum of the peer stems). Then a page
// is killed mid-recording (renderer crash) and the next start must offer all but at most the
// last second of it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  collectLogs,
  download,
  ROOM_FLAGS,
  serverAndBrowser,
  toneContext,
  waitForRoomOf,
} from '../kit/harness.mjs';
import { parseWav } from '../kit/wav.mjs';
import { toneDbMedian, toneFrequency } from '../kit/audio.mjs';
import { readDatabase } from './lib/idb.mjs';
import { readZip } from './lib/record-readers.mjs';

const ROOM = 'e2e-recording';
const RATE = 48000;
const AMPLITUDE = 0.1;
const SOURCE_DB = 20 * Math.log10(AMPLITUDE); // -20 dBFS: a stem is pre-fader
const MIX_DB = 20 * Math.log10(AMPLITUDE * Math.SQRT1_2); // centre pan in the mix
const LEVEL_TOL_DB = 1;
const FREQ_TOL_HZ = 0.5;
const RECORD_SECONDS = 10;
/** A recording's length against the wall-clock time between Record and Stop. */
const LENGTH_TOL_S = 0.5;
const PLAYERS = [
  { name: 'Ana', tone: 330 },
  { name: 'Bo', tone: 550 },
  { name: 'Cy', tone: 770 },
];
/** @type {{ name: string, tone: number, context: import('playwright-core').BrowserContext, page: import('playwright-core').Page, logs: string[] }[]} */
const members = [];
const h = serverAndBrowser(ROOM_FLAGS);

function newMemberContext(tone) {
  return toneContext(h.browser, { freq: tone, amplitude: AMPLITUDE }, { acceptDownloads: true });
}

function watch(page, name, logs) {
  collectLogs(page, name, logs, { errorsOnly: true });
}

async function join(context, name, logs) {
  const page = await context.newPage();
  watch(page, name, logs);
  await page.goto(`${h.server.url}r/${ROOM}?ice=loopback`);
  await page.getByTestId('display-name').fill(name);
  await page.getByTestId('join').click();
  // Note when recording really starts (the engine writes from then on).
  await page.evaluate(() => {
    const wait = () => {
      const s = window.tutti?.session;
      if (!s) return setTimeout(wait, 50);
      s.subscribe((v) => {
        if (v.recording.state === 'recording' && window.__recordingAt == null)
          window.__recordingAt = performance.now();
        if (v.recording.state !== 'recording') window.__recordingAt = null;
      });
    };
    wait();
  });
  return page;
}

function roomFormed() {
  return waitForRoomOf(members.map((m) => m.page));
}

/** Every recording's metadata, read from IndexedDB with the browser's own API (not the app's). */
async function recordingsInDb(page) {
  return (await readDatabase(page)).recordings;
}

/** Entries of a zip (store method) by name, read from its central directory and checked. */
function unzip(bytes) {
  const { entries } = readZip(bytes);
  for (const e of entries) assert.equal(e.method, 0, `${e.name} is stored`);
  return new Map(entries.map((e) => [e.name, e.data]));
}

let recorded = null;

test(
  'three pages: one records 10 s; stems match each participant, the input and the mix',
  { timeout: 240_000 },
  async () => {
    const logs = [];
    for (const p of PLAYERS) {
      const context = await newMemberContext(p.tone);
      members.push({ ...p, context, page: await join(context, p.name, logs), logs });
    }
    await roomFormed();
    await new Promise((r) => setTimeout(r, 3000)); // buffers settle
    const rec = members[0];
    await rec.page.getByTestId('record').click();
    await rec.page.waitForFunction(() => window.__recordingAt != null, null, { timeout: 15000 });
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, RECORD_SECONDS * 1000));
    await rec.page.getByTestId('record').click();
    const wallS = (Date.now() - t0) / 1000;
    await rec.page.getByTestId('record-saved').waitFor({ timeout: 15000 });

    const metas = await recordingsInDb(rec.page);
    assert.equal(metas.length, 1, 'one recording stored');
    const meta = metas[0];
    recorded = meta;
    const seconds = meta.frames / RATE;
    console.log(
      `recording: ${seconds.toFixed(3)} s (wall ${wallS.toFixed(3)} s), ${meta.tracks.length} tracks ` +
        `${JSON.stringify(meta.tracks.map((t) => [t.kind, t.name, t.channels, t.startFrame]))}, ${(meta.bytes / 1e6).toFixed(1)} MB, state ${meta.state}`,
    );
    assert.equal(meta.state, 'complete');
    assert.equal(meta.room, ROOM);
    assert.ok(
      Math.abs(seconds - wallS) <= LENGTH_TOL_S,
      `recorded ${seconds.toFixed(2)} s for ${wallS.toFixed(2)} s of wall time`,
    );
    const kinds = meta.tracks.map((t) => `${t.kind}:${t.name}`).sort();
    assert.deepEqual(kinds, ['input:Ana', 'mix:Mix', 'peer:Bo', 'peer:Cy']);

    // Export every stem from the recordings page (another tab of the same user).
    const lib = await rec.context.newPage();
    watch(lib, 'recordings', logs);
    await lib.goto(`${h.server.url}recordings`);
    const row = lib.locator(`[data-testid="recording"][data-id="${meta.id}"]`);
    await row.waitFor();
    const stems = new Map();
    for (const t of meta.tracks) {
      const file = await download(
        lib,
        row.locator(`[data-testid="recording-stem"][data-track="${t.track}"]`),
      );
      const wav = parseWav(file.bytes);
      stems.set(`${t.kind}:${t.name}`, { wav, file, track: t });
      assert.equal(wav.sampleRate, RATE, `${file.name}: rate`);
      assert.equal(wav.frames, meta.frames, `${file.name}: every stem has the recording's length`);
      assert.equal(wav.channels, t.channels, `${file.name}: channels`);
    }
    // The middle of the recording: clear of the first and last block of any track.
    const from = 2 * RATE;
    const len = Math.floor(seconds * RATE) - 4 * RATE;
    const mid = (x) => x.subarray(from, from + len);
    const figures = {};
    const expectTone = (key, ch, tone, db, absent) => {
      const x = mid(stems.get(key).wav.data[ch]);
      const f = toneFrequency(x, tone, RATE, 3);
      const level = toneDbMedian(x, tone, RATE);
      figures[`${key}/${ch}`] = { hz: +f.toFixed(2), db: +level.toFixed(2) };
      assert.ok(
        Math.abs(f - tone) <= FREQ_TOL_HZ,
        `${key} ch${ch}: tone at ${f.toFixed(2)} Hz, expected ${tone}`,
      );
      assert.ok(
        Math.abs(level - db) <= LEVEL_TOL_DB,
        `${key} ch${ch}: ${tone} Hz at ${level.toFixed(2)} dBFS, expected ${db.toFixed(2)}`,
      );
      for (const other of absent) {
        const leak = toneDbMedian(x, other, RATE);
        assert.ok(leak < db - 50, `${key} ch${ch}: ${other} Hz at ${leak.toFixed(1)} dBFS`);
      }
    };
    const [ana, bo, cy] = PLAYERS;
    expectTone('input:Ana', 0, ana.tone, SOURCE_DB, [bo.tone, cy.tone]);
    for (const ch of [0, 1]) {
      expectTone('peer:Bo', ch, bo.tone, SOURCE_DB, [ana.tone, cy.tone]);
      expectTone('peer:Cy', ch, cy.tone, SOURCE_DB, [ana.tone, bo.tone]);
      expectTone('mix:Mix', ch, bo.tone, MIX_DB, [ana.tone]);
      expectTone('mix:Mix', ch, cy.tone, MIX_DB, [ana.tone]);
    }
    // Sample-aligned: the mix is the sum of the peer stems at centre pan, sample for sample.
    let err = 0;
    let sig = 0;
    for (const ch of [0, 1]) {
      const m = mid(stems.get('mix:Mix').wav.data[ch]);
      const b = mid(stems.get('peer:Bo').wav.data[ch]);
      const c = mid(stems.get('peer:Cy').wav.data[ch]);
      for (let i = 0; i < m.length; i++) {
        const d = m[i] - (b[i] + c[i]) * Math.SQRT1_2;
        err += d * d;
        sig += m[i] * m[i];
      }
    }
    const residualDb = 10 * Math.log10(err / sig);
    console.log(`stems: ${JSON.stringify(figures)}; mix minus panned stems ${residualDb.toFixed(1)} dB`);
    assert.ok(
      residualDb < -60,
      `the mix differs from the panned sum of the stems by ${residualDb.toFixed(1)} dB: not sample-aligned`,
    );

    // The zip holds the same files.
    const zip = await download(lib, row.getByTestId('recording-export-zip'));
    const entries = unzip(zip.bytes);
    assert.equal(entries.size, meta.tracks.length, `zip entries: ${[...entries.keys()].join(', ')}`);
    for (const { file } of stems.values()) {
      const stored = entries.get(file.name);
      assert.ok(stored, `zip has ${file.name}`);
      assert.deepEqual(
        Buffer.from(stored),
        Buffer.from(file.bytes),
        `${file.name} in the zip equals the stem`,
      );
    }
    await lib.close();
    assert.deepEqual(logs, []);
  },
);

test(
  'a page killed mid-recording: the next start offers all but at most the last second',
  { timeout: 120_000 },
  async () => {
    assert.ok(recorded, 'the first test recorded');
    const rec = members[0];
    await rec.page.getByTestId('record').click();
    await rec.page.waitForFunction(() => window.__recordingAt != null, null, { timeout: 15000 });
    await new Promise((r) => setTimeout(r, 6000));
    const elapsedS = await rec.page.evaluate(
      () => (performance.now() - (window.__recordingAt ?? NaN)) / 1000,
    );
    const cdp = await rec.context.newCDPSession(rec.page);
    const crashed = new Promise((resolve) => rec.page.once('crash', resolve));
    // The renderer dies: no unload, no goodbye. (The command itself never answers.)
    cdp.send('Page.crash').catch(() => {});
    await crashed;
    await rec.page.close().catch(() => {});

    const page = await rec.context.newPage();
    const logs = [];
    watch(page, 'after crash', logs);
    await page.goto(h.server.url);
    await page.getByTestId('recovery-banner').first().waitFor({ timeout: 15000 });
    const metas = await recordingsInDb(page);
    const lost = metas.find((m) => m.id !== recorded.id);
    assert.ok(lost, 'the cut-off recording is stored');
    const seconds = lost.frames / RATE;
    console.log(
      `recovered ${seconds.toFixed(3)} s of ${elapsedS.toFixed(3)} s recorded before the crash; state ${lost.state}; ${lost.tracks.length} tracks`,
    );
    assert.notEqual(lost.state, 'recording');
    assert.ok(seconds >= elapsedS - 1, `recovered ${seconds.toFixed(2)} s of ${elapsedS.toFixed(2)} s`);
    assert.ok(
      seconds <= elapsedS + 0.2,
      `recovered more than was recorded: ${seconds.toFixed(2)} s of ${elapsedS.toFixed(2)} s`,
    );
    // What was recovered plays: a peer's stem holds its tone.
    await page.goto(`${h.server.url}recordings`);
    const row = page.locator(`[data-testid="recording"][data-id="${lost.id}"]`);
    await row.waitFor();
    const bo = lost.tracks.find((t) => t.name === 'Bo');
    const file = await download(
      page,
      row.locator(`[data-testid="recording-stem"][data-track="${bo.track}"]`),
    );
    const wav = parseWav(file.bytes);
    assert.equal(wav.frames, lost.frames);
    const x = wav.data[0].subarray(RATE, lost.frames - RATE);
    const level = toneDbMedian(x, PLAYERS[1].tone, RATE);
    assert.ok(
      Math.abs(level - SOURCE_DB) <= LEVEL_TOL_DB,
      `recovered stem: ${PLAYERS[1].tone} Hz at ${level.toFixed(2)} dBFS`,
    );
    assert.deepEqual(logs, []);
  },
);
