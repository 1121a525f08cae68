// The packet pump's control channels (clock.ts's messages), one per link beside its audio
// channel: the pump answers the peer's pings at once and pings the peer itself (a burst when the
// link opens, then once a second), so that the clock offset and RTT it publishes in the net stats
// block are measured where the audio goes, on the pump's thread.
//
// The same channel carries echo requests (a peer measuring its round trip to us) and their
// replies. A request is never applied on its own: the consent policy (echo-consent.ts) decides,
// the host is told (`onEcho`: the session shows the user who asks and what it does), and only the
// user's yes (answerEcho) makes the pump tell the engine (`echoToEngine`: the engine's TAG_ECHO
// record, written by pump.ts, the only producer of the inbound ring); a no, or no answer within
// the bound, goes back to the asker as an echo reply. The user can stop the echo at any time
// (stopEcho). Ours go out with requestEcho(), and their replies come to `onEcho`.
//
// Each message goes out from a buffer of its own made once; nothing is allocated per message
// besides the DataView over a received one.

import {
  CTL_ECHO,
  CTL_ECHO_REPLY,
  CTL_PING,
  CTL_PONG,
  ClockEstimator,
  ECHO_ALLOWED,
  ECHO_BUSY,
  ECHO_DECLINED,
  ECHO_LEN,
  ECHO_REPLY_LEN,
  ECHO_STOPPED,
  ECHO_UNANSWERED,
  MAX_ECHO_MS,
  PING_LEN,
  PONG_LEN,
  newControlMessage,
  nextPingAt,
  parseControl,
  writeEcho,
  writeEchoReply,
  writePing,
  writePong,
} from './clock';
import { Cancel, EchoConsent, Outcome, Verdict } from './echo-consent';
import {
  NP_CTL_BAD,
  NP_ECHO_DROPPED,
  NP_EXCHANGES,
  NP_OFFSET_US,
  NP_PINGS,
  NP_RTT_MIN_MS,
  NP_RTT_MS,
} from './net-stats';

/** What the pump tells its host about round-trip echoes (see the header). */
export type EchoEvent =
  /** The peer in `slot` asks us to echo its stream for `ms` ms: ask our user (answerEcho). */
  | { type: 'echo-request'; slot: number; ms: number }
  /** Its prompt is gone: the asker withdrew, it went unanswered, or the peer left. */
  | { type: 'echo-withdrawn'; slot: number }
  /** The peer in `slot` answered our request (ECHO_ALLOWED..ECHO_STOPPED, clock.ts). */
  | { type: 'echo-reply'; slot: number; answer: number };

/** One peer as the pump serves it: its audio channel and, if it has one, its control channel. */
export interface Link {
  slot: number;
  channel: RTCDataChannel;
  control: RTCDataChannel | null;
  /** Where the peer's figures start in the net stats block. */
  base: number;
  clock: ClockEstimator;
  /** bufferedAmount when the current pass over the outbound ring began (-1: not read yet). */
  queuedAtPass: number;
  /** Tests only (PacketPump.holdSend): the channel is taken to hold HELD_SEND_BYTES forever. */
  held: boolean;
  pingsSent: number;
  /** performance.now() of the last ping. */
  lastPingMs: number;
}

/** The control side of the pump's links (see the header). */
export class ControlChannels {
  /** Control messages out (one at a time: each is sent before the next is written). */
  private readonly pingBuf = new ArrayBuffer(PING_LEN);
  private readonly pingView = new DataView(this.pingBuf);
  private readonly pongBuf = new ArrayBuffer(PONG_LEN);
  private readonly pongView = new DataView(this.pongBuf);
  private readonly echoBuf = new ArrayBuffer(ECHO_LEN);
  private readonly echoView = new DataView(this.echoBuf);
  private readonly replyBuf = new ArrayBuffer(ECHO_REPLY_LEN);
  private readonly replyView = new DataView(this.replyBuf);
  private readonly consent: EchoConsent;
  private readonly ctlIn = newControlMessage();
  private readonly timeOrigin = performance.timeOrigin;

  constructor(
    /** The pump's links by slot (the pump adds and removes them). */
    private readonly links: readonly (Link | null)[],
    /** The net stats block. */
    private readonly stats: Float64Array,
    /** Round-trip requests to show our user, and answers to ours. */
    private readonly onEcho: (ev: EchoEvent) => void,
    /** Has the engine echo the peer in `slot` for `ms` ms (0: stop). */
    private readonly echoToEngine: (slot: number, ms: number) => void,
  ) {
    this.consent = new EchoConsent(links.length);
  }

