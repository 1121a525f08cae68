// The room view builder: from one snapshot of the engine's figures (stats-reader.ts) and what the
// session knows of its participants, the next RoomView (types.ts) the UI renders. Pure: no
// engine, no clock, no DOM, so the figures the user sees can be checked with known answers.

import { OPUS_FRAMES } from '../audio/packet';
import { PEER_STAGES, type LatencySnapshot, type StageHistogram } from '../audio/latency';
import type { EngineGlobals, EnginePeerStats, LinearLevels } from '../audio/stats-reader';
import type { HubLayer } from '../net/protocol';
import type {
  EchoView,
  JoinRequest,
  Levels,
  LinkState,
  ParticipantView,
  RecordingView,
  RestartCounts,
  RestartReason,
  RoomError,
  RoomView,
  StripSettings,
  TopologyView,
} from './types';

export const IDLE_RECORDING: RecordingView = { state: 'idle', id: null, seconds: 0, bytes: 0, error: null };
export const SILENT: Levels = { peakL: -Infinity, peakR: -Infinity, rmsL: -Infinity, rmsR: -Infinity };

export function dbToGain(db: number): number {
  return db <= -60 ? 0 : Math.pow(10, db / 20);
}

export function gainToDb(linear: number): number {
  return linear > 0 ? 20 * Math.log10(linear) : -Infinity;
}

function levelsDb(l: LinearLevels): Levels {
  return {
    peakL: gainToDb(l.peakL),
    peakR: gainToDb(l.peakR),
    rmsL: gainToDb(l.rmsL),
    rmsR: gainToDb(l.rmsR),
  };
}

/** The view of a session that has only started: nobody yet, silence, not joined. */
export function initialView(req: JoinRequest, self: string, sampleRate: number): RoomView {
  return {
    room: req.room,
    key: req.key ?? null,
    access: { isOwner: false, locked: false, protected: false, private: !!req.key },
    notice: null,
    self: { peer: self, name: req.name },
    signaling: 'connecting',
    error: null,
    joined: false,
    participants: [],
    master: { gainDb: 0, levels: SILENT, limiterDb: 0 },
    input: { levels: SILENT, channels: req.audio.channels },
    monitor: { on: false, gainDb: -6 },
    engine: { underruns: 0, peers: 0, sampleRate, blockFrames: req.audio.blockFrames },
    recording: IDLE_RECORDING,
    echo: { requests: [], echoing: null, autoAllow: false },
    topology: { mode: 'mesh', hub: null, advice: null, hubRefused: false },
  };
}

/** The view with the signaling connection `signaling`: joined only while it is open. */
export function withSignaling(view: RoomView, signaling: RoomView['signaling']): RoomView {
  return { ...view, signaling, joined: signaling === 'open' ? view.joined : false };
}

/** The view once the server accepted the join, with the room's access as the server says. */
export function withWelcome(
  view: RoomView,
  access: { isOwner: boolean; locked: boolean; protected: boolean },
): RoomView {
  return {
    ...view,
    joined: true,
    error: null,
    access: { ...view.access, isOwner: access.isOwner, locked: access.locked, protected: access.protected },
  };
}

/** The view after an error that ended the join: not joined, the error shown, and when the
 * server said to wait, the time (`now` + that wait, Date.now() ms) before which a retry goes. */
export function withError(
  view: RoomView,
  code: string,
  message: string,
  retryAfterMs: number | undefined,
  now: number,
): RoomView {
  const error: RoomError = { code, message };
  if (retryAfterMs !== undefined) error.retryAt = now + retryAfterMs;
  return { ...view, error, joined: false };
}

/** One participant as the view needs it: who, the engine's figures for their slot, the RTT. */
export interface ParticipantRow {
  peer: string;
  name: string;
  kind?: 'jacktrip';
  link: LinkState;
  /** The link's restarts by reason, when the transport counts them. */
  restarts?: RestartCounts;
  strip: StripSettings;
  stats: EnginePeerStats;
  /** Round trip to the peer, ms; null while unknown. */
  rttMs: number | null;
  /** What they take of our stream (the engine's route, through the pump). */
  sending: HubLayer;
}

