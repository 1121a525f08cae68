// A private PulseAudio sound server for the browser tests and the latency benchmark.
//
// Headless Chromium's own (fake) audio device renders 10 ms per callback, three or four render
// quanta back to back; no musician's machine does that. With a sound server to talk to, Chromium
// plays through it instead and honours `--audio-buffer-size` (tests/kit/chromium.mjs): one
// callback per 128 or 256 frames, as on a laptop with a small buffer. The server here has no
// sound card: a null sink at 48 kHz takes the output (on the sound server's clock), and each
// microphone is an input device playing a sine of a known frequency, so capture goes through the
// real path too.
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
/** The tones' own level: module-sine plays a sine of this peak amplitude. */
const SINE_AMPLITUDE = 0.5;
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
 * @property {{ name: string, label: string }[]} outputs  every output: the default sink, then one
 *   null sink per `outputs` label given to startPulse. `label` is what enumerateDevices() calls it.
 * @property {{ freq: number, name: string, label: string, sink: string }[]} sources  one input per tone; the first
 *   is the default source. `label` is what the browser's enumerateDevices() calls it.
 * @property {string[]} logs  the daemon's last log lines
 * @property {(args: string[]) => Promise<string>} pactl  runs pactl against this server (bounded)
 * @property {(freq: number, amplitude: number) => Promise<void>} setAmplitude  a tone's peak level (0..0.5)
 * @property {(sink: string, seconds: number) => Promise<{ left: Float32Array, right: Float32Array, rate: number }>} record
 *   what output `sink` plays for `seconds` (its monitor, through parec; bounded)
 * @property {() => Promise<void>} stop  ends the daemon (SIGTERM, then SIGKILL) and removes its directory
 */

/** The label the browser gives the input device that plays `freq` Hz. */
export function toneSourceLabel(freq) {
  return `Tutti tone ${freq} Hz`;
}

/**
 * Starts a private PulseAudio server: a 48 kHz null sink as the default output, one more null
 * sink per entry of `outputs` (the label a browser lists it by), and one input device per entry
 * of `tones` (Hz) playing its sine at `amplitude` (peak, 0..0.5), the first the default input.
 * Rejects, with the daemon's log, when pulseaudio is missing, exits, or does not answer within
 * 10 s.
 * @param {{ tones?: number[], amplitude?: number, outputs?: string[] }} [opts]
 * @returns {Promise<PulseServer>}
 */
