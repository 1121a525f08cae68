// Five pages through the hub in forward mode, against the same five pages as a mesh: the real
// server binary and its hub, headless Chromium pages with real data channels on loopback and the
// real engine worklet, each page's microphone a tone of its own.
//
// A mesh of five on this machine's two cores sends every block four times from every page and
// receives four messages per block; through the hub in forward mode a page sends each block once
// and receives one bundle per block holding the four others. The test runs the room
// through the hub for SOAK_SECONDS, then as a mesh for MESH_SECONDS, and prints, for both, the
// underruns, the packets received per peer and the CPU the browser's processes used per page
// (Chromium's own processes under this test, over the window, divided by the pages).
//
// Checks: through the hub every page receives at least MIN_DELIVERY of each other page's blocks
// over the soak, and plays without underruns. The pages alone keep this 2-core machine 80-90 %
// busy through the hub (100 % as a mesh), and a page's own thread then stalls 50-110 ms now and
// then (measured 2026-11-27: every packet delivered, 0-6 underruns per page in 60 s, beside
// 13-2,900 per page in 20 s as a mesh; 0-9 per page through the hub with another tenant loading
// the machine). Some hours the same machine runs at half speed with nothing to show for it in
// /proc (measured the same day, minutes apart: the mesh's underruns per second doubled, the hub
// had 400 per page in 60 s, and the pages drained their channels too slowly for the hub to hand
// them every bundle: 96-99 % delivered, the rest refused as channel_full and counted). The mesh
// measured in the same run says how starved the machine was, so:
// - no underrun and MIN_DELIVERY from everyone: passed;
// - fewer than MAX_UNDERRUNS_PER_PAGE_MINUTE on every page and MIN_DELIVERY: printed with the
//   figures and reported as skipped, never as passed;
// - more, or less delivered: a failure, unless the same run's mesh had at least MESH_STARVED
//   times the hub's underruns per second (a machine too starved to judge on) and every page
//   still received MIN_DELIVERY_STARVED; then printed and skipped as well. A hub that stops
//   carrying the room does no better than the mesh, and fails.
// A busy minute comes and goes on this shared machine (CI on 2026-11-28: 121 underruns through
// the hub, at most 31 on a page, with every block delivered, while the same run's mesh had one of
// its best 20 s), so a failed hub window is measured once more and the hub judged on the second;
// both are printed, with the share of the machine the host took (steal) in each.
// TUTTI_ROOM_STRICT=1 fails any underrun.
//
// A soak, so not part of `npm test` (whose time is bounded): `npm run soak` builds what is stale
// (dist/ and the server) and runs it, about 2-3 minutes.
import assert from 'node:assert/strict';
import { cpus } from 'node:os';
import { test } from 'node:test';
import { counterDelta, pageCounters } from '../kit/counters.mjs';
import {
  browserCpuSeconds,
  browserThreadCpuSeconds,
  busyPct,
  cpuTimes,
  stealPct,
  threadShares,
} from '../kit/cpu.mjs';
import {
  ROOM_FLAGS,
  joinRoom,
  serverAndBrowser,
  waitFor,
  waitForHub,
  waitForRoomOf,
} from '../kit/harness.mjs';

const TONES = [220, 330, 440, 550, 660];
const ROOM = 'e2e-hub-soak';
const WARMUP_MS = 8000;
const MESH_SECONDS = Number(process.env.TUTTI_MESH_SECONDS ?? 20);
const SOAK_SECONDS = Number(process.env.TUTTI_HUB_SOAK_SECONDS ?? 60);
/** Blocks per second of a 128-frame stream at 48 kHz. */
const BLOCKS_PER_S = 48000 / 128;
/** Share of each peer's blocks a page must receive through the hub over the soak. */
const MIN_DELIVERY = 0.99;
/** Through the hub, more underruns than this on any page, per minute of soak, fail the test
 * (unless the mesh shows a starved machine, below). */
const MAX_UNDERRUNS_PER_PAGE_MINUTE = 30;
/** The mesh's underruns per second against the hub's, in the same run, from which the machine
 * counts as too starved to judge the hub on (the hub did that much better than the mesh). */
