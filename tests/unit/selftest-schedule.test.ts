// The self-test's injected network schedule against an independent recount of its events: the
// ledger the engine's stats are compared with must describe exactly what the events do.

import { describe, expect, it } from 'vitest';
import {
  BAD_KINDS,
  BLOCK_MS,
  buildSchedule,
  EventKind,
  packetsIn,
  type ScenarioSpec,
} from '../../app/src/selftest/schedule';
import { BAD_INPUT, NETWORK, expectedLevels } from '../../app/src/selftest/scenarios';

/** Recounts a peer's ledger from the events alone, with the engine's definitions. */
function recount(spec: ScenarioSpec, slot: number) {
  const peer = spec.peers.find((p) => p.slot === slot)!;
  const events = buildSchedule(spec).events.filter((e) => e.kind !== EventKind.Bad && e.slot === slot);
  const seen = new Set<number>();
  let duplicates = 0;
  let late = 0;
  for (const e of events) {
    if (seen.has(e.index)) duplicates++;
    else seen.add(e.index);
    if (e.kind === EventKind.Late) {
      late++;
      // Far beyond the buffer: at least lateDelayMs after the packet was due.
      expect(e.at - (peer.offsetMs + e.index * BLOCK_MS)).toBeGreaterThanOrEqual(spec.net.lateDelayMs);
    }
  }
  const indices = [...seen];
  const lowest = Math.min(...indices);
  const highest = Math.max(...indices);
  const expected = highest - lowest + 1;
  return {
    first: events[0],
    lowest,
    highest,
    expected,
    received: seen.size,
    lost: expected - seen.size,
    late,
    duplicates,
  };
}

describe('buildSchedule', () => {
  for (const scenario of [NETWORK, BAD_INPUT]) {
    const spec = scenario.spec;
    it(`${spec.name}: the ledger equals a recount of the events, per peer`, () => {
      const s = buildSchedule(spec);
      const n = packetsIn(spec);
      for (const l of s.peers) {
        const r = recount(spec, l.slot);
        expect(r.first.index).toBe(0); // packet 0 is the first to arrive: the lowest seq
        expect(r.lowest).toBe(0);
        expect(r.highest).toBe(n - 1); // the last packet is never lost
        expect(l.expected).toBe(r.expected);
        expect(l.received).toBe(r.received);
        expect(l.lost).toBe(r.lost);
        expect(l.late).toBe(r.late);
        expect(l.duplicates).toBe(r.duplicates);
        expect(l.received + l.lost).toBe(l.expected);
      }
      expect(s.records).toBe(s.events.length);
      for (let i = 1; i < s.events.length; i++)
        expect(s.events[i].at).toBeGreaterThanOrEqual(s.events[i - 1].at);
    });
  }

  it('network: rates near what was asked (seeded, so exact figures are fixed)', () => {
    const s = buildSchedule(NETWORK.spec);
    const n = packetsIn(NETWORK.spec);
    let lost = 0;
    let dups = 0;
    let reordered = 0;
    for (const l of s.peers) {
      lost += l.lost;
      dups += l.duplicates;
      reordered += l.reordered;
      expect(l.late).toBe(3);
    }
    const total = n * s.peers.length;
    // 2% of ~13000 packets: the binomial standard deviation is ~0.12%; allow 0.5%.
    expect(Math.abs(lost / total - 0.02)).toBeLessThan(0.005);
    expect(Math.abs(dups / total - 0.02)).toBeLessThan(0.005);
    // 0-10 ms jitter on a 2.67 ms spacing reorders a large share of packets.
    expect(reordered / total).toBeGreaterThan(0.2);
    // Late sends all happen before the last regular packet.
    const lastRegular = Math.max(...s.events.filter((e) => e.kind === EventKind.Packet).map((e) => e.at));
    for (const e of s.events) if (e.kind === EventKind.Late) expect(e.at).toBeLessThan(lastRegular);
  });

  it('bad-input: every kind is injected, the tags of malformed records name live peers', () => {
    const s = buildSchedule(BAD_INPUT.spec);
    const slots = new Set(BAD_INPUT.spec.peers.map((p) => p.slot));
    for (const k of BAD_KINDS) expect(s.bad.byKind[k]).toBeGreaterThan(20);
    let malformed = 0;
    let unknown = 0;
    for (const e of s.events) {
      if (e.kind !== EventKind.Bad) continue;
      if (e.bad === 'unknown-peer') {
        unknown++;
        expect(slots.has(e.tag)).toBe(false);
      } else {
        malformed++;
        expect(slots.has(e.tag)).toBe(true);
      }
    }
    expect(s.bad.malformed).toBe(malformed);
    expect(s.bad.unknownPeer).toBe(unknown);
    expect(Object.values(s.bad.malformedBySlot).reduce((a, b) => a + b, 0)).toBe(malformed);
    for (const l of s.peers) expect([l.lost, l.late, l.duplicates]).toEqual([0, 0, 0]);
  });

  it('is deterministic and depends on the seed', () => {
    const a = buildSchedule(NETWORK.spec);
    const b = buildSchedule(NETWORK.spec);
    expect(b.events).toEqual(a.events);
    const c = buildSchedule({ ...NETWORK.spec, seed: NETWORK.spec.seed + 1 });
    expect(c.events.map((e) => e.at)).not.toEqual(a.events.map((e) => e.at));
  });

  it('one stream wraps its sequence number past 65535', () => {
    const n = packetsIn(NETWORK.spec);
    expect(buildSchedule(NETWORK.spec).peers.some((l) => l.firstSeq + n - 1 > 0xffff)).toBe(true);
  });
});

describe('expectedLevels', () => {
  it('follows the constant-power law: centre -3.01 dB per side, hard pans one side only', () => {
    const base = { slot: 0, bin: 205, amplitude: 1, gain: 1, firstSeq: 0, phase: 0, offsetMs: 0 };
    const c = expectedLevels({ ...base, pan: 0 });
    expect(20 * Math.log10(c.left)).toBeCloseTo(-3.0103, 3);
    expect(c.right).toBeCloseTo(c.left, 12);
    expect(expectedLevels({ ...base, pan: -1 })).toMatchObject({ left: 1, right: 0 });
    expect(expectedLevels({ ...base, pan: 1 })).toMatchObject({ left: 0, right: 1 });
  });

  it('keeps the bus of the five peers below the limiter threshold (-1 dBFS)', () => {
    let left = 0;
    let right = 0;
    for (const p of NETWORK.spec.peers) {
      const e = expectedLevels(p);
      left += e.left;
      right += e.right;
    }
    expect(Math.max(left, right)).toBeLessThan(0.891);
  });
});
