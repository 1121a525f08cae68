// A room session: the one engine worklet, the microphone feeding it, the packet pump, the mesh
// of peer connections and the signaling client, and the view the UI renders (types.ts).
//
// Membership comes from the server; audio never waits for it. Each participant gets an engine
// slot when first seen and keeps it while it is in the room, including across a server restart
// (the same peer id comes back with the same slot and the same link). The view is rebuilt from
// the engine's shared stats block ten times a second.

import { createEngine, engineUnavailableReason, type EngineHandle } from '../audio/host';
import { DEFAULT_CONFIG } from '../audio/engine-core';
import {
  G_ECHO_SLOT,
  G_INPUT_PEAK,
  G_INPUT_RMS,
  G_LIMITER_DB,
  G_MASTER_PEAK_L,
  G_MASTER_PEAK_R,
  G_MASTER_RMS_L,
  G_MASTER_RMS_R,
  G_PEERS,
  G_PROBE_CLICKS,
  G_PROBE_HEARD,
  G_PROBE_RESULTS_AT,
  G_PROBE_SENT,
  G_PROBE_SLOT,
  G_PROBE_STATE,
  G_QUANTA,
  PROBE_MAX_CLICKS,
  G_UNDERRUNS,
  BLOCK_LEN,
  P_BITS,
  P_BLOCK_FRAMES,
  P_BUFFERED_FRAMES,
  P_CHANNELS,
  P_CONCEALED,
  P_DISCARDED,
  P_DRIFT_PPM,
  P_DUPLICATES,
  P_JITTER_FRAMES,
  P_LATE,
  P_LOST,
  P_PEAK_L,
  P_PEAK_R,
  P_RECEIVED,
  P_RESETS,
  P_RMS_L,
  P_RMS_R,
  P_TARGET_FRAMES,
  P_UNDERRUNS,
  P_LATE_UNDERRUNS,
  P_STALL_UNDERRUNS,
  P_SENDER_GAPS,
  P_SENDER_GAP_MS,
  P_STRETCHED,
  P_ORACLE_FRAMES,
  G_CAPTURE_GAPS,
  G_CAPTURE_GAP_MS,
  G_LOCAL_STALLS,
  peerIndex,
  readStats,
} from '../audio/stats';
import { createTapBuffer, TAP_ARMED, TAP_WRITTEN, tapViews } from '../audio/tap';
import tapUrl from '../audio/tap-worklet.ts?worker&url';
import { Mesh, type IcePolicy } from '../net/mesh';
import { createPumpHost, type PumpHost } from '../net/net-host';
import { ECHO_ALLOWED, ECHO_BUSY, ECHO_DECLINED, ECHO_STOPPED } from '../net/clock';
import {
  type EchoEvent,
  NP_ECHO_DROPPED,
  NP_EXCHANGES,
  NP_GAP_MAX_MS,
  NP_GAPS_OVER_20MS,
  NP_OFFSET_US,
  NP_RTT_MS,
  NP_SEND_QUEUE_MS,
  NP_STAMP_LAG_MS,
  netPeerIndex,
} from '../net/pump';
import { randomId, type Member } from '../net/protocol';
import { SignalingClient } from '../net/signaling';
import { noticeFor } from './errors';
import { LoopbackChannel } from '../net/loopback';
import { SessionRecorder, trackTag } from '../record/recorder';
import {
  HB_BLOCK_LEN,
  HB_SEQUENCE,
  PEER_STAGES,
  readLatency,
  type LatencySnapshot,
  type StageHistogram,
} from '../audio/latency';
import type {
  EchoView,
  JoinRequest,
  Levels,
  LinkState,
  ParticipantView,
  RoomError,
  RoomSession,
  RoomView,
  StripSettings,
} from './types';

/** The self-test's one participant: the user's own stream, back through the engine. */
export const LOOPBACK_PEER = 'loopback';
/** Why a room cannot be joined with no network (error code "offline"). */
export const OFFLINE_MESSAGE =
  'Joining a room needs the network, and this device is offline (or the Tutti server cannot be ' +
  'reached). The sound check, the self-test and the benchmark work offline.';
const LOOPBACK_NAME = 'You, through the engine';
/** A peer's clock offset goes to the engine when it moves by more than this, µs... */
const OFFSET_STEP_US = 50;
/** ...and no more often than this per peer, ms (the first estimate goes at once). */
const OFFSET_EVERY_MS = 1000;
const IDLE_RECORDING: RoomView['recording'] = { state: 'idle', id: null, seconds: 0, bytes: 0, error: null };
const NO_ECHO: EchoView = { requests: [], echoing: null, autoAllow: false };

export const SAMPLE_RATE = 48000;
/** Engine slots: more than any room the server admits by default (16). */
export const MAX_PEERS = 64;
const VIEW_EVERY_MS = 100;
/** How long a notice (e.g. "only the owner can do that") stays, ms. */
const NOTICE_MS = 6000;
/** Figures (latency, buffer, loss, ...) change in the view every this many refreshes (0.5 s):
 * readable, and each change costs the page a layout; meters move at every refresh. */
const FIGURES_EVERY = 5;
/** The adaptive jitter buffer's bounds in a room: from one quantum up to 160 ms. The ceiling is
 * far above what anyone can play in time with, but a buffer that may not cover the stalls of a
 * starved machine or a bursty path underruns every few seconds instead; the figures show the
 * depth it settled at. */
export const BUFFER_FLOOR_FRAMES = 128;
export const BUFFER_CEILING_FRAMES = 7680;

const SILENT: Levels = { peakL: -Infinity, peakR: -Infinity, rmsL: -Infinity, rmsR: -Infinity };
const UNITY: StripSettings = { gainDb: 0, pan: 0, mute: false, solo: false };

export function dbToGain(db: number): number {
  return db <= -60 ? 0 : Math.pow(10, db / 20);
}

export function gainToDb(linear: number): number {
  return linear > 0 ? 20 * Math.log10(linear) : -Infinity;
}

interface Participant {
  member: Member;
  slot: number;
  strip: StripSettings;
  link: LinkState;
  /** The clock offset last sent to the engine for this slot (NaN: none or unknown) and when. */
  offsetSentUs: number;
  offsetSentAt: number;
}

