// Consent for round-trip echoes: who may make this client send their own stream back to them.
//
// A peer measuring its round trip to us asks (a CTL_ECHO request on the control channel) that we
// send its stream back to it for a few seconds. While we do, that peer hears itself from us
// instead of our microphone (the others keep hearing us: core/src/capture.rs). Nobody may do that
// to us unasked: the request waits for our user's answer (or the session's "allow without
// asking"), a denial or no answer within ANSWER_TIMEOUT_MS is sent back, and the user can stop an
// echo at any time. This module is the policy, per asker (by engine slot):
//
//   idle ──request──► pending ──allow──► granted ──its time is up / the asker stops──► idle
//                        │                  └──our user stops (Stop, or mutes the asker)──► cooldown
//                        └──deny / no answer / the asker withdraws──► cooldown ──COOLDOWN_MS──► idle
//
// One pending prompt per asker: a request while one is pending, while its echo runs, or during
// the cooldown after a denial, an unanswered prompt, a withdrawal or a stop, is dropped and counted
// (the caller counts: request() says Drop). One echo at a time: a request while another asker's
// echo runs is answered "busy" at once. A renewal after an echo ended asks again (unless
// "allow without asking" is on).
//
// Sans-IO: every call takes `now` (ms, any monotonic clock) and returns what the caller must do;
// the packet pump (pump.ts) sends the replies and writes the engine's TAG_ECHO records. State is
// a few typed arrays sized at construction.

/** How long a prompt waits for our user's answer before it counts as declined, ms. */
export const ANSWER_TIMEOUT_MS = 20_000;
/** After a denial, an unanswered or withdrawn prompt or a stopped echo, the asker's requests are
 * dropped for this long, ms. */
export const COOLDOWN_MS = 10_000;

/** What request() decided. */
export const Verdict = {
  /** Rate-limited: count it, send nothing. */
  Drop: 0,
  /** Show our user the prompt; answer() comes later (or tick() times it out). */
  Ask: 1,
  /** Allowed without asking (the session's setting): echo now for the requested time. */
  Grant: 2,
  /** Another asker's echo runs: tell this one we are busy. */
  Busy: 3,
} as const;
export type Verdict = (typeof Verdict)[keyof typeof Verdict];

/** What answer() decided. */
export const Outcome = {
  /** No prompt was pending (withdrawn, timed out, answered already): nothing to do. */
  None: 0,
  /** Echo now, for grantedMs(slot). */
  Grant: 1,
  Declined: 2,
  /** Allowed, but another asker's echo runs meanwhile: tell this one we are busy. */
  Busy: 3,
} as const;
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

/** What cancel() (the asker sent "stop") decided. */
export const Cancel = {
  None: 0,
  /** The prompt goes away (our user never answered). */
  Withdrawn: 1,
  /** The running echo stops. */
  Stop: 2,
} as const;
export type Cancel = (typeof Cancel)[keyof typeof Cancel];

const IDLE = 0;
const PENDING = 1;
const GRANTED = 2;
const COOLDOWN = 3;

export class EchoConsent {
  /** "Allow round-trip requests without asking", for this session. Off unless the user says. */
  autoAllow = false;
  private readonly phase: Uint8Array;
  /** PENDING: when it was asked; GRANTED, COOLDOWN: when it ends (ms). */
  private readonly at: Float64Array;
  /** PENDING, GRANTED: the echo's length, ms. */
  private readonly ms: Float64Array;

  constructor(readonly maxPeers: number) {
    this.phase = new Uint8Array(maxPeers);
    this.at = new Float64Array(maxPeers);
    this.ms = new Float64Array(maxPeers);
  }

  /** The asker in `slot` asks for an echo of `ms` ms (> 0). */
  request(slot: number, ms: number, now: number): Verdict {
    if (!this.valid(slot) || !(ms > 0)) return Verdict.Drop;
    this.settle(slot, now);
    if (this.phase[slot] !== IDLE) return Verdict.Drop;
    if (this.echoing(now) >= 0) return Verdict.Busy;
    this.ms[slot] = ms;
    if (this.autoAllow) {
      this.grant(slot, now);
      return Verdict.Grant;
    }
    this.phase[slot] = PENDING;
    this.at[slot] = now;
    return Verdict.Ask;
  }

