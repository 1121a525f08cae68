// `npm run loadgen:mesh`: how many players ONE browser page carries in a mesh, over real data
// channels, with zero underruns, and what its engine and its packet pump cost.
//
// The real server on loopback, one headless Chromium page of the built app in a room (on a
// sound server with 128-frame callbacks by default, as a musician's machine runs), and, for each
// step of a ramp, N emulated mesh peers (bench/loadgen's `tutti-mesh-peers`: str0m peers that
// speak the app's mesh protocol, each linked to the page by a peer connection of its own, each
// sending its tone, one PCM16 mono packet per 128-frame block, and answering the page's clock
// pings). The peers cost little, so the page is what the machine spends its time on.
//
// Per step, after every peer is linked and a warm-up: over a window of --seconds (60 by default)
// the page's underruns (its engine's counters), the blocks it received from each peer, and the
// CPU its browser threads used, by thread: the engine's share is the audio worklet thread
// (Chromium's "Realtime AudioWorklet thread"), the pump's share the dedicated worker that moves
// packets between the data channels and the engine ("DedicatedWorker thread"), beside
// Chromium's own IPC and WebRTC network threads. The ramp goes on past the first underruns and
// stops at more than one per second, or when a peer's blocks fall short of 99.9 %. The answer
// is the largest N with zero underruns and every peer's blocks received (≥ 99.9 %).
//
// Prints a line per step on stderr and, as its last stdout line, one JSON object:
//   {"mesh_page":{"backend":"pulse-128","seconds":60,"rows":[{"peers":N,"underruns":u,
//    "received_pct_min":r,"cpu_pct":{"page":p,"engine":e,"pump":q,"io":i,"webrtc":w},...}],
//    "max_players_zero_underruns":N,"max_players_in_time":M,"machine":{...}}}
// (in time: zero underruns with the page's jitter buffer at most IN_TIME_BUFFER_MS deep)
// and writes it to bench/results/mesh-page.json.
//
// Options: --peers 2,4,8,... (the ramp)  --seconds S (each window)  --backend pulse-128|pulse-256|fake
//          --no-build
// Bounded: each step at most link time (60 s) + warm-up + window + 30 s; loopback only; it
// stops the server, the browser and the peers it started, by pid.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { join } from 'node:path';
import { build } from '../scripts/build.mjs';
import { ROOT } from '../scripts/lib/run.mjs';
import { isAudioBackend, launchChromium } from '../tests/kit/chromium.mjs';
import { counterDelta, pageCounters } from '../tests/kit/counters.mjs';
import { browserThreadCpuSeconds, busyPct, cpuTimes, stealPct, threadShares } from '../tests/kit/cpu.mjs';
import { ROOM_FLAGS, toneContext, waitFor } from '../tests/kit/harness.mjs';
import { buildMeshPeers, startMeshPeers } from '../tests/kit/mesh-peers.mjs';
import { startServer } from '../tests/kit/server.mjs';
import { DIST } from '../tests/kit/browser.mjs';

const argv = process.argv.slice(2);
/** @param {string} name @param {string} fallback */
function option(name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
}
const STEPS = option('peers', '2,4,6,8,12,16,24,32').split(',').map(Number);
const SECONDS = Number(option('seconds', '60'));
const BACKEND = /** @type {import('../tests/kit/chromium.mjs').AudioBackend} */ (
  option('backend', 'pulse-128')
);
const WARMUP_S = 8;
const LINK_TIMEOUT_S = 60;
/** Blocks per second of a 128-frame stream at 48 kHz. */
const BLOCKS_PER_S = 48000 / 128;
/** Share of each peer's blocks the page must receive for a step to count as carried. */
const MIN_RECEIVED = 0.999;
/** The ramp goes on past a few underruns (the curve says more than its first one) and stops
 * at more than this many per second, or at a peer's blocks short of MIN_RECEIVED. */
