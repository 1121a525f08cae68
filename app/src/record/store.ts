// Recordings in IndexedDB: a `recordings` record per recording (RecordingMeta) and its audio in
// `chunks`, keyed [recordingId, track, index]. The recorder creates a recording, appends chunks as
// they come (each append one transaction with the meta's running totals, so a crash leaves the two
// consistent) and finishes it; the recordings page lists, reads and deletes.
//
// Reads never hold a whole recording: `trackChunks` walks a track with a cursor in short
// transactions of a few chunks each, so a caller may await other work (building Blobs) between
// chunks without an IndexedDB transaction committing under it.

import { db, type TuttiDB } from '../store/db';
import type { Chunk, RecordingMeta, TrackMeta } from '../store/schema';

export type { Chunk, RecordingMeta, TrackMeta };

export class StorageUnavailableError extends Error {
  constructor() {
    super('Recordings cannot be kept on this device: storage is not available.');
    this.name = 'StorageUnavailableError';
  }
}

export class RecordingNotFoundError extends Error {
  constructor(id: string) {
    super(`There is no recording ${id} (it may have been deleted).`);
    this.name = 'RecordingNotFoundError';
  }
}

async function conn(): Promise<TuttiDB> {
  const c = await db();
  if (!c) throw new StorageUnavailableError();
  return c;
}

/** An id for a new recording; made before `createRecording` so the recorder can take the
 * recording's lock (recovery.ts) before the record exists. */
export function newRecordingId(): string {
  return crypto.randomUUID();
}

/** All chunks of recording `id`, as a primary-key range (numbers span -Infinity..Infinity). */
function recordingRange(id: string): IDBKeyRange {
  return IDBKeyRange.bound([id, -Infinity, -Infinity], [id, Infinity, Infinity]);
}

function validTrack(v: unknown): TrackMeta | null {
  if (!v || typeof v !== 'object') return null;
  const o = v as Record<string, unknown>;
  if (typeof o.track !== 'number' || !Number.isInteger(o.track) || o.track < 0) return null;
  if (o.kind !== 'mix' && o.kind !== 'input' && o.kind !== 'peer') return null;
  if (o.channels !== 1 && o.channels !== 2) return null;
  return {
    track: o.track,
    kind: o.kind,
    name: typeof o.name === 'string' ? o.name : '',
    channels: o.channels,
    startFrame:
      typeof o.startFrame === 'number' && Number.isInteger(o.startFrame) && o.startFrame >= 0
        ? o.startFrame
        : 0,
  };
}

const count = (v: unknown): number =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0;

/** A stored meta read back (untrusted: other versions, hand edits), or null when unusable. */
export function validRecording(v: unknown): RecordingMeta | null {
  if (!v || typeof v !== 'object') return null;
  const o = v as Record<string, unknown>;
  if (typeof o.id !== 'string' || o.id === '') return null;
  if (typeof o.sampleRate !== 'number' || !Number.isInteger(o.sampleRate) || o.sampleRate < 1) return null;
  const state =
    o.state === 'recording' || o.state === 'complete' || o.state === 'interrupted' ? o.state : 'interrupted';
  const startedAt = count(o.startedAt);
  const tracks: TrackMeta[] = [];
  if (Array.isArray(o.tracks)) {
    for (const t of o.tracks) {
      const track = validTrack(t);
      if (track && !tracks.some((x) => x.track === track.track)) tracks.push(track);
    }
  }
  return {
    id: o.id,
    room: typeof o.room === 'string' ? o.room : '',
    startedAt,
    endedAt: typeof o.endedAt === 'number' && Number.isFinite(o.endedAt) ? o.endedAt : null,
    state,
    sampleRate: o.sampleRate,
    tracks,
    frames: count(o.frames),
    bytes: count(o.bytes),
  };
}

export interface NewRecording {
  /** From `newRecordingId()`; made here when absent. */
  id?: string;
  room: string;
  startedAt: number;
  sampleRate: number;
  tracks?: TrackMeta[];
}

/** Stores a new recording in state 'recording' with no audio yet. */
export async function createRecording(init: NewRecording): Promise<RecordingMeta> {
  const meta: RecordingMeta = {
    id: init.id ?? newRecordingId(),
    room: init.room,
    startedAt: init.startedAt,
    endedAt: null,
    state: 'recording',
    sampleRate: init.sampleRate,
    tracks: init.tracks ?? [],
    frames: 0,
    bytes: 0,
  };
  const c = await conn();
  await c.add('recordings', meta);
  return meta;
}

function checkChunk(id: string, ch: Chunk): void {
  if (ch.recordingId !== id) throw new RangeError(`chunk of recording ${ch.recordingId} appended to ${id}`);
  if (ch.channels !== 1 && ch.channels !== 2)
    throw new RangeError(`chunk with ${String(ch.channels)} channels`);
  if (
    !Number.isInteger(ch.startFrame) ||
    ch.startFrame < 0 ||
    !Number.isInteger(ch.frames) ||
    ch.frames < 0
  ) {
    throw new RangeError(`chunk with start ${ch.startFrame} and ${ch.frames} frames`);
  }
  if (ch.data.byteLength !== ch.frames * ch.channels * 4) {
    throw new RangeError(
      `chunk of ${ch.frames} frames x ${ch.channels} channels holds ${ch.data.byteLength} bytes`,
    );
  }
}

