// A room session: it composes the parts a room needs and keeps the view the UI renders
// (types.ts) up to date. The parts, each in its own module:
// - engine-link.ts: the audio context, engine worklet, microphone, monitor and packet pump;
// - membership.ts: the signaling client, the participants and their engine slots;
// - transport.ts: how packets reach the participants; links.ts picks the mesh or the hub as the
//   room's topology says, and topology.ts says when the mesh no longer fits (the owner's client
//   then moves the room to the hub);
// - probe.ts: round-trip probes and the echo requests they rest on;
// - reception.ts: what reaches us from the hub, reported once a second so that the hub picks
//   the format it sends us (of the others' streams in forward mode, of our mix in mix mode; the
//   layer it then names shows in the view);
// - recording.ts: the recorder's tracks and state;
// - view.ts and counters.ts: the view and the counters, built from the engine's stats block
//   (audio/stats-reader.ts), which is read ten times a second.
//
// Membership comes from the server; audio never waits for it. The self-test (loopback) has no
// server and no network: the user's own packets come back as its one participant.

import { engineUnavailableReason, webrtcUnavailableReason } from '../audio/support';
import { Mesh, type IcePolicy } from '../net/mesh';
import {
  ChannelState,
  N_HUB_RX_BYTES,
  N_HUB_RX_MESSAGES,
  N_HUB_TRAIN_BPS,
  N_HUB_TRAINS,
  N_MESH_RX_BYTES,
  N_MESH_RX_MESSAGES,
  NP_RTT_MS,
  NP_STAMP_LAG_MS,
  NP_STATE,
  netPeerIndex,
} from '../net/net-stats';
import {
  HUB_LAYERS,
  randomId,
  type HubLayer,
  type HubStrip,
  type ReceptionReport,
  type Topology,
} from '../net/protocol';
import { forwardClockOffsets } from './clock-offsets';
import { buildCounters, type SessionCounters } from './counters';
import { EngineLink, HUB_MIX_SLOT, MAX_PEERS, SAMPLE_RATE, type OutputCapture } from './engine-link';
import { noticeFor } from './errors';
import { Membership, type Participant } from './membership';
import { LOOPBACK_PEER, PROBE_CLICKS, PROBE_ECHO_MS, RoundTrips, type ProbeResult } from './probe';
import { Reception, type ReceptionPeer } from './reception';
import { Recording } from './recording';
import { RoomLinks } from './links';
import { participantRows } from './rows';
import { MeshFitWatch } from './topology';
import { fetchIceServers } from './transport';
import type { JoinRequest, RoomError, RoomSession, RoomView, StripSettings } from './types';
import {
  buildView,
  dbToGain,
  formatOf,
  initialView,
  latencyStagesOf,
  withError,
  withSignaling,
  withWelcome,
  type LatencyStages,
} from './view';

export { MAX_PEERS, SAMPLE_RATE, type OutputCapture } from './engine-link';
export type { PeerCounters, SessionCounters } from './counters';
export {
  ASK_TIMEOUT_MS,
  LOOPBACK_PEER,
  PROBE_CLICKS,
  PROBE_ECHO_MS,
  PROBE_START_GRACE_MS,
  echoRefusalText,
  type ProbeResult,
} from './probe';
export { dbToGain, gainToDb } from './view';

/** Why a room cannot be joined with no network (error code "offline"). */
export const OFFLINE_MESSAGE =
  'Joining a room needs the network, and this device is offline (or the Tutti server cannot be ' +
  'reached). The sound check, the self-test and the benchmark work offline.';
const LOOPBACK_NAME = 'You, through the engine';
const SERVER_ECHO_NAME = 'You, through the server';

const VIEW_EVERY_MS = 100;
/** How long a notice (e.g. "only the owner can do that") stays, ms. */
const NOTICE_MS = 6000;
/** Figures (latency, buffer, loss, ...) change in the view every this many refreshes (0.5 s):
 * readable, and each change costs the page a layout; meters move at every refresh. */
const FIGURES_EVERY = 5;
/** Whether the mesh still fits is looked at every this many refreshes (1 s). */
const ADVICE_EVERY = 10;
/** Longest the server hears again that our uplink cannot carry the mesh, ms. */
const UPLINK_REPORT_EVERY_MS = 10000;

