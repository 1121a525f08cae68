// A plain-JavaScript engine that does the same work as the WASM engine (core/src/engine.rs),
// written the way a careful JavaScript author would: typed arrays sized up front, one class shape
// per concept, no allocation per quantum or per packet. The benchmark runs it beside the WASM
// engine (bench/README.md); it is also a readable reference of the render path.
//
// Per 128-frame quantum, `process()`:
// 1. drains the inbound ring: each record's packet is checked (the rules of core/src/packet.rs)
//    and its payload bytes stored in its peer's jitter buffer by sequence number, stamped with
//    the quantum's `now`;
// 2. for every active peer: updates the drift loop (two one-pole stages + a narrowing PI loop on
//    the buffer fill, clamped to ±1000 ppm, slew-limited), pulls blocks from the jitter buffer
//    (real audio decoded straight into contiguous staging, concealment by pitch-period
//    repetition with a fade, or silence before start) until a quantum is covered, and resamples
//    with a 4-tap cubic (Lagrange) whose integer offset is constant over the quantum and whose
//    fraction moves linearly; the same pass meters the source (pre-fader) and adds it, gained
//    and panned with a per-quantum ramp, into the output;
// 3. runs the master: gain, limiter (8-quantum peak hold, 150 ms release, soft knee), meters;
// 4. captures local input (when there is any) into packets on the outbound ring;
// 5. every 8 quanta, and after a control message, publishes the stats block (stats.ts) under its
//    seqlock.
//
// Real-time safety: `process()` allocates nothing, locks nothing and logs nothing. Every buffer is
// a typed array made in the constructor; `control()` (called from the port, between quanta) only
// sets numbers.

import type { Control, EngineBuffers, EngineConfig, EngineCore } from './engine-core';
import { HEADER_LEN, MAX_PACKET_LEN, newPacketInfo, parsePacket } from './packet';
import { RingReader, RingWriter } from './ring';
import * as S from './stats';

/** Frames in one render quantum. */
export const QUANTUM = 128;
/** The local (context) sample rate the engine renders at. */
export const LOCAL_RATE = 48000;
/** Decoded frames one peer's jitter buffer holds, per channel (170 ms at 48 kHz). */
export const STORE_FRAMES = 8192;
/** Resampler staging per peer and channel, in frames. */
export const STAGE_FRAMES = 2048;

const MAX_FRAMES = 256;
/** Slots at the smallest block size (32 frames). */
const MAX_SLOTS = STORE_FRAMES / 32;
/** Samples kept behind the read position when staging is compacted (taps and cross-fades). */
const HISTORY = 16;
/** Largest |ratio − 1| served by the block-constant resampling path. */
const FAST_MAX_DEVIATION = 2e-3;

// Drift loop (the defaults of core/src/clock.rs): 375 updates/s, loop gain set for 48 kHz input,
// two one-pole stages on the fill error and a PI loop whose 1/ωn narrows from 10 s to 60 s over
// 200 s; ±1000 ppm, slew-limited to 200 ppm/s.
const DRIFT_DT = QUANTUM / LOCAL_RATE;
const DRIFT_ALPHA = DRIFT_DT / 3;
const DRIFT_KP_SCALE = (2 * 0.7) / LOCAL_RATE;
const DRIFT_KI_SCALE = DRIFT_DT / LOCAL_RATE;
const DRIFT_T_ACQUIRE = 10;
const DRIFT_T_LOCK = 60;
const DRIFT_T_STEP = ((DRIFT_T_LOCK - DRIFT_T_ACQUIRE) * DRIFT_DT) / 200;
const DRIFT_MAX = 1000e-6;
const DRIFT_SLEW = 200e-6 * DRIFT_DT;
/** Outputs per exact evaluation of the interpolation weights (stepped linearly in between). */
const SUB = 32;

// Mixer and meters (the constants of core/src/mix.rs).
const MAX_GAIN = 4;
const LIMIT_THRESHOLD = 0.8912509;
const LIMITER_HOLD_BLOCKS = 8;
const LIMITER_RELEASE = 1 - Math.exp(-QUANTUM / (LOCAL_RATE * 0.15));
const RELEASE_SNAP = 1e-5;
const KNEE_NUM = (1 - LIMIT_THRESHOLD) * (1 - LIMIT_THRESHOLD);
const KNEE_OFFSET = 1 - 2 * LIMIT_THRESHOLD;
const PEAK_HOLD_FRAMES = 24000;
const PEAK_DECAY = Math.exp(-(QUANTUM / LOCAL_RATE) * Math.LN10);
const RMS_ALPHA = 1 - Math.exp(-(QUANTUM / LOCAL_RATE) / 0.3);
const FLUSH_LIN = 1e-7;

/** Quanta between stats publications. */
const STATS_EVERY = 8;
/** Outbound record tag: broadcast to every peer. */
const BROADCAST_TAG = 0xffff;


/** Rounds half away from zero, as the Rust encoder does. */
function roundHalfAway(p: number): number {
  return p < 0 ? -Math.floor(-p + 0.5) : Math.floor(p + 0.5);
}

/** Cubic Lagrange weights for taps −1, 0, 1, 2 at `t`, into w[at..at+4]. */
function lagrange4(t: number, w: Float64Array, at: number): void {
  const tm1 = t - 1;
  const tm2 = t - 2;
  const tp1 = t + 1;
  const a = t * tm1;
  const b = tp1 * tm2;
  w[at] = -a * tm2 * (1 / 6);
  w[at + 1] = b * tm1 * 0.5;
  w[at + 2] = -b * t * 0.5;
  w[at + 3] = a * tp1 * (1 / 6);
}

// -----------------------------------------------------------------------------------------------
// Concealment (the design of core/src/conceal.rs): on the first missing block of a run, a pitch
// search over the last HISTORY_NEED frames of output picks a loop length; the loop continues the
// waveform (junction offset so it never jumps), held for 10 ms then faded out over 40 ms; real
// audio fades back in over 128 frames with a raised cosine. The history is not copied block by
// block: real blocks are recorded as tokens naming the jitter buffer's stored payloads, decoded
// again only when a run starts; synthesized and crossfaded blocks are copied into a ring.

