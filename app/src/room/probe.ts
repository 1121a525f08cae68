// Round trips through the engine: the latency probe (clicks sent in our stream, timed when they
// come back) and the echo requests it rests on. A remote participant only sends our stream back
// if their user allows it (net/echo-consent.ts), so a probe towards them first asks and waits;
// requests from others wait here for our user's answer (view.echo). A probe of ourselves runs
// over a loopback link in a free engine slot, made for it and removed after it.

import type { ProbeStats } from '../audio/stats-reader';
import { ECHO_ALLOWED, ECHO_BUSY, ECHO_DECLINED, ECHO_STOPPED } from '../net/clock';
import type { EchoEvent } from '../net/pump';
import type { EngineLink } from './engine-link';
import type { Membership } from './membership';
import type { EchoView } from './types';
import { buildEchoView } from './view';

/** The self-test's one participant: the user's own stream, back through the engine. */
export const LOOPBACK_PEER = 'loopback';
/** Clicks a round-trip probe sends. */
export const PROBE_CLICKS = 10;
/** How long a peer is asked to echo us for a probe, ms (ten clicks take 2-4 s). */
export const PROBE_ECHO_MS = 8000;
/** How long a started probe may take to show in the engine's stats block, ms. */
export const PROBE_START_GRACE_MS = 1500;
/** How long we wait for a peer to answer our round-trip request, ms: theirs gives up after 20 s
 * (net/echo-consent.ts) and says so; this bounds the wait if that answer never comes. */
export const ASK_TIMEOUT_MS = 25_000;

/** What a peer's answer to our round-trip request means for the user; `name` is theirs. */
export function echoRefusalText(answer: number, name: string): string {
  switch (answer) {
    case ECHO_DECLINED:
      return `${name} declined the round-trip measurement.`;
    case ECHO_BUSY:
      return `${name} is measuring a round trip with someone else; try again in a moment.`;
    case ECHO_STOPPED:
      return `${name} stopped the round-trip measurement.`;
    default:
      return `${name} did not answer the round-trip request.`;
  }
}

export interface ProbeRun {
  peer: string;
  slot: number;
  clicks: number;
  /** The peer was asked to echo (and is told to stop when the probe is over). */
  echo: boolean;
  /** Waiting for the peer to allow the echo: the engine's probe starts once they do. */
  asking: boolean;
  /** Why it ended without measuring (the peer declined, did not answer...), in words. */
  refusal: string | null;
  /** The probe runs over a loopback link made for it in a room. */
  selfLoop: boolean;
  /** The engine's stats block has shown this probe running. */
  seenRunning: boolean;
  over: boolean;
  /** performance.now() of the request; once the peer allowed the echo, of the clicks' start. */
  startedAt: number;
}

/** A round-trip probe's progress and results (Session.probeResult). */
export interface ProbeResult {
  peer: string;
  /** 'asking': waiting for the peer to allow the echo; 'refused': it ended without measuring
   * (`message` says why). */
  state: 'idle' | 'asking' | 'running' | 'done' | 'refused';
  /** With 'refused': why, in words for the user. */
  message?: string;
  clicks: number;
  sent: number;
  heard: number;
  /** Each sent click's round trip on the local audio clock, ms; NaN: lost. */
  roundTripsMs: number[];
  medianMs: number;
  minMs: number;
  maxMs: number;
}

/**
 * Where probe `run` stands at `now` (performance.now()), given the engine's probe figures.
 * Until the engine shows the new probe running (a moment after the start), it reads as running
 * with nothing sent yet.
 */
export function probeResultOf(run: ProbeRun, s: ProbeStats, now: number): ProbeResult {
  const peer = run.peer;
  const nothing = {
    peer,
    clicks: run.clicks,
    sent: 0,
    heard: 0,
    roundTripsMs: [],
    medianMs: NaN,
    minMs: NaN,
    maxMs: NaN,
  };
  if (run.asking) return { ...nothing, state: 'asking' };
  if (run.refusal !== null && !run.seenRunning) return { ...nothing, state: 'refused', message: run.refusal };
  if (!run.seenRunning && !run.over && now - run.startedAt < PROBE_START_GRACE_MS) {
    return { ...nothing, state: 'running' };
  }
  const state =
    run.refusal !== null ? 'refused' : s.state === 1 ? 'running' : s.state === 2 ? 'done' : 'idle';
  const roundTripsMs = s.roundTripsMs;
  const heard = roundTripsMs.filter(Number.isFinite).sort((a, b) => a - b);
  const median = heard.length > 0 ? heard[Math.floor((heard.length - 1) / 2)] : NaN;
  return {
    peer,
    state,
    clicks: s.clicks,
    sent: s.sent,
    heard: s.heard,
    roundTripsMs,
    medianMs: median,
    minMs: heard.length > 0 ? heard[0] : NaN,
    maxMs: heard.length > 0 ? heard[heard.length - 1] : NaN,
    ...(run.refusal !== null ? { message: run.refusal } : {}),
  };
}

