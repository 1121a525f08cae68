// The NTP-style clock estimator (app/src/net/clock.ts) against synthetic exchanges whose offset
// and delays are known: the answer, its error bound, the min-RTT filter, and the wire format.
import { describe, expect, it } from 'vitest';
import {
  BURST,
  BURST_EVERY_MS,
  CTL_ECHO,
  CTL_ECHO_REPLY,
  CTL_PING,
  CTL_PONG,
  ClockEstimator,
  ECHO_ALLOWED,
  ECHO_LEN,
  ECHO_REPLY_LEN,
  ECHO_STOPPED,
  MAX_ECHO_MS,
  PING_EVERY_MS,
  PING_LEN,
  PONG_LEN,
  SAMPLES,
  newControlMessage,
  nextPingAt,
  parseControl,
  writeEcho,
  writeEchoReply,
  writePing,
  writePong,
} from '../../app/src/net/clock';

/** Our wall clock at the first ping, µs since 1970 (late 2026). */
const T0 = 1_795_000_000_000_000;

/**
 * One exchange as a peer whose clock is `theta` µs BEHIND ours would produce it: we send at
 * `t1` (our clock), the ping takes `dOut`, the peer holds it `hold`, the pong takes `dBack`.
 */
function exchange(theta: number, t1: number, dOut: number, hold: number, dBack: number) {
  const t2 = t1 + dOut - theta; // the peer's clock reads ours − theta
  const t3 = t2 + hold;
  const t4 = t3 + theta + dBack;
  return { t1, t2, t3, t4 };
}

function add(c: ClockEstimator, e: ReturnType<typeof exchange>): boolean {
  return c.add(e.t1, e.t2, e.t3, e.t4);
}

/** Doubles near T0 are 0.25 µs apart: sums of a few such times are good to about a µs. */
const F64_US = 1;

