// Checks tutti-impair end to end on loopback and prints the figures as JSON (stdout; progress on
// stderr). Needs root: it runs itself in a private network namespace (tests/kit/netns.mjs);
// without root it says so and exits 0.
//
// For each rate (400 and 10,000 packets/s of 1 KB), the probe (examples/udp_probe.rs) sends UDP
// to 127.0.0.1:
//   baseline  no rule: the kernel's and the probe's own one-way time;
//   pass      through tutti-impair with no impairment: what the program itself adds;
//   impaired  10 ± 3 ms, 2 % loss in runs of mean 4: what a test would see (packets in order);
// and at 10,000 packets/s once more with --reorder, where each packet's delay is drawn alone.
// tutti-impair runs with --realtime unless --no-realtime is given.
//
// Usage: node bench/impair/check.mjs [--seconds-400 S] [--seconds-10k S] [--no-realtime]
//        (defaults 20 and 5 seconds per run; about 2 minutes in all)
import { PROBE_BIN, buildImpairer, reexecInNetns, startImpairer } from '../../tests/kit/netns.mjs';

/** @param {string} name @param {number} dflt */
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  const v = i >= 0 ? Number(process.argv[i + 1]) : dflt;
  if (!(v > 0 && v <= 120)) throw new Error(`${name} must be a number of seconds in (0, 120]`);
  return v;
};
/** @type {Record<number, number>} */
const seconds = { 400: arg('--seconds-400', 20), 10000: arg('--seconds-10k', 5) };
const realtime = !process.argv.includes('--no-realtime');

if (process.getuid?.() !== 0) {
  const why = 'skipped: needs root (a private network namespace and an iptables rule)';
  console.error(`impair check: ${why}`);
  console.log(JSON.stringify({ skipped: why }));
  process.exit(0);
}
// The whole check stays well under this.
if (!(await reexecInNetns(process.argv, { timeoutMs: 15 * 60_000 }))) process.exit(process.exitCode ?? 1);

const { ROOT, run } = await import('../../scripts/lib/run.mjs');
const { join } = await import('node:path');
const { loadavg } = await import('node:os');

await buildImpairer();

/** The probe's figures for `s` seconds at `rate` packets/s. @param {number} rate @param {number} s */
async function probe(rate, s) {
  const r = await run(
    join(ROOT, PROBE_BIN),
    ['--rate', String(rate), '--duration-s', String(s), ...(realtime ? ['--realtime'] : [])],
    {
      quiet: true,
      timeoutMs: (s + 30) * 1000,
    },
  );
  if (r.code !== 0) throw new Error(`probe failed (exit ${r.code}): ${r.output}`);
  return JSON.parse(r.output.trim().split('\n').pop() ?? '');
}

/** One probe run through tutti-impair with `opts`: the probe's figures and the impairer's.
 * @param {number} rate @param {number} s @param {object} opts */
async function through(rate, s, opts) {
  const imp = await startImpairer({ durationS: s + 30, realtime, ...opts });
  try {
    return { probe: await probe(rate, s), stats: await imp.stop() };
  } finally {
    await imp.stop().catch(() => {});
  }
}

/** Microseconds to milliseconds. @param {Record<string, number>} d */
const ms = (d) => Object.fromEntries(Object.entries(d).map(([k, v]) => [k, Math.round(v) / 1000]));

/** The figures of an impaired run. @param {{ probe: any, stats: any }} r */
const impairedFigures = ({ probe: p, stats }) => ({
  delay_ms: ms(p.delay_us),
  loss_rate: p.loss_rate,
  mean_loss_run: p.mean_loss_run,
  loss_runs: p.loss_runs,
  reordered: p.reordered,
  late_sends: p.late_sends,
  impairer: {
    seen: stats.packets_seen,
    dropped: stats.dropped,
    max_held: stats.max_held,
    verdict_lateness_us: stats.verdict_lateness_us,
  },
});

const IMPAIRED = { delayMs: 10, jitterMs: 3, loss: 0.02, lossRun: 4, seed: 1 };
const results = [];
for (const rate of [400, 10000]) {
  const s = seconds[rate];
  process.stderr.write(`impair check: ${rate} packets/s, ${s} s per run: baseline\n`);
  const baseline = await probe(rate, s);

  process.stderr.write(`impair check: ${rate} packets/s: through tutti-impair, no impairment\n`);
  const pass = await through(rate, s, {});

  process.stderr.write(`impair check: ${rate} packets/s: 10 ± 3 ms, 2 % loss in runs of 4\n`);
  const impaired = await through(rate, s, IMPAIRED);
  let reordering;
  if (rate === 10000) {
    process.stderr.write(`impair check: ${rate} packets/s: the same with --reorder\n`);
    reordering = impairedFigures(await through(rate, s, { ...IMPAIRED, reorder: true }));
  }

  const b = baseline.delay_us;
  const p = pass.probe.delay_us;
  results.push({
    rate_pps: rate,
    packets: baseline.sent,
    baseline: { delay_us: b, lost: baseline.lost, late_sends: baseline.late_sends },
    pass: {
      delay_us: p,
      added_us: { p50: +(p.p50 - b.p50).toFixed(1), p99: +(p.p99 - b.p99).toFixed(1) },
      lost: pass.probe.lost,
      late_sends: pass.probe.late_sends,
      verdict_lateness_us: pass.stats.verdict_lateness_us,
    },
    impaired: impairedFigures(impaired),
    ...(reordering ? { impaired_reorder: reordering } : {}),
  });
}
const summary = { date: new Date().toISOString(), realtime, loadavg_1m: +loadavg()[0].toFixed(2), results };
console.log(JSON.stringify(summary, null, 2));
process.exit(0);
