// The recordings page and crash recovery on the built app, with recordings written straight into
// IndexedDB (no audio needed): a recording left in state 'recording' with no recorder's lock is
// offered after a reload with its length from its chunks, one whose lock another tab holds is not;
// stems download sample-aligned with gaps as silence; the zip passes `unzip -t`
// and holds the same stems; delete (after its confirm) removes the recording and its chunks.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DIST, launchChromium } from '../kit/browser.mjs';
import { parseWav } from '../kit/wav.mjs';
import { download } from '../kit/harness.mjs';
import { startServer } from '../kit/server.mjs';

const RATE = 48000;

let server;
let browser;

before(async () => {
  server = await startServer({ dist: DIST });
  browser = await launchChromium([]);
});

after(async () => {
  await browser?.close().catch(() => {});
  await server?.stop().catch(() => {});
  setTimeout(() => process.exit(process.exitCode ?? 0), 1000).unref();
});

/** The value of sample `k` of frame `f` in the seeded audio: exact in float32 (a multiple of 2^-10). */
const sampleAt = (seed, f, c) => (((f * 7 + c * 3 + seed) % 1024) + 1 - 512) / 1024;

/** Writes recordings and chunks into the app's database (which the app has opened by now). */
function seed(page, recordings) {
  return page.evaluate(
    async ({ recordings, source }) => {
      const sampleAt = new Function(`return ${source}`)();
      const db = await new Promise((resolve, reject) => {
        const req = indexedDB.open('tutti');
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
      });
      const tx = db.transaction(['recordings', 'chunks'], 'readwrite');
      for (const { meta, chunks } of recordings) {
        tx.objectStore('recordings').put(meta);
        for (const [track, index, startFrame, frames, channels, s] of chunks) {
          const d = new Float32Array(frames * channels);
          for (let f = 0; f < frames; f++)
            for (let c = 0; c < channels; c++) d[f * channels + c] = sampleAt(s, startFrame + f, c);
          tx.objectStore('chunks').put({
            recordingId: meta.id,
            track,
            index,
            startFrame,
            frames,
            channels,
            data: d.buffer,
          });
        }
      }
      await new Promise((resolve, reject) => {
        tx.oncomplete = resolve;
        tx.onerror = () => reject(tx.error);
      });
      db.close();
    },
    { recordings, source: sampleAt.toString() },
  );
}

function inDb(page, id) {
  return page.evaluate(async (id) => {
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open('tutti');
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const tx = db.transaction(['recordings', 'chunks']);
    const meta = await new Promise(
      (r) => (tx.objectStore('recordings').get(id).onsuccess = (e) => r(e.target.result)),
    );
    const chunks = await new Promise(
      (r) => (tx.objectStore('chunks').index('recordingId').count(id).onsuccess = (e) => r(e.target.result)),
    );
    db.close();
    return { meta: meta ?? null, chunks };
  }, id);
}

const track = (track, kind, name, channels) => ({ track, kind, name, channels, startFrame: 0 });