/** A seeded generator (mulberry32): the same sequence every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('clock estimator', () => {
  it('has no estimate before the first exchange', () => {
    const c = new ClockEstimator();
    expect(c.offsetUs()).toBeNaN();
    expect(c.medianRttUs()).toBeNaN();
    expect(c.minRttUs()).toBeNaN();
  });

  it('finds a known offset exactly on a symmetric path, with the sign ours − theirs', () => {
    const c = new ClockEstimator();
    // Ours is 3.2 ms ahead of theirs: the offset is +3200 µs.
    const e = exchange(3200, T0, 400, 50, 400);
    expect(c.add(e.t1, e.t2, e.t3, e.t4)).toBe(true);
    expect(c.offsetUs()).toBeCloseTo(3200, 6);
    expect(c.minRttUs()).toBeCloseTo(800, 6);
    // The other side of the same exchange sees the opposite sign.
    const d = new ClockEstimator();
    const back = exchange(-3200, T0 - 3200, 400, 50, 400);
    d.add(back.t1, back.t2, back.t3, back.t4);
    expect(d.offsetUs()).toBeCloseTo(-3200, 6);
  });

  it('stays within RTT/2 of the offset on asymmetric paths, and is off by the asymmetry / 2', () => {
    const rand = rng(7);
    for (let k = 0; k < 200; k++) {
      const theta = 3200;
      const dOut = 100 + rand() * 20_000;
      const dBack = 100 + rand() * 20_000;
      const e = exchange(theta, T0 + k * 1e6, dOut, rand() * 500, dBack);
      const c = new ClockEstimator();
      c.add(e.t1, e.t2, e.t3, e.t4);
      const err = c.offsetUs() - theta;
      expect(Math.abs(err - (dBack - dOut) / 2)).toBeLessThan(F64_US);
      expect(Math.abs(err)).toBeLessThanOrEqual(c.minRttUs() / 2 + F64_US);
      expect(Math.abs(c.minRttUs() - (dOut + dBack))).toBeLessThan(F64_US);
    }
  });

  it('takes the offset of the minimum-RTT sample and ignores a delayed one', () => {
    const c = new ClockEstimator();
    const theta = 3200;
    // Mostly 1 ms each way, one very lopsided exchange (30 ms queued on the way back), one
    // tight symmetric exchange that must win.
    add(c, exchange(theta, T0, 1000, 20, 1000));
    add(c, exchange(theta, T0 + 1e6, 1000, 20, 31_000));
    add(c, exchange(theta, T0 + 2e6, 300, 20, 300));
    add(c, exchange(theta, T0 + 3e6, 1200, 20, 800));
    expect(c.offsetUs()).toBeCloseTo(theta, 6);
    expect(c.minRttUs()).toBeCloseTo(600, 6);
    // Median of 2000, 32000, 600, 2000 → (2000 + 2000) / 2.
    expect(c.medianRttUs()).toBeCloseTo(2000, 6);
  });

  it('keeps only the last SAMPLES exchanges', () => {
    const c = new ClockEstimator();
    const theta = -1500;
    // A tight exchange, then SAMPLES looser ones: the tight one falls out of the window.
    const tight = exchange(theta, T0, 100, 0, 100);
    c.add(tight.t1, tight.t2, tight.t3, tight.t4);
    for (let k = 1; k <= SAMPLES; k++) {
      const e = exchange(theta, T0 + k * 1e6, 1000 + k, 0, 3000);
      c.add(e.t1, e.t2, e.t3, e.t4);
    }
    expect(c.samples).toBe(SAMPLES);
    expect(c.minRttUs()).toBeCloseTo(4001, 6);
    // Its offset carries that exchange's asymmetry: (3000 − 1001) / 2 on top of theta.
    expect(c.offsetUs()).toBeCloseTo(theta + (3000 - 1001) / 2, 6);
    expect(c.medianRttUs()).toBeCloseTo(4000 + (SAMPLES + 1) / 2, 6);
  });

  it('refuses impossible exchanges and counts them', () => {
    const c = new ClockEstimator();
    expect(c.add(T0, T0, T0 + 10, T0 + 5)).toBe(false); // negative RTT
    expect(c.add(T0, T0 + 10, T0, T0 + 100)).toBe(false); // answered before it arrived
    expect(c.add(T0, NaN, T0, T0 + 100)).toBe(false);
    expect(c.add(T0, T0, T0, T0 + 60e6)).toBe(false); // a minute's round trip: stale
    expect(c.refused).toBe(4);
    expect(c.samples).toBe(0);
    expect(c.offsetUs()).toBeNaN();
  });
});

describe('control messages', () => {
  it('round-trips a ping and a pong through their byte layout', () => {
    const ping = new DataView(new ArrayBuffer(PING_LEN));
    writePing(ping, T0 + 0.25);
    expect([...new Uint8Array(ping.buffer, 0, 8)]).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(ping.getFloat64(8, true)).toBe(T0 + 0.25);
    const m = newControlMessage();
    expect(parseControl(ping, m)).toBe(true);
    expect(m.type).toBe(CTL_PING);
    expect(m.t1).toBe(T0 + 0.25);

    const pong = new DataView(new ArrayBuffer(PONG_LEN));
    writePong(pong, T0, T0 + 100.5, T0 + 130.75);
    expect(pong.getUint8(0)).toBe(2);
    expect(parseControl(pong, m)).toBe(true);
    expect(m).toEqual({ type: CTL_PONG, t1: T0, t2: T0 + 100.5, t3: T0 + 130.75, ms: 0, answer: 0 });

    const echo = new DataView(new ArrayBuffer(ECHO_LEN));
    writeEcho(echo, 8000);
    expect([...new Uint8Array(echo.buffer, 0, 8)]).toEqual([3, 0, 0, 0, 0, 0, 0, 0]);
    expect(parseControl(echo, m)).toBe(true);
    expect(m.type).toBe(CTL_ECHO);
    expect(m.ms).toBe(8000);
    writeEcho(echo, 0);
    expect(parseControl(echo, m)).toBe(true);
    expect(m.ms).toBe(0);
  });

  it('round-trips an echo reply through its byte layout and rejects a bad one', () => {
    const reply = new DataView(new ArrayBuffer(ECHO_REPLY_LEN));
    writeEchoReply(reply, ECHO_STOPPED);
    expect([...new Uint8Array(reply.buffer)]).toEqual([4, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0]);
    const m = newControlMessage();
    expect(parseControl(reply, m)).toBe(true);
    expect([m.type, m.answer]).toEqual([CTL_ECHO_REPLY, ECHO_STOPPED]);
    for (const answer of [0, ECHO_STOPPED + 1, 0xffffffff]) {
      writeEchoReply(reply, answer);
      expect(parseControl(reply, m)).toBe(false);
      expect(m.type).toBe(0);
    }
    writeEchoReply(reply, ECHO_ALLOWED);
    reply.setUint8(12, 1);
    expect(parseControl(reply, m)).toBe(false);
    const long = new DataView(new ArrayBuffer(ECHO_REPLY_LEN + 4));
    writeEchoReply(long, ECHO_ALLOWED);
    expect(parseControl(long, m)).toBe(false);
  });

  it('rejects echo requests that are not a whole number of ms in 0..MAX_ECHO_MS', () => {
    const m = newControlMessage();
    for (const ms of [-1, 0.5, MAX_ECHO_MS + 1, NaN, Infinity]) {
      const echo = new DataView(new ArrayBuffer(ECHO_LEN));
      writeEcho(echo, ms);
      expect(parseControl(echo, m)).toBe(false);
      expect(m.type).toBe(0);
    }
    const long = new DataView(new ArrayBuffer(ECHO_LEN + 8));
    writeEcho(long, 100);
    expect(parseControl(long, m)).toBe(false);
  });

  it('rejects malformed messages', () => {
    const m = newControlMessage();
    const bad: DataView[] = [];
    bad.push(new DataView(new ArrayBuffer(0)));
    bad.push(new DataView(new ArrayBuffer(7)));
    const ping = (): DataView => {
      const v = new DataView(new ArrayBuffer(PING_LEN));
      writePing(v, T0);
      return v;
    };
    const pong = (t1 = T0, t2 = T0 + 1, t3 = T0 + 2): DataView => {
      const v = new DataView(new ArrayBuffer(PONG_LEN));
      writePong(v, t1, t2, t3);
      return v;
    };
    // Unknown type.
    const unknown = ping();
    unknown.setUint8(0, 9);
    bad.push(unknown);
    // Reserved byte set.
    const reserved = ping();
    reserved.setUint8(5, 1);
    bad.push(reserved);
    // A ping of a pong's length, a pong of a ping's length, a trailing byte.
    const longPing = new DataView(new ArrayBuffer(PONG_LEN));
    writePing(longPing, T0);
    bad.push(longPing);
    const shortPong = new DataView(new ArrayBuffer(PING_LEN));
    shortPong.setUint8(0, CTL_PONG);
    shortPong.setFloat64(8, T0, true);
    bad.push(shortPong);
    const trailing = new DataView(new ArrayBuffer(PING_LEN + 1));
    writePing(trailing, T0);
    bad.push(trailing);
    // Times that are not finite positive numbers, or a pong answered before it arrived.
    const nanPing = ping();
    nanPing.setFloat64(8, NaN, true);
    bad.push(nanPing);
    bad.push(pong(T0, -1, T0));
    bad.push(pong(T0, T0, Infinity));
    bad.push(pong(T0, T0 + 10, T0 + 5));
    for (const v of bad) {
      expect(parseControl(v, m)).toBe(false);
      expect(m.type).toBe(0);
    }
    expect(parseControl(pong(), m)).toBe(true);
  });
});

describe('ping schedule', () => {
  it('pings at once, then a burst BURST_EVERY_MS apart, then every PING_EVERY_MS', () => {
    expect(nextPingAt(0, 0)).toBe(-Infinity);
    let t = 0;
    let sent = 0;
    const times: number[] = [];
    for (let now = 0; now <= 5000; now += 10) {
      if (now >= nextPingAt(sent, t)) {
        times.push(now);
        sent++;
        t = now;
      }
    }
    const burst = Array.from({ length: BURST }, (_, i) => i * BURST_EVERY_MS);
    expect(times.slice(0, BURST)).toEqual(burst);
    const after = times.slice(BURST);
    expect(after[0]).toBe(burst[BURST - 1] + PING_EVERY_MS);
    for (let i = 1; i < after.length; i++) expect(after[i] - after[i - 1]).toBe(PING_EVERY_MS);
  });
});
