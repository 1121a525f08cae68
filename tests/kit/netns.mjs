// Impaired networks for tests: a private network namespace, and tutti-impair (bench/impair)
// holding its loopback UDP packets for a delay, dropping some, limiting the rate.
//
//   if (!(await reexecInNetns())) process.exit(process.exitCode);  // the parent stops here
//   // ...from here on we run as root in our own namespace: lo, plus a link so browsers are online
//   const imp = await startImpairer({ delayMs: 10, jitterMs: 3, loss: 0.02, lossRun: 4, durationS: 60 });
//   // ...UDP over 127.0.0.1 is now impaired; TCP (signaling, HTTP) is not
//   const stats = await imp.stop();   // JSON statistics of tutti-impair
//
// Why a namespace: the iptables rule sends every UDP packet leaving through `lo` to the queue;
// outside a namespace that would be this machine's own loopback. The namespace and its rule end
// with the last process in it. Why NFQUEUE and a userspace program: kernels without sch_netem
// (and nft without its queue module) still have iptables-legacy's NFQUEUE target.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Set to '1' in the environment of the process re-run inside the namespace. */
export const NETNS_ENV = 'TUTTI_NETNS';

/** Build stamps live with build.mjs's (scripts/build.mjs), apart from the outputs. */
const STAMP = 'node_modules/.cache/tutti-build/impair.stamp';
const BIN = 'target/release/tutti-impair';
/** The probe used by bench/impair/check.mjs, built alongside. */
export const PROBE_BIN = 'target/release/examples/udp_probe';

// Inside the new namespace: loopback up, and a second link (up, no address). Chromium reports
// navigator.onLine === false when lo is the only interface. Where the kernel has no `dummy` link
// type, a veth pair (both ends in the namespace) stands in for it.
const SETUP = [
  'ip link set lo up',
  '{ ip link add tutti0 type dummy 2>/dev/null || { ip link add tutti0 type veth peer name tutti1 && ip link set tutti1 up; }; }',
  'ip link set tutti0 up',
  'exec "$@"',
].join(' && ');

/** True in a process that reexecInNetns() started in a private network namespace. */
export function inPrivateNetns() {
  return process.env[NETNS_ENV] === '1';
}

/**
 * Re-runs this node script in a private network namespace (`unshare -n`), with the same node
 * flags, arguments and environment plus TUTTI_NETNS=1, stdio inherited. Needs root.
 * In the parent: waits for the child, sets process.exitCode to its exit code and resolves false
 * (the caller should then exit). Inside the namespace: resolves true at once.
 * SIGTERM to the parent is passed on to the child; a time limit, when given, ends it.
 * @param {string[]} [argv] process.argv-style: [node, script, ...args]
 * @param {{ timeoutMs?: number }} [opts]
 * @returns {Promise<boolean>}
 */
export async function reexecInNetns(argv = process.argv, opts = {}) {
  if (inPrivateNetns()) return true;
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    throw new Error('reexecInNetns: a private network namespace (unshare -n) needs root');
  }
  const args = ['-n', '--', 'sh', '-c', SETUP, 'sh', process.execPath, ...process.execArgv, ...argv.slice(1)];
  const child = spawn('unshare', args, { stdio: 'inherit', env: { ...process.env, [NETNS_ENV]: '1' } });
  // unshare and sh exec in place: child.pid is the node process in the namespace.
  const forward = () => {
    try {
      child.kill('SIGTERM');
    } catch {
      // Already gone.
    }
  };
  process.prependListener('SIGTERM', forward);
  let timer;
  let timedOut = false;
  const { timeoutMs } = opts;
  if (timeoutMs) {
    timer = setTimeout(() => {
      timedOut = true;
      process.stderr.write(`netns: time limit ${timeoutMs / 1000} s reached, stopping pid ${child.pid}\n`);
      forward();
      setTimeout(() => {
        try {
          child.kill('SIGKILL');
        } catch {
          // Already gone.
        }
      }, 5000).unref();
    }, timeoutMs);
  }
  const code = await new Promise((resolve) => {
    child.on('error', (e) => {
      process.stderr.write(`netns: cannot run unshare: ${e.message}\n`);
      resolve(127);
    });
    child.on('exit', (c, signal) => resolve(c ?? 128 + (signal === 'SIGKILL' ? 9 : 15)));
  });
  clearTimeout(timer);
  process.removeListener('SIGTERM', forward);
  process.exitCode = timedOut && code === 0 ? 124 : code;
  return false;
}