test('recovery banner, stems with gaps, zip, delete', { timeout: 90_000 }, async () => {
  const context = await browser.newContext({ acceptDownloads: true });
  const page = await context.newPage();
  const logs = [];
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') logs.push(`console.${m.type()}: ${m.text()}`);
  });
  await page.goto(server.url);
  await page.getByTestId('recordings-link').waitFor();
  await page.waitForFunction(async () =>
    (await indexedDB.databases()).some((d) => d.name === 'tutti' && (d.version ?? 0) >= 2),
  );

  const startedAt = new Date(2026, 10, 21, 19, 30).getTime();
  // "done": 3 s; the mix (stereo) throughout, a peer (mono) only from 1 s to 2 s.
  const done = {
    meta: {
      id: 'rec-done',
      room: 'seeded',
      startedAt,
      endedAt: startedAt + 3000,
      state: 'complete',
      sampleRate: RATE,
      tracks: [track(0, 'mix', 'Mix', 2), track(1, 'peer', 'Zoë (keys)', 1)],
      frames: 3 * RATE,
      bytes: 0,
    },
    chunks: [
      [0, 0, 0, RATE, 2, 1],
      [0, 1, RATE, RATE, 2, 1],
      [0, 2, 2 * RATE, RATE, 2, 1],
      [1, 0, RATE, RATE, 1, 5],
    ],
  };
  // "lost": its page crashed; the meta still says 0 frames, the chunks hold 2.5 s.
  const lost = {
    meta: {
      id: 'rec-lost',
      room: 'lost-room',
      startedAt: startedAt + 60_000,
      endedAt: null,
      state: 'recording',
      sampleRate: RATE,
      tracks: [track(0, 'mix', 'Mix', 2)],
      frames: 0,
      bytes: 0,
    },
    chunks: [
      [0, 0, 0, RATE, 2, 2],
      [0, 1, RATE, RATE + RATE / 2, 2, 2],
    ],
  };
  // "live": still recording in another tab, which holds its lock.
  const live = {
    meta: { ...lost.meta, id: 'rec-live', room: 'live-room', startedAt: startedAt + 120_000 },
    chunks: [[0, 0, 0, RATE, 2, 3]],
  };
  // The other tab takes the lock before the recording exists, as a recorder does.
  const other = await context.newPage();
  await other.goto(server.url);
  await other.evaluate(() => {
    void navigator.locks.request('tutti-recording:rec-live', () => new Promise(() => {}));
  });
  await other.waitForFunction(async () =>
    (await navigator.locks.query()).held?.some((l) => l.name === 'tutti-recording:rec-live'),
  );
  await seed(page, [done, lost, live]);

  // The next start: one banner, for the lost recording, with its length from its chunks.
  await page.reload();
  const banner = page.getByTestId('recovery-banner');
  await banner.first().waitFor();
  assert.equal(await banner.count(), 1);
  assert.equal(await banner.getAttribute('data-id'), 'rec-lost');
  assert.match(
    await banner.innerText(),
    /A recording from lost-room \(0:02\) was interrupted\. It has been kept\./,
  );
  const lostMeta = (await inDb(page, 'rec-lost')).meta;
  assert.equal(lostMeta.state, 'interrupted');
  assert.equal(lostMeta.frames, 2.5 * RATE);
  assert.equal(lostMeta.bytes, 2.5 * RATE * 2 * 4);
  assert.equal(lostMeta.endedAt, lostMeta.startedAt + 2500);
  assert.equal((await inDb(page, 'rec-live')).meta.state, 'recording');

  await page.getByTestId('recovery-open').click();
  await page.waitForURL(/\/recordings$/);
  const rows = page.getByTestId('recording');
  await rows.first().waitFor();
  assert.deepEqual(await rows.evaluateAll((els) => els.map((e) => [e.dataset.id, e.dataset.state])), [
    ['rec-live', 'recording'],
    ['rec-lost', 'interrupted'],
    ['rec-done', 'complete'],
  ]);
  assert.equal(await banner.count(), 0, 'banners hide once the list is open');
  assert.match(await page.getByTestId('storage-usage').innerText(), /MB used of [\d.]+ [MG]B available/);

  // The peer's stem: 3 s long, silent before 1 s and after 2 s, the seeded samples in between.
  const row = page.locator('[data-testid="recording"][data-id="rec-done"]');
  const peer = await download(page, row.locator('[data-testid="recording-stem"][data-track="1"]'));
  assert.match(peer.name, /^seeded-2026-11-21-1930-02-Zo_ _keys\.wav$/);
  const w = parseWav(peer.bytes);
  assert.equal(w.format, 3);
  assert.equal(w.frames, 3 * RATE);
  assert.equal(w.channels, 1);
  let wrong = 0;
  for (let f = 0; f < w.frames; f++) {
    const want = f >= RATE && f < 2 * RATE ? sampleAt(5, f, 0) : 0;
    if (w.data[0][f] !== want) wrong++;
  }
  assert.equal(wrong, 0, `${wrong} samples of the peer stem differ from what was recorded`);
  const mix = await download(page, row.locator('[data-testid="recording-stem"][data-track="0"]'));

  // The zip (float32, the default): the same bytes as the stems, and unzip agrees (scripts/setup.sh
  // installs it for the tests).
  const zip = await download(page, row.getByTestId('recording-export-zip'));
  assert.match(zip.name, /^seeded-2026-11-21-1930\.zip$/);
  const dir = mkdtempSync(join(tmpdir(), 'tutti-rec-'));
  try {
    const path = join(dir, zip.name);
    writeFileSync(path, zip.bytes);
    assert.match(execFileSync('unzip', ['-t', path], { encoding: 'utf8' }), /No errors detected/);
    for (const f of [peer, mix]) {
      const got = execFileSync('unzip', ['-p', path, f.name], { maxBuffer: 1 << 26 });
      assert.ok(Buffer.from(f.bytes).equals(got), `${f.name} in the zip equals the stem`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  // 24-bit: the mix's samples within half a step.
  await page.getByTestId('recording-format').selectOption('pcm24');
  const mix24 = parseWav(
    (await download(page, row.locator('[data-testid="recording-stem"][data-track="0"]'))).bytes,
  );
  assert.equal(mix24.bits, 24);
  let worst = 0;
  for (let f = 0; f < mix24.frames; f += 97) {
    for (const c of [0, 1])
      worst = Math.max(worst, Math.abs(mix24.data[c][f] * (8388608 / 8388607) - sampleAt(1, f, c)));
  }
  assert.ok(worst <= 0.5 / 8388607 + 1e-9, `24-bit error ${worst}`);

  // Delete: the confirm step, then the row, the meta and every chunk are gone.
  await row.getByTestId('recording-delete').click();
  assert.equal((await inDb(page, 'rec-done')).chunks, 4, 'nothing deleted before the confirm');
  await row.getByTestId('recording-delete-confirm').click();
  await row.waitFor({ state: 'detached' });
  assert.deepEqual(await inDb(page, 'rec-done'), { meta: null, chunks: 0 });
  assert.equal((await inDb(page, 'rec-lost')).chunks, 2);
  assert.match(await page.getByTestId('storage-usage').innerText(), /used of/);

  await other.close();
  await context.close();
  assert.deepEqual(logs, []);
});
