// The jitter buffer of the plain-JavaScript engine (js-engine-core.ts), following
// core/src/jitter.rs: received payloads are stored as bytes by extended sequence number and decoded
// at pop straight into the resampler's staging; a bitmap of the last 8192 numbers tells duplicates;
// lateness L = now − nominal arrival, kept per one-second window as its minimum and 64 largest
// values; jitter = the largest 95th-percentile spread of the current and five past windows; target
// = jitter + one quantum + half a block, rounded up to blocks (at least the depth a recent underrun
// waited its way to), clamped; fill = playout delay above the earliest recent arrival; whole-block
// growth and catch-up skips.

import { Concealer, fadeInWeight, HISTORY_NEED, type TokenDecoder } from './js-conceal';

/** Frames in one render quantum. */
const QUANTUM = 128;
/** The local (context) sample rate. */
const LOCAL_RATE = 48000;
/** Frames of audio one jitter buffer holds (170 ms at 48 kHz). */
export const STORE_FRAMES = 8192;
const MAX_FRAMES = 256;
/** Slots at the smallest block size (32 frames). */
const MAX_SLOTS = STORE_FRAMES / 32;

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
/** What a pop emitted. */
export const POP_AUDIO = 0;
export const POP_CONCEALED = 1;
export const POP_SILENCE = 2;
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

/** A peer's jitter buffer. Real-time safe after construction (which allocates everything). */
export class Jitter implements TokenDecoder {
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
