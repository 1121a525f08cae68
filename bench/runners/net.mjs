// The net benchmark (part of `npm run bench`): the CPU time of the net worker thread, which
// moves packets between the peers' data channels and the engine's rings, per received packet.
//
// For each player count, a fresh page /net-bench.html?peers=N (bench/web/net-bench.ts) runs
// the real engine, the real pump in its 'tutti-net' worker and N remote players on loopback data
// channels, each sending 375 packets a second. After a warm-up:
//   1. a short trace with 'disabled-by-default-devtools.timeline' names the page's renderer
//      process (TracingStartedInBrowser: the frame whose URL is the page's) and the worker's
//      thread (TracingSessionIdForWorker: the worker whose script is net-worker-*.js in that
//      process); it must be the one "DedicatedWorker thread" of that process;
//   2. a trace with only 'toplevel' and 'blink.user_timing' (cheap: no per-task counters) over
//      the measured window, bounded by performance.mark()s made in the same evaluate() as the
//      counter snapshots: the worker's CPU time is the sum of the thread durations (tdur) of its
//      top-level task events between the marks, divided by the packets the pump received
//      (N_IN_PACKETS) between them;
//   3. on Linux, the same window once more without tracing, from the thread's own CPU clock
//      (/proc/<pid>/task/<tid>/schedstat), as a check on the tracing overhead.
// The hub case does the same with /net-bench.html?peers=N&via=hub: the N players come through
// one hub link, one message per block (a bundle of one packet per player, with their stream ids),
// and the CPU time is divided by the bundles the pump took (N_HUB_BUNDLES): bundled_us_per_block.
// Every player's packets must have reached its engine slot (the pump's per-slot counters).
// The baseline does the same with /net-bench.html?mode=postmessage&rate=375N: a worker posted
// a 1 KB ArrayBuffer copy per packet at the same packet rate.
// Method and caveats: bench/README.md.
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { launchChromium } from '../../tests/kit/chromium.mjs';

export const NET_CHROMIUM_ARGS = [
  '--autoplay-policy=no-user-gesture-required',
  '--allow-loopback-in-peer-connection',
  '--disable-features=WebRtcHideLocalIpsWithMdns',
  // Loopback candidates are gathered only for a page with media permission.
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows',
];

const PACKETS_PER_SECOND = 48000 / 128;
const MARK_START = 'tutti-net-bench-start';
const MARK_END = 'tutti-net-bench-end';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs the net benchmark against the app served at `baseUrl`; returns one entry per player count
 * and the browser's version.
 * @param {{ baseUrl: string, log: (...a: unknown[]) => void, peers?: number[], warmupS?: number, windowS?: number }} opts
 */
