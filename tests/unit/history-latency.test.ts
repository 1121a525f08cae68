// Session history with the engine's latency stages: the latest histograms per peer, merged per
// name, stored with the record with a verdict, and validated when read back (old records without
// them still load). Each test gets its own empty IndexedDB (fake-indexeddb).
import { describe, expect, it } from 'vitest';
import type { StageHistogram } from '../../app/src/audio/latency';
import type { ParticipantView, RoomView } from '../../app/src/room/types';
import { participant, roomView } from './views';
import { freshDatabasePerTest, NOTHING_MEASURED, putRaw } from './idb';
import { recentSessions, SessionLog } from '../../app/src/store/history';
import { STAGE_NAME_MAX, STAGES_MAX } from '../../app/src/store/validate';

freshDatabasePerTest();

function view(participants: ParticipantView[]): RoomView {
  return roomView(participants);
}

/** A histogram's summary figures (the bins do not matter to the history). */
function hist(p50: number, p95: number, count: number, min = 0): StageHistogram {
  return {
    edgesMs: [],
    counts: [],
    p50,
    p95,
    p99: p95 + 1,
    max: p95 + 2,
    min,
    mean: p50,
    count,
    rejected: 0,
  };
}

/** What the record keeps of `hist(p50, p95, count)`. */
function kept(p50: number, p95: number, count: number) {
  return { p50, p95, p99: p95 + 1, max: p95 + 2, count };
}

/** Ends a one-participant session whose peer p1 ("Bea") was seen from 1 s to `untilMs`, with
 * `stages` observed once, and returns Bea's summary as read back. */
async function oneSession(
  stages: Record<string, StageHistogram>,
  f: Partial<ParticipantView> = {},
  untilMs = 61_000,
) {
  const log = new SessionLog('band');
  log.observe(view([participant('p1', 'Bea', f)]), 1000);
  log.observe(view([participant('p1', 'Bea', f)]), untilMs);
  log.observeLatency({ p1: stages });
  await log.end(untilMs);
  // Sessions of one test all start at 1 s: find this one by its id.
  const rec = (await recentSessions(100, untilMs + 1000)).find((r) => r.id === log.id);
  return rec!.summary.participants.Bea;
}

