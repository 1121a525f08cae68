// A plain-JavaScript engine that does the same work as the WASM engine (core/src/engine.rs),
// written the way a careful JavaScript author would: typed arrays sized up front, one class shape
// per concept, no allocation per quantum or per packet. The benchmark runs it beside the WASM
// engine (bench/README.md); it is also a readable reference of the render path. Its jitter buffer
// (with its lateness estimate), concealment, local-stall detector and continuity watch are its
// neighbours here: js-jitter.ts, js-lateness.ts, js-conceal.ts, js-stall.ts and js-continuity.ts.
//
// Per 128-frame quantum, `process()`:
// 1. drains the inbound ring: each record's packet is checked (the rules of core/src/packet.rs)
//    and its payload bytes stored in its peer's jitter buffer by sequence number, stamped with
//    the quantum's `now`; the local-stall detector (js-stall.ts) watches every arrival and
//    excuses the clump that ends a silence of every streaming peer, and each peer's send stamps
//    are watched for the sender's missed callbacks (js-continuity.ts);
// 2. for every active peer: updates the drift loop (two one-pole stages + a narrowing PI loop on
//    the buffer fill, clamped to ±1000 ppm, slew-limited), pulls blocks from the jitter buffer
//    (real audio decoded straight into contiguous staging, concealment by pitch-period
//    repetition with a fade, or silence before start) until a quantum is covered (dropping the
//    jitter buffer's start excess from the fade-in when playout starts), and resamples
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

import {
  BUFFER_CEILING_FRAMES,
  BUFFER_FLOOR_FRAMES,
  FIXED_PACKETS_DEFAULT,
  sanitizePolicy,
  type BufferPolicy,
} from '../../app/src/audio/buffer-policy';
import type { Control, EngineBuffers, EngineConfig, EngineCore } from '../../app/src/audio/engine-core';
import { HEADER_LEN, MAX_PACKET_LEN, newPacketInfo, parsePacket } from '../../app/src/audio/packet';
import { RingReader, RingWriter } from '../../app/src/audio/ring-ends';
import * as S from '../../app/src/audio/stats';
import { Continuity } from './js-continuity';
import {
  Jitter,
  POP_SILENCE,
  PUSH_FORMAT_RESET,
  PUSH_LATE,
  PUSH_STARTED,
  PUSH_STORED,
  SEQ_BASE,
  STATE_PLAYING,
} from './js-jitter';
import { LocalStall } from './js-stall';

/** Frames in one render quantum. */
export const QUANTUM = 128;
/** The local (context) sample rate the engine renders at. */
export const LOCAL_RATE = 48000;
/** Resampler staging per peer and channel, in frames. */
export const STAGE_FRAMES = 2048;

const MAX_FRAMES = 256;
/** Samples kept behind the read position when staging is compacted (taps and cross-fades). */
const HISTORY = 16;
/** Largest |ratio − 1| served by the block-constant resampling path. */
const FAST_MAX_DEVIATION = 2e-3;
/** Frames the interpolator reads beyond the position (core/src/resample.rs LOOK_AHEAD_FRAMES). */
const LOOK_AHEAD = 2;
/** Output frames per step of the Rust resampler's skip (its CHUNK). */
const SKIP_CHUNK = 128;
/** The Rust engine extends sequence numbers from 2^32, this one from SEQ_BASE: the send-stamp
 * watch counts the stream's audio time from the Rust origin, so both compute the same doubles. */
const EXT_TO_RUST = 2 ** 32 - SEQ_BASE;

// Drift loop (the defaults of core/src/drift.rs): 375 updates/s, loop gain set for 48 kHz input,
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

// Mixer and meters (the constants of core/src/mix/).
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

/** Peak |x| and sum of squares of x[from..to), into st[at] and st[at + 2]: with `at` 0 for the
 * left channel and 1 for the right, st becomes [peakL, peakR, sumSqL, sumSqR], the form
 * MeterState.fold takes. */
function measure(x: Float32Array, from: number, to: number, st: Float64Array, at: number): void {
  let peak = 0;
  let sumSq = 0;
  for (let i = from; i < to; i++) {
    const v = x[i];
    const a = v < 0 ? -v : v;
    if (a > peak) peak = a;
    sumSq += v * v;
  }
  st[at] = peak;
  st[at + 2] = sumSq;
}

/** Meter ballistics: peak with hold and fall, RMS as a one-pole on the mean square. Per channel
 * (0 left, 1 right), in typed arrays so that the two channels take the same path. */