export async function startPulse({ tones = [440], amplitude = 0.1, outputs = [] } = {}) {
  if (tones.length === 0 || !tones.every((f) => Number.isFinite(f) && f > 0 && f < PULSE_RATE / 2)) {
    throw new RangeError(`tones must be frequencies in (0, ${PULSE_RATE / 2}) Hz: ${tones.join(', ')}`);
  }
  if (!(amplitude > 0 && amplitude <= SINE_AMPLITUDE)) {
    throw new RangeError(`amplitude must be in (0, ${SINE_AMPLITUDE}]: ${amplitude}`);
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
  if (!outputs.every((l) => /^[\w .-]+$/.test(l))) {
    throw new RangeError(`output labels are letters, digits, spaces, dots and dashes: ${outputs.join(', ')}`);
  }
  const sinks = [
    { name: 'tutti_out', label: 'Tutti null output' },
    ...outputs.map((label, i) => ({ name: `tutti_out_${i + 2}`, label })),
  ];
  const sources = tones.map((freq) => {
    const id = String(freq).replace(/\W/g, '_');
    return { freq, name: `tone_${id}`, label: toneSourceLabel(freq), sink: `tone_${id}_sink` };
  });
  // A module argument in single quotes holding a property list whose value is in double quotes.
  const described = (s) => `'device.description="${s}"'`;
  const args = [
    '--daemonize=no',
    '-n', // no default script: only the modules below
    '--exit-idle-time=-1',
    '--use-pid-file=no',
    '--disallow-exit',
    '--log-target=stderr',
    '--log-level=notice',
    ...sinks.map(
      (o) =>
        `--load=module-null-sink sink_name=${o.name} rate=${PULSE_RATE} sink_properties=${described(o.label)}`,
    ),
    // A microphone per tone: a sine player into a null sink of its own, whose monitor a remap
    // source presents as an input device (browsers list no monitors). module-sine-source would
    // be simpler, but it posts its sine in blocks of hundreds of ms: capture would starve.
    ...sources.flatMap((s) => [
      `--load=module-null-sink sink_name=${s.sink} rate=${PULSE_RATE} channels=1 sink_properties=${described(`${s.label} (player)`)}`,
      `--load=module-sine sink=${s.sink} frequency=${s.freq}`,
      `--load=module-remap-source master=${s.sink}.monitor source_name=${s.name} channels=1 source_properties=${described(s.label)}`,
    ]),
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
        PULSE_CONFIG: join(dir, 'config', 'pulse', 'daemon.conf'),
        LANG: 'C',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(
      `could not start pulseaudio (${String(err)}): install pulseaudio and pulseaudio-utils (scripts/setup.sh)`,
      {
        cause: err,
      },
    );
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
  const pactl = (pargs) =>
    new Promise((resolve, reject) => {
      execFile(
        'pactl',
        [`--server=${server}`, '--', ...pargs],
        {
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...clientEnv, LANG: 'C' },
          timeout: PACTL_TIMEOUT_MS,
          killSignal: 'SIGKILL',
        },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`pactl ${pargs.join(' ')}: ${stderr.trim() || err.message}`));
          else resolve(stdout);
        },
      );
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
    const log = logs.filter(
      (l) => !/not intended to be run as root|D-Bus|cookie|authentication key/i.test(l),
    );
    return new Error(`pulseaudio: ${why}${log.length ? `\n${log.join('\n')}` : ''}`);
  };

  // Ready when it answers on its socket.
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (spawnError) {
      const missing = /** @type {NodeJS.ErrnoException} */ (spawnError).code === 'ENOENT';
      throw await fail(
        missing
          ? 'not installed: install pulseaudio and pulseaudio-utils (scripts/setup.sh)'
          : String(spawnError),
      );
    }
    if (!running()) throw await fail(`exited (${proc.exitCode ?? proc.signalCode}) before it answered`);
    try {
      await pactl(['info']);
      break;
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      if (/ENOENT/.test(why) && !/Connection/.test(why)) {
        throw await fail('pactl is missing: install pulseaudio-utils (scripts/setup.sh)');
      }
      if (Date.now() > deadline)
        throw await fail(`no answer on ${socket} within ${START_TIMEOUT_MS / 1000} s (${why})`);
    }
    await sleep(POLL_MS);
  }
  try {
    await pactl(['set-default-sink', 'tutti_out']);
    await pactl(['set-default-source', sources[0].name]);
    for (const s of sources) await setAmplitude(s.freq, amplitude);
  } catch (err) {
    throw await fail(err instanceof Error ? err.message : String(err));
  }
  return {
    env: clientEnv,
    pid: proc.pid ?? -1,
    sink: 'tutti_out',
    outputs: sinks,
    sources,
    logs,
    pactl,
    setAmplitude,
    record,
    stop,
  };

  /** What `sink` plays for `seconds`: parec on its monitor, stopped by SIGTERM then SIGKILL. */
  function record(sink, seconds) {
    const args = [`--server=${server}`, `--device=${sink}.monitor`, `--rate=${PULSE_RATE}`];
    args.push('--channels=2', '--format=float32le', '--raw', '--latency-msec=20');
    return new Promise((resolve, reject) => {
      const rec = spawn('parec', args, {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...clientEnv, LANG: 'C' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      /** @type {Buffer[]} */
      const chunks = [];
      let err = '';
      rec.stdout.on('data', (c) => chunks.push(c));
      rec.stderr.on('data', (d) => (err += d));
      const soft = setTimeout(() => rec.kill('SIGTERM'), seconds * 1000);
      const hard = setTimeout(() => rec.kill('SIGKILL'), seconds * 1000 + STOP_TIMEOUT_MS);
      const done = () => {
        clearTimeout(soft);
        clearTimeout(hard);
      };
      rec.once('error', (e) => {
        done();
        reject(new Error(`parec: ${e.message} (install pulseaudio-utils: scripts/setup.sh)`));
      });
      rec.once('exit', () => {
        done();
        const bytes = Buffer.concat(chunks);
        const frames = Math.floor(bytes.length / 8);
        if (frames === 0) {
          reject(new Error(`parec recorded nothing from ${sink}.monitor: ${err.trim()}`));
          return;
        }
        const x = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + frames * 8));
        const left = new Float32Array(frames);
        const right = new Float32Array(frames);
        for (let i = 0; i < frames; i++) {
          left[i] = x[2 * i];
          right[i] = x[2 * i + 1];
        }
        resolve({ left, right, rate: PULSE_RATE });
      });
    });
  }

  /**
   * The tone's sine is SINE_AMPLITUDE at the source; the source's (software) volume scales it.
   * The volume is given as PulseAudio's raw integer (cubic in the linear gain: 65536 is unity),
   * never in dB: pactl reads a value that starts with a sign ("-13.98dB") as a change to the
   * current volume, so setting a tone's level twice halved it again (a second call at 0.1 left
   * the tone at 0.02).
   */
  async function setAmplitude(freq, amp) {
    const source = sources.find((s) => s.freq === freq);
    if (!source) throw new Error(`no tone of ${freq} Hz (tones: ${sources.map((s) => s.freq).join(', ')})`);
    if (!(amp > 0 && amp <= SINE_AMPLITUDE))
      throw new RangeError(`amplitude must be in (0, ${SINE_AMPLITUDE}]: ${amp}`);
    await pactl([
      'set-source-volume',
      source.name,
      String(Math.round(Math.cbrt(amp / SINE_AMPLITUDE) * 65536)),
    ]);
  }
}
