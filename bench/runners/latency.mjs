// The latency benchmark (part of `npm run bench`): the one-way latency the app adds between two
// players, on loopback, with the adaptive jitter buffer and, side by side, a fixed 8-packet one.
//
// The scene is the real app: the server binary (target/release/tutti-server, as the browser tests
// start it) and two pages of one headless Chromium joined into a room over loopback WebRTC, each
// with a sine as its microphone (tests/kit/harness.mjs `joinRoom`). It runs once per
// audio backend (tests/kit/chromium.mjs): by default first on a private sound server with
// 128-frame callbacks (tests/kit/pulse.mjs; the microphones are its sine inputs), which gives
// the main figures, then on headless Chromium's fake device (10 ms callbacks of 3-4 quanta),
// whose figures go beside them as `fake_device`; then, as `impaired`, the adaptive room on the
// sound server through 10 ± 3 ms of delay and 2 % loss (bench/runners/latency-impaired.mjs, in a
// network namespace of its own, with tutti-impair: jitter-buffer wait against the buffer's
// oracle, lost against concealed, underruns beyond losses). Once each page hears
// the other and knows its clock offset (the engine's network stage has counts), and after a few
// seconds of settling, both pages restart their latency histograms (`session.resetLatency()`);
// after the measured window each page's stages for its peer are read (`session.latencyStages()`)
// together with its counters (`session.counters()`).
//
// Added one-way latency, per packet, per direction: the engine's one-way stage (transit =
// network + delivery + jitter-buffer wait of the packet, + the sender's block + our send queue),
// everything but the devices' own latency; mouth to ear (shown beside it) is that plus the
// devices' output and input latency the session told the engine. The cross-check sums
// the stages' medians instead: transit.p50 + block + sendQueue.p50 (a sum of medians is not the
// median of the sum; close when the stages are narrow). The overall figures are the worse
// direction's; underruns are both directions' together.
// Method and caveats: bench/README.md.
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { BACKEND_CALLBACK_FRAMES, launchChromium } from '../../tests/kit/chromium.mjs';
import { STAGE_SUMMARY_FIELDS } from '../../tests/kit/stages.mjs';
import { run } from '../../scripts/lib/run.mjs';
import { startServer } from '../../tests/kit/server.mjs';
import { joinRoom, ROOM_FLAGS, waitFor } from '../../tests/kit/harness.mjs';

export const LATENCY_CHROMIUM_ARGS = [
  ...ROOM_FLAGS,
  // Both pages are "tabs" of one headless browser: keep their timers and audio at full speed.
  '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows',
];

const PACKETS_PER_SECOND = 48000 / 128;
const PLAYERS = [
  { name: 'Ana', tone: 330 },
  { name: 'Bo', tone: 550 },
];
/** The fixed buffer compared with: JackTrip-WebRTC's default depth. */
export const FIXED_PACKETS = 8;
const CONNECT_TIMEOUT_MS = 45_000;
const HEAR_TIMEOUT_MS = 30_000;
/** The histogram block is published about once a second: a reset shows within this. */
const RESTART_TIMEOUT_MS = 5000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const round = (x, digits = 2) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);

/**
 * Runs the latency benchmark on each of `backends` (the first gives the main figures): a room
 * with the adaptive buffer for `seconds`, then (unless `fixedSeconds` is 0) a room with a fixed
 * 8-packet buffer for `fixedSeconds`. Starts and stops its own server, and per backend its own
 * browser (and sound server). Throws (with the pages' errors) when a room does not come up.
 * A last room on the first backend runs `impairedSeconds` (unless 0) over an impaired network.
 * @param {{ log: (...a: unknown[]) => void, seconds?: number, fixedSeconds?: number, settleS?: number,
 *           backends?: import('../../tests/kit/chromium.mjs').AudioBackend[], impairedSeconds?: number }} opts
 */
