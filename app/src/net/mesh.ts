// The mesh: one RTCPeerConnection per remote peer, each carrying one unordered, never
// retransmitted data channel for audio (a late packet is worth nothing to a musician), and
// beside it a control channel of the same kind for the clock's ping/pong (clock.ts).
//
// - Who offers: the peer with the smaller id, so two peers never offer to each other at once.
// - The channels are negotiated (both ends create them, audio with id 0, control with id 1), so
//   they exist from the start and are handed to the packet pump before any event fires: that is
//   what lets the pump take them into its worker.
// - Every negotiation has an epoch chosen by the offerer; signals of an older epoch are dropped.
//   A link that fails, or stays unconnected for CONNECT_TIMEOUT_MS (e.g. signals lost while the
//   server was down), is renegotiated by its offerer with the next epoch.
// - A connected link whose audio send queue stops draining (an SCTP association that no longer
//   takes data while ICE still says connected; send-stall.ts decides, from the pump's figures,
//   looked at every SEND_WATCH_EVERY_MS) is made anew on a fresh peer connection: a stuck
//   association does not come back by itself, and new streams on it would be stuck too. The
//   offerer restarts it at once; the answerer, which may as well be the stalled sender, asks the
//   offerer with a 'restart' signal of the link's epoch (the offerer honours one per epoch, for a
//   connected link only, so a peer cannot make it renegotiate faster than links come up). Only
//   while signals can pass (`canSignal`): with the server down the old link is the only one.
// - Restarts are counted per peer and reason (`restarts`), for the room view.
// - Links do not depend on the signaling socket: a server restart leaves established links
//   playing, and when the room re-forms, peers that are still connected are kept as they are.
// - Candidates that arrive before the remote description wait in a queue of at most
//   MAX_PENDING_CANDIDATES per link; a peer (or a server) sending more has the excess counted and
//   dropped: a real negotiation has a handful, and the queue must not grow at a hostile's pace.

import { parsePeerSignal, type PeerSignal } from './protocol';
import type { PumpHost } from './net-host';
import { NP_BUFFERED, NP_TX_PACKETS, NP_TX_SKIPPED, netPeerIndex } from './net-stats';
import { SendStallWatch } from './send-stall';
import { candidateAllowed, selectedPair, selectedPairRttMs, type IcePolicy } from './rtc';
import type { LinkState, RestartCounts, RestartReason } from '../room/types';

export const CONNECT_TIMEOUT_MS = 12000;
/** A link of ours still not connected this long after its last change is offered anew when its
 * peer is announced again (see ensure). */
export const REOFFER_AFTER_MS = 3000;
/** Candidates kept per link before its remote description is set. */
export const MAX_PENDING_CANDIDATES = 64;
const WATCH_EVERY_MS = 2000;
const STATS_EVERY_MS = 2000;
/** How often the send queues of connected links are looked at (send-stall.ts). */
export const SEND_WATCH_EVERY_MS = 500;

/** No restarts yet. */
export function noRestarts(): RestartCounts {
  return { failed: 0, timeout: 0, 'send-stall': 0, 'peer-send-stall': 0 };
}

/** The candidates a link holds until its remote description is set: at most `limit`; the
 * excess is counted in `dropped` and not kept. */
export class CandidateQueue {
  private items: RTCIceCandidateInit[] = [];
  dropped = 0;

  constructor(readonly limit = MAX_PENDING_CANDIDATES) {}

  get length(): number {
    return this.items.length;
  }

  /** Keeps `c` if there is room; false when it was dropped. */
  push(c: RTCIceCandidateInit): boolean {
    if (this.items.length >= this.limit) {
      this.dropped++;
      return false;
    }
    this.items.push(c);
    return true;
  }

  /** Everything kept, in arrival order; the queue is empty afterwards. */
  take(): RTCIceCandidateInit[] {
    const all = this.items;
    this.items = [];
    return all;
  }
}

export type { IcePolicy } from './rtc';

export interface MeshOptions {
  self: string;
  iceServers: RTCIceServer[];
  icePolicy: IcePolicy;
  pump: PumpHost;
  send(to: string, data: PeerSignal): void;
  /** Whether signals reach peers now (the server is up). A stalled link is made anew only then:
   * a new negotiation needs signals, and while they cannot pass the old link is the only one. */
  canSignal?(): boolean;
  onLinkState(peer: string, state: LinkState): void;
}

