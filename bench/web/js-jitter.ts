// The jitter buffer of the plain-JavaScript engine (js-engine-core.ts), following core/src/jitter/
// (mod.rs: playout; lateness.rs: the estimate, here js-lateness.ts; stall.rs: the local-stall
// detector, here js-stall.ts, used by the engine). Received payloads are stored as bytes by
// extended sequence number and decoded at pop straight into the resampler's staging; a bitmap of
// the last 8192 numbers tells duplicates.
//
// Depth: every accepted packet not excused by a local stall gives a lateness L = now − nominal
// arrival; per one-second window its absolute 95th percentile is kept, and the jitter estimate is
// the largest of the current and five past percentiles (carried forward by the drift trend of the
// window minima) above the recent minimum, at least the peak floor (recurring stalls, plus an
// eighth). Target = jitter + one quantum + half a quantum, clamped to [floor, ceiling]. Fill =
// playout delay above the earliest recent arrival. Playout starts exactly at the target: blocks
// are dropped while the fill is a block or more above it, and the engine drops the rest (less
// than a block) from the fade-in (takeStartExcess). Then whole-block growth (stretched blocks) and
// catch-up skips keep the fill near the target.
//
// Underruns are not learnt from: when one ends, as many of the missing numbers as blocks were
// stretched are passed at once (counted concealed), so a run of losses leaves the delay where it
// was; it counts as a late underrun when playout really waited for a packet, as a stall underrun
// when excused arrivals ended it. A stream restarting after Idle within the same segment counts
// the numbers it skipped (minus those held) as concealed.

