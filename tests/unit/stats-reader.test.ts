// The typed reader of the engine's stats block (audio/stats-reader.ts): a block built by hand,
// each figure at its index in the layout (audio/stats.ts), read back under its name.
import { describe, expect, it } from 'vitest';
import * as S from '../../app/src/audio/stats';
import {
  readEchoSlot,
  readGlobals,
  readPeer,
  readProbe,
  StatsReader,
} from '../../app/src/audio/stats-reader';

/** A block with the global figures numbered 100 + index, and peer slot 3's 1000 + field. */
function handBuilt(): Float64Array {
  const b = new Float64Array(S.BLOCK_LEN);
  for (let i = 1; i < S.GLOBAL_LEN; i++) b[i] = 100 + i;
  for (let f = 0; f < S.PEER_LEN; f++) b[S.peerIndex(3, f)] = 1000 + f;
  return b;
}

/**
 * Checks a record read back from `handBuilt()`: each run names the figures laid out one after
 * another from its first index, and each must read as `base` plus its own index.
 */
function expectLaidOut(read: object, base: number, runs: [number, string][]): void {
  const got = read as Record<string, unknown>;
  for (const [first, names] of runs) {
    names.split(' ').forEach((name, k) => expect(got[name], name).toBe(base + first + k));
  }
}

describe('stats reader', () => {
  it('reads each global figure from its own index', () => {
    const g = readGlobals(handBuilt());
    expectLaidOut(g, 100, [
      [1, 'quanta nowFrames peers unknownPeer malformed recordsRead ringResyncs'],
      [12, 'limiterDb packetsSent sendDropped inputPeak inputRms nonfinite underruns'],
      [48, 'captureGaps captureGapMs localStalls'],
    ]);
    expect(g.master).toEqual({ peakL: 108, peakR: 109, rmsL: 110, rmsR: 111 });
  });

  it('reads a peer slot, and only that slot', () => {
    const b = handBuilt();
    const p = readPeer(b, 3);
    expectLaidOut(p, 1000, [
      [0, 'active received lost late duplicates concealed underruns discarded malformed'],
      [9, 'bufferedFrames targetFrames driftPpm'],
      [16, 'blockFrames sampleRate channels bits jitterFrames resets'],
      [
        35,
        'clockOffsetUs lateUnderruns stallUnderruns senderGaps senderGapMs stretched oracleFrames undecodable',
      ],
    ]);
    expect(p.levels).toEqual({ peakL: 1012, peakR: 1013, rmsL: 1014, rmsR: 1015 });
    // The neighbours are empty.
    expect(readPeer(b, 2).received).toBe(0);
    expect(readPeer(b, 4).received).toBe(0);
  });

  it('reads the probe: its state, and as many round trips as clicks were sent', () => {
    const b = new Float64Array(S.BLOCK_LEN);
    b[S.G_PROBE_STATE] = 2;
    b[S.G_PROBE_SLOT] = 5;
    b[S.G_PROBE_CLICKS] = 4;
    b[S.G_PROBE_SENT] = 3;
    b[S.G_PROBE_HEARD] = 2;
    b[S.G_ECHO_SLOT] = -1;
    b.set([12.5, NaN, 14, 99], S.G_PROBE_RESULTS_AT);
    const p = readProbe(b);
    expect(p).toEqual({
      state: 2,
      slot: 5,
      clicks: 4,
      sent: 3,
      heard: 2,
      echoSlot: -1,
      roundTripsMs: [12.5, NaN, 14],
    });
    expect(readEchoSlot(b)).toBe(-1);
    // Never more than the block holds.
    b[S.G_PROBE_SENT] = 40;
    expect(readProbe(b).roundTripsMs).toHaveLength(S.PROBE_MAX_CLICKS);
  });

  it('copies a consistent snapshot, and keeps the last one while the engine writes', () => {
    const shared = new SharedArrayBuffer(S.STATS_BYTES);
    const live = new Float64Array(shared);
    const reader = new StatsReader();
    expect(reader.refresh()).toBe(false);
    expect(reader.globals().underruns).toBe(0);
    reader.attach(shared);
    live[S.G_UNDERRUNS] = 7;
    live[S.peerIndex(0, S.P_RECEIVED)] = 480;
    expect(reader.refresh()).toBe(true);
    expect(reader.globals().underruns).toBe(7);
    expect(reader.peer(0).received).toBe(480);
    // An odd sequence word: the engine is writing; the snapshot stays as it was.
    live[S.G_SEQUENCE] = 1;
    live[S.G_UNDERRUNS] = 8;
    expect(reader.refresh()).toBe(false);
    expect(reader.globals().underruns).toBe(7);
  });
});