interface Link {
  peer: string;
  slot: number;
  epoch: number;
  pc: RTCPeerConnection;
  state: LinkState;
  since: number;
  remoteSet: boolean;
  pending: CandidateQueue;
  rttMs: number | null;
  /** Our audio send queue towards the peer (send-stall.ts). */
  sendWatch: SendStallWatch;
  /** The answerer asked the offerer to make this link anew (counted once per link). */
  askedRestart: boolean;
}

export class Mesh {
  /** Signals from peers that were malformed or for an unknown peer (counted and dropped). */
  droppedSignals = 0;
  /** Candidates dropped because a link's queue was full (MAX_PENDING_CANDIDATES). */
  droppedCandidates = 0;
  private readonly links = new Map<string, Link>();
  private readonly watch: ReturnType<typeof setInterval>;
  private readonly statsTimer: ReturnType<typeof setInterval>;
  private readonly sendTimer: ReturnType<typeof setInterval>;
  /** Restarts per peer, kept across its links (a restart replaces the link). */
  private readonly restartCounts = new Map<string, RestartCounts>();
  private closed = false;

  constructor(private readonly opts: MeshOptions) {
    this.watch = setInterval(() => this.checkStalled(), WATCH_EVERY_MS);
    this.statsTimer = setInterval(() => void this.pollRtt(), STATS_EVERY_MS);
    this.sendTimer = setInterval(() => this.checkSendQueues(), SEND_WATCH_EVERY_MS);
  }

  /** Makes sure there is a link to `peer` on engine slot `slot`; keeps a healthy existing one. */
  ensure(peer: string, slot: number): void {
    if (this.closed) return;
    const link = this.links.get(peer);
    if (link && link.state !== 'failed') {
      // The peer is announced again (the room re-formed after the signaling came back) while
      // our offer is still unanswered: it was most likely lost with the signaling, so offer anew
      // now rather than CONNECT_TIMEOUT_MS after it.
      const waiting = performance.now() - link.since;
      if (link.state !== 'connected' && this.isOfferer(peer) && waiting > REOFFER_AFTER_MS) {
        this.restart(link, 'timeout');
      }
      return;
    }
    if (link) this.teardown(link);
    if (this.isOfferer(peer)) this.negotiate(peer, slot, (link?.epoch ?? 0) + 1);
    else this.links.set(peer, this.newLink(peer, slot, 0));
  }

  /** Closes the link to `peer`; returns the engine slot it used, or -1. */
  drop(peer: string): number {
    const link = this.links.get(peer);
    if (!link) return -1;
    this.teardown(link);
    this.links.delete(peer);
    this.restartCounts.delete(peer);
    this.opts.pump.remove(link.slot);
    return link.slot;
  }

  /**
   * For tests of stall recovery only: our send queue towards `peer` reads as stuck from now on
   * (PumpHost.holdSend; the real channel is untouched) until the link is made anew. False when
   * there is no link to `peer`.
   */
  simulateSendStall(peer: string): boolean {
    const link = this.links.get(peer);
    if (!link) return false;
    this.opts.pump.holdSend(link.slot);
    return true;
  }

  /** The restarts of the link to `peer` so far, by reason (all 0 for an unknown peer). */
  restarts(peer: string): RestartCounts {
    return { ...(this.restartCounts.get(peer) ?? noRestarts()) };
  }

  has(peer: string): boolean {
    return this.links.has(peer);
  }

  state(peer: string): LinkState | null {
    return this.links.get(peer)?.state ?? null;
  }

  /**
   * The local UDP ports the connected peers' packets arrive at: for the tests that impair this
   * listener's downlink alone (every peer's path into it).
   */
  async localPorts(): Promise<number[]> {
    const ports: number[] = [];
    for (const link of this.links.values()) {
      if (link.state !== 'connected') continue;
      const port = (await selectedPair(link.pc))?.localPort;
      if (typeof port === 'number') ports.push(port);
    }
    return ports;
  }

  rttMs(peer: string): number | null {
    return this.links.get(peer)?.rttMs ?? null;
  }

