// The signaling protocol between the app and the server (server/src/protocol.rs has the same
// description, and the server is its authority). JSON text messages over one WebSocket at /ws.
//
// Client → server:
//   join   { room, name, peer, token, password?, key?, owner? }
//          peer and token: 32 lowercase hex chars each, chosen once per page load; rejoining
//          with the same pair after a reconnect keeps the identity, so the peer-to-peer links
//          that are still up carry on. key: a private room's secret from the link's fragment
//          (22-64 chars of [A-Za-z0-9_-]); the server tells rooms apart by (room, key), so a
//          join without it addresses another room of the same name. owner: the owner secret a
//          previous welcome gave this client for (room, key).
//   signal { to, data }                              relayed only within the room
//   leave  {}
//   ping   { t? }                                    answered with pong { t }
//   lock   { locked }                                owner only: admit nobody new (or again all)
//   remove { peer }                                  owner only: sends the member away
//   uplink    { need, carries }                       the mesh has asked more of our uplink than
//                                                     it carries (bits/s): the server may move
//                                                     the room to the hub
//   hub-offer { sdp, echo? }                          an offer for this member's one link to the
//                                                     hub (a new one replaces the previous link);
//                                                     echo: our own packets come back too
//   topology  { mode: 'mesh' | 'forward' | 'mix' }    owner only: how the room's packets travel
//   hub-mix   { master?, strips: [{ stream, gain, pan, mute, solo }] }
//                                                     this member's personal mix on the hub (mix
//                                                     mode; the hub keeps it across switches)
//   reception { receivedBps, loss, delayRiseMsPerS, rttMs, capacityBps }
//                                                     once a second in forward mode, what reached
//                                                     us from the hub (room/reception.ts): bit/s
//                                                     with the wire overhead (0..1e11), share of
//                                                     packets lost (0..1), one-way delay's rise,
//                                                     ms/s (±1e6), round trip ms (0..1e6), the
//                                                     trains' capacity bit/s (1..1e11) or null
// Server → client:
//   welcome     { room, peer, peers: [{ peer, name, stream?, kind? }], cap, owner?, isOwner, locked,
//                 protected, topology?, stream? }
//               owner: the owner secret, only to the room's owner (kept per room and key);
//               topology: 'mesh' when absent; stream: this member's hub stream id (1..=65534)
//   peer-joined { peer, name, stream?, kind? }        kind 'jacktrip': a native JackTrip client,
//                                                     reached only through the hub
//   peer-left   { peer, reason: 'left' | 'closed' | 'timeout' | 'removed' }
//   signal      { from, data }
//   pong        { t }
//   room        { locked }                           to every member when the owner (un)locks
//   error       { code, message, retryAfterMs? }     hub-unavailable: the hub refused an offer
//   topology    { mode, reason? }                    to every member when the owner chose it, or
//                                                     with the reason when the server moved the
//                                                     room to the hub on a member's uplink report
//   hub-answer  { sdp }                              the hub's answer to this member's hub-offer
//   layer       { layer, reason }                    forward mode: what the hub now sends this
//                                                     member of the others ('as-sent', 'opus-128'
//                                                     or 'opus-64'), and why, in a sentence;
//                                                     in a mesh (with mesh: true), what every
//                                                     other member sends it
//   send-layer  { peer, layer }                      mesh: member `peer` now takes `layer` of
//                                                     this member's stream (server/src/mesh_layers)
// A field that is present but malformed (a stream id outside 1..=65534, an unknown topology or
// kind) makes the whole message malformed: it is counted and dropped, never guessed at.
// Close codes: 1000 replaced, 1001 shutdown, 1008 policy, 1009 too large, 1013 too slow,
// 4001 removed by the owner.

export const ROOM_NAME = /^[A-Za-z0-9._~-]{1,64}$/;
export const PEER_ID = /^[0-9a-f]{32}$/;
/** The owner secret a welcome carries: 32 lowercase hex chars, as peer ids. */
export const OWNER_SECRET = PEER_ID;
/** The close code of a member the room's owner removed. */
export const CLOSE_REMOVED = 4001;

