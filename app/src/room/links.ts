// The room's links, whichever way its packets travel: the mesh (a peer connection to each
// participant, net/mesh.ts) or the hub (one peer connection to the server, net/hub.ts, in forward
// or mix mode). The room's topology, from the welcome and the owner's `topology` messages,
// chooses; this is the one Transport the session sees.
//
// A switch opens the new way first and keeps the old one until the new one carries the room (at
// most SWITCH_MAX_MS, after which a participant the new way cannot reach does not hold the others
// back):
// - to the hub: our hub link connected AND every participant reaching us through it. Our own
//   link is not enough: a participant whose hub link is not up yet is heard only on the mesh, and
//   closing our mesh link to it would cut both ways (four pages, each dropping the mesh as its
//   own link came up, lost 23-189 packets each across the switch; waiting for everyone, none,
//   with 8-12 underruns per page left as the buffers follow the hub path's later arrivals,
//   against 0-1 on the mesh alone over as long: tests/browser/hub.test.mjs). In forward mode
//   a participant's packets have come in the hub's bundles since the switch (NP_HUB_RX_PACKETS);
//   in mix mode the hub meters its stream, so it is in our mix (NP_HUB_METER_MS fresh). Either
//   proves that participant's hub link up both ways, so it hears us there too;
// - to the mesh: every participant's mesh link connected. Meanwhile both
// deliver into the same engine slots and the engine plays the first copy of each packet (its
// jitter buffer places them by sequence number), so the switch leaves no gap beyond what the
// jitter buffer conceals, and the engine, its slots and the recording's timeline stay as they are.

import { HubTransport } from '../net/hub';
import { Mesh, noRestarts, type IcePolicy } from '../net/mesh';
import type { PumpHost } from '../net/net-host';
import { hubMeter, netPeerIndex, NP_HUB_RX_PACKETS } from '../net/net-stats';
import type { Topology } from '../net/protocol';
import type { Membership } from './membership';
import type { Transport } from './transport';
import type { LinkState, RestartCounts } from './types';

/** Longest the mesh may take to reach everyone before the hub it replaces goes, ms. */
export const SWITCH_MAX_MS = 10000;
const RETIRE_CHECK_MS = 250;

export interface RoomLinksOptions {
  self: string;
  iceServers: RTCIceServer[];
  icePolicy: IcePolicy;
  pump: PumpHost;
  members: Membership;
  /** The engine slot the hub's mix plays in (mix mode). */
  mixSlot: number;
  /** Whether signals can pass now (a stalled mesh link is made anew only then). */
  canSignal?(): boolean;
  /** A participant's link changed state (on the way the room now uses). */
  onLinkState(peer: string, state: LinkState): void;
  /** The hub link is up (again). */
  onHubConnected(): void;
  /** The hub sends our own packets back to us (the sound check through the server). */
  echo?: boolean;
}