const STOP_UNDERRUNS_PER_S = 1;
/** A step is in time to play together when, beside zero underruns, the page's jitter buffer
 * stayed this shallow: it is one part of the one-way latency, which must stay under 25-30 ms
 * with the devices and the network besides. */
const IN_TIME_BUFFER_MS = 25;
const ROOM = 'mesh-page-bench';

const log = (/** @type {string} */ s) => process.stderr.write(`${s}\n`);

if (!STEPS.every((n) => Number.isInteger(n) && n >= 1 && n <= 128) || STEPS.length === 0) {
  log(`--peers takes a comma-separated ramp of counts from 1 to 128, not ${option('peers', '')}`);
  process.exit(2);
}
if (!(SECONDS >= 5 && SECONDS <= 600)) {
  log('--seconds takes 5 to 600');
  process.exit(2);
}
if (!isAudioBackend(BACKEND)) {
  log(`--backend takes pulse-128, pulse-256 or fake, not ${BACKEND}`);
  process.exit(2);
}

/** The thread names of Chromium's that make up each share of a page's CPU. */
const SHARES = {
  engine: /^Realtime AudioW|^AudioWorklet/,
  pump: /^DedicatedWorker/,
  io: /^Chrome_ChildIOT|^Chrome_IOThread/,
  webrtc: /^WebRTC_|^webrtc/,
};

/** @param {import('playwright-core').Page} page @param {number} n */
async function step(page, port, n) {
  const peers = startMeshPeers({
    port,
    room: ROOM,
    peers: n,
    seconds: WARMUP_S + SECONDS + 2,
    linkTimeoutS: LINK_TIMEOUT_S,
  });
  try {
    await peers.playing;
    await waitFor(
      `the page hearing ${n} peers`,
      async () => {
        const heard = await page.evaluate(
          () =>
            window.tutti?.session?.view.participants.filter((p) => p.link === 'connected' && p.format)
              .length ?? 0,
        );
        return { ok: heard >= n, heard };
      },
      30000,
    );
    await new Promise((r) => setTimeout(r, WARMUP_S * 1000));
    // The CPU window and the counters' window each from their own reads: reading every
    // thread of the browser takes a while on a busy machine.
    const cpu0 = cpuTimes();
    const threads0 = browserThreadCpuSeconds();
    const t0 = Date.now();
    const before = await pageCounters(page);
    const c0 = Date.now();
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const after = await pageCounters(page);
    const c1 = Date.now();
    const threads1 = browserThreadCpuSeconds();
    const cpu1 = cpuTimes();
    const elapsed = (Date.now() - t0) / 1000;
    const delta = counterDelta(before, after);
    const byThread = threadShares(threads0, threads1, elapsed, 1, 1000);
    const share = (/** @type {RegExp} */ re) =>
      +byThread
        .filter(([name]) => re.test(name))
        .reduce((a, [, pct]) => a + pct, 0)
        .toFixed(2);
    const page_ = +byThread.reduce((a, [, pct]) => a + pct, 0).toFixed(1);
    const expected = (BLOCKS_PER_S * (c1 - c0)) / 1000;
    // The emulated peers' ids begin with ffffffff (bench/loadgen/src/mesh.rs).
    const fromPeers = delta.peers.filter((p) => p.peer.startsWith('ffffffff'));
    const receivedMin = fromPeers.length ? Math.min(...fromPeers.map((p) => p.received)) / expected : 0;
    const summary = await Promise.race([
      peers.done,
      new Promise((_, reject) => setTimeout(() => reject(new Error('the peers did not end')), 30000)),
    ]);
    return {
      peers: n,
      linked: fromPeers.length,
      seconds: +elapsed.toFixed(1),
      underruns: delta.underruns,
      late_underruns: delta.peers.reduce((a, p) => a + p.lateUnderruns, 0),
      received_pct_min: +(100 * receivedMin).toFixed(3),
      buffer_ms_max: +Math.max(0, ...fromPeers.map((p) => p.bufferedMs)).toFixed(1),
      gap_max_ms: +Math.max(0, ...fromPeers.map((p) => p.gapMaxMs)).toFixed(0),
      cpu_pct: {
        page: page_,
        engine: share(SHARES.engine),
        pump: share(SHARES.pump),
        io: share(SHARES.io),
        webrtc: share(SHARES.webrtc),
      },
      top_threads: byThread.slice(0, 6).map(([name, pct]) => [name, +pct.toFixed(1)]),
      busy_pct: +busyPct(cpu0, cpu1).toFixed(0),
      steal_pct: +stealPct(cpu0, cpu1).toFixed(1),
      peers_sent: summary.sent,
      peers_refused: summary.refused,
      peers_skipped: summary.skipped,
      peers_received_from_page: summary.received,
    };
  } finally {
    peers.stop();
  }
}

