// The hub link: ONE RTCPeerConnection from this member to the room's hub (server/src/hub), which
// carries every participant's packets, where the mesh (mesh.ts) needs one per participant.
//
// - One data channel labelled `hub`, unordered and never retransmitted, created before the offer
//   and handed to the packet pump at once (pump-hub.ts): our packets go up once, the hub's
//   bundles come down. No control channel: the hub answers no clock pings; the link's round trip
//   is the ICE pair's (rtc.ts).
// - Signaling goes through the server, not through a peer: `{"type":"hub-offer","sdp"}` up,
//   `{"type":"hub-answer","sdp"}` (or the error `hub-unavailable`) down. The hub is ICE-lite and
//   takes no trickled candidates: the offer is sent once our candidates are gathered (or after
//   GATHER_TIMEOUT_MS with what there is), those the session's ICE policy forbids taken out.
// - A link that fails, is refused, or does not connect within CONNECT_TIMEOUT_MS is offered
//   again after a backoff (RESTART_BACKOFF_MS, growing; back to the first once connected). A new
//   offer replaces the previous link on the hub's side.
// - Every participant reached through the hub shares this one link's state and round trip; what
//   the link needs per participant is only the engine slot its stream id plays in.

import type { PumpHost } from './net-host';
import { MIX_STREAM } from './pump-hub';
import { CONNECT_TIMEOUT_MS } from './mesh';
import { candidateAllowed, selectedPair, selectedPairRttMs, type IcePolicy } from './rtc';
import type { LinkState } from '../room/types';
import type { Transport } from '../room/transport';

export const GATHER_TIMEOUT_MS = 2000;
export const RESTART_BACKOFF_MS: readonly number[] = [500, 1000, 2000, 4000, 8000];
const WATCH_EVERY_MS = 1000;
const STATS_EVERY_MS = 2000;

export interface HubOptions {
  iceServers: RTCIceServer[];
  icePolicy: IcePolicy;
  pump: PumpHost;
  /** Sends our offer to the hub over the room's signaling (hub-offer). */
  offer(sdp: string): void;
  /** The hub stream id of `peer`, as the signaling named it; undefined when it has none. */
  streamOf(peer: string): number | undefined;
  onLinkState(peer: string, state: LinkState): void;
  /** The hub link is up (again): e.g. tell the hub our personal mix. */
  onConnected?(): void;
}

/** `sdp` without the candidate lines `policy` forbids. */
export function filterCandidates(sdp: string, policy: IcePolicy): string {
  if (policy === 'all') return sdp;
  return sdp
    .split('\r\n')
    .filter((line) => !line.startsWith('a=candidate:') || candidateAllowed(policy, line.slice(2)))
    .join('\r\n');
}

/** The delay before the `attempt`-th restart in a row (0-based). */
export function restartDelayMs(attempt: number): number {
  return RESTART_BACKOFF_MS[Math.min(Math.max(0, attempt), RESTART_BACKOFF_MS.length - 1)];
}

export class HubTransport implements Transport {
  /** Signals from peers (the hub has none) and answers to no offer: counted and dropped. */
  droppedSignals = 0;
  /** Offers sent (the first and every restart). */
  offers = 0;
  private pc: RTCPeerConnection | null = null;
  private awaitingAnswer = false;
  private linkState: LinkState = 'connecting';
  private since = performance.now();
  private attempt = 0;
  private rtt: number | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private readonly watch: ReturnType<typeof setInterval>;
  private readonly statsTimer: ReturnType<typeof setInterval>;
  /** Participants reached through the hub, with the stream id each was mapped under. */
  private readonly peers = new Map<string, { slot: number; stream: number | undefined }>();
  private mixSlot = -1;
  private closed = false;

  constructor(private readonly opts: HubOptions) {
    this.watch = setInterval(() => this.checkStalled(), WATCH_EVERY_MS);
    this.statsTimer = setInterval(() => void this.pollRtt(), STATS_EVERY_MS);
    void this.connect();
  }

  ensure(peer: string, slot: number): void {
    if (this.closed) return;
    const stream = this.opts.streamOf(peer);
    const known = this.peers.get(peer);
    if (known && known.stream === stream && known.slot === slot) return;
    if (known?.stream !== undefined) this.opts.pump.mapStream(known.stream, -1);
    this.peers.set(peer, { slot, stream });
    if (stream !== undefined) this.opts.pump.mapStream(stream, slot);
  }

  drop(peer: string): void {
    const known = this.peers.get(peer);
    if (!known) return;
    this.peers.delete(peer);
    if (known.stream !== undefined) this.opts.pump.mapStream(known.stream, -1);
  }

