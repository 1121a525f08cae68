// The signaling protocol between the app and the server (server/src/protocol.rs has the same
// description, and the server is its authority). JSON text messages over one WebSocket at /ws.
//
// Client → server:
//   join   { room, name, peer, token, password? }   peer and token: 32 lowercase hex chars each,
//          chosen once per page load; rejoining with the same pair after a reconnect keeps the
//          identity, so the peer-to-peer links that are still up carry on.
//   signal { to, data }                              relayed only within the room
//   leave  {}
//   ping   { t? }                                    answered with pong { t }
// Server → client:
//   welcome     { room, peer, peers: [{ peer, name }], cap }
//   peer-joined { peer, name }
//   peer-left   { peer, reason: 'left' | 'closed' | 'timeout' }
//   signal      { from, data }
//   pong        { t }
//   error       { code, message }

export const ROOM_NAME = /^[A-Za-z0-9._~-]{1,64}$/;
export const PEER_ID = /^[0-9a-f]{32}$/;

export interface Member {
  peer: string;
  name: string;
}

/** What one peer tells another through the server (the `data` of a signal). */
export type PeerSignal =
  | { kind: 'offer'; sdp: string; epoch: number }
  | { kind: 'answer'; sdp: string; epoch: number }
  | { kind: 'candidate'; candidate: RTCIceCandidateInit; epoch: number };

export type ServerMessage =
  | { type: 'welcome'; room: string; peer: string; peers: Member[]; cap: number }
  | { type: 'peer-joined'; peer: string; name: string }
  | { type: 'peer-left'; peer: string; reason: string }
  | { type: 'signal'; from: string; data: unknown }
  | { type: 'pong'; t?: number }
  | { type: 'error'; code: string; message: string };

/** Error codes after which trying again with the same join cannot succeed. */
export const FATAL_JOIN_ERRORS: ReadonlySet<string> = new Set([
  'wrong-password',
  'room-full',
  'bad-room',
  'bad-name',
  'bad-peer-id',
  'peer-id-taken',
]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isMember(v: unknown): v is Member {
  return isObject(v) && typeof v.peer === 'string' && typeof v.name === 'string';
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
    case 'welcome':
      return typeof v.room === 'string' &&
        typeof v.peer === 'string' &&
        Array.isArray(v.peers) &&
        v.peers.every(isMember) &&
        typeof v.cap === 'number'
        ? (v as ServerMessage)
        : null;
    case 'peer-joined':
      return typeof v.peer === 'string' && typeof v.name === 'string' ? (v as ServerMessage) : null;
    case 'peer-left':
      return typeof v.peer === 'string' ? { type: 'peer-left', peer: v.peer, reason: String(v.reason ?? 'left') } : null;
    case 'signal':
      return typeof v.from === 'string' ? (v as ServerMessage) : null;
    case 'pong':
      return { type: 'pong', t: typeof v.t === 'number' ? v.t : undefined };
    case 'error':
      return typeof v.code === 'string'
        ? { type: 'error', code: v.code, message: typeof v.message === 'string' ? v.message : v.code }
        : null;
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

/** 32 lowercase hex chars from the platform's CSPRNG. */
export function randomId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}