class Session implements RoomSession {
  view: RoomView;
  private readonly listeners = new Set<(view: RoomView) => void>();
  private readonly token = randomId();
  private readonly link: EngineLink;
  private readonly members: Membership;
  private readonly trips: RoundTrips;
  private readonly recording: Recording;
  private transport: RoomLinks | null = null;
  private readonly meshFit = new MeshFitWatch();
  /** What reaches us, and by which path its samples since their reset came (null: none). */
  private readonly reception = new Reception();
  private receivingFrom: 'hub' | 'mesh' | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private ended = false;
  private refreshes = 0;
  /** When the server last heard that our uplink cannot carry the mesh (performance.now()). */
  private uplinkReportedAt = -Infinity;
  /** Our own hub stream id, from the welcome (the sound check through the server plays it). */
  private ownStream: number | undefined;

  constructor(
    private readonly req: JoinRequest,
    private readonly icePolicy: IcePolicy,
    /** Self-test: no server, no network; the user's own packets come back as one participant. */
    readonly loopback = false,
    /**
     * The sound check through the server: `req` names a fresh private room of our own, which
     * we put on the hub (forward) with a link that sends our own packets back (echo); they play
     * as one participant, and its round trip is the server's.
     */
    readonly serverEcho = false,
  ) {
    const self = randomId();
    const ended = () => this.ended;
    this.link = new EngineLink(ended);
    this.members = new Membership(
      self,
      // The last slot is kept for the hub's mix.
      MAX_PEERS - 1,
      { admitted: (p, fresh) => this.admitted(p, fresh), released: (p) => this.released(p) },
      req.mixMemory,
    );
    // Through the server as through the engine, our own packets come back on the participant's
    // own link: a probe times them there, with no echo to ask anyone for.
    this.trips = new RoundTrips(this.link, this.members, loopback || serverEcho, ended, () => this.refresh());
    this.recording = new Recording({
      room: loopback ? 'sound-check' : req.room,
      sampleRate: SAMPLE_RATE,
      input: { name: req.name, channels: req.audio.channels },
      ended,
      changed: (recording) => {
        this.view = { ...this.view, recording };
        this.emit();
      },
    });
    this.view = initialView(req, self, SAMPLE_RATE);
    void this.start();
  }

  subscribe(fn: (view: RoomView) => void): () => void {
    this.listeners.add(fn);
    fn(this.view);
    return () => this.listeners.delete(fn);
  }

  setStrip(peer: string, patch: Partial<StripSettings>): void {
    const p = this.members.get(peer);
    if (!p) return;
    p.strip = { ...p.strip, ...patch };
    this.sendStrip(p);
    this.sendHubMix();
    // Muting someone also stops sending them their own sound back, and declines their request.
    if (p.strip.mute) this.trips.muted(peer, p.slot);
    this.req.mixMemory?.set(p.member.name, p.strip);
    this.refresh();
  }

  setMaster(gainDb: number): void {
    this.view = { ...this.view, master: { ...this.view.master, gainDb } };
    this.link.control({ type: 'master', gain: dbToGain(gainDb) });
    this.emit();
  }

  setMonitor(on: boolean, gainDb = this.view.monitor.gainDb): void {
    this.view = { ...this.view, monitor: { on, gainDb } };
    this.link.setMonitor(on, gainDb);
    this.emit();
  }

  retryPassword(password?: string): void {
    const error = this.view.error;
    // The server asked to wait: a retry before then would only be refused (and count against us).
    if (error?.retryAt !== undefined && Date.now() < error.retryAt) return;
    if (error?.code === 'removed' || !this.members.connected) return;
    this.view = { ...this.view, error: null };
    this.emit();
    this.members.retry(password);
  }

  setLocked(locked: boolean): void {
    if (this.view.access.isOwner) this.members.lock(locked);
  }

  removePeer(peer: string): void {
    if (this.view.access.isOwner) this.members.remove(peer);
  }

