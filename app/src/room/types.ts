// What the room UI sees of a session, and what it may ask of it. The session (session.ts) owns
// the audio engine, the signaling client and the peer-to-peer mesh; the UI renders a RoomView
// snapshot, which the session replaces about ten times a second and whenever membership changes.

import type { BufferSetting } from '../audio/buffer-policy';
import type { HubLayer } from '../net/protocol';

/** Levels in dBFS; -Infinity is silence. */
export interface Levels {
  peakL: number;
  peakR: number;
  rmsL: number;
  rmsR: number;
}

/** A participant's mix settings, as the UI sets them. */
export interface StripSettings {
  /** Fader, dB; -Infinity is off. Range -60..+12. */
  gainDb: number;
  /** -1 (left) .. +1 (right). */
  pan: number;
  mute: boolean;
  solo: boolean;
}

export type LinkState = 'connecting' | 'connected' | 'reconnecting' | 'failed';

/**
 * Why a link to a peer was made anew (net/mesh.ts): its connection failed; it did not connect in
 * time; our send queue towards the peer stopped draining; the peer's did (it asked us to restart).
 */
export type RestartReason = 'failed' | 'timeout' | 'send-stall' | 'peer-send-stall';

/** Restarts of the link to one peer so far, by reason. */
export type RestartCounts = Record<RestartReason, number>;

export interface ParticipantView {
  /** Stable id for keyed lists (the peer id). */
  peer: string;
  /** Display name chosen by that participant: untrusted text, render it as text only. */
  name: string;
  /** 'jacktrip': a native JackTrip client, heard only through the hub; absent for a browser. */
  kind?: 'jacktrip';
  link: LinkState;
  /** The link's restarts so far, by reason; absent when the transport does not restart links. */
  restarts?: RestartCounts;
  levels: Levels;
  strip: StripSettings;
  /** Estimated one-way mouth-to-ear latency, ms; null until measured. */
  latencyMs: number | null;
  /** Network round trip, ms; null until measured. */
  rttMs: number | null;
  /** Jitter-buffer depth now, ms. */
  bufferMs: number;
  /** The adaptive buffer's target, ms. */
  targetMs: number;
  /** Packets lost of those expected, percent, over the session. */
  lossPct: number;
  underruns: number;
  /** Their own device's missed audio callbacks, seen in their packets' send stamps: holes in
   * what they send, heard by everyone at once (0 when none or not known). */
  senderGaps: number;
  /** Their format as received, e.g. "PCM16 stereo 128". Empty until the first packet. */
  format: string;
  /** What they take of our stream in a mesh (their path's controller chose it: as sent, or
   * Opus when it cannot carry PCM). */
  sending: HubLayer;
}

export type SignalingState = 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface RoomError {
  /** The server's error code (e.g. "wrong-password", "room-full") or a client-side one
   * ("no-microphone", "engine-unavailable", "no-webrtc", "network"). */
  code: string;
  /** A sentence for the user. */
  message: string;
  /** Date.now() from which trying again may help (the server asked to wait: too-many-attempts). */
  retryAt?: number;
}

/** The room as the welcome and later `room` messages describe it. */
export interface RoomAccess {
  /** This user owns the room: may lock it and remove members. */
  isOwner: boolean;
  /** Nobody new is admitted. */
  locked: boolean;
  /** The room has a password. */
  protected: boolean;
  /** The room was joined with a key (a private link): a guess of its name finds another room. */
  private: boolean;
}

/** How the room's packets travel, as the room view shows it. */
export interface TopologyView {
  /** mesh: a link to each participant; forward: one link to the hub, which forwards every
   * stream; mix: one link to the hub, which makes our mix on the server. */
  mode: 'mesh' | 'forward' | 'mix';
  /** The hub link's state while the room uses the hub; null otherwise. */
  hub: LinkState | null;
  /** The hub link's round trip, ms, while the room uses the hub and it is known; else null. */
  hubRttMs?: number | null;
  /** Why the mesh no longer fits ("5 players: 4 streams × …"); null while it fits or unknown. */
  advice: string | null;
  /** The server refused a hub link (hub-unavailable) since the last one that worked. */
  hubRefused: boolean;
  /** Why the server moved the room to the hub by itself (a player's uplink could not carry
   * the mesh); null once the topology changes again. */
  moved?: string | null;
  /** Through the hub: what it sends us (of the others in forward mode, our mix in mix mode), as
   * it last said, and its reason (the server's sentence: untrusted text, render it as text
   * only); null before it said anything and in the mesh. */
  layer?: { layer: HubLayer; reason: string } | null;
}