export interface PeerCounters {
  received: number;
  lost: number;
  late: number;
  duplicates: number;
  discarded: number;
  concealed: number;
  underruns: number;
  resets: number;
  bufferedMs: number;
  targetMs: number;
  /** The arrival jitter the adaptive buffer measures, ms. */
  jitterMs: number;
  /** The sender's clock against ours, ppm (the drift loop's estimate). */
  driftPpm: number;
  /** Longest time between two of the peer's packets at the pump, ms. */
  gapMaxMs: number;
  gapsOver20Ms: number;
  // The clock and send-queue figures below are always filled by counters(); optional so that
  // counters recorded before they existed still read.
  /** Median RTT of the pump's clock exchanges with the peer, ms; NaN until the first. */
  rttMs?: number;
  /** Our wall clock − the peer's, µs (min-RTT exchange); NaN until known. */
  offsetUs?: number;
  /** Clock exchanges taken. */
  clockExchanges?: number;
  /** The send queue to the peer at the last send, as time, ms. */
  sendQueueMs?: number;
  /** The last packet's arrival − the send time in its header, ms (one-way + clock offset). */
  stampLagMs?: number;
  // Where the dropouts come from (core/src/jitter, core/src/continuity.rs); optional so that
  // counters recorded before they existed still read.
  /** Underruns that waited for a late packet (the network, or the peer's sending side). */
  lateUnderruns?: number;
  /** Underruns ended by packets a stall of this machine held back. */
  stallUnderruns?: number;
  /** The peer's own missed audio callbacks, seen in its packets' send stamps, and their ms. */
  senderGaps?: number;
  senderGapMs?: number;
  /** Blocks synthesized without passing a sequence number (underrun waits, depth raised). */
  stretched?: number;
  /**
   * The buffer's oracle, ms: the smallest fixed depth (counted as the target is) that would have
   * played every packet of the last two minutes; 0 before the first packet. A yardstick for
   * `targetMs`, not an input to it.
   */
  oracleMs?: number;
  /** The peer's round-trip requests dropped unasked (one pending already, or too soon after a
   * denial or a stop: net/echo-consent.ts). */
  echoRequestsDropped?: number;
}

export interface SessionCounters {
  underruns: number;
  quanta: number;
  perPeer: Record<string, PeerCounters>;
  /** Our own audio device's missed callbacks, and their total ms (optional: older records). */
  captureGaps?: number;
  captureGapMs?: number;
  /** Stalls of this machine: every peer's packets stopped and came back together. */
  localStalls?: number;
}

/** Clicks a round-trip probe sends. */
export const PROBE_CLICKS = 10;
/** How long a peer is asked to echo us for a probe, ms (ten clicks take 2-4 s). */
export const PROBE_ECHO_MS = 8000;

/** How long a started probe may take to show in the engine's stats block, ms. */
export const PROBE_START_GRACE_MS = 1500;
/** How long we wait for a peer to answer our round-trip request, ms: theirs gives up after 20 s
 * (net/echo-consent.ts) and says so; this bounds the wait if that answer never comes. */
export const ASK_TIMEOUT_MS = 25_000;

/** What a peer's answer to our round-trip request means for the user; `name` is theirs. */
export function echoRefusalText(answer: number, name: string): string {
  switch (answer) {
    case ECHO_DECLINED:
      return `${name} declined the round-trip measurement.`;
    case ECHO_BUSY:
      return `${name} is measuring a round trip with someone else; try again in a moment.`;
    case ECHO_STOPPED:
      return `${name} stopped the round-trip measurement.`;
    default:
      return `${name} did not answer the round-trip request.`;
  }
}

interface ProbeRun {
  peer: string;
  slot: number;
  clicks: number;
  /** The peer was asked to echo (and is told to stop when the probe is over). */
  echo: boolean;
  /** Waiting for the peer to allow the echo: the engine's probe starts once they do. */
  asking: boolean;
  /** Why it ended without measuring (the peer declined, did not answer...), in words. */
  refusal: string | null;
  /** The probe runs over a loopback link made for it in a room. */
  selfLoop: boolean;
  /** The engine's stats block has shown this probe running. */
  seenRunning: boolean;
  over: boolean;
  /** performance.now() of the request; once the peer allowed the echo, of the clicks' start. */
  startedAt: number;
}

/** A round-trip probe's progress and results (Session.probeResult). */
export interface ProbeResult {
  peer: string;
  /** 'asking': waiting for the peer to allow the echo; 'refused': it ended without measuring
   * (`message` says why). */
  state: 'idle' | 'asking' | 'running' | 'done' | 'refused';
  /** With 'refused': why, in words for the user. */
  message?: string;
  clicks: number;
  sent: number;
  heard: number;
  /** Each sent click's round trip on the local audio clock, ms; NaN: lost. */
  roundTripsMs: number[];
  medianMs: number;
  minMs: number;
  maxMs: number;
}

export interface OutputCapture {
  left: Float32Array;
  right: Float32Array;
  sampleRate: number;
}

class Session implements RoomSession {
  view: RoomView;
  private readonly listeners = new Set<(view: RoomView) => void>();
  private readonly participants = new Map<string, Participant>();
  private readonly freeSlots: number[] = [];
  private readonly token = randomId();
  private readonly statsSnapshot = new Float64Array(BLOCK_LEN);
  private ctx: AudioContext | null = null;
  private stream: MediaStream | null = null;
  private engine: EngineHandle | null = null;
  private monitorGain: GainNode | null = null;
  private pump: PumpHost | null = null;
  private mesh: Mesh | null = null;
  private signaling: SignalingClient | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private ended = false;
  private tapLoaded: Promise<void> | null = null;
  private statsShared: Float64Array | null = null;
  private refreshes = 0;
  private recorder: SessionRecorder | null = null;
  private readonly latencyScratch = new Float64Array(HB_BLOCK_LEN);
  /** The last histogram block read and the publication (its sequence word) it came from: the
   * engine publishes about once a second, the view and the history ask more often. */
  private latencyRead: { sequence: number; snap: LatencySnapshot } | null = null;
  /** The devices' latency last told to the engine, µs. */
  private deviceLatencySent = { outputUs: NaN, inputUs: NaN };
  /** The last round-trip probe started: towards whom, in which slot, how it stands. */
  private probe: ProbeRun | null = null;
  /** In a room: the slot of a loopback link to ourselves, there while a self probe runs. */
  private selfLoopSlot: number | null = null;
  /** Round-trip requests from other participants waiting for the user's answer, by peer. */
  private readonly echoRequests = new Map<string, { slot: number; ms: number }>();
  /** The last answer each participant gave to our round-trip request (clock.ts ECHO_*). */
  private readonly echoReplies = new Map<string, number>();