export async function runNetBench({ baseUrl, log, peers = [4, 15], warmupS = 2, windowS = 5 }) {
  const browser = await launchChromium(NET_CHROMIUM_ARGS);
  try {
    const entries = [];
    for (const n of peers) {
      const pump = await measurePage(
        browser,
        new URL(`net-bench.html?peers=${n}`, baseUrl).href,
        'net-worker',
        { log, warmupS, windowS },
      );
      const hub = await measurePage(
        browser,
        new URL(`net-bench.html?peers=${n}&via=hub`, baseUrl).href,
        'net-worker',
        { log, warmupS, windowS },
      );
      const rate = n * PACKETS_PER_SECOND;
      const post = await measurePage(
        browser,
        new URL(`net-bench.html?mode=postmessage&rate=${rate}`, baseUrl).href,
        'post-sink-worker',
        { log, warmupS, windowS },
      );
      const entry = {
        remote_peers: n,
        us_per_packet: round(pump.traced.us_per_packet, 2),
        packets_per_s: round(pump.traced.packets_per_s, 1),
        worker_cpu_pct: round(pump.traced.cpu_pct, 2),
        packets_sent_by_pump: pump.traced.channel_sends,
        engine_packets_published: pump.traced.out_packets,
        us_per_packet_untraced: pump.untraced ? round(pump.untraced.us_per_packet, 2) : null,
        worker_cpu_pct_untraced: pump.untraced ? round(pump.untraced.cpu_pct, 2) : null,
        bundled_us_per_block: round(hub.traced.us_per_block, 2),
        bundled_us_per_block_untraced: hub.untraced ? round(hub.untraced.us_per_block, 2) : null,
        bundled_blocks_per_s: round(hub.traced.blocks_per_s, 1),
        bundled_packets_per_s: round(hub.traced.packets_per_s, 1),
        bundled_us_per_packet: round(hub.traced.us_per_packet, 2),
        bundled_worker_cpu_pct: round(hub.traced.cpu_pct, 2),
        bundled_worker_cpu_pct_untraced: hub.untraced ? round(hub.untraced.cpu_pct, 2) : null,
        bundled_packets_sent_by_pump: hub.traced.channel_sends,
        bundled_streams: streamCheck(hub.traced, n),
        bundled_trace_cpu_coverage: hub.traced.coverage === null ? null : round(hub.traced.coverage, 3),
        bundled_late_timer_ticks: hub.traced.late_ticks,
        bundled_engine_underruns: hub.traced.engine_underruns,
        bundled_worker_tasks_by_source: hub.traced.tasks_by_source,
        postmessage_us_per_packet: round(post.traced.us_per_packet, 2),
        postmessage_per_s: round(post.traced.packets_per_s, 1),
        postmessage_us_per_packet_untraced: post.untraced ? round(post.untraced.us_per_packet, 2) : null,
        trace_cpu_coverage: pump.traced.coverage === null ? null : round(pump.traced.coverage, 3),
        window_s: round(pump.traced.window_s, 2),
        packets_received: pump.traced.packets,
        rx_dropped: pump.traced.rx_dropped,
        tx_skipped: pump.traced.tx_skipped,
        players_received: pump.traced.players_received,
        late_timer_ticks: pump.traced.late_ticks,
        engine_underruns: pump.traced.engine_underruns,
        worker_tasks_by_source: pump.traced.tasks_by_source,
        load_average_1m: Number(loadavg()[0].toFixed(2)),
        thread_time_source:
          pump.traced.fallback_events > 0
            ? `tdur (dur for ${pump.traced.fallback_events} events without tdur)`
            : 'tdur',
      };
      // A starved scene measures something else: say so in the entry rather than hide it.
      const problems = [];
      if (pump.traced.packets_per_s < 0.9 * rate)
        problems.push(`received ${entry.packets_per_s}/s of ${rate}/s sent`);
      if (pump.traced.out_packets < 0.9 * PACKETS_PER_SECOND * pump.traced.window_s)
        problems.push(`the engine published ${pump.traced.out_packets} packets in ${entry.window_s} s`);
      if (pump.traced.tx_skipped > 0)
        problems.push(`${pump.traced.tx_skipped} sends skipped (send queue full)`);
      if (hub.traced.blocks_per_s < 0.9 * PACKETS_PER_SECOND)
        problems.push(
          `hub: received ${entry.bundled_blocks_per_s} bundles/s of ${PACKETS_PER_SECOND}/s sent`,
        );
      if (hub.traced.out_packets < 0.9 * PACKETS_PER_SECOND * hub.traced.window_s)
        problems.push(
          `hub: the engine published ${hub.traced.out_packets} packets in ${round(hub.traced.window_s, 2)} s`,
        );
      if (entry.bundled_streams.short) problems.push(`hub: ${entry.bundled_streams.short}`);
      if (hub.traced.tx_skipped > 0)
        problems.push(`hub: ${hub.traced.tx_skipped} sends skipped (send queue full)`);
      entry.degraded = problems.length > 0 ? problems.join('; ') : null;
      if (entry.degraded)
        log(`net: WARNING, ${n} players: ${entry.degraded} (machine busy? load ${entry.load_average_1m})`);
      // A bundle that did not reach every slot is a wrong scene, not a slow one: stop.
      if (!entry.bundled_streams.ok)
        throw new Error(`net bench, hub, ${n} players: ${entry.bundled_streams.why}`);
      entries.push(entry);
      log(
        `net: ${n} players: ${entry.us_per_packet} µs/packet (${entry.us_per_packet_untraced ?? '-'} untraced), ` +
          `${entry.packets_per_s} packets/s, worker ${entry.worker_cpu_pct}% of a core; ` +
          `postMessage baseline ${entry.postmessage_us_per_packet} µs/message; ` +
          `hub: ${entry.bundled_us_per_block} µs/bundle (${entry.bundled_us_per_block_untraced ?? '-'} untraced), ` +
          `${entry.bundled_blocks_per_s} bundles/s carrying ${entry.bundled_packets_per_s} packets/s, ` +
          `worker ${entry.bundled_worker_cpu_pct}%`,
      );
    }
    return { entries, browserVersion: browser.version() };
  } finally {
    await browser.close().catch(() => {});
  }
}