class MeterState {
  readonly peak = new Float64Array(2);
  /** Frames the peak is still held. */
  readonly hold = new Float64Array(2);
  readonly meanSq = new Float64Array(2);

  reset(): void {
    this.peak.fill(0);
    this.hold.fill(0);
    this.meanSq.fill(0);
  }

  /** Folds one quantum's [peakL, peakR, sumSqL, sumSqR] in. */
  fold(st: Float64Array): void {
    const peak = this.peak;
    const hold = this.hold;
    const meanSq = this.meanSq;
    for (let c = 0; c < 2; c++) {
      const pk = st[c];
      if (pk >= peak[c]) {
        peak[c] = pk;
        hold[c] = PEAK_HOLD_FRAMES;
      } else if (hold[c] > 0) {
        hold[c] = Math.max(0, hold[c] - QUANTUM);
      } else {
        const fallen = peak[c] * PEAK_DECAY;
        peak[c] = fallen > pk ? (fallen > FLUSH_LIN ? fallen : 0) : pk;
      }
      meanSq[c] += (st[c + 2] / QUANTUM - meanSq[c]) * RMS_ALPHA;
      if (meanSq[c] <= FLUSH_LIN * FLUSH_LIN) meanSq[c] = 0;
    }
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
  /** Pre-fader meter. */
  readonly meter = new MeterState();
  /** The peer's missed device callbacks, from its packets' send stamps. */
  readonly senderGaps = new Continuity();

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
    this.meter.reset();
    this.senderGaps.clear();
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
  private floorFrames = BUFFER_FLOOR_FRAMES;
  private ceilingFrames = BUFFER_CEILING_FRAMES;
  private fixedPackets = FIXED_PACKETS_DEFAULT;
  // Master.
  private masterGain = 1;
  private masterCurrent = 1;
  private limiter = 1;
  private total = 1;
  private readonly held = new Float64Array(LIMITER_HOLD_BLOCKS);
  private heldPos = 0;
  private readonly masterMeter = new MeterState();
  // Engine-wide counters.
  private quanta = 0;
  private nowFrames = 0;
  private unknownPeer = 0;
  private malformed = 0;
  private recordsRead = 0;
  private ringResyncs = 0;
  private nonFinite = 0;
  /** Peers playing at the last render (for the local-stall detector). */
  private streaming = 0;
  private readonly localStall = new LocalStall();
  /** Our own device's missed callbacks, from the wall clock of each quantum. */
  private readonly localGaps = new Continuity();
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
        this.applyBuffer(msg);
        break;
    }
    this.refreshStrips();
    this.publishStats();
  }

  process(
    input: Float32Array[],
    outL: Float32Array,
    outR: Float32Array,
    nowFrames: number,
    wallUs = NaN,
  ): void {
    this.nowFrames = nowFrames;
    if (wallUs === wallUs && wallUs !== Infinity && wallUs !== -Infinity) {
      const g = this.localGaps;
      g.audioUs = (nowFrames * 1e6) / LOCAL_RATE;
      g.wallUs = wallUs;
      g.observe();
    }
    this.drainInbound(nowFrames);
    if (input.length > 0 && input[0].length === QUANTUM) {
      this.capture(input[0], input.length > 1 && input[1].length === QUANTUM ? input[1] : input[0]);
    }
    outL.fill(0);
    outR.fill(0);
    const active = this.activeSlots;
    let streaming = 0;
    for (let k = 0; k < this.activeCount; k++) {
      const p = this.peers[active[k]];
      if (p.jitter.state === STATE_PLAYING) streaming++;
      this.renderPeer(p, outL, outR);
    }
    this.streaming = streaming;
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
    const until = this.localStall.arrival(now, this.streaming);
    if (until >= 0) j.excuseUntil(until);
    const buf = j.accept(info.seq, info.frames, info.rateHz, info.channels, info.bits, now);
    this.noteSendStamp(p);
    if (buf < 0) return;
    // The payload is 4-aligned in the ring (records are) and a whole number of words long.
    j.writePayload(buf, this.ring32, info.payloadOffset >> 2, info.payloadLength >> 2, info.bits);
  }

  /** Feeds the sender's continuity watch with the packet's send stamp (µs on the sender's wall
   * clock) against its place in the stream; a restarted stream restarts the watch. */
  private noteSendStamp(p: Peer): void {
    const j = p.jitter;
    const outcome = j.outcome;
    if (outcome === PUSH_STARTED || outcome === PUSH_FORMAT_RESET) p.senderGaps.restart();
    else if (outcome !== PUSH_STORED && outcome !== PUSH_LATE) return;
    const info = this.info;
    if (j.block === 0 || (info.timestampLo === 0 && info.timestampHi === 0)) return;
    const g = p.senderGaps;
    g.audioUs = ((j.lastExt + EXT_TO_RUST) * j.block * 1e6) / Math.max(j.rate, 1);
    g.wallUs = info.timestampHi * 4294967296 + info.timestampLo;
    g.observe();
  }

  private policyTo(j: Jitter): void {
    j.adaptive = this.adaptive;
    j.floor = this.floorFrames;
    j.ceiling = this.ceilingFrames;
    j.packets = this.fixedPackets;
    j.retarget();
  }

  private applyBuffer(policy: BufferPolicy): void {
    const b = sanitizePolicy(policy);
    if (b.mode === 'fixed') {
      this.adaptive = false;
      this.fixedPackets = b.packets;
    } else {
      this.adaptive = true;
      this.floorFrames = b.floorFrames;
      this.ceilingFrames = b.ceilingFrames;
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
    let need = fast ? QUANTUM + 2 : Math.floor(p.frac + (QUANTUM - 1) * ratio) + 3;
    let playing = true;
    const b = j.block;
    while (p.writePos - p.readPos < need) {
      if (p.writePos + b > STAGE_FRAMES) this.compact(p);
      if (j.pop(p.stageL, p.stageR, p.writePos) === POP_SILENCE) playing = false;
      p.writePos += b;
      const excess = j.takeStartExcess();
      if (excess > 0) {
        // Playout started above its target by less than a block: drop that much of the
        // fade-in so that it starts exactly at the target.
        this.skipStaged(p, excess);
        if (!fast) need = Math.floor(p.frac + (QUANTUM - 1) * ratio) + 3;
      }
    }
    if (!playing) p.resetDrift();
    if (p.gainL === 0 && p.gainR === 0 && p.targetL === 0 && p.targetR === 0) {
      // Nobody hears this peer: meter its staged input without interpolating, and move on.
      const end = Math.min(p.writePos, p.readPos + QUANTUM);
      measure(p.stageL, p.readPos, end, this.blockStats, 0);
      measure(p.stageR, p.readPos, end, this.blockStats, 1);
      p.frac += QUANTUM * (fast ? ratio - 1 : ratio);
      this.endQuantum(p, p.readPos + (fast ? QUANTUM : 0));
      return;
    }
    if (fast) this.resampleFast(p, outL, outR);
    else this.resampleGeneral(p, outL, outR);
  }

  /** Consumes `frames` output frames of staging at ratio 1 without computing them, as the Rust
   * resampler's skip(frames, 1.0) does: in chunks, each no further than the staged input
   * (with the interpolator's look-ahead) reaches. */
  private skipStaged(p: Peer, frames: number): void {
    let done = 0;
    while (done < frames) {
      const want = Math.min(frames - done, SKIP_CHUNK);
      const avail = p.writePos - p.readPos;
      const k = want + LOOK_AHEAD <= avail ? want : Math.max(Math.min(avail - LOOK_AHEAD, want), 0);
      const f = p.frac + k;
      const whole = Math.floor(f);
      p.readPos += whole;
      p.frac = f - whole;
      done += k;
      if (k < want) break;
    }
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
   * core/src/drift.rs). */
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
   * read + i − 1 .. read + i + 2 at t = frac + i·(ratio − 1). As in core/src/resample.rs, the
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
    p.frac = f0 + QUANTUM * d;
    const st = this.blockStats;
    st[0] = pkL;
    st[1] = pkR;
    st[2] = ssL;
    st[3] = ssR;
    this.endQuantum(p, base + QUANTUM);
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
    p.frac = f0 + QUANTUM * ratio;
    const st = this.blockStats;
    st[0] = pkL;
    st[1] = pkR;
    st[2] = ssL;
    st[3] = ssR;
    this.endQuantum(p, base);
  }

  /**
   * Ends a peer's quantum: the read position moves to `from` plus the whole part of p.frac (the
   * quantum's end position past `from`, set by the caller), which keeps the fraction; the gain
   * ramp arrives at its target; the quantum's figures in blockStats go to the peer's meter.
   */
  private endQuantum(p: Peer, from: number): void {
    const k = Math.floor(p.frac);
    p.readPos = from + k;
    p.frac -= k;
    p.gainL = p.targetL;
    p.gainR = p.targetR;
    this.meterPeer(p, this.blockStats);
  }

  /** Folds one quantum's peak and sum of squares into the peer's meter. */
  private meterPeer(p: Peer, st: Float64Array): void {
    if (!(st[2] + st[3] < Infinity)) return;
    p.meter.fold(st);
  }

  // ---------------------------------------------------------------------------------------------
  // Master: gain and limiter folded into one ramp, soft knee, meters, non-finite guard.

  private renderMaster(outL: Float32Array, outR: Float32Array): void {
    const st = this.blockStats;
    measure(outL, 0, QUANTUM, st, 0);
    measure(outR, 0, QUANTUM, st, 1);
    if (!(st[2] + st[3] < Infinity)) {
      // NaN, ±Inf or a square that overflows: silence the block, keep the limiter state.
      outL.fill(0);
      outR.fill(0);
      this.nonFinite++;
      this.meterMaster(this.zeroStats);
      return;
    }
    const peak = st[0] > st[1] ? st[0] : st[1];
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
      let pkL = 0;
      let pkR = 0;
      let ssL = 0;
      let ssR = 0;
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
      // The meters see the block as gained and limited.
      st[0] = pkL;
      st[1] = pkR;
      st[2] = ssL;
      st[3] = ssR;
    }
    this.masterCurrent = this.masterGain;
    this.limiter = limiter;
    this.total = total;
    this.meterMaster(st);
  }

  private meterMaster(st: Float64Array): void {
    this.masterMeter.fold(st);
  }

  // ---------------------------------------------------------------------------------------------
  // Capture: input quanta → blocks of the configured size → packets on the outbound ring.

  private capture(inL: Float32Array, inR: Float32Array): void {
    const st = this.blockStats;
    measure(inL, 0, QUANTUM, st, 0);
    const peak = st[0];
    const sum = st[2];
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
    s[S.G_MASTER_PEAK_L] = this.masterMeter.peak[0];
    s[S.G_MASTER_PEAK_R] = this.masterMeter.peak[1];
    s[S.G_MASTER_RMS_L] = Math.sqrt(this.masterMeter.meanSq[0]);
    s[S.G_MASTER_RMS_R] = Math.sqrt(this.masterMeter.meanSq[1]);
    s[S.G_LIMITER_DB] = this.limiter < 1 ? -20 * Math.log10(this.limiter) : 0;
    s[S.G_PACKETS_SENT] = this.packetsSent;
    s[S.G_SEND_DROPPED] = this.sendDropped;
    s[S.G_INPUT_PEAK] = this.inputPeak;
    s[S.G_INPUT_RMS] = Math.sqrt(this.inputMeanSq);
    s[S.G_NONFINITE] = this.nonFinite;
    s[S.G_CAPTURE_GAPS] = this.localGaps.gaps;
    s[S.G_CAPTURE_GAP_MS] = this.localGaps.gapUs / 1000;
    s[S.G_LOCAL_STALLS] = this.localStall.stalls;
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
      s[row + S.P_PEAK_L] = p.meter.peak[0];
      s[row + S.P_PEAK_R] = p.meter.peak[1];
      s[row + S.P_RMS_L] = Math.sqrt(p.meter.meanSq[0]);
      s[row + S.P_RMS_R] = Math.sqrt(p.meter.meanSq[1]);
      s[row + S.P_BLOCK_FRAMES] = j.block;
      s[row + S.P_SAMPLE_RATE] = j.rate;
      s[row + S.P_CHANNELS] = j.channels;
      s[row + S.P_BITS] = j.bits;
      s[row + S.P_JITTER_FRAMES] = j.jitter();
      s[row + S.P_RESETS] = j.resets;
      s[row + S.P_LATE_UNDERRUNS] = j.lateUnderruns;
      s[row + S.P_STALL_UNDERRUNS] = j.stallUnderruns;
      s[row + S.P_SENDER_GAPS] = p.senderGaps.gaps;
      s[row + S.P_SENDER_GAP_MS] = p.senderGaps.gapUs / 1000;
      s[row + S.P_STRETCHED] = j.stretched;
    }
    s[S.G_UNDERRUNS] = underruns;
    s[S.G_SEQUENCE] = seq + 2;
  }
}
