// The signaling client: one WebSocket to the server, joined to one room, that survives the server
// going away. It reconnects with a capped backoff and joins again with the same peer id and
// token, so the server puts this client back into the room as the same member; the peer-to-peer
// links (mesh.ts) never depend on the socket and keep carrying audio meanwhile.
//
// Liveness: the browser answers the server's WebSocket pings by itself, so the server notices a
// vanished client. For the other direction the client sends an application ping every
// PING_EVERY_MS and treats a socket that has heard nothing for SILENT_AFTER_MS as dead (a server
// that froze, or a network path that dropped without a TCP reset).
//
// What it never does: join again by itself after an error that a rejoin would meet again (a
// wrong or superfluous password, a locked room, a wait the server asked for, a removal by the
// owner: FATAL_JOIN_ERRORS, close code 4001). It stops and reports; the user decides.

import {
  CLOSE_REMOVED,
  FATAL_JOIN_ERRORS,
  hubMixMessage,
  joinMessage,
  type HubMix,
  type JoinFields,
  parseServerMessage,
  receptionMessage,
  type HubLayer,
  type ReceptionReport,
  type Member,
  type PeerSignal,
  type RoomAccess,
  type ServerMessage,
  type Topology,
} from './protocol';

export const PING_EVERY_MS = 2000;
export const SILENT_AFTER_MS = 6000;
const BACKOFF_MS = [250, 500, 1000, 2000, 3000];

export type SignalingStatus = 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface SignalingEvents {
  status(status: SignalingStatus): void;
  /** The server (re)accepted the join; `peers` are the other members now; `room` is how the
   * room's packets travel and our own hub stream id. */
  welcome(
    peers: Member[],
    cap: number,
    access: RoomAccess,
    room: { topology: Topology; stream?: number },
  ): void;
  /** The owner chose how the room's packets travel. */
  topology?(mode: Topology, reason?: string): void;
  /** The hub's answer to our last hub offer. */
  hubAnswer?(sdp: string): void;
  /** What we now take of the others, and why: from the hub (forward or mix mode), or from
   * every other member in a mesh (`mesh`). */
  layer?(layer: HubLayer, reason: string, mesh: boolean): void;
  /** Mesh: member `peer` now takes `layer` of our stream. */
  sendLayer?(peer: string, layer: HubLayer): void;
  /** The owner locked or unlocked the room. */
  room(locked: boolean): void;
  joined(member: Member): void;
  left(peer: string, reason: string): void;
  signal(from: string, data: unknown): void;
  /** An error from the server; `fatal` when the client stopped (it will not join again by
   * itself); `retryAfterMs` when the server said how long to wait. */
  error(code: string, message: string, fatal: boolean, retryAfterMs?: number): void;
}

export type JoinParams = JoinFields;

export class SignalingClient {
  status: SignalingStatus = 'connecting';
  /** Messages from the server that were not well-formed (counted and dropped). */
  malformed = 0;
  private ws: WebSocket | null = null;
  private attempt = 0;
  private lastHeard = 0;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;
  private joined = false;

  constructor(
    private readonly url: string,
    private join: JoinParams,
    private readonly on: SignalingEvents,
  ) {
    this.connect();
  }

  /** The WebSocket URL of the signaling endpoint of the page's own origin. */
  static urlFor(loc: Location = location): string {
    return `${loc.protocol === 'https:' ? 'wss:' : 'ws:'}//${loc.host}/ws`;
  }

  send(to: string, data: PeerSignal): void {
    this.sendJson({ type: 'signal', to, data });
  }

  /** Owner only: locks or unlocks the room (every member then gets `room`). */
  lock(locked: boolean): void {
    this.sendJson({ type: 'lock', locked });
  }

  /** Offers our one link to the hub (a new offer replaces the previous link); with `echo` the
   * hub sends our own packets back on it too (the sound check through the server). */
  hubOffer(sdp: string, echo = false): void {
    this.sendJson(echo ? { type: 'hub-offer', sdp, echo: true } : { type: 'hub-offer', sdp });
  }

  /** The mesh has asked more of our uplink than it carries (bits/s each): the server may move
   * the room to the hub (every member then gets `topology` with the reason). */
  uplink(needBps: number, carriesBps: number): void {
    this.sendJson({ type: 'uplink', need: Math.round(needBps), carries: Math.round(carriesBps) });
  }

  /** Forward mode: what reached us from the hub over the last second (the hub picks from it
   * what it sends us of the others). */
  reception(report: ReceptionReport): void {
    this.sendJson(receptionMessage(report));
  }

  /** Owner only: how the room's packets travel (every member then gets `topology`). */
  topology(mode: Topology): void {
    this.sendJson({ type: 'topology', mode });
  }

  /** Our personal mix on the hub (hub-mix). */
  hubMix(mix: HubMix): void {
    this.sendJson(hubMixMessage(mix));
  }

  /** Owner only: sends `peer` away from the room. */
  remove(peer: string): void {
    this.sendJson({ type: 'remove', peer });
  }