describe('history latency stages', () => {
  it('keeps the latest figures per peer and stage; empty stages and absent peers keep theirs', async () => {
    const log = new SessionLog('band');
    log.observe(view([participant('p1', 'Bea'), participant('p2', 'Cy')]), 1000);
    log.observeLatency({
      p1: { jitterWait: hist(8, 12, 100), network: hist(5, 7, 90) },
      p2: { jitterWait: hist(3, 4, 50) },
    });
    // A second later: p1's histograms have grown; its network stage reads empty (e.g. after a
    // reset) and must not erase what was measured; p2 is not listed (it left).
    log.observeLatency({ p1: { jitterWait: hist(9, 14, 200), network: hist(0, 0, 0) } });
    await log.end(2000);
    const [rec] = await recentSessions(5, 3000);
    expect(rec.summary.participants.Bea.stages).toEqual({
      jitterWait: kept(9, 14, 200),
      network: kept(5, 7, 90),
    });
    expect(rec.summary.participants.Cy.stages).toEqual({ jitterWait: kept(3, 4, 50) });
  });

  it('round-trips every stage present, whatever its name, with the mean RTT', async () => {
    const stages = {
      mouthToEar: hist(24, 31, 1000),
      jitterWait: hist(8, 12, 1000),
      network: hist(6, 9, 990),
      delivery: hist(1.5, 2.5, 1000),
      sendQueue: hist(0.2, 0.4, 1000),
      transit: hist(5, 8, 990),
      somethingNew: hist(2, 3, 10),
    };
    const log = new SessionLog('band');
    log.observe(view([participant('p1', 'Bea', { rttMs: 10 })]), 1000);
    log.observe(view([participant('p1', 'Bea', { rttMs: 14 })]), 2000);
    // Not connected: its RTT is not sampled, as with the buffer figures.
    log.observe(view([participant('p1', 'Bea', { rttMs: 100, link: 'reconnecting' })]), 3000);
    log.observeLatency({ p1: stages, ghost: { network: hist(1, 2, 3) } });
    await log.end(4000);
    const [rec] = await recentSessions(5, 5000);
    const bea = rec.summary.participants.Bea;
    expect(bea.stages).toEqual(
      Object.fromEntries(Object.entries(stages).map(([k, h]) => [k, kept(h.p50, h.p95, h.count)])),
    );
    expect(bea.rttMs).toBe(12);
    // A peer never seen in a view has no name: nothing is kept for it.
    expect(Object.keys(rec.summary.participants)).toEqual(['Bea']);
  });

  it('ignores stage names over 32 characters and keeps at most 16 stages per peer', async () => {
    const stages: Record<string, StageHistogram> = { ['x'.repeat(STAGE_NAME_MAX + 1)]: hist(1, 2, 5) };
    for (let i = 0; i < STAGES_MAX + 4; i++) stages[`s${i}`] = hist(i, i + 1, 5);
    const bea = await oneSession(stages);
    expect(Object.keys(bea.stages ?? {})).toEqual(Array.from({ length: STAGES_MAX }, (_, i) => `s${i}`));
  });

  it('per name, takes each stage from the peer id whose histogram holds more values', async () => {
    const log = new SessionLog('band');
    log.observe(view([participant('p1', 'Bea')]), 1000);
    log.observe(view([participant('p3', 'Bea')]), 2000); // Bea rejoined with a new peer id
    log.observeLatency({
      p1: { jitterWait: hist(8, 12, 300), network: hist(5, 7, 50, 4) },
      p3: { jitterWait: hist(20, 30, 100), network: hist(6, 40, 80, 5) },
    });
    await log.end(3000);
    const [rec] = await recentSessions(5, 4000);
    const bea = rec.summary.participants.Bea;
    expect(bea.stages).toEqual({ jitterWait: kept(8, 12, 300), network: kept(6, 40, 80) });
    // Jitter comes with the network stage taken (p3's: 40 − 5 = 35 ms, poor; p1's would be 3 ms).
    expect(bea.verdict).toBe('poor');
  });
});

describe('history verdict', () => {
  // Thresholds (stats/verdict.ts): one-way ≤ 30 good, ≤ 50 fair; jitter ≤ 10 good, ≤ 25 fair;
  // loss < 0.5 good, < 2 fair; underruns per minute 0 good, ≤ 3 fair.
  const net = (jitterMs: number) => hist(10, 10 + jitterMs, 500, 10);

  it('grades one-way latency from the mouthToEar median and jitter from the network spread', async () => {
    expect((await oneSession({ mouthToEar: hist(30, 45, 500), network: net(10) })).verdict).toBe('good');
    expect((await oneSession({ mouthToEar: hist(31, 45, 500), network: net(10) })).verdict).toBe('fair');
    expect((await oneSession({ mouthToEar: hist(51, 60, 500), network: net(2) })).verdict).toBe('poor');
    expect((await oneSession({ mouthToEar: hist(20, 25, 500), network: net(11) })).verdict).toBe('fair');
    expect((await oneSession({ mouthToEar: hist(20, 25, 500), network: net(26) })).verdict).toBe('poor');
    // Without a mouth-to-ear estimate the latency is not judged.
    expect((await oneSession({ network: net(2), jitterWait: hist(80, 90, 500) })).verdict).toBe('good');
  });

  it('grades the session loss and underruns per minute of presence, counted over at least a minute', async () => {
    expect((await oneSession({ network: net(2) }, { lossPct: 0.5 })).verdict).toBe('fair');
    expect((await oneSession({ network: net(2) }, { lossPct: 2 })).verdict).toBe('poor');
    // Seen from 1 s to 121 s: two minutes.
    expect((await oneSession({ network: net(2) }, { underruns: 6 }, 121_000)).verdict).toBe('fair');
    expect((await oneSession({ network: net(2) }, { underruns: 7 }, 121_000)).verdict).toBe('poor');
    // Ten seconds with 3 underruns is 3 in a minute, not 18.
    expect((await oneSession({ network: net(2) }, { underruns: 3 }, 11_000)).verdict).toBe('fair');
  });

  it('stores null when the network stage was never measured, and nothing without any stages', async () => {
    const bea = await oneSession({ jitterWait: hist(8, 12, 100), network: hist(0, 0, 0) });
    expect(bea.stages).toEqual({ jitterWait: kept(8, 12, 100) });
    expect(bea.verdict).toBeNull();
    const log = new SessionLog('band');
    log.observe(view([participant('p1', 'Cy')]), 1000);
    await log.end(2000);
    // Both sessions started at the same time: pick this one by its id.
    const rec = (await recentSessions(5, 3000)).find((r) => r.id === log.id)!;
    expect(rec.summary.participants.Cy).toEqual(NOTHING_MEASURED);
  });
});

