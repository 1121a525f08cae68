// The one typed reader of the engine's shared stats block. stats.ts holds the layout (indices
// mirrored from core/src/stats.rs); this module turns a snapshot of the block into named figures,
// so that the room, the self-test and the benchmarks read "received" or "underruns" instead of
// indexing the block themselves. Values are as the engine wrote them: levels linear, depths and
// block sizes in frames, times in ms.

import * as S from './stats';

/** Peak and RMS levels, linear (0 is silence). */
export interface LinearLevels {
  peakL: number;
  peakR: number;
  rmsL: number;
  rmsR: number;
}

/** The engine-wide part of the block. */
export interface EngineGlobals {
  /** Render quanta processed. */
  quanta: number;
  nowFrames: number;
  /** Peers active in the engine. */
  peers: number;
  unknownPeer: number;
  malformed: number;
  recordsRead: number;
  ringResyncs: number;
  master: LinearLevels;
  limiterDb: number;
  packetsSent: number;
  sendDropped: number;
  /** The captured input (mono figures). */
  inputPeak: number;
  inputRms: number;
  nonfinite: number;
  underruns: number;
  /** Our own audio device's missed callbacks, and their total ms. */
  captureGaps: number;
  captureGapMs: number;
  /** Stalls of this machine: every peer's packets stopped and came back together. */
  localStalls: number;
}

/** The round-trip probe's part of the block (core/src/probe.rs). */
export interface ProbeStats {
  /** 0 idle, 1 running, 2 done. */
  state: number;
  /** The slot it measures. */
  slot: number;
  clicks: number;
  sent: number;
  heard: number;
  /** The slot whose stream we echo back to its sender; −1: none. */
  echoSlot: number;
  /** Each sent click's round trip, ms (NaN: lost), at most PROBE_MAX_CLICKS of them. */
  roundTripsMs: number[];
}

/** One peer slot of the block. */
export interface EnginePeerStats {
  active: number;
  received: number;
  lost: number;
  late: number;
  duplicates: number;
  concealed: number;
  underruns: number;
  discarded: number;
  malformed: number;
  bufferedFrames: number;
  targetFrames: number;
  driftPpm: number;
  levels: LinearLevels;
  /** The format of the peer's last packet. */
  blockFrames: number;
  sampleRate: number;
  channels: number;
  bits: number;
  jitterFrames: number;
  resets: number;
  /** Clock offset in force (our wall clock − the peer's), µs; NaN while unknown. */
  clockOffsetUs: number;
  lateUnderruns: number;
  stallUnderruns: number;
  senderGaps: number;
  senderGapMs: number;
  stretched: number;
  /** The buffer's oracle depth over the last two minutes, frames. */
  oracleFrames: number;
  /** Opus frames played that the decoder refused (concealed instead). */
  undecodable: number;
  /** Compressed frames lost but played from the next packet's copy (not concealed). */
  recovered: number;
}

export function readGlobals(block: Float64Array): EngineGlobals {
  return {
    quanta: block[S.G_QUANTA],
    nowFrames: block[S.G_NOW_FRAMES],
    peers: block[S.G_PEERS],
    unknownPeer: block[S.G_UNKNOWN_PEER],
    malformed: block[S.G_MALFORMED],
    recordsRead: block[S.G_RECORDS_READ],
    ringResyncs: block[S.G_RING_RESYNCS],
    master: {
      peakL: block[S.G_MASTER_PEAK_L],
      peakR: block[S.G_MASTER_PEAK_R],
      rmsL: block[S.G_MASTER_RMS_L],
      rmsR: block[S.G_MASTER_RMS_R],
    },
    limiterDb: block[S.G_LIMITER_DB],
    packetsSent: block[S.G_PACKETS_SENT],
    sendDropped: block[S.G_SEND_DROPPED],
    inputPeak: block[S.G_INPUT_PEAK],
    inputRms: block[S.G_INPUT_RMS],
    nonfinite: block[S.G_NONFINITE],
    underruns: block[S.G_UNDERRUNS],
    captureGaps: block[S.G_CAPTURE_GAPS],
    captureGapMs: block[S.G_CAPTURE_GAP_MS],
    localStalls: block[S.G_LOCAL_STALLS],
  };
}