  /** Handles a signal relayed by the server. */
  async handleSignal(from: string, data: unknown): Promise<void> {
    const signal = parsePeerSignal(data);
    const link = this.links.get(from);
    if (!signal || !link || this.closed) {
      this.droppedSignals++;
      return;
    }
    try {
      switch (signal.kind) {
        case 'offer': {
          if (this.isOfferer(from)) {
            this.droppedSignals++;
            return;
          }
          let target = link;
          if (!link.remoteSet && link.epoch === 0) {
            // The first offer: the link made on joining takes its epoch.
            link.epoch = signal.epoch;
          } else if (signal.epoch !== link.epoch) {
            this.teardown(link);
            target = this.newLink(from, link.slot, signal.epoch);
            target.pending = link.pending;
            this.links.set(from, target);
          } else {
            return; // a repeat of the offer this link already answered
          }
          await target.pc.setRemoteDescription({ type: 'offer', sdp: signal.sdp });
          target.remoteSet = true;
          await this.flushCandidates(target);
          const answer = await target.pc.createAnswer();
          await target.pc.setLocalDescription(answer);
          this.opts.send(from, { kind: 'answer', sdp: answer.sdp ?? '', epoch: target.epoch });
          break;
        }
        case 'answer':
          if (signal.epoch !== link.epoch || link.remoteSet || !this.isOfferer(from)) {
            this.droppedSignals++;
            return;
          }
          await link.pc.setRemoteDescription({ type: 'answer', sdp: signal.sdp });
          link.remoteSet = true;
          await this.flushCandidates(link);
          break;
        case 'restart':
          // The answerer's send queue stopped draining: one restart per epoch, of a connected link.
          if (!this.isOfferer(from) || signal.epoch !== link.epoch || link.state !== 'connected') {
            this.droppedSignals++;
            return;
          }
          console.warn(`mesh: ${from.slice(0, 8)} asks for a new link: its send queue stopped draining`);
          this.restart(link, 'peer-send-stall');
          break;
        case 'candidate':
          if (!this.allowed(signal.candidate.candidate ?? '')) return;
          if (signal.epoch !== link.epoch) {
            // The answerer may hear candidates of a new epoch before its offer: keep them.
            if (!this.isOfferer(from) && signal.epoch > link.epoch) {
              this.queue(link, signal.candidate);
            }
            return;
          }
          if (link.remoteSet) await link.pc.addIceCandidate(signal.candidate);
          else this.queue(link, signal.candidate);
          break;
      }
    } catch (err) {
      // A description or candidate the browser refused: this negotiation is dead; the offerer's
      // watchdog starts a new one.
      console.warn(`mesh: signal from ${from.slice(0, 8)} refused: ${String(err)}`);
      this.setState(link, 'failed');
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.watch);
    clearInterval(this.statsTimer);
    clearInterval(this.sendTimer);
    for (const link of this.links.values()) this.teardown(link);
    this.links.clear();
  }

  private isOfferer(peer: string): boolean {
    return this.opts.self < peer;
  }

  private newLink(peer: string, slot: number, epoch: number): Link {
    const pc = new RTCPeerConnection({ iceServers: this.opts.iceServers });
    // Created before any offer and handed over at once, in this task: the pump may take the
    // channel to its worker only while no event has been dispatched on it.
    const channel = pc.createDataChannel('audio', {
      negotiated: true,
      id: 0,
      ordered: false,
      maxRetransmits: 0,
    });
    // The control channel (clock pings, clock.ts) is unordered and never retransmitted too: an
    // exchange must see the path the audio sees. A retransmitted or head-of-line-blocked ping
    // would only add a late sample, which the min-RTT filter throws away anyway; a lost one is
    // one sample fewer, and the next comes a second later.
    const control = pc.createDataChannel('tutti-ctl', {
      negotiated: true,
      id: 1,
      ordered: false,
      maxRetransmits: 0,
    });
    this.opts.pump.add(slot, channel, control);
    const link: Link = {
      peer,
      slot,
      epoch,
      pc,
      state: 'connecting',
      since: performance.now(),
      remoteSet: false,
      pending: new CandidateQueue(),
      rttMs: null,
      sendWatch: new SendStallWatch(),
      askedRestart: false,
    };
    pc.onicecandidate = (ev) => {
      if (!ev.candidate || !ev.candidate.candidate) return;
      if (!this.allowed(ev.candidate.candidate)) return;
      this.opts.send(peer, { kind: 'candidate', candidate: ev.candidate.toJSON(), epoch: link.epoch });
    };
    pc.onconnectionstatechange = () => {
      if (this.links.get(peer) !== link) return;
      switch (pc.connectionState) {
        case 'connected':
          this.setState(link, 'connected');
          break;
        case 'disconnected':
          this.setState(link, 'reconnecting');
          break;
        case 'failed':
          this.setState(link, 'failed');
          if (this.isOfferer(peer)) this.restart(link, 'failed');
          break;
        default:
          break;
      }
    };
    return link;
  }