export async function runLatencyBench({
  log,
  seconds = 60,
  fixedSeconds = 20,
  settleS = 3,
  backends = ['pulse-128', 'fake'],
  impairedSeconds = 60,
}) {
  const server = await startServer();
  // A watchdog or an interrupt ends this process with process.exit(): take the server along.
  const killServer = () => server.kill();
  process.once('exit', killServer);
  let browserVersion = null;
  try {
    /** @type {Record<string, object>} */
    const byBackend = {};
    for (const backend of backends) {
      const run = await measureBackend({ server, backend, seconds, fixedSeconds, settleS, log });
      byBackend[backend] = run.entry;
      browserVersion ??= run.browserVersion;
    }
    const [main, ...others] = backends;
    const { median_ms, p95_ms, underruns, seconds: s, ...rest } = byBackend[main];
    const entry = { median_ms, p95_ms, underruns, seconds: s, backend: main, ...rest };
    // The fake device beside the main backend, with the same keys.
    for (const other of others)
      entry[other === 'fake' ? 'fake_device' : other.replace('-', '_')] = byBackend[other];
    if (impairedSeconds > 0) entry.impaired = await measureImpaired(impairedSeconds, log);
    return { entry, browserVersion };
  } finally {
    await server.stop().catch(() => {});
    process.off('exit', killServer);
  }
}

/**
 * The adaptive room through an impaired network (bench/runners/latency-impaired.mjs, a child
 * process in a network namespace of its own): its JSON entry, `{ skipped }` without root, or
 * `{ error }` when it failed (its progress and errors go to stderr as they come).
 * @param {number} seconds
 * @param {(...a: unknown[]) => void} log
 */
async function measureImpaired(seconds, log) {
  const script = fileURLToPath(new URL('./latency-impaired.mjs', import.meta.url));
  const r = await run(process.execPath, [script, '--seconds', String(seconds)], {
    timeoutMs: (seconds + 300) * 1000,
    quietStdout: true,
  });
  const line = r.output.split('\n').findLast((l) => l.startsWith('{'));
  try {
    if (r.code === 0 && line) return JSON.parse(line);
  } catch {
    // Not JSON: reported below as a missing line.
  }
  const error = `latency-impaired.mjs exited ${r.code}${r.timedOut ? ' (time limit)' : ''} without its JSON line`;
  log(`latency: impaired: ${error}`);
  return { error };
}

/** One backend: its browser, the adaptive room, then the fixed 8-packet room. */
async function measureBackend({ server, backend, seconds, fixedSeconds, settleS, log }) {
  let browser;
  try {
    browser = await launchChromium(LATENCY_CHROMIUM_ARGS, { backend, tones: PLAYERS.map((p) => p.tone) });
    const h = { server, browser };
    log(`latency: ${backend}: adaptive buffer, ${seconds} s measured`);
    const adaptive = await measureRoom(h, {
      room: `bench-latency-${backend}-adaptive`,
      audio: null,
      seconds,
      settleS,
      log,
    });
    let fixed = null;
    if (fixedSeconds > 0) {
      log(`latency: ${backend}: fixed ${FIXED_PACKETS}-packet buffer, ${fixedSeconds} s measured`);
      fixed = await measureRoom(h, {
        room: `bench-latency-${backend}-fixed`,
        audio: { buffer: { mode: 'fixed', packets: FIXED_PACKETS } },
        seconds: fixedSeconds,
        settleS,
        log,
      });
    }
    const entry = {
      median_ms: adaptive.median_ms,
      p95_ms: adaptive.p95_ms,
      underruns: adaptive.underruns,
      seconds: adaptive.seconds,
      callback_frames: BACKEND_CALLBACK_FRAMES[backend],
      overall: 'worse direction (median and p95 each the larger of the two); underruns summed over both',
      directions: adaptive.directions,
      load_average_1m: adaptive.load_average_1m,
    };
    if (fixed) {
      entry.fixed8 = {
        median_ms: fixed.median_ms,
        p95_ms: fixed.p95_ms,
        underruns: fixed.underruns,
        seconds: fixed.seconds,
        directions: fixed.directions,
        load_average_1m: fixed.load_average_1m,
      };
      entry.fixed8_over_adaptive_median =
        adaptive.median_ms > 0 ? round(fixed.median_ms / adaptive.median_ms, 2) : null;
    }
    return { entry, browserVersion: browser.version() };
  } finally {
    await browser?.close().catch(() => {});
  }
}

/**
 * One room of two pages: join, wait until each hears the other with a known clock offset,
 * settle, reset the histograms, measure for `seconds`, read both pages.
 */
