// The session's counters (Session.counters): the engine's figures and the packet pump's, by
// participant, in the units the stats view, its history and the tests use. Pure: built from a
// stats snapshot (stats-reader.ts) and the pump's counters block (net/pump.ts).

import type { EngineGlobals, EnginePeerStats } from '../audio/stats-reader';
import {
  NP_ECHO_DROPPED,
  NP_EXCHANGES,
  NP_GAP_MAX_MS,
  NP_GAPS_OVER_20MS,
  NP_OFFSET_US,
  NP_RTT_MIN_MS,
  NP_RTT_MS,
  NP_BUFFERED,
  NP_SEND_QUEUE_MS,
  NP_STAMP_LAG_MS,
  NP_TX_PACKETS,
  NP_TX_SKIPPED,
  netPeerIndex,
} from '../net/pump';

export interface PeerCounters {
  received: number;
  lost: number;
  late: number;
  duplicates: number;
  discarded: number;
  concealed: number;
  underruns: number;
  resets: number;
  bufferedMs: number;
  targetMs: number;
  /** The arrival jitter the adaptive buffer measures, ms. */
  jitterMs: number;
  /** The sender's clock against ours, ppm (the drift loop's estimate). */
  driftPpm: number;
  /** Longest time between two of the peer's packets at the pump, ms. */
  gapMaxMs: number;
  gapsOver20Ms: number;
  // The clock and send-queue figures below are always filled by counters(); optional so that
  // counters recorded before they existed still read.
  /** Median RTT of the pump's clock exchanges with the peer, ms; NaN until the first. */
  rttMs?: number;
  /** The smallest RTT of the same exchanges, ms (the one the offset comes from); NaN until the first. */
  rttMinMs?: number;
  /** Our wall clock − the peer's, µs (min-RTT exchange); NaN until known. */
  offsetUs?: number;
  /** Clock exchanges taken. */
  clockExchanges?: number;
  /** The send queue to the peer at the last send, as time, ms. */
  sendQueueMs?: number;
  /** Packets the pump handed to the channel towards them, and skipped because its send queue
   * was over the limit or closed (net/pump.ts); the queue's bytes at the last send. */
  txPackets?: number;
  txSkipped?: number;
  sendBufferedBytes?: number;
  /** The last packet's arrival − the send time in its header, ms (one-way + clock offset). */
  stampLagMs?: number;
  // Where the dropouts come from (core/src/jitter, core/src/continuity.rs); optional so that
  // counters recorded before they existed still read.
  /** Underruns that waited for a late packet (the network, or the peer's sending side). */
  lateUnderruns?: number;
  /** Underruns ended by packets a stall of this machine held back. */
  stallUnderruns?: number;
  /** The peer's own missed audio callbacks, seen in its packets' send stamps, and their ms. */
  senderGaps?: number;
  senderGapMs?: number;
  /** Blocks synthesized without passing a sequence number (underrun waits, depth raised). */
  stretched?: number;
  /**
   * The buffer's oracle, ms: the smallest fixed depth (counted as the target is) that would have
   * played every packet of the last two minutes; 0 before the first packet. A yardstick for
   * `targetMs`, not an input to it.
   */
  oracleMs?: number;
  /** The peer's round-trip requests dropped unasked (one pending already, or too soon after a
   * denial or a stop: net/echo-consent.ts). */
  echoRequestsDropped?: number;
}

export interface SessionCounters {
  underruns: number;
  quanta: number;
  perPeer: Record<string, PeerCounters>;
  /** Our own audio device's missed callbacks, and their total ms (optional: older records). */
  captureGaps?: number;
  captureGapMs?: number;
  /** Stalls of this machine: every peer's packets stopped and came back together. */
  localStalls?: number;
}

/** One participant's engine figures, and the slot the pump counts them under. */
export interface CounterRow {
  peer: string;
  slot: number;
  stats: EnginePeerStats;
}

/**
 * The counters of every participant in `rows`. `net` is the pump's counters block, null while
 * there is no pump: its figures then read 0, and the clock figures NaN.
 */
export function buildCounters(
  globals: EngineGlobals,
  rows: Iterable<CounterRow>,
  net: Float64Array | null,
  sampleRate: number,
): SessionCounters {
  const ms = (frames: number) => (frames / sampleRate) * 1000;
  const perPeer: SessionCounters['perPeer'] = {};
  for (const { peer, slot, stats: s } of rows) {
    const nat = (f: number) => (net ? net[netPeerIndex(slot, f)] : 0);
    perPeer[peer] = {
      received: s.received,
      lost: s.lost,
      late: s.late,
      duplicates: s.duplicates,
      discarded: s.discarded,
      concealed: s.concealed,
      underruns: s.underruns,
      resets: s.resets,
      bufferedMs: ms(s.bufferedFrames),
      targetMs: ms(s.targetFrames),
      jitterMs: ms(s.jitterFrames),
      driftPpm: s.driftPpm,
      gapMaxMs: nat(NP_GAP_MAX_MS),
      gapsOver20Ms: nat(NP_GAPS_OVER_20MS),
      rttMs: net ? nat(NP_RTT_MS) : NaN,
      rttMinMs: net ? nat(NP_RTT_MIN_MS) : NaN,
      offsetUs: net ? nat(NP_OFFSET_US) : NaN,
      clockExchanges: nat(NP_EXCHANGES),
      sendQueueMs: nat(NP_SEND_QUEUE_MS),
      txPackets: nat(NP_TX_PACKETS),
      txSkipped: nat(NP_TX_SKIPPED),
      sendBufferedBytes: nat(NP_BUFFERED),
      stampLagMs: net ? nat(NP_STAMP_LAG_MS) : NaN,
      lateUnderruns: s.lateUnderruns,
      stallUnderruns: s.stallUnderruns,
      senderGaps: s.senderGaps,
      senderGapMs: s.senderGapMs,
      stretched: s.stretched,
      oracleMs: ms(s.oracleFrames),
      echoRequestsDropped: nat(NP_ECHO_DROPPED),
    };
  }
  return {
    underruns: globals.underruns,
    quanta: globals.quanta,
    perPeer,
    captureGaps: globals.captureGaps,
    captureGapMs: globals.captureGapMs,
    localStalls: globals.localStalls,
  };
}
