// The one IndexedDB database, "tutti", opened through idb with the typed schema of schema.ts.
//
// Upgrades are a list of steps: STEPS[n - 1] takes the database from version n - 1 to n, and an
// open runs the missing ones in order inside the upgrade transaction. A new version appends a
// step (and bumps DB_VERSION); a step never changes once released. Steps create stores and
// indexes and rewrite records with requests on the upgrade transaction only (no awaits on other
// work, which would let the transaction commit early).
//
// The version before IndexedDB kept a few values in localStorage; the first open copies them in
// (validated) and marks the copy done, and only then removes the old keys.
//
// Storage may be missing or refused (private modes, disabled storage, a quota error, a newer
// version open in another tab): `db()` then resolves to null, the store modules keep values in
// memory for this page's life, and `storageNote()` says so in a sentence for the user.

import { openDB, type IDBPDatabase, type IDBPTransaction, type IndexNames, type StoreNames } from 'idb';
import { DB_NAME, DB_VERSION, type RoomRecord, type TuttiSchema } from './schema';
import { isRoomName, RECENT_MAX, validAudio, validName } from './validate';

export type TuttiDB = IDBPDatabase<TuttiSchema>;
type UpgradeTx = IDBPTransaction<TuttiSchema, StoreNames<TuttiSchema>[], 'versionchange'>;
export type Step = (db: TuttiDB, tx: UpgradeTx) => void;

export const STEPS: readonly Step[] = [
  // v1: settings and recent rooms.
  (db) => {
    db.createObjectStore('settings');
    db.createObjectStore('rooms', { keyPath: 'name' });
  },
  // v2: remembered mixes per room, session history, recordings.
  (db, tx) => {
    const rooms = tx.objectStore('rooms');
    rooms.createIndex('lastJoined', 'lastJoined');
    // Every v1 room gains an empty mix; a record that is not a room is dropped (a stored value
    // that cannot be read back must not fail the upgrade, which would lose everything else).
    const rewrite = async () => {
      for (let c = await rooms.openCursor(); c; c = await c.continue()) {
        const v: unknown = c.value;
        const o = v && typeof v === 'object' ? (v as Record<string, unknown>) : null;
        if (o && isRoomName(o.name)) {
          const lastJoined =
            typeof o.lastJoined === 'number' && Number.isFinite(o.lastJoined) ? o.lastJoined : 0;
          const room: RoomRecord = { ...(o as object), name: o.name, lastJoined, mix: {} };
          await c.update(room);
        } else {
          await c.delete();
        }
      }
    };
    rewrite().catch((err: unknown) => {
      console.warn(`rooms upgrade: ${String(err)}`);
      tx.abort();
    });
    db.createObjectStore('sessions', { keyPath: 'id' }).createIndex('startedAt', 'startedAt');
    db.createObjectStore('recordings', { keyPath: 'id' }).createIndex('startedAt', 'startedAt');
    db.createObjectStore('chunks', { keyPath: ['recordingId', 'track', 'index'] }).createIndex(
      'recordingId',
      'recordingId',
    );
  },
];

if (STEPS.length !== DB_VERSION)
  throw new Error(`schema: ${STEPS.length} upgrade steps for version ${DB_VERSION}`);

/** localStorage keys of the version before IndexedDB. */
export const LEGACY_KEYS = { name: 'tutti.name', recent: 'tutti.recent', audio: 'tutti.audio' } as const;

/** The part of the Web Storage API the import uses (tests pass a Map-backed one). */
export interface LegacyStore {
  getItem(key: string): string | null;
  removeItem(key: string): void;
}

/** How long an open blocked by another tab may wait before the app goes on in memory: a tab
 * that does not let go must not hold the page. (An open that is not blocked is waited for.) */
export const openLimits = { blockedMs: 3000 };

let opening: Promise<TuttiDB | null> | null = null;
let note: string | null = null;
const noteListeners = new Set<(note: string | null) => void>();

function setNote(text: string | null): void {
  note = text;
  for (const fn of noteListeners) fn(note);
}

/** A sentence for the user when settings cannot be kept on this device, else null. */
export function storageNote(): string | null {
  return note;
}

/** Calls `fn` now and whenever the storage note changes; returns an unsubscribe function. */
export function onStorageNote(fn: (note: string | null) => void): () => void {
  noteListeners.add(fn);
  fn(note);
  return () => noteListeners.delete(fn);
}

function defaultLegacy(): LegacyStore | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null; // some privacy modes throw on access
  }
}

/** Opens the database at the current version, running missing upgrade steps. Rejects when
 * storage is unavailable. Callers other than `db()` (tests) own the connection they get. */
export async function openTutti(
  opts: { legacy?: LegacyStore | null; onVersionChange?: () => void; onBlocked?: () => void } = {},
): Promise<TuttiDB> {
  if (typeof indexedDB === 'undefined') throw new Error('IndexedDB is not available');
  const conn = await openDB<TuttiSchema>(DB_NAME, DB_VERSION, {
    upgrade(db, oldVersion, newVersion, tx) {
      const target = newVersion ?? DB_VERSION;
      for (let v = oldVersion; v < target; v++) STEPS[v](db, tx);
    },
    blocked(current) {
      // Another tab has version `current` open and has not closed it yet; ours close on
      // versionchange (below), so this resolves as soon as that tab lets go.
      console.info(`storage: waiting for another tab to close database version ${current}`);
      opts.onBlocked?.();
    },
    blocking() {
      // Another tab wants a newer version: let it upgrade. Later calls reopen (or, if this
      // page's code is now the older one, go on in memory).
      conn.close();
      opts.onVersionChange?.();
    },
    terminated() {
      opts.onVersionChange?.();
    },
  });
  try {
    await importLegacy(conn, opts.legacy === undefined ? defaultLegacy() : opts.legacy);
  } catch (err) {
    // Not marked done: the next open tries again. The database itself is fine.
    console.warn(`storage: the old settings were not imported: ${String(err)}`);
  }
  return conn;
}

