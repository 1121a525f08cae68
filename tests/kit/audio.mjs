// Audio helpers of the browser tests: a tone as the page's microphone, and the level of known
// tones in what a page plays.
import assert from 'node:assert/strict';

/**
 * Replaces getUserMedia with a sine of `freq` Hz at `amplitude`. The oscillator plays in the
 * page's own AudioContext (the app makes it before asking for the microphone) into a
 * MediaStreamDestination, so the stream is rendered on the same audio thread that consumes it: a
 * second context would bridge the two threads through a FIFO that a busy machine starves,
 * putting gaps into the "microphone" itself.
 */
export function toneMicrophone({ freq, amplitude }) {
  const Native = window.AudioContext;
  let latest = null;
  window.AudioContext = class extends Native {
    constructor(...args) {
      super(...args);
      // eslint-disable-next-line @typescript-eslint/no-this-alias -- kept for the test to read, not an alias for a callback
      latest = this;
    }
  };
  const real = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = async (constraints) => {
    if (!constraints || !constraints.audio) return real(constraints);
    const ctx = latest && latest.state !== 'closed' ? latest : new Native({ sampleRate: 48000 });
    const osc = new OscillatorNode(ctx, { frequency: freq });
    const gain = new GainNode(ctx, { gain: amplitude });
    const dest = ctx.createMediaStreamDestination();
    osc.connect(gain).connect(dest);
    osc.start();
    return dest.stream;
  };
}

/**
 * On a sound-server backend (tests/kit/chromium.mjs): makes getUserMedia open the input device
 * called `label` (tests/kit/pulse.mjs plays a sine of known frequency into each) when the page
 * names none, so that each page of one browser can have a tone of its own while capture stays
 * the browser's real path. Fails like a missing device when there is no such input.
 */
export function pulseMicrophone({ label }) {
  const real = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = async (constraints) => {
    const audio = constraints?.audio;
    if (!audio || (typeof audio === 'object' && audio.deviceId)) return real(constraints);
    const inputs = (await navigator.mediaDevices.enumerateDevices()).filter((d) => d.kind === 'audioinput');
    const device = inputs.find((d) => d.label === label);
    if (!device) {
      throw new DOMException(
        `no input device "${label}" (inputs: ${inputs.map((d) => d.label).join(', ')})`,
        'NotFoundError',
      );
    }
    return real({
      ...constraints,
      audio: { ...(typeof audio === 'object' ? audio : {}), deviceId: { exact: device.deviceId } },
    });
  };
}

/**
 * Captures `seconds` of a page's output (the live session's `captureOutput`) and measures each
 * tone in its left channel with {@link measureTones}.
 */
export async function measureOutputTones(page, seconds, tones, from = 'engine') {
  const cap = await captureOutput(page, seconds, from);
  return measureTones(cap.left, cap.rate, tones);
}

/**
 * The sound check's known answer: `tone` comes back at `expectedDb` ± `tolDb` dBFS, and none of
 * `others` (frequencies where nothing plays) comes within 50 dB of that level. With `input`
 * (the microphone measured as the browser hands it to the engine), a line the input itself
 * already carries passes when the engine's output has it no more than 1 dB stronger (scaled by
 * the level the tone comes back at): the engine added nothing there. Firefox resamples the
 * microphone to its graph's clock, and in some runs that leaves lines 45 dB below the tone.
 * @param {{ tones: Record<number, { db: number }> }} report  from measureOutputTones
 * @param {number} tone
 * @param {number[]} others
 * @param {number} expectedDb
 * @param {number} tolDb
 * @param {{ tones: Record<number, { db: number }> }} [input]  from measureOutputTones(…, 'input')
 */
export function assertToneBack(report, tone, others, expectedDb, tolDb, input) {
  const db = report.tones[tone].db;
  assert.ok(
    Math.abs(db - expectedDb) <= tolDb,
    `${tone} Hz back at ${db.toFixed(2)} dBFS, expected ${expectedDb.toFixed(2)} ± ${tolDb}`,
  );
  for (const f of others) {
    const out = report.tones[f].db;
    if (out < expectedDb - 50) continue;
    assert.ok(input, `${f} Hz at ${out.toFixed(1)} dBFS: the tone is not clean`);
    const inLine = input.tones[f].db + (db - input.tones[tone].db);
    assert.ok(
      out <= inLine + 1,
      `${f} Hz at ${out.toFixed(1)} dBFS: the tone is not clean, and the input has it at ${inLine.toFixed(1)} (scaled to the output)`,
    );
  }
}

/** A remote tone arrives at the microphone's amplitude (0.1) × the centre pan gain, dBFS. */
export const REMOTE_TONE_DB = 20 * Math.log10(0.1 * Math.SQRT1_2);

/**
 * Page `i` of a room whose page k plays `tones[k]` hears every other page's tone at
 * REMOTE_TONE_DB ± `tolDb` and not its own (at least 30 dB below): measured over 2 s of its
 * output, printed with `label`, asserted.
 * @param {import('playwright-core').Page[]} pages
 * @param {number} i
 * @param {number[]} tones
 * @param {string} label
 */