  /** The owner secret to give in later joins (a welcome handed it out). */
  setOwner(owner: string): void {
    this.join = { ...this.join, owner };
  }

  /** Joins again after a fatal error, with another password ('' for none: after no-password),
   * or with the same join when `password` is undefined. */
  retry(password?: string): void {
    if (password !== undefined) this.join = { ...this.join, password };
    this.stopped = false;
    this.attempt = 0;
    this.setStatus('connecting');
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.sendJoin();
    else this.connect();
  }

  /** Leaves the room and closes the socket for good. */
  close(): void {
    if (this.stopped && !this.ws) return;
    if (this.joined) this.sendJson({ type: 'leave' });
    this.stopped = true;
    this.clearTimers();
    this.ws?.close(1000, 'leaving');
    this.ws = null;
    this.setStatus('closed');
  }

  private connect(): void {
    this.clearTimers();
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      this.lastHeard = performance.now();
      this.sendJoin();
      this.pingTimer = setInterval(() => this.heartbeat(), PING_EVERY_MS);
    };
    ws.onmessage = (ev) => {
      this.lastHeard = performance.now();
      if (typeof ev.data !== 'string') {
        this.malformed++;
        return;
      }
      const msg = parseServerMessage(ev.data);
      if (!msg) {
        this.malformed++;
        return;
      }
      this.handle(msg);
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.joined = false;
      if (ev.code === CLOSE_REMOVED) {
        // Removed by the owner (the error before the close may not have arrived): stay out.
        this.stop();
        this.on.error('removed', 'The room’s owner removed you from the room.', true);
        return;
      }
      if (!this.stopped) this.scheduleReconnect();
    };
    ws.onerror = () => {
      // A close event always follows; reconnecting is decided there.
    };
  }

  private handle(msg: ServerMessage): void {
    switch (msg.type) {
      case 'welcome':
        this.attempt = 0;
        this.joined = true;
        this.setStatus('open');
        if (msg.owner) this.setOwner(msg.owner);
        this.on.welcome(
          msg.peers,
          msg.cap,
          {
            isOwner: msg.isOwner,
            owner: msg.owner,
            locked: msg.locked,
            protected: msg.protected,
          },
          { topology: msg.topology, stream: msg.stream },
        );
        break;
      case 'topology':
        this.on.topology?.(msg.mode, msg.reason);
        break;
      case 'hub-answer':
        this.on.hubAnswer?.(msg.sdp);
        break;
      case 'layer':
        this.on.layer?.(msg.layer, msg.reason, msg.mesh);
        break;
      case 'send-layer':
        this.on.sendLayer?.(msg.peer, msg.layer);
        break;
      case 'room':
        this.on.room(msg.locked);
        break;
      case 'peer-joined':
        this.on.joined({
          peer: msg.peer,
          name: msg.name,
          ...(msg.stream !== undefined ? { stream: msg.stream } : {}),
          ...(msg.kind !== undefined ? { kind: msg.kind } : {}),
        });
        break;
      case 'peer-left':
        this.on.left(msg.peer, msg.reason);
        break;
      case 'signal':
        this.on.signal(msg.from, msg.data);
        break;
      case 'pong':
        break;
      case 'error': {
        // Before the welcome an error answers our join; once joined, only a removal ends the
        // membership (others, such as not-owner or rate-limited, answer one message).
        const fatal = this.joined ? msg.code === 'removed' : FATAL_JOIN_ERRORS.has(msg.code);
        // Joining again as before would be refused again: wait for the user.
        if (fatal) this.stop();
        this.on.error(msg.code, msg.message, fatal, msg.retryAfterMs);
        break;
      }
    }
  }

  /** Stops for good unless the user retries: no reconnects, the socket closed. */
  private stop(): void {
    this.stopped = true;
    this.joined = false;
    this.clearTimers();
    const ws = this.ws;
    this.ws = null;
    ws?.close(1000, 'join refused');
    this.setStatus('closed');
  }

  private sendJoin(): void {
    this.sendJson(joinMessage(this.join));
  }

  private heartbeat(): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    if (performance.now() - this.lastHeard > SILENT_AFTER_MS) {
      // Nothing heard for too long: drop this socket and start over.
      this.ws = null;
      this.joined = false;
      ws.close();
      this.scheduleReconnect();
      return;
    }
    this.sendJson({ type: 'ping', t: Math.round(performance.now()) });
  }

  private scheduleReconnect(): void {
    this.clearTimers();
    this.setStatus(this.status === 'connecting' && this.attempt === 0 ? 'connecting' : 'reconnecting');
    const delay = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    this.attempt++;
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  private sendJson(msg: object): void {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  private setStatus(status: SignalingStatus): void {
    if (status === this.status) return;
    this.status = status;
    this.on.status(status);
  }

  private clearTimers(): void {
    if (this.pingTimer !== null) clearInterval(this.pingTimer);
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.pingTimer = null;
    this.retryTimer = null;
  }
}