/**
 * Builds tutti-impair and the probe when their sources changed since the last build.
 * @param {{ timeoutMs?: number }} [opts]
 */
export async function buildImpairer(opts = {}) {
  const { ROOT, run } = await import('../../scripts/lib/run.mjs');
  const { checkStale, markBuilt } = await import('../../scripts/lib/stale.mjs');
  const step = {
    inputs: [
      'bench/impair/src',
      'bench/impair/examples',
      'bench/impair/Cargo.toml',
      'Cargo.toml',
      'Cargo.lock',
    ],
    outputs: [BIN, PROBE_BIN],
    stamp: STAMP,
  };
  const check = checkStale(ROOT, step);
  if (!check.stale) return;
  process.stderr.write(`netns: building tutti-impair (${check.reason})\n`);
  const started = Date.now();
  const r = await run(
    'cargo',
    ['build', '--release', '--locked', '-p', 'tutti-impair', '--bins', '--examples'],
    {
      timeoutMs: opts.timeoutMs ?? 10 * 60_000,
    },
  );
  if (r.code !== 0)
    throw new Error(`netns: building tutti-impair failed (${r.timedOut ? 'time limit' : `exit ${r.code}`})`);
  markBuilt(ROOT, STAMP, started);
}

/**
 * @typedef {object} ImpairOptions
 * @property {number} durationS  the impairer exits by itself after this (required; at most 3600)
 * @property {number} [delayMs]  fixed delay
 * @property {number} [jitterMs]  uniform jitter, delay ± jitterMs (at most delayMs)
 * @property {boolean} [reorder]  let packets overtake (default: keep their order)
 * @property {number} [loss]  long-run fraction lost, 0 <= loss < 1
 * @property {number} [lossRun]  mean run of consecutive losses (1 = independent)
 * @property {number} [rateKbit]  token-bucket rate limit
 * @property {number} [rateBurstBytes]
 * @property {number} [rateQueue]  packets that may wait for tokens
 * @property {number} [seed]
 * @property {boolean} [realtime]  SCHED_FIFO, so a busy machine does not make verdicts late
 *   (default true)
 * @property {number} [queue]  NFQUEUE number (default 0)
 * @property {number} [dport]  only UDP packets to this port (one listener's path); default all
 * @property {number[]} [dports]  only UDP packets to any of these ports (1 to 15: one listener's mesh links, sharing one rate)
 * @property {number} [readyTimeoutMs]  until bound, the build not counted (default 10 s)
 * @property {number} [stopTimeoutMs]  (default 5 s)
 */

/**
 * tutti-impair's statistics (see bench/impair/README.md).
 * @typedef {{ packets_seen: number, accepted: number, dropped: number, dropped_loss: number,
 *   dropped_queue_full: number, released_at_exit: number, max_held: number,
 *   verdict_lateness_us: { count: number, p50: number, p99: number, max: number, mean: number },
 *   verdict_errors: number, malformed: number, rcvbuf_bytes: number, realtime: boolean, elapsed_s: number,
 *   stopped_by: string, config: object }} ImpairStats
 */

/** Resolves null after `ms` without keeping the process alive. @param {number} ms */
const timeout = (ms) => new Promise((r) => setTimeout(() => r(null), ms).unref());