export async function measureRoom(h, { room, audio, seconds, settleS, log }) {
  /** @type {string[]} */
  const logs = [];
  const pages = [];
  const fail = (why) => {
    const tail = [...logs, ...h.server.logs.filter((l) => /error|warn|panic/i.test(l)).slice(-10)];
    return new Error(`${room}: ${why}${tail.length ? `\n${tail.join('\n')}` : ''}`);
  };
  try {
    for (const p of PLAYERS) pages.push(await joinRoom(h, room, p, logs, { audio }));
    const started = Date.now();
    try {
      await waitFor(
        'each page connected to the other',
        async () => {
          const s = await Promise.all(pages.map(peerState));
          const error = s.find((x) => x?.error)?.error;
          if (error) throw fail(`a page failed to join: ${error}`);
          return { ok: s.every((x) => x?.connected), s };
        },
        CONNECT_TIMEOUT_MS,
      );
      await waitFor(
        'each page hears the other and knows its clock offset',
        async () => {
          const s = await Promise.all(pages.map(peerState));
          return { ok: s.every((x) => x?.received > 0 && x.networkCount > 0 && x.mouthToEarCount > 0), s };
        },
        HEAR_TIMEOUT_MS,
      );
    } catch (err) {
      if (err instanceof Error && err.message.startsWith(room)) throw err;
      throw fail(err instanceof Error ? err.message : String(err));
    }
    log(
      `latency: ${room}: both pages hear each other after ${((Date.now() - started) / 1000).toFixed(1)} s; settling ${settleS} s`,
    );
    await sleep(settleS * 1000);

    const before = await Promise.all(
      pages.map((page) =>
        page.evaluate(() => {
          const s = window.tutti.session;
          s.resetLatency();
          return { counters: s.counters(), devices: s.latencyStages().devices, at: Date.now() };
        }),
      ),
    );
    const resetAt = Math.max(...before.map((b) => b.at));
    // The reset reached both engines: their counts start over (the block is published about
    // once a second, so allow a second's worth more than the time since the reset).
    try {
      await waitFor(
        'the latency histograms restart',
        async () => {
          const s = await Promise.all(pages.map(peerState));
          const limit = ((Date.now() - resetAt) / 1000 + 1) * PACKETS_PER_SECOND;
          return {
            ok: s.every((x) => x?.mouthToEarCount <= limit),
            counts: s.map((x) => x?.mouthToEarCount),
            limit,
          };
        },
        RESTART_TIMEOUT_MS,
      );
    } catch (err) {
      throw fail(err instanceof Error ? err.message : String(err));
    }
    const endAt = resetAt + seconds * 1000;
    while (Date.now() < endAt) {
      await sleep(Math.min(10_000, endAt - Date.now()));
      const s = await Promise.all(pages.map(peerState));
      log(
        `latency: ${room}: ${((Date.now() - resetAt) / 1000).toFixed(0).padStart(3)} s  ` +
          s
            .map(
              (x, i) =>
                `${PLAYERS[1 - i].name}→${PLAYERS[i].name} target ${x.targetMs.toFixed(2)} ms, p50 so far ${x.mouthToEarP50.toFixed(2)} ms (with devices), underruns ${x.underruns - before[i].counters.perPeer[x.peer].underruns}`,
            )
            .join('; '),
      );
    }
    const after = await Promise.all(pages.map(readPage));
    const windowS = (Math.min(...after.map((a) => a.at)) - resetAt) / 1000;

    const directions = after.map((a, i) => {
      const sender = after[1 - i];
      const d = a.stages;
      const devicesMs = known(a.devices.outputMs) + known(a.devices.inputMs);
      const blockMs = (sender.blockFrames / 48000) * 1000;
      /** What a counter of this direction gained over the window. */
      const gained = (f) => (a.counters[f] ?? 0) - (before[i].counters.perPeer[a.peer][f] ?? 0);
      const underruns = gained('underruns');
      const expected = windowS * PACKETS_PER_SECOND;
      if (!(d.oneWay.count >= 0.5 * expected)) {
        throw fail(
          `${PLAYERS[1 - i].name}→${PLAYERS[i].name}: ${d.oneWay.count} packets measured in ${windowS.toFixed(1)} s (expected about ${expected.toFixed(0)}): the page stopped hearing its peer`,
        );
      }
      return {
        from: PLAYERS[1 - i].name,
        to: PLAYERS[i].name,
        median_ms: round(d.oneWay.p50),
        p95_ms: round(d.oneWay.p95),
        underruns,
        packets: d.oneWay.count,
        mouth_to_ear_p50_ms: round(d.mouthToEar.p50),
        mouth_to_ear_p95_ms: round(d.mouthToEar.p95),
        devices_ms: round(devicesMs),
        device_output_ms: round(a.devices.outputMs),
        device_input_ms: round(a.devices.inputMs),
        devices_changed:
          Math.abs(devicesMs - (known(before[i].devices.outputMs) + known(before[i].devices.inputMs))) > 0.1,
        // transit.p50 + block + sendQueue.p50: the cross-check (a sum of medians).
        stages_sum_p50_ms: round(d.transit.p50 + blockMs + d.sendQueue.p50),
        transit_p50_ms: round(d.transit.p50),
        network_p50_ms: round(d.network.p50, 3),
        delivery_p50_ms: round(d.delivery.p50),
        delivery_p95_ms: round(d.delivery.p95),
        jitter_wait_p50_ms: round(d.jitterWait.p50),
        jitter_wait_p95_ms: round(d.jitterWait.p95),
        send_queue_p50_ms: round(d.sendQueue.p50, 3),
        send_queue_p95_ms: round(d.sendQueue.p95, 3),
        send_queue_min_ms: round(d.sendQueue.min, 3),
        block_ms: round(blockMs, 3),
        buffer_target_ms: round(a.counters.targetMs),
        arrival_jitter_ms: round(a.counters.jitterMs),
        oracle_ms: round(a.counters.oracleMs),
        concealed: gained('concealed'),
        lost: gained('lost'),
        late: gained('late'),
        late_underruns: gained('lateUnderruns'),
        stall_underruns: gained('stallUnderruns'),
        rejected: { network: d.network.rejected, delivery: d.delivery.rejected, one_way: d.oneWay.rejected },
      };
    });
    return {
      // A direction without a figure (null) makes the room's figure NaN (null in the JSON).
      median_ms: Math.max(...directions.map((d) => d.median_ms ?? NaN)),
      p95_ms: Math.max(...directions.map((d) => d.p95_ms ?? NaN)),
      underruns: directions.reduce((n, d) => n + d.underruns, 0),
      seconds: round(windowS, 1),
      directions,
      load_average_1m: round(loadavg()[0]),
    };
  } finally {
    for (const page of pages)
      await page
        .context()
        .close()
        .catch(() => {});
  }

  function known(ms) {
    return Number.isFinite(ms) ? ms : 0;
  }

  /** Reads the page's figures for its one peer. */
  async function readPage(page) {
    const r = await page.evaluate((fields) => {
      const s = window.tutti.session;
      const other = s.view.participants.find((p) => p.link === 'connected');
      if (!other) return { error: 'the peer left' };
      const st = s.latencyStages();
      const strip = (x) => x && Object.fromEntries(fields.map((f) => [f, x[f]]));
      const stages = {};
      for (const [name, hist] of Object.entries(st.peers[other.peer] ?? {})) stages[name] = strip(hist);
      return {
        at: Date.now(),
        peer: other.peer,
        blockFrames: s.view.engine.blockFrames,
        stages,
        devices: st.devices,
        counters: s.counters().perPeer[other.peer],
      };
    }, STAGE_SUMMARY_FIELDS);
    if (r.error) throw fail(r.error);
    if (!r.stages.mouthToEar) throw fail('no latency stages for the peer');
    return r;
  }
}

