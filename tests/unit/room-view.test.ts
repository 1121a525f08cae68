// The room's pure parts (room/view.ts, room/counters.ts, room/probe.ts): a stats block built by
// hand, read with the stats reader, and the view, the counters and the probe's result that the
// session would show for it.
import { describe, expect, it } from 'vitest';
import * as S from '../../app/src/audio/stats';
import { readGlobals, readPeer, readProbe } from '../../app/src/audio/stats-reader';
import {
  HUB_METER_FRESH_MS,
  NP_GAP_MAX_MS,
  NP_HUB_METER_MS,
  NP_HUB_PEAK_L,
  NP_OFFSET_US,
  NP_RTT_MS,
  netPeerIndex,
  netStatsBytes,
} from '../../app/src/net/pump';
import { participantRows, type RowSources } from '../../app/src/room/rows';
import { buildCounters } from '../../app/src/room/counters';
import { probeResultOf, PROBE_START_GRACE_MS, type ProbeRun } from '../../app/src/room/probe';
import type { JoinRequest, RoomView } from '../../app/src/room/types';
import {
  buildEchoView,
  buildView,
  formatOf,
  gainToDb,
  initialView,
  restartsText,
  withError,
  withSignaling,
  withWelcome,
  type ViewFrame,
} from '../../app/src/room/view';

const RATE = 48000;
const req: JoinRequest = {
  room: 'jam',
  name: 'Ann',
  audio: {
    inputDeviceId: '',
    outputDeviceId: '',
    channels: 1,
    blockFrames: 128,
    buffer: { mode: 'adaptive' },
  },
};
const strip = { gainDb: 0, pan: 0, mute: false, solo: false };
const noEcho = { requests: [], echoing: null, autoAllow: false };

/** Writes each figure of `figures` (layout index: value) into `b` at `at(index)`. */
function put(b: Float64Array, figures: Record<number, number>, at = (i: number) => i): void {
  for (const [i, v] of Object.entries(figures)) b[at(Number(i))] = v;
}

/** Slot 2 (Bea): 990 packets received, 10 lost, 480 frames buffered (10 ms), target 960 (20 ms),
 * PCM16 stereo 128, peaks at 0.5 / 0.25; master at 1.0, input peak 0.1; 3 underruns. */
function block(): Float64Array {
  const b = new Float64Array(S.BLOCK_LEN);
  const slot2 = (f: number) => S.peerIndex(2, f);
  // Bea's counts, buffer depths, format and levels.
  put(b, { [S.P_RECEIVED]: 990, [S.P_LOST]: 10, [S.P_UNDERRUNS]: 4, [S.P_SENDER_GAPS]: 1 }, slot2);
  put(b, { [S.P_BUFFERED_FRAMES]: 480, [S.P_TARGET_FRAMES]: 960 }, slot2);
  put(b, { [S.P_JITTER_FRAMES]: 96, [S.P_ORACLE_FRAMES]: 720 }, slot2);
  put(b, { [S.P_BITS]: 16, [S.P_CHANNELS]: 2, [S.P_BLOCK_FRAMES]: 128 }, slot2);
  put(b, { [S.P_PEAK_L]: 0.5, [S.P_PEAK_R]: 0.25 }, slot2);
  // The master, the limiter and the input; the engine's counts.
  put(b, { [S.G_MASTER_PEAK_L]: 1, [S.G_MASTER_RMS_R]: 0.1, [S.G_LIMITER_DB]: -1.5, [S.G_INPUT_PEAK]: 0.1 });
  put(b, { [S.G_UNDERRUNS]: 3, [S.G_PEERS]: 1, [S.G_QUANTA]: 375 });
  return b;
}

function frame(b: Float64Array, over: Partial<ViewFrame> = {}): ViewFrame {
  return {
    globals: readGlobals(b),
    participants: [
      {
        peer: 'bea',
        name: 'Bea',
        link: 'connected',
        strip,
        stats: readPeer(b, 2),
        rttMs: 30,
        sending: 'as-sent',
      },
    ],
    figuresDue: true,
    blockMs: (128 / RATE) * 1000,
    outputMs: 10,
    sampleRate: RATE,
    channels: 1,
    echo: noEcho,
    ...over,
  };
}