async function main() {
  if (!argv.includes('--no-build')) {
    const { ok } = await build();
    if (!ok) throw new Error('the build failed, see above');
    await buildMeshPeers();
  }
  const server = await startServer({
    dist: DIST,
    args: ['--hub-auto', 'false', '--room-cap', '200'],
  });
  const browser = await launchChromium(ROOM_FLAGS, { backend: BACKEND, tones: [440] });
  /** @type {any[]} */
  const rows = [];
  try {
    const context = await toneContext(browser, { freq: 440, amplitude: 0.1 });
    const page = await context.newPage();
    await page.goto(`${server.url}r/${ROOM}?ice=loopback`);
    await page.getByTestId('display-name').fill('Measured page');
    await page.getByTestId('join').click();
    await waitFor('the page in the room', async () => ({
      ok: await page.evaluate(() => Boolean(window.tutti?.session?.view.access.isOwner)),
    }));
    for (const n of STEPS) {
      const row = await step(page, server.port, n);
      rows.push(row);
      log(
        `${String(n).padStart(3)} peers: underruns ${row.underruns}, received ≥ ${row.received_pct_min} %, ` +
          `page ${row.cpu_pct.page} % of a core (engine ${row.cpu_pct.engine}, pump ${row.cpu_pct.pump}, ` +
          `io ${row.cpu_pct.io}, webrtc ${row.cpu_pct.webrtc}), machine ${row.busy_pct} % busy`,
      );
      if (row.underruns > STOP_UNDERRUNS_PER_S * row.seconds || row.received_pct_min < 100 * MIN_RECEIVED)
        break;
      // The page lets the previous peers go before the next step joins.
      await waitFor(
        'the previous peers gone',
        async () => ({
          ok: (await page.evaluate(() => window.tutti.session.view.participants.length)) <= 1,
        }),
        30000,
      );
    }
  } finally {
    await browser.close().catch(() => {});
    await server.stop().catch(() => {});
  }
  const carried = rows.filter((r) => r.underruns === 0 && r.received_pct_min >= 100 * MIN_RECEIVED);
  const result = {
    mesh_page: {
      backend: BACKEND,
      seconds: SECONDS,
      rows,
      max_players_zero_underruns: carried.length ? Math.max(...carried.map((r) => r.peers)) : 0,
      in_time_buffer_ms: IN_TIME_BUFFER_MS,
      max_players_in_time: Math.max(
        0,
        ...carried.filter((r) => r.buffer_ms_max <= IN_TIME_BUFFER_MS).map((r) => r.peers),
      ),
      machine: { cpus: cpus().length, model: cpus()[0]?.model, kernel: release(), loadavg: loadavg() },
      date: new Date().toISOString(),
    },
  };
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  writeFileSync(join(ROOT, 'bench', 'results', 'mesh-page.json'), `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (e) => {
    log(`mesh-page: ${e?.stack ?? e}`);
    process.exit(1);
  },
);
