// The latency benchmark over an impaired network (the `impaired` entry of `"latency"`): the
// room of latency-bench.mjs (two pages, adaptive buffer, a sound server with 128-frame
// callbacks) while tutti-impair holds every data-channel packet for 10 ± 3 ms and drops 2 %.
//
// Run by runLatencyBench as a child process, since it needs a private network namespace of its
// own (tests/kit/netns.mjs; root): it re-runs itself there, starts the server, the browser and
// the impairer, measures, stops them by pid, and prints progress on stderr and ONE JSON line on
// stdout (the entry, or {"skipped": why} without root).
//
// Usage: node bench/runners/latency-impaired.mjs [--seconds S] [--settle S]
import { reexecInNetns } from '../../tests/kit/netns.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  const v = i >= 0 ? Number(process.argv[i + 1]) : dflt;
  if (!(v >= 1 && v <= 600)) throw new Error(`${name} takes a number of seconds in [1, 600]`);
  return v;
};
const seconds = arg('--seconds', 60);
const settleS = arg('--settle', 5);

if (process.getuid?.() !== 0) {
  console.log(JSON.stringify({ skipped: 'needs root: a private network namespace and an iptables rule' }));
  process.exit(0);
}
if (!(await reexecInNetns(process.argv, { timeoutMs: (seconds + settleS + 240) * 1000 })))
  process.exit(process.exitCode ?? 1);

const { loadavg } = await import('node:os');
const { startImpairer } = await import('../../tests/kit/netns.mjs');
const { launchChromium } = await import('../../tests/kit/chromium.mjs');
const { startServer } = await import('../../tests/kit/server.mjs');
const { LATENCY_CHROMIUM_ARGS, measureRoom, round } = await import('./latency.mjs');

/** The network: delay ± uniform jitter (packets keep their order), independent loss. */
const IMPAIRMENT = { delayMs: 10, jitterMs: 3, loss: 0.02, lossRun: 1, seed: 11 };
const BACKEND = 'pulse-128';
const log = (...a) => console.error(...a);

const server = await startServer();
process.once('exit', () => server.kill());
let browser = null;
let impairer = null;
try {
  impairer = await startImpairer({ ...IMPAIRMENT, durationS: seconds + settleS + 180 });
  browser = await launchChromium(LATENCY_CHROMIUM_ARGS, { backend: BACKEND, tones: [330, 550] });
  log(
    `latency: ${BACKEND}: adaptive buffer through ${IMPAIRMENT.delayMs} ± ${IMPAIRMENT.jitterMs} ms, ${IMPAIRMENT.loss * 100} % loss, ${seconds} s measured`,
  );
  const r = await measureRoom(
    { server, browser },
    { room: 'bench-latency-impaired', audio: null, seconds, settleS, log },
  );
  const stats = await impairer.stop();
  impairer = null;
  // The worse direction by jitter-buffer wait, with its oracle beside it.
  const worse = r.directions.reduce((a, b) =>
    (b.jitter_wait_p50_ms ?? -Infinity) > (a.jitter_wait_p50_ms ?? -Infinity) ? b : a,
  );
  const sum = (f) => r.directions.reduce((n, d) => n + d[f], 0);
  const entry = {
    jitter_wait_p50_ms: worse.jitter_wait_p50_ms,
    oracle_ms: worse.oracle_ms,
    lost: sum('lost'),
    concealed: sum('concealed'),
    underruns_beyond_losses: sum('late_underruns') + sum('stall_underruns') + sum('late'),
    wait_within_one_block_of_oracle:
      worse.jitter_wait_p50_ms !== null &&
      worse.oracle_ms !== null &&
      worse.block_ms !== null &&
      Math.abs(worse.jitter_wait_p50_ms - worse.oracle_ms) <= worse.block_ms,
    underruns: r.underruns,
    median_ms: r.median_ms,
    p95_ms: r.p95_ms,
    seconds: r.seconds,
    backend: BACKEND,
    network: {
      delay_ms: IMPAIRMENT.delayMs,
      jitter_ms: IMPAIRMENT.jitterMs,
      loss: IMPAIRMENT.loss,
      loss_run: IMPAIRMENT.lossRun,
    },
    impairer: {
      packets_seen: stats.packets_seen,
      dropped_loss: stats.dropped_loss,
      dropped_pct: round((100 * stats.dropped_loss) / Math.max(1, stats.packets_seen)),
      verdict_lateness_p99_us: stats.verdict_lateness_us.p99,
    },
    directions: r.directions,
    load_average_1m: round(loadavg()[0]),
  };
  console.log(JSON.stringify(entry));
} finally {
  await impairer?.stop().catch(() => {});
  await browser?.close().catch(() => {});
  await server.stop().catch(() => {});
}
process.exit(0);