  /** Plays the hub's mix (stream 0, mix mode) in engine slot `slot`; -1: not at all. */
  setMixSlot(slot: number): void {
    if (this.mixSlot === slot) return;
    this.mixSlot = slot;
    this.opts.pump.mapStream(MIX_STREAM, slot);
  }

  state(peer: string): LinkState | null {
    return this.peers.has(peer) ? this.linkState : null;
  }

  rttMs(peer: string): number | null {
    return this.peers.has(peer) ? this.rtt : null;
  }

  /** The hub's link state and round trip, whoever it serves. */
  get link(): { state: LinkState; rttMs: number | null } {
    return { state: this.linkState, rttMs: this.rtt };
  }

  /**
   * The local UDP port the hub's packets arrive at, while connected (null otherwise): for the
   * tests that impair this listener's path alone.
   */
  async localPort(): Promise<number | null> {
    if (!this.pc || this.linkState !== 'connected') return null;
    return (await selectedPair(this.pc))?.localPort ?? null;
  }

  handleSignal(): Promise<void> {
    this.droppedSignals++;
    return Promise.resolve();
  }

  /** The hub's answer (hub-answer) to our last offer. */
  async answer(sdp: string): Promise<void> {
    const pc = this.pc;
    if (!pc || !this.awaitingAnswer || this.closed) {
      this.droppedSignals++;
      return;
    }
    this.awaitingAnswer = false;
    try {
      await pc.setRemoteDescription({ type: 'answer', sdp });
    } catch (err) {
      console.warn(`hub: answer refused: ${String(err)}`);
      if (this.pc === pc) this.fail();
    }
  }

  /** The server could not give us a hub link (error hub-unavailable): try again later. */
  unavailable(): void {
    if (this.closed) return;
    this.awaitingAnswer = false;
    this.fail();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.watch);
    clearInterval(this.statsTimer);
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    for (const peer of [...this.peers.keys()]) this.drop(peer);
    this.setMixSlot(-1);
    this.opts.pump.setHub(null);
    this.teardown();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    this.teardown();
    const pc = new RTCPeerConnection({ iceServers: this.opts.iceServers });
    this.pc = pc;
    // Created before the offer and handed over at once, in this task (see mesh.ts on why).
    const channel = pc.createDataChannel('hub', { ordered: false, maxRetransmits: 0 });
    this.opts.pump.setHub(channel);
    pc.onconnectionstatechange = () => {
      if (this.pc !== pc) return;
      switch (pc.connectionState) {
        case 'connected':
          this.attempt = 0;
          this.setState('connected');
          this.opts.onConnected?.();
          break;
        case 'disconnected':
          this.setState('reconnecting');
          break;
        case 'failed':
          this.fail();
          break;
        default:
          break;
      }
    };
    this.setState(this.linkState === 'connected' ? 'reconnecting' : 'connecting');
    try {
      await pc.setLocalDescription(await pc.createOffer());
      await gathered(pc, GATHER_TIMEOUT_MS);
      if (this.pc !== pc || this.closed) return;
      this.awaitingAnswer = true;
      this.offers++;
      this.opts.offer(filterCandidates(pc.localDescription?.sdp ?? '', this.opts.icePolicy));
    } catch (err) {
      console.warn(`hub: offer failed: ${String(err)}`);
      if (this.pc === pc) this.fail();
    }
  }

  /** The link is dead: say so, and offer again after the backoff. */
  private fail(): void {
    this.setState('failed');
    if (this.closed || this.retryTimer !== null) return;
    const delay = restartDelayMs(this.attempt++);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect();
    }, delay);
  }

  private checkStalled(): void {
    if (this.linkState === 'connected' || this.retryTimer !== null) return;
    if (performance.now() - this.since > CONNECT_TIMEOUT_MS) this.fail();
  }

  private async pollRtt(): Promise<void> {
    if (this.pc && this.linkState === 'connected') this.rtt = await selectedPairRttMs(this.pc);
  }

  private setState(state: LinkState): void {
    this.since = performance.now();
    if (this.linkState === state) return;
    this.linkState = state;
    for (const peer of this.peers.keys()) this.opts.onLinkState(peer, state);
  }

  private teardown(): void {
    const pc = this.pc;
    if (!pc) return;
    this.pc = null;
    this.awaitingAnswer = false;
    pc.onconnectionstatechange = null;
    pc.close();
  }
}

/** Resolves once `pc` has gathered its candidates, or after `timeoutMs`. */
function gathered(pc: RTCPeerConnection, timeoutMs: number): Promise<void> {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      pc.removeEventListener('icegatheringstatechange', check);
      resolve();
    };
    const check = () => {
      if (pc.iceGatheringState === 'complete') done();
    };
    const timer = setTimeout(done, timeoutMs);
    pc.addEventListener('icegatheringstatechange', check);
  });
}