const MESH_STARVED = 10;
/** Share of each peer's blocks a page must still receive through the hub on a starved machine. */
const MIN_DELIVERY_STARVED = 0.9;
const STRICT = process.env.TUTTI_ROOM_STRICT === '1';

const h = serverAndBrowser(ROOM_FLAGS);
/** @type {string[]} */
const logs = [];

/**
 * Runs the room for `seconds` and returns its figures: underruns and packets received per page
 * and peer, the browser's CPU per page (% of one core) and the machine's busy share.
 * @param {import('playwright-core').Page[]} pages
 */
async function window_(pages, seconds) {
  const before = await Promise.all(pages.map(pageCounters));
  const cpu0 = cpuTimes();
  const browser0 = browserCpuSeconds();
  const threads0 = browserThreadCpuSeconds();
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const elapsed = (Date.now() - t0) / 1000;
  const browserS = browserCpuSeconds() - browser0;
  const threads = threadShares(threads0, browserThreadCpuSeconds(), elapsed, pages.length);
  const cpu1 = cpuTimes();
  const busy = busyPct(cpu0, cpu1);
  const after = await Promise.all(pages.map(pageCounters));
  const perPage = after.map((a, i) => counterDelta(before[i], a));
  return {
    elapsed,
    busy,
    steal: stealPct(cpu0, cpu1),
    cpuPerPagePct: (100 * browserS) / elapsed / pages.length,
    threads,
    underruns: perPage.reduce((n, p) => n + p.underruns, 0),
    perPage,
  };
}

/** One line per page: underruns, then per peer the packets received, buffer and longest gap. */
function describe(label, w) {
  const lines = w.perPage.map(
    (p, i) =>
      `  page ${i}: underruns ${p.underruns}, quanta ${p.quanta}; ` +
      p.peers
        .map(
          (q) =>
            `${q.peer.slice(0, 6)} ${q.received} pkts, buf ${q.bufferedMs.toFixed(1)} ms, gap max ${q.gapMaxMs.toFixed(0)} ms`,
        )
        .join('; '),
  );
  const threads = w.threads.map(([name, pct]) => `${name} ${pct.toFixed(1)}`).join(', ');
  return `${label}: ${w.elapsed.toFixed(0)} s, underruns ${w.underruns}, browser CPU ${w.cpuPerPagePct.toFixed(1)} % of a core per page (by thread: ${threads}), machine ${w.busy.toFixed(0)} % busy (${w.steal.toFixed(1)} % steal)\n${lines.join('\n')}`;
}

/**
 * Judges a hub window against the same run's mesh: `{}` when it passed, `{ detail }` when it is
 * printed and skipped, `{ detail, fail }` when it failed (see the top of the file).
 */
function judge(hub, mesh, pageCount) {
  const expected = BLOCKS_PER_S * hub.elapsed;
  const short = [];
  hub.perPage.forEach((p, i) => {
    assert.equal(p.peers.length, pageCount - 1, `page ${i} has every other page as a peer`);
    for (const q of p.peers) {
      if (q.received < MIN_DELIVERY * expected) {
        short.push({
          line: `page ${i} received ${q.received} of about ${expected.toFixed(0)} blocks from ${q.peer.slice(0, 6)}`,
          share: q.received / expected,
        });
      }
    }
  });
  if (hub.underruns === 0 && short.length === 0) return {};
  const rate = (w) => w.underruns / w.elapsed;
  const starved = hub.underruns > 0 && rate(mesh) >= MESH_STARVED * rate(hub);
  const bound = (MAX_UNDERRUNS_PER_PAGE_MINUTE * hub.elapsed) / 60;
  const worst = Math.max(...hub.perPage.map((p) => p.underruns));
  const detail =
    `${hub.underruns} underruns through the hub in ${hub.elapsed.toFixed(0)} s (at most ${worst} on a page, ` +
    `bound ${bound.toFixed(0)}), ${mesh.underruns} as a mesh in ${mesh.elapsed.toFixed(0)} s ` +
    `(${(rate(mesh) / Math.max(rate(hub), 1e-9)).toFixed(0)} times the hub's rate), the machine ${hub.busy.toFixed(0)} % busy ` +
    `(${hub.steal.toFixed(1)} % stolen by the host, ${cpus().length} cores)` +
    `${short.length ? `; short of ${MIN_DELIVERY * 100} % delivered: ${short.map((x) => x.line).join(', ')}` : ''}`;
  const tooShort = short.some((x) => x.share < (starved ? MIN_DELIVERY_STARVED : MIN_DELIVERY));
  if (STRICT || tooShort || (worst > bound && !starved)) {
    return { detail, fail: `${detail}\n${describe('hub forward', hub)}` };
  }
  return { detail };
}

