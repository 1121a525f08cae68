// Concealment for the plain-JavaScript engine (js-engine-core.ts), following core/src/conceal.rs:
// on the first missing block of a run, a pitch search over the last HISTORY_NEED frames of output
// picks a loop length (8:1 decimated search, refined at full rate over ±4 frames); the loop
// continues the waveform (junction offset so it never jumps), held for 10 ms then faded out over
// 40 ms; real audio fades back in over 128 frames with a raised
// cosine. The history is not copied block by block: real blocks are recorded as tokens naming the
// jitter buffer's stored payloads, decoded again only when a run starts; synthesized and crossfaded
// blocks are copied into a ring.

/** Frames of copied output kept. */
const HIST_FRAMES = 2048;
const SEARCH_FRAMES = 256;
const MIN_LAG = 128;
const MAX_LAG = 768;
/** Frames of output the pitch search reads. */
export const HISTORY_NEED = SEARCH_FRAMES + MAX_LAG;
/** Longest block recorded by reference. */
export const MAX_REF_FRAMES = 256;
const JUNCTION_FRAMES = 32;
const HOLD_FRAMES = 480;
const FADE_FRAMES = 1920;
const RECOVER_FRAMES = 128;
const DECIM = 8;
const REFINE = DECIM / 2;
/** Frames compared by the full-rate refinement (the most recent ones). */
const REFINE_FRAMES = 128;
const SILENCE_POWER = 1e-10;
const RUN_END = HOLD_FRAMES + FADE_FRAMES;
/** History entries kept (newest last). */
const MAX_ENTRIES = 64;
const WORK_FRAMES = HISTORY_NEED + MAX_REF_FRAMES;
const MODE_REAL = 0;
const MODE_CONCEALING = 1;
const MODE_RECOVERING = 2;
const ENTRY_COPIED = 0;
const ENTRY_ZEROS = 1;
const ENTRY_HELD = 2;

/** Raised-cosine fade-in weight of frame i of n. */
export function fadeInWeight(i: number, n: number): number {
  return 0.5 - 0.5 * Math.cos(Math.PI * ((i + 0.5) / n));
}

function runGain(n: number): number {
  return n < HOLD_FRAMES ? 1 : n < RUN_END ? 1 - (n - HOLD_FRAMES) / FADE_FRAMES : 0;
}

/** Sum of squares of x[at, at+n). */
function energy(x: Float32Array, at: number, n: number): number {
  let s0 = 0;
  let s1 = 0;
  for (let k = 0; k < n; k += 2) {
    s0 += x[at + k] * x[at + k];
    s1 += x[at + k + 1] * x[at + k + 1];
  }
  return s0 + s1;
}

/** The lag in [lo, hi] whose segment of x[0, len) best matches its last n samples; -1 if none.
 * The segment energy slides with the lag (one sample enters, one leaves). */
function bestLag(x: Float32Array, len: number, n: number, lo: number, hi: number): number {
  const target = len - n;
  let best = -1;
  let bestScore = 0;
  let e = energy(x, target - lo, n);
  for (let lag = lo; lag <= hi; lag++) {
    const seg = target - lag;
    if (lag > lo) e += x[seg] * x[seg] - x[len - lag] * x[len - lag];
    let c = 0;
    for (let k = 0; k < n; k++) c += x[target + k] * x[seg + k];
    if (c <= 0 || e <= 0) continue;
    const score = (c * c) / e;
    if (best < 0 || score > bestScore) {
      best = lag;
      bestScore = score;
    }
  }
  return best;
}

/** Whoever holds the payloads that history tokens name (the jitter buffer). */
export interface TokenDecoder {
  /** Decodes the block `token` names into L/R from `at` (silence if it is gone). */
  decodeToken(token: number, L: Float32Array, R: Float32Array, at: number): void;
}

/** A peer's concealment: history, pitch search, loop, fade and recovery. Real-time safe after
 * construction (which allocates every buffer). */
export class Concealer {
  readonly histL = new Float32Array(HIST_FRAMES);
  readonly histR = new Float32Array(HIST_FRAMES);
  pos = 0;
  readonly entKind = new Uint8Array(MAX_ENTRIES);
  /** Frames (copied, zeros) or token (held). */
  readonly entValue = new Uint32Array(MAX_ENTRIES);
  /** Frames of a held entry. */
  readonly entFrames = new Uint32Array(MAX_ENTRIES);
  newest = 0;
  count = 0;
  readonly workL = new Float32Array(WORK_FRAMES);
  readonly workR = new Float32Array(WORK_FRAMES);
  readonly mono = new Float32Array(HISTORY_NEED);
  readonly deci = new Float32Array(HISTORY_NEED / DECIM);
  readonly loopL = new Float32Array(MAX_LAG);
  readonly loopR = new Float32Array(MAX_LAG);
  period = MAX_LAG;
  phase = 0;
  run = RUN_END;
  mode = MODE_CONCEALING;
  done = 0;

