// The owner secrets this browser holds, one per (room, key), in localStorage: the welcome gives
// the secret to the member who created the room, and the next join to the same room (a reload,
// a rejoin tomorrow) sends it back to be the owner again.
//
// Kept small: at most OWNER_MAX entries, the oldest dropped when a new one comes; the server
// forgets a room some time after it empties, and a secret it no longer knows is harmless.
// Whatever is read back is untrusted (hand edits, other versions): a value that is not a secret
// of the right form reads as none. Storage may throw (private modes, quota): then nothing is
// kept, and the session goes on.

import { OWNER_SECRET } from '../net/protocol';
import type { OwnerMemory } from './types';

export const OWNER_PREFIX = 'tutti.owner:';
export const OWNER_MAX = 32;

/** The part of the Storage interface used here (localStorage, or a stand-in in tests). */
export type OwnerStorage = Pick<Storage, 'getItem' | 'setItem' | 'removeItem' | 'key' | 'length'>;

/** The storage key of (room, key): a private room and the open room of the same name differ. */
export function ownerStorageKey(room: string, key: string | null): string {
  return `${OWNER_PREFIX}${room}${key ? `#${key}` : ''}`;
}

interface Stored {
  secret: string;
  at: number;
}

function read(storage: OwnerStorage, k: string): Stored | null {
  try {
    const v: unknown = JSON.parse(storage.getItem(k) ?? 'null');
    if (!v || typeof v !== 'object') return null;
    const o = v as Record<string, unknown>;
    if (typeof o.secret !== 'string' || !OWNER_SECRET.test(o.secret)) return null;
    return { secret: o.secret, at: typeof o.at === 'number' && Number.isFinite(o.at) ? o.at : 0 };
  } catch {
    return null;
  }
}

/** Drops the oldest entries beyond OWNER_MAX - 1, making room for one more. */
function prune(storage: OwnerStorage, keep: string): void {
  const entries: [string, number][] = [];
  for (let i = 0; i < storage.length; i++) {
    const k = storage.key(i);
    if (k === null || !k.startsWith(OWNER_PREFIX) || k === keep) continue;
    entries.push([k, read(storage, k)?.at ?? 0]);
  }
  entries.sort((a, b) => a[1] - b[1]);
  for (const [k] of entries.slice(0, Math.max(0, entries.length - (OWNER_MAX - 1)))) storage.removeItem(k);
}

/** The owner memory of (room, key) in `storage` (null: none available, nothing kept). */
export function ownerMemory(
  room: string,
  key: string | null,
  storage: OwnerStorage | null,
  now: () => number = Date.now,
): OwnerMemory {
  const k = ownerStorageKey(room, key);
  return {
    get() {
      return storage ? (read(storage, k)?.secret ?? null) : null;
    },
    set(secret) {
      if (!storage || !OWNER_SECRET.test(secret)) return;
      try {
        if (read(storage, k)?.secret === secret) return;
        prune(storage, k);
        storage.setItem(k, JSON.stringify({ secret, at: now() }));
      } catch (err) {
        console.warn(`owner secret not kept: ${String(err)}`);
      }
    },
  };
}

/** localStorage when this page may use it, else null. */
export function browserStorage(): OwnerStorage | null {
  try {
    return typeof localStorage === 'undefined' ? null : localStorage;
  } catch {
    return null;
  }
}
