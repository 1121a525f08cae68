// The injected network: which packet of which synthetic peer is sent when, and the exact ledger
// of what was done to each peer's stream (the oracle the engine's stats must equal).
//
// Everything here is a pure function of the scenario and its seed, so the page, the sender worker
// and the unit tests all see the same schedule.
//
// Per peer, packet i (i = 0 .. packets-1, seq = firstSeq + i mod 2^16) is due at
// i x 128 / 48000 s after the peer's start and is:
//   - lost with probability lossRate (never sent),
//   - or sent once after a delay uniform in [0, jitterMs] (reordering follows from the jitter),
//   - plus, with probability dupRate, a second copy with its own delay,
//   - except `latePerPeer` packets that are sent lateDelayMs (+ jitter) after they were due: far
//     beyond any buffer depth the scenario allows, so they certainly arrive after their slot was
//     played.
// The first `headGuard` packets are sent on time without jitter (packet 0 is always the first to
// arrive, so it is the lowest sequence number the engine sees) and the last packet is never lost
// (so it is the highest). Late packets are kept out of the last `tailGuard` packets so that every
// late send happens before the last regular one.

import { Prng } from './prng';

export const SAMPLE_RATE = 48000;
export const BLOCK_FRAMES = 128;
export const BLOCK_MS = (1000 * BLOCK_FRAMES) / SAMPLE_RATE;
/** Analysis FFT length; every tone sits exactly on one of its bins. */
export const FFT_LEN = 32768;

export interface PeerSpec {
  slot: number;
  /** Tone frequency in FFT bins: f = bin x 48000 / FFT_LEN. */
  bin: number;
  /** Sine amplitude in the peer's packets (both channels). */
  amplitude: number;
  /** Strip gain (linear) and pan (-1 .. 1) sent to the engine. */
  gain: number;
  pan: number;
  /** Sequence number of packet 0 (u16; streams may wrap). */
  firstSeq: number;
  /** Phase of sample 0, as an index into one period of FFT_LEN steps. */
  phase: number;
  /** Start of the stream relative to the scenario start, ms. */
  offsetMs: number;
}

export interface NetworkSpec {
  /** Largest extra delay of a regular packet, ms (uniform in [0, jitterMs]). */
  jitterMs: number;
  lossRate: number;
  dupRate: number;
  latePerPeer: number;
  /** Delay of a late packet beyond its due time, ms. */
  lateDelayMs: number;
}

/** Kinds of bad record injected into the inbound ring. */
export type BadKind =
  | 'truncated-header'
  | 'truncated-payload'
  | 'oversized'
  | 'garbage'
  | 'bad-bits'
  | 'bad-rate'
  | 'unknown-peer';

export const BAD_KINDS: readonly BadKind[] = [
  'truncated-header',
  'truncated-payload',
  'oversized',
  'garbage',
  'bad-bits',
  'bad-rate',
  'unknown-peer',
];

export interface BadSpec {
  /** One bad record every `everyMs`, from `startMs` until `durationMs - startMs`. */
  everyMs: number;
  startMs: number;
  /** Ring tags that name no peer (free slots, slots beyond maxPeers, 0xFFFF). */
  unknownTags: number[];
}

export interface ScenarioSpec {
  name: string;
  seed: number;
  durationMs: number;
  peers: PeerSpec[];
  net: NetworkSpec;
  bad?: BadSpec;
  headGuard: number;
  tailGuard: number;
}

/** What a ring record is: a regular packet, a second copy, a late packet, or bad input. */
export const EventKind = { Packet: 0, Duplicate: 1, Late: 2, Bad: 3 } as const;
export type EventKind = (typeof EventKind)[keyof typeof EventKind];

/** One ring record to write at `at` ms after the scenario start. */
export interface SendEvent {
  at: number;
  kind: EventKind;
  /** Peer (stream) whose packet this is, or whose packet a bad record was made from. */
  slot: number;
  /** Packet index in that stream. */
  index: number;
  /** Ring tag (the peer slot, or an unknown one). */
  tag: number;
  bad?: BadKind;
  /** Seed for the bytes of a bad record. */
  badSeed?: number;
}

export interface PeerLedger {
  slot: number;
  firstSeq: number;
  lastSeq: number;
  /** highest - lowest + 1 over the packets sent (= packets in the stream). */
  expected: number;
  /** Unique packets sent, late ones included. */
  received: number;
  lost: number;
  late: number;
  duplicates: number;
  /** Sends of a packet after a higher one of the same peer (information only). */
  reordered: number;
}

export interface BadLedger {
  total: number;
  /** Records that must count as malformed (tagged with a live peer's slot). */
  malformed: number;
  malformedBySlot: Record<number, number>;
  unknownPeer: number;
  byKind: Record<BadKind, number>;
}