  constructor(
    private readonly req: JoinRequest,
    private readonly icePolicy: IcePolicy,
    /** Self-test: no server, no network; the user's own packets come back as one participant. */
    readonly loopback = false,
  ) {
    for (let s = MAX_PEERS - 1; s >= 0; s--) this.freeSlots.push(s);
    this.view = {
      room: req.room,
      key: req.key ?? null,
      access: { isOwner: false, locked: false, protected: false, private: !!req.key },
      notice: null,
      self: { peer: randomId(), name: req.name },
      signaling: 'connecting',
      error: null,
      joined: false,
      participants: [],
      master: { gainDb: 0, levels: SILENT, limiterDb: 0 },
      input: { levels: SILENT, channels: req.audio.channels },
      monitor: { on: false, gainDb: -6 },
      engine: { underruns: 0, peers: 0, sampleRate: SAMPLE_RATE, blockFrames: req.audio.blockFrames },
      recording: IDLE_RECORDING,
      echo: NO_ECHO,
    };
    void this.start();
  }

  subscribe(fn: (view: RoomView) => void): () => void {
    this.listeners.add(fn);
    fn(this.view);
    return () => this.listeners.delete(fn);
  }

  setStrip(peer: string, patch: Partial<StripSettings>): void {
    const p = this.participants.get(peer);
    if (!p) return;
    p.strip = { ...p.strip, ...patch };
    this.sendStrip(p);
    // Muting someone also stops sending them their own sound back, and declines their request.
    if (p.strip.mute) {
      this.pump?.stopEcho(p.slot);
      if (this.echoRequests.has(peer)) this.answerEcho(peer, false);
    }
    this.req.mixMemory?.set(p.member.name, p.strip);
    this.refresh();
  }

  setMaster(gainDb: number): void {
    this.view = { ...this.view, master: { ...this.view.master, gainDb } };
    this.engine?.control({ type: 'master', gain: dbToGain(gainDb) });
    this.emit();
  }

  setMonitor(on: boolean, gainDb = this.view.monitor.gainDb): void {
    this.view = { ...this.view, monitor: { on, gainDb } };
    if (this.monitorGain && this.ctx) {
      this.monitorGain.gain.setTargetAtTime(on ? dbToGain(gainDb) : 0, this.ctx.currentTime, 0.01);
    }
    this.emit();
  }

  retryPassword(password?: string): void {
    const error = this.view.error;
    // The server asked to wait: a retry before then would only be refused (and count against us).
    if (error?.retryAt !== undefined && Date.now() < error.retryAt) return;
    if (error?.code === 'removed' || !this.signaling) return;
    this.view = { ...this.view, error: null };
    this.emit();
    this.signaling.retry(password);
  }

  setLocked(locked: boolean): void {
    if (this.view.access.isOwner) this.signaling?.lock(locked);
  }

  removePeer(peer: string): void {
    if (this.view.access.isOwner && this.participants.has(peer)) this.signaling?.remove(peer);
  }

  /** Clears the notice after NOTICE_MS unless another replaced it. */
  private showNotice(notice: string): void {
    this.view = { ...this.view, notice };
    this.emit();
    setTimeout(() => {
      if (this.view.notice !== notice) return;
      this.view = { ...this.view, notice: null };
      this.emit();
    }, NOTICE_MS);
  }

  async startRecording(): Promise<void> {
    const engine = this.engine;
    const state = this.view.recording.state;
    if (!engine || state === 'starting' || state === 'recording' || this.ended) return;
    this.setRecording({ ...IDLE_RECORDING, state: 'starting' });
    const tracks: [number, { kind: 'mix' | 'input' | 'peer'; name: string; channels: 1 | 2 }][] = [
      [trackTag('mix'), { kind: 'mix', name: 'Mix', channels: 2 }],
      [trackTag('input'), { kind: 'input', name: this.req.name || 'Me', channels: this.req.audio.channels }],
    ];
    for (const p of this.participants.values()) tracks.push([trackTag('peer', p.slot), this.trackInfo(p)]);
    try {
      const rec = await SessionRecorder.start({
        engine,
        room: this.loopback ? 'sound-check' : this.req.room,
        sampleRate: SAMPLE_RATE,
        tracks,
        onStatus: (st) => {
          if (this.view.recording.id !== st.id || this.view.recording.state !== 'recording') return;
          this.setRecording({ ...this.view.recording, seconds: st.seconds, bytes: st.bytes });
        },
        onError: (err) => {
          // One recorder at a time: this is the one that failed.
          this.recorder = null;
          this.setRecording({ ...this.view.recording, state: 'idle', error: err.message });
        },
      });
      this.recorder = rec;
      if (this.ended) {
        this.recorder = null;
        await rec.stop().catch(() => {});
        return;
      }
      this.setRecording({ ...IDLE_RECORDING, state: 'recording', id: rec.id });
    } catch (err) {
      this.setRecording({ ...IDLE_RECORDING, error: err instanceof Error ? err.message : String(err) });
    }
  }

  async stopRecording(): Promise<void> {
    const rec = this.recorder;
    if (!rec) return;
    this.recorder = null;
    this.setRecording({ ...this.view.recording, state: 'stopping' });
    try {
      const meta = await rec.stop();
      this.setRecording({ ...this.view.recording, state: 'idle', seconds: meta.frames / SAMPLE_RATE, bytes: meta.bytes });
    } catch (err) {
      this.setRecording({ ...this.view.recording, state: 'idle', error: err instanceof Error ? err.message : String(err) });
    }
  }

  private setRecording(recording: RoomView['recording']): void {
    this.view = { ...this.view, recording };
    this.emit();
  }

  private trackInfo(p: Participant): { kind: 'peer'; name: string; channels: 2 } {
    return { kind: 'peer', name: p.member.name, channels: 2 };
  }