describe('room view', () => {
  it("words a link's restarts: none is nothing, else the total and each reason", () => {
    const none = { failed: 0, timeout: 0, 'send-stall': 0, 'peer-send-stall': 0 };
    expect(restartsText(undefined)).toEqual({ short: '', detail: '' });
    expect(restartsText(none)).toEqual({ short: '', detail: '' });
    expect(restartsText({ ...none, failed: 1, 'send-stall': 2 })).toEqual({
      short: 'restarted 3×',
      detail: 'connection failed 1, our sending stalled 2',
    });
    expect(restartsText({ ...none, 'peer-send-stall': 1 }).detail).toBe('their sending stalled 1');
  });

  it('turns the block into the participant strip, the master and the input', () => {
    const v = buildView(initialView(req, 'me', RATE), frame(block()));
    expect(v.participants).toHaveLength(1);
    const p = v.participants[0];
    expect(p.peer).toBe('bea');
    expect(p.name).toBe('Bea');
    expect(p.levels.peakL).toBeCloseTo(-6.0206, 3);
    expect(p.levels.peakR).toBeCloseTo(-12.0412, 3);
    expect(p.levels.rmsL).toBe(-Infinity);
    expect(p).toMatchObject({
      bufferMs: 10,
      targetMs: 20,
      lossPct: 1,
      underruns: 4,
      senderGaps: 1,
      rttMs: 30,
    });
    // One block (2.667 ms) + half the round trip + the buffer + the output.
    expect(p.latencyMs).toBeCloseTo(128 / 48 + 15 + 10 + 10, 9);
    expect(p.format).toBe('PCM16 stereo 128');
    expect(v.master).toEqual({
      gainDb: 0,
      levels: { peakL: 0, peakR: -Infinity, rmsL: -Infinity, rmsR: -20 },
      limiterDb: -1.5,
    });
    expect(v.input.levels).toEqual({ peakL: -20, peakR: -20, rmsL: -Infinity, rmsR: -Infinity });
    expect(v.input.channels).toBe(1);
    expect(v.engine).toEqual({ underruns: 3, peers: 1, sampleRate: RATE, blockFrames: 128 });
  });

  it("names a JackTrip client's kind, and no kind for a browser", () => {
    const b = block();
    const jt = { peer: 'jt', name: 'Jo', kind: 'jacktrip' as const, link: 'connected' as const };
    const v = buildView(
      initialView(req, 'me', RATE),
      frame(b, {
        participants: [
          {
            peer: 'bea',
            name: 'Bea',
            link: 'connected',
            strip,
            stats: readPeer(b, 2),
            rttMs: 30,
            sending: 'as-sent',
          },
          { ...jt, strip, stats: readPeer(b, 3), rttMs: null, sending: 'as-sent' },
        ],
      }),
    );
    expect(v.participants.map((p) => p.kind)).toEqual([undefined, 'jacktrip']);
    expect('kind' in v.participants[0]).toBe(false);
  });

  it('has no latency without a round trip, and no format before a packet', () => {
    const empty = new Float64Array(S.BLOCK_LEN);
    const v = buildView(
      initialView(req, 'me', RATE),
      frame(empty, {
        participants: [
          {
            peer: 'bea',
            name: 'Bea',
            link: 'connecting',
            strip,
            stats: readPeer(empty, 2),
            rttMs: null,
            sending: 'as-sent',
          },
        ],
      }),
    );
    expect(v.participants[0].latencyMs).toBeNull();
    expect(v.participants[0].lossPct).toBe(0);
    expect(v.participants[0].format).toBe('');
    expect(formatOf({ ...readPeer(block(), 2), bits: 32, channels: 1 })).toBe('float32 mono 128');
    // Opus frames (120, 240) are never a PCM block: the stream is named by them.
    expect(formatOf({ ...readPeer(block(), 2), bits: 16, channels: 2, blockFrames: 120 })).toBe(
      'Opus stereo 120',
    );
    expect(formatOf({ ...readPeer(block(), 2), bits: 16, channels: 1, blockFrames: 240 })).toBe(
      'Opus mono 240',
    );
  });

  it('between figure refreshes keeps the figures and moves only levels, names, links and strips', () => {
    const first = buildView(initialView(req, 'me', RATE), frame(block()));
    const later = block();
    later[S.peerIndex(2, S.P_LOST)] = 500;
    later[S.peerIndex(2, S.P_PEAK_L)] = 1;
    const muted = { ...strip, mute: true };
    const v = buildView(
      first,
      frame(later, {
        figuresDue: false,
        participants: [
          {
            peer: 'bea',
            name: 'Bea B',
            link: 'reconnecting',
            strip: muted,
            stats: readPeer(later, 2),
            rttMs: 80,
            sending: 'opus-64',
          },
        ],
      }),
    );
    const p = v.participants[0];
    expect(p.lossPct).toBe(1);
    expect(p.rttMs).toBe(30);
    expect(p.levels.peakL).toBe(0);
    expect(p.name).toBe('Bea B');
    expect(p.link).toBe('reconnecting');
    expect(p.strip).toEqual(muted);
    // What they take of our stream follows at once too.
    expect(p.sending).toBe('opus-64');
    // A newcomer gets its figures at once.
    const withCy = buildView(
      first,
      frame(later, {
        figuresDue: false,
        participants: [
          {
            peer: 'cy',
            name: 'Cy',
            link: 'connected',
            strip,
            stats: readPeer(later, 2),
            rttMs: 80,
            sending: 'as-sent',
          },
        ],
      }),
    );
    expect(withCy.participants[0].lossPct).toBeCloseTo((100 * 500) / 1490, 9);
  });

  it('keeps the master fader, the session fields and the echo part given', () => {
    const start: RoomView = {
      ...initialView(req, 'me', RATE),
      master: { gainDb: -3, levels: initialView(req, 'me', RATE).master.levels, limiterDb: 0 },
    };
    const echo = { requests: [{ peer: 'bea', name: 'Bea', seconds: 8 }], echoing: null, autoAllow: true };
    const v = buildView(start, frame(block(), { echo }));
    expect(v.master.gainDb).toBe(-3);
    expect(v.echo).toBe(echo);
    expect(v.room).toBe('jam');
    expect(v.self).toEqual({ peer: 'me', name: 'Ann' });
  });

  it('follows the signaling connection, the welcome and a join error', () => {
    let v = initialView({ ...req, key: 'k' }, 'me', RATE);
    expect(v.access).toEqual({ isOwner: false, locked: false, protected: false, private: true });
    v = withWelcome(withSignaling(v, 'open'), { isOwner: true, locked: true, protected: false });
    expect(v.joined).toBe(true);
    expect(v.access).toEqual({ isOwner: true, locked: true, protected: false, private: true });
    expect(withSignaling(v, 'open').joined).toBe(true);
    expect(withSignaling(v, 'reconnecting').joined).toBe(false);
    const e = withError(v, 'too-many-attempts', 'wait', 5000, 1_000_000);
    expect(e.joined).toBe(false);
    expect(e.error).toEqual({ code: 'too-many-attempts', message: 'wait', retryAt: 1_005_000 });
    expect(withError(v, 'locked', 'no', undefined, 0).error).toEqual({ code: 'locked', message: 'no' });
  });

  it('lists echo requests of participants still here, rounding seconds up', () => {
    const names: Record<string, string> = { bea: 'Bea', cy: 'Cy' };
    const requests: [string, { ms: number }][] = [
      ['cy', { ms: 8000 }],
      ['gone', { ms: 1000 }],
      ['bea', { ms: 1500 }],
    ];
    expect(buildEchoView(requests, (p) => names[p], 'bea', false)).toEqual({
      requests: [
        { peer: 'cy', name: 'Cy', seconds: 8 },
        { peer: 'bea', name: 'Bea', seconds: 2 },
      ],
      echoing: { peer: 'bea', name: 'Bea' },
      autoAllow: false,
    });
    expect(buildEchoView([], (p) => names[p], 'gone', true).echoing).toBeNull();
  });

  it('converts gains both ways at the edges', () => {
    expect(gainToDb(0)).toBe(-Infinity);
    expect(gainToDb(0.1)).toBeCloseTo(-20, 12);
  });
});

