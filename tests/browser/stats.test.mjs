// The stats view, end to end: three pages in a room on loopback; one opens the stats, which fill
// every second with a row per participant (counts, buffer, verdict) and plots, and exports the
// session's stats as JSON and CSV that parse back with their time series.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { collectLogs, download, ROOM_FLAGS, serverAndBrowser, toneContext, waitFor } from './lib/harness.mjs';

const ROOM = 'e2e-stats';
const PLAYERS = [
  { name: 'Ana', tone: 330 },
  { name: 'Bo', tone: 550 },
  { name: 'Cy', tone: 770 },
];
const h = serverAndBrowser(ROOM_FLAGS);

async function join(p, logs) {
  const context = await toneContext(h.browser, { freq: p.tone, amplitude: 0.1 }, { acceptDownloads: true });
  const page = await context.newPage();
  collectLogs(page, p.name, logs, { errorsOnly: true });
  await page.goto(`${h.server.url}r/${ROOM}?ice=loopback`);
  await page.getByTestId('display-name').fill(p.name);
  await page.getByTestId('join').click();
  return page;
}

/** RFC 4180 rows. */
function parseCsv(text) {
  const rows = [];
  let row = [], field = '', quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; } else if (c === '"') quoted = false; else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { row.push(field); field = ''; }
    else if (c === '\r' && text[i + 1] === '\n') { row.push(field); rows.push(row); row = []; field = ''; i++; }
    else field += c;
  }
  return rows;
}

test('the stats view fills every second and exports JSON and CSV', { timeout: 120_000 }, async () => {
  const logs = [];
  const pages = [];
  for (const p of PLAYERS) pages.push(await join(p, logs));
  await waitFor('room of 3', async () => {
    const n = await Promise.all(pages.map((page) => page.evaluate(() =>
      window.tutti?.session?.view.participants.filter((p) => p.link === 'connected' && p.format).length ?? 0)));
    return { ok: n.every((x) => x === 2), n };
  }, 45000);
  const page = pages[0];
  await page.getByTestId('stats-toggle').click();
  await page.getByTestId('stats-table').waitFor();
  await page.waitForTimeout(5000);
  const rows = await page.locator('[data-testid="stats-row"]').evaluateAll((trs) =>
    trs.map((tr) => [...tr.querySelectorAll('th,td')].map((c) => c.textContent.trim())));
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

  const json = JSON.parse(Buffer.from((await download(page, page.getByTestId('stats-export-json'))).bytes).toString('utf8'));
  assert.equal(json.format, 'tutti-stats');
  assert.equal(json.room, ROOM);
  assert.deepEqual(json.peers.map((p) => p.name).sort(), ['Bo', 'Cy']);
  for (const p of json.peers) {
    assert.ok(p.samples.length >= 5, `${p.name}: ${p.samples.length} samples`);
    const last = p.samples.at(-1);
    assert.ok(last.received > 1000 && last.bufferMs > 0, JSON.stringify(last));
  }
  const csv = parseCsv(Buffer.from((await download(page, page.getByTestId('stats-export-csv'))).bytes).toString('utf8'));
  const header = csv[0];
  assert.equal(header[0], 'record');
  const series = csv.filter((r) => r[0] === 'series');
  // The CSV was exported after the JSON: it has at least the JSON's samples of each peer.
  for (const p of json.peers) {
    const mine = series.filter((r) => r[header.indexOf('peer')] === p.peer);
    assert.ok(mine.length >= p.samples.length, `${p.name}: ${mine.length} CSV rows, ${p.samples.length} JSON samples`);
    assert.equal(mine[0][header.indexOf('name')], p.name);
  }
  assert.ok(csv.every((r) => r.length === header.length), 'every CSV row has every column');
  assert.deepEqual(logs, []);
});