  /** `store` decodes the payloads that tokens name. */
  constructor(private readonly store: TokenDecoder) {}

  reset(): void {
    this.count = 0;
    this.period = MAX_LAG;
    this.phase = 0;
    this.run = RUN_END;
    this.mode = MODE_CONCEALING;
    this.done = 0;
  }

  /** Audio `L/R[at, at+n)` is played (and copied into the history). */
  play(L: Float32Array, R: Float32Array, at: number, n: number): void {
    if (this.mode === MODE_CONCEALING) {
      this.mode = MODE_RECOVERING;
      this.done = 0;
    }
    if (this.mode === MODE_RECOVERING) this.recover(L, R, at, n);
    this.record(L, R, at, n);
  }

  /** Real audio that the store still holds under `token` is played: recorded by reference
   * unless a recovery crossfade changes it. */
  playRef(L: Float32Array, R: Float32Array, at: number, n: number, token: number): void {
    if (this.mode === MODE_REAL && n <= MAX_REF_FRAMES) {
      if (n > 0) this.pushEntry(ENTRY_HELD, token, n);
      return;
    }
    this.play(L, R, at, n);
  }

  private recover(L: Float32Array, R: Float32Array, at: number, len: number): void {
    const done = this.done;
    const n = Math.min(len, RECOVER_FRAMES - done);
    const silent = this.run >= RUN_END;
    for (let i = 0; i < n; i++) {
      const w = fadeInWeight(done + i, RECOVER_FRAMES);
      let cl = 0;
      let cr = 0;
      if (!silent) {
        const g = runGain(this.run + i);
        const p = (this.phase + i) % this.period;
        cl = this.loopL[p] * g;
        cr = this.loopR[p] * g;
      }
      L[at + i] = w * L[at + i] + (1 - w) * cl;
      R[at + i] = w * R[at + i] + (1 - w) * cr;
    }
    this.phase = (this.phase + n) % this.period;
    this.run = Math.min(this.run + n, RUN_END);
    if (done + n >= RECOVER_FRAMES) this.mode = MODE_REAL;
    else this.done = done + n;
  }

  /** Writes a continuation into `L/R[at, at+n)`; returns false when it is silence. */
  conceal(L: Float32Array, R: Float32Array, at: number, n: number): boolean {
    if (this.mode !== MODE_CONCEALING) this.startRun();
    const audible = this.run < RUN_END;
    if (audible) {
      const period = this.period;
      let p = this.phase;
      for (let i = 0; i < n; i++) {
        const g = runGain(this.run + i);
        L[at + i] = this.loopL[p] * g;
        R[at + i] = this.loopR[p] * g;
        if (++p === period) p = 0;
      }
      this.phase = p;
      this.run = Math.min(this.run + n, RUN_END);
      this.record(L, R, at, n);
    } else {
      L.fill(0, at, at + n);
      R.fill(0, at, at + n);
      this.pushEntry(ENTRY_ZEROS, n, 0);
    }
    return audible;
  }

  /** The audio is about to jump (blocks dropped): the next real block crossfades from a
   * continuation of what was played. */
  splice(): void {
    this.startRun();
  }

  /** The store's buffers are about to be re-laid out: copy what the references name. */
  detach(): void {
    let held = false;
    for (let k = 1; k <= this.count; k++) {
      if (this.entKind[(this.newest + MAX_ENTRIES - k) % MAX_ENTRIES] === ENTRY_HELD) held = true;
    }
    if (!held) return;
    this.assemble();
    this.count = 0;
    this.copyIn(this.workL, this.workR, WORK_FRAMES - HISTORY_NEED, HISTORY_NEED);
    this.pushEntry(ENTRY_COPIED, HISTORY_NEED, 0);
  }

  private pushEntry(kind: number, value: number, frames: number): void {
    if (this.count > 0 && kind !== ENTRY_HELD) {
      const last = (this.newest + MAX_ENTRIES - 1) % MAX_ENTRIES;
      if (this.entKind[last] === kind) {
        this.entValue[last] += value;
        return;
      }
    }
    this.entKind[this.newest] = kind;
    this.entValue[this.newest] = value;
    this.entFrames[this.newest] = frames;
    this.newest = (this.newest + 1) % MAX_ENTRIES;
    if (this.count < MAX_ENTRIES) this.count++;
  }