/**
 * Stores `chunks` and updates the meta (frames = `patch.frames`, bytes += the chunks' data bytes,
 * tracks when given) in ONE transaction: after a crash, meta and chunks agree. Malformed chunks
 * are a RangeError (nothing stored); a deleted recording is a RecordingNotFoundError.
 */
export async function appendChunks(
  id: string,
  chunks: readonly Chunk[],
  patch: { frames: number; tracks?: TrackMeta[] },
): Promise<RecordingMeta> {
  for (const ch of chunks) checkChunk(id, ch);
  const c = await conn();
  const tx = c.transaction(['recordings', 'chunks'], 'readwrite');
  const recs = tx.objectStore('recordings');
  const store = tx.objectStore('chunks');
  const done = tx.done.catch(() => {}); // awaited below when it matters; no unhandled rejection
  // Every request is issued before the first await, so the transaction stays active throughout.
  const puts = chunks.map((ch) => store.put(ch));
  const got = recs.get(id);
  const all = Promise.all(puts).catch(() => {});
  const meta = await got;
  if (!meta) {
    tx.abort();
    await Promise.all([all, done]);
    throw new RecordingNotFoundError(id);
  }
  let added = 0;
  for (const ch of chunks) added += ch.data.byteLength;
  const next: RecordingMeta = {
    ...meta,
    frames: patch.frames,
    bytes: meta.bytes + added,
    tracks: patch.tracks ?? meta.tracks,
  };
  await recs.put(next);
  await Promise.all(puts);
  await tx.done;
  return next;
}

async function update(id: string, change: (m: RecordingMeta) => RecordingMeta): Promise<RecordingMeta> {
  const c = await conn();
  const tx = c.transaction('recordings', 'readwrite');
  const meta = await tx.store.get(id);
  if (!meta) {
    tx.abort();
    await tx.done.catch(() => {});
    throw new RecordingNotFoundError(id);
  }
  const next = change(meta);
  await tx.store.put(next);
  await tx.done;
  return next;
}

/** Marks the recording complete at `endedAt` (Date.now() of the stop). */
export function finishRecording(id: string, endedAt: number): Promise<RecordingMeta> {
  return update(id, (m) => ({ ...m, state: 'complete', endedAt }));
}

/** An interrupted recording the user chose to keep: shown as complete from now on. */
export function keepRecording(id: string): Promise<RecordingMeta> {
  return update(id, (m) => ({
    ...m,
    state: 'complete',
    endedAt: m.endedAt ?? m.startedAt + (m.frames / m.sampleRate) * 1000,
  }));
}

/** Sets the meta's fields from what recovery computed (recovery.ts). */
export function markInterrupted(id: string, frames: number, bytes: number): Promise<RecordingMeta> {
  return update(id, (m) => ({
    ...m,
    state: 'interrupted',
    frames,
    bytes,
    endedAt: m.startedAt + (frames / m.sampleRate) * 1000,
  }));
}

/** Every recording, newest first; malformed records are skipped. Empty when storage is off. */
export async function listRecordings(): Promise<RecordingMeta[]> {
  const c = await db();
  if (!c) return [];
  const out: RecordingMeta[] = [];
  for (const v of (await c.getAllFromIndex('recordings', 'startedAt')).reverse()) {
    const m = validRecording(v);
    if (m) out.push(m);
  }
  return out;
}

export async function getRecording(id: string): Promise<RecordingMeta | null> {
  const c = await db();
  if (!c) return null;
  return validRecording(await c.get('recordings', id));
}

/** Deletes the meta and every chunk of the recording in one transaction. */
export async function deleteRecording(id: string): Promise<void> {
  const c = await conn();
  const tx = c.transaction(['recordings', 'chunks'], 'readwrite');
  await Promise.all([
    tx.objectStore('recordings').delete(id),
    // One request over the primary-key range [id, *, *]: the same chunks the 'recordingId'
    // index lists, removed without reading them.
    tx.objectStore('chunks').delete(recordingRange(id)),
    tx.done,
  ]);
}

/** Chunks per transaction while walking a range: a few MB at most, then the transaction ends. */
const BATCH_CHUNKS = 8;

/** Chunks in key order between `lower` and `upper` (inclusive), a few per transaction. */
async function* walk(
  lower: [string, number, number],
  upper: [string, number, number],
): AsyncGenerator<Chunk> {
  const c = await conn();
  let from: IDBKeyRange = IDBKeyRange.bound(lower, upper);
  for (;;) {
    const batch: Chunk[] = [];
    const tx = c.transaction('chunks', 'readonly');
    let cursor = await tx.store.openCursor(from);
    while (cursor && batch.length < BATCH_CHUNKS) {
      batch.push(cursor.value);
      cursor = await cursor.continue();
    }
    const more = cursor !== null;
    await tx.done;
    for (const ch of batch) yield ch;
    if (!more || batch.length === 0) return;
    const last = batch[batch.length - 1]!;
    from = IDBKeyRange.bound([last.recordingId, last.track, last.index], upper, true, false);
  }
}

/** One track's chunks in index order. */
export function trackChunks(id: string, track: number): AsyncGenerator<Chunk> {
  return walk([id, track, -Infinity], [id, track, Infinity]);
}

/** Every chunk of a recording, track by track. */
export function recordingChunks(id: string): AsyncGenerator<Chunk> {
  return walk([id, -Infinity, -Infinity], [id, Infinity, Infinity]);
}