  /** Answers the peer's pings and takes our pings' answers as clock samples. */
  serve(link: Link, control: RTCDataChannel): void {
    const s = this.stats;
    const base = link.base;
    const origin = this.timeOrigin;
    const msg = this.ctlIn;
    control.binaryType = 'arraybuffer';
    control.onmessage = (ev: MessageEvent) => {
      // The receive time first: everything after it counts as the peer's processing time.
      const tIn = (origin + performance.now()) * 1000;
      const data = ev.data;
      if (!(data instanceof ArrayBuffer) || !parseControl(new DataView(data), msg)) {
        s[base + NP_CTL_BAD]++;
        return;
      }
      if (msg.type === CTL_PING) {
        writePong(this.pongView, msg.t1, tIn, (origin + performance.now()) * 1000);
        this.send(link, this.pongBuf);
      } else if (msg.type === CTL_PONG) {
        if (!link.clock.add(msg.t1, msg.t2, msg.t3, tIn)) {
          s[base + NP_CTL_BAD]++;
          return;
        }
        s[base + NP_EXCHANGES]++;
        s[base + NP_RTT_MS] = link.clock.medianRttUs() / 1000;
        s[base + NP_RTT_MIN_MS] = link.clock.minRttUs() / 1000;
        s[base + NP_OFFSET_US] = link.clock.offsetUs();
      } else if (msg.type === CTL_ECHO) {
        this.echoRequested(link, msg.ms);
      } else if (msg.type === CTL_ECHO_REPLY) {
        this.onEcho({ type: 'echo-reply', slot: link.slot, answer: msg.answer });
      }
    };
    control.onopen = () => this.tick();
  }

  /** The peer in `slot` leaves: the engine drops its echo with it; a prompt for it goes too. */
  remove(slot: number): void {
    if (this.consent.remove(slot)) this.onEcho({ type: 'echo-withdrawn', slot });
  }

  /** A peer's echo request (ms > 0) or its "stop" (0), through the consent policy. */
  private echoRequested(link: Link, ms: number): void {
    const now = performance.now();
    const slot = link.slot;
    if (ms === 0) {
      const c = this.consent.cancel(slot, now);
      if (c === Cancel.Withdrawn) this.onEcho({ type: 'echo-withdrawn', slot });
      else if (c === Cancel.Stop) this.echoToEngine(slot, 0);
      return;
    }
    switch (this.consent.request(slot, ms, now)) {
      case Verdict.Drop:
        this.stats[link.base + NP_ECHO_DROPPED]++;
        break;
      case Verdict.Ask:
        this.onEcho({ type: 'echo-request', slot, ms });
        break;
      case Verdict.Grant:
        this.echoToEngine(slot, ms);
        this.reply(slot, ECHO_ALLOWED);
        break;
      case Verdict.Busy:
        this.reply(slot, ECHO_BUSY);
        break;
    }
  }

  /** Our user's answer to the round-trip request of the peer in `slot` (PacketPump.answerEcho). */
  answerEcho(slot: number, allow: boolean): void {
    switch (this.consent.answer(slot, allow, performance.now())) {
      case Outcome.Grant:
        this.echoToEngine(slot, this.consent.grantedMs(slot));
        this.reply(slot, ECHO_ALLOWED);
        break;
      case Outcome.Declined:
        this.reply(slot, ECHO_DECLINED);
        break;
      case Outcome.Busy:
        this.reply(slot, ECHO_BUSY);
        break;
    }
  }

  /** Our user stops the echo of the peer in `slot` (if one runs); the peer is told. */
  stopEcho(slot: number): void {
    if (!this.consent.stop(slot, performance.now())) return;
    this.echoToEngine(slot, 0);
    this.reply(slot, ECHO_STOPPED);
  }

  /** "Allow round-trip requests without asking", for this session (off by default). */
  setEchoAutoAllow(on: boolean): void {
    this.consent.autoAllow = on;
  }

  /** A prompt went unanswered for too long: the asker is told, the prompt goes. */
  private readonly unanswered = (slot: number): void => {
    this.reply(slot, ECHO_UNANSWERED);
    this.onEcho({ type: 'echo-withdrawn', slot });
  };

  private reply(slot: number, answer: number): void {
    const link = this.links[slot];
    if (!link) return;
    writeEchoReply(this.replyView, answer);
    this.send(link, this.replyBuf);
  }

  /** The pings that are due, and round-trip prompts nobody answered (PacketPump.tickClock). */
  tick(nowMs = performance.now()): void {
    this.consent.tick(nowMs, this.unanswered);
    for (let slot = 0; slot < this.links.length; slot++) {
      const link = this.links[slot];
      if (!link || !link.control || link.control.readyState !== 'open') continue;
      if (nowMs < nextPingAt(link.pingsSent, link.lastPingMs)) continue;
      writePing(this.pingView, (this.timeOrigin + performance.now()) * 1000);
      link.pingsSent++;
      link.lastPingMs = nowMs;
      if (this.send(link, this.pingBuf)) this.stats[link.base + NP_PINGS]++;
    }
  }

  /** Asks the peer in `slot` to echo our stream (PacketPump.requestEcho). */
  requestEcho(slot: number, ms: number): boolean {
    const link = this.links[slot];
    if (!link) return false;
    writeEcho(this.echoView, Math.max(0, Math.min(MAX_ECHO_MS, Math.round(ms) || 0)));
    return this.send(link, this.echoBuf);
  }

  private send(link: Link, buf: ArrayBuffer): boolean {
    const ch = link.control;
    if (!ch || ch.readyState !== 'open') return false;
    try {
      ch.send(buf);
      return true;
    } catch {
      // Closed between its close event and now: the exchange is simply lost.
      return false;
    }
  }
}
