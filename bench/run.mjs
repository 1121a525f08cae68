// `npm run bench`: the engine benchmark, then the net benchmark, then the latency benchmark, headless.
//
// Installs what is missing (scripts/setup.sh), builds what is stale (scripts/build.mjs), serves
// dist/ with the cross-origin isolation headers, opens /bench.html?auto=1 in headless Chromium
// and waits for the result (bounded). Prints a table, writes bench/results/latest.json and ends
// stdout with ONE line of JSON:
//   {"engine":[{"peers":N,"wasm_ns_per_peer_quantum":x,"js_ns_per_peer_quantum":y,"underruns":u,...},...],
//    "codec":[{"codec":"pcm16","peers":16,"wasm_ns_per_peer_quantum":x,"over_pcm16":1,...},
//             {"codec":"opus-128",...},{"codec":"opus-64",...}],
//    "wasm_gzip_bytes":b,"wasm_gzip_parts":{"engine":e,"opus":o,"worklet_js":w},
//    "max_peers_under_5pct":N,"net":[{"remote_peers":4,"us_per_packet":x,"bundled_us_per_block":b,...},...],
//    "latency":{"median_ms":m,"p95_ms":p,"underruns":u,"seconds":s,"backend":"pulse-128","fixed8":{...},
//               "fake_device":{"median_ms":m,...,"fixed8":{...}},...},"machine":{...},"date":"..."}
// The net part (bench/runners/net.mjs) measures the net worker's CPU time per received packet
// on real loopback data channels, and per received bundle when the players come through one hub
// link. The latency part (bench/runners/latency.mjs) measures the
// one-way latency the app adds between two pages in a room of the real server on loopback (the
// engine's mouth-to-ear stage minus the devices' latency), with the adaptive jitter buffer and,
// for comparison, a fixed 8-packet one, on a sound server with 128-frame callbacks (the main
// figures) and on headless Chromium's fake audio device beside it. Method and caveats:
// bench/README.md.
//
// The jitter part (bench/native, `jitter-oracle`) plays seeded network traces through the core's
// jitter buffer natively and prints, per trace, the adaptive target against the oracle (the
// smallest fixed depth that plays every packet that arrived) under "jitter". The hub part
// (server/examples/hub_load.rs) runs the real server's hub with 8 and 32 emulated WebRTC
// clients in one room, in forward and in mix mode, and prints under "hub" the hub threads' CPU
// per client-second and the share of blocks delivered.
// The engine part also measures, at 16 peers, the WASM engine's cost per peer-quantum when the
// peers send stereo Opus (240-sample frames at 128 and at 64 kbit/s, decoded by libopus in the
// worklet) beside PCM16 in the same run ("codec"), and the gzip -9 size of what the engine
// worklet loads from dist/assets: the engine's and the codec's WebAssembly and the worklet's
// JavaScript ("wasm_gzip_bytes", the sum; goal 400 kB = 400 000 bytes).
// Options: --quick (3 peer counts, 1 repetition, quarter work: a smoke run of ~20 s)
//          --peers 1,8,64   --reps N   --work F   --timeout SECONDS (default 300)
//          --loss P (default 0.01)   --jitter Q (largest delay in quanta, default 3)
//          --no-build (use dist/ as it is)
//          --only engine | --only net | --only latency | --only jitter | --only hub (one part;
//            writes bench/results/<part>.json)
//          --hub-clients 8,32   --hub-seconds S (each measured window, default 10)
//          --net-peers 4,15   --net-seconds S (each measured window, default 5)
//          --latency-seconds S (adaptive window, default 60)
//          --latency-fixed-seconds S (fixed 8-packet window, default 20; 0 skips it)
//          --latency-backends pulse-128,fake (audio backends, the first gives the main figures;
//            pulse-128, pulse-256 or fake)
//          --latency-impaired-seconds S (the adaptive room through 10 ± 3 ms and 2 % loss, on
//            pulse-128, in a network namespace of its own; default 60; 0 skips it; needs root)
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { AUDIO_BACKENDS, isAudioBackend, launchChromium } from '../tests/kit/chromium.mjs';
import { printLatencyTable, runLatencyBench } from './runners/latency.mjs';
import { printNetTable, runNetBench } from './runners/net.mjs';
import { build } from '../scripts/build.mjs';
import { ROOT, run } from '../scripts/lib/run.mjs';
import { serveStatic } from '../tests/kit/serve.mjs';

