// JACK and JackTrip programs for the browser tests that meet a real JackTrip client: which tools
// are missing (a skip, or a failure under CI=true), one JACK server of a test's own on the dummy
// driver, `jacktrip -C` as one of its clients, `jack_simple_client`'s tone into it and
// `jack_rec` of what it receives. Every process started here is kept by its pid, every wait is
// bounded, and `stop()` ends them all (also after a failure); each logs into the run's directory.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { parseWav } from './wav.mjs';

/** The programs a run uses (Debian: jackd2 holds all but jacktrip, which is its own package). */
export const JACK_TOOLS = [
  'jackd',
  'jack_wait',
  'jack_lsp',
  'jack_connect',
  'jack_simple_client',
  'jack_rec',
  'jacktrip',
];
/** `jack_simple_client`'s sine pair: left and right output, Hz, each at amplitude 0.2. */
export const SIMPLE_CLIENT_HZ = /** @type {const} */ ([240, 720]);
export const SIMPLE_CLIENT_AMPLITUDE = 0.2;
/** jackd's rate and period (frames). */
const RATE = 48000;
const PERIOD = 128;

/**
 * Why the JACK tools cannot be used (a skip message), or null when all are on the PATH. Under
 * `CI=true` a missing tool throws instead: scripts/setup.sh installs them there.
 * @returns {string | null}
 */
export function jackToolsMissing() {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  const missing = JACK_TOOLS.filter((t) => !dirs.some((d) => existsSync(join(d, t))));
  if (missing.length === 0) return null;
  const why = `${missing.join(', ')} not found (scripts/setup.sh installs jacktrip, jackd2)`;
  if (process.env.CI === 'true') throw new Error(`CI=true and ${why}`);
  return why;
}