/** How a room's packets travel: a peer connection to each participant, or through the hub
 * (forwarding every stream, or sending each member its own mix made on the server). */
export type Topology = 'mesh' | 'forward' | 'mix';
export const TOPOLOGIES: readonly Topology[] = ['mesh', 'forward', 'mix'];
/** What a listener takes of the others' streams: the packets as sent, or Opus at 128 or 64
 * kbit/s (core/src/layer.rs). The hub makes them in forward mode; in a mesh each sender does. */
export type HubLayer = 'as-sent' | 'opus-128' | 'opus-64';
/** In the order of the engine's Layer::code (a core test reads this line and compares). */
export const HUB_LAYERS: readonly HubLayer[] = ['as-sent', 'opus-128', 'opus-64'];

/** C→S `reception` without its type: what reached us from the hub over the last second. */
export interface ReceptionReport {
  /** Bits per second, the messages' wire overhead included. */
  receivedBps: number;
  /** Share of the hub's packets lost, 0..1. */
  loss: number;
  /** How fast their one-way delay rose, ms per second (negative: fell). */
  delayRiseMsPerS: number;
  /** The hub link's round trip, ms (0: unknown). */
  rttMs: number;
  /** The path's capacity measured by packet trains, bits per second; null before any. */
  capacityBps: number | null;
}

/** Hub stream ids given to clients (0 is the hub's mix, 65535 unused). */
export const MIN_STREAM = 1;
export const MAX_STREAM = 65534;

export interface Member {
  peer: string;
  name: string;
  /** The member's stream id through the hub, when the server gave one. */
  stream?: number;
  /** 'jacktrip': a native JackTrip client, reached only through the hub. */
  kind?: 'jacktrip';
}

/** One participant's strip in this member's mix on the hub (hub-mix). Gain is linear. */
export interface HubStrip {
  stream: number;
  gain: number;
  pan: number;
  mute: boolean;
  solo: boolean;
}

/** This member's personal mix on the hub; `master` absent: the hub's is left as it is. */
export interface HubMix {
  master?: number;
  strips: HubStrip[];
}

/** What one peer tells another through the server (the `data` of a signal). */
export type PeerSignal =
  | { kind: 'offer'; sdp: string; epoch: number }
  | { kind: 'answer'; sdp: string; epoch: number }
  | { kind: 'candidate'; candidate: RTCIceCandidateInit; epoch: number }
  /** From the answering side to the offering one: make the link of `epoch` anew, for `reason`. */
  | { kind: 'restart'; epoch: number; reason: 'send-stall' };

/** What a welcome says about the room and this member's place in it. */
export interface RoomAccess {
  /** This member is the room's owner (may lock it and remove members). */
  isOwner: boolean;
  /** The owner secret, given only to the owner; null otherwise. */
  owner: string | null;
  /** Nobody new is admitted. */
  locked: boolean;
  /** The room has a password. */
  protected: boolean;
}

export type ServerMessage =
  | ({
      type: 'welcome';
      room: string;
      peer: string;
      peers: Member[];
      cap: number;
      topology: Topology;
      stream?: number;
    } & RoomAccess)
  | ({ type: 'peer-joined' } & Member)
  | { type: 'topology'; mode: Topology; reason?: string }
  | { type: 'hub-answer'; sdp: string }
  | { type: 'layer'; layer: HubLayer; reason: string; mesh: boolean }
  | { type: 'send-layer'; peer: string; layer: HubLayer }
  | { type: 'peer-left'; peer: string; reason: string }
  | { type: 'signal'; from: string; data: unknown }
  | { type: 'pong'; t?: number }
  | { type: 'room'; locked: boolean }
  | { type: 'error'; code: string; message: string; retryAfterMs?: number };

/**
 * Error codes after which the client must not join again by itself: the same join would be
 * refused again (a wrong or superfluous password, a locked or full room, a bad field), the user
 * must choose (join without the password?), the server asks to wait (too-many-attempts: a retry
 * loop would only extend the wait), or the owner sent this member away.
 */