describe('session counters', () => {
  it('gives the engine figures in ms and the pump figures by slot', () => {
    const b = block();
    const net = new Float64Array(new SharedArrayBuffer(netStatsBytes(8)));
    net[netPeerIndex(2, NP_GAP_MAX_MS)] = 42;
    net[netPeerIndex(2, NP_RTT_MS)] = 12;
    net[netPeerIndex(2, NP_OFFSET_US)] = -250;
    const c = buildCounters(readGlobals(b), [{ peer: 'bea', slot: 2, stats: readPeer(b, 2) }], net, RATE);
    expect(c).toMatchObject({ underruns: 3, quanta: 375 });
    // The stats block's counts and depths (in ms), then the pump's figures.
    const p = c.perPeer.bea;
    expect(p).toMatchObject({
      received: 990,
      lost: 10,
      bufferedMs: 10,
      targetMs: 20,
      jitterMs: 2,
      oracleMs: 15,
    });
    expect(p).toMatchObject({ gapMaxMs: 42, rttMs: 12, offsetUs: -250 });
  });

  it('without a pump reads its counts as 0 and its clock as unknown', () => {
    const b = block();
    const p = buildCounters(readGlobals(b), [{ peer: 'bea', slot: 2, stats: readPeer(b, 2) }], null, RATE)
      .perPeer.bea;
    expect(p.gapMaxMs).toBe(0);
    expect(p.clockExchanges).toBe(0);
    expect(p.rttMs).toBeNaN();
    expect(p.offsetUs).toBeNaN();
    expect(p.stampLagMs).toBeNaN();
  });
});