  setTopology(mode: Topology): void {
    if (this.view.access.isOwner) this.members.setTopology(mode);
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

  startRecording(): Promise<void> {
    return this.recording.start(this.link.engine, this.members.participants.values());
  }

  stopRecording(): Promise<void> {
    return this.recording.stop();
  }

  async leave(): Promise<void> {
    if (this.ended) return;
    // What was recorded is stored before the audio stops.
    if (this.recording.active) await this.stopRecording();
    this.ended = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.members.close();
    this.transport?.close();
    await this.link.close();
    this.view = { ...this.view, signaling: 'closed', joined: false };
    this.emit();
    this.listeners.clear();
  }

  /** Records `seconds` of what the engine sends to the output (diagnostics and tests). */
  captureOutput(seconds: number, from: 'engine' | 'input' = 'engine'): Promise<OutputCapture> {
    return this.link.captureOutput(seconds, from);
  }

  /**
   * What the engine receives of the hub's mix in mix mode, its format as the stats view says it
   * ("Opus stereo 240" when the hub sends our mix as Opus); null in the other modes.
   */
  hubMix(): { format: string; received: number; lost: number } | null {
    if (this.transport?.mode !== 'mix') return null;
    const s = this.link.stats.peer(HUB_MIX_SLOT);
    return { format: formatOf(s), received: s.received, lost: s.lost };
  }

  /** Counters of the engine and the packet pump, by peer (diagnostics and tests). */
  counters(): SessionCounters {
    const stats = this.link.stats;
    const rows = [...this.members.participants].map(([peer, p]) => ({
      peer,
      slot: p.slot,
      stats: stats.peer(p.slot),
    }));
    return buildCounters(stats.globals(), rows, this.link.pump?.stats ?? null, SAMPLE_RATE);
  }

  /**
   * The engine's per-stage latency distributions (core/src/engine.rs): per participant (by peer
   * id) the jitter-buffer wait, network one-way, delivery, our send queue towards them, transit
   * and the estimated mouth to ear; the local capture interval; the devices' latency in ms.
   * Empty until published (about once a second).
   */
  latencyStages(): LatencyStages {
    const slots = [...this.members.participants].map(([peer, p]) => [peer, p.slot] as [string, number]);
    return latencyStagesOf(this.link.latencySnapshot(), slots);
  }

  /** Starts a round-trip probe towards `peer` (RoundTrips.start); false when it cannot. */
  startProbe(peer: string, clicks = PROBE_CLICKS): boolean {
    return this.trips.start(peer, clicks);
  }

  /** Stops a running probe (and the peer's echo, or our loopback link). */
  stopProbe(): void {
    this.trips.stop();
  }

  /** Asks `peer` to echo our stream for `ms` ms (RoundTrips.requestEcho). */
  requestEcho(peer: string, ms = PROBE_ECHO_MS): boolean {
    return this.trips.requestEcho(peer, ms);
  }

  /** `peer`'s last answer to our round-trip request: 'allowed', 'declined', 'unanswered',
   * 'busy' or 'stopped'; null while none came. */
  echoReply(peer: string): 'allowed' | 'declined' | 'unanswered' | 'busy' | 'stopped' | null {
    return this.trips.reply(peer);
  }

  /** Our user's answer to `peer`'s round-trip request (shown in view.echo.requests). */
  answerEcho(peer: string, allow: boolean): void {
    this.trips.answer(peer, allow);
  }

  /** Stops sending a participant their own sound back (the Stop of the echo notice). */
  stopEcho(): void {
    this.trips.stopEcho();
  }

  /** "Allow round-trip requests without asking" for the rest of this session (off at first). */
  setEchoAutoAllow(on: boolean): void {
    this.link.pump?.setEchoAutoAllow(on);
    this.view = { ...this.view, echo: { ...this.view.echo, autoAllow: on } };
    this.emit();
  }

  /** Where the last round-trip probe stands (RoundTrips.result); null before the first. */
  probeResult(): ProbeResult | null {
    return this.trips.result(this.link.stats.probe());
  }

  /** The participant whose stream we echo for their round-trip probe, if any. */
  echoing(): string | null {
    return this.trips.echoing();
  }

  /** Starts the latency histograms afresh (e.g. once the buffers have settled). */
  resetLatency(): void {
    this.link.control({ type: 'reset-latency' });
  }

  /** Where the packet pump runs. */
  get pumpThread(): 'worker' | 'main' | null {
    return this.link.pump?.where ?? null;
  }

  /** The audio context (diagnostics and tests). */
  get ctx(): AudioContext | null {
    return this.link.ctx;
  }

  /** The mesh of peer connections, while the room uses it (diagnostics and tests). */
  get mesh(): Mesh | null {
    return this.transport?.mesh ?? null;
  }

  /** The room's links: mesh or hub (diagnostics and tests). */
  get links(): RoomLinks | null {
    return this.transport;
  }

  private async start(): Promise<void> {
    const reason = engineUnavailableReason();
    if (reason) return this.fail('engine-unavailable', reason);
    // The sound check plays through the engine alone; a room needs WebRTC too.
    const noRtc = this.loopback ? null : webrtcUnavailableReason();
    if (noRtc) return this.fail('no-webrtc', noRtc);
    let iceServers: RTCIceServer[] = [];
    if (!this.loopback) {
      // A room needs the server (signaling) and the network: say so plainly rather than retry.
      const servers = await fetchIceServers();
      if (servers === 'offline') return this.fail('offline', OFFLINE_MESSAGE);
      iceServers = servers;
    }
    if (this.ended) return;

    const opened = await this.link.open(this.req.audio);
    if (opened === 'ended') return;
    if (opened !== 'ok') return this.fail(opened.code, opened.message);

    if (this.loopback) {
      // The pump runs where a room's does (the net worker where the browser has one for it), so
      // the sound check hears what a room would, and a busy page (rendering, a stats export)
      // does not stall our own packets on their way back.
      const pump = this.link.openPump('worker');
      this.view = { ...this.view, joined: true, signaling: 'open' };
      this.members.admit({ peer: LOOPBACK_PEER, name: LOOPBACK_NAME });
      const p = this.members.get(LOOPBACK_PEER);
      if (p) {
        p.link = 'connected';
        // With a loopback control channel: exchanges with ourselves, offset 0 by construction.
        pump.addLoopback(p.slot, true);
      }
      this.refresh();
      this.timer = setInterval(() => this.refresh(), VIEW_EVERY_MS);
      return;
    }
    const pump = this.link.openPump('worker', (ev) => this.trips.onEcho(ev));
    this.members.connect(this.req, this.token, {
      status: (signaling) => {
        this.view = withSignaling(this.view, signaling);
        this.emit();
      },
      welcome: (access, room) => {
        if (access.owner) this.req.owner?.set(access.owner);
        this.view = withWelcome(this.view, access);
        // A hub that welcomes us again picks our layer afresh.
        this.setLayer(null);
        this.ownStream = room.stream;
        this.applyTopology(room.topology);
        if (this.serverEcho) this.echoThroughServer(room.topology);
      },
      topology: (mode, reason) => {
        this.applyTopology(mode);
        // The server moved the room on a player's uplink report: say why until it changes.
        this.view = { ...this.view, topology: { ...this.view.topology, moved: reason ?? null } };
        this.emit();
        if (this.serverEcho) this.echoThroughServer(mode);
      },
      hubAnswer: (sdp) => void this.transport?.hub?.answer(sdp),
      layer: (layer, reason, mesh) => {
        // A notice that crossed a switch between the mesh and the hub is stale.
        if (mesh === this.throughHub()) return;
        this.setLayer({ layer, reason });
        this.emit();
      },
      sendLayer: (peer, layer) => {
        // The engine encodes once per layer taken and the pump routes by slot (capture.rs).
        const p = this.members.get(peer);
        if (p) this.link.control({ type: 'send-layer', slot: p.slot, layer: HUB_LAYERS.indexOf(layer) });
      },
      locked: (locked) => {
        this.view = { ...this.view, access: { ...this.view.access, locked } };
        this.emit();
      },
      changed: () => this.refresh(),
      signal: (from, data) => void this.transport?.handleSignal(from, data),
      error: (code, message, fatal, retryAfterMs) => {
        if (fatal || !this.view.joined) {
          this.view = withError(this.view, code, message, retryAfterMs, Date.now());
          // Sent away: stop sending to and hearing the others at once.
          if (code === 'removed') this.members.releaseAll();
          this.refresh();
        } else if (code === 'hub-unavailable') {
          // The hub link is offered again after a backoff; the mesh, if up, keeps playing.
          this.transport?.hub?.unavailable();
          this.view = { ...this.view, topology: { ...this.view.topology, hubRefused: true } };
          this.emit();
        } else if (code === 'not-owner' || code === 'topology-refused') {
          this.showNotice(noticeFor(code, message));
        } else {
          console.warn(`signaling: ${code}: ${message}`);
        }
      },
    });
    this.transport = new RoomLinks({
      self: this.view.self.peer,
      iceServers,
      icePolicy: this.icePolicy,
      pump,
      members: this.members,
      mixSlot: HUB_MIX_SLOT,
      canSignal: () => this.view.signaling === 'open',
      onLinkState: (peer, link) => {
        const p = this.members.get(peer);
        if (p) p.link = link;
        this.refresh();
      },
      onHubConnected: () => {
        this.sendHubMix();
        this.view = { ...this.view, topology: { ...this.view.topology, hubRefused: false } };
        this.refresh();
      },
      echo: this.serverEcho,
    });
    this.timer = setInterval(() => this.refresh(), VIEW_EVERY_MS);
  }

  /**
   * The sound check through the server, at each topology our room has: it is moved to the hub
   * (we created it, so we own it), and once it is there our own stream, which the hub sends
   * back, plays as one participant.
   */
  private echoThroughServer(mode: Topology): void {
    if (mode !== 'forward') {
      this.members.setTopology('forward');
      return;
    }
    if (this.ownStream === undefined || this.members.get(LOOPBACK_PEER)) return;
    this.members.admit({ peer: LOOPBACK_PEER, name: SERVER_ECHO_NAME, stream: this.ownStream });
    this.refresh();
  }

  /** A participant came in (`fresh`: its engine slot is new) or was named again. */
  private admitted(p: Participant, fresh: boolean): void {
    if (fresh) {
      this.link.control({ type: 'add-peer', slot: p.slot });
      this.sendStrip(p);
    }
    this.recording.participant(p);
    this.transport?.ensure(p.member.peer, p.slot);
    p.link = this.transport?.state(p.member.peer) ?? p.link;
  }

  /** A participant left: what it asked of us, its link and its engine slot go. */
  private released(p: Participant): void {
    this.trips.forget(p.member.peer);
    this.transport?.drop(p.member.peer);
    this.link.control({ type: 'remove-peer', slot: p.slot });
  }

  /**
   * The room's packets travel `mode` from now on (welcome, or the owner's choice): the links
   * switch (links.ts) while the engine, its slots and the recording carry on. In mix mode the
   * hub's mix plays in its own slot and the participants' strips are applied on the hub.
   */
  private applyTopology(mode: Topology): void {
    const links = this.transport;
    if (!links) return;
    const prev = links.mode;
    if (!links.setMode(mode)) return;
    if (mode === 'mix' && prev !== 'mix') {
      this.link.control({ type: 'add-peer', slot: HUB_MIX_SLOT });
      // The mix is stereo already panned on the hub; the engine's strip pans with constant
      // power (cos π/4, −3 dB, at the centre), so the mix's strip takes √2 to play it at unity.
      this.link.control({
        type: 'strip',
        slot: HUB_MIX_SLOT,
        gain: Math.SQRT2,
        pan: 0,
        mute: false,
        solo: false,
      });
    } else if (prev === 'mix') {
      this.link.control({ type: 'remove-peer', slot: HUB_MIX_SLOT });
    }
    for (const p of this.members.participants.values()) this.sendStrip(p);
    this.sendHubMix();
    this.view = { ...this.view, topology: { ...this.view.topology, mode } };
    // Our layer holds across a switch between the hub's modes (the hub keeps it: the others'
    // streams in forward mode, our mix in mix mode); between the hub and the mesh it is another
    // controller's (sampleReception forgets it).
    this.refresh();
  }

  /**
   * A participant's strip in the engine. In mix mode the hub applies it (sendHubMix) and the
   * participant's own slot is muted: it carries nothing from the hub, and during a switch the
   * mesh's copy must not double the mix (nor may a solo here silence the mix's slot).
   */
  private sendStrip(p: Participant): void {
    const mix = this.transport?.mode === 'mix';
    this.link.control({
      type: 'strip',
      slot: p.slot,
      gain: dbToGain(p.strip.gainDb),
      pan: p.strip.pan,
      mute: mix || p.strip.mute,
      solo: !mix && p.strip.solo,
    });
  }

  /** Our strips for the hub's mix of us (hub-mix), while the room uses the hub; the master
   * stays local (it applies to the mix's slot here). */
  private sendHubMix(): void {
    const mode = this.transport?.mode;
    if (mode !== 'forward' && mode !== 'mix') return;
    const strips: HubStrip[] = [];
    for (const p of this.members.participants.values()) {
      const stream = p.member.stream;
      if (stream === undefined) continue;
      const s = p.strip;
      strips.push({ stream, gain: dbToGain(s.gainDb), pan: s.pan, mute: s.mute, solo: s.solo });
    }
    this.members.hubMix({ strips });
  }

  /**
   * Whether the mesh still fits our uplink (topology.ts), from the pump's counters of what our
   * channels were handed and still hold. The reason, or null. Once it has not fitted for a
   * while the server hears what the mesh asks and what our uplink carries (at most every
   * UPLINK_REPORT_EVERY_MS): it moves the room to the hub unless the owner chose the mesh.
   */
  private adviseTopology(nowMs: number): string | null {
    const links = this.transport;
    const net = this.link.pump?.stats;
    if (!links || links.mode !== 'mesh' || !net) return this.view.topology.advice;
    const slots = [...this.members.participants.values()].map((p) => p.slot);
    const fit = this.meshFit.update(nowMs, links.mode, slots.length + 1, this.req.audio, net, slots);
    if (!fit) return null;
    if (nowMs - this.uplinkReportedAt >= UPLINK_REPORT_EVERY_MS) {
      this.uplinkReportedAt = nowMs;
      this.members.reportUplink(fit.needBps, fit.carriesBps);
    }
    return fit.reason;
  }

  /** The hub's last word on our layer, or null (see TopologyView.layer). */
  private setLayer(layer: { layer: HubLayer; reason: string } | null): void {
    if (layer === null && !this.view.topology.layer) return;
    this.view = { ...this.view, topology: { ...this.view.topology, layer } };
  }

  /** Whether the room's audio goes through the hub (forward or mix mode). */
  private throughHub(): boolean {
    const mode = this.transport?.mode;
    return mode === 'forward' || mode === 'mix';
  }

  /**
   * One sample of what reaches us: from the hub while the room goes through it and the hub link
   * is up, from the other members' links in a mesh. Once a second the report goes to the server
   * (reception.ts), whose controller picks the layer we take: the hub's, or in a mesh the one
   * every other member then sends us (server/src/mesh_layers.rs). Otherwise, or when the path
   * changes between the two, the samples start afresh, and what was said of our layer is
   * forgotten.
   */
  private sampleReception(nowMs: number): void {
    const hub = this.transport?.hub;
    const net = this.link.pump?.stats;
    const mode = this.transport?.mode;
    const path =
      !net || !this.members.connected
        ? null
        : this.throughHub()
          ? hub?.link.state === 'connected'
            ? 'hub'
            : null
          : mode === 'mesh' && this.members.participants.size > 0
            ? 'mesh'
            : null;
    if (path !== this.receivingFrom) {
      this.reception.reset();
      // A path made anew starts on what the server picks for it then: the old word is stale.
      if (this.receivingFrom !== null) this.setLayer(null);
      this.receivingFrom = path;
    }
    if (!path || !net) return;
    const stats = this.link.stats;
    const peers: ReceptionPeer[] = [];
    const peer = (slot: number): void => {
      const e = stats.peer(slot);
      peers.push({
        key: slot,
        received: e.received,
        lost: e.lost,
        lagMs: net[netPeerIndex(slot, NP_STAMP_LAG_MS)],
      });
    };
    const rtts: number[] = [];
    if (path === 'mesh') {
      // Every participant whose link to us is open.
      for (const p of this.members.participants.values()) {
        if (net[netPeerIndex(p.slot, NP_STATE)] !== ChannelState.Open) continue;
        peer(p.slot);
        const rtt = net[netPeerIndex(p.slot, NP_RTT_MS)];
        if (Number.isFinite(rtt)) rtts.push(rtt);
      }
    } else if (this.transport?.mode === 'mix') {
      // The hub sends us one stream: our mix.
      peer(HUB_MIX_SLOT);
    } else {
      // Those reached through the hub: every participant with a hub stream.
      for (const p of this.members.participants.values()) if (p.member.stream !== undefined) peer(p.slot);
    }
    rtts.sort((a, b) => a - b);
    const report = this.reception.sample(
      path === 'mesh'
        ? {
            nowMs,
            rxBytes: net[N_MESH_RX_BYTES],
            rxMessages: net[N_MESH_RX_MESSAGES],
            peers,
            rttMs: rtts.length > 0 ? rtts[rtts.length >> 1] : null,
            // Nobody sends a mesh listener packet trains.
            trains: 0,
            trainBps: NaN,
          }
        : {
            nowMs,
            rxBytes: net[N_HUB_RX_BYTES],
            rxMessages: net[N_HUB_RX_MESSAGES],
            peers,
            rttMs: hub?.link.rttMs ?? null,
            trains: net[N_HUB_TRAINS],
            trainBps: net[N_HUB_TRAIN_BPS],
          },
    );
    if (report) this.reportReception(report);
  }

  /** The reception reports this session sent the hub, the latest last (at most a minute's). */
  readonly receptionSent: ReceptionReport[] = [];

  /**
   * Tells the hub what reaches us (forward or mix mode): the session does so once a second by itself;
   * this sends `report` now, as a page on a failing link would (its own layer alone depends on
   * it). Kept in `receptionSent`.
   */
  reportReception(report: ReceptionReport): void {
    this.receptionSent.push(report);
    if (this.receptionSent.length > 60) this.receptionSent.shift();
    this.members.reportReception(report);
  }

  private fail(code: string, message: string): void {
    const error: RoomError = { code, message };
    this.view = { ...this.view, error };
    this.emit();
  }

  /** Rebuilds the view from the engine's stats. */
  private refresh(): void {
    if (this.ended) return;
    const stats = this.link.stats;
    stats.refresh();
    const adviceDue = this.refreshes % ADVICE_EVERY === 0;
    const figuresDue = this.refreshes++ % FIGURES_EVERY === 0;
    const pump = this.link.pump;
    if (pump && this.link.engine) {
      forwardClockOffsets(
        this.members.participants.values(),
        pump.stats,
        (msg) => this.link.control(msg),
        performance.now(),
      );
    }
    this.link.forwardDeviceLatency();
    this.sampleReception(performance.now());
    this.trips.follow(stats.probe());
    const participants = participantRows(this.members.participants, {
      engine: (slot) => stats.peer(slot),
      net: pump?.stats ?? null,
      hubMeters: this.transport?.mode === 'mix',
      linkRttMs: (peer) => this.transport?.rttMs(peer) ?? null,
      restarts: (peer) => this.transport?.restarts?.(peer),
      epochMs: performance.timeOrigin + performance.now(),
    });
    const hub = this.transport?.hub;
    this.view = {
      ...this.view,
      topology: {
        ...this.view.topology,
        hub: hub && this.transport?.mode !== 'mesh' ? hub.link.state : null,
        hubRttMs: hub && this.transport?.mode !== 'mesh' ? hub.link.rttMs : null,
        advice: adviceDue ? this.adviseTopology(performance.now()) : this.view.topology.advice,
      },
    };
    this.view = buildView(this.view, {
      globals: stats.globals(),
      participants,
      figuresDue,
      blockMs: (this.req.audio.blockFrames / SAMPLE_RATE) * 1000,
      outputMs: this.link.outputMs(),
      sampleRate: SAMPLE_RATE,
      channels: this.req.audio.channels,
      echo: this.trips.view(this.view.echo.autoAllow),
    });
    this.emit();
  }

  private emit(): void {
    for (const fn of this.listeners) fn(this.view);
  }
}

/** Opens a session: it starts joining at once; watch `view` for progress and errors. */
export function openSession(
  req: JoinRequest,
  opts: { ice?: IcePolicy; loopback?: boolean; serverEcho?: boolean } = {},
): RoomSession {
  const session = new Session(req, opts.ice ?? 'all', opts.loopback ?? false, opts.serverEcho ?? false);
  // A handle for diagnostics from the browser console (and the end-to-end tests).
  (globalThis as { tutti?: { session: Session } }).tutti = { session };
  return session;
}

export type { Session };