export class RoomLinks implements Transport {
  mode: Topology | null = null;
  private meshLink: Mesh | null = null;
  private hubLink: HubTransport | null = null;
  private active: Transport | null = null;
  private retiring: Transport | null = null;
  private switchedAt = 0;
  /** Each slot's NP_HUB_RX_PACKETS at the switch. */
  private readonly hubRxAtSwitch = new Map<number, number>();
  private retireTimer: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly opts: RoomLinksOptions) {}

  get mesh(): Mesh | null {
    return this.meshLink;
  }

  get hub(): HubTransport | null {
    return this.hubLink;
  }

  /** The room's packets travel `mode` from now on; false when that changed nothing. */
  setMode(mode: Topology): boolean {
    if (mode === this.mode) return false;
    this.mode = mode;
    const next = mode === 'mesh' ? (this.meshLink ?? this.openMesh()) : (this.hubLink ?? this.openHub());
    this.hubLink?.setMixSlot(mode === 'mix' ? this.opts.mixSlot : -1);
    if (next !== this.active) {
      if (this.retiring && this.retiring !== next) this.retire();
      this.retiring = this.active;
      this.active = next;
      this.switchedAt = performance.now();
      this.hubRxAtSwitch.clear();
      for (const p of this.opts.members.participants.values()) {
        this.hubRxAtSwitch.set(p.slot, this.opts.pump.stats[netPeerIndex(p.slot, NP_HUB_RX_PACKETS)]);
      }
      for (const [peer, p] of this.opts.members.participants) {
        this.ensureOn(next, peer, p.slot);
        this.opts.onLinkState(peer, next.state(peer) ?? 'connecting');
      }
      if (this.retiring && this.retireTimer === null) {
        this.retireTimer = setInterval(() => this.checkRetire(), RETIRE_CHECK_MS);
      }
    }
    return true;
  }

  ensure(peer: string, slot: number): void {
    if (this.active) this.ensureOn(this.active, peer, slot);
  }

  drop(peer: string): void {
    this.active?.drop(peer);
    this.retiring?.drop(peer);
  }

  state(peer: string): LinkState | null {
    return this.active?.state(peer) ?? null;
  }

  rttMs(peer: string): number | null {
    return this.active?.rttMs(peer) ?? null;
  }

  restarts(peer: string): RestartCounts {
    return this.meshLink?.restarts(peer) ?? noRestarts();
  }

  handleSignal(from: string, data: unknown): Promise<void> {
    return this.meshLink ? this.meshLink.handleSignal(from, data) : Promise.resolve();
  }

  close(): void {
    if (this.retireTimer !== null) clearInterval(this.retireTimer);
    this.retireTimer = null;
    this.meshLink?.close();
    this.hubLink?.close();
    this.meshLink = this.hubLink = this.active = this.retiring = null;
  }

  private ensureOn(t: Transport, peer: string, slot: number): void {
    // A native JackTrip client is reached only through the hub.
    if (t === this.meshLink && this.opts.members.get(peer)?.member.kind === 'jacktrip') return;
    t.ensure(peer, slot);
  }

  private checkRetire(): void {
    const next = this.active;
    if (!this.retiring || !next) return;
    const late = performance.now() - this.switchedAt > SWITCH_MAX_MS;
    let carried: boolean;
    if (next === this.hubLink) {
      carried = this.hubLink.link.state === 'connected' && (late || this.hubCarriesEveryone());
    } else {
      carried =
        late ||
        [...this.opts.members.participants].every(
          ([peer, p]) => p.member.kind === 'jacktrip' || next.state(peer) === 'connected',
        );
    }
    if (carried) this.retire();
  }

  /** Every participant reaches us through the hub (see the top of the file). */
  private hubCarriesEveryone(): boolean {
    const stats = this.opts.pump.stats;
    const now = performance.timeOrigin + performance.now();
    for (const p of this.opts.members.participants.values()) {
      const carried =
        this.mode === 'mix'
          ? hubMeter(stats, p.slot, now) !== null
          : stats[netPeerIndex(p.slot, NP_HUB_RX_PACKETS)] > (this.hubRxAtSwitch.get(p.slot) ?? 0);
      if (!carried) return false;
    }
    return true;
  }

  /** The old way goes: its links close, its engine slots stay (the new way uses them). */
  private retire(): void {
    if (this.retireTimer !== null) clearInterval(this.retireTimer);
    this.retireTimer = null;
    const old = this.retiring;
    this.retiring = null;
    if (old && old === this.meshLink) {
      for (const peer of this.opts.members.participants.keys()) old.drop(peer);
      old.close();
      this.meshLink = null;
    } else if (old && old === this.hubLink) {
      old.close();
      this.hubLink = null;
    }
  }

  private onState(from: Transport, peer: string, state: LinkState): void {
    if (from === this.active) this.opts.onLinkState(peer, state);
  }

  private openMesh(): Mesh {
    const mesh: Mesh = new Mesh({
      self: this.opts.self,
      iceServers: this.opts.iceServers,
      icePolicy: this.opts.icePolicy,
      pump: this.opts.pump,
      send: (to, data) => this.opts.members.send(to, data),
      canSignal: this.opts.canSignal,
      onLinkState: (peer, state) => this.onState(mesh, peer, state),
    });
    this.meshLink = mesh;
    return mesh;
  }

  private openHub(): HubTransport {
    const members = this.opts.members;
    const hub: HubTransport = new HubTransport({
      iceServers: this.opts.iceServers,
      icePolicy: this.opts.icePolicy,
      pump: this.opts.pump,
      offer: (sdp) => members.hubOffer(sdp, this.opts.echo === true),
      streamOf: (peer) => members.streamOf(peer),
      onLinkState: (peer, state) => this.onState(hub, peer, state),
      onConnected: () => {
        if (hub === this.hubLink) this.opts.onHubConnected();
      },
    });
    this.hubLink = hub;
    return hub;
  }
}