export const FATAL_JOIN_ERRORS: ReadonlySet<string> = new Set([
  'wrong-password',
  'no-password',
  'too-many-attempts',
  'room-locked',
  'removed',
  'room-full',
  'bad-room',
  'bad-name',
  'bad-message',
  'bad-peer-id',
  'peer-id-taken',
]);

/** The fields of a join. */
export interface JoinFields {
  room: string;
  name: string;
  peer: string;
  token: string;
  password?: string;
  /** A private room's key (from the link's fragment). */
  key?: string | null;
  /** The owner secret kept for this room and key, if any. */
  owner?: string | null;
}

/** What a client sends to join, optional fields only when set. The key and owner secret travel
 * only here, never in a URL. */
export function joinMessage(p: JoinFields): Record<string, string> {
  const msg: Record<string, string> = {
    type: 'join',
    room: p.room,
    name: p.name,
    peer: p.peer,
    token: p.token,
  };
  if (p.password) msg.password = p.password;
  if (p.key) msg.key = p.key;
  if (p.owner) msg.owner = p.owner;
  return msg;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A hub stream id of a client: an integer in MIN_STREAM..=MAX_STREAM. */
export function isStream(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= MIN_STREAM && v <= MAX_STREAM;
}

export function isTopology(v: unknown): v is Topology {
  return typeof v === 'string' && (TOPOLOGIES as readonly string[]).includes(v);
}

export function isLayer(v: unknown): v is HubLayer {
  return typeof v === 'string' && (HUB_LAYERS as readonly string[]).includes(v);
}

/** A member as the server names it, its optional fields checked; null when malformed. */
function memberOf(v: unknown): Member | null {
  if (!isObject(v) || typeof v.peer !== 'string' || typeof v.name !== 'string') return null;
  const m: Member = { peer: v.peer, name: v.name };
  if (v.stream !== undefined) {
    if (!isStream(v.stream)) return null;
    m.stream = v.stream;
  }
  if (v.kind !== undefined) {
    if (v.kind !== 'jacktrip') return null;
    m.kind = v.kind;
  }
  return m;
}

/**
 * Parses one message from the server; null for anything that is not a well-formed message of a
 * known type (the caller counts and drops it).
 */
export function parseServerMessage(text: string): ServerMessage | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isObject(v) || typeof v.type !== 'string') return null;
  switch (v.type) {
    case 'welcome': {
      if (
        typeof v.room !== 'string' ||
        typeof v.peer !== 'string' ||
        !Array.isArray(v.peers) ||
        typeof v.cap !== 'number'
      ) {
        return null;
      }
      const peers = v.peers.map(memberOf);
      if (!peers.every((m): m is Member => m !== null)) return null;
      if (v.topology !== undefined && !isTopology(v.topology)) return null;
      if (v.stream !== undefined && !isStream(v.stream)) return null;
      return {
        type: 'welcome',
        room: v.room,
        peer: v.peer,
        peers,
        cap: v.cap,
        // A server before the hub sent neither: a mesh, and no stream of our own.
        topology: v.topology ?? 'mesh',
        ...(v.stream !== undefined ? { stream: v.stream } : {}),
        // A server before owners and locks sent none of these: nobody owns, nothing is locked.
        isOwner: v.isOwner === true,
        owner: typeof v.owner === 'string' && OWNER_SECRET.test(v.owner) ? v.owner : null,
        locked: v.locked === true,
        protected: v.protected === true,
      };
    }
    case 'room':
      return typeof v.locked === 'boolean' ? { type: 'room', locked: v.locked } : null;
    case 'peer-joined': {
      const m = memberOf(v);
      return m ? { type: 'peer-joined', ...m } : null;
    }
    case 'topology':
      if (!isTopology(v.mode) || (v.reason !== undefined && typeof v.reason !== 'string')) return null;
      return typeof v.reason === 'string'
        ? { type: 'topology', mode: v.mode, reason: v.reason }
        : { type: 'topology', mode: v.mode };
    case 'hub-answer':
      return typeof v.sdp === 'string' && v.sdp.length > 0 ? { type: 'hub-answer', sdp: v.sdp } : null;
    case 'layer':
      return isLayer(v.layer) && typeof v.reason === 'string'
        ? { type: 'layer', layer: v.layer, reason: v.reason, mesh: v.mesh === true }
        : null;
    case 'send-layer':
      return typeof v.peer === 'string' && PEER_ID.test(v.peer) && isLayer(v.layer)
        ? { type: 'send-layer', peer: v.peer, layer: v.layer }
        : null;
    case 'peer-left':
      return typeof v.peer === 'string'
        ? { type: 'peer-left', peer: v.peer, reason: String(v.reason ?? 'left') }
        : null;
    case 'signal':
      return typeof v.from === 'string' ? (v as ServerMessage) : null;
    case 'pong':
      return { type: 'pong', t: typeof v.t === 'number' ? v.t : undefined };
    case 'error': {
      if (typeof v.code !== 'string') return null;
      const message = typeof v.message === 'string' ? v.message : v.code;
      const wait = v.retryAfterMs;
      return typeof wait === 'number' && Number.isFinite(wait) && wait >= 0
        ? { type: 'error', code: v.code, message, retryAfterMs: wait }
        : { type: 'error', code: v.code, message };
    }
    default:
      return null;
  }
}

