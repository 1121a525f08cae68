// CPU figures for browser tests, from /proc: the whole machine's busy share over an interval,
// and the CPU time of the Chromium processes this test process started (its descendants whose
// command is the browser's), to say what each page costs.
import { readdirSync, readFileSync } from 'node:fs';

/** Busy and total jiffies of all cores, from /proc/stat. */
export function cpuTimes() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + (f[4] ?? 0);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total, steal: f[7] ?? 0 };
}

/** The share of all cores (%) the host took from this machine (steal) between two `cpuTimes()`. */
export function stealPct(a, b) {
  return (100 * (b.steal - a.steal)) / Math.max(1, b.total - a.total);
}

/** The machine's busy share (% of all cores) between two `cpuTimes()`. */
export function busyPct(a, b) {
  return (100 * (b.busy - a.busy)) / Math.max(1, b.total - a.total);
}

/** Clock ticks per second of /proc's times (USER_HZ; 100 on Linux). */
const TICKS_PER_S = 100;

/** @param {string} pid @returns {{ ppid: number, comm: string, ticks: number } | null} */
function stat(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = s.lastIndexOf(')');
    const comm = s.slice(s.indexOf('(') + 1, close);
    // Fields after the name: state is field 3, ppid 4, utime 14, stime 15.
    const f = s.slice(close + 2).split(' ');
    return { ppid: Number(f[1]), comm, ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return null; // gone meanwhile
  }
}

/** The browser processes under this process: every descendant whose command name starts with
 * `chrom` (Chromium's browser, renderers, GPU and utility processes), not the server. */
function browserPids() {
  /** @type {Map<number, { ppid: number, comm: string, ticks: number }>} */
  const all = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = stat(name);
    if (s) all.set(Number(name), s);
  }
  const mine = (pid) => {
    for (let p = pid, hops = 0; p > 1 && hops < 64; hops++) {
      if (p === process.pid) return true;
      p = all.get(p)?.ppid ?? 0;
    }
    return false;
  };
  return [...all].filter(([pid, s]) => s.comm.startsWith('chrom') && mine(pid));
}

/**
 * CPU seconds used so far by the browser processes under this process (browserPids).
 * Processes that ended before the call are not counted, so compare two calls over an interval
 * in which no page was opened or closed.
 */
export function browserCpuSeconds() {
  return browserPids().reduce((n, [, s]) => n + s.ticks, 0) / TICKS_PER_S;
}

/**
 * CPU seconds used so far by the browser's threads, summed by thread name (the kernel's 15
 * characters: `CrRendererMain`, `AudioWorklet th`, `DedicatedWorker`, ...): where a page's CPU
 * goes. Compare two calls as with browserCpuSeconds; threads that ended meanwhile are lost.
 * @returns {Map<string, number>}
 */
export function browserThreadCpuSeconds() {
  /** @type {Map<string, number>} */
  const byName = new Map();
  for (const [pid] of browserPids()) {
    /** @type {string[]} */
    let tids;
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // gone meanwhile
    }
    for (const tid of tids) {
      const s = stat(`${pid}/task/${tid}`);
      if (s) byName.set(s.comm, (byName.get(s.comm) ?? 0) + s.ticks / TICKS_PER_S);
    }
  }
  return byName;
}

/**
 * The `top` thread names by CPU between two browserThreadCpuSeconds(), as "% of a core per
 * page" over `elapsed` seconds and `pages` pages: `[name, pct]`, largest first.
 * @param {Map<string, number>} before
 * @param {Map<string, number>} after
 */
export function threadShares(before, after, elapsed, pages, top = 8) {
  return [...after]
    .map(
      /** @returns {[string, number]} */ ([name, s]) => [
        name,
        (100 * (s - (before.get(name) ?? 0))) / elapsed / pages,
      ],
    )
    .filter(([, pct]) => pct > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, top);
}