/** @param {string[]} args */
async function iptables(args) {
  const { run } = await import('../../scripts/lib/run.mjs');
  const r = await run('iptables-legacy', ['-w', '5', ...args], { quiet: true, timeoutMs: 10_000 });
  if (r.code === 127)
    throw new Error(
      'netns: iptables-legacy not found (scripts/setup.sh installs the Debian package iptables)',
    );
  if (r.code !== 0)
    throw new Error(
      `netns: iptables-legacy ${args.join(' ')} failed: ${r.output.trim() || `exit ${r.code}`}`,
    );
}

/**
 * Starts tutti-impair on `queue` and sends loopback UDP to it. Only inside reexecInNetns()'s
 * namespace. Builds the binary first when stale. Resolves once the program is bound and the
 * rule is in place; every step has a time limit and fails with a clear error.
 * `stop()` sends SIGTERM to that process only, removes the rule and resolves with its statistics;
 * calling it again returns the same promise. If the program ended by itself (durationS), packets
 * pass unimpaired (the rule's --queue-bypass) until stop().
 * @param {ImpairOptions} opts
 * @returns {Promise<{ pid: number, stop(): Promise<ImpairStats> }>}
 */
export async function startImpairer(opts) {
  if (!inPrivateNetns()) {
    throw new Error(
      "startImpairer: refusing outside a private network namespace (call reexecInNetns() first): the rule would impair this machine's loopback",
    );
  }
  const { durationS, queue = 0, readyTimeoutMs = 10_000, stopTimeoutMs = 5_000 } = opts;
  if (!(Number.isFinite(durationS) && durationS > 0 && durationS <= 3600)) {
    throw new Error('startImpairer: durationS (0 < s <= 3600) is required');
  }
  if (!(Number.isInteger(queue) && queue >= 0 && queue <= 65535))
    throw new Error(`startImpairer: bad queue ${queue}`);
  const { dport, dports } = opts;
  const portOk = (p) => Number.isInteger(p) && p > 0 && p <= 65535;
  if (dport !== undefined && !portOk(dport)) throw new Error(`startImpairer: bad dport ${dport}`);
  // iptables' multiport match takes at most 15 ports.
  if (
    dports !== undefined &&
    !(Array.isArray(dports) && dports.length >= 1 && dports.length <= 15 && dports.every(portOk))
  )
    throw new Error(`startImpairer: bad dports ${JSON.stringify(dports)}`);
  if (dport !== undefined && dports !== undefined)
    throw new Error('startImpairer: dport or dports, not both');
  const { ROOT } = await import('../../scripts/lib/run.mjs');
  await buildImpairer();

  /** @type {[string, number|boolean|undefined][]} */
  const flags = [
    ['--delay-ms', opts.delayMs],
    ['--jitter-ms', opts.jitterMs],
    ['--loss', opts.loss],
    ['--loss-run', opts.lossRun],
    ['--rate-kbit', opts.rateKbit],
    ['--rate-burst-bytes', opts.rateBurstBytes],
    ['--rate-queue', opts.rateQueue],
    ['--seed', opts.seed],
  ];
  const dir = mkdtempSync(join(tmpdir(), 'tutti-impair-'));
  const statsPath = join(dir, 'stats.json');
  const args = ['--queue', String(queue), '--duration-s', String(durationS), '--stats-out', statsPath];
  for (const [flag, v] of flags) if (v !== undefined) args.push(flag, String(v));
  if (opts.reorder) args.push('--reorder');
  if (opts.realtime ?? true) args.push('--realtime');

  // The rule that hands loopback UDP to the queue: appended once ready, deleted by stop().
  const toQueue = [
    ...['-o', 'lo', '-p', 'udp'],
    ...(dport === undefined ? [] : ['--dport', String(dport)]),
    ...(dports === undefined ? [] : ['-m', 'multiport', '--dports', dports.join(',')]),
    ...['-j', 'NFQUEUE', '--queue-num', String(queue), '--queue-bypass'],
  ];

  const child = spawn(join(ROOT, BIN), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
    process.stderr.write(d);
  });
  const exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  const killOnExit = () => child.kill('SIGTERM');
  process.on('exit', killOnExit);
  const cleanup = () => {
    process.removeListener('exit', killOnExit);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`startImpairer: tutti-impair not ready within ${readyTimeoutMs} ms`)),
        readyTimeoutMs,
      );
      child.stdout.on('data', (d) => {
        stdout += d;
        if (/^ready$/m.test(stdout)) {
          clearTimeout(timer);
          resolve(undefined);
        }
      });
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(new Error(`startImpairer: cannot run ${BIN}: ${e.message}`));
      });
      exited.then(({ code }) => {
        clearTimeout(timer);
        reject(
          new Error(`startImpairer: tutti-impair exited (${code}) before it was ready: ${stderr.trim()}`),
        );
      });
    });
    await iptables(['-A', 'OUTPUT', ...toQueue]);
  } catch (e) {
    child.kill('SIGTERM');
    await Promise.race([exited, timeout(stopTimeoutMs)]);
    cleanup();
    throw e;
  }

  /** @type {Promise<ImpairStats> | null} */
  let stopping = null;
  const stop = async () => {
    try {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const done = await Promise.race([exited, timeout(stopTimeoutMs)]);
      /** @type {Error | null} */
      let failure = null;
      if (done === null) {
        child.kill('SIGKILL');
        await Promise.race([exited, timeout(2000)]);
        failure = new Error(
          `startImpairer: tutti-impair (pid ${child.pid}) did not stop within ${stopTimeoutMs} ms`,
        );
      }
      try {
        await iptables(['-D', 'OUTPUT', ...toQueue]);
      } catch (e) {
        failure ??= /** @type {Error} */ (e);
      }
      if (failure) throw failure;
      try {
        return /** @type {ImpairStats} */ (JSON.parse(readFileSync(statsPath, 'utf8')));
      } catch {
        throw new Error(
          `startImpairer: tutti-impair wrote no statistics (exit ${done?.code ?? done?.signal}): ${stderr.trim()}`,
        );
      }
    } finally {
      cleanup();
    }
  };
  return {
    pid: /** @type {number} */ (child.pid),
    stop() {
      stopping ??= stop();
      return stopping;
    },
  };
}