/** A page's view of its one peer: connected, heard, stage counts, and the running figures. */
function peerState(page) {
  return page.evaluate(() => {
    const s = window.tutti?.session;
    if (!s) return null;
    if (s.view.error) return { error: `${s.view.error.code}: ${s.view.error.message}` };
    const other = s.view.participants.find((p) => p.link === 'connected' && p.format);
    if (!other) return { connected: false };
    const st = s.latencyStages();
    const c = s.counters().perPeer[other.peer];
    const stages = st.peers[other.peer];
    return {
      connected: true,
      peer: other.peer,
      received: c?.received ?? 0,
      underruns: c?.underruns ?? 0,
      targetMs: c?.targetMs ?? NaN,
      networkCount: stages?.network.count ?? 0,
      mouthToEarCount: stages?.mouthToEar.count ?? 0,
      mouthToEarP50: stages?.mouthToEar.p50 ?? NaN,
    };
  });
}

/** The runs of a latency entry, main backend first: [backend, buffer, run]. */
function latencyRuns(latency) {
  const runs = [];
  const backends = [
    [latency.backend ?? 'fake', latency],
    ...(latency.fake_device ? [['fake', latency.fake_device]] : []),
  ];
  for (const [backend, e] of backends) {
    runs.push([backend, 'adaptive', e]);
    if (e.fixed8) runs.push([backend, `fixed ${FIXED_PACKETS}`, e.fixed8]);
  }
  return runs;
}