  private record(L: Float32Array, R: Float32Array, at: number, n: number): void {
    this.copyIn(L, R, at, n);
    this.pushEntry(ENTRY_COPIED, n, 0);
  }

  private copyIn(L: Float32Array, R: Float32Array, at: number, len: number): void {
    const skip = len > HIST_FRAMES ? len - HIST_FRAMES : 0;
    const hl = this.histL;
    const hr = this.histR;
    let pos = this.pos;
    for (let i = at + skip, end = at + len; i < end; i++) {
      hl[pos] = L[i];
      hr[pos] = R[i];
      if (++pos === HIST_FRAMES) pos = 0;
    }
    this.pos = pos;
  }

  /** The last HISTORY_NEED frames of output into work[WORK_FRAMES − HISTORY_NEED, WORK_FRAMES). */
  private assemble(): void {
    const lo = WORK_FRAMES - HISTORY_NEED;
    const wl = this.workL;
    const wr = this.workR;
    let p = WORK_FRAMES;
    // One past the newest copied frame not yet placed.
    let copiedEnd = this.pos;
    for (let k = 1; k <= this.count && p > lo; k++) {
      const e = (this.newest + MAX_ENTRIES - k) % MAX_ENTRIES;
      const kind = this.entKind[e];
      if (kind === ENTRY_ZEROS) {
        const n = Math.min(this.entValue[e], p - lo);
        wl.fill(0, p - n, p);
        wr.fill(0, p - n, p);
        p -= n;
      } else if (kind === ENTRY_COPIED) {
        const f = this.entValue[e];
        const n = Math.min(f, p - lo);
        let h = copiedEnd;
        for (let back = 1; back <= n; back++) {
          h = h === 0 ? HIST_FRAMES - 1 : h - 1;
          wl[p - back] = this.histL[h];
          wr[p - back] = this.histR[h];
        }
        copiedEnd = (copiedEnd + HIST_FRAMES - (f % HIST_FRAMES)) % HIST_FRAMES;
        p -= n;
      } else {
        const n = Math.min(this.entFrames[e], p);
        this.store.decodeToken(this.entValue[e], wl, wr, p - n);
        p -= n;
      }
    }
    if (p > lo) {
      wl.fill(0, lo, p);
      wr.fill(0, lo, p);
    }
  }

  private startRun(): void {
    this.mode = MODE_CONCEALING;
    this.run = 0;
    this.phase = 0;
    this.assemble();
    const lo = WORK_FRAMES - HISTORY_NEED;
    const wl = this.workL;
    const wr = this.workR;
    const mono = this.mono;
    for (let k = 0; k < HISTORY_NEED; k++) mono[k] = 0.5 * (wl[lo + k] + wr[lo + k]);
    if (energy(mono, HISTORY_NEED - SEARCH_FRAMES, SEARCH_FRAMES) <= SILENCE_POWER * SEARCH_FRAMES) {
      this.run = RUN_END;
      return;
    }
    const deci = this.deci;
    for (let d = 0; d < deci.length; d++) {
      const k = d * DECIM;
      deci[d] =
        mono[k] +
        mono[k + 1] +
        mono[k + 2] +
        mono[k + 3] +
        mono[k + 4] +
        mono[k + 5] +
        mono[k + 6] +
        mono[k + 7];
    }
    const coarse = bestLag(deci, deci.length, SEARCH_FRAMES / DECIM, MIN_LAG / DECIM, MAX_LAG / DECIM);
    let period = MAX_LAG;
    if (coarse >= 0) {
      const from = Math.max(coarse * DECIM - REFINE, MIN_LAG);
      const to = Math.min(coarse * DECIM + REFINE, MAX_LAG);
      const fine = bestLag(mono, HISTORY_NEED, REFINE_FRAMES, from, to);
      period = fine >= 0 ? fine : coarse * DECIM;
    }
    this.period = period;
    for (let c = 0; c < 2; c++) {
      const hist = c === 0 ? wl : wr;
      const lp = c === 0 ? this.loopL : this.loopR;
      const end = WORK_FRAMES;
      for (let k = 0; k < period; k++) lp[k] = hist[end - period + k];
      const offset = hist[end - 1] - hist[end - 1 - period];
      for (let k = 0; k < JUNCTION_FRAMES; k++) {
        const v = lp[k] + offset * (1 - k / JUNCTION_FRAMES);
        lp[k] = v > 1 ? 1 : v < -1 ? -1 : v;
      }
    }
  }
}
