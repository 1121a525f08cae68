// Turns the recording ring's records (one quantum of one track each) into the chunks that are
// stored: per track, CHUNK_QUANTA quanta of interleaved float32 on the recording's common
// timeline. Pure and synchronous: the recorder worker feeds it and stores what it hands out.
//
// Sample alignment comes from the worklet: every track's record for a quantum carries the same
// quantum number, so a chunk's startFrame is exact. A quantum missing from a track (a participant
// who joined late or left, or a record the full ring refused) ends that track's chunk; export
// fills the gap with silence.

import type { Chunk, TrackMeta } from '../store/schema';
import { RECORD_TRACK_SAMPLES, TRACK_INPUT, TRACK_MIX, TRACK_PEER_BASE } from '../audio/engine-core';

export const QUANTUM = 128;
/** Quanta per stored chunk: 24576 frames, 0.512 s at 48 kHz. */
export const CHUNK_QUANTA = 192;
/** First track number given to a ring tag whose participant changed while recording. */
const REASSIGNED_BASE = 1000;

export interface TrackInfo {
  kind: TrackMeta['kind'];
  name: string;
  channels: 1 | 2;
}

interface Open {
  meta: TrackMeta;
  /** Interleaved samples of the chunk being filled. */
  data: Float32Array;
  /** Quanta in `data`. */
  quanta: number;
  /** The chunk's first quantum on the timeline. */
  startQuantum: number;
  /** The quantum expected next, -1 before the first. */
  next: number;
  index: number;
}

/** Ring tag of a track: mix, input, or a peer's slot. */
export function trackTag(kind: 'mix' | 'input'): number;
export function trackTag(kind: 'peer', slot: number): number;
export function trackTag(kind: TrackMeta['kind'], slot = 0): number {
  return kind === 'mix' ? TRACK_MIX : kind === 'input' ? TRACK_INPUT : TRACK_PEER_BASE + slot;
}

export class TrackAssembler {
  /** Tracks by number. */
  private readonly tracks = new Map<number, Open>();
  /** Which track a ring tag writes to now. */
  private readonly byTag = new Map<number, number>();
  private readonly info = new Map<number, TrackInfo>();
  private readonly done: Chunk[] = [];
  private nextReassigned = REASSIGNED_BASE;
  /** Frames from the recording's start to the end of the latest quantum seen. */
  frames = 0;
  /** Records refused as malformed (wrong length or a tag with no place). */
  rejected = 0;
  /** Quanta missing inside a track's span: gaps that export fills with silence. */
  missingQuanta = 0;

  constructor(
    readonly recordingId: string,
    private readonly chunkQuanta = CHUNK_QUANTA,
  ) {}

  /**
   * Names the track a ring tag writes to. If that tag already wrote audio under another name (a
   * slot given to a new participant), its audio from now on goes to a new track.
   */
  setTrackInfo(tag: number, info: TrackInfo): void {
    const prev = this.info.get(tag);
    this.info.set(tag, info);
    const number = this.byTag.get(tag);
    if (number === undefined) return;
    const open = this.tracks.get(number)!;
    if (prev && prev.name === info.name && prev.kind === info.kind) return;
    if (open.meta.startFrame < 0) {
      // No audio yet: just rename it.
      open.meta = { ...open.meta, name: info.name, kind: info.kind };
      return;
    }
    this.finishChunk(open);
    this.byTag.delete(tag);
  }

  /** Adds one quantum of a track: `planar` holds left then right (RECORD_TRACK_SAMPLES). */
  push(tag: number, quantum: number, planar: Float32Array): void {
    if (planar.length !== RECORD_TRACK_SAMPLES || !Number.isInteger(quantum) || quantum < 0) {
      this.rejected++;
      return;
    }
    const open = this.track(tag);
    if (open.next >= 0 && quantum !== open.next) {
      if (quantum > open.next) this.missingQuanta += quantum - open.next;
      this.finishChunk(open);
    }
    if (open.quanta === 0) open.startQuantum = quantum;
    if (open.meta.startFrame < 0) open.meta = { ...open.meta, startFrame: quantum * QUANTUM };
    const ch = open.meta.channels;
    const d = open.data;
    let o = open.quanta * QUANTUM * ch;
    if (ch === 2) {
      for (let i = 0; i < QUANTUM; i++) {
        d[o++] = planar[i];
        d[o++] = planar[QUANTUM + i];
      }
    } else {
      d.set(planar.subarray(0, QUANTUM), o);
    }
    open.quanta++;
    open.next = quantum + 1;
    this.frames = Math.max(this.frames, (quantum + 1) * QUANTUM);
    if (open.quanta === this.chunkQuanta) this.finishChunk(open);
  }

  /** Chunks completed since the last call; with `all`, also the partly filled ones. */
  take(all = false): Chunk[] {
    if (all) for (const open of this.tracks.values()) this.finishChunk(open);
    return this.done.splice(0, this.done.length);
  }

  /** Every track that has audio, in track order. */
  trackList(): TrackMeta[] {
    return [...this.tracks.values()]
      .map((o) => o.meta)
      .filter((m) => m.startFrame >= 0)
      .sort((a, b) => a.track - b.track);
  }

  private track(tag: number): Open {
    let number = this.byTag.get(tag);
    if (number === undefined) {
      number = this.tracks.has(tag) ? this.nextReassigned++ : tag;
      this.byTag.set(tag, number);
      const info = this.info.get(tag) ?? defaultInfo(tag);
      this.tracks.set(number, {
        meta: { track: number, kind: info.kind, name: info.name, channels: info.channels, startFrame: -1 },
        data: new Float32Array(this.chunkQuanta * QUANTUM * info.channels),
        quanta: 0,
        startQuantum: 0,
        next: -1,
        index: 0,
      });
    }
    return this.tracks.get(number)!;
  }

  private finishChunk(open: Open): void {
    if (open.quanta === 0) return;
    const ch = open.meta.channels;
    const frames = open.quanta * QUANTUM;
    this.done.push({
      recordingId: this.recordingId,
      track: open.meta.track,
      index: open.index++,
      startFrame: open.startQuantum * QUANTUM,
      frames,
      channels: ch,
      data: open.data.slice(0, frames * ch).buffer,
    });
    open.quanta = 0;
  }
}

function defaultInfo(tag: number): TrackInfo {
  if (tag === TRACK_MIX) return { kind: 'mix', name: 'Mix', channels: 2 };
  if (tag === TRACK_INPUT) return { kind: 'input', name: 'Me', channels: 2 };
  return { kind: 'peer', name: `Participant ${tag - TRACK_PEER_BASE + 1}`, channels: 2 };
}
