// Starts the Rust server (target/release/tutti-server) for test harnesses and benchmarks.
// The server prints exactly one line `Tutti is running at http://127.0.0.1:PORT/` on stdout
// once it listens; this module waits for that line. Each server keeps its rooms in a fresh
// temporary directory (removed when it exits), never in the repository.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const READY = /^Tutti is running at (https?:\/\/[^\s]+:(\d+)\/)$/;
const START_TIMEOUT_MS = 15_000;

/**
 * Path of the release binary.
 * @returns {string}
 * @throws {Error} if it has not been built.
 */
export function serverBinary() {
  const bin = join(ROOT, 'target', 'release', 'tutti-server');
  if (!existsSync(bin)) {
    throw new Error(`${bin} is missing: build it with \`cargo build --release -p tutti-server\`.`);
  }
  return bin;
}

/**
 * @typedef {object} RunningServer
 * @property {string} url  e.g. `http://127.0.0.1:41234/`
 * @property {number} port
 * @property {import('node:child_process').ChildProcess} proc
 * @property {string[]} logs  the server's stderr lines so far (one per event)
 * @property {string} dataDir  where it keeps its rooms
 * @property {() => Promise<number>} stop  SIGTERM; resolves with the exit code
 * @property {() => void} kill  SIGKILL
 */

/**
 * Starts the server and resolves once it listens.
 * @param {{ port?: number, dist?: string, args?: string[], env?: Record<string, string>,
 *   dataDir?: string }} [opts]  `dataDir`: where the server keeps its rooms (kept after it
 *   exits); by default a fresh temporary directory, removed when it exits.
 * @returns {Promise<RunningServer>} rejects (with the collected stderr) if the server exits
 *   before it listens or does not listen within 15 s.
 */
export function startServer({ port = 0, dist = join(ROOT, 'dist'), args = [], env = {}, dataDir } = {}) {
  const bin = serverBinary();
  const ownDataDir = dataDir ? null : mkdtempSync(join(tmpdir(), 'tutti-rooms-'));
  const rooms = dataDir ?? /** @type {string} */ (ownDataDir);
  // No JackTrip handshake port unless a test asks for one: its default (4464) is one fixed port
  // for the whole machine, and test servers must not depend on it being free.
  const jacktrip = args.includes('--jacktrip-port') ? [] : ['--jacktrip-port', '0'];
  const proc = spawn(bin, ['--port', String(port), '--dist', dist, ...jacktrip, ...args], {
    env: { ...process.env, TUTTI_DATA_DIR: rooms, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  /** @type {string[]} */
  const logs = [];
  /** @type {Promise<number>} */
  const exited = new Promise((done) =>
    proc.once('exit', (code, signal) => {
      if (ownDataDir) rmSync(ownDataDir, { recursive: true, force: true });
      done(code ?? (signal ? 128 : 1));
    }),
  );
  lines(proc.stderr, (line) => logs.push(line));
  return new Promise((resolve, reject) => {
    const fail = (/** @type {string} */ why) => {
      clearTimeout(timer);
      reject(new Error(`${why}\n${logs.join('\n')}`));
    };
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      fail(`tutti-server did not start within ${START_TIMEOUT_MS / 1000} s.`);
    }, START_TIMEOUT_MS);
    exited.then((code) => fail(`tutti-server exited with code ${code} before it listened.`));
    lines(proc.stdout, (line) => {
      const m = READY.exec(line);
      if (!m) return;
      clearTimeout(timer);
      resolve({
        url: m[1],
        port: Number(m[2]),
        proc,
        logs,
        dataDir: rooms,
        stop: () => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
          return exited;
        },
        kill: () => {
          proc.kill('SIGKILL');
        },
      });
    });
  });
}

/**
 * Calls `onLine` for each line of a text stream.
 * @param {import('node:stream').Readable | null} stream
 * @param {(line: string) => void} onLine
 */
function lines(stream, onLine) {
  if (!stream) return;
  let buffered = '';
  stream.setEncoding('utf8');
  stream.on('data', (/** @type {string} */ chunk) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      onLine(buffered.slice(0, nl).replace(/\r$/, ''));
      buffered = buffered.slice(nl + 1);
    }
  });
  stream.on('end', () => {
    if (buffered) onLine(buffered);
  });
}