describe('history validation of the later fields', () => {
  const base = { room: 'band', startedAt: 1000, endedAt: 2000, updatedAt: 2000, participants: ['Bea'] };
  const old = { underruns: 2, lossPct: 1, avgBufferMs: 20, maxBufferMs: 30, meanLatencyMs: 25 };

  it('loads a record written before stages, verdict and RTT were kept, as it was', async () => {
    await putRaw('sessions', {
      ...base,
      id: 'old',
      summary: { participants: { Bea: old }, engineUnderruns: 1 },
    });
    const [rec] = await recentSessions(5, 3000);
    expect(rec.summary.participants.Bea).toEqual(old);
    expect(Object.keys(rec.summary.participants.Bea)).toEqual(Object.keys(old));
  });

  it('drops malformed stages, verdicts and RTTs and keeps the good ones', async () => {
    const good = { p50: 8, p95: 12, p99: 13, max: 14, count: 100 };
    const stages: Record<string, unknown> = {
      jitterWait: good,
      nan: { ...good, p50: NaN },
      negative: { ...good, count: -1 },
      infinite: { ...good, max: Infinity },
      text: { ...good, p95: '12' },
      missing: { p50: 1, p95: 2, p99: 3, max: 4 },
      notAnObject: 7,
      ['y'.repeat(STAGE_NAME_MAX + 1)]: good,
      '': good,
      ['z'.repeat(STAGE_NAME_MAX)]: good,
    };
    for (let i = 0; i < STAGES_MAX + 4; i++) stages[`s${i}`] = good;
    const participants = {
      Bea: { ...old, stages, verdict: 'excellent', rttMs: -1 },
      Cy: { ...old, stages: 'fast', verdict: null, rttMs: null },
      Dan: { ...old, stages: [good], verdict: 'fair', rttMs: 12.5 },
      Eve: { ...old, verdict: 3, rttMs: NaN },
    };
    await putRaw('sessions', { ...base, id: 'bad', summary: { participants, engineUnderruns: 0 } });
    const [rec] = await recentSessions(5, 3000);
    const { Bea, Cy, Dan, Eve } = rec.summary.participants;
    const names = [
      'jitterWait',
      'z'.repeat(STAGE_NAME_MAX),
      ...Array.from({ length: STAGES_MAX - 2 }, (_, i) => `s${i}`),
    ];
    expect(Object.keys(Bea.stages ?? {})).toEqual(names);
    expect(Bea.stages?.jitterWait).toEqual(good);
    expect('verdict' in Bea).toBe(false);
    expect('rttMs' in Bea).toBe(false);
    expect(Cy.stages).toEqual({});
    expect(Cy.verdict).toBeNull();
    expect(Cy.rttMs).toBeNull();
    expect(Dan.stages).toEqual({});
    expect(Dan.verdict).toBe('fair');
    expect(Dan.rttMs).toBe(12.5);
    expect(Eve).toEqual(old);
  });
});