/** Opens `url` in a fresh context, identifies its worker thread and measures it. */
async function measurePage(browser, url, workerScript, { log, warmupS, windowS }) {
  const context = await browser.newContext({ permissions: ['microphone'] });
  try {
    const page = await context.newPage();
    page.on('pageerror', (err) => log(`net page error: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error' && !msg.text().includes('404')) log(`net page error: ${msg.text()}`);
    });
    log(`net: opening ${url}`);
    await page.goto(url);
    const deadline = Date.now() + 40_000;
    for (;;) {
      const state = await page.evaluate(() => window.netBench?.state ?? 'starting');
      if (state === 'ready') break;
      if (state === 'error')
        throw new Error(`net bench page: ${await page.evaluate(() => window.netBench?.error)}`);
      if (Date.now() > deadline) throw new Error(`net bench page not ready within 40 s (${url})`);
      await sleep(200);
    }
    await sleep(warmupS * 1000);
    const { pid, tid } = await identifyWorker(browser, page, url, workerScript);
    log(`net: worker thread ${pid}/${tid} (${workerScript})`);

    // The traced window.
    await browser.startTracing(page, { categories: ['__metadata', 'toplevel', 'blink.user_timing'] });
    const cpu0 = threadCpuNs(pid, tid);
    const c0 = await snapshot(page, MARK_START);
    await sleep(windowS * 1000);
    const c1 = await snapshot(page, MARK_END);
    const cpu1 = threadCpuNs(pid, tid);
    const trace = JSON.parse((await browser.stopTracing()).toString());
    const fromTraceEvents = fromTrace(trace.traceEvents ?? trace, pid, tid, c0, c1);
    const traced = {
      ...fromTraceEvents,
      coverage: cpu0 !== null && cpu1 !== null ? fromTraceEvents.cpu_us / ((cpu1 - cpu0) / 1000) : null,
    };

    // The same window without tracing, from the thread's CPU clock (Linux only).
    let untraced = null;
    const u0 = threadCpuNs(pid, tid);
    if (u0 !== null) {
      const d0 = await snapshot(page, null);
      await sleep(windowS * 1000);
      const d1 = await snapshot(page, null);
      const u1 = threadCpuNs(pid, tid);
      untraced = u1 === null ? null : perPacket((u1 - u0) / 1000, d0, d1);
    }
    return { traced, untraced };
  } finally {
    await context.close().catch(() => {});
  }
}

/** A short trace that names the page's renderer process and `workerScript`'s thread in it. */
async function identifyWorker(browser, page, url, workerScript) {
  await browser.startTracing(page, { categories: ['__metadata', 'disabled-by-default-devtools.timeline'] });
  await sleep(300);
  const trace = JSON.parse((await browser.stopTracing()).toString());
  const events = trace.traceEvents ?? trace;
  const pids = new Set();
  for (const e of events) {
    if (e.name !== 'TracingStartedInBrowser') continue;
    for (const f of e.args?.data?.frames ?? []) if (f.url === url && f.processId) pids.add(f.processId);
  }
  if (pids.size !== 1)
    throw new Error(`net bench: ${pids.size} renderer processes show ${url} in the trace; expected 1`);
  const [pid] = pids;
  const threadName = new Map();
  for (const e of events)
    if (e.ph === 'M' && e.name === 'thread_name' && e.pid === pid) threadName.set(e.tid, e.args?.name);
  if (![...threadName.values()].includes('CrRendererMain'))
    throw new Error(`net bench: process ${pid} has no CrRendererMain thread`);
  const workers = [...threadName].filter(([, name]) => name === 'DedicatedWorker thread').map(([t]) => t);
  const tids = new Set();
  for (const e of events) {
    if (e.name !== 'TracingSessionIdForWorker' || e.pid !== pid) continue;
    const d = e.args?.data ?? {};
    if (
      new URL(d.url ?? '', url).pathname.split('/').pop()?.startsWith(`${workerScript}-`) ||
      String(d.url).includes(`/${workerScript}`)
    )
      tids.add(d.workerThreadId);
  }
  if (tids.size !== 1)
    throw new Error(`net bench: ${tids.size} ${workerScript} threads in process ${pid}; expected 1`);
  const [tid] = tids;
  if (workers.length !== 1 || workers[0] !== tid) {
    throw new Error(
      `net bench: process ${pid} has DedicatedWorker threads [${workers.join(', ')}]; expected exactly ${workerScript}'s thread ${tid}`,
    );
  }
  return { pid, tid };
}

/** Counters of the page, with a performance.mark() taken in the same task when `mark` is set. */
function snapshot(page, mark) {
  return page.evaluate((m) => {
    if (m) performance.mark(m);
    if (!window.netBench) throw new Error('net-bench.html has not set window.netBench');
    return window.netBench.counters();
  }, mark);
}

/** The thread's CPU time in ns from /proc (Linux, unsandboxed pids), or null. */
function threadCpuNs(pid, tid) {
  try {
    const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
    if (!comm.startsWith('DedicatedWorker')) return null;
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return null;
  }
}

/** Sums the worker's top-level task events between the two marks. */
function fromTrace(events, pid, tid, c0, c1) {
  const markTs = (name) => events.find((e) => e.name === name && e.cat?.includes('blink.user_timing'))?.ts;
  const start = markTs(MARK_START);
  const end = markTs(MARK_END);
  if (start === undefined || end === undefined || !(end > start)) {
    throw new Error('net bench: the window marks are missing from the trace');
  }
  const tasks = events
    .filter((e) => e.pid === pid && e.tid === tid && e.ph === 'X' && e.ts >= start && e.ts < end)
    .sort((a, b) => a.ts - b.ts || (b.dur ?? 0) - (a.dur ?? 0));
  let cpuUs = 0;
  let topEnd = -Infinity;
  let top = 0;
  let fallback = 0;
  /** Where the time goes: top-level tasks by the function that posted them. */
  const bySource = new Map();
  for (const e of tasks) {
    if (e.ts < topEnd) continue; // nested in the current top-level event
    top++;
    topEnd = e.ts + (e.dur ?? 0);
    let us = e.tdur;
    if (typeof us !== 'number') {
      fallback++;
      us = e.dur ?? 0;
    }
    cpuUs += us;
    const source = e.args?.src_func ?? e.name;
    const b = bySource.get(source) ?? { tasks: 0, us: 0 };
    b.tasks++;
    b.us += us;
    bySource.set(source, b);
  }
  if (top === 0) throw new Error(`net bench: no task events on thread ${pid}/${tid} in the window`);
  const r = perPacket(cpuUs, c0, c1, (end - start) / 1e6);
  const tasksBySource = Object.fromEntries(
    [...bySource]
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, 6)
      .map(([k, v]) => [
        k,
        {
          tasks: v.tasks,
          us_per_task: round(v.us / v.tasks, 2),
          us_per_packet: round(v.us / r.packets, 2),
          ...(r.blocks > 0 ? { us_per_block: round(v.us / r.blocks, 2) } : {}),
        },
      ]),
  );
  return { ...r, top_level_events: top, fallback_events: fallback, tasks_by_source: tasksBySource };
}