  async leave(): Promise<void> {
    if (this.ended) return;
    // What was recorded is stored before the audio stops.
    if (this.recorder) await this.stopRecording();
    this.ended = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.signaling?.close();
    this.mesh?.close();
    this.pump?.stop();
    this.stream?.getTracks().forEach((t) => t.stop());
    this.engine?.node.disconnect();
    await this.ctx?.close().catch(() => {});
    this.view = { ...this.view, signaling: 'closed', joined: false };
    this.emit();
    this.listeners.clear();
  }

  /** Records `seconds` of what the engine sends to the output (diagnostics and tests). */
  async captureOutput(seconds: number): Promise<OutputCapture> {
    const ctx = this.ctx;
    const engine = this.engine;
    if (!ctx || !engine) throw new Error('the session has no audio yet');
    this.tapLoaded ??= ctx.audioWorklet.addModule(tapUrl);
    await this.tapLoaded;
    const frames = Math.ceil(seconds * ctx.sampleRate);
    const shared = createTapBuffer(frames);
    const views = tapViews(shared);
    const node = new AudioWorkletNode(ctx, 'tutti-tap', {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      channelCount: 2,
      channelCountMode: 'explicit',
      processorOptions: { shared },
    });
    engine.node.connect(node);
    // The tap outputs silence; it must reach the destination to be pulled by the graph.
    node.connect(ctx.destination);
    Atomics.store(views.header, TAP_ARMED, 1);
    // Bounded: a context that stopped rendering (suspended, closed) yields what it has.
    const deadline = performance.now() + seconds * 2000 + 2000;
    while (Atomics.load(views.header, TAP_WRITTEN) < frames) {
      await new Promise((r) => setTimeout(r, 50));
      if (this.ended || performance.now() > deadline) break;
    }
    engine.node.disconnect(node);
    node.disconnect();
    const n = Math.min(frames, Atomics.load(views.header, TAP_WRITTEN));
    return { left: views.left.slice(0, n), right: views.right.slice(0, n), sampleRate: ctx.sampleRate };
  }

  /** Counters of the engine and the packet pump, by peer (diagnostics and tests). */
  counters(): SessionCounters {
    const s = this.statsSnapshot;
    const net = this.pump?.stats ?? null;
    const perPeer: SessionCounters['perPeer'] = {};
    for (const [peer, p] of this.participants) {
      const at = (f: number) => s[peerIndex(p.slot, f)];
      const nat = (f: number) => (net ? net[netPeerIndex(p.slot, f)] : 0);
      perPeer[peer] = {
        received: at(P_RECEIVED),
        lost: at(P_LOST),
        late: at(P_LATE),
        duplicates: at(P_DUPLICATES),
        discarded: at(P_DISCARDED),
        concealed: at(P_CONCEALED),
        underruns: at(P_UNDERRUNS),
        resets: at(P_RESETS),
        bufferedMs: (at(P_BUFFERED_FRAMES) / SAMPLE_RATE) * 1000,
        targetMs: (at(P_TARGET_FRAMES) / SAMPLE_RATE) * 1000,
        jitterMs: (at(P_JITTER_FRAMES) / SAMPLE_RATE) * 1000,
        driftPpm: at(P_DRIFT_PPM),
        gapMaxMs: nat(NP_GAP_MAX_MS),
        gapsOver20Ms: nat(NP_GAPS_OVER_20MS),
        rttMs: net ? nat(NP_RTT_MS) : NaN,
        offsetUs: net ? nat(NP_OFFSET_US) : NaN,
        clockExchanges: nat(NP_EXCHANGES),
        sendQueueMs: nat(NP_SEND_QUEUE_MS),
        stampLagMs: net ? nat(NP_STAMP_LAG_MS) : NaN,
        lateUnderruns: at(P_LATE_UNDERRUNS),
        stallUnderruns: at(P_STALL_UNDERRUNS),
        senderGaps: at(P_SENDER_GAPS),
        senderGapMs: at(P_SENDER_GAP_MS),
        stretched: at(P_STRETCHED),
        oracleMs: (at(P_ORACLE_FRAMES) / SAMPLE_RATE) * 1000,
        echoRequestsDropped: nat(NP_ECHO_DROPPED),
      };
    }
    return {
      underruns: s[G_UNDERRUNS],
      quanta: s[G_QUANTA],
      perPeer,
      captureGaps: s[G_CAPTURE_GAPS],
      captureGapMs: s[G_CAPTURE_GAP_MS],
      localStalls: s[G_LOCAL_STALLS],
    };
  }

  /**
   * The engine's per-stage latency distributions (core/src/engine.rs): per participant (by peer
   * id) the jitter-buffer wait, network one-way, delivery, our send queue towards them, transit
   * and the estimated mouth to ear; the local capture interval; the devices' latency in ms.
   * Empty until published (about once a second).
   */
  latencyStages(): {
    peers: Record<string, Record<string, StageHistogram>>;
    local: Record<string, StageHistogram>;
    devices: { outputMs: number; inputMs: number };
  } {
    const snap = this.latencySnapshot();
    if (!snap) return { peers: {}, local: {}, devices: { outputMs: NaN, inputMs: NaN } };
    const bySlot = new Map(snap.peers.map((p) => [p.slot, p]));
    const peers: Record<string, Record<string, StageHistogram>> = {};
    for (const [peer, p] of this.participants) {
      const l = bySlot.get(p.slot);
      if (!l) continue;
      const stages: Record<string, StageHistogram> = {};
      for (const [name] of PEER_STAGES) stages[name] = l[name];
      stages.mouthToEar = l.mouthToEar;
      peers[peer] = stages;
    }
    return { peers, local: { capture: snap.capture }, devices: { outputMs: snap.outputMs, inputMs: snap.inputMs } };
  }

  /** The histogram block decoded, read again only when the engine has published since. */
  private latencySnapshot(): LatencySnapshot | null {
    const shared = this.engine?.buffers.histograms;
    if (!shared) return null;
    const block = new Float64Array(shared);
    const sequence = block[HB_SEQUENCE];
    if (this.latencyRead?.sequence === sequence) return this.latencyRead.snap;
    const snap = readLatency(block, this.latencyScratch);
    // An odd word means a copy was being written: that read is not kept.
    if (snap && sequence % 2 === 0 && block[HB_SEQUENCE] === sequence) this.latencyRead = { sequence, snap };
    return snap;
  }