export class RoundTrips {
  /** The last round-trip probe started: towards whom, in which slot, how it stands. */
  private probe: ProbeRun | null = null;
  /** In a room: the slot of a loopback link to ourselves, there while a self probe runs. */
  private selfLoopSlot: number | null = null;
  /** Round-trip requests from other participants waiting for the user's answer, by peer. */
  private readonly requests = new Map<string, { slot: number; ms: number }>();
  /** The last answer each participant gave to our round-trip request (clock.ts ECHO_*). */
  private readonly replies = new Map<string, number>();

  constructor(
    private readonly link: EngineLink,
    private readonly members: Membership,
    /** The self-test: its one participant is our own loop, never asked to echo. */
    private readonly loopback: boolean,
    private readonly ended: () => boolean,
    /** Something the view shows changed. */
    private readonly changed: () => void,
  ) {}

  /**
   * Starts a round-trip probe of `clicks` clicks towards `peer`: our outgoing audio becomes
   * silence and clicks (everyone hears them), and each click is timed when it comes back in that
   * participant's stream. A remote participant is asked to echo our stream first: the clicks
   * start once their user allows it, and a refusal (or no answer) ends the probe with a message
   * (result). `LOOPBACK_PEER` measures our own loop through the engine and the packet pump
   * with no network: the sound check's participant, or in a room a loopback link made for the
   * probe (muted in the mix) and removed after it. Returns false when there is no such
   * participant or no engine.
   */
  start(peer: string, clicks: number): boolean {
    const engine = this.link.engine;
    if (!engine || this.ended()) return false;
    if (this.probe && !this.probe.over) this.stop();
    let slot = this.members.get(peer)?.slot;
    const selfLoop = slot === undefined && peer === LOOPBACK_PEER && !this.loopback;
    if (selfLoop) slot = this.openSelfLoop() ?? undefined;
    if (slot === undefined) return false;
    const echo = !this.loopback && !selfLoop;
    this.probe = {
      peer,
      slot,
      clicks,
      echo,
      asking: echo,
      refusal: null,
      selfLoop,
      seenRunning: false,
      over: false,
      startedAt: performance.now(),
    };
    if (echo) {
      this.replies.delete(peer);
      this.link.pump?.requestEcho(slot, PROBE_ECHO_MS);
    } else {
      engine.control({ type: 'probe', slot, clicks });
    }
    return true;
  }

  /** Stops a running probe (and the peer's echo, or our loopback link). */
  stop(): void {
    this.link.control({ type: 'probe-stop' });
    this.end();
  }

  /** A probe is over (done, stopped or refused): the peer stops echoing, a self loop goes. */
  private end(): void {
    const run = this.probe;
    if (!run || run.over) return;
    run.over = true;
    run.asking = false;
    if (run.echo) this.link.pump?.requestEcho(run.slot, 0);
    if (run.selfLoop) this.closeSelfLoop();
  }

  /**
   * Follows the probe at each view refresh, from the engine's probe figures just read: a peer
   * that does not answer within ASK_TIMEOUT_MS ends it; once the engine showed it running, it
   * ends when the engine is done (or if it never showed within PROBE_START_GRACE_MS).
   */
  follow(s: ProbeStats): void {
    const run = this.probe;
    if (run && !run.over && run.asking) {
      if (performance.now() - run.startedAt > ASK_TIMEOUT_MS) {
        run.refusal = echoRefusalText(0, this.members.get(run.peer)?.member.name ?? 'The participant');
        this.end();
      }
    } else if (run && !run.over) {
      // The block shows the previous probe until the engine takes the new one: only a probe seen
      // running can be over. Once done, the peer's audio goes back to their microphone.
      if (s.state === 1 && s.slot === run.slot) run.seenRunning = true;
      const timedOut = !run.seenRunning && performance.now() - run.startedAt > PROBE_START_GRACE_MS;
      if ((run.seenRunning && s.state !== 1) || timedOut) this.end();
    }
  }

  /**
   * Where the round-trip probe stands, from the engine's stats block (refreshed ten times a
   * second); null before the first probe. 'asking' while the peer has not allowed the echo yet,
   * 'refused' (with the message) once they declined, did not answer or stopped it. Until the
   * engine shows the new probe running (a moment after the start), it reads as running with
   * nothing sent yet.
   */
  result(s: ProbeStats): ProbeResult | null {
    return this.probe ? probeResultOf(this.probe, s, performance.now()) : null;
  }