export interface RoomView {
  room: string;
  /** The private room's key (its link's fragment); null for an open room. */
  key: string | null;
  /** Known once joined (false until then). */
  access: RoomAccess;
  /** A passing message about a request the server refused (e.g. not the owner); null if none. */
  notice: string | null;
  self: { peer: string; name: string };
  signaling: SignalingState;
  /** Set when joining failed or the session ended with an error; null otherwise. */
  error: RoomError | null;
  /** True once the server accepted the join. */
  joined: boolean;
  participants: ParticipantView[];
  master: { gainDb: number; levels: Levels; limiterDb: number };
  /** This user's own input as the engine captures it. */
  input: { levels: Levels; channels: 1 | 2 };
  /** Hearing yourself through the engine-free local path. */
  monitor: { on: boolean; gainDb: number };
  /** Engine-wide counters. */
  engine: { underruns: number; peers: number; sampleRate: number; blockFrames: number };
  recording: RecordingView;
  echo: EchoView;
  topology: TopologyView;
}

/**
 * Round trips others measure through us: while we echo a participant, they hear their own sound
 * from us (and only they: everyone else keeps hearing us). Nobody gets that unasked.
 */
export interface EchoView {
  /** Requests waiting for the user's answer (RoomSession.answerEcho), in the order they came;
   * `seconds`: how long they would hear themselves at most. */
  requests: { peer: string; name: string; seconds: number }[];
  /** The participant we send their own sound back to now, if any (RoomSession.stopEcho). */
  echoing: { peer: string; name: string } | null;
  /** "Allow round-trip requests without asking", for this session. */
  autoAllow: boolean;
}

/** The session's recorder: every participant, the user's input and the mix as separate tracks. */
export interface RecordingView {
  state: 'idle' | 'starting' | 'recording' | 'stopping';
  /** The recording being made, or the last one made in this session. */
  id: string | null;
  /** Seconds stored so far. */
  seconds: number;
  bytes: number;
  /** Why the last start or recording failed; null if it did not. */
  error: string | null;
}

/** Everything the user picks before or while joining. */
export interface AudioSettings {
  /** MediaDeviceInfo.deviceId, or '' for the default device. */
  inputDeviceId: string;
  outputDeviceId: string;
  channels: 1 | 2;
  blockFrames: 32 | 64 | 128 | 256;
  /** Jitter buffer: adaptive (follows the measured jitter) or a fixed depth in packets. */
  buffer: BufferSetting;
}

export type { BufferSetting } from '../audio/buffer-policy';

export interface JoinRequest {
  room: string;
  /** A private room's key, from the link's fragment. */
  key?: string | null;
  name: string;
  password?: string;
  /** The owner secret kept for (room, key): sent in joins, replaced by what a welcome gives. */
  owner?: OwnerMemory;
  audio: AudioSettings;
  /** Strips remembered for this room by participant name: a participant's strip starts from
   * `get(name)` when they appear, and each change the user makes is passed to `set`. */
  mixMemory?: MixMemory;
}

export interface OwnerMemory {
  get(): string | null;
  set(secret: string): void;
}

export interface MixMemory {
  get(name: string): Partial<StripSettings> | undefined;
  set(name: string, strip: StripSettings): void;
}

export interface RoomSession {
  /** Current snapshot. */
  readonly view: RoomView;
  /** Calls `fn` with each new snapshot; returns an unsubscribe function. */
  subscribe(fn: (view: RoomView) => void): () => void;
  setStrip(peer: string, patch: Partial<StripSettings>): void;
  setMaster(gainDb: number): void;
  setMonitor(on: boolean, gainDb?: number): void;
  /** Owner only: how the room's packets travel (every member then switches). */
  setTopology?(mode: TopologyView['mode']): void;
  /** Per-peer engine and network counters (the stats view samples them every second). */
  counters?(): import('./session').SessionCounters;
  /** Per-stage latency histograms, when the engine provides them. */
  latencyStages?(): ReturnType<import('./session').Session['latencyStages']>;
  /** Starts recording every participant, the user's input and the mix. */
  startRecording(): Promise<void>;
  /** Stops recording; resolves once everything recorded is stored. */
  stopRecording(): Promise<void>;
  /** Joins again after a join error, with `password` ('' for none, after "no-password"; the
   * one given before when undefined); does nothing before the wait the server asked for is over
   * or after a removal. */
  retryPassword(password?: string): void;
  /** Owner only: locks or unlocks the room (the view follows the server's answer). */
  setLocked(locked: boolean): void;
  /** Owner only: removes a participant from the room. */
  removePeer(peer: string): void;
  /** Answers a participant's round-trip request (view.echo.requests). */
  answerEcho?(peer: string, allow: boolean): void;
  /** Stops sending a participant their own sound back (view.echo.echoing). */
  stopEcho?(): void;
  /** Allows round-trip requests without asking, for the rest of this session. */
  setEchoAutoAllow?(on: boolean): void;
  /** Leaves the room and releases microphone, audio context and connections. */
  leave(): Promise<void>;
}
