// Clock offset and round-trip time to a peer, NTP-style, over the control data channel.
//
// Each side pings the other on its own: a ping carries t1, the sender's wall clock at sending;
// the peer answers at once with a pong carrying t1 back, t2 (its wall clock when the ping
// arrived) and t3 (its wall clock when it sends the pong); t4 is our wall clock when the pong
// arrives. All four are µs since 1970 (wallUs()).
//
//   RTT    = (t4 − t1) − (t3 − t2)              the time on the wire, both ways
//   offset = ((t1 − t2) + (t4 − t3)) / 2       OUR clock minus THEIR clock
//
// Why that sign: with θ = ours − theirs and one-way delays d_out (to them) and d_back,
// t2 = t1 + d_out − θ and t4 = t3 + θ + d_back, so offset = θ + (d_back − d_out) / 2: exact when
// the path is symmetric, and never off by more than RTT / 2 however asymmetric it is. Hence the
// classic filter: of the last SAMPLES exchanges, the one with the smallest RTT has the tightest
// bound, and its offset is the estimate. The RTT reported beside it is the median of the window
// (what the path usually takes), the minimum being its best case.
//
// Wire format of a control message (little-endian), one per data-channel message:
//
//   byte 0      type: 1 = ping, 2 = pong, 3 = echo request, 4 = echo reply
//   bytes 1..7  reserved, zero
//   ping: bytes 8..16  t1 (f64)                                        16 bytes in all
//   pong: bytes 8..16  t1, 16..24 t2, 24..32 t3 (f64 each)             32 bytes in all
//   echo request: bytes 8..16  ms (f64, a whole number 0..MAX_ECHO_MS;  16 bytes in all
//                 0: stop)
//   echo reply:   bytes 8..12  answer (u32, ECHO_ALLOWED..ECHO_STOPPED), 16 bytes in all
//                 bytes 12..16 reserved, zero
//
// The echo messages carry a round-trip request (pump.ts, echo-consent.ts): "send my stream back
// to me for ms milliseconds", and the asked peer's answer once its user decided (or did not).
//
// A message of any other length or type, with reserved bytes set or a time that is not a finite
// positive number, is malformed: parseControl says so and the caller counts and drops it.
//
// Pure: the caller owns the channel and the timers and passes the times in. Nothing here
// allocates after construction.

export const CTL_PING = 1;
export const CTL_PONG = 2;
/** Echo request: "send my stream back to me for `ms` milliseconds" (0: stop); see pump.ts. */
export const CTL_ECHO = 3;
/** The asked peer's answer to an echo request. */
export const CTL_ECHO_REPLY = 4;
export const PING_LEN = 16;
export const PONG_LEN = 32;
export const ECHO_LEN = 16;
export const ECHO_REPLY_LEN = 16;
/** Echo replies: the user allowed it (the echo runs from now), declined it, did not answer in
 * time; the peer echoes someone else already; the user stopped an echo that was running. */
export const ECHO_ALLOWED = 1;
export const ECHO_DECLINED = 2;
export const ECHO_UNANSWERED = 3;
export const ECHO_BUSY = 4;
export const ECHO_STOPPED = 5;
/** Longest echo one request asks for, ms (the engine's MAX_ECHO_MS). */
export const MAX_ECHO_MS = 10_000;
/** Samples the estimator keeps (at one ping a second, the last 16 s). */
export const SAMPLES = 16;
/** Pings sent BURST_EVERY_MS apart right after a link opens, so the offset is known at once. */
export const BURST = 5;
export const BURST_EVERY_MS = 100;
/** Pings after the burst, one per PING_EVERY_MS. */
export const PING_EVERY_MS = 1000;
/** An exchange claiming a longer round trip than this is refused (a stale or forged pong). */
export const MAX_RTT_US = 10_000_000;

/** The wall clock in µs since 1970, with the high-resolution timer's precision (a float). */
export function wallUs(): number {
  return (performance.timeOrigin + performance.now()) * 1000;
}

/** What parseControl found: reused across calls (no allocation per message). */
export interface ControlMessage {
  type: typeof CTL_PING | typeof CTL_PONG | typeof CTL_ECHO | typeof CTL_ECHO_REPLY | 0;
  t1: number;
  t2: number;
  t3: number;
  /** CTL_ECHO: how long to echo, ms (0..MAX_ECHO_MS). */
  ms: number;
  /** CTL_ECHO_REPLY: ECHO_ALLOWED..ECHO_STOPPED. */
  answer: number;
}

export function newControlMessage(): ControlMessage {
  return { type: 0, t1: 0, t2: 0, t3: 0, ms: 0, answer: 0 };
}

function goodTime(t: number): boolean {
  return Number.isFinite(t) && t > 0;
}

/**
 * Reads a control message into `out`; returns false (and leaves out.type 0) when it is malformed.
 * `data` is the whole message.
 */
