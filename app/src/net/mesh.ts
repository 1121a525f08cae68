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
// - Links do not depend on the signaling socket: a server restart leaves established links
//   playing, and when the room re-forms, peers that are still connected are kept as they are.
// - Candidates that arrive before the remote description wait in a queue of at most
//   MAX_PENDING_CANDIDATES per link; a peer (or a server) sending more has the excess counted and
//   dropped: a real negotiation has a handful, and the queue must not grow at a hostile's pace.

import { parsePeerSignal, type PeerSignal } from './protocol';
import type { PumpHost } from './net-host';
import type { LinkState } from '../room/types';

export const CONNECT_TIMEOUT_MS = 12000;
/** Candidates kept per link before its remote description is set. */
export const MAX_PENDING_CANDIDATES = 64;
const WATCH_EVERY_MS = 2000;
const STATS_EVERY_MS = 2000;

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

/** 'loopback' keeps only 127.0.0.1 candidates (one-machine tests); 'all' keeps everything. */
export type IcePolicy = 'all' | 'loopback';

export interface MeshOptions {
  self: string;
  iceServers: RTCIceServer[];
  icePolicy: IcePolicy;
  pump: PumpHost;
  send(to: string, data: PeerSignal): void;
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
}

export class Mesh {
  /** Signals from peers that were malformed or for an unknown peer (counted and dropped). */
  droppedSignals = 0;
  /** Candidates dropped because a link's queue was full (MAX_PENDING_CANDIDATES). */
  droppedCandidates = 0;
  private readonly links = new Map<string, Link>();
  private readonly watch: ReturnType<typeof setInterval>;
  private readonly statsTimer: ReturnType<typeof setInterval>;
  private closed = false;

  constructor(private readonly opts: MeshOptions) {
    this.watch = setInterval(() => this.checkStalled(), WATCH_EVERY_MS);
    this.statsTimer = setInterval(() => void this.pollRtt(), STATS_EVERY_MS);
  }

  /** Makes sure there is a link to `peer` on engine slot `slot`; keeps a healthy existing one. */
  ensure(peer: string, slot: number): void {
    if (this.closed) return;
    const link = this.links.get(peer);
    if (link && link.state !== 'failed') return;
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
    this.opts.pump.remove(link.slot);
    return link.slot;
  }

  has(peer: string): boolean {
    return this.links.has(peer);
  }

  state(peer: string): LinkState | null {
    return this.links.get(peer)?.state ?? null;
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
          if (this.isOfferer(peer)) this.restart(link);
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

  private restart(link: Link): void {
    if (this.closed || this.links.get(link.peer) !== link) return;
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
      if (now - link.since > CONNECT_TIMEOUT_MS) this.restart(link);
    }
  }

  private async pollRtt(): Promise<void> {
    for (const link of this.links.values()) {
      if (link.state !== 'connected') continue;
      try {
        const report = await link.pc.getStats();
        let rtt: number | null = null;
        report.forEach(
          (s: { type: string; state?: string; nominated?: boolean; currentRoundTripTime?: number }) => {
            if (
              s.type === 'candidate-pair' &&
              s.state === 'succeeded' &&
              s.nominated &&
              typeof s.currentRoundTripTime === 'number'
            ) {
              rtt = s.currentRoundTripTime * 1000;
            }
          },
        );
        link.rttMs = rtt;
      } catch {
        // The connection closed while we asked.
      }
    }
  }

  private allowed(candidate: string): boolean {
    if (this.opts.icePolicy === 'all') return true;
    // candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type> ...
    const address = candidate.split(' ')[4];
    return address === '127.0.0.1';
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