  /**
   * Asks `peer` to send our own stream back to us for `ms` ms, without a probe (what the probe
   * does first): we then hear ourselves as we arrive there. Their user decides; the answer is
   * reply(peer). `ms` 0 withdraws the request or stops the echo. False when there is no such
   * participant.
   */
  requestEcho(peer: string, ms: number): boolean {
    const p = this.members.get(peer);
    const pump = this.link.pump;
    if (!p || !pump || this.loopback) return false;
    this.replies.delete(peer);
    pump.requestEcho(p.slot, ms);
    return true;
  }

  /** `peer`'s last answer to our round-trip request: 'allowed', 'declined', 'unanswered',
   * 'busy' or 'stopped'; null while none came. */
  reply(peer: string): 'allowed' | 'declined' | 'unanswered' | 'busy' | 'stopped' | null {
    const a = this.replies.get(peer);
    if (a === undefined) return null;
    return (['allowed', 'declined', 'unanswered', 'busy', 'stopped'] as const)[a - ECHO_ALLOWED] ?? null;
  }

  /** Our user's answer to `peer`'s round-trip request. */
  answer(peer: string, allow: boolean): void {
    const req = this.requests.get(peer);
    if (!req) return;
    this.requests.delete(peer);
    this.link.pump?.answerEcho(req.slot, allow);
    this.changed();
  }

  /** The user muted `peer`: no more of their own sound back, and their request is declined. */
  muted(peer: string, slot: number): void {
    this.link.pump?.stopEcho(slot);
    if (this.requests.has(peer)) this.answer(peer, false);
  }

  /** The participant whose stream we echo (the engine's stats block says), if any. */
  echoing(): string | null {
    const slot = this.link.stats.echoSlot();
    for (const [peer, p] of this.members.participants) if (p.slot === slot) return peer;
    return null;
  }

  /** Stops sending the participant we echo their own sound back. */
  stopEcho(): void {
    const peer = this.echoing();
    const p = peer === null ? undefined : this.members.get(peer);
    if (p) this.link.pump?.stopEcho(p.slot);
  }

  /** `peer` left: its request and its answer go. */
  forget(peer: string): void {
    this.requests.delete(peer);
    this.replies.delete(peer);
  }

  /** What the packet pump says of round-trip echoes: requests to us, answers to ours. */
  onEcho(ev: EchoEvent): void {
    if (this.ended()) return;
    const p = this.members.bySlot(ev.slot);
    if (ev.type === 'echo-request') {
      // Someone we muted, or someone we do not know (yet): declined without asking.
      if (!p || p.strip.mute) {
        this.link.pump?.answerEcho(ev.slot, false);
        return;
      }
      this.requests.set(p.member.peer, { slot: ev.slot, ms: ev.ms });
    } else if (ev.type === 'echo-withdrawn') {
      if (p) this.requests.delete(p.member.peer);
    } else {
      if (!p) return;
      this.replies.set(p.member.peer, ev.answer);
      const run = this.probe;
      if (run && !run.over && run.echo && run.slot === ev.slot) {
        if (run.asking && ev.answer === ECHO_ALLOWED) {
          // Allowed: the echo runs from now, and so do the clicks.
          run.asking = false;
          run.startedAt = performance.now();
          this.link.control({ type: 'probe', slot: run.slot, clicks: run.clicks });
        } else if (ev.answer !== ECHO_ALLOWED) {
          run.refusal = echoRefusalText(ev.answer, p.member.name);
          this.stop();
        }
      }
    }
    this.changed();
  }

  /** The view's echo part: pending requests, whom we echo, the setting (`autoAllow`). */
  view(autoAllow: boolean): EchoView {
    return buildEchoView(
      this.requests,
      (peer) => this.members.get(peer)?.member.name,
      this.echoing(),
      autoAllow,
    );
  }

  /** In a room: a loopback link to ourselves in a free slot, muted in the mix. */
  private openSelfLoop(): number | null {
    const engine = this.link.engine;
    const pump = this.link.pump;
    if (this.selfLoopSlot !== null) return this.selfLoopSlot;
    const slot = this.members.takeSlot();
    if (!engine || !pump || slot === undefined) return null;
    engine.control({ type: 'add-peer', slot });
    engine.control({ type: 'strip', slot, gain: 1, pan: 0, mute: true, solo: false });
    pump.addLoopback(slot);
    this.selfLoopSlot = slot;
    return slot;
  }

  private closeSelfLoop(): void {
    const slot = this.selfLoopSlot;
    if (slot === null) return;
    this.selfLoopSlot = null;
    this.link.pump?.remove(slot);
    this.link.control({ type: 'remove-peer', slot });
    this.members.returnSlot(slot);
  }
}