export function parseControl(data: DataView, out: ControlMessage): boolean {
  out.type = 0;
  const n = data.byteLength;
  if (n < 8) return false;
  for (let i = 1; i < 8; i++) if (data.getUint8(i) !== 0) return false;
  const type = data.getUint8(0);
  if (type === CTL_PING && n === PING_LEN) {
    const t1 = data.getFloat64(8, true);
    if (!goodTime(t1)) return false;
    out.t1 = t1;
    out.type = CTL_PING;
    return true;
  }
  if (type === CTL_PONG && n === PONG_LEN) {
    const t1 = data.getFloat64(8, true);
    const t2 = data.getFloat64(16, true);
    const t3 = data.getFloat64(24, true);
    if (!goodTime(t1) || !goodTime(t2) || !goodTime(t3) || t3 < t2) return false;
    out.t1 = t1;
    out.t2 = t2;
    out.t3 = t3;
    out.type = CTL_PONG;
    return true;
  }
  if (type === CTL_ECHO && n === ECHO_LEN) {
    const ms = data.getFloat64(8, true);
    if (!Number.isInteger(ms) || ms < 0 || ms > MAX_ECHO_MS) return false;
    out.ms = ms;
    out.type = CTL_ECHO;
    return true;
  }
  if (type === CTL_ECHO_REPLY && n === ECHO_REPLY_LEN) {
    const answer = data.getUint32(8, true);
    if (answer < ECHO_ALLOWED || answer > ECHO_STOPPED || data.getUint32(12, true) !== 0) return false;
    out.answer = answer;
    out.type = CTL_ECHO_REPLY;
    return true;
  }
  return false;
}

/** Writes an echo reply into `out` (ECHO_REPLY_LEN bytes). */
export function writeEchoReply(out: DataView, answer: number): void {
  out.setUint32(0, CTL_ECHO_REPLY, true);
  out.setUint32(4, 0, true);
  out.setUint32(8, answer, true);
  out.setUint32(12, 0, true);
}

/** Writes an echo request into `out` (ECHO_LEN bytes). */
export function writeEcho(out: DataView, ms: number): void {
  out.setUint32(0, CTL_ECHO, true);
  out.setUint32(4, 0, true);
  out.setFloat64(8, ms, true);
}

/** Writes a ping into `out` (PING_LEN bytes). */
export function writePing(out: DataView, t1: number): void {
  out.setUint32(0, CTL_PING, true);
  out.setUint32(4, 0, true);
  out.setFloat64(8, t1, true);
}

/** Writes a pong into `out` (PONG_LEN bytes). */
export function writePong(out: DataView, t1: number, t2: number, t3: number): void {
  out.setUint32(0, CTL_PONG, true);
  out.setUint32(4, 0, true);
  out.setFloat64(8, t1, true);
  out.setFloat64(16, t2, true);
  out.setFloat64(24, t3, true);
}

/** The estimate for one peer, from its last SAMPLES exchanges. */
export class ClockEstimator {
  private readonly rtts = new Float64Array(SAMPLES);
  private readonly offsets = new Float64Array(SAMPLES);
  private readonly sorted = new Float64Array(SAMPLES);
  private next = 0;
  private count = 0;
  /** Exchanges refused: negative or absurd RTT, or times that are not numbers. */
  refused = 0;
  /** Exchanges taken. */
  accepted = 0;

  /**
   * Takes one exchange (times as in the header comment, µs). Returns false, counting it as
   * refused, when it cannot be a real exchange.
   */
  add(t1: number, t2: number, t3: number, t4: number): boolean {
    const rtt = t4 - t1 - (t3 - t2);
    const offset = (t1 - t2 + (t4 - t3)) / 2;
    if (!Number.isFinite(rtt) || !Number.isFinite(offset) || rtt < 0 || rtt > MAX_RTT_US || t3 < t2) {
      this.refused++;
      return false;
    }
    this.rtts[this.next] = rtt;
    this.offsets[this.next] = offset;
    this.next = (this.next + 1) % SAMPLES;
    if (this.count < SAMPLES) this.count++;
    this.accepted++;
    return true;
  }

  /** Samples in the window. */
  get samples(): number {
    return this.count;
  }

  /** Our clock − the peer's, µs: the offset of the window's minimum-RTT sample; NaN if none. */
  offsetUs(): number {
    const i = this.bestIndex();
    return i < 0 ? NaN : this.offsets[i];
  }

  /** The window's smallest RTT, µs (the bound of the offset's error is half of it); NaN if none. */
  minRttUs(): number {
    const i = this.bestIndex();
    return i < 0 ? NaN : this.rtts[i];
  }

  /** The window's median RTT, µs (the mean of the middle two for an even count); NaN if none. */
  medianRttUs(): number {
    const n = this.count;
    if (n === 0) return NaN;
    const s = this.sorted;
    for (let i = 0; i < n; i++) s[i] = this.rtts[i];
    // Insertion sort of at most SAMPLES values: no allocation, no comparator closure.
    for (let i = 1; i < n; i++) {
      const v = s[i];
      let j = i - 1;
      while (j >= 0 && s[j] > v) {
        s[j + 1] = s[j];
        j--;
      }
      s[j + 1] = v;
    }
    return n % 2 === 1 ? s[n >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2;
  }

  reset(): void {
    this.next = 0;
    this.count = 0;
  }

  private bestIndex(): number {
    let best = -1;
    for (let i = 0; i < this.count; i++) if (best < 0 || this.rtts[i] < this.rtts[best]) best = i;
    return best;
  }
}

/** When the next ping is due, ms on the caller's clock, after `sent` pings; the first at once. */
export function nextPingAt(sent: number, lastMs: number): number {
  if (sent === 0) return -Infinity;
  return lastMs + (sent < BURST ? BURST_EVERY_MS : PING_EVERY_MS);
}