/** The human-readable table of the latency part, on stdout before the JSON line. */
export function printLatencyTable(latency) {
  const head = [
    'backend',
    'buffer',
    'direction',
    'added p50 ms',
    'added p95 ms',
    'stages sum p50',
    'jitter wait p50',
    'delivery p50',
    'arrival jitter',
    'buffer target',
    'underruns',
    'seconds',
  ];
  const body = [];
  for (const [backend, name, run] of latencyRuns(latency)) {
    for (const d of run.directions) {
      body.push([
        backend,
        name,
        `${d.from}→${d.to}`,
        fmt(d.median_ms),
        fmt(d.p95_ms),
        fmt(d.stages_sum_p50_ms),
        fmt(d.jitter_wait_p50_ms),
        fmt(d.delivery_p50_ms),
        fmt(d.arrival_jitter_ms),
        fmt(d.buffer_target_ms),
        String(d.underruns),
        fmt(run.seconds, 0),
      ]);
    }
    body.push([
      backend,
      name,
      'worse',
      fmt(run.median_ms),
      fmt(run.p95_ms),
      '',
      '',
      '',
      '',
      '',
      String(run.underruns),
      fmt(run.seconds, 0),
    ]);
  }
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) =>
    cells.map((c, i) => (i < 3 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log('');
  console.log(line(head));
  for (const b of body) console.log(line(b));
  console.log('');
  const backend = latency.backend ?? 'fake';
  const verdict =
    latency.seconds < 59.5
      ? `not judged (a ${fmt(latency.seconds, 0)} s window)`
      : latency.median_ms <= 10 && latency.underruns === 0
        ? 'met'
        : 'MISSED';
  console.log(
    `target: added one-way latency median <= 10 ms, 0 underruns over 60 s (adaptive, loopback, ${backend}): ` +
      `${fmt(latency.median_ms)} ms, ${latency.underruns} underruns over ${fmt(latency.seconds, 0)} s, ${verdict}`,
  );
  for (const [b, name, run] of latencyRuns(latency)) {
    if (b === backend && name === 'adaptive') continue;
    console.log(
      `${b}, ${name}: median ${fmt(run.median_ms)} ms, p95 ${fmt(run.p95_ms)} ms, ${run.underruns} underruns over ${fmt(run.seconds, 0)} s` +
        (latency.median_ms > 0
          ? ` (${fmt(run.median_ms / latency.median_ms)}x the ${backend} adaptive median)`
          : ''),
    );
  }
  const imp = latency.impaired;
  if (imp && !imp.error && !imp.skipped) {
    const n = imp.network;
    console.log(
      `impaired (${imp.backend}, ${n.delay_ms} ± ${n.jitter_ms} ms, ${n.loss * 100} % loss; the impairer dropped ${fmt(imp.impairer.dropped_pct)} %): ` +
        `jitter-buffer wait p50 ${fmt(imp.jitter_wait_p50_ms)} ms against the oracle ${fmt(imp.oracle_ms)} ms (${imp.wait_within_one_block_of_oracle ? 'within' : 'NOT within'} one block), ` +
        `lost ${imp.lost}, concealed ${imp.concealed}, underruns beyond losses ${imp.underruns_beyond_losses}, ` +
        `added one-way median ${fmt(imp.median_ms)} ms over ${fmt(imp.seconds, 0)} s`,
    );
    for (const d of imp.directions) {
      console.log(
        `  ${d.from}→${d.to}: wait p50 ${fmt(d.jitter_wait_p50_ms)} ms, oracle ${fmt(d.oracle_ms)} ms, target ${fmt(d.buffer_target_ms)} ms, ` +
          `lost ${d.lost}, concealed ${d.concealed}, late ${d.late}, underruns ${d.underruns} (late ${d.late_underruns}, stall ${d.stall_underruns})`,
      );
    }
  } else if (imp) {
    console.log(`impaired: ${imp.error ?? imp.skipped}`);
  }
  console.log('');
}

function fmt(x, digits = 2) {
  return Number.isFinite(x) ? x.toFixed(digits) : '-';
}