const QUANTUM_NS = (128 / 48000) * 1e9;
const BUDGET_NS = 0.05 * QUANTUM_NS;
/** The goal for what the engine worklet loads, gzipped: 400 kB, in SI kilobytes. */
const GZIP_GOAL_BYTES = 400_000;
/**
 * What the engine worklet loads, as vite names it in dist/assets (name-hash.ext): the engine's
 * WebAssembly, the codec module (libopus) and the worklet's own JavaScript bundle.
 */
const WORKLET_PARTS = {
  engine: /^tutti_wasm_bg-[\w-]+\.wasm$/,
  opus: /^tutti_opus-[\w-]+\.wasm$/,
  worklet_js: /^engine-worklet-[\w-]+\.js$/,
};

function option(name) {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0) return process.argv[i + 1];
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

const flag = (name) => process.argv.includes(`--${name}`);
const log = (...a) => console.error('bench:', ...a);

const quick = flag('quick');
const query = new URLSearchParams({ auto: '1' });
const peers = option('peers') ?? (quick ? '1,16,64' : undefined);
const reps = option('reps') ?? (quick ? '1' : undefined);
const work = option('work') ?? (quick ? '0.25' : undefined);
if (peers) query.set('peers', peers);
if (reps) query.set('reps', reps);
if (work) query.set('work', work);
for (const name of ['loss', 'jitter']) {
  const v = option(name);
  if (v !== undefined) query.set(name, v);
}
const timeoutS = Number(option('timeout') ?? 300);
const only = option('only');
const PARTS = ['engine', 'net', 'latency', 'jitter', 'hub'];
if (only !== undefined && !PARTS.includes(only)) {
  log(`--only takes "engine", "net", "latency", "jitter" or "hub", not ${only}`);
  process.exit(2);
}
const runs = (part) => only === undefined || only === part;
const netPeers = (option('net-peers') ?? '4,15').split(',').map(Number);
if (!netPeers.every((n) => Number.isInteger(n) && n >= 1 && n <= 16)) {
  log('--net-peers takes player counts in 1..16, e.g. 4,15');
  process.exit(2);
}
const netSeconds = Number(option('net-seconds') ?? 5);
const hubClients = option('hub-clients') ?? '8,32';
const hubSeconds = Number(option('hub-seconds') ?? 10);
if (!/^\d+(,\d+)*$/.test(hubClients) || !(hubSeconds >= 1)) {
  log('--hub-clients takes client counts (e.g. 8,32), --hub-seconds a number of seconds >= 1');
  process.exit(2);
}
const latencySeconds = Number(option('latency-seconds') ?? 60);
const latencyFixedSeconds = Number(option('latency-fixed-seconds') ?? 20);
const latencyImpairedSeconds = Number(option('latency-impaired-seconds') ?? 60);
if (
  !(latencySeconds >= 1) ||
  !(latencyFixedSeconds >= 0) ||
  !(latencyImpairedSeconds >= 0 && latencyImpairedSeconds <= 600)
) {
  log(
    '--latency-seconds takes a number of seconds >= 1, --latency-fixed-seconds and --latency-impaired-seconds 0..600 (0 skips)',
  );
  process.exit(2);
}
const latencyNames = (option('latency-backends') ?? 'pulse-128,fake').split(',');
const latencyBackends = latencyNames.filter(isAudioBackend);
if (
  latencyBackends.length === 0 ||
  latencyBackends.length !== latencyNames.length ||
  new Set(latencyBackends).size !== latencyBackends.length
) {
  log(
    `--latency-backends takes distinct backends among ${AUDIO_BACKENDS.join(', ')}, the first giving the main figures`,
  );
  process.exit(2);
}