test(
  `five pages through the hub in forward mode: no underruns over ${SOAK_SECONDS} s, CPU per page beside the mesh's`,
  { timeout: 150_000 + (MESH_SECONDS + 2 * SOAK_SECONDS) * 1000 + 3 * WARMUP_MS },
  async (t) => {
    /** @type {import('playwright-core').Page[]} */
    const pages = [];
    try {
      // The owner puts the room on the hub before the others come, so they join it there (a
      // five-page mesh saturates this machine, and a switch made then is slow to connect).
      pages.push(await joinRoom(h, ROOM, { name: 'Soak 0', tone: TONES[0] }, logs));
      await waitFor(
        'the owner in the room',
        async () => ({ ok: await pages[0].evaluate(() => window.tutti.session.view.access.isOwner) }),
        20000,
      );
      await pages[0].evaluate(() => window.tutti.session.setTopology('forward'));
      await waitForHub(pages, 'forward');
      for (let i = 1; i < TONES.length; i++) {
        pages.push(await joinRoom(h, ROOM, { name: `Soak ${i}`, tone: TONES[i] }, logs));
      }
      await waitForHub(pages, 'forward');
      await waitForRoomOf(pages);
      await new Promise((r) => setTimeout(r, WARMUP_MS));
      const hub = await window_(pages, SOAK_SECONDS);
      console.log(describe('hub forward', hub));

      // The same room as a mesh, for the baseline.
      await pages[0].evaluate(() => window.tutti.session.setTopology('mesh'));
      await waitForRoomOf(pages);
      await new Promise((r) => setTimeout(r, WARMUP_MS));
      const mesh = await window_(pages, MESH_SECONDS);
      console.log(describe('mesh', mesh));
      const hubLines = h.server.logs.filter((l) => l.includes('hub worker'));
      if (hubLines.length) console.log(`the hub's reports:\n${hubLines.join('\n')}`);
      console.log(
        JSON.stringify({
          hub_soak: {
            pages: pages.length,
            mesh: {
              seconds: MESH_SECONDS,
              underruns: mesh.underruns,
              cpu_pct_per_page: +mesh.cpuPerPagePct.toFixed(1),
              busy_pct: +mesh.busy.toFixed(0),
            },
            forward: {
              seconds: SOAK_SECONDS,
              underruns: hub.underruns,
              cpu_pct_per_page: +hub.cpuPerPagePct.toFixed(1),
              busy_pct: +hub.busy.toFixed(0),
            },
          },
        }),
      );

      // The judgement (see the top of the file), with a second hub window when the first fails.
      let verdict = judge(hub, mesh, pages.length);
      if (verdict.fail && !STRICT) {
        console.log(`the first hub window failed (${verdict.detail}); the hub is measured once more`);
        await pages[0].evaluate(() => window.tutti.session.setTopology('forward'));
        await waitForHub(pages, 'forward');
        await waitForRoomOf(pages);
        await new Promise((r) => setTimeout(r, WARMUP_MS));
        const again = await window_(pages, SOAK_SECONDS);
        console.log(describe('hub forward, second window', again));
        verdict = judge(again, mesh, pages.length);
      }
      if (verdict.fail) assert.fail(verdict.fail);
      if (verdict.detail) t.skip(`${verdict.detail}: figures printed above`);
    } catch (e) {
      console.log(logs.slice(-40).join('\n'));
      throw e;
    }
  },
);
