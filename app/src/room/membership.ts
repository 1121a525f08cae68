// Who is in the room: the signaling client that says so, the participants it named, the engine
// slot each one holds, and the owner's controls (lock, remove) that go through the same client.
//
// Membership comes from the server; audio never waits for it. Each participant gets an engine
// slot when first seen and keeps it while it is in the room, including across a server restart
// (the same peer id comes back with the same slot). What follows a participant in or out (engine
// slot set up, transport link, recorder track) is the session's, through MembershipHooks.

import type { HubLayer, HubMix, Member, ReceptionReport, RoomAccess, Topology } from '../net/protocol';
import { SignalingClient, type JoinParams, type SignalingStatus } from '../net/signaling';
import type { JoinRequest, LinkState, MixMemory, StripSettings } from './types';

export const UNITY: StripSettings = { gainDb: 0, pan: 0, mute: false, solo: false };

export interface Participant {
  member: Member;
  slot: number;
  strip: StripSettings;
  link: LinkState;
  /** The clock offset last sent to the engine for this slot (NaN: none or unknown) and when. */
  offsetSentUs: number;
  offsetSentAt: number;
}

export interface MembershipHooks {
  /** `p` was just given its slot (`fresh`), or was named again (e.g. after a server restart). */
  admitted(p: Participant, fresh: boolean): void;
  /** `p` left the room; its slot becomes free once this returns. */
  released(p: Participant): void;
}

/** What the signaling client says that is not membership itself. */
export interface RoomEvents {
  status(status: SignalingStatus): void;
  /** The server (re)accepted the join; the members it named are admitted next. `room`: how the
   * room's packets travel, and our own hub stream id. */
  welcome(access: RoomAccess, room: { topology: Topology; stream?: number }): void;
  /** The owner chose how the room's packets travel, or the server moved the room (`reason`). */
  topology(mode: Topology, reason?: string): void;
  /** The hub's answer to our hub offer. */
  hubAnswer(sdp: string): void;
  /** What we now take of the others, and why: from the hub, or in a mesh (`mesh`). */
  layer(layer: HubLayer, reason: string, mesh: boolean): void;
  /** Mesh: member `peer` now takes `layer` of our stream. */
  sendLayer(peer: string, layer: HubLayer): void;
  /** The owner locked or unlocked the room. */
  locked(locked: boolean): void;
  /** Someone came or went (after a welcome, a join or a leave). */
  changed(): void;
  /** A signal for the transport. */
  signal(from: string, data: unknown): void;
  error(code: string, message: string, fatal: boolean, retryAfterMs?: number): void;
}

export class Membership {
  readonly participants = new Map<string, Participant>();
  private readonly freeSlots: number[] = [];
  private signaling: SignalingClient | null = null;

  constructor(
    /** Our own peer id: never a participant. */
    private readonly self: string,
    maxPeers: number,
    private readonly hooks: MembershipHooks,
    private readonly mixMemory?: MixMemory,
  ) {
    for (let s = maxPeers - 1; s >= 0; s--) this.freeSlots.push(s);
  }

  get(peer: string): Participant | undefined {
    return this.participants.get(peer);
  }

  /** The participant in engine slot `slot`. */
  bySlot(slot: number): Participant | undefined {
    return [...this.participants.values()].find((x) => x.slot === slot);
  }

  /** A free engine slot for something that is not a participant (a loopback link); undefined
   * when none is left. Give it back with returnSlot. */
  takeSlot(): number | undefined {
    return this.freeSlots.pop();
  }

  returnSlot(slot: number): void {
    this.freeSlots.push(slot);
  }

  /**
   * Joins the room `req` names through the signaling server, as our own peer id with `token`
   * (and the owner secret this room remembers): membership follows what the server says.
   */
  connect(req: JoinRequest, token: string, on: RoomEvents): void {
    const join: JoinParams = {
      room: req.room,
      key: req.key ?? null,
      owner: req.owner?.get() ?? null,
      name: req.name,
      peer: this.self,
      token,
      password: req.password,
    };
    this.signaling = new SignalingClient(SignalingClient.urlFor(), join, {
      status: (status) => on.status(status),
      welcome: (peers, _cap, access, room) => {
        on.welcome(access, room);
        for (const m of peers) this.admit(m);
        on.changed();
      },
      room: (locked) => on.locked(locked),
      joined: (m) => {
        this.admit(m);
        on.changed();
      },
      left: (peer) => {
        this.release(peer);
        on.changed();
      },
      signal: (from, data) => on.signal(from, data),
      topology: (mode, reason) => on.topology(mode, reason),
      hubAnswer: (sdp) => on.hubAnswer(sdp),
      layer: (layer, reason, mesh) => on.layer(layer, reason, mesh),
      sendLayer: (peer, layer) => on.sendLayer(peer, layer),
      error: (code, message, fatal, retryAfterMs) => on.error(code, message, fatal, retryAfterMs),
    });
  }

  /** There is a signaling client (a room, not the self-test). */
  get connected(): boolean {
    return this.signaling !== null;
  }

  /** Joins again after a join error (signaling.ts retry). */
  retry(password?: string): void {
    this.signaling?.retry(password);
  }

  /** Owner only (the server checks): locks or unlocks the room. */
  lock(locked: boolean): void {
    this.signaling?.lock(locked);
  }

  /** Owner only (the server checks): sends a participant away. */
  remove(peer: string): void {
    if (this.participants.has(peer)) this.signaling?.remove(peer);
  }

  /** Owner only (the server checks): how the room's packets travel. */
  setTopology(mode: Topology): void {
    this.signaling?.topology(mode);
  }

  /** Tells the server the mesh asks more of our uplink than it carries (bits/s). */
  reportUplink(needBps: number, carriesBps: number): void {
    this.signaling?.uplink(needBps, carriesBps);
  }

  /** Tells the hub what reached us from it over the last second (forward mode). */
  reportReception(report: ReceptionReport): void {
    this.signaling?.reception(report);
  }

  /** Offers our link to the hub; with `echo` the hub sends our own packets back too. */
  hubOffer(sdp: string, echo = false): void {
    this.signaling?.hubOffer(sdp, echo);
  }

  /** Our personal mix on the hub. */
  hubMix(mix: HubMix): void {
    this.signaling?.hubMix(mix);
  }

  /** The hub stream id of `peer`, as the server named it. */
  streamOf(peer: string): number | undefined {
    return this.participants.get(peer)?.member.stream;
  }

  /** Relays a signal to `to` through the server. */
  send(to: string, data: Parameters<SignalingClient['send']>[1]): void {
    this.signaling?.send(to, data);
  }

  close(): void {
    this.signaling?.close();
  }

  /** Gives `member` a slot when first seen (its strip as this room remembers its name). */
  admit(member: Member): void {
    if (member.peer === this.self) return;
    let p = this.participants.get(member.peer);
    let fresh = false;
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
        strip: { ...UNITY, ...this.mixMemory?.get(member.name) },
        link: 'connecting',
        offsetSentUs: NaN,
        offsetSentAt: -Infinity,
      };
      this.participants.set(member.peer, p);
      fresh = true;
    } else {
      p.member = member;
    }
    this.hooks.admitted(p, fresh);
  }

  release(peer: string): void {
    const p = this.participants.get(peer);
    if (!p) return;
    this.participants.delete(peer);
    this.hooks.released(p);
    this.freeSlots.push(p.slot);
  }

  /** Everyone leaves at once (we were sent away). */
  releaseAll(): void {
    for (const peer of [...this.participants.keys()]) this.release(peer);
  }
}