import { Concealer, fadeInWeight, HISTORY_NEED, type TokenDecoder } from './js-conceal';
import { Lateness } from './js-lateness';
import {
  BUFFER_CEILING_FRAMES,
  BUFFER_FLOOR_FRAMES,
  FIXED_PACKETS_DEFAULT,
} from '../../app/src/audio/buffer-policy';

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
export const SEQ_BASE = 0x10000;
const STALE_RESTART = 8;
/** Arrivals watched before adaptive playout starts, local frames (50 ms). */
const START_OBSERVE = 2400;
/** A prefill that received nothing for this long restarts from the next arrival (200 ms). */
const STOP_FRAMES = 9600;
const STATE_IDLE = 0;
const STATE_PREFILL = 1;
/** Where playout stands: emitting blocks (the engine counts these peers as streaming). */
export const STATE_PLAYING = 2;
/** What a pop emitted. */
export const POP_AUDIO = 0;
export const POP_CONCEALED = 1;
export const POP_SILENCE = 2;
/** What accept() did with a packet (core/src/jitter/mod.rs PushOutcome). */
export const PUSH_STORED = 0;
export const PUSH_STARTED = 1;
export const PUSH_FORMAT_RESET = 2;
export const PUSH_DUPLICATE = 3;
export const PUSH_LATE = 4;
export const PUSH_STALE = 5;
const EMPTY = -1;
/** Payload bytes a frame may take (2 channels × 4 bytes). */
const BYTES_PER_FRAME = 8;
/** Played payloads kept for the concealer's references (plus one block). */
const KEEP_FRAMES = HISTORY_NEED + MAX_FRAMES;
const KEPT_RING = 64;
/** Payload buffers at the smallest block size. */
const MAX_BUFFERS = (STORE_FRAMES + KEEP_FRAMES) / 32;

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
  floor = BUFFER_FLOOR_FRAMES;
  ceiling = BUFFER_CEILING_FRAMES;
  packets = FIXED_PACKETS_DEFAULT;
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
  /** The jitter estimate the target was computed from (−1: to be computed). */
  targetJitter = -1;
  /** Frames emitted in the current run of empty pops (0: not in a run). */
  emptyFrames = 0;
  growPending = 0;
  skipPending = 0;
  overSince = -1;
  staleRun = 0;
  /** Arrivals at or before this local time were held back by a local stall (−1: none). */
  excusedUntil = -1;
  /** Whether the last unique arrival was excused (so an underrun it ends is a stall's). */
  excusedNow = false;
  /** Stream frames (less than a block) the consumer drops from the fade-in; see takeStartExcess. */
  startExcess = 0;
  /** Extended sequence number of the last unique packet accepted. */
  lastExt = 0;
  /** What the last accept() did (PUSH_*). */
  outcome = PUSH_STORED;
  readonly lat = new Lateness();
  // Counters.
  received = 0;
  duplicates = 0;
  late = 0;
  concealed = 0;
  underruns = 0;
  /** Underruns that ended with the very packet playout waited for (it came, late). */
  lateUnderruns = 0;
  /** Underruns ended by arrivals a local stall held back. */
  stallUnderruns = 0;
  discarded = 0;
  resets = 0;
  played = 0;
  /** Blocks synthesized without passing a sequence number (underrun waits, depth raised). */
  stretched = 0;

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
    this.excusedUntil = -1;
    this.excusedNow = false;
    this.startExcess = this.lastExt = 0;
    this.outcome = PUSH_STORED;
    this.lat.forget();
    this.received = this.duplicates = this.late = this.concealed = 0;
    this.underruns = this.lateUnderruns = this.stallUnderruns = 0;
    this.discarded = this.resets = this.played = this.stretched = 0;
    this.targetJitter = -1;
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

  // ----- lateness -----

  /** The jitter estimate, local frames (js-lateness.ts). */
  jitter(): number {
    return this.lat.jitter();
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
    // The recent minimum (Rust: Lateness::recent_min), read from the fields: a method returning
    // Infinity would allocate it.
    const lat = this.lat;
    const m = lat.curMin < lat.prevMin ? lat.curMin : lat.prevMin;
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

  /** Recomputes the target when the jitter estimate changed (one comparison on most pushes). */
  updateTarget(): void {
    const jitter = this.lat.jitter();
    if (jitter === this.targetJitter) return;
    this.targetJitter = jitter;
    const q = QUANTUM;
    const b = this.block === 0 ? q : this.blockLocal;
    const max = Math.max(this.toLocal(STORE_FRAMES) - 2 * b, b);
    let t: number;
    if (!this.adaptive) {
      t = this.block === 0 ? Math.max(this.packets, 1) * q : this.toLocal(this.fixedTargetStream());
    } else {
      const ceiling = Math.max(this.ceiling, this.floor);
      // Spread + one quantum (what the consumer stages) + half a quantum of margin.
      t = jitter + q + (q >> 1);
      t = t < this.floor ? this.floor : t > ceiling ? ceiling : t;
    }
    this.targetLocal = Math.min(t, max);
  }

  /** The policy changed: recompute the target whatever its inputs. */
  retarget(): void {
    this.targetJitter = -1;
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
    this.targetJitter = -1;
  }

  private restart(ext: number, now: number): void {
    this.state = STATE_PREFILL;
    this.play = ext;
    this.tBase = now;
    this.sBase = ext;
    this.delay = 0;
    this.lat.rebase();
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

  /** Stored packets with numbers in [from, to). */
  private heldBetween(from: number, to: number): number {
    let held = 0;
    for (let s = Math.max(from, to - this.nSlots); s < to; s++) {
      if (this.slotExt[s & this.mask] === s) held++;
    }
    return held;
  }

  private passTo(to: number): void {
    let held = 0;
    for (let s = Math.max(this.play, to - this.nSlots); s < to; s++) {
      const i = s & this.mask;
      if (this.slotExt[i] === s) {
        this.freeSlot(i);
        this.buffered--;
        this.discarded++;
        held++;
      }
    }
    // Numbers passed without their packet were concealed: concealed = lost + late holds.
    if (to > this.play) this.concealed += to - this.play - held;
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
      // The first packet after a pause: timing starts afresh from it. Numbers skipped within the
      // same stream were never played: they count as concealed (concealed = lost + late).
      const held = this.heldBetween(this.play, ext);
      this.dropAll();
      const resets = this.resets;
      this.checkSequenceJump(ext, now);
      if (this.resets === resets && this.segActive && ext > this.play) {
        this.concealed += Math.max(ext - this.play - held, 0);
      }
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

  /** Arrivals pushed with `now` up to `until` were held back by a local stall (js-stall.ts):
   * they do not feed the lateness estimate. */
  excuseUntil(until: number): void {
    this.excusedUntil = until;
  }

  /** Stream frames (less than a block) by which the fill exceeded the target when playout
   * started, taken once: the consumer drops that many from the start of the block just popped
   * (it fades in from silence), so that playout starts exactly at the target. */
  takeStartExcess(): number {
    const e = this.startExcess;
    this.startExcess = 0;
    return e;
  }

  /**
   * Accepts a packet's header; returns the buffer to copy its payload into (then call
   * writePayload), or -1 when it is dropped (duplicate, late, stale). Counters and depth are
   * updated here; `outcome` tells what was done.
   */
  accept(seq: number, frames: number, rate: number, channels: number, bits: number, now: number): number {
    this.bits = bits;
    let started = false;
    this.outcome = PUSH_STORED;
    if (this.block === 0) {
      this.setFormat(frames, rate, channels);
      const ext = SEQ_BASE + seq;
      this.newSegment(ext);
      this.restart(ext, now);
      started = true;
      this.outcome = PUSH_STARTED;
    } else if (frames !== this.block || rate !== this.rate || channels !== this.channels) {
      this.resets++;
      this.dropAll();
      this.closeSegment();
      this.setFormat(frames, rate, channels);
      const ext = this.extend(seq);
      this.newSegment(ext);
      this.restart(ext, now);
      started = true;
      this.outcome = PUSH_FORMAT_RESET;
    }
    const ext = this.extend(seq);
    let late = false;
    if (!started) {
      if (ext + SEEN_BITS <= this.highest) {
        if (++this.staleRun < STALE_RESTART) {
          this.discarded++;
          this.outcome = PUSH_STALE;
          return -1;
        }
        // The sender restarted its numbering below the old one.
        this.resets++;
        this.dropAll();
        this.closeSegment();
        this.newSegment(ext);
        this.restart(ext, now);
        started = true;
        this.outcome = PUSH_STARTED;
      } else if (this.isSeen(ext)) {
        this.duplicates++;
        this.outcome = PUSH_DUPLICATE;
        return -1;
      }
    }
    this.staleRun = 0;
    if (!started) {
      const placed = this.place(ext, now);
      late = placed === 0;
      if (late) this.outcome = PUSH_LATE;
      else if (placed === 1) this.outcome = PUSH_STARTED;
    }
    this.markSeen(ext);
    this.received++;
    this.segReceived++;
    if (ext < this.segLowest) this.segLowest = ext;
    if (ext > this.segHighest) this.segHighest = ext;
    this.lastArrival = now;
    this.lastExt = ext;
    this.excusedNow = this.excusedUntil >= 0 && now <= this.excusedUntil;
    if (this.state !== STATE_IDLE && !this.excusedNow) {
      const l = now - this.tBase - this.nominal(ext);
      this.lat.roll(now, LOCAL_RATE);
      this.lat.addChecked(l, this.coverable() + QUANTUM);
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
    // Frames the consumer drops from this block (playout starting at its target): silenced,
    // the fade-in starting after them.
    let startSkip = 0;
    if (this.state === STATE_IDLE) return this.fade(L, R, at, b);
    if (this.state === STATE_PREFILL) {
      const observing = this.adaptive && this.lastArrival - this.tBase < START_OBSERVE;
      if (this.buffered === 0 || observing || this.fillError() < 0) {
        this.delay += this.blockLocal;
        return this.fade(L, R, at, b);
      }
      // Start at the target: the oldest blocks that waited for the estimate to form are
      // dropped while the fill exceeds it by a block or more; what remains above it (less than
      // a block) the consumer drops from this block, before its fade-in (takeStartExcess).
      const bl = this.blockLocal;
      while (this.adaptive && this.buffered > 1 && this.fillError() >= bl) {
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
      if (this.adaptive) {
        const e = this.fillError();
        const excess = e < 0 ? 0 : e > bl - 1 ? bl - 1 : e;
        this.startExcess = this.toStream(excess);
        startSkip = Math.min(this.startExcess, b);
        this.delay -= excess;
      }
      this.state = STATE_PLAYING;
    }
    if (this.buffered === 0) {
      if (this.emptyFrames === 0) this.underruns++;
      this.stretched++;
      this.emptyFrames += b;
      this.delay += this.blockLocal;
      if (this.emptyFrames >= Math.trunc(this.rate / 5)) {
        this.state = STATE_IDLE;
        this.emptyFrames = 0;
      }
      return this.fade(L, R, at, b);
    }
    if (this.emptyFrames > 0) this.endUnderrun();
    if (this.growPending > 0) {
      // The target grew: wait one block (a concealed block in place).
      this.growPending--;
      this.stretched++;
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
    } else if (startSkip > 0) {
      this.release(buf);
      L.fill(0, at, at + startSkip);
      R.fill(0, at, at + startSkip);
      this.concealer.play(L, R, at + startSkip, b - startSkip);
    } else {
      const token = this.token(buf);
      this.retire(buf);
      this.concealer.playRef(L, R, at, b, token);
    }
    return POP_AUDIO;
  }

  /**
   * An underrun ends: a packet is buffered again after pops that found none. If it is the one
   * playout waited for, it was late: the wait stands. If numbers before it are still missing,
   * the wait was spent on a gap: as many of them as blocks were stretched are passed at once
   * (each counted concealed), so a run of losses leaves the delay where it was.
   */
  private endUnderrun(): void {
    const stretched = Math.floor(this.emptyFrames / (this.block > 1 ? this.block : 1));
    this.emptyFrames = 0;
    let passed = 0;
    while (passed < stretched && this.slotExt[this.play & this.mask] !== this.play) {
      this.concealed++;
      this.play++;
      this.delay -= this.blockLocal;
      passed++;
    }
    if (this.excusedNow) this.stallUnderruns++;
    else if (passed < stretched) this.lateUnderruns++;
  }

  private fade(L: Float32Array, R: Float32Array, at: number, b: number): number {
    return this.concealer.conceal(L, R, at, b) ? POP_CONCEALED : POP_SILENCE;
  }
}
