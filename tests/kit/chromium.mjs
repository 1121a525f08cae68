// Headless Chromium for the browser tests and the benchmark runner: Debian's /usr/bin/chromium
// driven by playwright-core (its own browser downloads are not used).
//
// Audio backends:
// - 'fake': Chromium's own fake audio device, what headless Chromium does by itself. It calls
//   back every 10 ms and renders 480 frames each time: three or four 128-frame quanta back to
//   back. The microphone is Chromium's fake capture device (or a page's own replacement).
// - 'pulse-128', 'pulse-256': a private PulseAudio server (tests/kit/pulse.mjs: a null sink,
//   sine sources as microphones) with `--audio-buffer-size=128|256`: one callback, one or two
//   quanta, every 2.67 or 5.33 ms, as a laptop with a small buffer does. Capture comes from the
//   sound server too (Chromium's fake capture device would replace it), and playwright's
//   `--mute-audio` is left out (it would cut the output stream, and with it the callbacks).
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { startPulse } from './pulse.mjs';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Flags for a quiet, reproducible headless Chromium (no sandbox: tests run as root in CI). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** @typedef {'fake' | 'pulse-128' | 'pulse-256'} AudioBackend */
/** @type {AudioBackend[]} */
export const AUDIO_BACKENDS = ['fake', 'pulse-128', 'pulse-256'];

/**
 * Whether `name` is one of AUDIO_BACKENDS (for names from the command line or the environment).
 * @param {string} name
 * @returns {name is AudioBackend}
 */
export function isAudioBackend(name) {
  return AUDIO_BACKENDS.some((b) => b === name);
}

/** Frames per audio callback of each backend (the fake device's 10 ms at 48 kHz). */
export const BACKEND_CALLBACK_FRAMES = { fake: 480, 'pulse-128': 128, 'pulse-256': 256 };

/** Flags that make Chromium capture from its fake device instead of the sound server. */
const FAKE_CAPTURE = /^--use-fake-device-for-media-stream$|^--use-file-for-fake-audio-capture(=|$)/;

/**
 * @typedef {object} BrowserAudio
 * @property {AudioBackend} backend
 * @property {number} callbackFrames  frames per audio callback the backend asks for
 * @property {import('./pulse.mjs').PulseServer | null} pulse  the sound server (pulse backends)
 */

/** @type {WeakMap<import('playwright-core').Browser, BrowserAudio>} */
const audioOf = new WeakMap();

/**
 * The audio backend a browser was launched with ('fake' for one this module did not launch).
 * @param {import('playwright-core').Browser} browser
 * @returns {BrowserAudio}
 */
export function browserAudio(browser) {
  return (
    audioOf.get(browser) ?? { backend: 'fake', callbackFrames: BACKEND_CALLBACK_FRAMES.fake, pulse: null }
  );
}

/**
 * Launches headless Chromium.
 * @param {string[]} [extraArgs] flags added to CHROMIUM_ARGS
 * @param {{ backend?: AudioBackend, pulse?: import('./pulse.mjs').PulseServer, tones?: number[] }} [opts]
 *   backend: 'fake' (default) or a pulse backend. For a pulse backend, `pulse` is a running
 *   server (startPulse) to play through; without one a server is started with sine sources of
 *   `tones` Hz (default 440) and stopped when the browser goes away.
 */
export async function launchChromium(extraArgs = [], { backend = 'fake', pulse, tones } = {}) {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM} (set CHROMIUM_PATH, or run scripts/setup.sh)`);
  if (!isAudioBackend(backend)) {
    throw new RangeError(`audio backend ${backend}: expected one of ${AUDIO_BACKENDS.join(', ')}`);
  }
  const callbackFrames = BACKEND_CALLBACK_FRAMES[backend];
  if (backend === 'fake') {
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [...CHROMIUM_ARGS, ...extraArgs],
    });
    audioOf.set(browser, { backend, callbackFrames, pulse: null });
    return browser;
  }
  const server = pulse ?? (await startPulse(tones ? { tones } : {}));
  let browser;
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        ...CHROMIUM_ARGS,
        ...extraArgs.filter((a) => !FAKE_CAPTURE.test(a)),
        `--audio-buffer-size=${callbackFrames}`,
      ],
      ignoreDefaultArgs: ['--mute-audio'],
      env: { ...process.env, ...server.env },
    });
  } catch (err) {
    if (!pulse) await server.stop();
    throw err;
  }
  if (!pulse) browser.on('disconnected', () => void server.stop());
  audioOf.set(browser, { backend, callbackFrames, pulse: server });
  return browser;
}