/** Calls `done` every 50 ms until it is true; false after `ms`. */
async function until(ms, done) {
  const end = Date.now() + ms;
  for (;;) {
    if (await done()) return true;
    if (Date.now() >= end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** @typedef {{ child: import('node:child_process').ChildProcess, what: string, exited: Promise<number | null> }} Proc */

/** One test's JACK server (its own name) and the clients started on it. */
export class JackRun {
  /** @param {string} prefix names the server `PREFIX-PID-TIME` and its log directory */
  constructor(prefix) {
    this.server = `${prefix}-${process.pid}-${Date.now() % 1e6}`;
    this.dir = mkdtempSync(join(tmpdir(), `${this.server}-`));
    /** @type {Proc[]} */
    this.procs = [];
  }

  /** The environment of a JACK client of this server, never starting one of its own. */
  env() {
    return { ...process.env, JACK_DEFAULT_SERVER: this.server, JACK_NO_START_SERVER: '1' };
  }

  /**
   * Starts `program` with its output in `<dir>/<log>.log` and `.err`.
   * @param {string} program
   * @param {string[]} args
   * @param {string} log
   * @returns {Proc}
   */
  start(program, args, log) {
    const out = openSync(join(this.dir, `${log}.log`), 'w');
    const err = openSync(join(this.dir, `${log}.err`), 'w');
    const child = spawn(program, args, { env: this.env(), stdio: ['ignore', out, err] });
    const exited = new Promise((done) => {
      child.once('exit', (code) => done(code));
      child.once('error', () => done(null));
    });
    const proc = { child, what: program, exited };
    this.procs.push(proc);
    return proc;
  }

  /**
   * Runs a short JACK command to its end (killed after `timeoutMs`).
   * @returns {Promise<string | null>} its stdout, or null when it failed
   */
  run(program, args, timeoutMs = 5000) {
    return new Promise((resolve) => {
      execFile(program, args, { env: this.env(), timeout: timeoutMs }, (error, stdout) =>
        resolve(error ? null : stdout),
      );
    });
  }

  /** The server's port names. */
  async ports() {
    return ((await this.run('jack_lsp', [])) ?? '').split('\n').map((l) => l.trim());
  }

  /** Starts jackd on the dummy driver (48 kHz, 128 frames) and waits until it serves clients. */
  async jackd() {
    this.start(
      'jackd',
      ['-n', this.server, '-d', 'dummy', '-r', String(RATE), '-p', String(PERIOD)],
      'jackd',
    );
    const ready = (await this.run('jack_wait', ['-s', this.server, '-w', '-t', '10'], 12000)) !== null;
    if (!ready) throw new Error(`jackd ${this.server} did not start; see ${this.dir}`);
  }

  /**
   * Starts `jacktrip -C 127.0.0.1 -P tcpPort` as JACK client `client`, from UDP port `udpPort`,
   * named `key` (`room/name`), 2 channels, queue 8, and waits for its JACK ports.
   */
  async jacktrip(client, tcpPort, udpPort, key) {
    const args = ['-C', '127.0.0.1', '-P', String(tcpPort), '-B', String(udpPort)];
    const proc = this.start('jacktrip', [...args, '-J', client, '-K', key, '-n', '2', '-q', '8'], 'jacktrip');
    const want = [`${client}:send_1`, `${client}:receive_1`];
    const up = await until(12000, async () => {
      const ports = await this.ports();
      return want.every((p) => ports.includes(p));
    });
    if (!up) throw new Error(`jacktrip's JACK ports did not appear; see ${this.dir}`);
    return proc;
  }

  /** Starts `jack_simple_client`'s sine pair and connects output 1 and 2 to `client`'s sends. */
  async toneInto(client) {
    const tone = `tone${process.pid}`;
    this.start('jack_simple_client', [tone], 'tone');
    const up = await until(6000, async () => (await this.ports()).includes(`${tone}:output2`));
    if (!up) throw new Error(`the tone's JACK ports did not appear; see ${this.dir}`);
    for (const ch of [1, 2]) {
      if ((await this.run('jack_connect', [`${tone}:output${ch}`, `${client}:send_${ch}`])) === null)
        throw new Error(`jack_connect ${tone}:output${ch} ${client}:send_${ch} failed`);
    }
  }

  /**
   * Records `seconds` of `client`'s two receive ports (16 bit) and returns the WAV, one
   * Float32Array per channel.
   */
  async record(client, seconds) {
    const wav = join(this.dir, 'received.wav');
    const rec = this.start(
      'jack_rec',
      // A ring of 5 s: its disk thread may be starved on a loaded machine.
      [
        '-f',
        wav,
        '-d',
        String(seconds),
        '-b',
        '16',
        '-B',
        '240000',
        `${client}:receive_1`,
        `${client}:receive_2`,
      ],
      'rec',
    );
    const code = await Promise.race([
      rec.exited,
      new Promise((r) => setTimeout(() => r('late'), seconds * 1000 + 8000)),
    ]);
    if (code === 'late') throw new Error(`jack_rec did not finish; see ${this.dir}`);
    if (!existsSync(wav)) throw new Error(`jack_rec wrote nothing (exit ${code}); see ${this.dir}`);
    return parseWav(new Uint8Array(readFileSync(wav)));
  }

  /**
   * Sends `signal` to `proc` by its pid; SIGKILL if it has not ended within `ms`.
   * @param {Proc} proc
   */
  async stopOne(proc, signal = 'SIGTERM', ms = 3000) {
    const { child } = proc;
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return true;
    process.kill(child.pid, signal);
    const ended = await Promise.race([
      proc.exited.then(() => true),
      new Promise((r) => setTimeout(() => r(false), ms)),
    ]);
    if (!ended && child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid, 'SIGKILL');
      await proc.exited;
    }
    return ended;
  }

  /**
   * Ends every process of the run, last started first (jackd last, by SIGTERM, so that it leaves
   * JACK's registry of servers); removes the logs when `clean`.
   */
  async stop(clean = false) {
    for (const proc of [...this.procs].reverse()) await this.stopOne(proc).catch(() => false);
    if (clean) rmSync(this.dir, { recursive: true, force: true });
  }
}