export interface ViewFrame {
  globals: EngineGlobals;
  participants: ParticipantRow[];
  /** Figures (latency, buffer, loss, ...) are recomputed this time; else only levels, names,
   * links and strips change and the rest stays as the previous view had it. */
  figuresDue: boolean;
  /** One block of the user's audio, ms. */
  blockMs: number;
  /** The output device's latency, ms. */
  outputMs: number;
  sampleRate: number;
  channels: 1 | 2;
  echo: EchoView;
}

const RESTART_WORDS: Record<RestartReason, string> = {
  failed: 'connection failed',
  timeout: 'did not connect in time',
  'send-stall': 'our sending stalled',
  'peer-send-stall': 'their sending stalled',
};

/**
 * A link's restarts for the strip beside its state: `short` ("restarted 3×"; '' with none) and
 * `detail`, each reason with its count ("our sending stalled 2, connection failed 1").
 */
export function restartsText(c: RestartCounts | undefined): { short: string; detail: string } {
  if (!c) return { short: '', detail: '' };
  const parts = (Object.keys(RESTART_WORDS) as RestartReason[])
    .filter((r) => c[r] > 0)
    .map((r) => `${RESTART_WORDS[r]} ${c[r]}`);
  const total = Object.values(c).reduce((a, b) => a + b, 0);
  return total > 0 ? { short: `restarted ${total}×`, detail: parts.join(', ') } : { short: '', detail: '' };
}

/**
 * What the engine says of a peer's stream: "PCM16 stereo 128", "Opus stereo 120"; '' before any
 * packet. An Opus stream is told by its frames (120 or 240: never a PCM block, see packet.ts).
 */
export function formatOf(s: EnginePeerStats): string {
  if (s.received <= 0) return '';
  const kind = OPUS_FRAMES.includes(s.blockFrames) ? 'Opus' : s.bits === 32 ? 'float32' : `PCM${s.bits}`;
  return `${kind} ${s.channels === 1 ? 'mono' : 'stereo'} ${s.blockFrames}`;
}

/** A row's kind as a view field: present only for a JackTrip client. */
function kindOf(row: ParticipantRow): { kind?: 'jacktrip' } {
  return row.kind ? { kind: row.kind } : {};
}

/** The view after `prev`, from one frame of figures. */
export function buildView(prev: RoomView, frame: ViewFrame): RoomView {
  const ms = (frames: number) => (frames / frame.sampleRate) * 1000;
  const previous = new Map(prev.participants.map((v) => [v.peer, v]));
  const participants: ParticipantView[] = [];
  for (const row of frame.participants) {
    const s = row.stats;
    const levels = levelsDb(s.levels);
    const before = previous.get(row.peer);
    if (before && !frame.figuresDue) {
      participants.push({
        ...before,
        name: row.name,
        link: row.link,
        restarts: row.restarts,
        strip: row.strip,
        levels,
        sending: row.sending,
      });
      continue;
    }
    const bufferMs = ms(s.bufferedFrames);
    const rttMs = row.rttMs;
    participants.push({
      peer: row.peer,
      name: row.name,
      ...kindOf(row),
      link: row.link,
      restarts: row.restarts,
      levels,
      strip: row.strip,
      latencyMs: rttMs === null ? null : frame.blockMs + rttMs / 2 + bufferMs + frame.outputMs,
      rttMs,
      bufferMs,
      targetMs: ms(s.targetFrames),
      lossPct: s.received + s.lost > 0 ? (100 * s.lost) / (s.received + s.lost) : 0,
      underruns: s.underruns,
      senderGaps: s.senderGaps,
      format: formatOf(s),
      sending: row.sending,
    });
  }
  const g = frame.globals;
  return {
    ...prev,
    participants,
    master: { gainDb: prev.master.gainDb, levels: levelsDb(g.master), limiterDb: g.limiterDb },
    input: {
      channels: frame.channels,
      levels: {
        peakL: gainToDb(g.inputPeak),
        peakR: gainToDb(g.inputPeak),
        rmsL: gainToDb(g.inputRms),
        rmsR: gainToDb(g.inputRms),
      },
    },
    engine: { ...prev.engine, underruns: g.underruns, peers: g.peers },
    echo: frame.echo,
  };
}

/**
 * The view's echo part: the round-trip requests waiting for the user's answer (of participants
 * still here, in the order they came), whom we echo now, and the setting.
 */