export interface Schedule {
  events: SendEvent[];
  peers: PeerLedger[];
  bad: BadLedger;
  /** Ring records in total. */
  records: number;
  /** Time of the last send, ms after the start. */
  endMs: number;
}

export function packetsIn(spec: ScenarioSpec): number {
  return Math.floor(spec.durationMs / BLOCK_MS);
}

export function toneHz(bin: number): number {
  return (bin * SAMPLE_RATE) / FFT_LEN;
}

/** Builds the schedule of a scenario. Pure: same spec, same schedule. */
export function buildSchedule(spec: ScenarioSpec): Schedule {
  const rng = new Prng(spec.seed);
  const events: SendEvent[] = [];
  const peers: PeerLedger[] = [];
  const n = packetsIn(spec);
  const { jitterMs, lossRate, dupRate, latePerPeer, lateDelayMs } = spec.net;
  if (n < spec.headGuard + spec.tailGuard + latePerPeer * 4) {
    throw new Error(`scenario ${spec.name}: ${n} packets leave no room for the injected faults`);
  }

  for (const p of spec.peers) {
    const lostSet = new Set<number>();
    const lateSet = new Set<number>();
    // Late packets: distinct, between the guards, not adjacent to each other.
    while (lateSet.size < latePerPeer) {
      const i = spec.headGuard + rng.int(n - spec.headGuard - spec.tailGuard);
      if (!lateSet.has(i) && !lateSet.has(i - 1) && !lateSet.has(i + 1)) lateSet.add(i);
    }
    let dups = 0;
    for (let i = 0; i < n; i++) {
      const due = p.offsetMs + i * BLOCK_MS;
      if (i < spec.headGuard) {
        events.push(packetEvent(due, EventKind.Packet, p.slot, i));
        continue;
      }
      if (lateSet.has(i)) {
        events.push(packetEvent(due + lateDelayMs + rng.uniform(0, jitterMs), EventKind.Late, p.slot, i));
        continue;
      }
      if (i < n - 1 && rng.next() < lossRate) {
        lostSet.add(i);
        continue;
      }
      events.push(packetEvent(due + rng.uniform(0, jitterMs), EventKind.Packet, p.slot, i));
      if (rng.next() < dupRate) {
        events.push(packetEvent(due + rng.uniform(0, jitterMs), EventKind.Duplicate, p.slot, i));
        dups++;
      }
    }
    peers.push({
      slot: p.slot,
      firstSeq: p.firstSeq & 0xffff,
      lastSeq: (p.firstSeq + n - 1) & 0xffff,
      expected: n,
      received: n - lostSet.size,
      lost: lostSet.size,
      late: lateSet.size,
      duplicates: dups,
      reordered: 0,
    });
  }

  const bad: BadLedger = {
    total: 0,
    malformed: 0,
    malformedBySlot: {},
    unknownPeer: 0,
    byKind: Object.fromEntries(BAD_KINDS.map((k) => [k, 0])) as Record<BadKind, number>,
  };
  if (spec.bad) {
    const b = spec.bad;
    for (let t = b.startMs; t <= spec.durationMs - b.startMs; t += b.everyMs) {
      const kind = BAD_KINDS[rng.int(BAD_KINDS.length)];
      const peer = spec.peers[rng.int(spec.peers.length)];
      const index = rng.int(n);
      const tag = kind === 'unknown-peer' ? b.unknownTags[rng.int(b.unknownTags.length)] : peer.slot;
      events.push({
        at: t,
        kind: EventKind.Bad,
        slot: peer.slot,
        index,
        tag,
        bad: kind,
        badSeed: rng.nextU32(),
      });
      bad.total++;
      bad.byKind[kind]++;
      if (kind === 'unknown-peer') {
        bad.unknownPeer++;
      } else {
        bad.malformed++;
        bad.malformedBySlot[peer.slot] = (bad.malformedBySlot[peer.slot] ?? 0) + 1;
      }
    }
  }

  // Stable sort by send time: equal times keep generation order (packet 0 first).
  events.sort((a, b) => a.at - b.at);

  const highest = new Map<number, number>();
  const bySlot = new Map(peers.map((l) => [l.slot, l]));
  for (const e of events) {
    if (e.kind === EventKind.Bad) continue;
    const top = highest.get(e.slot) ?? -1;
    if (e.index < top) bySlot.get(e.slot)!.reordered++;
    else highest.set(e.slot, e.index);
  }

  return {
    events,
    peers,
    bad,
    records: events.length,
    endMs: events.length ? events[events.length - 1].at : 0,
  };
}

function packetEvent(at: number, kind: EventKind, slot: number, index: number): SendEvent {
  return { at, kind, slot, index, tag: slot };
}