  /** Our user's answer to the prompt of the asker in `slot`. */
  answer(slot: number, allow: boolean, now: number): Outcome {
    if (!this.valid(slot)) return Outcome.None;
    this.settle(slot, now);
    if (this.phase[slot] !== PENDING) return Outcome.None;
    if (!allow) {
      this.cool(slot, now);
      return Outcome.Declined;
    }
    if (this.echoing(now) >= 0) {
      this.phase[slot] = IDLE;
      return Outcome.Busy;
    }
    this.grant(slot, now);
    return Outcome.Grant;
  }

  /** The asker in `slot` sent "stop" (its probe is over, or it changed its mind). */
  cancel(slot: number, now: number): Cancel {
    if (!this.valid(slot)) return Cancel.None;
    this.settle(slot, now);
    if (this.phase[slot] === PENDING) {
      // A prompt shown and taken back at once, again and again, would be a nuisance too.
      this.cool(slot, now);
      return Cancel.Withdrawn;
    }
    if (this.phase[slot] === GRANTED) {
      this.phase[slot] = IDLE;
      return Cancel.Stop;
    }
    return Cancel.None;
  }

  /** Our user stops the echo of the asker in `slot` (Stop, or muting them). True if one ran. */
  stop(slot: number, now: number): boolean {
    if (!this.valid(slot)) return false;
    this.settle(slot, now);
    if (this.phase[slot] !== GRANTED) return false;
    this.cool(slot, now);
    return true;
  }

  /**
   * Moves time on: a prompt unanswered for ANSWER_TIMEOUT_MS counts as declined (`unanswered` is
   * called with its slot: tell the asker, take the prompt down); ended echoes and cooldowns go.
   */
  tick(now: number, unanswered: (slot: number) => void): void {
    for (let slot = 0; slot < this.maxPeers; slot++) {
      if (this.phase[slot] === PENDING && now - this.at[slot] >= ANSWER_TIMEOUT_MS) {
        this.cool(slot, now);
        unanswered(slot);
      } else {
        this.settle(slot, now);
      }
    }
  }

  /** The asker in `slot` is gone. True if its prompt was pending (take it down). */
  remove(slot: number): boolean {
    if (!this.valid(slot)) return false;
    const pending = this.phase[slot] === PENDING;
    this.phase[slot] = IDLE;
    return pending;
  }

  /** The slot whose echo runs at `now`, or -1. */
  echoing(now: number): number {
    for (let slot = 0; slot < this.maxPeers; slot++) {
      if (this.phase[slot] === GRANTED && now < this.at[slot]) return slot;
    }
    return -1;
  }

  /** Whether a prompt of the asker in `slot` waits for an answer. */
  pending(slot: number): boolean {
    return this.valid(slot) && this.phase[slot] === PENDING;
  }

  /** The length of the echo last asked for or granted to `slot`, ms. */
  grantedMs(slot: number): number {
    return this.valid(slot) ? this.ms[slot] : 0;
  }

  private grant(slot: number, now: number): void {
    this.phase[slot] = GRANTED;
    this.at[slot] = now + this.ms[slot];
  }

  private cool(slot: number, now: number): void {
    this.phase[slot] = COOLDOWN;
    this.at[slot] = now + COOLDOWN_MS;
  }

  /** An echo whose time is up, or a cooldown that is over, is idle again. */
  private settle(slot: number, now: number): void {
    const p = this.phase[slot];
    if ((p === GRANTED || p === COOLDOWN) && now >= this.at[slot]) this.phase[slot] = IDLE;
  }

  private valid(slot: number): boolean {
    return Number.isInteger(slot) && slot >= 0 && slot < this.maxPeers;
  }
}
