// Firefox ESR and WebKitGTK for the browser tests, over W3C WebDriver.
//
// Chromium is driven through playwright-core; the other two engines are Debian's own builds,
// which playwright cannot drive (it needs its patched browsers), so they are driven the standard
// way: geckodriver (crates.io, installed by scripts/setup.sh) for Firefox ESR, and WebKitGTK's
// WebDriver (`WebKitWebDriver`, which runs WebKitGTK's MiniBrowser, the engine Safari uses) for
// WebKit. The protocol client is selenium-webdriver; this module only starts the driver process
// itself (so its pid is ours), on a free loopback port, with the environment that points the
// browser at the tests' sound server, and stops exactly that process.
//
// Both browsers need a sound server to open an audio device at all (neither has Chromium's fake
// output): tests/kit/pulse.mjs provides one, whose default input plays a known tone, so the
// microphone is the browser's real capture path. Firefox runs headless (`-headless`); WebKitGTK's
// MiniBrowser has no headless mode and opens a window on a private Xvfb display started here
// (its pid ours too, stopped with the driver).
//
// `openEngine` hands back a small page object with the calls the tests use (goto, evaluate,
// click on a test id, text of a test id): the same shape as the playwright page where the shared
// helpers (tests/kit/audio.mjs) need it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { WebDriver } from 'selenium-webdriver';
import { Executor, HttpClient } from 'selenium-webdriver/http/index.js';
import { freeTcpPort } from './ports.mjs';

const START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 5_000;
/** How long a click may wait for its element to take it. */
const CLICK_TIMEOUT_MS = 10_000;
/** A page's answer to one script, past the driver's own 60 s script timeout. */
const ANSWER_TIMEOUT_MS = 75_000;
/** A browser's start, up to its first blank page. */
const SESSION_TIMEOUT_MS = 30_000;
const POLL_MS = 100;
/** Lines of the driver's output kept for error messages. */
const LOG_LINES = Number(process.env.TUTTI_WEBDRIVER_LOG_LINES ?? 40);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * @typedef {'firefox' | 'webkit'} Engine
 * @typedef {object} EngineSpec
 * @property {string} label  how the tests name the engine
 * @property {string} driver  the WebDriver server's executable
 * @property {(port: number) => string[]} driverArgs
 * @property {() => Record<string, unknown>} capabilities
 * @property {boolean} display  whether the browser needs an X display (one is started)
 */

/** Where `cargo install` puts geckodriver, when it is not on PATH. */
const GECKODRIVER =
  [join(homedir(), '.cargo', 'bin', 'geckodriver'), '/usr/local/bin/geckodriver'].find((p) =>
    existsSync(p),
  ) ?? 'geckodriver';
const WEBKIT_BROWSER =
  [
    '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
    '/usr/lib/aarch64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
  ].find((p) => existsSync(p)) ?? 'MiniBrowser';

/** @type {Record<Engine, EngineSpec>} */
export const ENGINES = {
  firefox: {
    label: 'Firefox ESR',
    driver: GECKODRIVER,
    driverArgs: (port) => [
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--log',
      process.env.TUTTI_WEBDRIVER_LOG ?? 'warn',
    ],
    display: false,
    capabilities: () => ({
      browserName: 'firefox',
      'moz:firefoxOptions': {
        binary: '/usr/bin/firefox-esr',
        args: ['-headless'],
        prefs: {
          // Audio starts without a click, as Chromium's --autoplay-policy flag allows.
          'media.autoplay.default': 0,
          'media.autoplay.blocking_policy': 0,
          'media.autoplay.block-webaudio': false,
          // The microphone without a permission prompt: the sound server's default input.
          'media.navigator.permission.disabled': true,
          'media.navigator.streams.fake': false,
          // One-machine WebRTC, as Chromium's flags in tests/kit/harness.mjs: candidates on
          // 127.0.0.1 (pages join with `?ice=loopback`), addresses not hidden behind mDNS names.
          'media.peerconnection.ice.loopback': true,
          'media.peerconnection.ice.obfuscate_host_addresses': false,
          // Nothing phones home from a test.
          'app.update.enabled': false,
          'browser.shell.checkDefaultBrowser': false,
          'datareporting.policy.dataSubmissionEnabled': false,
          'toolkit.telemetry.enabled': false,
        },
      },
    }),
  },
  webkit: {
    label: 'WebKitGTK',
    driver: 'WebKitWebDriver',
    driverArgs: (port) => ['--host=127.0.0.1', `--port=${port}`],
    display: true,
    capabilities: () => ({
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': {
        binary: WEBKIT_BROWSER,
        args: [
          '--automation',
          '--enable-media-stream=true',
          '--enable-webrtc=true',
          '--enable-mediasource=true',
          '--media-playback-requires-user-gesture=false',
        ],
      },
    }),
  },
};

