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

describe('stats reader', () => {
  it('reads each global figure from its own index', () => {
    const g = readGlobals(handBuilt());
    expect(g.quanta).toBe(101);
    expect(g.nowFrames).toBe(102);
    expect(g.peers).toBe(103);
    expect(g.unknownPeer).toBe(104);
    expect(g.malformed).toBe(105);
    expect(g.recordsRead).toBe(106);
    expect(g.ringResyncs).toBe(107);
    expect(g.master).toEqual({ peakL: 108, peakR: 109, rmsL: 110, rmsR: 111 });
    expect(g.limiterDb).toBe(112);
    expect(g.packetsSent).toBe(113);
    expect(g.sendDropped).toBe(114);
    expect(g.inputPeak).toBe(115);
    expect(g.inputRms).toBe(116);
    expect(g.nonfinite).toBe(117);
    expect(g.underruns).toBe(118);
    expect(g.captureGaps).toBe(148);
    expect(g.captureGapMs).toBe(149);
    expect(g.localStalls).toBe(150);
  });

  it('reads a peer slot, and only that slot', () => {
    const b = handBuilt();
    const p = readPeer(b, 3);
    expect(p.active).toBe(1000);
    expect(p.received).toBe(1001);
    expect(p.lost).toBe(1002);
    expect(p.late).toBe(1003);
    expect(p.duplicates).toBe(1004);
    expect(p.concealed).toBe(1005);
    expect(p.underruns).toBe(1006);
    expect(p.discarded).toBe(1007);
    expect(p.malformed).toBe(1008);
    expect(p.bufferedFrames).toBe(1009);
    expect(p.targetFrames).toBe(1010);
    expect(p.driftPpm).toBe(1011);
    expect(p.levels).toEqual({ peakL: 1012, peakR: 1013, rmsL: 1014, rmsR: 1015 });
    expect(p.blockFrames).toBe(1016);
    expect(p.sampleRate).toBe(1017);
    expect(p.channels).toBe(1018);
    expect(p.bits).toBe(1019);
    expect(p.jitterFrames).toBe(1020);
    expect(p.resets).toBe(1021);
    expect(p.clockOffsetUs).toBe(1035);
    expect(p.lateUnderruns).toBe(1036);
    expect(p.stallUnderruns).toBe(1037);
    expect(p.senderGaps).toBe(1038);
    expect(p.senderGapMs).toBe(1039);
    expect(p.stretched).toBe(1040);
    expect(p.oracleFrames).toBe(1041);
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
