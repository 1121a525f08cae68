// Crash recovery. A live recorder holds the Web Lock `tutti-recording:<id>` for as long as it
// records (in whichever tab it runs); the browser releases it when that page closes or crashes. At
// start, a recording still in state 'recording' whose lock nobody holds was therefore cut short:
// its chunks are the truth (each append stored chunks and meta together, but a meta is only as
// new as its last append), so frames and bytes are recomputed from them and it becomes
// 'interrupted' until the user keeps or discards it.

import { listRecordings, markInterrupted, recordingChunks } from './store';
import type { RecordingMeta } from './store';

const LOCK_PREFIX = 'tutti-recording:';

/** The lock a recorder holds while recording `id`. */
export function recordingLockName(id: string): string {
  return LOCK_PREFIX + id;
}

/** Names of the locks held in this origin right now, or null when the browser has no Web Locks
 * (then no recording can be judged abandoned). */
async function heldLocks(): Promise<Set<string> | null> {
  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  if (!locks || typeof locks.query !== 'function') return null;
  const snapshot = await locks.query();
  const names = new Set<string>();
  for (const l of snapshot.held ?? []) if (l.name) names.add(l.name);
  return names;
}

/** Frames (the end of the latest chunk on the common timeline) and bytes of a recording's chunks. */
export async function measureChunks(id: string): Promise<{ frames: number; bytes: number }> {
  let frames = 0;
  let bytes = 0;
  for await (const ch of recordingChunks(id)) {
    bytes += ch.data.byteLength;
    frames = Math.max(frames, ch.startFrame + ch.frames);
  }
  return { frames, bytes };
}

/**
 * Marks every abandoned recording 'interrupted' (frames and bytes from its chunks, endedAt =
 * startedAt + its length) and returns all interrupted recordings not yet kept or discarded,
 * newest first. Never rejects: with no storage or no Web Locks it returns what it can.
 */
export async function recoverInterrupted(): Promise<RecordingMeta[]> {
  try {
    const all = await listRecordings();
    const live = all.filter((m) => m.state === 'recording');
    const held = live.length > 0 ? await heldLocks() : null;
    const out: RecordingMeta[] = [];
    for (const m of all) {
      if (m.state === 'interrupted') out.push(m);
      else if (m.state === 'recording' && held && !held.has(recordingLockName(m.id))) {
        const { frames, bytes } = await measureChunks(m.id);
        out.push(await markInterrupted(m.id, frames, bytes));
      }
    }
    return out;
  } catch (err) {
    console.warn(`recording recovery: ${String(err)}`);
    return [];
  }
}