/**
 * A process of ours: spawned in its own group (so what it starts goes with it), its output's
 * last lines kept, stopped by its pid (SIGTERM, then SIGKILL after 5 s), and killed should this
 * process exit first.
 * @param {string} cmd
 * @param {string[]} args
 * @param {Record<string, string | undefined>} env
 * @param {import('node:child_process').StdioOptions} [stdio]
 */
function owned(cmd, args, env, stdio = ['ignore', 'pipe', 'pipe']) {
  /** @type {string[]} */
  const logs = [];
  const keep = (/** @type {Buffer} */ chunk) => {
    for (const line of chunk.toString().split('\n')) if (line.trim()) logs.push(line);
    if (logs.length > LOG_LINES) logs.splice(0, logs.length - LOG_LINES);
  };
  const child = spawn(cmd, args, { env, stdio, detached: true });
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  /** @type {{ why: string | null }} */
  const state = { why: null };
  child.once('error', (e) => (state.why = `could not start ${cmd}: ${e.message}`));
  child.once('exit', (code, sig) => (state.why ??= `${cmd} exited (${code ?? sig})`));
  const kill = (/** @type {NodeJS.Signals} */ sig) => {
    try {
      if (child.pid !== undefined && state.why === null) process.kill(-child.pid, sig);
    } catch {
      /* gone already */
    }
  };
  const onExit = () => kill('SIGKILL');
  process.once('exit', onExit);
  return {
    child,
    logs,
    /** Why it ended, or null while it runs. */
    ended: () => state.why,
    stop: async () => {
      process.off('exit', onExit);
      if (state.why !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      kill('SIGTERM');
      const t = setTimeout(() => kill('SIGKILL'), STOP_TIMEOUT_MS);
      await gone;
      clearTimeout(t);
    },
  };
}

/**
 * Starts Xvfb on a free display (it names it on a pipe: -displayfd), bounded.
 * @returns {Promise<{ display: string, stop: () => Promise<void> }>}
 */
async function startXvfb() {
  const x = owned(
    'Xvfb',
    ['-displayfd', '3', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'],
    { ...process.env },
    ['ignore', 'pipe', 'pipe', 'pipe'],
  );
  const fd3 = /** @type {import('node:stream').Readable} */ (x.child.stdio[3]);
  let out = '';
  fd3.on('data', (c) => (out += c.toString()));
  const end = Date.now() + START_TIMEOUT_MS;
  while (!out.includes('\n')) {
    const why = x.ended();
    if (why !== null || Date.now() > end) {
      await x.stop();
      throw new Error(`Xvfb: ${why ?? `no display within ${START_TIMEOUT_MS} ms`}\n${x.logs.join('\n')}`);
    }
    await sleep(POLL_MS);
  }
  return { display: `:${out.trim()}`, stop: x.stop };
}

/**
 * A page of a WebDriver session: the calls the tests make.
 * @typedef {object} EnginePage
 * @property {Engine} engine
 * @property {string} label
 * @property {import('selenium-webdriver').WebDriver} driver
 * @property {(url: string) => Promise<void>} goto
 * @property {<A, R>(fn: (arg: A) => R | Promise<R>, arg?: A) => Promise<R>} evaluate
 *   runs `fn(arg)` in the page (its source is sent: it must not close over anything) and
 *   resolves with its (awaited) value
 * @property {(testId: string) => Promise<void>} click  a real click on `[data-testid=testId]`
 * @property {(testId: string) => Promise<string>} text  that element's text
 * @property {(testId: string, value: string) => Promise<void>} fill  types `value` into that
 *   (emptied) input
 * @property {(timeoutMs: number, what: string, fn: () => unknown) => Promise<any>} waitFor
 *   polls `fn` in the page until it returns something truthy (bounded); resolves with it
 * @property {string[]} logs  the driver's last output lines
 * @property {() => Promise<void>} close  ends the session and the driver
 */

/**
 * Starts `engine`'s WebDriver server and a headless browser session.
 * @param {Engine} engine
 * @param {{ env?: Record<string, string> }} [opts]  added to the driver's (and so the browser's)
 *   environment: the sound server's
 * @returns {Promise<EnginePage>}
 */
export async function openEngine(engine, { env = {} } = {}) {
  const spec = ENGINES[engine];
  const port = await freeTcpPort();
  const x = spec.display ? await startXvfb() : null;
  const proc = owned(spec.driver, spec.driverArgs(port), {
    ...process.env,
    ...env,
    ...(x ? { DISPLAY: x.display } : {}),
  });
  const logs = proc.logs;
  const stopDriver = async () => {
    await proc.stop();
    await x?.stop();
  };

  const url = `http://127.0.0.1:${port}`;
  const end = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const why = proc.ended();
    if (why !== null) {
      await x?.stop();
      throw new Error(`${spec.label}: ${why}\n${logs.join('\n')}`);
    }
    const ready = await fetch(`${url}/status`)
      .then((r) => r.json())
      .then((j) => j?.value?.ready !== false)
      .catch(() => false);
    if (ready) break;
    if (Date.now() > end) {
      await stopDriver();
      throw new Error(
        `${spec.label}: the WebDriver server did not answer within ${START_TIMEOUT_MS} ms\n${logs.join('\n')}`,
      );
    }
    await sleep(POLL_MS);
  }

  /** @type {import('selenium-webdriver').WebDriver} */
  let driver;
  try {
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no answer within ${SESSION_TIMEOUT_MS} ms`)),
        SESSION_TIMEOUT_MS,
      );
    });
    driver = /** @type {import('selenium-webdriver').WebDriver} */ (
      await Promise.race([
        WebDriver.createSession(new Executor(new HttpClient(url)), spec.capabilities()),
        late,
      ]).finally(() => clearTimeout(timer))
    );
  } catch (e) {
    await stopDriver();
    throw new Error(
      `${spec.label}: no browser session: ${e instanceof Error ? e.message : e}\n${logs.join('\n')}`,
      { cause: e },
    );
  }
  await driver.manage().setTimeouts({ script: 60_000, pageLoad: 30_000 });

  /** @type {EnginePage['evaluate']} */
  const evaluate = (fn, arg) => {
    // The driver bounds a script's promise (the script timeout), not a page that never answers.
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${spec.label}: the page did not answer within ${ANSWER_TIMEOUT_MS} ms`)),
        ANSWER_TIMEOUT_MS,
      );
    });
    return Promise.race([
      driver.executeScript(`return (${fn.toString()})(arguments[0]);`, arg === undefined ? null : arg),
      late,
    ]).finally(() => clearTimeout(timer));
  };
  const byTestId = (/** @type {string} */ id) => driver.findElement({ css: `[data-testid="${id}"]` });
  return {
    engine,
    label: spec.label,
    driver,
    logs,
    goto: (u) => driver.get(u),
    evaluate,
    click: async (id) => {
      // A page still laying out (a loaded machine) may hold the element back for a moment: try
      // again while the browser says it cannot take the click yet, for up to 10 s.
      const until = Date.now() + CLICK_TIMEOUT_MS;
      for (;;) {
        try {
          await (await byTestId(id)).click();
          return;
        } catch (e) {
          const name = e instanceof Error ? e.name : '';
          const retry = [
            'ElementNotInteractableError',
            'ElementClickInterceptedError',
            'StaleElementReferenceError',
            'NoSuchElementError',
          ];
          if (!retry.includes(name) || Date.now() > until) throw e;
          await sleep(POLL_MS);
        }
      }
    },
    text: async (id) => (await byTestId(id)).getText(),
    fill: async (id, value) => {
      const el = await byTestId(id);
      await el.clear();
      await el.sendKeys(value);
    },
    waitFor: async (timeoutMs, what, fn) => {
      const until = Date.now() + timeoutMs;
      let last;
      for (;;) {
        last = await evaluate(fn);
        if (last) return last;
        if (Date.now() > until) throw new Error(`${spec.label}: ${what} not within ${timeoutMs} ms`);
        await sleep(250);
      }
    },
    close: async () => {
      await Promise.race([driver.quit().catch(() => {}), sleep(STOP_TIMEOUT_MS)]);
      await stopDriver();
    },
  };
}