function perPacket(cpuUs, c0, c1, windowS = (c1.t_ms - c0.t_ms) / 1000) {
  const packets = c1.in_packets - c0.in_packets;
  if (!(packets > 0)) throw new Error('net bench: no packets received in the window');
  const blocks = c1.in_bundles - c0.in_bundles;
  const delta = (key) => c1[key].map((x, i) => x - c0[key][i]);
  return {
    cpu_us: cpuUs,
    window_s: windowS,
    packets,
    us_per_packet: cpuUs / packets,
    packets_per_s: packets / windowS,
    blocks,
    us_per_block: blocks > 0 ? cpuUs / blocks : null,
    blocks_per_s: blocks / windowS,
    hub_dropped: c1.hub_dropped - c0.hub_dropped,
    slot_packets: delta('slot_packets'),
    slot_engine_received: delta('slot_engine_received'),
    cpu_pct: (cpuUs / (windowS * 1e6)) * 100,
    out_packets: c1.out_packets - c0.out_packets,
    channel_sends: c1.tx_packets - c0.tx_packets,
    tx_skipped: c1.tx_skipped - c0.tx_skipped,
    rx_dropped: c1.rx_dropped - c0.rx_dropped,
    players_received: c1.received_by_peers - c0.received_by_peers,
    late_ticks: c1.late_ticks - c0.late_ticks,
    engine_underruns: c1.engine_underruns - c0.engine_underruns,
  };
}