  /**
   * Starts a round-trip probe of `clicks` clicks towards `peer`: our outgoing audio becomes
   * silence and clicks (everyone hears them), and each click is timed when it comes back in that
   * participant's stream. A remote participant is asked to echo our stream first: the clicks
   * start once their user allows it, and a refusal (or no answer) ends the probe with a message
   * (probeResult). `LOOPBACK_PEER` measures our own loop through the engine and the packet pump
   * with no network: the sound check's participant, or in a room a loopback link made for the
   * probe (muted in the mix) and removed after it. Returns false when there is no such
   * participant or no engine.
   */
  startProbe(peer: string, clicks = PROBE_CLICKS): boolean {
    const engine = this.engine;
    if (!engine || this.ended) return false;
    if (this.probe && !this.probe.over) this.stopProbe();
    let slot = this.participants.get(peer)?.slot;
    const selfLoop = slot === undefined && peer === LOOPBACK_PEER && !this.loopback;
    if (selfLoop) slot = this.openSelfLoop() ?? undefined;
    if (slot === undefined) return false;
    const echo = !this.loopback && !selfLoop;
    this.probe = {
      peer,
      slot,
      clicks,
      echo,
      asking: echo,
      refusal: null,
      selfLoop,
      seenRunning: false,
      over: false,
      startedAt: performance.now(),
    };
    if (echo) {
      this.echoReplies.delete(peer);
      this.pump?.requestEcho(slot, PROBE_ECHO_MS);
    } else {
      engine.control({ type: 'probe', slot, clicks });
    }
    return true;
  }

  /** Stops a running probe (and the peer's echo, or our loopback link). */
  stopProbe(): void {
    this.engine?.control({ type: 'probe-stop' });
    this.endProbe();
  }

  /** A probe is over (done, stopped or refused): the peer stops echoing, a self loop goes. */
  private endProbe(): void {
    const run = this.probe;
    if (!run || run.over) return;
    run.over = true;
    run.asking = false;
    if (run.echo) this.pump?.requestEcho(run.slot, 0);
    if (run.selfLoop) this.closeSelfLoop();
  }

  /**
   * Asks `peer` to send our own stream back to us for `ms` ms, without a probe (what the probe
   * does first): we then hear ourselves as we arrive there. Their user decides; the answer is
   * echoReply(peer). `ms` 0 withdraws the request or stops the echo. False when there is no such
   * participant.
   */
  requestEcho(peer: string, ms = PROBE_ECHO_MS): boolean {
    const p = this.participants.get(peer);
    if (!p || !this.pump || this.loopback) return false;
    this.echoReplies.delete(peer);
    this.pump.requestEcho(p.slot, ms);
    return true;
  }

  /** `peer`'s last answer to our round-trip request: 'allowed', 'declined', 'unanswered',
   * 'busy' or 'stopped'; null while none came. */
  echoReply(peer: string): 'allowed' | 'declined' | 'unanswered' | 'busy' | 'stopped' | null {
    const a = this.echoReplies.get(peer);
    if (a === undefined) return null;
    return (['allowed', 'declined', 'unanswered', 'busy', 'stopped'] as const)[a - ECHO_ALLOWED] ?? null;
  }

  /** Our user's answer to `peer`'s round-trip request (shown in view.echo.requests). */
  answerEcho(peer: string, allow: boolean): void {
    const req = this.echoRequests.get(peer);
    if (!req) return;
    this.echoRequests.delete(peer);
    this.pump?.answerEcho(req.slot, allow);
    this.refresh();
  }

  /** Stops sending a participant their own sound back (the Stop of the echo notice). */
  stopEcho(): void {
    const peer = this.echoing();
    const p = peer === null ? undefined : this.participants.get(peer);
    if (p) this.pump?.stopEcho(p.slot);
  }

  /** "Allow round-trip requests without asking" for the rest of this session (off at first). */
  setEchoAutoAllow(on: boolean): void {
    this.pump?.setEchoAutoAllow(on);
    this.view = { ...this.view, echo: { ...this.view.echo, autoAllow: on } };
    this.emit();
  }

  /** What the packet pump says of round-trip echoes: requests to us, answers to ours. */
  private onEcho(ev: EchoEvent): void {
    if (this.ended) return;
    const p = [...this.participants.values()].find((x) => x.slot === ev.slot);
    if (ev.type === 'echo-request') {
      // Someone we muted, or someone we do not know (yet): declined without asking.
      if (!p || p.strip.mute) {
        this.pump?.answerEcho(ev.slot, false);
        return;
      }
      this.echoRequests.set(p.member.peer, { slot: ev.slot, ms: ev.ms });
    } else if (ev.type === 'echo-withdrawn') {
      if (p) this.echoRequests.delete(p.member.peer);
    } else {
      if (!p) return;
      this.echoReplies.set(p.member.peer, ev.answer);
      const run = this.probe;
      if (run && !run.over && run.echo && run.slot === ev.slot) {
        if (run.asking && ev.answer === ECHO_ALLOWED) {
          // Allowed: the echo runs from now, and so do the clicks.
          run.asking = false;
          run.startedAt = performance.now();
          this.engine?.control({ type: 'probe', slot: run.slot, clicks: run.clicks });
        } else if (ev.answer !== ECHO_ALLOWED) {
          run.refusal = echoRefusalText(ev.answer, p.member.name);
          this.stopProbe();
        }
      }
    }
    this.refresh();
  }

  /** The view's echo part: pending requests, whom we echo, the setting. */
  private echoView(): EchoView {
    const requests: EchoView['requests'] = [];
    for (const [peer, r] of this.echoRequests) {
      const p = this.participants.get(peer);
      if (p) requests.push({ peer, name: p.member.name, seconds: Math.ceil(r.ms / 1000) });
    }
    const peer = this.echoing();
    const p = peer === null ? undefined : this.participants.get(peer);
    return {
      requests,
      echoing: p ? { peer: p.member.peer, name: p.member.name } : null,
      autoAllow: this.view.echo.autoAllow,
    };
  }

