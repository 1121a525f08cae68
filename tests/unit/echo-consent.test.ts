// The round-trip consent policy on virtual time: nothing echoes unasked, one prompt per asker,
// denials and silence cool the asker down, one echo at a time, and a renewal asks again.
import { describe, expect, it } from 'vitest';
import {
  ANSWER_TIMEOUT_MS,
  COOLDOWN_MS,
  Cancel,
  EchoConsent,
  Outcome,
  Verdict,
} from '../../app/src/net/echo-consent';

describe('echo consent', () => {
  it('asks, and echoes only once the user allows it, for the time asked', () => {
    const c = new EchoConsent(4);
    expect(c.request(1, 8000, 0)).toBe(Verdict.Ask);
    expect(c.pending(1)).toBe(true);
    expect(c.echoing(100)).toBe(-1);
    expect(c.answer(1, true, 3000)).toBe(Outcome.Grant);
    expect(c.grantedMs(1)).toBe(8000);
    expect(c.echoing(3000)).toBe(1);
    expect(c.echoing(10_999)).toBe(1);
    expect(c.echoing(11_000)).toBe(-1);
    // A renewal after the echo ended asks again.
    expect(c.request(1, 8000, 11_000)).toBe(Verdict.Ask);
  });

  it('drops repeats while a prompt is pending or its echo runs, and after a denial for the cooldown', () => {
    const c = new EchoConsent(4);
    expect(c.request(2, 5000, 0)).toBe(Verdict.Ask);
    for (let t = 1; t < 50; t++) expect(c.request(2, 5000, t * 100)).toBe(Verdict.Drop);
    expect(c.answer(2, false, 6000)).toBe(Outcome.Declined);
    expect(c.pending(2)).toBe(false);
    expect(c.request(2, 5000, 6000 + COOLDOWN_MS - 1)).toBe(Verdict.Drop);
    expect(c.request(2, 5000, 6000 + COOLDOWN_MS)).toBe(Verdict.Ask);
    expect(c.answer(2, true, 20_000)).toBe(Outcome.Grant);
    expect(c.request(2, 5000, 21_000)).toBe(Verdict.Drop);
    // A second answer to the same prompt changes nothing.
    expect(c.answer(2, false, 21_000)).toBe(Outcome.None);
    expect(c.echoing(21_000)).toBe(2);
  });

  it('counts an unanswered prompt as declined after the timeout', () => {
    const c = new EchoConsent(4);
    const gone: number[] = [];
    c.request(0, 8000, 1000);
    c.tick(1000 + ANSWER_TIMEOUT_MS - 1, (s) => gone.push(s));
    expect(gone).toEqual([]);
    c.tick(1000 + ANSWER_TIMEOUT_MS, (s) => gone.push(s));
    expect(gone).toEqual([0]);
    expect(c.answer(0, true, 1000 + ANSWER_TIMEOUT_MS + 1)).toBe(Outcome.None);
    expect(c.request(0, 8000, 1000 + ANSWER_TIMEOUT_MS + 1)).toBe(Verdict.Drop);
    c.tick(1000 + ANSWER_TIMEOUT_MS + COOLDOWN_MS, (s) => gone.push(s));
    expect(gone).toEqual([0]);
    expect(c.request(0, 8000, 1000 + ANSWER_TIMEOUT_MS + COOLDOWN_MS)).toBe(Verdict.Ask);
  });

  it('lets the user stop an echo at any time, and the asker end or withdraw its own', () => {
    const c = new EchoConsent(4);
    c.request(1, 8000, 0);
    c.answer(1, true, 0);
    expect(c.stop(1, 2000)).toBe(true);
    expect(c.echoing(2000)).toBe(-1);
    expect(c.stop(1, 2000)).toBe(false);
    expect(c.request(1, 8000, 2000 + COOLDOWN_MS - 1)).toBe(Verdict.Drop);

    // The asker's own stop ends the echo; asking again afterwards is fine.
    c.request(3, 8000, 0);
    c.answer(3, true, 0);
    expect(c.cancel(3, 4000)).toBe(Cancel.Stop);
    expect(c.request(3, 8000, 4000)).toBe(Verdict.Ask);
    // A withdrawn prompt goes away, and the asker cools down.
    expect(c.cancel(3, 4100)).toBe(Cancel.Withdrawn);
    expect(c.request(3, 8000, 4200)).toBe(Verdict.Drop);
    expect(c.cancel(3, 4300)).toBe(Cancel.None);
  });

  it('echoes one asker at a time: another is told it is busy', () => {
    const c = new EchoConsent(4);
    c.request(0, 8000, 0);
    c.request(1, 8000, 0);
    expect(c.answer(0, true, 100)).toBe(Outcome.Grant);
    expect(c.answer(1, true, 200)).toBe(Outcome.Busy);
    expect(c.request(2, 8000, 300)).toBe(Verdict.Busy);
    expect(c.request(2, 8000, 8100)).toBe(Verdict.Ask);
  });

  it('allows without asking only when the session says so', () => {
    const c = new EchoConsent(4);
    c.autoAllow = true;
    expect(c.request(1, 3000, 0)).toBe(Verdict.Grant);
    expect(c.echoing(0)).toBe(1);
    expect(c.request(1, 3000, 1000)).toBe(Verdict.Drop);
    expect(c.request(1, 3000, 3000)).toBe(Verdict.Grant);
    c.autoAllow = false;
    expect(c.request(1, 3000, 6000)).toBe(Verdict.Ask);
  });

  it('refuses nonsense and forgets a peer that left', () => {
    const c = new EchoConsent(4);
    for (const slot of [-1, 4, 1.5, NaN]) {
      expect(c.request(slot, 1000, 0)).toBe(Verdict.Drop);
      expect(c.answer(slot, true, 0)).toBe(Outcome.None);
      expect(c.stop(slot, 0)).toBe(false);
      expect(c.cancel(slot, 0)).toBe(Cancel.None);
      expect(c.remove(slot)).toBe(false);
    }
    expect(c.request(0, 0, 0)).toBe(Verdict.Drop);
    expect(c.request(0, NaN, 0)).toBe(Verdict.Drop);
    c.request(0, 1000, 0);
    expect(c.remove(0)).toBe(true);
    expect(c.remove(0)).toBe(false);
    expect(c.request(0, 1000, 1)).toBe(Verdict.Ask);
  });
});