export function readProbe(block: Float64Array): ProbeStats {
  const sent = block[S.G_PROBE_SENT];
  const roundTripsMs: number[] = [];
  for (let i = 0; i < Math.min(sent, S.PROBE_MAX_CLICKS); i++)
    roundTripsMs.push(block[S.G_PROBE_RESULTS_AT + i]);
  return {
    state: block[S.G_PROBE_STATE],
    slot: block[S.G_PROBE_SLOT],
    clicks: block[S.G_PROBE_CLICKS],
    sent,
    heard: block[S.G_PROBE_HEARD],
    echoSlot: block[S.G_ECHO_SLOT],
    roundTripsMs,
  };
}

/** The slot whose stream we echo (−1: none), without reading the rest of the probe's part. */
export function readEchoSlot(block: Float64Array): number {
  return block[S.G_ECHO_SLOT];
}

export function readPeer(block: Float64Array, slot: number): EnginePeerStats {
  const at = (field: number) => block[S.peerIndex(slot, field)];
  return {
    active: at(S.P_ACTIVE),
    received: at(S.P_RECEIVED),
    lost: at(S.P_LOST),
    late: at(S.P_LATE),
    duplicates: at(S.P_DUPLICATES),
    concealed: at(S.P_CONCEALED),
    underruns: at(S.P_UNDERRUNS),
    discarded: at(S.P_DISCARDED),
    malformed: at(S.P_MALFORMED),
    bufferedFrames: at(S.P_BUFFERED_FRAMES),
    targetFrames: at(S.P_TARGET_FRAMES),
    driftPpm: at(S.P_DRIFT_PPM),
    levels: { peakL: at(S.P_PEAK_L), peakR: at(S.P_PEAK_R), rmsL: at(S.P_RMS_L), rmsR: at(S.P_RMS_R) },
    blockFrames: at(S.P_BLOCK_FRAMES),
    sampleRate: at(S.P_SAMPLE_RATE),
    channels: at(S.P_CHANNELS),
    bits: at(S.P_BITS),
    jitterFrames: at(S.P_JITTER_FRAMES),
    resets: at(S.P_RESETS),
    clockOffsetUs: at(S.P_CLOCK_OFFSET_US),
    lateUnderruns: at(S.P_LATE_UNDERRUNS),
    stallUnderruns: at(S.P_STALL_UNDERRUNS),
    senderGaps: at(S.P_SENDER_GAPS),
    senderGapMs: at(S.P_SENDER_GAP_MS),
    stretched: at(S.P_STRETCHED),
    oracleFrames: at(S.P_ORACLE_FRAMES),
    undecodable: at(S.P_UNDECODABLE),
    recovered: at(S.P_RECOVERED),
  };
}

/**
 * A snapshot of one engine's stats block and the figures in it. `refresh` copies a consistent
 * snapshot from the shared block (the seqlock in stats.ts); until a block is attached, or while
 * the engine kept writing, the snapshot keeps what it had (zeros at first).
 */
export class StatsReader {
  /** The last snapshot, raw. */
  readonly block = new Float64Array(S.BLOCK_LEN);
  private shared: Float64Array | null = null;

  attach(buffer: SharedArrayBuffer): void {
    this.shared = new Float64Array(buffer);
  }

  /** Copies the shared block; false when none is attached or no consistent copy was taken. */
  refresh(attempts?: number): boolean {
    return this.shared !== null && S.readStats(this.shared, this.block, attempts);
  }

  globals(): EngineGlobals {
    return readGlobals(this.block);
  }

  probe(): ProbeStats {
    return readProbe(this.block);
  }

  echoSlot(): number {
    return readEchoSlot(this.block);
  }

  peer(slot: number): EnginePeerStats {
    return readPeer(this.block, slot);
  }
}