  /** In a room: a loopback link to ourselves in a free slot, muted in the mix. */
  private openSelfLoop(): number | null {
    const engine = this.engine;
    const pump = this.pump;
    if (this.selfLoopSlot !== null) return this.selfLoopSlot;
    const slot = this.freeSlots.pop();
    if (!engine || !pump || slot === undefined) return null;
    engine.control({ type: 'add-peer', slot });
    engine.control({ type: 'strip', slot, gain: 1, pan: 0, mute: true, solo: false });
    pump.addLoopback(slot);
    this.selfLoopSlot = slot;
    return slot;
  }

  private closeSelfLoop(): void {
    const slot = this.selfLoopSlot;
    if (slot === null) return;
    this.selfLoopSlot = null;
    this.pump?.remove(slot);
    this.engine?.control({ type: 'remove-peer', slot });
    this.freeSlots.push(slot);
  }

  /**
   * Where the round-trip probe stands, from the engine's stats block (refreshed ten times a
   * second); null before the first probe. 'asking' while the peer has not allowed the echo yet,
   * 'refused' (with the message) once they declined, did not answer or stopped it. Until the
   * engine shows the new probe running (a moment after the start), it reads as running with
   * nothing sent yet.
   */
  probeResult(): ProbeResult | null {
    const s = this.statsSnapshot;
    const run = this.probe;
    if (!run) return null;
    const peer = run.peer;
    const nothing = { peer, clicks: run.clicks, sent: 0, heard: 0, roundTripsMs: [], medianMs: NaN, minMs: NaN, maxMs: NaN };
    if (run.asking) return { ...nothing, state: 'asking' };
    if (run.refusal !== null && !run.seenRunning) return { ...nothing, state: 'refused', message: run.refusal };
    if (!run.seenRunning && !run.over && performance.now() - run.startedAt < PROBE_START_GRACE_MS) {
      return { ...nothing, state: 'running' };
    }
    const state = run.refusal !== null ? 'refused' : s[G_PROBE_STATE] === 1 ? 'running' : s[G_PROBE_STATE] === 2 ? 'done' : 'idle';
    const roundTripsMs: number[] = [];
    for (let i = 0; i < Math.min(s[G_PROBE_SENT], PROBE_MAX_CLICKS); i++) roundTripsMs.push(s[G_PROBE_RESULTS_AT + i]);
    const heard = roundTripsMs.filter(Number.isFinite).sort((a, b) => a - b);
    const median = heard.length > 0 ? heard[Math.floor((heard.length - 1) / 2)] : NaN;
    return {
      peer,
      state,
      clicks: s[G_PROBE_CLICKS],
      sent: s[G_PROBE_SENT],
      heard: s[G_PROBE_HEARD],
      roundTripsMs,
      medianMs: median,
      minMs: heard.length > 0 ? heard[0] : NaN,
      maxMs: heard.length > 0 ? heard[heard.length - 1] : NaN,
      ...(run.refusal !== null ? { message: run.refusal } : {}),
    };
  }

  /** The participant whose stream we echo for their round-trip probe, if any. */
  echoing(): string | null {
    const slot = this.statsSnapshot[G_ECHO_SLOT];
    for (const [peer, p] of this.participants) if (p.slot === slot) return peer;
    return null;
  }

  /** Starts the latency histograms afresh (e.g. once the buffers have settled). */
  resetLatency(): void {
    this.engine?.control({ type: 'reset-latency' });
  }

  /** Where the packet pump runs. */
  get pumpThread(): 'worker' | 'main' | null {
    return this.pump?.where ?? null;
  }

  private async start(): Promise<void> {
    const reason = engineUnavailableReason();
    if (reason) return this.fail('engine-unavailable', reason);
    const { audio } = this.req;
    let iceServers: RTCIceServer[] = [];
    if (!this.loopback) {
      // A room needs the server (signaling) and the network: say so plainly rather than retry.
      if (navigator.onLine === false) return this.fail('offline', OFFLINE_MESSAGE);
      let res: Response;
      try {
        res = await fetch('/api/config');
      } catch {
        return this.fail('offline', OFFLINE_MESSAGE);
      }
      try {
        if (res.ok) {
          const cfg = (await res.json()) as { iceServers?: RTCIceServer[] };
          if (Array.isArray(cfg.iceServers)) iceServers = cfg.iceServers;
        }
      } catch {
        // No usable server config: a LAN or loopback needs no ICE servers.
      }
    }
    if (this.ended) return;

    const ctx = new AudioContext({ sampleRate: SAMPLE_RATE, latencyHint: 'interactive' });
    this.ctx = ctx;
    const sinkable = ctx as AudioContext & { setSinkId?: (id: string) => Promise<void> };
    if (audio.outputDeviceId && typeof sinkable.setSinkId === 'function') {
      await sinkable.setSinkId(audio.outputDeviceId).catch((err: unknown) => {
        console.warn(`output device not available, using the default: ${String(err)}`);
      });
    }
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({
        audio: {
          deviceId: audio.inputDeviceId ? { exact: audio.inputDeviceId } : undefined,
          channelCount: { ideal: audio.channels },
          echoCancellation: false,
          noiseSuppression: false,
          autoGainControl: false,
          latency: 0,
        } as MediaTrackConstraints,
      });
    } catch (err) {
      const name = err instanceof DOMException ? err.name : '';
      return this.fail(
        'no-microphone',
        name === 'NotAllowedError'
          ? 'Microphone access was refused. Allow it for this site to play in a room.'
          : `No microphone could be opened (${name || String(err)}). Check the input device in the settings.`,
      );
    }
    if (this.ended) return;

    try {
      this.engine = await createEngine(ctx, {
        ...DEFAULT_CONFIG,
        maxPeers: MAX_PEERS,
        blockFrames: audio.blockFrames,
        captureChannels: audio.channels,
        // The user's choice (audio setup); adaptive unless a fixed depth was picked.
        buffer:
          audio.buffer?.mode === 'fixed'
            ? { mode: 'fixed', packets: audio.buffer.packets }
            : { mode: 'adaptive', floorFrames: BUFFER_FLOOR_FRAMES, ceilingFrames: BUFFER_CEILING_FRAMES },
      });
    } catch (err) {
      return this.fail('engine-unavailable', `The audio engine did not start: ${String(err)}`);
    }
    if (this.ended) return;
    this.statsShared = new Float64Array(this.engine.buffers.stats);
    const source = ctx.createMediaStreamSource(this.stream);
    source.connect(this.engine.node);
    this.engine.node.connect(ctx.destination);
    this.monitorGain = ctx.createGain();
    this.monitorGain.gain.value = 0;
    source.connect(this.monitorGain).connect(ctx.destination);
    await ctx.resume().catch(() => {});