  private async negotiate(peer: string, slot: number, epoch: number): Promise<void> {
    const link = this.newLink(peer, slot, epoch);
    this.links.set(peer, link);
    try {
      const offer = await link.pc.createOffer();
      await link.pc.setLocalDescription(offer);
      if (this.links.get(peer) !== link) return;
      this.opts.send(peer, { kind: 'offer', sdp: offer.sdp ?? '', epoch });
    } catch (err) {
      console.warn(`mesh: offer to ${peer.slice(0, 8)} failed: ${String(err)}`);
      this.setState(link, 'failed');
    }
  }

  private restart(link: Link, reason: RestartReason): void {
    if (this.closed || this.links.get(link.peer) !== link) return;
    this.count(link.peer, reason);
    // A stalled link still says 'connected': the view hears that it is being made anew.
    if (link.state === 'connected') this.setState(link, 'reconnecting');
    this.teardown(link);
    void this.negotiate(link.peer, link.slot, link.epoch + 1);
  }

  private queue(link: Link, c: RTCIceCandidateInit): void {
    if (link.pending.push(c)) return;
    this.droppedCandidates++;
    if (link.pending.dropped === 1) {
      console.warn(
        `mesh: more than ${link.pending.limit} early candidates from ${link.peer.slice(0, 8)}: dropping the rest`,
      );
    }
  }

  private async flushCandidates(link: Link): Promise<void> {
    for (const c of link.pending.take()) await link.pc.addIceCandidate(c);
  }

  private checkStalled(): void {
    const now = performance.now();
    for (const link of this.links.values()) {
      if (link.state === 'connected' || !this.isOfferer(link.peer)) continue;
      if (now - link.since > CONNECT_TIMEOUT_MS) this.restart(link, 'timeout');
    }
  }

  /** Restarts (or has the offerer restart) each connected link whose send queue stalled. */
  private checkSendQueues(): void {
    const now = performance.now();
    const s = this.opts.pump.stats;
    for (const link of [...this.links.values()]) {
      if (link.state !== 'connected') {
        link.sendWatch.reset();
        continue;
      }
      const base = netPeerIndex(link.slot, 0);
      const bufferedBytes = s[base + NP_BUFFERED];
      const stalled = link.sendWatch.update({
        nowMs: now,
        bufferedBytes,
        txPackets: s[base + NP_TX_PACKETS],
        txSkipped: s[base + NP_TX_SKIPPED],
      });
      if (!stalled) continue;
      const stuckMs = link.sendWatch.stuckMs(now);
      link.sendWatch.reset();
      if (this.opts.canSignal?.() === false) continue;
      console.warn(
        `mesh: send queue to ${link.peer.slice(0, 8)} held ${bufferedBytes} bytes for ` +
          `${stuckMs.toFixed(0)} ms with packets waiting: making the link anew`,
      );
      if (this.isOfferer(link.peer)) {
        this.restart(link, 'send-stall');
      } else {
        // Asked again after another STALL_AFTER_MS if the link is still this one and still stuck.
        if (!link.askedRestart) this.count(link.peer, 'send-stall');
        link.askedRestart = true;
        this.opts.send(link.peer, { kind: 'restart', epoch: link.epoch, reason: 'send-stall' });
      }
    }
  }

  private count(peer: string, reason: RestartReason): void {
    let c = this.restartCounts.get(peer);
    if (!c) this.restartCounts.set(peer, (c = noRestarts()));
    c[reason]++;
  }

  private async pollRtt(): Promise<void> {
    for (const link of this.links.values()) {
      if (link.state !== 'connected') continue;
      link.rttMs = await selectedPairRttMs(link.pc);
    }
  }

  private allowed(candidate: string): boolean {
    return candidateAllowed(this.opts.icePolicy, candidate);
  }

  private setState(link: Link, state: LinkState): void {
    if (link.state === state) return;
    link.state = state;
    link.since = performance.now();
    this.opts.onLinkState(link.peer, state);
  }

  private teardown(link: Link): void {
    link.pc.onicecandidate = null;
    link.pc.onconnectionstatechange = null;
    link.pc.close();
  }
}