export function buildEchoView(
  requests: Iterable<[string, { ms: number }]>,
  nameOf: (peer: string) => string | undefined,
  echoing: string | null,
  autoAllow: boolean,
): EchoView {
  const list: EchoView['requests'] = [];
  for (const [peer, r] of requests) {
    const name = nameOf(peer);
    if (name !== undefined) list.push({ peer, name, seconds: Math.ceil(r.ms / 1000) });
  }
  const echoName = echoing === null ? undefined : nameOf(echoing);
  return {
    requests: list,
    echoing: echoing !== null && echoName !== undefined ? { peer: echoing, name: echoName } : null,
    autoAllow,
  };
}

/** The engine's per-stage latency distributions by participant (Session.latencyStages). */
export interface LatencyStages {
  peers: Record<string, Record<string, StageHistogram>>;
  local: Record<string, StageHistogram>;
  devices: { outputMs: number; inputMs: number };
}

/**
 * The histogram block `snap` (audio/latency.ts) by participant: each peer's stages and mouth to
 * ear under its peer id, for the `[peer, slot]` pairs given; empty while nothing was published.
 */
export function latencyStagesOf(
  snap: LatencySnapshot | null,
  participants: Iterable<[string, number]>,
): LatencyStages {
  if (!snap) return { peers: {}, local: {}, devices: { outputMs: NaN, inputMs: NaN } };
  const bySlot = new Map(snap.peers.map((p) => [p.slot, p]));
  const peers: Record<string, Record<string, StageHistogram>> = {};
  for (const [peer, slot] of participants) {
    const l = bySlot.get(slot);
    if (!l) continue;
    const stages: Record<string, StageHistogram> = {};
    for (const [name] of PEER_STAGES) stages[name] = l[name];
    stages.mouthToEar = l.mouthToEar;
    peers[peer] = stages;
  }
  return {
    peers,
    local: { capture: snap.capture },
    devices: { outputMs: snap.outputMs, inputMs: snap.inputMs },
  };
}

export const LAYER_WORDS: Record<HubLayer, string> = {
  'as-sent': 'as sent',
  'opus-128': 'Opus 128 kbit/s',
  'opus-64': 'Opus 64 kbit/s',
};
/** Longest reason shown, characters. */
const LAYER_REASON_MAX = 200;

/**
 * What we take of the others and why: the others' streams from the hub in forward mode ("From
 * the hub: Opus 128 kbit/s — 71.3 % of packets lost; 1.0 Mbit/s got through."), our own mix in
 * mix mode ("Your mix from the hub: Opus 64 kbit/s — …"), what every other member sends us in
 * a mesh ("From the others: Opus 64 kbit/s — …"); '' when the server has said nothing.
 */
export function hubLayerText(t: TopologyView): string {
  const l = t.layer;
  if (!l) return '';
  const what =
    t.mode === 'mix'
      ? `Your mix from the hub: ${l.layer === 'as-sent' ? 'PCM16, as mixed' : LAYER_WORDS[l.layer]}`
      : t.mode === 'forward'
        ? `From the hub: ${LAYER_WORDS[l.layer]}`
        : `From the others: ${LAYER_WORDS[l.layer]}`;
  const reason = l.reason.trim().slice(0, LAYER_REASON_MAX);
  if (!reason) return `${what}.`;
  return `${what} — ${reason}${/[.!?]$/.test(reason) ? '' : '.'}`;
}

/** What the room view says of how the room's packets travel (TopologyView). */
export function topologyText(t: TopologyView): string {
  const link =
    t.hub === null
      ? ''
      : t.hub === 'connected'
        ? typeof t.hubRttMs === 'number'
          ? ` Round trip to the server: ${t.hubRttMs.toFixed(1)} ms.`
          : ''
        : t.hubRefused
          ? ' The server has no hub for this room now: trying again.'
          : ` Hub link ${t.hub}…`;
  switch (t.mode) {
    case 'mesh':
      return 'Mesh: a direct link to each player.';
    case 'forward':
      return `Through the hub: one link to the server, which forwards every player's stream; your mix is made here.${link}`;
    case 'mix':
      return `Through the hub, mixed on the server: the server makes your mix (your faders, pans, mutes and solos apply there) and sends it as one stream.${link}`;
  }
}
