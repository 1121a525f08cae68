// A private PulseAudio sound server for the browser tests and the latency benchmark.
//
// Headless Chromium's own (fake) audio device renders 10 ms per callback, three or four render
// quanta back to back; no musician's machine does that. With a sound server to talk to, Chromium
// plays through it instead and honours `--audio-buffer-size` (scripts/lib/chromium.mjs): one
// callback per 128 or 256 frames, as on a laptop with a small buffer. The server here has no
// sound card: a null sink at 48 kHz takes the output (on the sound server's clock), and each
// microphone is a sine source of a known frequency, so capture goes through the real path too.
//
// startPulse() spawns `pulseaudio --daemonize=no` itself (so the pid is ours), in a fresh private
// directory (0700) that holds its socket, its runtime files and its config; `env` is what a client
// (Chromium) needs to find it. stop() ends exactly that pid and removes the directory; so does
// this process's exit, should a watchdog end it first. Every wait is bounded.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PULSE_RATE = 48000;
/** The sine sources' own level (module-sine-source writes a sine of this peak amplitude). */
const SINE_SOURCE_AMPLITUDE = 0.5;
const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;
const PACTL_TIMEOUT_MS = 5_000;
const POLL_MS = 50;
/** Lines of the daemon's log kept for error messages. */
const LOG_LINES = 40;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * @typedef {object} PulseServer
 * @property {Record<string, string>} env  for the client's process: XDG_RUNTIME_DIR, PULSE_SERVER, PULSE_COOKIE
 * @property {number} pid  the daemon's
 * @property {string} sink  the null sink's name (the default sink)
 * @property {{ freq: number, name: string, label: string }[]} sources  one sine per tone; the first is the default
 *   source. `label` is what the browser's enumerateDevices() calls it.
 * @property {string[]} logs  the daemon's last log lines
 * @property {(args: string[]) => Promise<string>} pactl  runs pactl against this server (bounded)
 * @property {() => Promise<void>} stop  ends the daemon (SIGTERM, then SIGKILL) and removes its directory
 */

/** The label the browser gives the sine source of `freq` Hz. */
export function toneSourceLabel(freq) {
  return `Tutti tone ${freq} Hz`;
}

/**
 * Starts a private PulseAudio server: a 48 kHz null sink as the default output and one sine
 * source per entry of `tones` (Hz) at `amplitude` (peak, 0..0.5), the first the default input.
 * Rejects, with the daemon's log, when pulseaudio is missing, exits, or does not answer within
 * 10 s.
 * @param {{ tones?: number[], amplitude?: number }} [opts]
 * @returns {Promise<PulseServer>}
 */