    if (this.loopback) {
      // The loopback channel lives on this thread: the pump must too.
      this.pump = createPumpHost(this.engine.buffers.inbound, this.engine.buffers.outbound, MAX_PEERS, 'main');
      this.view = { ...this.view, joined: true, signaling: 'open' };
      this.admit({ peer: LOOPBACK_PEER, name: LOOPBACK_NAME });
      const p = this.participants.get(LOOPBACK_PEER);
      if (p) {
        p.link = 'connected';
        // A loopback control channel too: our pings come back as pings, the pump answers them,
        // and the pongs make exchanges with ourselves, whose offset is 0 by construction.
        this.pump.add(p.slot, new LoopbackChannel().asDataChannel(), new LoopbackChannel().asDataChannel());
      }
      this.refresh();
      this.timer = setInterval(() => this.refresh(), VIEW_EVERY_MS);
      return;
    }
    this.pump = createPumpHost(this.engine.buffers.inbound, this.engine.buffers.outbound, MAX_PEERS, 'worker', (ev) =>
      this.onEcho(ev),
    );
    const self = this.view.self.peer;
    this.signaling = new SignalingClient(
      SignalingClient.urlFor(),
      {
        room: this.req.room,
        key: this.req.key ?? null,
        owner: this.req.owner?.get() ?? null,
        name: this.req.name,
        peer: self,
        token: this.token,
        password: this.req.password,
      },
      {
        status: (signaling) => {
          this.view = { ...this.view, signaling, joined: signaling === 'open' ? this.view.joined : false };
          this.emit();
        },
        welcome: (peers, _cap, access) => {
          if (access.owner) this.req.owner?.set(access.owner);
          this.view = {
            ...this.view,
            joined: true,
            error: null,
            access: { ...this.view.access, isOwner: access.isOwner, locked: access.locked, protected: access.protected },
          };
          for (const m of peers) this.admit(m);
          this.refresh();
        },
        room: (locked) => {
          this.view = { ...this.view, access: { ...this.view.access, locked } };
          this.emit();
        },
        joined: (m) => {
          this.admit(m);
          this.refresh();
        },
        left: (peer) => {
          this.release(peer);
          this.refresh();
        },
        signal: (from, data) => void this.mesh?.handleSignal(from, data),
        error: (code, message, fatal, retryAfterMs) => {
          if (fatal || !this.view.joined) {
            const error: RoomError = { code, message };
            if (retryAfterMs !== undefined) error.retryAt = Date.now() + retryAfterMs;
            this.view = { ...this.view, error, joined: false };
            // Sent away: stop sending to and hearing the others at once.
            if (code === 'removed') for (const peer of [...this.participants.keys()]) this.release(peer);
            this.refresh();
          } else if (code === 'not-owner') {
            this.showNotice(noticeFor(code, message));
          } else {
            console.warn(`signaling: ${code}: ${message}`);
          }
        },
      },
    );
    this.mesh = new Mesh({
      self,
      iceServers,
      icePolicy: this.icePolicy,
      pump: this.pump,
      send: (to, data) => this.signaling?.send(to, data),
      onLinkState: (peer, link) => {
        const p = this.participants.get(peer);
        if (p) p.link = link;
        this.refresh();
      },
    });
    this.timer = setInterval(() => this.refresh(), VIEW_EVERY_MS);
  }

  private admit(member: Member): void {
    if (member.peer === this.view.self.peer) return;
    let p = this.participants.get(member.peer);
    if (!p) {
      const slot = this.freeSlots.pop();
      if (slot === undefined) {
        console.warn(`no engine slot left for ${member.name}`);
        return;
      }
      // A participant whose name this room remembers starts from the strip the user left them at.
      p = {
        member,
        slot,
        strip: { ...UNITY, ...this.req.mixMemory?.get(member.name) },
        link: 'connecting',
        offsetSentUs: NaN,
        offsetSentAt: -Infinity,
      };
      this.participants.set(member.peer, p);
      this.engine?.control({ type: 'add-peer', slot });
      this.sendStrip(p);
    } else {
      p.member = member;
    }
    this.recorder?.setTrack(trackTag('peer', p.slot), this.trackInfo(p));
    this.mesh?.ensure(member.peer, p.slot);
    p.link = this.mesh?.state(member.peer) ?? p.link;
  }

  private release(peer: string): void {
    const p = this.participants.get(peer);
    if (!p) return;
    this.participants.delete(peer);
    this.echoRequests.delete(peer);
    this.echoReplies.delete(peer);
    this.mesh?.drop(peer);
    this.engine?.control({ type: 'remove-peer', slot: p.slot });
    this.freeSlots.push(p.slot);
  }

  private sendStrip(p: Participant): void {
    this.engine?.control({
      type: 'strip',
      slot: p.slot,
      gain: dbToGain(p.strip.gainDb),
      pan: p.strip.pan,
      mute: p.strip.mute,
      solo: p.strip.solo,
    });
  }

  private fail(code: string, message: string): void {
    const error: RoomError = { code, message };
    this.view = { ...this.view, error };
    this.emit();
  }

  /** Rebuilds the view from the engine's stats. */
  private refresh(): void {
    if (this.ended) return;
    const s = this.statsSnapshot;
    if (this.statsShared) readStats(this.statsShared, s);
    const ctx = this.ctx;
    const outputMs = ctx ? (ctx.baseLatency + (ctx.outputLatency || 0)) * 1000 : 0;
    const blockMs = (this.req.audio.blockFrames / SAMPLE_RATE) * 1000;
    const figuresDue = this.refreshes++ % FIGURES_EVERY === 0;
    this.forwardClockOffsets();
    this.forwardDeviceLatency();
    const run = this.probe;
    if (run && !run.over && run.asking) {
      if (performance.now() - run.startedAt > ASK_TIMEOUT_MS) {
        run.refusal = echoRefusalText(0, this.participants.get(run.peer)?.member.name ?? 'The participant');
        this.endProbe();
      }
    } else if (run && !run.over) {
      // The block shows the previous probe until the engine takes the new one: only a probe seen
      // running can be over. Once done, the peer's audio goes back to their microphone.
      if (s[G_PROBE_STATE] === 1 && s[G_PROBE_SLOT] === run.slot) run.seenRunning = true;
      const timedOut = !run.seenRunning && performance.now() - run.startedAt > PROBE_START_GRACE_MS;
      if ((run.seenRunning && s[G_PROBE_STATE] !== 1) || timedOut) this.endProbe();
    }
    const previous = new Map(this.view.participants.map((v) => [v.peer, v]));
    const participants: ParticipantView[] = [];
    for (const [peer, p] of this.participants) {
      const at = (f: number) => s[peerIndex(p.slot, f)];
      const levels = {
        peakL: gainToDb(at(P_PEAK_L)),
        peakR: gainToDb(at(P_PEAK_R)),
        rmsL: gainToDb(at(P_RMS_L)),
        rmsR: gainToDb(at(P_RMS_R)),
      };
      const before = previous.get(peer);
      if (before && !figuresDue) {
        participants.push({ ...before, name: p.member.name, link: p.link, strip: p.strip, levels });
        continue;
      }
      const received = at(P_RECEIVED);
      const lost = at(P_LOST);
      const bufferMs = (at(P_BUFFERED_FRAMES) / SAMPLE_RATE) * 1000;
      // The pump's own exchanges when there are any: measured on the data channels, where the
      // audio goes, every second; else the ICE pair's RTT from the connection's stats.
      const pumpRtt = this.pump ? this.pump.stats[netPeerIndex(p.slot, NP_RTT_MS)] : NaN;
      const rttMs = Number.isFinite(pumpRtt) ? pumpRtt : (this.mesh?.rttMs(peer) ?? null);
      const bits = at(P_BITS);
      participants.push({
        peer,
        name: p.member.name,
        link: p.link,
        levels,
        strip: p.strip,
        latencyMs: rttMs === null ? null : blockMs + rttMs / 2 + bufferMs + outputMs,
        rttMs,
        bufferMs,
        targetMs: (at(P_TARGET_FRAMES) / SAMPLE_RATE) * 1000,
        lossPct: received + lost > 0 ? (100 * lost) / (received + lost) : 0,
        underruns: at(P_UNDERRUNS),
        senderGaps: at(P_SENDER_GAPS),
        format:
          received > 0
            ? `${bits === 32 ? 'float32' : `PCM${bits}`} ${at(P_CHANNELS) === 1 ? 'mono' : 'stereo'} ${at(P_BLOCK_FRAMES)}`
            : '',
      });
    }
    this.view = {
      ...this.view,
      participants,
      master: {
        gainDb: this.view.master.gainDb,
        levels: {
          peakL: gainToDb(s[G_MASTER_PEAK_L]),
          peakR: gainToDb(s[G_MASTER_PEAK_R]),
          rmsL: gainToDb(s[G_MASTER_RMS_L]),
          rmsR: gainToDb(s[G_MASTER_RMS_R]),
        },
        limiterDb: s[G_LIMITER_DB],
      },
      input: {
        channels: this.req.audio.channels,
        levels: {
          peakL: gainToDb(s[G_INPUT_PEAK]),
          peakR: gainToDb(s[G_INPUT_PEAK]),
          rmsL: gainToDb(s[G_INPUT_RMS]),
          rmsR: gainToDb(s[G_INPUT_RMS]),
        },
      },
      engine: { ...this.view.engine, underruns: s[G_UNDERRUNS], peers: s[G_PEERS] },
      echo: this.echoView(),
    };
    this.emit();
  }

  /**
   * Tells the engine the devices' latency when it changed by more than 0.1 ms: output from the
   * audio context (base + output latency), input from the microphone track's settings where the
   * browser reports it (else unknown).
   */
  private forwardDeviceLatency(): void {
    const ctx = this.ctx;
    const engine = this.engine;
    if (!ctx || !engine) return;
    const outputUs = (ctx.baseLatency + (ctx.outputLatency || 0)) * 1e6;
    const track = this.stream?.getAudioTracks()[0];
    const reported = (track?.getSettings() as { latency?: number } | undefined)?.latency;
    const inputUs = typeof reported === 'number' && Number.isFinite(reported) ? reported * 1e6 : NaN;
    const moved = (a: number, b: number) =>
      Number.isFinite(a) !== Number.isFinite(b) || (Number.isFinite(a) && Math.abs(a - b) > 100);
    const last = this.deviceLatencySent;
    if (!moved(outputUs, last.outputUs) && !moved(inputUs, last.inputUs)) return;
    engine.control({ type: 'device-latency', outputUs, inputUs });
    this.deviceLatencySent = { outputUs, inputUs };
  }

  /**
   * Tells the engine each peer's clock offset (the pump's estimate, in the net stats) when it
   * moved by more than OFFSET_STEP_US, at most once per OFFSET_EVERY_MS; NaN once it is lost.
   */
  private forwardClockOffsets(): void {
    const net = this.pump?.stats;
    const engine = this.engine;
    if (!net || !engine) return;
    const now = performance.now();
    for (const p of this.participants.values()) {
      const offsetUs = net[netPeerIndex(p.slot, NP_OFFSET_US)];
      const sent = p.offsetSentUs;
      const known = Number.isFinite(offsetUs);
      if (!known && !Number.isFinite(sent)) continue;
      if (known && Number.isFinite(sent)) {
        if (Math.abs(offsetUs - sent) <= OFFSET_STEP_US || now - p.offsetSentAt < OFFSET_EVERY_MS) continue;
      }
      engine.control({ type: 'clock-offset', slot: p.slot, offsetUs: known ? offsetUs : NaN });
      p.offsetSentUs = known ? offsetUs : NaN;
      p.offsetSentAt = now;
    }
  }

  private emit(): void {
    for (const fn of this.listeners) fn(this.view);
  }
}

/** Opens a session: it starts joining at once; watch `view` for progress and errors. */
export function openSession(
  req: JoinRequest,
  opts: { ice?: IcePolicy; loopback?: boolean } = {},
): RoomSession {
  const session = new Session(req, opts.ice ?? 'all', opts.loopback ?? false);
  // A handle for diagnostics from the browser console (and the end-to-end tests).
  (globalThis as { tutti?: { session: Session } }).tutti = { session };
  return session;
}

export type { Session };