describe('probe result', () => {
  const run = (over: Partial<ProbeRun> = {}): ProbeRun => ({
    peer: 'bea',
    slot: 2,
    clicks: 4,
    echo: true,
    asking: false,
    refusal: null,
    selfLoop: false,
    seenRunning: true,
    over: false,
    startedAt: 0,
    ...over,
  });
  const done = () => {
    const b = new Float64Array(S.BLOCK_LEN);
    put(b, { [S.G_PROBE_STATE]: 2, [S.G_PROBE_CLICKS]: 4, [S.G_PROBE_SENT]: 4, [S.G_PROBE_HEARD]: 3 });
    b.set([30, NaN, 10, 20], S.G_PROBE_RESULTS_AT);
    return readProbe(b);
  };

  it('reports a finished probe with its median, min and max of the clicks heard', () => {
    expect(probeResultOf(run(), done(), 10_000)).toEqual({
      peer: 'bea',
      state: 'done',
      clicks: 4,
      sent: 4,
      heard: 3,
      roundTripsMs: [30, NaN, 10, 20],
      medianMs: 20,
      minMs: 10,
      maxMs: 30,
    });
  });

  it('is asking, running with nothing yet, or refused before the engine shows it', () => {
    expect(probeResultOf(run({ asking: true }), done(), 0).state).toBe('asking');
    expect(probeResultOf(run({ seenRunning: false }), done(), PROBE_START_GRACE_MS - 1)).toMatchObject({
      state: 'running',
      sent: 0,
    });
    expect(probeResultOf(run({ seenRunning: false, refusal: 'Bea declined.' }), done(), 0)).toMatchObject({
      state: 'refused',
      message: 'Bea declined.',
      sent: 0,
    });
  });
});

describe('participant rows', () => {
  const participants = new Map([
    [
      'bea',
      {
        member: { peer: 'bea', name: 'Bea' },
        slot: 2,
        strip,
        link: 'connected' as const,
        offsetSentUs: NaN,
        offsetSentAt: 0,
      },
    ],
  ]);
  const net = new Float64Array(netStatsBytes(8) / 8);
  const now = 1_700_000_000_000;
  const sources = (over: Partial<RowSources> = {}): RowSources => ({
    engine: (slot) => readPeer(block(), slot),
    net,
    hubMeters: false,
    linkRttMs: () => 42,
    restarts: () => undefined,
    epochMs: now,
    ...over,
  });

  it("meters from our engine in a mesh or forward, from the hub's reading in mix mode", () => {
    net[netPeerIndex(2, NP_HUB_PEAK_L)] = 0.1;
    net[netPeerIndex(2, NP_HUB_PEAK_L) + 1] = 0.2;
    net[netPeerIndex(2, NP_HUB_PEAK_L) + 2] = 0.07;
    net[netPeerIndex(2, NP_HUB_PEAK_L) + 3] = 0.14;
    net[netPeerIndex(2, NP_HUB_METER_MS)] = now - 100;
    const [own] = participantRows(participants, sources());
    expect(own.stats.levels).toMatchObject({ peakL: 0.5, peakR: 0.25 });
    const [hub] = participantRows(participants, sources({ hubMeters: true }));
    expect(hub.stats.levels).toEqual({ peakL: 0.1, peakR: 0.2, rmsL: 0.07, rmsR: 0.14 });
    expect(hub.stats.received).toBe(990);
    // A reading older than HUB_METER_FRESH_MS (the hub stopped sending) shows silence.
    const [stale] = participantRows(
      participants,
      sources({ hubMeters: true, epochMs: now + HUB_METER_FRESH_MS }),
    );
    expect(stale.stats.levels).toEqual({ peakL: 0, peakR: 0, rmsL: 0, rmsR: 0 });
  });

  it("takes the pump's round trip where it measured one, else the link's", () => {
    net[netPeerIndex(2, NP_RTT_MS)] = NaN;
    expect(participantRows(participants, sources())[0].rttMs).toBe(42);
    net[netPeerIndex(2, NP_RTT_MS)] = 7.5;
    expect(participantRows(participants, sources())[0].rttMs).toBe(7.5);
    expect(participantRows(participants, sources({ net: null }))[0].rttMs).toBe(42);
  });
});
