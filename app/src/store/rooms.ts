// Recent rooms and the mix remembered per room and participant name.
//
// A room's record is written at each join (`lastJoined`). The strip the user sets for a
// participant (fader, pan, mute) is remembered under (room, participant name) and applied when a
// participant of that name appears in that room again: names are what survives a rejoin, peer
// ids are new each time. Solo is not remembered (see RememberedStrip in schema.ts).
//
// A private room's key is kept with its record, so the recent list opens the private room and
// not another one of the same name; joining the room by its name alone forgets the key.

import type { MixMemory, StripSettings } from '../room/types';
import { db, newestFirst } from './db';
import type { RememberedStrip, RoomRecord } from './schema';
import { isRoomKey, isRoomName, NAME_MAX, RECENT_MAX, validCount, validMix } from './validate';

export interface RecentRoom {
  name: string;
  lastJoined: number;
  /** The private room's key, absent for an open room. */
  key?: string;
}

/** Rooms when there is no database. */
const memory = new Map<string, RoomRecord>();

function validRoom(v: unknown): RoomRecord | null {
  const o = v && typeof v === 'object' ? (v as Record<string, unknown>) : null;
  if (!o || !isRoomName(o.name)) return null;
  const r: RoomRecord = { name: o.name, lastJoined: validCount(o.lastJoined), mix: validMix(o.mix) };
  if (isRoomKey(o.key)) r.key = o.key;
  return r;
}

function recent(r: RoomRecord): RecentRoom {
  return r.key
    ? { name: r.name, lastJoined: r.lastJoined, key: r.key }
    : { name: r.name, lastJoined: r.lastJoined };
}

/** Recent rooms, newest first, at most `limit`. */
export async function recentRooms(limit = RECENT_MAX): Promise<RecentRoom[]> {
  const conn = await db();
  if (!conn) {
    const all = [...memory.values()].sort((a, b) => b.lastJoined - a.lastJoined);
    return all.slice(0, limit).map(recent);
  }
  return newestFirst(conn, 'rooms', 'lastJoined', limit, (v) => {
    const r = validRoom(v);
    return r && recent(r);
  });
}

async function getRoom(name: string): Promise<RoomRecord | null> {
  const conn = await db();
  if (!conn) return memory.get(name) ?? null;
  return validRoom(await conn.get('rooms', name));
}

/** Reads, changes and writes one room in one transaction (no other awaits inside). */
async function updateRoom(name: string, change: (r: RoomRecord) => void): Promise<void> {
  if (!isRoomName(name)) throw new Error(`not a room name: ${JSON.stringify(name)}`);
  const conn = await db();
  if (!conn) {
    const r = memory.get(name) ?? { name, lastJoined: 0, mix: {} };
    change(r);
    memory.set(name, r);
    return;
  }
  try {
    const tx = conn.transaction('rooms', 'readwrite');
    const r = validRoom(await tx.store.get(name)) ?? { name, lastJoined: 0, mix: {} };
    change(r);
    await Promise.all([tx.store.put(r), tx.done]);
  } catch (err) {
    console.warn(`rooms: ${name} not saved: ${String(err)}`);
  }
}

/** Marks `room` as joined now (it becomes the newest recent room), with its key if private. */
export function touchRoom(room: string, at = Date.now(), key: string | null = null): Promise<void> {
  return updateRoom(room, (r) => {
    r.lastJoined = at;
    if (key) r.key = key;
    else delete r.key;
  });
}

/** The strips remembered for `room`, by participant name. */
export async function loadMix(room: string): Promise<Record<string, RememberedStrip>> {
  return (await getRoom(room))?.mix ?? {};
}

export function toRemembered(s: StripSettings): RememberedStrip {
  return { gainDb: s.gainDb, pan: s.pan, mute: s.mute };
}

/** Remembers strips for `room` (merged into what is stored). */
export function rememberStrips(room: string, strips: Record<string, RememberedStrip>): Promise<void> {
  return updateRoom(room, (r) => {
    Object.assign(r.mix, strips);
  });
}

/** How long strip changes gather before one write: a fader drag is tens of changes a second. */
const WRITE_AFTER_MS = 300;

/** The session's hook (JoinRequest.mixMemory) backed by this store: `get` answers from what was
 * loaded at join, `set` keeps the change and writes it shortly after, with others made meanwhile. */
export interface RoomMixMemory extends MixMemory {
  /** Resolves once the stored mix is loaded (joins take longer than this; tests wait on it). */
  readonly loaded: Promise<void>;
  /** Writes pending changes now. */
  flush(): Promise<void>;
}

export function mixMemory(room: string): RoomMixMemory {
  const known = new Map<string, RememberedStrip>();
  const dirty = new Map<string, RememberedStrip>();
  let timer: ReturnType<typeof setTimeout> | null = null;
  let writing: Promise<void> = Promise.resolve();
  const loaded = loadMix(room).then(
    (mix) => {
      // A change made before the load finished wins over the stored one.
      for (const [name, s] of Object.entries(mix)) if (!known.has(name)) known.set(name, s);
    },
    (err: unknown) => console.warn(`rooms: mix of ${room} not loaded: ${String(err)}`),
  );
  const flush = (): Promise<void> => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (dirty.size === 0) return writing;
    const batch = Object.fromEntries(dirty);
    dirty.clear();
    writing = writing.then(() => rememberStrips(room, batch));
    return writing;
  };
  return {
    loaded,
    get(name) {
      const s = known.get(name);
      return s ? { ...s } : undefined;
    },
    set(name, strip) {
      if (name.length === 0 || name.length > NAME_MAX) return;
      const s = toRemembered(strip);
      known.set(name, s);
      dirty.set(name, s);
      timer ??= setTimeout(() => void flush(), WRITE_AFTER_MS);
    },
    flush,
  };
}

/** Forgets the in-memory rooms (tests). */
export function resetRoomsMemory(): void {
  memory.clear();
}
