// Audio helpers of the browser tests: a tone as the page's microphone, and the level of known
// tones in what a page plays.

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
 * Captures `seconds` of a page's output (the live session's `captureOutput`) and measures each tone in it (left channel): a
 * Hann-weighted least-squares fit of sine and cosine at the tone's exact frequency, over 100 ms
 * windows for the level (their median, dBFS) and over 20 ms windows every 10 ms for gaps. Short
 * windows keep the drift correction's small frequency offsets (up to 1000 ppm while it
 * acquires) from smearing the fit; the Hann weighting keeps the other tones, 110 Hz away and
 * more, from leaking into it.
 */
export async function measureOutputTones(page, seconds, tones) {
  return page.evaluate(
    async ({ seconds, tones }) => {
      const cap = await window.tutti.session.captureOutput(seconds);
      const x = cap.left;
      const rate = cap.sampleRate;
      const fit = (f, from, len) => {
        let sc = 0, ss = 0, cc = 0, xs = 0, xc = 0;
        const w = (2 * Math.PI * f) / rate;
        for (let i = 0; i < len; i++) {
          const h = 0.5 - 0.5 * Math.cos((2 * Math.PI * (i + 0.5)) / len);
          const n = from + i;
          const s = Math.sin(w * n), c = Math.cos(w * n);
          sc += h * s * c; ss += h * s * s; cc += h * c * c; xs += h * x[n] * s; xc += h * x[n] * c;
        }
        const det = ss * cc - sc * sc;
        const a = (xs * cc - xc * sc) / det;
        const b = (xc * ss - xs * sc) / det;
        const amp = Math.hypot(a, b);
        return amp > 0 ? 20 * Math.log10(amp) : -Infinity;
      };
      const long = Math.round(rate * 0.1);
      const short = Math.round(rate * 0.02);
      const hop = Math.round(rate * 0.01);
      const out = {};
      for (const f of tones) {
        const levels = [];
        for (let at = 0; at + long <= x.length; at += long) levels.push(fit(f, at, long));
        levels.sort((p, q) => p - q);
        const windows = [];
        for (let at = 0; at + short <= x.length; at += hop) windows.push(fit(f, at, short));
        out[f] = { db: levels[Math.floor(levels.length / 2)], windows };
      }
      let peak = 0;
      for (let i = 0; i < x.length; i++) peak = Math.max(peak, Math.abs(x[i]));
      return { frames: x.length, tones: out, peak };
    },
    { seconds, tones },
  );
}

