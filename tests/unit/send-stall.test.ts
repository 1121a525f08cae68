// The send-stall decision (app/src/net/send-stall.ts) on known sequences of a link's figures,
// looked at every 500 ms as the mesh does: a queue that drains slowly is not stalled, constant
// bytes with packets waiting for 2 s is, an empty or quiet queue is not.
import { describe, expect, it } from 'vitest';
import { STALL_AFTER_MS, SendStallWatch, type SendSample } from '../../app/src/net/send-stall.ts';

const LIMIT = 64 * 1024;
const STEP_MS = 500;

/** The watch's answers to `samples` taken every STEP_MS from t = 0. */
function answers(samples: Omit<SendSample, 'nowMs'>[]): boolean[] {
  const w = new SendStallWatch();
  return samples.map((s, i) => w.update({ ...s, nowMs: i * STEP_MS }));
}

/** `n` looks at a queue held at `bytes` while the pump skips 187 packets per look. */
function held(n: number, bytes = 66_000, tx = 1000, skipped0 = 0): Omit<SendSample, 'nowMs'>[] {
  return Array.from({ length: n }, (_, i) => ({
    bufferedBytes: bytes,
    txPackets: tx,
    txSkipped: skipped0 + 187 * i,
  }));
}

describe('SendStallWatch', () => {
  it('calls constant bytes with packets waiting a stall once 2 s have passed, not before', () => {
    const got = answers(held(7));
    // Looks at 0, 0.5, ..., 3 s; the queue last made progress at 0 s.
    expect(got).toEqual([false, false, false, false, true, true, true]);
    expect(STALL_AFTER_MS).toBe(2000);
  });

  it('does not call a queue that drains slowly stalled, over the limit or under it', () => {
    // Over the limit, shedding 200 bytes per look while packets are skipped.
    const slow = held(20).map((s, i) => ({ ...s, bufferedBytes: 66_000 - 200 * i }));
    expect(answers(slow).some(Boolean)).toBe(false);
    // Hovering at the limit: the pump hands it a packet now and then (bytes left meanwhile),
    // the queue reads the same at each look.
    const hover = held(20).map((s, i) => ({ ...s, bufferedBytes: LIMIT + 100, txPackets: 1000 + i }));
    expect(answers(hover).some(Boolean)).toBe(false);
  });

  it('does not call an empty queue or a quiet engine stalled', () => {
    const empty = held(20).map((s) => ({ ...s, bufferedBytes: 0 }));
    expect(answers(empty).some(Boolean)).toBe(false);
    // Bytes held but nothing waits: no packet skipped, none sent.
    const quiet = Array.from({ length: 20 }, () => ({ bufferedBytes: 66_000, txPackets: 5, txSkipped: 9 }));
    expect(answers(quiet).some(Boolean)).toBe(false);
  });

  it('starts again when the bytes fall or the counters restart (a new channel)', () => {
    const w = new SendStallWatch();
    const at = (t: number, s: Omit<SendSample, 'nowMs'>) => w.update({ ...s, nowMs: t });
    expect(at(0, { bufferedBytes: 66_000, txPackets: 10, txSkipped: 0 })).toBe(false);
    expect(at(1500, { bufferedBytes: 66_000, txPackets: 10, txSkipped: 300 })).toBe(false);
    // Some bytes left at 1.8 s: the 2 s count starts there.
    expect(at(1800, { bufferedBytes: 65_000, txPackets: 10, txSkipped: 400 })).toBe(false);
    expect(at(3500, { bufferedBytes: 65_000, txPackets: 10, txSkipped: 700 })).toBe(false);
    expect(w.stuckMs(3500)).toBe(1700);
    expect(at(3800, { bufferedBytes: 65_000, txPackets: 10, txSkipped: 800 })).toBe(true);
    // The pump's figures start at 0 for a new channel: not a stall.
    expect(at(4300, { bufferedBytes: 66_000, txPackets: 0, txSkipped: 0 })).toBe(false);
    expect(at(4800, { bufferedBytes: 66_000, txPackets: 0, txSkipped: 90 })).toBe(false);
    w.reset();
    expect(at(9000, { bufferedBytes: 66_000, txPackets: 0, txSkipped: 95 })).toBe(false);
    expect(w.stuckMs(9000)).toBe(0);
  });
});