/**
 * Drops every loopback UDP packet sent from one of `ports` (an outage of one sender, as a cut
 * link or a sender whose packets never leave) until `restore()` removes the rules. Only inside
 * reexecInNetns()'s namespace. The rules go before any NFQUEUE rule, so the impairer never
 * sees those packets.
 * @param {number[]} ports
 * @returns {Promise<{ restore(): Promise<void> }>}
 */
export async function dropUdpFrom(ports) {
  if (!inPrivateNetns()) {
    throw new Error('dropUdpFrom: refusing outside a private network namespace (call reexecInNetns() first)');
  }
  const unique = [...new Set(ports)];
  if (unique.length === 0 || !unique.every((p) => Number.isInteger(p) && p > 0 && p < 65536)) {
    throw new Error(`dropUdpFrom: bad ports ${JSON.stringify(ports)}`);
  }
  const match = (p) => ['-o', 'lo', '-p', 'udp', '--sport', String(p), '-j', 'DROP'];
  const added = [];
  try {
    for (const p of unique) {
      await iptables(['-I', 'OUTPUT', '1', ...match(p)]);
      added.push(p);
    }
  } catch (e) {
    for (const p of added) await iptables(['-D', 'OUTPUT', ...match(p)]).catch(() => {});
    throw e;
  }
  let restored = null;
  return {
    restore() {
      restored ??= (async () => {
        for (const p of added) await iptables(['-D', 'OUTPUT', ...match(p)]);
      })();
      return restored;
    },
  };
}