/**
 * Did each of the `players` streams of the hub case reach its engine slot? Every bundle carries
 * one packet of each player, so over the window each slot's pump counter must grow by the
 * bundles taken (±1: the page reads the counters while the worker writes them) and the hub path
 * must drop nothing; else the scene is wrong (`ok` false, `why`). A full inbound ring or an
 * engine that received under 90% of a slot's packets is a starved machine instead (`short`).
 */
function streamCheck(t, players) {
  const slots = t.slot_packets.slice(0, players);
  const engine = t.slot_engine_received.slice(0, players);
  const why = [];
  if (slots.length !== players) why.push(`${slots.length} slots counted`);
  const off = slots.map((x, k) => [k, x]).filter(([, x]) => Math.abs(x - t.blocks) > 1);
  if (off.length > 0)
    why.push(`slots ${off.map(([k, x]) => `${k}: ${x}`).join(', ')} of ${t.blocks} bundles`);
  if (t.hub_dropped > 0) why.push(`${t.hub_dropped} dropped by the hub path`);
  const short = [];
  if (t.rx_dropped > 0) short.push(`${t.rx_dropped} refused by the inbound ring`);
  const starved = engine.map((x, k) => [k, x]).filter(([, x]) => x < 0.9 * t.blocks);
  if (starved.length > 0)
    short.push(
      `the engine received ${starved.map(([k, x]) => `${x} in slot ${k}`).join(', ')} of ${t.blocks}`,
    );
  return {
    ok: why.length === 0,
    blocks: t.blocks,
    slot_packets_min: Math.min(...slots),
    slot_packets_max: Math.max(...slots),
    engine_received_min: Math.min(...engine),
    hub_dropped: t.hub_dropped,
    ring_refused: t.rx_dropped,
    why: why.length > 0 ? why.join('; ') : null,
    short: short.length > 0 ? short.join('; ') : null,
  };
}

function round(x, digits) {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** The human-readable table of the net entries. */
export function printNetTable(entries, print = console.log) {
  const head = [
    'players',
    'µs/packet',
    'untraced',
    'packets/s',
    'worker CPU',
    'sent by pump',
    'postMessage µs/msg',
    'hub µs/bundle',
    'untraced',
    'hub packets/s',
    'hub worker CPU',
    'streams',
  ];
  const body = entries.map((e) => [
    String(e.remote_peers),
    e.us_per_packet.toFixed(2),
    e.us_per_packet_untraced === null ? '-' : e.us_per_packet_untraced.toFixed(2),
    e.packets_per_s.toFixed(0),
    `${e.worker_cpu_pct.toFixed(2)}%`,
    String(e.packets_sent_by_pump),
    e.postmessage_us_per_packet.toFixed(2),
    e.bundled_us_per_block.toFixed(2),
    e.bundled_us_per_block_untraced === null ? '-' : e.bundled_us_per_block_untraced.toFixed(2),
    e.bundled_packets_per_s.toFixed(0),
    `${e.bundled_worker_cpu_pct.toFixed(2)}%`,
    e.bundled_streams.ok ? `${e.remote_peers} of ${e.remote_peers}` : 'MISSING',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
  print('');
  print('net worker (packet pump), CPU per received packet (mesh) and per received bundle (hub):');
  print(line(head));
  for (const b of body) print(line(b));
  for (const e of entries) {
    const verdict = e.us_per_packet <= 2 ? 'met' : 'MISSED';
    print(
      `target: <= 2 µs per packet with ${e.remote_peers} players: ${e.us_per_packet.toFixed(2)} µs, ${verdict}`,
    );
  }
  for (const e of entries.filter((x) => x.remote_peers === 15)) {
    const verdict = e.bundled_us_per_block <= 2 ? 'met' : 'MISSED';
    print(
      `target: <= 2 µs per hub bundle with 15 players: ${e.bundled_us_per_block.toFixed(2)} µs, ${verdict}`,
    );
  }
  print('');
}
