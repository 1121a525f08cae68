// Child processes for the build and test scripts: output streams to this terminal as it comes
// and is also kept, so the caller can parse it; a time limit ends the whole process group.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Process groups of running children: ended when this process is interrupted. */
const running = new Set();
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const pid of running) {
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        // Its group has already exited.
      }
    }
    process.exit(130);
  });
}

/** PATH with npm's tools (binaryen's wasm-opt first) and cargo's bin before the rest. */
export function toolPath(env = process.env) {
  const home = env.HOME ?? '/root';
  return [join(ROOT, 'node_modules', '.bin'), join(home, '.cargo', 'bin'), env.PATH ?? '']
    .filter(Boolean)
    .join(':');
}

/**
 * Runs a command. Resolves (never rejects) with its exit code and captured output.
 * @param {string} cmd
 * @param {string[]} args
 * `quiet` keeps the child's output off this terminal; `quietStdout` only its stdout (a JSON line
 * the caller parses), its stderr (progress) still streaming through.
 * @param {{ cwd?: string, env?: Record<string, string|undefined>, timeoutMs?: number,
 *           quiet?: boolean, quietStdout?: boolean }} [opts]
 * @returns {Promise<{ code: number, output: string, timedOut: boolean, error?: string, ms: number }>}
 */
export function run(cmd, args, opts = {}) {
  const started = Date.now();
  return new Promise((resolve) => {
    let output = '';
    let timedOut = false;
    let child;
    try {
      child = spawn(cmd, args, {
        cwd: opts.cwd ?? ROOT,
        env: {
          ...process.env,
          PATH: toolPath(),
          ...(process.env.CI ? { NO_COLOR: '1', CARGO_TERM_COLOR: 'never' } : {}),
          ...opts.env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true, // own process group, so a time-out can end everything it started
      });
    } catch (e) {
      resolve({ code: 127, output: '', timedOut: false, error: String(e), ms: 0 });
      return;
    }
    const take = (stream, sink, quiet) => {
      stream.on('data', (chunk) => {
        output += chunk.toString();
        if (!quiet) sink.write(chunk);
      });
    };
    if (child.pid) running.add(child.pid);
    take(child.stdout, process.stdout, opts.quiet || opts.quietStdout);
    take(child.stderr, process.stderr, opts.quiet);
    let timer;
    const { timeoutMs } = opts;
    const pid = child.pid;
    if (timeoutMs) {
      timer = setTimeout(() => {
        timedOut = true;
        process.stderr.write(
          `\n${cmd} ${args.join(' ')}: time limit ${timeoutMs / 1000} s reached, stopping it\n`,
        );
        if (pid === undefined) return; // never started: its 'error' event ends the run
        try {
          process.kill(-pid, 'SIGTERM');
          setTimeout(() => {
            try {
              process.kill(-pid, 'SIGKILL');
            } catch {
              // It stopped on SIGTERM.
            }
          }, 5000).unref();
        } catch {
          // Its group has already exited.
        }
      }, timeoutMs);
    }
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: 127, output, timedOut, error: String(e), ms: Date.now() - started });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child.pid);
      resolve({ code: code ?? (signal ? 128 : 1), output, timedOut, ms: Date.now() - started });
    });
  });
}
