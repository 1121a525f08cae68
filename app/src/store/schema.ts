// The records Tutti keeps in IndexedDB, and the database's typed schema (database "tutti").
//
// Version history (db.ts holds one upgrade step per version):
//   v1  settings (key → value), rooms (keyPath 'name': { name, lastJoined })
//   v2  rooms gain `mix` (remembered strips by participant name) and an index on lastJoined;
//       sessions (history), recordings and chunks (multitrack recordings) are added.
//
// Everything read back is untrusted (older versions, other tabs, hand edits in devtools): the
// store modules validate values and read anything malformed as the default.

import type { DBSchema } from 'idb';
import type { AudioSettings } from '../room/types';

export const DB_NAME = 'tutti';
/** The current schema version: the number of steps in db.ts's STEPS. */
export const DB_VERSION = 2;

// ---- settings --------------------------------------------------------------------------------

/** What each key of the `settings` store holds once validated. */
export interface SettingsValues {
  /** The display name others see; '' until the user picks one. */
  name: string;
  audio: AudioSettings;
  /** Set once the values the localStorage era kept were copied in (db.ts). */
  legacyImport: { at: number };
}
export type SettingsKey = keyof SettingsValues;

// ---- rooms -----------------------------------------------------------------------------------

/** The part of a participant's strip remembered per room and name. Solo is not remembered: a
 * solo restored on the next visit would silence everyone else before anyone knew why. */
export interface RememberedStrip {
  /** Fader, dB; -Infinity is off. */
  gainDb: number;
  pan: number;
  mute: boolean;
}

/** A room as it was in version 1. */
export interface RoomRecordV1 {
  name: string;
  /** Date.now() of the last join. */
  lastJoined: number;
}

export interface RoomRecord extends RoomRecordV1 {
  /** By participant display name (names are what survive a rejoin; peer ids do not). */
  mix: Record<string, RememberedStrip>;
  /** A private room's key (its link's fragment); absent for an open room. Optional, so
   * records written before private rooms read the same. */
  key?: string;
}

// ---- session history -------------------------------------------------------------------------

/** What one participant's link did during a session, from the engine's and pump's counters. */
export interface ParticipantSummary {
  underruns: number;
  /** Packets lost of those expected, percent. */
  lossPct: number;
  /** Jitter-buffer depth averaged over the session's samples, ms. */
  avgBufferMs: number;
  maxBufferMs: number;
  /** Mean one-way latency estimate, ms; null when never measured. */
  meanLatencyMs: number | null;
  // The fields below came later (no schema step: records written before simply lack them).
  /** The engine's latency stages as they stood at the end (the histograms are cumulative), by
   * stage name (e.g. mouthToEar, jitterWait, network); absent when the engine published none. */
  stages?: Record<string, StageSummary>;
  /** The quality verdict over the session (stats/verdict.ts); null when its inputs were not
   * measured, absent together with `stages`. */
  verdict?: 'good' | 'fair' | 'poor' | null;
  /** Mean network round trip over the session, ms; absent (or null) when never measured. */
  rttMs?: number | null;
}

/** One latency stage's distribution over a session, ms. */
export interface StageSummary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
  /** Values the histogram holds. */
  count: number;
}

export interface SessionSummary {
  /** By participant display name. */
  participants: Record<string, ParticipantSummary>;
  /** Engine-wide underruns of the local output. */
  engineUnderruns: number;
}

export interface SessionRecord {
  /** Random id made at join. */
  id: string;
  room: string;
  startedAt: number;
  /** Null while the session runs; a session found without an end on the next start gets
   * `updatedAt` as its end (the page closed without a leave). */
  endedAt: number | null;
  /** Date.now() of the last write while it ran. */
  updatedAt: number;
  /** Display names seen in the room, in order of arrival. */
  participants: string[];
  summary: SessionSummary;
}

// ---- recordings ------------------------------------------------------------------------------

export interface TrackMeta {
  track: number;
  kind: 'mix' | 'input' | 'peer';
  name: string;
  channels: 1 | 2;
  startFrame: number;
}

export interface RecordingMeta {
  id: string;
  room: string;
  startedAt: number;
  endedAt: number | null;
  state: 'recording' | 'complete' | 'interrupted';
  sampleRate: number;
  tracks: TrackMeta[];
  frames: number;
  bytes: number;
}

export interface Chunk {
  recordingId: string;
  track: number;
  index: number;
  startFrame: number;
  frames: number;
  channels: 1 | 2;
  /** Interleaved float32 samples. */
  data: ArrayBuffer;
}

// ---- the schema ------------------------------------------------------------------------------

export interface TuttiSchema extends DBSchema {
  settings: {
    key: string;
    /** Validated per key by settings.ts; see SettingsValues. */
    value: unknown;
  };
  rooms: {
    key: string;
    value: RoomRecord;
    indexes: { lastJoined: number };
  };
  sessions: {
    key: string;
    value: SessionRecord;
    indexes: { startedAt: number };
  };
  recordings: {
    key: string;
    value: RecordingMeta;
    indexes: { startedAt: number };
  };
  chunks: {
    key: [string, number, number];
    value: Chunk;
    indexes: { recordingId: string };
  };
}