const HIST_FRAMES = 2048;
const SEARCH_FRAMES = 384;
const MIN_LAG = 128;
const MAX_LAG = 768;
/** Frames of output the pitch search reads. */
const HISTORY_NEED = SEARCH_FRAMES + MAX_LAG;
/** Longest block recorded by reference. */
const MAX_REF_FRAMES = 256;
const JUNCTION_FRAMES = 32;
const HOLD_FRAMES = 480;
const FADE_FRAMES = 1920;
const RECOVER_FRAMES = 128;
const DECIM = 4;
const REFINE = 3;
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
function fadeInWeight(i: number, n: number): number {
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

/** The lag in [lo, hi] whose segment of x[0, len) best matches its last n samples; -1 if none. */
function bestLag(x: Float32Array, len: number, n: number, lo: number, hi: number): number {
  const target = len - n;
  let best = -1;
  let bestScore = 0;
  for (let lag = lo; lag <= hi; lag++) {
    const seg = target - lag;
    // Correlation with the target and energy of the segment, in one pass.
    let c = 0;
    let e = 0;
    for (let k = 0; k < n; k++) {
      const v = x[seg + k];
      c += x[target + k] * v;
      e += v * v;
    }
    if (c <= 0 || e <= 0) continue;
    const score = (c * c) / e;
    if (best < 0 || score > bestScore) {
      best = lag;
      bestScore = score;
    }
  }
  return best;
}

class Concealer {
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
  constructor(private readonly store: Jitter) {}

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
      deci[d] = mono[k] + mono[k + 1] + mono[k + 2] + mono[k + 3];
    }
    const coarse = bestLag(deci, deci.length, SEARCH_FRAMES / DECIM, MIN_LAG / DECIM, MAX_LAG / DECIM);
    let period = MAX_LAG;
    if (coarse >= 0) {
      const from = Math.max(coarse * DECIM - REFINE, MIN_LAG);
      const to = Math.min(coarse * DECIM + REFINE, MAX_LAG);
      const fine = bestLag(mono, HISTORY_NEED, SEARCH_FRAMES, from, to);
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

// -----------------------------------------------------------------------------------------------
// Jitter buffer (the design of core/src/jitter.rs): received payloads are stored as bytes by
// extended sequence number and decoded at pop straight into the resampler's staging; a bitmap of
// the last 8192 numbers tells duplicates; lateness L = now − nominal arrival, kept per one-second
// window as its minimum and 64 largest values; jitter = the largest 95th-percentile spread of the
// current and five past windows; target = jitter + one quantum + half a block, rounded up to
// blocks (at least the depth a recent underrun waited its way to), clamped; fill = playout delay
// above the earliest recent arrival; whole-block growth and catch-up skips.

const SEEN_BITS = 8192;
/** Extended sequence number of a stream's first packet (room below for reordering). Kept small
 * so that extended numbers stay int32 (2^31 packets = 66 days at 375 packets/s). */
const SEQ_BASE = 0x10000;
const PAST_WINDOWS = 5;
const TOP = 64;
const PERCENTILE_DIVISOR = 20;
const MIN_IGNORED = 2;
const STALE_RESTART = 8;
/** Arrivals watched before adaptive playout starts, local frames (50 ms). */
const START_OBSERVE = 2400;
/** A prefill that received nothing for this long restarts from the next arrival (200 ms). */
const STOP_FRAMES = 9600;
const STATE_IDLE = 0;
const STATE_PREFILL = 1;
const STATE_PLAYING = 2;
const POP_AUDIO = 0;
const POP_CONCEALED = 1;
const POP_SILENCE = 2;
const EMPTY = -1;
/** Payload bytes a frame may take (2 channels × 4 bytes). */
const BYTES_PER_FRAME = 8;
/** Played payloads kept for the concealer's references (plus one block). */
const KEEP_FRAMES = HISTORY_NEED + MAX_FRAMES;
const KEPT_RING = 64;
/** Payload buffers at the smallest block size. */
const MAX_BUFFERS = (STORE_FRAMES + KEEP_FRAMES) / 32;

function rank(count: number): number {
  const k = Math.floor(count / PERCENTILE_DIVISOR);
  const c = k < MIN_IGNORED ? MIN_IGNORED : k > TOP - 1 ? TOP - 1 : k;
  return c < count - 1 ? c : count - 1;
}

class Jitter {
  readonly slotExt = new Float64Array(MAX_SLOTS).fill(EMPTY);
  readonly slotBuf = new Uint32Array(MAX_SLOTS);
  readonly seen = new Int32Array(SEEN_BITS / 32);
  readonly concealer: Concealer = new Concealer(this);
  // Payload store: buffers of `stride` bytes, a free stack, and the played ones kept for the
  // concealer's references.
  readonly bytes = new Uint8Array((STORE_FRAMES + KEEP_FRAMES) * BYTES_PER_FRAME);
  readonly bytes16 = new Int16Array(this.bytes.buffer);
  readonly bytes32 = new Int32Array(this.bytes.buffer);
  readonly bytesView = new DataView(this.bytes.buffer);
  readonly generation = new Uint16Array(MAX_BUFFERS);
  readonly bufBits = new Uint8Array(MAX_BUFFERS);
  readonly free = new Uint32Array(MAX_BUFFERS);
  freeLen = 0;
  readonly kept = new Uint32Array(KEPT_RING);
  keptHead = 0;
  keptLen = 0;
  keep = 0;
  stride = 0;
  buffers = 0;
  staleTokens = 0;
  readonly mergeL = new Float32Array(MAX_FRAMES);
  readonly mergeR = new Float32Array(MAX_FRAMES);
  // Policy.
  adaptive = true;
  floor = QUANTUM;
  ceiling = 4096;
  packets = 8;
  // Stream.
  block = 0;
  rate = LOCAL_RATE;
  channels = 0;
  bits = 0;
  nSlots = 0;
  mask = 0;
  sameRate = true;
  blockLocal = QUANTUM;
  state = STATE_IDLE;
  play = 0;
  buffered = 0;
  highest = 0;
  segActive = false;
  segLowest = 0;
  segHighest = 0;
  segReceived = 0;
  lostClosed = 0;
  tBase = 0;
  sBase = 0;
  lastArrival = 0;
  delay = 0;
  targetLocal = 0;
  targetJitter = -1;
  targetNeed = -1;
  emptyFrames = 0;
  growPending = 0;
  skipPending = 0;
  overSince = -1;
  staleRun = 0;
  // Lateness windows.
  curCount = 0;
  curMin = Infinity;
  curSpread = 0;
  curFloor = -Infinity;
  curNeed = 0;
  readonly curTop = new Float64Array(TOP).fill(-Infinity);
  winStart = 0;
  winStarted = false;
  prevMin = Infinity;
  pastSpreadMax = 0;
  pastNeedMax = 0;
  readonly pastSpread = new Float64Array(PAST_WINDOWS);
  readonly pastMin = new Float64Array(PAST_WINDOWS).fill(Infinity);
  readonly pastNeed = new Float64Array(PAST_WINDOWS);
  last = 0;
  // Counters.
  received = 0;
  duplicates = 0;
  late = 0;
  concealed = 0;
  underruns = 0;
  discarded = 0;
  resets = 0;
  played = 0;

  /** Forgets stream, history and counters (a new peer in the slot). */
  clear(): void {
    this.slotExt.fill(EMPTY);
    this.seen.fill(0);
    this.concealer.reset();
    this.freeLen = this.keptHead = this.keptLen = this.keep = this.stride = this.buffers = 0;
    this.block = 0;
    this.rate = LOCAL_RATE;
    this.channels = this.bits = this.nSlots = this.mask = 0;
    this.sameRate = true;
    this.blockLocal = QUANTUM;
    this.state = STATE_IDLE;
    this.play = this.buffered = this.highest = 0;
    this.segActive = false;
    this.segLowest = this.segHighest = this.segReceived = this.lostClosed = 0;
    this.tBase = this.sBase = this.lastArrival = this.delay = 0;
    this.emptyFrames = this.growPending = this.skipPending = this.staleRun = 0;
    this.overSince = -1;
    this.forgetLateness();
    this.received = this.duplicates = this.late = this.concealed = 0;
    this.underruns = this.discarded = this.resets = this.played = 0;
    this.targetJitter = this.targetNeed = -1;
    this.updateTarget();
  }

  // ----- payload store -----

  private layout(): void {
    const frames = Math.min(Math.max(this.block, 32), MAX_FRAMES);
    this.stride = frames * BYTES_PER_FRAME;
    this.buffers = Math.min(Math.floor(this.bytes.length / this.stride), MAX_BUFFERS);
    this.keep = Math.min(Math.ceil(HISTORY_NEED / frames), KEPT_RING);
    this.keptHead = this.keptLen = 0;
    for (let k = 0; k < this.buffers; k++) this.free[k] = this.buffers - 1 - k;
    this.freeLen = this.buffers;
  }

  private take(): number {
    if (this.freeLen === 0) return -1;
    return this.free[--this.freeLen];
  }

  private release(buf: number): void {
    if (this.freeLen < MAX_BUFFERS) this.free[this.freeLen++] = buf;
  }

  /** A played buffer stays readable for the concealer's references for `keep` blocks. */
  private retire(buf: number): void {
    if (this.keep === 0) {
      this.release(buf);
      return;
    }
    if (this.keptLen >= this.keep) {
      const old = this.kept[this.keptHead];
      this.keptHead = (this.keptHead + 1) % KEPT_RING;
      this.keptLen--;
      this.release(old);
    }
    this.kept[(this.keptHead + this.keptLen) % KEPT_RING] = buf;
    this.keptLen++;
  }

  private token(buf: number): number {
    return (buf | (this.generation[buf] << 16)) >>> 0;
  }

  /** Copies a payload (4-aligned in `src32` at word `word`, `words` long) into buffer `buf`. */
  writePayload(buf: number, src32: Int32Array, word: number, words: number, bits: number): void {
    const dst = this.bytes32;
    const at = (buf * this.stride) >> 2;
    for (let k = 0; k < words; k++) dst[at + k] = src32[word + k];
    this.generation[buf] = (this.generation[buf] + 1) & 0xffff;
    this.bufBits[buf] = bits;
  }

  /** Decodes buffer `buf` (`block` frames) into L/R from `at`. */
  private decode(buf: number, L: Float32Array, R: Float32Array, at: number): void {
    const frames = this.block;
    const bits = this.bufBits[buf];
    const off = buf * this.stride;
    if (bits === 16) {
      const s = this.bytes16;
      const a = off >> 1;
      const b = this.channels === 2 ? a + frames : a;
      const scale = 1 / 32768;
      for (let i = 0; i < frames; i++) {
        L[at + i] = s[a + i] * scale;
        R[at + i] = s[b + i] * scale;
      }
      return;
    }
    const v = this.bytesView;
    const bytes = bits >> 3;
    const second = this.channels === 2 ? frames * bytes : 0;
    for (let i = 0; i < frames; i++) {
      const x = off + i * bytes;
      if (bits === 24) {
        // JackTrip's 24-bit layout: int16 of the top bits, then the low byte.
        L[at + i] = ((v.getInt16(x, true) << 8) | v.getUint8(x + 2)) / 8388608;
        R[at + i] = ((v.getInt16(x + second, true) << 8) | v.getUint8(x + second + 2)) / 8388608;
      } else {
        const l = v.getFloat32(x, true);
        const r = v.getFloat32(x + second, true);
        L[at + i] = l === l && l !== Infinity && l !== -Infinity ? Math.max(-1, Math.min(l, 1)) : 0;
        R[at + i] = r === r && r !== Infinity && r !== -Infinity ? Math.max(-1, Math.min(r, 1)) : 0;
      }
    }
  }

  /** The concealer reads a referenced block back (silence if its buffer was rewritten). */
  decodeToken(token: number, L: Float32Array, R: Float32Array, at: number): void {
    const buf = token & 0xffff;
    if (buf < this.buffers && this.token(buf) === token) {
      this.decode(buf, L, R, at);
    } else {
      this.staleTokens++;
      L.fill(0, at, at + this.block);
      R.fill(0, at, at + this.block);
    }
  }

  // ----- lateness windows -----

  private addToWindow(l: number): void {
    const before = this.curCount;
    this.curCount = before + 1;
    const k = rank(this.curCount);
    let moved = l < this.curMin || before === 0 || rank(before) !== k;
    if (l < this.curMin) this.curMin = l;
    if (l > this.curFloor) {
      const top = this.curTop;
      let i = before < TOP - 1 ? before : TOP - 1;
      while (i > 0 && top[i - 1] < l) {
        top[i] = top[i - 1];
        i--;
      }
      top[i] = l;
      this.curFloor = top[TOP - 1];
      if (i <= k) moved = true;
    }
    if (moved) {
      const s = this.curTop[k] - this.curMin;
      this.curSpread = s > 0 ? s : 0;
    }
  }

  private lowerMin(l: number): void {
    if (l < this.curMin) {
      this.curMin = l;
      if (this.curCount > 0) {
        const s = this.curTop[rank(this.curCount)] - this.curMin;
        this.curSpread = s > 0 ? s : 0;
      }
    }
  }

  private closeWindow(): void {
    this.last = (this.last + 1) % PAST_WINDOWS;
    this.pastSpread[this.last] = this.curSpread;
    this.pastMin[this.last] = this.curMin;
    this.prevMin = this.curMin;
    this.pastNeed[this.last] = this.curNeed;
    let s = 0;
    let n = 0;
    for (let i = 0; i < PAST_WINDOWS; i++) {
      if (this.pastSpread[i] > s) s = this.pastSpread[i];
      if (this.pastNeed[i] > n) n = this.pastNeed[i];
    }
    this.pastSpreadMax = s;
    this.pastNeedMax = n;
    this.resetCur();
  }

  private resetCur(): void {
    this.curCount = 0;
    this.curMin = Infinity;
    this.curSpread = 0;
    this.curFloor = -Infinity;
    this.curNeed = 0;
    this.curTop.fill(-Infinity);
  }

  private roll(now: number): void {
    const len = LOCAL_RATE;
    if (!this.winStarted) {
      this.winStarted = true;
      this.winStart = now;
      return;
    }
    let closed = 0;
    while (now >= this.winStart + len && closed <= PAST_WINDOWS) {
      this.closeWindow();
      this.winStart += len;
      closed++;
    }
    if (now >= this.winStart + len || now < this.winStart) this.winStart = now;
  }

  private addLateness(l: number, cutoff: number): void {
    if (!(Math.abs(l) < 2 ** 40)) return;
    const m = this.curMin < this.prevMin ? this.curMin : this.prevMin;
    if (m !== Infinity && l - m > cutoff) this.lowerMin(l);
    else this.addToWindow(l);
  }

  private rebase(): void {
    if (this.curCount > 0) this.closeWindow();
    this.resetCur();
    this.pastMin.fill(Infinity);
    this.prevMin = Infinity;
  }

  private forgetLateness(): void {
    this.resetCur();
    this.winStart = 0;
    this.winStarted = false;
    this.pastSpread.fill(0);
    this.pastMin.fill(Infinity);
    this.pastNeed.fill(0);
    this.prevMin = Infinity;
    this.pastSpreadMax = this.pastNeedMax = 0;
    this.last = 0;
  }

  jitter(): number {
    return this.pastSpreadMax > this.curSpread ? this.pastSpreadMax : this.curSpread;
  }

  // ----- depth -----

  private toLocal(stream: number): number {
    return this.sameRate ? stream : Math.trunc((stream * LOCAL_RATE) / this.rate);
  }

  private toStream(local: number): number {
    return this.sameRate ? local : Math.trunc((local * this.rate) / LOCAL_RATE);
  }

  private nominal(ext: number): number {
    const frames = (ext - this.sBase) * this.block;
    return this.sameRate ? frames : Math.floor((frames * LOCAL_RATE) / this.rate);
  }

  private virtualFill(): number {
    const m = this.curMin < this.prevMin ? this.curMin : this.prevMin;
    return this.delay - (m === Infinity ? 0 : m);
  }

  private stagingLocal(): number {
    return this.blockLocal < QUANTUM ? this.blockLocal : QUANTUM;
  }

  private fillError(): number {
    return this.virtualFill() + this.stagingLocal() - this.targetLocal;
  }

  private coverable(): number {
    return this.adaptive ? this.ceiling : this.toLocal(STORE_FRAMES);
  }

  private fixedTargetStream(): number {
    return Math.min(Math.max(this.packets, 1) * this.block, STORE_FRAMES - 2 * this.block);
  }

  /** Recomputes the target when its inputs (jitter, underrun allowance) changed. */
  updateTarget(): void {
    const jitter = this.jitter();
    const need = this.pastNeedMax > this.curNeed ? this.pastNeedMax : this.curNeed;
    if (jitter === this.targetJitter && need === this.targetNeed) return;
    this.targetJitter = jitter;
    this.targetNeed = need;
    const q = QUANTUM;
    const b = this.block === 0 ? q : this.blockLocal;
    const max = Math.max(this.toLocal(STORE_FRAMES) - 2 * b, b);
    let t: number;
    if (!this.adaptive) {
      t = this.block === 0 ? Math.max(this.packets, 1) * q : this.toLocal(this.fixedTargetStream());
    } else {
      const ceiling = Math.max(this.ceiling, this.floor);
      // Spread + one quantum (what the consumer stages) + half a block of margin, rounded up
      // to whole blocks (the fill moves in blocks).
      const wanted = jitter + q + Math.trunc(Math.max(q, b) / 2);
      t = Math.max(Math.trunc((wanted + b - 1) / b) * b, need);
      t = t < this.floor ? this.floor : t > ceiling ? ceiling : t;
    }
    this.targetLocal = Math.min(t, max);
  }

  /** The policy changed: recompute the target whatever its inputs. */
  retarget(): void {
    this.targetJitter = this.targetNeed = -1;
    this.updateTarget();
  }

  /** Desired average fill, stream frames. */
  targetFrames(): number {
    if (!this.adaptive && this.block > 0) return this.fixedTargetStream();
    return Math.max(this.toStream(this.targetLocal), 0);
  }

  /** Current fill, stream frames (the target while not playing). */
  bufferedFrames(): number {
    if (this.state !== STATE_PLAYING) return this.targetFrames();
    return this.toStream(Math.max(this.virtualFill(), 0));
  }

  lost(): number {
    return this.lostClosed + this.segmentLost();
  }

  // ----- push -----

  private setFormat(frames: number, rate: number, channels: number): void {
    // The concealer's references name buffers of the old layout: it copies what it needs.
    this.concealer.detach();
    this.block = frames;
    this.rate = rate;
    this.channels = channels;
    this.layout();
    this.nSlots = STORE_FRAMES / frames;
    this.mask = this.nSlots - 1;
    this.sameRate = rate === LOCAL_RATE;
    this.blockLocal = this.toLocal(frames);
    this.targetJitter = this.targetNeed = -1;
  }

  private restart(ext: number, now: number): void {
    this.state = STATE_PREFILL;
    this.play = ext;
    this.tBase = now;
    this.sBase = ext;
    this.delay = 0;
    this.rebase();
    this.emptyFrames = 0;
    this.growPending = 0;
    this.skipPending = 0;
    this.overSince = -1;
  }

  private newSegment(ext: number): void {
    this.segActive = true;
    this.segLowest = this.segHighest = ext;
    this.segReceived = 0;
    this.highest = ext;
    this.seen.fill(0);
  }

  private segmentLost(): number {
    return this.segActive ? Math.max(this.segHighest + 1 - this.segLowest - this.segReceived, 0) : 0;
  }

  private closeSegment(): void {
    this.lostClosed += this.segmentLost();
    this.segActive = false;
  }

  private freeSlot(i: number): void {
    this.slotExt[i] = EMPTY;
    this.release(this.slotBuf[i]);
  }

  private dropAll(): void {
    for (let i = 0; i < this.nSlots; i++) {
      if (this.slotExt[i] !== EMPTY) {
        this.freeSlot(i);
        this.discarded++;
      }
    }
    this.buffered = 0;
  }

  private passTo(to: number): void {
    for (let s = Math.max(this.play, to - this.nSlots); s < to; s++) {
      const i = s & this.mask;
      if (this.slotExt[i] === s) {
        this.freeSlot(i);
        this.buffered--;
        this.discarded++;
      }
    }
    this.play = to;
  }

  private extend(seq: number): number {
    return this.highest + ((((seq - this.highest) & 0xffff) ^ 0x8000) - 0x8000);
  }

  private isSeen(ext: number): boolean {
    if (ext > this.highest || ext + SEEN_BITS <= this.highest) return false;
    const bit = ext & (SEEN_BITS - 1);
    return (this.seen[bit >>> 5] & (1 << (bit & 31))) !== 0;
  }

  private markSeen(ext: number): void {
    if (ext > this.highest) {
      if (ext - this.highest >= SEEN_BITS) this.seen.fill(0);
      else
        for (let s = this.highest + 1; s < ext; s++) {
          const bit = s & (SEEN_BITS - 1);
          this.seen[bit >>> 5] &= ~(1 << (bit & 31));
        }
      this.highest = ext;
    }
    if (ext + SEEN_BITS > this.highest) {
      const bit = ext & (SEEN_BITS - 1);
      this.seen[bit >>> 5] |= 1 << (bit & 31);
    }
  }

  private checkSequenceJump(ext: number, now: number): void {
    if (!this.segActive || ext <= this.segHighest) return;
    const gap = this.nominal(ext) - this.nominal(this.segHighest);
    const elapsed = Math.max(now - this.lastArrival, 0);
    if (gap > elapsed + this.toLocal(STORE_FRAMES)) {
      this.resets++;
      this.closeSegment();
      this.newSegment(ext);
    }
  }

  /** -1: store normally; 0: late (do not store); 1: store, the stream (re)started. */
  private place(ext: number, now: number): number {
    const n = this.nSlots;
    if (ext < this.play) {
      const fits = this.buffered === 0 || this.segHighest < ext + n;
      if (this.state === STATE_PREFILL && fits) {
        this.play = ext;
        return -1;
      }
      return 0;
    }
    const stopped = this.state === STATE_PREFILL && now - this.lastArrival > STOP_FRAMES;
    if (this.state === STATE_IDLE || stopped) {
      this.dropAll();
      this.checkSequenceJump(ext, now);
      this.restart(ext, now);
      return 1;
    }
    if (ext >= this.play + n) {
      const newPlay = ext + 1 - n;
      if (this.buffered > 0 && this.segHighest >= newPlay) {
        this.passTo(newPlay);
        // The audio jumps: the next block crossfades from a continuation.
        if (this.state === STATE_PLAYING) this.concealer.splice();
        return -1;
      }
      this.dropAll();
      this.checkSequenceJump(ext, now);
      this.restart(ext, now);
      return 1;
    }
    return -1;
  }

  /**
   * Accepts a packet's header; returns the buffer to copy its payload into (then call
   * writePayload), or -1 when it is dropped (duplicate, late, stale). Counters and depth are
   * updated here.
   */
  accept(seq: number, frames: number, rate: number, channels: number, bits: number, now: number): number {
    this.bits = bits;
    let started = false;
    if (this.block === 0) {
      this.setFormat(frames, rate, channels);
      const ext = SEQ_BASE + seq;
      this.newSegment(ext);
      this.restart(ext, now);
      started = true;
    } else if (frames !== this.block || rate !== this.rate || channels !== this.channels) {
      this.resets++;
      this.dropAll();
      this.closeSegment();
      this.setFormat(frames, rate, channels);
      const ext = this.extend(seq);
      this.newSegment(ext);
      this.restart(ext, now);
      started = true;
    }
    const ext = this.extend(seq);
    let late = false;
    if (!started) {
      if (ext + SEEN_BITS <= this.highest) {
        if (++this.staleRun < STALE_RESTART) {
          this.discarded++;
          return -1;
        }
        // The sender restarted its numbering below the old one.
        this.resets++;
        this.dropAll();
        this.closeSegment();
        this.newSegment(ext);
        this.restart(ext, now);
        started = true;
      } else if (this.isSeen(ext)) {
        this.duplicates++;
        return -1;
      }
    }
    this.staleRun = 0;
    if (!started) late = this.place(ext, now) === 0;
    this.markSeen(ext);
    this.received++;
    this.segReceived++;
    if (ext < this.segLowest) this.segLowest = ext;
    if (ext > this.segHighest) this.segHighest = ext;
    this.lastArrival = now;
    if (this.state !== STATE_IDLE) {
      const l = now - this.tBase - this.nominal(ext);
      this.roll(now);
      this.addLateness(l, this.coverable() + QUANTUM);
      this.updateTarget();
    }
    if (late) {
      this.late++;
      return -1;
    }
    const i = ext & this.mask;
    if (this.slotExt[i] === EMPTY) {
      const buf = this.take();
      if (buf < 0) {
        this.discarded++;
        return -1;
      }
      this.slotBuf[i] = buf;
      this.buffered++;
    } else if (this.slotExt[i] !== ext) {
      this.discarded++;
    }
    this.slotExt[i] = ext;
    this.delay = now - this.tBase - this.nominal(this.play);
    if (this.state === STATE_PLAYING) this.checkDepth(now);
    return this.slotBuf[i];
  }

  /** Whole-block corrections: grow when the fill is a block short, skip when far over. */
  private checkDepth(now: number): void {
    const b = this.blockLocal;
    const over = this.fillError();
    if (over <= -b) {
      this.growPending = Math.max(Math.trunc((Math.trunc(b / 2) - over) / b), 0);
      this.skipPending = 0;
      this.overSince = -1;
      return;
    }
    this.growPending = 0;
    const threshold = Math.max(b + Math.trunc(b / 2), QUANTUM);
    if (over <= threshold) {
      this.overSince = -1;
      if (2 * over <= b) this.skipPending = 0;
      return;
    }
    if (this.overSince < 0) this.overSince = now;
    else if (now - this.overSince >= LOCAL_RATE / 2) {
      this.skipPending = Math.max(Math.trunc((over + Math.trunc(b / 2)) / b), 0);
      this.overSince = -1;
    }
  }

  // ----- pop -----

  /** Writes one block (block frames, or a quantum before the first packet) at `at`. */
  pop(L: Float32Array, R: Float32Array, at: number): number {
    const b = this.block === 0 ? QUANTUM : this.block;
    if (this.state === STATE_IDLE) return this.fade(L, R, at, b);
    if (this.state === STATE_PREFILL) {
      const observing = this.adaptive && this.lastArrival - this.tBase < START_OBSERVE;
      if (this.buffered === 0 || observing || this.fillError() < 0) {
        this.delay += this.blockLocal;
        return this.fade(L, R, at, b);
      }
      // Start at the target: the oldest blocks that waited for the estimate to form are
      // dropped while the fill exceeds it by half a block.
      const bl = this.blockLocal;
      while (this.adaptive && this.buffered > 1 && 2 * this.fillError() > bl) {
        const i = this.play & this.mask;
        if (this.slotExt[i] === this.play) {
          this.freeSlot(i);
          this.buffered--;
          this.discarded++;
        } else {
          this.concealed++;
        }
        this.play++;
        this.delay -= bl;
      }
      this.state = STATE_PLAYING;
    }
    if (this.buffered === 0) {
      if (this.emptyFrames === 0) this.underruns++;
      this.emptyFrames += b;
      this.delay += this.blockLocal;
      if (this.emptyFrames >= Math.trunc(this.rate / 5)) {
        this.state = STATE_IDLE;
        this.emptyFrames = 0;
      }
      return this.fade(L, R, at, b);
    }
    if (this.emptyFrames > 0) {
      // An underrun ends: the depth playout waited its way to becomes a floor of the target.
      this.emptyFrames = 0;
      const reached = this.virtualFill() + this.stagingLocal();
      if (reached > this.curNeed) this.curNeed = reached;
      this.updateTarget();
    }
    if (this.growPending > 0) {
      // The target grew: wait one block (a concealed block in place).
      this.growPending--;
      this.delay += this.blockLocal;
      return this.fade(L, R, at, b);
    }
    const i = this.play & this.mask;
    if (this.slotExt[i] !== this.play) {
      this.concealed++;
      this.play++;
      return this.fade(L, R, at, b);
    }
    const buf = this.slotBuf[i];
    this.decode(buf, L, R, at);
    const next = (this.play + 1) & this.mask;
    const merge = this.skipPending > 0 && this.slotExt[next] === this.play + 1;
    if (merge) {
      // Catch-up: this block fades into the next; both are consumed.
      const nl = this.mergeL;
      const nr = this.mergeR;
      this.decode(this.slotBuf[next], nl, nr, 0);
      for (let k = 0; k < b; k++) {
        const w = fadeInWeight(k, b);
        L[at + k] = (1 - w) * L[at + k] + w * nl[k];
        R[at + k] = (1 - w) * R[at + k] + w * nr[k];
      }
      this.freeSlot(next);
      this.buffered--;
      this.play++;
      this.discarded++;
      this.skipPending--;
      this.delay -= this.blockLocal;
    }
    this.slotExt[i] = EMPTY;
    this.buffered--;
    this.play++;
    this.played++;
    if (merge) {
      // The output is no stored block: the concealer copies it.
      this.release(buf);
      this.concealer.play(L, R, at, b);
    } else {
      const token = this.token(buf);
      this.retire(buf);
      this.concealer.playRef(L, R, at, b, token);
    }
    return POP_AUDIO;
  }

  private fade(L: Float32Array, R: Float32Array, at: number, b: number): number {
    return this.concealer.conceal(L, R, at, b) ? POP_CONCEALED : POP_SILENCE;
  }
}

/** One remote participant: jitter buffer, drift resampler, strip and meters. */
class Peer {
  active = false;
  readonly jitter = new Jitter();
  // Strip.
  gain = 1;
  pan = 0;
  mute = false;
  solo = false;
  panL = Math.SQRT1_2;
  panR = Math.SQRT1_2;
  targetL = 0;
  targetR = 0;
  gainL = 0;
  gainR = 0;
  malformed = 0;
  // Resampler staging: contiguous samples; readPos is the integer read position, frac in [0, 1).
  readonly stageL = new Float32Array(STAGE_FRAMES);
  readonly stageR = new Float32Array(STAGE_FRAMES);
  readPos = HISTORY;
  frac = 0;
  writePos = HISTORY;
  // Drift loop.
  lp1 = 0;
  lp2 = 0;
  integral = 0;
  drift = 0;
  /** 1 + drift, the factor applied to the nominal ratio. */
  driftFactor = 1;
  /** Input frames per output frame for this quantum (nominal × driftFactor). */
  ratio = 1;
  loopT = DRIFT_T_ACQUIRE;
  // Meter (pre-fader): peak with hold and fall, RMS as a one-pole on the mean square.
  peakL = 0;
  peakR = 0;
  holdL = 0;
  holdR = 0;
  meanSqL = 0;
  meanSqR = 0;

  resetDrift(): void {
    this.lp1 = 0;
    this.lp2 = 0;
    this.integral = 0;
    this.drift = 0;
    this.driftFactor = 1;
    this.loopT = DRIFT_T_ACQUIRE;
  }

  /** A fresh peer in this slot: stream, counters, strip and meters all start over. */
  join(): void {
    this.jitter.clear();
    this.malformed = 0;
    this.stageL.fill(0, 0, HISTORY);
    this.stageR.fill(0, 0, HISTORY);
    this.readPos = this.writePos = HISTORY;
    this.frac = 0;
    this.resetDrift();
    this.gain = 1;
    this.pan = 0;
    this.mute = false;
    this.solo = false;
    this.panL = this.panR = Math.SQRT1_2;
    // Starts silent and fades in on its first quantum.
    this.gainL = this.gainR = 0;
    this.peakL = this.peakR = this.holdL = this.holdR = this.meanSqL = this.meanSqR = 0;
    this.active = true;
  }

  /** Frames staged for the resampler (the fraction counts as consumed). */
  staged(): number {
    return this.writePos - this.readPos - this.frac;
  }
}

export class JsEngineCore implements EngineCore {
  private readonly reader: RingReader;
  private readonly writer: RingWriter;
  /** The inbound ring as 32-bit words (records, and so payloads, are 4-aligned). */
  private readonly ring32: Int32Array;
  /** The parsed header of the current record (reused: no object per packet). */
  private readonly info = newPacketInfo();
  /** Interpolation weights at the start and end of a sub-block. */
  private readonly weights = new Float64Array(8);
  /** A block's peak and sum of squares (L, R) handed to the meters: passing doubles through
   * a typed array keeps them unboxed (a double argument to a call that is not inlined is
   * allocated as a heap number). */
  private readonly blockStats = new Float64Array(4);
  private readonly zeroStats = new Float64Array(4);
  private readonly stats: Float64Array;
  private readonly maxPeers: number;
  private readonly peers: Peer[] = [];
  /** Active slots in ascending order, so the render loop skips empty rows. */
  private readonly activeSlots: Int32Array;
  private activeCount = 0;
  // Buffer policy.
  private adaptive = true;
  private floorFrames = QUANTUM;
  private ceilingFrames = 4096;
  private fixedPackets = 8;
  // Master.
  private masterGain = 1;
  private masterCurrent = 1;
  private limiter = 1;
  private total = 1;
  private readonly held = new Float64Array(LIMITER_HOLD_BLOCKS);
  private heldPos = 0;
  private mPeakL = 0;
  private mPeakR = 0;
  private mHoldL = 0;
  private mHoldR = 0;
  private mMeanSqL = 0;
  private mMeanSqR = 0;
  // Engine-wide counters.
  private quanta = 0;
  private nowFrames = 0;
  private unknownPeer = 0;
  private malformed = 0;
  private recordsRead = 0;
  private ringResyncs = 0;
  private nonFinite = 0;
  // Capture.
  private readonly captureFrames: number;
  private readonly captureChannels: number;
  private readonly captureBits: number;
  private readonly captureL = new Float32Array(MAX_FRAMES + QUANTUM);
  private readonly captureR = new Float32Array(MAX_FRAMES + QUANTUM);
  private readonly outPacket = new Uint8Array(MAX_PACKET_LEN);
  private readonly outView = new DataView(this.outPacket.buffer);
  private captureFill = 0;
  private captureSeq = 0;
  private packetsSent = 0;
  private sendDropped = 0;
  private inputPeak = 0;
  private inputMeanSq = 0;

  constructor(buffers: EngineBuffers, config: EngineConfig) {
    this.reader = new RingReader(buffers.inbound);
    this.writer = new RingWriter(buffers.outbound);
    this.ring32 = new Int32Array(buffers.inbound, 0, buffers.inbound.byteLength >> 2);
    this.stats = new Float64Array(buffers.stats, 0, S.BLOCK_LEN);
    this.maxPeers = Math.min(Math.max(0, config.maxPeers | 0), S.MAX_PEERS);
    for (let i = 0; i < this.maxPeers; i++) this.peers.push(new Peer());
    this.activeSlots = new Int32Array(this.maxPeers);
    const block = config.blockFrames;
    this.captureFrames = block === 32 || block === 64 || block === 256 ? block : 128;
    this.captureChannels = config.captureChannels === 1 ? 1 : 2;
    this.captureBits = config.bits === 24 || config.bits === 32 ? config.bits : 16;
    this.applyBuffer(config.buffer);
    this.publishStats();
  }

  control(msg: Control): void {
    switch (msg.type) {
      case 'add-peer': {
        const p = this.peerAt(msg.slot);
        if (!p) return;
        p.join();
        this.policyTo(p.jitter);
        break;
      }
      case 'remove-peer': {
        const p = this.peerAt(msg.slot);
        if (!p) return;
        p.active = false;
        break;
      }
      case 'strip': {
        const p = this.peerAt(msg.slot);
        if (!p) return;
        if (!Number.isNaN(msg.gain)) p.gain = Math.max(0, Math.min(msg.gain, MAX_GAIN));
        if (!Number.isNaN(msg.pan)) {
          p.pan = Math.max(-1, Math.min(msg.pan, 1));
          const theta = (p.pan + 1) * (Math.PI / 4);
          p.panL = Math.max(0, Math.cos(theta));
          p.panR = Math.max(0, Math.sin(theta));
        }
        p.mute = msg.mute;
        p.solo = msg.solo;
        break;
      }
      case 'master':
        if (!Number.isNaN(msg.gain)) this.masterGain = Math.max(0, Math.min(msg.gain, MAX_GAIN));
        break;
      case 'buffer':
        if (msg.mode === 'fixed') this.applyBuffer({ mode: 'fixed', packets: msg.packets ?? 8 });
        else
          this.applyBuffer({
            mode: 'adaptive',
            floorFrames: msg.floorFrames ?? this.floorFrames,
            ceilingFrames: msg.ceilingFrames ?? this.ceilingFrames,
          });
        break;
    }
    this.refreshStrips();
    this.publishStats();
  }

  process(input: Float32Array[], outL: Float32Array, outR: Float32Array, nowFrames: number): void {
    this.nowFrames = nowFrames;
    this.drainInbound(nowFrames);
    if (input.length > 0 && input[0].length === QUANTUM) {
      this.capture(input[0], input.length > 1 && input[1].length === QUANTUM ? input[1] : input[0]);
    }
    outL.fill(0);
    outR.fill(0);
    const active = this.activeSlots;
    for (let k = 0; k < this.activeCount; k++) this.renderPeer(this.peers[active[k]], outL, outR);
    this.renderMaster(outL, outR);
    this.quanta++;
    if (this.quanta % STATS_EVERY === 0) this.publishStats();
  }

  private peerAt(slot: number): Peer | null {
    return Number.isInteger(slot) && slot >= 0 && slot < this.maxPeers ? this.peers[slot] : null;
  }

  // ---------------------------------------------------------------------------------------------
  // Inbound: ring → packet → jitter buffer (decoded to f32 on arrival).

  private drainInbound(now: number): void {
    const reader = this.reader;
    const resyncsBefore = reader.resyncs;
    while (reader.peek()) {
      this.recordsRead++;
      const slot = reader.tag;
      if (slot < this.maxPeers && this.peers[slot].active) {
        this.push(this.peers[slot], reader.offset, reader.length, now);
      } else {
        this.unknownPeer++;
      }
      reader.consume();
    }
    this.ringResyncs += reader.resyncs - resyncsBefore;
  }

  private push(p: Peer, at: number, len: number, now: number): void {
    const info = this.info;
    if (parsePacket(this.reader.bytes, at, len, info) !== 0) {
      p.malformed++;
      this.malformed++;
      return;
    }
    const j = p.jitter;
    const buf = j.accept(info.seq, info.frames, info.rateHz, info.channels, info.bits, now);
    if (buf < 0) return;
    // The payload is 4-aligned in the ring (records are) and a whole number of words long.
    j.writePayload(buf, this.ring32, info.payloadOffset >> 2, info.payloadLength >> 2, info.bits);
  }

  private policyTo(j: Jitter): void {
    j.adaptive = this.adaptive;
    j.floor = this.floorFrames;
    j.ceiling = this.ceilingFrames;
    j.packets = this.fixedPackets;
    j.retarget();
  }

  private applyBuffer(b: EngineConfig['buffer']): void {
    if (b.mode === 'fixed') {
      this.adaptive = false;
      this.fixedPackets = Math.max(1, Math.min(Math.floor(b.packets) || 1, 4096));
    } else {
      this.adaptive = true;
      const floor = Number.isFinite(b.floorFrames) ? Math.max(0, Math.floor(b.floorFrames)) : QUANTUM;
      const ceiling = Number.isFinite(b.ceilingFrames) ? Math.max(0, Math.floor(b.ceilingFrames)) : 4096;
      this.floorFrames = floor;
      this.ceilingFrames = ceiling;
    }
    for (let i = 0; i < this.peers.length; i++) this.policyTo(this.peers[i].jitter);
  }

  private refreshStrips(): void {
    let n = 0;
    let anySolo = false;
    for (let i = 0; i < this.maxPeers; i++) {
      const p = this.peers[i];
      if (!p.active) continue;
      this.activeSlots[n++] = i;
      if (p.solo) anySolo = true;
    }
    this.activeCount = n;
    for (let k = 0; k < n; k++) {
      const p = this.peers[this.activeSlots[k]];
      const audible = !p.mute && (p.solo || !anySolo);
      p.targetL = audible ? p.gain * p.panL : 0;
      p.targetR = audible ? p.gain * p.panR : 0;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Render: drift → jitter pop → staging → resampler → meters → gain/pan → mix.

  private renderPeer(p: Peer, outL: Float32Array, outR: Float32Array): void {
    const j = p.jitter;
    if (j.block === 0) {
      // Nothing has arrived yet: the peer is silent (its meter sees silence).
      this.meterPeer(p, this.zeroStats);
      p.gainL = p.targetL;
      p.gainR = p.targetR;
      p.resetDrift();
      return;
    }
    const nominal = j.rate / LOCAL_RATE;
    // Doubles move between methods through fields, not arguments or return values: a double
    // passed to or returned from a call that is not inlined is allocated as a heap number.
    this.updateDrift(p);
    const ratio = nominal * p.driftFactor;
    p.ratio = ratio;
    const fast = Math.abs(ratio - 1) <= FAST_MAX_DEVIATION;
    // Staged frames from the read position must reach the last tap: 127 + 2 on the fast path,
    // else as far as the ratio carries the position.
    const need = fast ? QUANTUM + 2 : Math.floor(p.frac + (QUANTUM - 1) * ratio) + 3;
    let playing = true;
    const b = j.block;
    while (p.writePos - p.readPos < need) {
      if (p.writePos + b > STAGE_FRAMES) this.compact(p);
      if (j.pop(p.stageL, p.stageR, p.writePos) === POP_SILENCE) playing = false;
      p.writePos += b;
    }
    if (!playing) p.resetDrift();
    if (p.gainL === 0 && p.gainR === 0 && p.targetL === 0 && p.targetR === 0) {
      // Nobody hears this peer: meter its staged input without interpolating, and move on.
      this.meterStaged(p);
      const f = p.frac + QUANTUM * (fast ? ratio - 1 : ratio);
      const k = Math.floor(f);
      p.readPos += (fast ? QUANTUM : 0) + k;
      p.frac = f - k;
      return;
    }
    if (fast) this.resampleFast(p, outL, outR);
    else this.resampleGeneral(p, outL, outR);
  }

  /** Meters the next quantum of staged input (what a silent strip's meter shows). */
  private meterStaged(p: Peer): void {
    const L = p.stageL;
    const R = p.stageR;
    const end = Math.min(p.writePos, p.readPos + QUANTUM);
    let pkL = 0;
    let pkR = 0;
    let ssL = 0;
    let ssR = 0;
    for (let i = p.readPos; i < end; i++) {
      const l = L[i];
      const r = R[i];
      const al = l < 0 ? -l : l;
      const ar = r < 0 ? -r : r;
      if (al > pkL) pkL = al;
      if (ar > pkR) pkR = ar;
      ssL += l * l;
      ssR += r * r;
    }
    const st = this.blockStats;
    st[0] = pkL;
    st[1] = pkR;
    st[2] = ssL;
    st[3] = ssR;
    this.meterPeer(p, st);
  }

  /** Moves the live part of staging (with history for the taps) to the front. */
  private compact(p: Peer): void {
    const from = p.readPos - HISTORY;
    if (from <= 0) return;
    p.stageL.copyWithin(0, from, p.writePos);
    p.stageR.copyWithin(0, from, p.writePos);
    p.readPos -= from;
    p.writePos -= from;
  }

  /** Updates the drift factor 1 + ε (p.driftFactor) from the fill against the target (see
   * core/src/clock.rs). */
  private updateDrift(p: Peer): void {
    const j = p.jitter;
    const e0 = j.bufferedFrames() + (p.writePos - p.readPos - p.frac) - j.targetFrames();
    if (!Number.isFinite(e0)) return;
    const t = p.loopT;
    const alpha = DRIFT_ALPHA / (DRIFT_ALPHA + t / DRIFT_T_LOCK);
    p.lp1 += alpha * (e0 - p.lp1);
    p.lp2 += alpha * (p.lp1 - p.lp2);
    const e = p.lp2;
    if (t !== DRIFT_T_LOCK) p.loopT = t + DRIFT_T_STEP > DRIFT_T_LOCK ? DRIFT_T_LOCK : t + DRIFT_T_STEP;
    let integral = p.integral + (DRIFT_KI_SCALE / (t * t)) * e;
    integral = integral > DRIFT_MAX ? DRIFT_MAX : integral < -DRIFT_MAX ? -DRIFT_MAX : integral;
    const wanted = integral + (DRIFT_KP_SCALE / t) * e;
    const clamped = wanted > DRIFT_MAX ? DRIFT_MAX : wanted < -DRIFT_MAX ? -DRIFT_MAX : wanted;
    if (clamped === wanted || wanted > DRIFT_MAX !== e > 0) p.integral = integral;
    let step = clamped - p.drift;
    step = step > DRIFT_SLEW ? DRIFT_SLEW : step < -DRIFT_SLEW ? -DRIFT_SLEW : step;
    p.drift += step;
    p.driftFactor = 1 + p.drift;
  }

  /**
   * The block-constant path (|ratio − 1| ≤ 2e-3): output i is the cubic through staging
   * read + i − 1 .. read + i + 2 at t = frac + i·(ratio − 1). As in core/src/clock.rs, the
   * weights are exact every SUB outputs and stepped linearly in between. Fused with the
   * pre-fader meter and the gain ramp into the bus.
   */
  private resampleFast(p: Peer, outL: Float32Array, outR: Float32Array): void {
    const ratio = p.ratio;
    const L = p.stageL;
    const R = p.stageR;
    const base = p.readPos;
    const d = ratio - 1;
    const f0 = p.frac;
    const gl0 = p.gainL;
    const gr0 = p.gainR;
    const dgl = (p.targetL - gl0) / QUANTUM;
    const dgr = (p.targetR - gr0) / QUANTUM;
    const mixing = gl0 !== 0 || gr0 !== 0 || p.targetL !== 0 || p.targetR !== 0;
    const w = this.weights;
    let pkL = 0;
    let pkR = 0;
    let ssL = 0;
    let ssR = 0;
    lagrange4(f0, w, 0);
    for (let first = 0; first < QUANTUM; first += SUB) {
      lagrange4(f0 + (first + SUB) * d, w, 4);
      const inv = 1 / SUB;
      const s0 = (w[4] - w[0]) * inv;
      const s1 = (w[5] - w[1]) * inv;
      const s2 = (w[6] - w[2]) * inv;
      const s3 = (w[7] - w[3]) * inv;
      let w0 = w[0];
      let w1 = w[1];
      let w2 = w[2];
      let w3 = w[3];
      for (let i = first; i < first + SUB; i++) {
        const j = base + i;
        const l = w0 * L[j - 1] + w1 * L[j] + w2 * L[j + 1] + w3 * L[j + 2];
        const r = w0 * R[j - 1] + w1 * R[j] + w2 * R[j + 1] + w3 * R[j + 2];
        w0 += s0;
        w1 += s1;
        w2 += s2;
        w3 += s3;
        const al = l < 0 ? -l : l;
        const ar = r < 0 ? -r : r;
        if (al > pkL) pkL = al;
        if (ar > pkR) pkR = ar;
        ssL += l * l;
        ssR += r * r;
        if (mixing) {
          outL[i] += l * (gl0 + dgl * (i + 1));
          outR[i] += r * (gr0 + dgr * (i + 1));
        }
      }
      w[0] = w[4];
      w[1] = w[5];
      w[2] = w[6];
      w[3] = w[7];
    }
    const f = f0 + QUANTUM * d;
    const k = Math.floor(f);
    p.readPos = base + QUANTUM + k;
    p.frac = f - k;
    p.gainL = p.targetL;
    p.gainR = p.targetR;
    const st = this.blockStats;
    st[0] = pkL;
    st[1] = pkR;
    st[2] = ssL;
    st[3] = ssR;
    this.meterPeer(p, st);
  }

  /** Any ratio (e.g. a 44.1 kHz sender): the integer offset moves within the quantum. */
  private resampleGeneral(p: Peer, outL: Float32Array, outR: Float32Array): void {
    const ratio = p.ratio;
    const L = p.stageL;
    const R = p.stageR;
    const base = p.readPos;
    const f0 = p.frac;
    const gl0 = p.gainL;
    const gr0 = p.gainR;
    const dgl = (p.targetL - gl0) / QUANTUM;
    const dgr = (p.targetR - gr0) / QUANTUM;
    let pkL = 0;
    let pkR = 0;
    let ssL = 0;
    let ssR = 0;
    for (let i = 0; i < QUANTUM; i++) {
      const pos = f0 + i * ratio;
      const n = Math.floor(pos);
      const t = pos - n;
      const tm1 = t - 1;
      const tm2 = t - 2;
      const tp1 = t + 1;
      const a = t * tm1;
      const b = tp1 * tm2;
      const w0 = -a * tm2 * (1 / 6);
      const w1 = b * tm1 * 0.5;
      const w2 = -b * t * 0.5;
      const w3 = a * tp1 * (1 / 6);
      const j = base + n;
      const l = w0 * L[j - 1] + w1 * L[j] + w2 * L[j + 1] + w3 * L[j + 2];
      const r = w0 * R[j - 1] + w1 * R[j] + w2 * R[j + 1] + w3 * R[j + 2];
      const al = l < 0 ? -l : l;
      const ar = r < 0 ? -r : r;
      if (al > pkL) pkL = al;
      if (ar > pkR) pkR = ar;
      ssL += l * l;
      ssR += r * r;
      outL[i] += l * (gl0 + dgl * (i + 1));
      outR[i] += r * (gr0 + dgr * (i + 1));
    }
    const f = f0 + QUANTUM * ratio;
    const k = Math.floor(f);
    p.readPos = base + k;
    p.frac = f - k;
    p.gainL = p.targetL;
    p.gainR = p.targetR;
    const st = this.blockStats;
    st[0] = pkL;
    st[1] = pkR;
    st[2] = ssL;
    st[3] = ssR;
    this.meterPeer(p, st);
  }

  /** Folds one quantum's peak and sum of squares into the peer's meter. */
  private meterPeer(p: Peer, st: Float64Array): void {
    const pkL = st[0];
    const pkR = st[1];
    const ssL = st[2];
    const ssR = st[3];
    if (!(ssL + ssR < Infinity)) return;
    if (pkL >= p.peakL) {
      p.peakL = pkL;
      p.holdL = PEAK_HOLD_FRAMES;
    } else if (p.holdL > 0) {
      p.holdL = Math.max(0, p.holdL - QUANTUM);
    } else {
      const fallen = p.peakL * PEAK_DECAY;
      p.peakL = fallen > pkL ? (fallen > FLUSH_LIN ? fallen : 0) : pkL;
    }
    if (pkR >= p.peakR) {
      p.peakR = pkR;
      p.holdR = PEAK_HOLD_FRAMES;
    } else if (p.holdR > 0) {
      p.holdR = Math.max(0, p.holdR - QUANTUM);
    } else {
      const fallen = p.peakR * PEAK_DECAY;
      p.peakR = fallen > pkR ? (fallen > FLUSH_LIN ? fallen : 0) : pkR;
    }
    p.meanSqL += (ssL / QUANTUM - p.meanSqL) * RMS_ALPHA;
    p.meanSqR += (ssR / QUANTUM - p.meanSqR) * RMS_ALPHA;
    if (p.meanSqL <= FLUSH_LIN * FLUSH_LIN) p.meanSqL = 0;
    if (p.meanSqR <= FLUSH_LIN * FLUSH_LIN) p.meanSqR = 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Master: gain and limiter folded into one ramp, soft knee, meters, non-finite guard.

  private renderMaster(outL: Float32Array, outR: Float32Array): void {
    let pkL = 0;
    let pkR = 0;
    let ssL = 0;
    let ssR = 0;
    for (let i = 0; i < QUANTUM; i++) {
      const l = outL[i];
      const r = outR[i];
      const al = l < 0 ? -l : l;
      const ar = r < 0 ? -r : r;
      if (al > pkL) pkL = al;
      if (ar > pkR) pkR = ar;
      ssL += l * l;
      ssR += r * r;
    }
    if (!(ssL + ssR < Infinity)) {
      // NaN, ±Inf or a square that overflows: silence the block, keep the limiter state.
      outL.fill(0);
      outR.fill(0);
      this.nonFinite++;
      this.meterMaster(this.zeroStats);
      return;
    }
    const peak = pkL > pkR ? pkL : pkR;
    this.held[this.heldPos] = peak;
    this.heldPos = (this.heldPos + 1) % LIMITER_HOLD_BLOCKS;
    let held = 0;
    for (let i = 0; i < LIMITER_HOLD_BLOCKS; i++) if (this.held[i] > held) held = this.held[i];
    const gainMax = this.masterGain > this.masterCurrent ? this.masterGain : this.masterCurrent;
    const loudest = held * gainMax;
    const wanted = loudest > LIMIT_THRESHOLD ? LIMIT_THRESHOLD / loudest : 1;
    let released = 1;
    if (this.limiter < 1) {
      const g = this.limiter + (1 - this.limiter) * LIMITER_RELEASE;
      released = g >= 1 - RELEASE_SNAP ? 1 : g;
    }
    const limiter = wanted < released ? wanted : released;
    const total = this.masterGain * limiter;
    const t0 = this.total;
    const worst = peak * (t0 > total ? t0 : total);
    if (!(t0 === 1 && total === 1 && worst <= LIMIT_THRESHOLD)) {
      const step = (total - t0) / QUANTUM;
      const knee = worst > LIMIT_THRESHOLD;
      pkL = pkR = ssL = ssR = 0;
      for (let i = 0; i < QUANTUM; i++) {
        const g = t0 + step * (i + 1);
        let l = outL[i] * g;
        let r = outR[i] * g;
        let al = l < 0 ? -l : l;
        let ar = r < 0 ? -r : r;
        if (knee) {
          if (al > LIMIT_THRESHOLD) {
            al = 1 - KNEE_NUM / (al + KNEE_OFFSET);
            l = l < 0 ? -al : al;
          }
          if (ar > LIMIT_THRESHOLD) {
            ar = 1 - KNEE_NUM / (ar + KNEE_OFFSET);
            r = r < 0 ? -ar : ar;
          }
        }
        outL[i] = l;
        outR[i] = r;
        if (al > pkL) pkL = al;
        if (ar > pkR) pkR = ar;
        ssL += l * l;
        ssR += r * r;
      }
    }
    this.masterCurrent = this.masterGain;
    this.limiter = limiter;
    this.total = total;
    const st = this.blockStats;
    st[0] = pkL;
    st[1] = pkR;
    st[2] = ssL;
    st[3] = ssR;
    this.meterMaster(st);
  }

  private meterMaster(st: Float64Array): void {
    const pkL = st[0];
    const pkR = st[1];
    const ssL = st[2];
    const ssR = st[3];
    if (pkL >= this.mPeakL) {
      this.mPeakL = pkL;
      this.mHoldL = PEAK_HOLD_FRAMES;
    } else if (this.mHoldL > 0) {
      this.mHoldL = Math.max(0, this.mHoldL - QUANTUM);
    } else {
      const fallen = this.mPeakL * PEAK_DECAY;
      this.mPeakL = fallen > pkL ? (fallen > FLUSH_LIN ? fallen : 0) : pkL;
    }
    if (pkR >= this.mPeakR) {
      this.mPeakR = pkR;
      this.mHoldR = PEAK_HOLD_FRAMES;
    } else if (this.mHoldR > 0) {
      this.mHoldR = Math.max(0, this.mHoldR - QUANTUM);
    } else {
      const fallen = this.mPeakR * PEAK_DECAY;
      this.mPeakR = fallen > pkR ? (fallen > FLUSH_LIN ? fallen : 0) : pkR;
    }
    this.mMeanSqL += (ssL / QUANTUM - this.mMeanSqL) * RMS_ALPHA;
    this.mMeanSqR += (ssR / QUANTUM - this.mMeanSqR) * RMS_ALPHA;
    if (this.mMeanSqL <= FLUSH_LIN * FLUSH_LIN) this.mMeanSqL = 0;
    if (this.mMeanSqR <= FLUSH_LIN * FLUSH_LIN) this.mMeanSqR = 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Capture: input quanta → blocks of the configured size → packets on the outbound ring.

  private capture(inL: Float32Array, inR: Float32Array): void {
    let peak = 0;
    let sum = 0;
    for (let i = 0; i < QUANTUM; i++) {
      const x = inL[i];
      const a = x < 0 ? -x : x;
      if (a > peak) peak = a;
      sum += x * x;
    }
    if (peak === peak && peak !== Infinity) {
      this.inputPeak = Math.max(peak, this.inputPeak * 0.9939);
      this.inputMeanSq += (sum / QUANTUM - this.inputMeanSq) * 0.0088;
    }
    this.captureL.set(inL, this.captureFill);
    this.captureR.set(inR, this.captureFill);
    this.captureFill += QUANTUM;
    const block = this.captureFrames;
    while (this.captureFill >= block) {
      this.sendBlock(this.captureFill);
      this.captureL.copyWithin(0, block, this.captureFill);
      this.captureR.copyWithin(0, block, this.captureFill);
      this.captureFill -= block;
    }
  }

  private sendBlock(filled: number): void {
    const frames = this.captureFrames;
    const channels = this.captureChannels;
    const bits = this.captureBits;
    const v = this.outView;
    // The sender's audio clock in microseconds, as JackTrip stamps its packets.
    const us = Math.floor((Math.max(0, this.nowFrames - filled) * 1e6) / LOCAL_RATE);
    v.setUint32(0, us >>> 0, true);
    v.setUint32(4, Math.floor(us / 4294967296), true);
    v.setUint16(8, this.captureSeq, true);
    v.setUint16(10, frames, true);
    v.setUint8(12, 3);
    v.setUint8(13, bits);
    v.setUint8(14, channels);
    v.setUint8(15, channels);
    const bytes = bits >> 3;
    for (let c = 0; c < channels; c++) {
      const src = c === 0 ? this.captureL : this.captureR;
      const base = HEADER_LEN + c * frames * bytes;
      for (let i = 0; i < frames; i++) {
        const s = src[i];
        const x = s === s ? (s > 1 ? 1 : s < -1 ? -1 : s) : 0;
        const at = base + i * bytes;
        if (bits === 16) v.setInt16(at, roundHalfAway(x * 32767), true);
        else if (bits === 32) v.setFloat32(at, x, true);
        else {
          const q = roundHalfAway(x * 8388607);
          v.setUint8(at, (q >> 8) & 0xff);
          v.setUint8(at + 1, (q >> 16) & 0xff);
          v.setUint8(at + 2, q & 0xff);
        }
      }
    }
    const len = HEADER_LEN + frames * channels * bytes;
    if (this.writer.push(BROADCAST_TAG, 0, this.outPacket, 0, len)) this.packetsSent++;
    else this.sendDropped++;
    this.captureSeq = (this.captureSeq + 1) & 0xffff;
  }

  // ---------------------------------------------------------------------------------------------
  // Stats: written straight into the shared block under the seqlock.

  private publishStats(): void {
    const s = this.stats;
    const seq = s[S.G_SEQUENCE];
    s[S.G_SEQUENCE] = seq + 1;
    s[S.G_QUANTA] = this.quanta;
    s[S.G_NOW_FRAMES] = this.nowFrames;
    s[S.G_PEERS] = this.activeCount;
    s[S.G_UNKNOWN_PEER] = this.unknownPeer;
    s[S.G_MALFORMED] = this.malformed;
    s[S.G_RECORDS_READ] = this.recordsRead;
    s[S.G_RING_RESYNCS] = this.ringResyncs;
    s[S.G_MASTER_PEAK_L] = this.mPeakL;
    s[S.G_MASTER_PEAK_R] = this.mPeakR;
    s[S.G_MASTER_RMS_L] = Math.sqrt(this.mMeanSqL);
    s[S.G_MASTER_RMS_R] = Math.sqrt(this.mMeanSqR);
    s[S.G_LIMITER_DB] = this.limiter < 1 ? -20 * Math.log10(this.limiter) : 0;
    s[S.G_PACKETS_SENT] = this.packetsSent;
    s[S.G_SEND_DROPPED] = this.sendDropped;
    s[S.G_INPUT_PEAK] = this.inputPeak;
    s[S.G_INPUT_RMS] = Math.sqrt(this.inputMeanSq);
    s[S.G_NONFINITE] = this.nonFinite;
    let underruns = 0;
    for (let slot = 0; slot < this.maxPeers; slot++) {
      const p = this.peers[slot];
      const row = S.peerIndex(slot, 0);
      if (!p.active) {
        if (s[row + S.P_ACTIVE] !== 0) s.fill(0, row, row + S.PEER_LEN);
        continue;
      }
      const j = p.jitter;
      underruns += j.underruns;
      s[row + S.P_ACTIVE] = 1;
      s[row + S.P_RECEIVED] = j.received;
      s[row + S.P_LOST] = j.lost();
      s[row + S.P_LATE] = j.late;
      s[row + S.P_DUPLICATES] = j.duplicates;
      s[row + S.P_CONCEALED] = j.concealed;
      s[row + S.P_UNDERRUNS] = j.underruns;
      s[row + S.P_DISCARDED] = j.discarded;
      s[row + S.P_MALFORMED] = p.malformed;
      s[row + S.P_BUFFERED_FRAMES] = j.bufferedFrames() + p.staged();
      s[row + S.P_TARGET_FRAMES] = j.targetFrames();
      s[row + S.P_DRIFT_PPM] = p.integral * 1e6;
      s[row + S.P_PEAK_L] = p.peakL;
      s[row + S.P_PEAK_R] = p.peakR;
      s[row + S.P_RMS_L] = Math.sqrt(p.meanSqL);
      s[row + S.P_RMS_R] = Math.sqrt(p.meanSqR);
      s[row + S.P_BLOCK_FRAMES] = j.block;
      s[row + S.P_SAMPLE_RATE] = j.rate;
      s[row + S.P_CHANNELS] = j.channels;
      s[row + S.P_BITS] = j.bits;
      s[row + S.P_JITTER_FRAMES] = j.jitter();
      s[row + S.P_RESETS] = j.resets;
    }
    s[S.G_UNDERRUNS] = underruns;
    s[S.G_SEQUENCE] = seq + 2;
  }
}
