// The stats view, end to end: three pages in a room on loopback; one opens the stats, which fill
// every second with a row per participant (counts, buffer, verdict) and plots, and exports the
// session's stats as JSON and CSV that parse back with their time series.
import assert from 'node:assert/strict';
import { cpus } from 'node:os';
import { test } from 'node:test';
import { busyPct, cpuTimes } from '../kit/cpu.mjs';
import { download, joinRoom, ROOM_FLAGS, serverAndBrowser, waitForRoomOf } from '../kit/harness.mjs';
import { parseCsv } from './lib/csv.mjs';

const ROOM = 'e2e-stats';
const PLAYERS = [
  { name: 'Ana', tone: 330 },
  { name: 'Bo', tone: 550 },
  { name: 'Cy', tone: 770 },
];
const h = serverAndBrowser(ROOM_FLAGS);

/** The page that watches the stats plays with a fixed buffer: a depth that stays put to compare with. */
const FIXED_PACKETS = 8;
const FIXED_MS = (FIXED_PACKETS * 128 * 1000) / 48000;

function join(p, logs, audio = null) {
  return joinRoom(h, ROOM, p, logs, { audio, options: { acceptDownloads: true } });
}

test('the stats view fills every second and exports JSON and CSV', { timeout: 150_000 }, async (t) => {
  const logs = [];
  const pages = [];
  for (const p of PLAYERS) {
    const fixed =
      pages.length === 0
        ? {
            inputDeviceId: '',
            outputDeviceId: '',
            channels: 1,
            blockFrames: 128,
            buffer: { mode: 'fixed', packets: FIXED_PACKETS },
          }
        : null;
    pages.push(await join(p, logs, fixed));
  }
  await waitForRoomOf(pages);
  const page = pages[0];
  await page.getByTestId('stats-toggle').click();
  await page.getByTestId('stats-table').waitFor();
  await page.waitForTimeout(5000);
  const rows = await page
    .locator('[data-testid="stats-row"]')
    .evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll('th,td')].map((c) => c.textContent.trim())),
    );
  assert.equal(rows.length, 2, `rows: ${JSON.stringify(rows)}`);
  assert.deepEqual(rows.map((r) => r[0]).sort(), ['Bo', 'Cy']);
  for (const r of rows) {
    assert.ok(Number(r[3]) > 1000, `received ${r[3]}`);
    assert.match(r[1], /^(Good|Fair|Poor)$/);
    assert.match(r[11], /^PCM16 mono 128$/);
  }
  for (const id of ['plot-buffer', 'plot-latency', 'plot-loss']) {
    assert.equal(await page.getByTestId(id).locator('canvas').count(), 1, `${id} draws`);
  }

  // Per-stage histograms: they fill, and the longest jitter-buffer wait is the buffer's depth,
  // within the band its rules allow (blocks of 128 frames = 2.67 ms).
  const BLOCK_MS = (128 / 48000) * 1000;
  // Start the histograms afresh once the room has settled, and let them fill. The wait check
  // holds for a window without underrun: a stall of this shared machine holds packets longer
  // than any depth (playout waits), so such a window is measured again, up to WINDOWS times.
  // When none is clean the machine could not carry the room meanwhile: the figures are printed
  // and the wait check is reported as skipped (never passed); the other checks still run.
  const WINDOWS = 5;
  const readStages = () =>
    page.evaluate(() => {
      const s = window.tutti.session;
      const st = s.latencyStages();
      const c = s.counters();
      const peers = {};
      for (const p of s.view.participants) {
        peers[p.name] = {
          wait: st.peers[p.peer]?.jitterWait ?? null,
          network: st.peers[p.peer]?.network ?? null,
          bufferMs: c.perPeer[p.peer].bufferedMs,
          targetMs: c.perPeer[p.peer].targetMs,
          rttMs: p.rttMs,
        };
      }
      return { peers, capture: st.local.capture ?? null };
    });
  let stages;
  let clean = false;
  for (let attempt = 1; attempt <= WINDOWS && !clean; attempt++) {
    const u0 = await page.evaluate(() => window.tutti.session.counters().underruns);
    const cpu0 = cpuTimes();
    await page.evaluate(() => window.tutti.session.resetLatency());
    await page.waitForTimeout(6000);
    stages = await readStages();
    const u = (await page.evaluate(() => window.tutti.session.counters().underruns)) - u0;
    clean = u === 0;
    if (!clean) {
      const busy = busyPct(cpu0, cpuTimes()).toFixed(0);
      console.log(
        `stats: window ${attempt} of ${WINDOWS} had ${u} underruns, CPU busy ${busy}% of ${cpus().length} cores`,
      );
    }
  }
  assert.ok(stages, 'the stages were read');
  const summary = Object.fromEntries(
    Object.entries(stages.peers).map(([n, v]) => [
      n,
      {
        wait: v.wait && {
          count: v.wait.count,
          p50: +v.wait.p50.toFixed(2),
          mean: +v.wait.mean.toFixed(2),
          p99: +v.wait.p99.toFixed(2),
          max: +v.wait.max.toFixed(2),
        },
        network: v.network && { count: v.network.count, p50: +v.network.p50.toFixed(3) },
        bufferMs: +v.bufferMs.toFixed(2),
        targetMs: +v.targetMs.toFixed(2),
        rttMs: v.rttMs,
      },
    ]),
  );
  console.log(
    `stages (fixed buffer ${FIXED_MS.toFixed(2)} ms): ${JSON.stringify(summary)}; capture p50 ${stages.capture?.p50} ms over ${stages.capture?.count}`,
  );
  assert.ok(stages.capture && stages.capture.count > 1000, 'the capture interval histogram fills');
  for (const [name, v] of Object.entries(stages.peers)) {
    assert.ok(v.wait && v.wait.count > 1000, `${name}: the jitter-wait histogram fills`);
    assert.ok(
      v.wait.count < 6.5 * 375,
      `${name}: the histogram restarted at the reset (${v.wait.count} packets)`,
    );
    assert.ok(Math.abs(v.targetMs - FIXED_MS) < 0.01, `${name}: the fixed depth is ${v.targetMs} ms`);
    if (!clean) continue;
    // The depth counts from the earliest recent arrivals (the lateness minimum of the last one
    // or two seconds): a packet that arrives that early waits the whole depth, a later one waits
    // less by its lateness above that minimum. So the longest wait is the depth. How many packets
    // come near the minimum depends on how the machine's delivery clumps (a loaded machine hands
    // packets over in bursts, and then only a few per second do), so the known answer is the top
    // of the distribution, not its 99th percentile. The depth itself keeps to the target within
    // the band the buffer leaves to its drift controller: a shortfall of a block or an excess
    // above 1.5 blocks is corrected by whole blocks (core/src/jitter, "Depth: target and fill"),
    // and a new earliest arrival inside the band is corrected at ~1 ms per second. So the
    // longest wait is at least the band's bottom (the buffer holds its depth). It has no top:
    // a packet earlier than any before raises the depth at once by its earliness, and an excess
    // is corrected only once it has stood half a second, so the odd packet waits above the band
    // (one waited 25.94 ms against a top of 25.33 ms). The 99th percentile stays under the top.
    const [low, high] = [v.targetMs - BLOCK_MS, v.targetMs + 1.5 * BLOCK_MS];
    assert.ok(
      v.wait.max >= low,
      `${name}: jitter-buffer wait max ${v.wait.max.toFixed(2)} ms, buffer target ${v.targetMs.toFixed(2)} ms (expected at least ${low.toFixed(2)})`,
    );
    assert.ok(
      v.wait.p99 <= high,
      `${name}: jitter-buffer wait p99 ${v.wait.p99.toFixed(2)} ms above the target ${v.targetMs.toFixed(2)} ms`,
    );
    assert.ok(v.wait.mean <= v.targetMs + BLOCK_MS, `${name}: mean wait ${v.wait.mean.toFixed(2)} ms`);
  }
  if (!clean) {
    t.skip(`the wait against the depth: underruns in each of ${WINDOWS} windows, figures printed above`);
  }
  await page.getByTestId('stage-histograms').waitFor();

  const json = JSON.parse(
    Buffer.from((await download(page, page.getByTestId('stats-export-json'))).bytes).toString('utf8'),
  );
  assert.equal(json.format, 'tutti-stats');
  assert.equal(json.room, ROOM);
  assert.deepEqual(json.peers.map((p) => p.name).sort(), ['Bo', 'Cy']);
  for (const p of json.peers) {
    assert.ok(p.samples.length >= 5, `${p.name}: ${p.samples.length} samples`);
    const last = p.samples.at(-1);
    assert.ok(last.received > 1000 && last.bufferMs > 0, JSON.stringify(last));
  }
  const csv = parseCsv(
    Buffer.from((await download(page, page.getByTestId('stats-export-csv'))).bytes).toString('utf8'),
  );
  const header = csv[0];
  assert.equal(header[0], 'record');
  const series = csv.filter((r) => r[0] === 'series');
  // The CSV was exported after the JSON: it has at least the JSON's samples of each peer.
  for (const p of json.peers) {
    const mine = series.filter((r) => r[header.indexOf('peer')] === p.peer);
    assert.ok(
      mine.length >= p.samples.length,
      `${p.name}: ${mine.length} CSV rows, ${p.samples.length} JSON samples`,
    );
    assert.equal(mine[0][header.indexOf('name')], p.name);
  }
  assert.ok(
    csv.every((r) => r.length === header.length),
    'every CSV row has every column',
  );
  assert.deepEqual(logs, []);
});