export async function startPulse({ tones = [440], amplitude = 0.1 } = {}) {
  if (tones.length === 0 || !tones.every((f) => Number.isFinite(f) && f > 0 && f < PULSE_RATE / 2)) {
    throw new RangeError(`tones must be frequencies in (0, ${PULSE_RATE / 2}) Hz: ${tones.join(', ')}`);
  }
  if (!(amplitude > 0 && amplitude <= SINE_SOURCE_AMPLITUDE)) {
    throw new RangeError(`amplitude must be in (0, ${SINE_SOURCE_AMPLITUDE}]: ${amplitude}`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'tutti-pulse-'));
  // Private: pulseaudio refuses a runtime directory others can enter.
  chmodSync(dir, 0o700);
  const socket = join(dir, 'native');
  const server = `unix:${socket}`;
  // The daemon's own config: no system-wide defaults of 44.1 kHz behind the null sink.
  mkdirSync(join(dir, 'config', 'pulse'), { recursive: true, mode: 0o700 });
  writeFileSync(
    join(dir, 'config', 'pulse', 'daemon.conf'),
    `default-sample-rate = ${PULSE_RATE}\nalternate-sample-rate = ${PULSE_RATE}\nexit-idle-time = -1\n`,
  );
  const sources = tones.map((freq) => ({ freq, name: `tone_${String(freq).replace(/\W/g, '_')}`, label: toneSourceLabel(freq) }));
  // A module argument in single quotes holding a property list whose value is in double quotes.
  const quoted = (s) => `'device.description="${s}"'`;
  const args = [
    '--daemonize=no',
    '-n', // no default script: only the modules below
    '--exit-idle-time=-1',
    '--use-pid-file=no',
    '--disallow-exit',
    '--log-target=stderr',
    '--log-level=notice',
    `--load=module-null-sink sink_name=tutti_out rate=${PULSE_RATE} sink_properties=${quoted('Tutti null output')}`,
    ...sources.map((s) =>
      `--load=module-sine-source source_name=${s.name} rate=${PULSE_RATE} frequency=${s.freq} source_properties=${quoted(s.label)}`),
    `--load=module-native-protocol-unix socket=${socket} auth-anonymous=1`,
  ];
  /** @type {string[]} */
  const logs = [];
  let proc;
  try {
    proc = spawn('pulseaudio', args, {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: dir,
        XDG_RUNTIME_DIR: dir,
        XDG_CONFIG_HOME: join(dir, 'config'),
        LANG: 'C',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`could not start pulseaudio (${String(err)}): install pulseaudio and pulseaudio-utils (scripts/setup.sh)`);
  }
  let tail = '';
  proc.stderr.on('data', (chunk) => {
    const lines = (tail + chunk.toString()).split('\n');
    tail = lines.pop() ?? '';
    logs.push(...lines.filter(Boolean));
    if (logs.length > LOG_LINES) logs.splice(0, logs.length - LOG_LINES);
  });
  /** @type {Error | null} */
  let spawnError = null;
  const exited = new Promise((done) => {
    proc.once('error', (err) => {
      spawnError = err;
      done(null);
    });
    proc.once('exit', (code, signal) => done(code ?? signal));
  });
  const running = () => spawnError === null && proc.exitCode === null && proc.signalCode === null;

  const clientEnv = {
    XDG_RUNTIME_DIR: dir,
    PULSE_SERVER: server,
    // The server takes anonymous clients; a client that writes a cookie writes it here.
    PULSE_COOKIE: join(dir, 'cookie'),
  };
  /** pactl against this server, bounded; resolves with its stdout, rejects with its stderr. */
  const pactl = (pargs) => new Promise((resolve, reject) => {
    execFile('pactl', [`--server=${server}`, '--', ...pargs], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...clientEnv, LANG: 'C' },
      timeout: PACTL_TIMEOUT_MS,
      killSignal: 'SIGKILL',
    }, (err, stdout, stderr) => {
      if (err) reject(new Error(`pactl ${pargs.join(' ')}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });

  let stopped = false;
  /** Synchronous, for process exit: ends the daemon and removes its directory. */
  const onExit = () => {
    if (running()) proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.off('exit', onExit);
    if (running()) {
      proc.kill('SIGTERM');
      await Promise.race([exited, sleep(STOP_TIMEOUT_MS)]);
      if (running()) {
        proc.kill('SIGKILL');
        await Promise.race([exited, sleep(STOP_TIMEOUT_MS)]);
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const fail = async (why) => {
    await stop();
    const log = logs.filter((l) => !/not intended to be run as root|D-Bus|cookie|authentication key/i.test(l));
    return new Error(`pulseaudio: ${why}${log.length ? `\n${log.join('\n')}` : ''}`);
  };

  // Ready when it answers on its socket.
  const deadline = Date.now() + START_TIMEOUT_MS;
  let lastError = '';
  for (;;) {
    if (spawnError) {
      const missing = /** @type {NodeJS.ErrnoException} */ (spawnError).code === 'ENOENT';
      throw await fail(missing ? 'not installed: install pulseaudio and pulseaudio-utils (scripts/setup.sh)' : String(spawnError));
    }
    if (!running()) throw await fail(`exited (${proc.exitCode ?? proc.signalCode}) before it answered`);
    try {
      await pactl(['info']);
      break;
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
      if (/ENOENT/.test(lastError) && !/Connection/.test(lastError)) {
        throw await fail('pactl is missing: install pulseaudio-utils (scripts/setup.sh)');
      }
    }
    if (Date.now() > deadline) throw await fail(`no answer on ${socket} within ${START_TIMEOUT_MS / 1000} s (${lastError})`);
    await sleep(POLL_MS);
  }
  try {
    await pactl(['set-default-sink', 'tutti_out']);
    await pactl(['set-default-source', sources[0].name]);
    // The sources write a sine of SINE_SOURCE_AMPLITUDE; their (software) volume scales it.
    const factor = amplitude / SINE_SOURCE_AMPLITUDE;
    const db = (20 * Math.log10(factor)).toFixed(2);
    for (const s of sources) await pactl(['set-source-volume', s.name, `${db}dB`]);
  } catch (err) {
    throw await fail(err instanceof Error ? err.message : String(err));
  }
  return { env: clientEnv, pid: proc.pid ?? -1, sink: 'tutti_out', sources, logs, pactl, stop };
}