/** Checks a peer's signal payload; null when it is not one this client understands. */
export function parsePeerSignal(data: unknown): PeerSignal | null {
  if (!isObject(data) || typeof data.epoch !== 'number' || !Number.isInteger(data.epoch)) return null;
  if ((data.kind === 'offer' || data.kind === 'answer') && typeof data.sdp === 'string') {
    return { kind: data.kind, sdp: data.sdp, epoch: data.epoch };
  }
  if (data.kind === 'restart' && data.reason === 'send-stall') {
    return { kind: 'restart', epoch: data.epoch, reason: data.reason };
  }
  if (data.kind === 'candidate' && isObject(data.candidate)) {
    const c = data.candidate;
    if (typeof c.candidate !== 'string') return null;
    return {
      kind: 'candidate',
      epoch: data.epoch,
      candidate: {
        candidate: c.candidate,
        sdpMid: typeof c.sdpMid === 'string' ? c.sdpMid : null,
        sdpMLineIndex: typeof c.sdpMLineIndex === 'number' ? c.sdpMLineIndex : null,
      },
    };
  }
  return null;
}

/**
 * The hub-mix message for `mix`: strips whose stream is not a client's, or whose figures are not
 * finite, are left out (the hub would refuse the whole message); gains below 0 are 0.
 */
export function hubMixMessage(mix: HubMix): Record<string, unknown> {
  const strips = mix.strips
    .filter((s) => isStream(s.stream) && Number.isFinite(s.gain) && Number.isFinite(s.pan))
    .map((s) => ({
      stream: s.stream,
      gain: Math.max(0, s.gain),
      pan: Math.max(-1, Math.min(1, s.pan)),
      mute: s.mute,
      solo: s.solo,
    }));
  const msg: Record<string, unknown> = { type: 'hub-mix', strips };
  if (mix.master !== undefined && Number.isFinite(mix.master)) msg.master = Math.max(0, mix.master);
  return msg;
}

/**
 * The reception message for `r`, its figures held to the ranges the server takes (a figure that
 * is not a number goes as the range's low end, a capacity that is not one as null), rates in
 * whole bits per second.
 */
export function receptionMessage(r: ReceptionReport): Record<string, unknown> {
  const within = (x: number, lo: number, hi: number) =>
    Number.isFinite(x) ? Math.min(hi, Math.max(lo, x)) : lo;
  const cap = r.capacityBps;
  return {
    type: 'reception',
    receivedBps: Math.round(within(r.receivedBps, 0, 1e11)),
    loss: within(r.loss, 0, 1),
    delayRiseMsPerS: within(r.delayRiseMsPerS, -1e6, 1e6),
    rttMs: within(r.rttMs, 0, 1e6),
    capacityBps: cap !== null && Number.isFinite(cap) ? Math.round(within(cap, 1, 1e11)) : null,
  };
}

/** 32 lowercase hex chars from the platform's CSPRNG. */
export function randomId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}