/**
 * Copies the localStorage era's name, recent rooms and audio settings in, once: values already in
 * the database win, malformed ones read as defaults. The old keys are removed only after the
 * transaction that marks the import done has committed.
 */
export async function importLegacy(conn: TuttiDB, legacy: LegacyStore | null): Promise<boolean> {
  if ((await conn.get('settings', 'legacyImport')) !== undefined) return false;
  const read = (key: string): unknown => {
    try {
      const raw = legacy?.getItem(key);
      return raw == null ? undefined : JSON.parse(raw);
    } catch {
      return undefined;
    }
  };
  const name = read(LEGACY_KEYS.name);
  const audio = read(LEGACY_KEYS.audio);
  const recentRaw = read(LEGACY_KEYS.recent);
  const recent: string[] = [];
  if (Array.isArray(recentRaw)) {
    for (const r of recentRaw) {
      if (isRoomName(r) && !recent.includes(r)) recent.push(r);
      if (recent.length === RECENT_MAX) break;
    }
  }
  const tx = conn.transaction(['settings', 'rooms'], 'readwrite');
  const settings = tx.objectStore('settings');
  const rooms = tx.objectStore('rooms');
  // All requests are queued before the first await, so the transaction stays active.
  const pending: Promise<unknown>[] = [];
  if (name !== undefined) {
    pending.push(
      settings.getKey('name').then((k) => (k === undefined ? settings.put(validName(name), 'name') : k)),
    );
  }
  if (audio !== undefined) {
    pending.push(
      settings.getKey('audio').then((k) => (k === undefined ? settings.put(validAudio(audio), 'audio') : k)),
    );
  }
  // The list was newest first with no times: keep the order with times a second apart, in the
  // past of any join made since.
  const now = Date.now();
  recent.forEach((room, i) => {
    pending.push(
      rooms
        .getKey(room)
        .then((k) =>
          k === undefined
            ? rooms.put({ name: room, lastJoined: now - (recent.length + i) * 1000, mix: {} })
            : k,
        ),
    );
  });
  pending.push(settings.put({ at: now }, 'legacyImport'));
  await Promise.all([...pending, tx.done]);
  for (const key of Object.values(LEGACY_KEYS)) {
    try {
      legacy?.removeItem(key);
    } catch {
      // Disabled storage: the marker already keeps the import from running twice.
    }
  }
  return true;
}

function describe(err: unknown): string {
  const name = err instanceof DOMException || err instanceof Error ? err.name : '';
  if (name === 'VersionError') {
    return 'A newer version of Tutti is open in another tab. Reload this page to keep your settings.';
  }
  return 'Settings and recent rooms will not be remembered on this device (storage is not available).';
}

/** The app's shared connection, or null when storage is unavailable (values then live in memory
 * for this page's life). Never rejects. */
export function db(): Promise<TuttiDB | null> {
  if (opening) return opening;
  const attempt: Promise<TuttiDB | null> = new Promise((resolve) => {
    let settled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    openTutti({
      onVersionChange: () => {
        if (opening === attempt) opening = null;
      },
      onBlocked: () => {
        timer ??= setTimeout(() => {
          settled = true;
          setNote(
            'Another Tutti tab is keeping settings busy: changes made here will not be remembered until this page is reloaded.',
          );
          resolve(null);
        }, openLimits.blockedMs);
      },
    }).then(
      (conn) => {
        clearTimeout(timer);
        if (settled) conn.close();
        else {
          setNote(null);
          resolve(conn);
        }
      },
      (err: unknown) => {
        clearTimeout(timer);
        console.warn(`storage unavailable: ${String(err)}`);
        if (!settled) {
          setNote(describe(err));
          resolve(null);
        }
      },
    );
  });
  opening = attempt;
  return attempt;
}

/**
 * Up to `limit` records of `store`, newest first by its time index `index`, each passed through
 * `keep` (a validator: null leaves the record out). One read-only transaction that awaits nothing
 * but its own cursor.
 */
export async function newestFirst<Name extends StoreNames<TuttiSchema>, T>(
  conn: TuttiDB,
  store: Name,
  index: IndexNames<TuttiSchema, Name>,
  limit: number,
  keep: (value: unknown) => T | null,
): Promise<T[]> {
  const out: T[] = [];
  const tx = conn.transaction(store);
  for (
    let c = await tx.store.index(index).openCursor(null, 'prev');
    c && out.length < limit;
    c = await c.continue()
  ) {
    const kept = keep(c.value);
    if (kept !== null) out.push(kept);
  }
  return out;
}

/** Closes the shared connection and forgets it (tests, and before deleting the database). */
export async function closeDB(): Promise<void> {
  const p = opening;
  opening = null;
  setNote(null);
  (await p)?.close();
}

let persistAsked = false;

/** Asks the browser to keep this origin's storage under pressure, once per page: called when
 * the user first joins a room or records, not on first load (a prompt on arrival means nothing). */
export function askPersistence(): void {
  if (persistAsked) return;
  persistAsked = true;
  const storage = (globalThis.navigator as Navigator | undefined)?.storage;
  if (storage && typeof storage.persist === 'function') {
    storage.persist().catch(() => {});
  }
}