if (!flag('no-build')) {
  const setup = await run('bash', [join(ROOT, 'scripts', 'setup.sh')]);
  if (setup.code !== 0) {
    log('setup failed, see above');
    process.exit(1);
  }
  const { ok } = await build();
  if (!ok) {
    log('the build failed, see above');
    process.exit(1);
  }
}

// The engine and net parts load dist/ from this static server; the latency part starts the
// real server (it needs the signaling).
const server =
  runs('engine') || runs('net') ? await serveStatic({ root: join(ROOT, 'dist'), port: 0 }) : null;
/** @type {import('playwright-core').Browser | undefined} */
let browser;
/** @type {string | null | undefined} */
let browserVersion;
let exitCode = 1;
try {
  const started = Date.now();
  /**
   * What bench/results/*.json holds: the engine page's result (when the engine part ran), the
   * other parts beside it, then the machine and the date.
   * @type {Partial<import('./web/measure.ts').BenchResult> & {
   *   net?: Awaited<ReturnType<typeof runNetBench>>['entries'],
   *   jitter?: unknown,
   *   hub?: unknown,
   *   latency?: Awaited<ReturnType<typeof runLatencyBench>>['entry'],
   *   wasm_gzip_bytes?: number,
   *   wasm_gzip_parts?: Record<string, number>,
   *   wasm_gzip_files?: Record<string, string>,
   * }}
   */
  const result = runs('engine') ? { ...(await engineBench()), ...workletGzip() } : { machine: {} };
  if (runs('net')) {
    // The net part is bounded by its own waits; this is the backstop.
    const watchdog = setTimeout(() => {
      log(`FAILED: the net benchmark did not end within ${timeoutS} s`);
      process.exit(1);
    }, timeoutS * 1000);
    if (!server) throw new Error('the net benchmark runs without the static server');
    const net = await runNetBench({ baseUrl: server.url, log, peers: netPeers, windowS: netSeconds });
    result.net = net.entries;
    browserVersion ??= net.browserVersion;
    clearTimeout(watchdog);
  }
  if (runs('jitter')) {
    // Native and seeded: the jitter buffer against its oracle on every trace (bench/native).
    result.jitter = await nativePart(
      'jitter',
      'the buffer against its oracle',
      '-p tutti-bench --bin jitter-oracle',
    );
  }
  if (runs('hub')) {
    // The real server's hub with emulated clients on loopback (server/examples/hub_load.rs).
    result.hub = await nativePart(
      'hub',
      'the hub with emulated clients',
      `-p tutti-server --example hub_load -- --clients ${hubClients} --seconds ${hubSeconds}`,
    );
  }
  if (runs('latency')) {
    // Its own waits are bounded (joining, hearing, the windows); this is the backstop.
    const limitS = Math.max(
      timeoutS,
      latencyBackends.length * (latencySeconds + latencyFixedSeconds + 120) +
        120 +
        (latencyImpairedSeconds > 0 ? latencyImpairedSeconds + 300 : 0),
    );
    const watchdog = setTimeout(() => {
      log(`FAILED: the latency benchmark did not end within ${limitS} s`);
      process.exit(1);
    }, limitS * 1000);
    const latency = await runLatencyBench({
      log,
      seconds: latencySeconds,
      fixedSeconds: latencyFixedSeconds,
      backends: latencyBackends,
      impairedSeconds: latencyImpairedSeconds,
    });
    result.latency = latency.entry;
    browserVersion ??= latency.browserVersion;
    clearTimeout(watchdog);
  }
  // The parts first, then the machine and the date (the engine page fills them in before the
  // other parts are added).
  const { machine: pageMachine, date: pageDate } = result;
  delete result.machine;
  delete result.date;
  result.machine = {
    ...pageMachine,
    browser: `Chromium ${browserVersion ?? 'unknown'} (headless)`,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memory_gib: Math.round(totalmem() / 2 ** 30),
    os: `${process.platform} ${release()}`,
    node: process.version,
    load_average_1m_at_end: Number(loadavg()[0].toFixed(2)),
    wall_seconds: Math.round((Date.now() - started) / 1000),
  };
  result.date = pageDate ?? new Date().toISOString();
  if (result.engine) printTable(result);
  if (result.net) printNetTable(result.net);
  if (result.latency) printLatencyTable(result.latency);
  if (!result.engine) {
    const m = result.machine;
    console.log(`machine: ${m.cpu}, ${m.cores} cores, ${m.browser}, load ${m.load_average_1m_at_end}`);
    console.log('');
  }
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  const json = JSON.stringify(result);
  const file = only === undefined ? 'latest.json' : `${only}.json`;
  writeFileSync(join(ROOT, 'bench', 'results', file), `${JSON.stringify(result, null, 2)}\n`);
  console.log(json);
  exitCode = 0;
} catch (err) {
  log(`FAILED: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  await browser?.close().catch(() => {});
  await server?.close().catch(() => {});
}
process.exit(exitCode);

/**
 * A native part: `cargo run --release -q ARGS` (words split on spaces), its figures from the
 * last line of JSON whose key is `key`; its other output goes to stderr. Exits on failure.
 * @param {string} key
 * @param {string} what
 * @param {string} argLine
 */
async function nativePart(key, what, argLine) {
  const args = argLine.split(' ');
  log(`${key}: ${what} (cargo run --release ${args.join(' ')})`);
  const r = await run('cargo', ['run', '--release', '-q', ...args], {
    timeoutMs: timeoutS * 1000,
    quiet: true,
  });
  const line = r.output.split('\n').find((l) => l.startsWith(`{"${key}":`));
  if (r.code !== 0 || !line) {
    log(`FAILED: the ${key} part exited ${r.code}`);
    process.stderr.write(r.output);
    process.exit(1);
  }
  process.stderr.write(
    r.output
      .split('\n')
      .filter((l) => !l.startsWith('{'))
      .join('\n'),
  );
  return JSON.parse(line)[key];
}

/** The engine benchmark: /bench.html?auto=1 until it is done (bounded by --timeout). */
async function engineBench() {
  browser = await launchChromium([
    '--autoplay-policy=no-user-gesture-required',
    // Keep the page's timers and the render thread at full speed while headless.
    '--disable-background-timer-throttling',
    '--disable-renderer-backgrounding',
    '--disable-backgrounding-occluded-windows',
  ]);
  browserVersion = browser.version();
  const page = await browser.newPage();
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') log(`page ${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => log(`page error: ${err.message}`));
  if (!server) throw new Error('the engine benchmark runs without the static server');
  const url = new URL(`bench.html?${query}`, server.url).href;
  log(`opening ${url} (time limit ${timeoutS} s)`);
  const started = Date.now();
  await page.goto(url);

  let lastPhase = '';
  const deadline = started + timeoutS * 1000;
  let state = '';
  while (Date.now() < deadline) {
    state = await page.evaluate(() => document.body.dataset.bench ?? '');
    if (state === 'done' || state === 'error') break;
    const phase = await page.evaluate(() => document.getElementById('phase')?.textContent ?? '');
    if (phase && phase !== lastPhase) {
      log(`${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s  ${phase}`);
      lastPhase = phase;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  if (state !== 'done') {
    const why =
      state === 'error'
        ? await page.evaluate(() => window.benchError ?? 'unknown error')
        : `no result within ${timeoutS} s`;
    throw new Error(why);
  }
  const result = await page.evaluate(() => window.benchResult);
  if (!result) throw new Error('the bench page said done but left no result');
  await browser.close();
  browser = undefined;
  return result;
}

/**
 * The gzip -9 size (node's zlib) of each file the engine worklet loads from dist/assets, and
 * their sum. Fails when a part is missing or ambiguous.
 */
function workletGzip() {
  const dir = join(ROOT, 'dist', 'assets');
  const files = readdirSync(dir);
  /** @type {Record<string, number>} */
  const parts = {};
  /** @type {Record<string, string>} */
  const names = {};
  for (const [part, pattern] of Object.entries(WORKLET_PARTS)) {
    const found = files.filter((f) => pattern.test(f));
    if (found.length !== 1) {
      throw new Error(`dist/assets: ${found.length} files match ${pattern} (the worklet's ${part})`);
    }
    names[part] = found[0];
    parts[part] = gzipSync(readFileSync(join(dir, found[0])), { level: 9 }).length;
  }
  const total = Object.values(parts).reduce((a, b) => a + b, 0);
  return { wasm_gzip_bytes: total, wasm_gzip_parts: parts, wasm_gzip_files: names };
}

/** The human-readable table, on stdout before the JSON line. */
function printTable(result) {
  const rows = result.engine;
  const head = ['peers', 'WASM ns/peer-q', 'JS ns/peer-q', 'JS/WASM', 'WASM % of quantum', 'underruns'];
  const body = rows.map((r) => [
    String(r.peers),
    r.wasm_ns_per_peer_quantum.toFixed(0),
    r.js_ns_per_peer_quantum.toFixed(0),
    `${r.js_over_wasm.toFixed(1)}x`,
    `${(r.wasm_quantum_fraction * 100).toFixed(2)}%`,
    String(r.underruns),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
  console.log('');
  console.log(line(head));
  for (const b of body) console.log(line(b));
  console.log('');
  console.log(
    `max peers under 5% of the quantum (${(BUDGET_NS / 1000).toFixed(0)} µs): ${result.max_peers_under_5pct}`,
  );
  // The team's targets, reported as measured.
  const at64 = rows.find((r) => r.peers === 64);
  const at256 = rows.find((r) => r.peers === 256);
  const verdict = (ok) => (ok ? 'met' : 'MISSED');
  if (at64) {
    console.log(
      `target: WASM <= 200 ns/peer-quantum at 64 peers: ${at64.wasm_ns_per_peer_quantum.toFixed(0)} ns, ${verdict(at64.wasm_ns_per_peer_quantum <= 200)}`,
    );
    console.log(
      `target: WASM >= 3x faster than JS at 64 peers: ${at64.js_over_wasm.toFixed(1)}x, ${verdict(at64.js_over_wasm >= 3)}`,
    );
  }
  if (at256) {
    const pct = at256.wasm_quantum_fraction * 100;
    console.log(`target: 256 peers within 5% of the quantum: ${pct.toFixed(2)}%, ${verdict(pct < 5)}`);
  }
  if (result.codec) printCodecTable(result.codec);
  if (result.wasm_gzip_bytes !== undefined) {
    const p = result.wasm_gzip_parts;
    const kb = (n) => `${(n / 1000).toFixed(1)} kB`;
    console.log(
      `worklet download, gzip -9: ${kb(result.wasm_gzip_bytes)} (engine wasm ${kb(p.engine)}, opus wasm ${kb(p.opus)}, worklet JS ${kb(p.worklet_js)})`,
    );
    console.log(
      `target: <= ${kb(GZIP_GOAL_BYTES)} gzipped: ${verdict(result.wasm_gzip_bytes <= GZIP_GOAL_BYTES)}`,
    );
  }
  const machine = result.machine;
  console.log(
    `machine: ${machine.cpu}, ${machine.cores} cores, ${machine.browser}, load ${machine.load_average_1m_at_end}`,
  );
  console.log('');
}

/**
 * The codec rows: the WASM engine at 16 peers per codec, beside PCM16.
 * @param {import('./web/measure.ts').CodecRow[]} rows
 */
function printCodecTable(rows) {
  const head = [
    'codec',
    'peers',
    'WASM ns/peer-q',
    'vs PCM16',
    'WASM % of quantum',
    'payload B',
    'underruns',
  ];
  const body = rows.map((r) => [
    r.codec,
    String(r.peers),
    r.wasm_ns_per_peer_quantum.toFixed(0),
    `${r.over_pcm16.toFixed(1)}x`,
    `${(r.wasm_quantum_fraction * 100).toFixed(2)}%`,
    r.payload_bytes.toFixed(0),
    String(r.underruns),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(line(head));
  for (const b of body) console.log(line(b));
  console.log('');
}