export async function checkHearsOthers(pages, i, tones, label, tolDb = 1.5) {
  const r = await measureOutputTones(pages[i], 2, tones);
  console.log(
    `${label}: page ${i} hears ${tones.map((f) => `${f} Hz ${r.tones[f].db.toFixed(1)}`).join(', ')} dBFS`,
  );
  tones.forEach((f, j) => {
    const db = r.tones[f].db;
    if (j === i) assert.ok(db < REMOTE_TONE_DB - 30, `${label}: page ${i} hears itself at ${db.toFixed(1)}`);
    else
      assert.ok(
        Math.abs(db - REMOTE_TONE_DB) <= tolDb,
        `${label}: page ${i} hears ${f} Hz at ${db.toFixed(1)} dBFS, expected ${REMOTE_TONE_DB.toFixed(1)} ± ${tolDb}`,
      );
  });
}

/**
 * `seconds` of a page's output, both channels, as the live session's `captureOutput` taps it
 * (`from` 'input': the microphone as the browser hands it to the engine).
 * @returns {Promise<{ left: Float32Array, right: Float32Array, rate: number }>}
 */
export async function captureOutput(page, seconds, from = 'engine') {
  const cap = await page.evaluate(
    async ([s, f]) => {
      const c = await window.tutti.session.captureOutput(s, f);
      return { left: Array.from(c.left), right: Array.from(c.right), rate: c.sampleRate };
    },
    [seconds, from],
  );
  return { left: Float32Array.from(cap.left), right: Float32Array.from(cap.right), rate: cap.rate };
}

/**
 * Measures each tone in one channel `x`: a Hann-weighted least-squares fit of sine and cosine
 * at the tone's exact frequency, over 100 ms windows for the level (their median, dBFS) and
 * over 20 ms windows every 10 ms for gaps. Short windows keep the drift correction's small
 * frequency offsets (up to 1000 ppm while it acquires) from smearing the fit; the Hann
 * weighting keeps the other tones, 110 Hz away and more, from leaking into it.
 * @param {ArrayLike<number>} x
 * @param {number} rate
 * @param {number[]} tones
 */
export function measureTones(x, rate, tones) {
  const short = Math.round(rate * 0.02);
  const hop = Math.round(rate * 0.01);
  /** @type {Record<number, { db: number, windows: number[] }>} */
  const out = {};
  for (const f of tones) {
    const windows = [];
    for (let at = 0; at + short <= x.length; at += hop) windows.push(toneDb(x, f, rate, at, short));
    out[f] = { db: toneDbMedian(x, f, rate, 0.1), windows };
  }
  let peak = 0;
  for (let i = 0; i < x.length; i++) peak = Math.max(peak, Math.abs(x[i]));
  return { frames: x.length, tones: out, peak };
}

/**
 * Level in dBFS of a sine of `freq` Hz in `x[from, from + len)`: a Hann-weighted least-squares
 * fit of sine and cosine at that exact frequency.
 */
export function toneDb(x, freq, rate, from = 0, len = x.length - from) {
  let sc = 0,
    ss = 0,
    cc = 0,
    xs = 0,
    xc = 0;
  const w = (2 * Math.PI * freq) / rate;
  for (let i = 0; i < len; i++) {
    const h = 0.5 - 0.5 * Math.cos((2 * Math.PI * (i + 0.5)) / len);
    const n = from + i;
    const s = Math.sin(w * n),
      c = Math.cos(w * n);
    sc += h * s * c;
    ss += h * s * s;
    cc += h * c * c;
    xs += h * x[n] * s;
    xc += h * x[n] * c;
  }
  const det = ss * cc - sc * sc;
  const a = (xs * cc - xc * sc) / det;
  const b = (xc * ss - xs * sc) / det;
  const amp = Math.hypot(a, b);
  return amp > 0 ? 20 * Math.log10(amp) : -Infinity;
}

/**
 * Median level in dBFS of a sine of `freq` Hz over windows of `windowS` seconds: short windows
 * keep a drift-corrected stream's tiny frequency offset (tens of ppm) from lowering the fit.
 */
export function toneDbMedian(x, freq, rate, windowS = 0.1) {
  const len = Math.round(rate * windowS);
  const levels = [];
  for (let at = 0; at + len <= x.length; at += len) levels.push(toneDb(x, freq, rate, at, len));
  levels.sort((a, b) => a - b);
  return levels[Math.floor(levels.length / 2)];
}

/**
 * The frequency of the strongest sine near `guess` (± `span` Hz) in `x`, to ~0.01 Hz: the level
 * fit scanned on a grid, then refined around its peak.
 */
export function toneFrequency(x, guess, rate, span = 20) {
  let best = guess;
  let bestDb = -Infinity;
  for (let step = 1; step >= 0.01; step /= 10) {
    const from = best - (step === 1 ? span : step * 10);
    const to = best + (step === 1 ? span : step * 10);
    for (let f = from; f <= to + 1e-9; f += step) {
      const db = toneDb(x, f, rate);
      if (db > bestDb) {
        bestDb = db;
        best = f;
      }
    }
  }
  return best;
}
