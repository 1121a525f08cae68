// The IndexedDB store: settings, recent rooms and remembered mixes, session history, the upgrade
// from version 1, the import from the localStorage era, and storage that is missing or refused.
// Each test gets its own empty IndexedDB (fake-indexeddb).
import 'fake-indexeddb/auto';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  closeDB,
  db,
  LEGACY_KEYS,
  openLimits,
  openTutti,
  storageNote,
  type LegacyStore,
} from '../../app/src/store/db';
import { closeDangling, recentSessions, SessionLog, STALE_AFTER_MS } from '../../app/src/store/history';
import { loadMix, mixMemory, recentRooms, resetRoomsMemory, touchRoom } from '../../app/src/store/rooms';
import { DB_NAME, DB_VERSION } from '../../app/src/store/schema';
import { loadSettings, resetSettingsMemory, saveAudio, saveName } from '../../app/src/store/settings';
import { DEFAULT_AUDIO, RECENT_MAX, validAudio, validBuffer } from '../../app/src/store/validate';
import type { AudioSettings, ParticipantView, RoomView } from '../../app/src/room/types';
import { createV1 as createV1As } from '../browser/lib/idb.mjs';
import { freshDatabasePerTest, NOTHING_MEASURED, putRaw } from './idb';
import { participant, roomView } from './views';

freshDatabasePerTest();
beforeEach(() => {
  resetSettingsMemory();
  resetRoomsMemory();
});

/** Runs one raw IndexedDB request to completion. */
function done<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

/** Creates database version 1 as it was (tests/browser/lib/idb.mjs) under the app's name, filled. */
function createV1(rooms: unknown[], settings: [string, unknown][]): Promise<void> {
  return createV1As({ name: DB_NAME, rooms, settings });
}

function legacyStore(init: Record<string, string>): LegacyStore & { data: Map<string, string> } {
  const data = new Map(Object.entries(init));
  return { data, getItem: (k) => data.get(k) ?? null, removeItem: (k) => void data.delete(k) };
}

const FIXED6: AudioSettings = {
  inputDeviceId: 'mic-2',
  outputDeviceId: 'out-1',
  channels: 2,
  blockFrames: 64,
  buffer: { mode: 'fixed', packets: 6 },
};

describe('settings', () => {
  it('round-trips the name and the audio settings through the database', async () => {
    await saveName('  Ada  ');
    await saveAudio(FIXED6);
    resetSettingsMemory();
    await closeDB(); // a new connection: what is read comes from the database
    expect(await loadSettings()).toEqual({ name: 'Ada', audio: FIXED6 });
  });

  it('reads defaults with nothing stored', async () => {
    expect(await loadSettings()).toEqual({ name: '', audio: DEFAULT_AUDIO });
    expect(DEFAULT_AUDIO.buffer).toEqual({ mode: 'adaptive' });
  });

  it('reads malformed stored values as defaults', async () => {
    await putRaw('settings', 42, 'name');
    await putRaw(
      'settings',
      { inputDeviceId: 7, channels: 3, blockFrames: 100, buffer: { mode: 'fixed', packets: 40 } },
      'audio',
    );
    expect(await loadSettings()).toEqual({ name: '', audio: DEFAULT_AUDIO });
    await putRaw('settings', 'x'.repeat(100), 'name');
    await putRaw('settings', null, 'audio');
    const s = await loadSettings();
    expect(s.name).toHaveLength(64);
    expect(s.audio).toEqual(DEFAULT_AUDIO);
  });

  it('accepts fixed buffers of 2..16 whole packets only', () => {
    expect(validBuffer({ mode: 'fixed', packets: 2 })).toEqual({ mode: 'fixed', packets: 2 });
    expect(validBuffer({ mode: 'fixed', packets: 16 })).toEqual({ mode: 'fixed', packets: 16 });
    for (const bad of [1, 17, 6.5, NaN, '6', null]) {
      expect(validBuffer({ mode: 'fixed', packets: bad })).toEqual({ mode: 'adaptive' });
    }
    expect(validBuffer({ mode: 'other' })).toEqual({ mode: 'adaptive' });
    expect(validAudio({ ...FIXED6, extra: 1 })).toEqual(FIXED6);
  });
});

describe('rooms', () => {
  it('lists recent rooms newest first, at most 8, with when they were joined', async () => {
    for (let i = 0; i < 10; i++) await touchRoom(`room-${i}`, 1000 + i);
    await touchRoom('room-5', 2000);
    const list = await recentRooms();
    expect(list).toHaveLength(RECENT_MAX);
    expect(list[0]).toEqual({ name: 'room-5', lastJoined: 2000 });
    expect(list[1]).toEqual({ name: 'room-9', lastJoined: 1009 });
    expect(list.map((r) => r.name)).not.toContain('room-0');
    expect(await recentRooms(20)).toHaveLength(10); // the database keeps them all
    await expect(touchRoom('bad name')).rejects.toThrow(/not a room name/);
  });

  it('remembers gain, pan and mute per participant name, not solo', async () => {
    const m = mixMemory('band');
    await m.loaded;
    expect(m.get('Bea')).toBeUndefined();
    m.set('Bea', { gainDb: -7.5, pan: 0.25, mute: false, solo: true });
    m.set('Cy', { gainDb: -Infinity, pan: -1, mute: true, solo: false });
    m.set('Bea', { gainDb: -9, pan: 0.25, mute: false, solo: true }); // a later change wins
    await m.flush();
    await closeDB();
    const again = mixMemory('band');
    await again.loaded;
    expect(again.get('Bea')).toEqual({ gainDb: -9, pan: 0.25, mute: false });
    expect(again.get('Cy')).toEqual({ gainDb: -Infinity, pan: -1, mute: true });
    expect(await loadMix('other-room')).toEqual({});
    // Touching the room keeps its mix.
    await touchRoom('band', 5);
    expect(Object.keys(await loadMix('band')).sort()).toEqual(['Bea', 'Cy']);
  });

  it('drops malformed rooms and strips, clamps out-of-range ones', async () => {
    await putRaw('rooms', {
      name: 'ok-room',
      lastJoined: 'yesterday',
      mix: {
        Ann: { gainDb: 40, pan: 3, mute: false },
        Bob: { gainDb: 'loud', pan: 0, mute: false },
        Cat: { gainDb: -80, pan: 0, mute: 'yes' },
        Dan: { gainDb: -80, pan: -0.5, mute: true },
      },
    });
    await putRaw('rooms', { name: 'has space', lastJoined: 9 });
    expect(await recentRooms()).toEqual([{ name: 'ok-room', lastJoined: 0 }]);
    expect(await loadMix('ok-room')).toEqual({
      Ann: { gainDb: 12, pan: 1, mute: false },
      Dan: { gainDb: -Infinity, pan: -0.5, mute: true },
    });
  });
});

function view(joined: boolean, participants: ParticipantView[], engineUnderruns = 0): RoomView {
  return roomView(participants, { joined, engineUnderruns });
}

describe('history', () => {
  it('records start, end, names and per-participant figures', async () => {
    const log = new SessionLog('band');
    log.observe(view(false, []), 1000); // not accepted yet: no record
    expect(await recentSessions(5, 1000)).toEqual([]);
    log.observe(view(true, [participant('p1', 'Bea', { bufferMs: 10, latencyMs: 20, lossPct: 1 })]), 2000);
    log.observe(
      view(true, [participant('p1', 'Bea', { bufferMs: 30, latencyMs: 40, lossPct: 2, underruns: 3 })]),
      3000,
    );
    // Cy's link never connects: named, but no buffer figures.
    log.observe(
      view(
        true,
        [
          participant('p1', 'Bea', { bufferMs: 20, underruns: 4, lossPct: 2 }),
          participant('p2', 'Cy', { link: 'connecting' }),
        ],
        7,
      ),
      4000,
    );
    // Bea rejoins with a new peer id: her counters start again and add up.
    log.observe(view(true, [participant('p3', 'Bea', { bufferMs: 40, underruns: 1, lossPct: 0 })], 7), 5000);
    await log.end(65_000);
    const [rec] = await recentSessions(5, 70_000);
    expect(rec.room).toBe('band');
    expect(rec.startedAt).toBe(2000);
    expect(rec.endedAt).toBe(65_000);
    expect(rec.participants).toEqual(['Bea', 'Cy']);
    expect(rec.summary.engineUnderruns).toBe(7);
    const bea = rec.summary.participants.Bea;
    expect(bea.underruns).toBe(4 + 1);
    expect(bea.avgBufferMs).toBeCloseTo((10 + 30 + 20 + 40) / 4, 9);
    expect(bea.maxBufferMs).toBe(40);
    expect(bea.meanLatencyMs).toBeCloseTo(30, 9);
    // Loss: p1's last figure (2 %, over 3 samples) and p3's (0 %, 1 sample), weighed by samples.
    expect(bea.lossPct).toBeCloseTo((2 * 3 + 0 * 1) / 4, 9);
    expect(rec.summary.participants.Cy).toEqual(NOTHING_MEASURED);
  });

  it('counts a participant met within the last second before leaving', async () => {
    const log = new SessionLog('quick');
    log.observe(view(true, []), 1000); // sampled: nobody yet
    log.observe(view(true, [participant('p1', 'Dan', { bufferMs: 12 })]), 1400); // not sampled yet
    await log.end(1600);
    const [rec] = await recentSessions(5, 2000);
    expect(rec.participants).toEqual(['Dan']);
    expect(rec.summary.participants.Dan.avgBufferMs).toBe(12);
  });

  it('ends a session left without an end at its last update, unless it is recent', async () => {
    const log = new SessionLog('band');
    log.observe(view(true, [participant('p1', 'Bea')]), 10_000);
    await log.flush(20_000); // the page then closes without leaving
    expect(await closeDangling(20_000 + STALE_AFTER_MS - 1)).toBe(0); // may be another tab's
    const [running] = await recentSessions(5, 20_001);
    expect(running.endedAt).toBeNull();
    expect(await closeDangling(20_000 + STALE_AFTER_MS)).toBe(1);
    const [closed] = await recentSessions(5, 20_000 + STALE_AFTER_MS);
    expect(closed.endedAt).toBe(20_000);
    expect(closed.participants).toEqual(['Bea']);
  });

  it('lists newest first and skips malformed records', async () => {
    for (const [i, t] of [100, 300, 200].entries()) {
      const log = new SessionLog(`room-${i}`);
      log.observe(view(true, []), t);
      await log.end(t + 50);
    }
    await putRaw('sessions', { id: 'x', room: 'no spaces allowed', startedAt: 400 });
    await putRaw('sessions', { id: 'y', room: 'fine', startedAt: 'soon' });
    const list = await recentSessions(5, 1000);
    expect(list.map((s) => s.startedAt)).toEqual([300, 200, 100]);
    expect(await recentSessions(2, 1000)).toHaveLength(2);
  });
});

describe('schema upgrade', () => {
  it('keeps every value of version 1 and gives the new fields their defaults', async () => {
    const audioV1 = { inputDeviceId: 'mic', outputDeviceId: '', channels: 2, blockFrames: 32 };
    await createV1(
      [
        { name: 'quartet', lastJoined: 1700000000000 },
        { name: 'duo', lastJoined: 1600000000000 },
        { name: 'not a room', lastJoined: 5 },
      ],
      [
        ['name', 'Ada'],
        ['audio', audioV1],
        ['legacyImport', { at: 1 }],
      ],
    );
    const conn = await openTutti({ legacy: null });
    expect(conn.version).toBe(DB_VERSION);
    expect([...conn.objectStoreNames].sort()).toEqual([
      'chunks',
      'recordings',
      'rooms',
      'sessions',
      'settings',
    ]);
    expect(await conn.get('rooms', 'quartet')).toEqual({
      name: 'quartet',
      lastJoined: 1700000000000,
      mix: {},
    });
    expect(await conn.get('rooms', 'duo')).toEqual({ name: 'duo', lastJoined: 1600000000000, mix: {} });
    expect(await conn.count('rooms')).toBe(2); // the record that was not a room is dropped
    expect(await conn.get('settings', 'name')).toBe('Ada');
    expect(await conn.get('settings', 'audio')).toEqual(audioV1); // kept as stored; read validated
    expect(await conn.getAllKeysFromIndex('rooms', 'lastJoined')).toEqual(['duo', 'quartet']);
    const tx = conn.transaction(['sessions', 'recordings', 'chunks']);
    expect(tx.objectStore('sessions').indexNames.contains('startedAt')).toBe(true);
    expect(tx.objectStore('recordings').indexNames.contains('startedAt')).toBe(true);
    expect(tx.objectStore('chunks').indexNames.contains('recordingId')).toBe(true);
    expect(tx.objectStore('chunks').keyPath).toEqual(['recordingId', 'track', 'index']);
    conn.close();
    // Through the app's own reads: the version 1 audio settings gain the adaptive buffer.
    expect(await loadSettings()).toEqual({
      name: 'Ada',
      audio: { ...audioV1, buffer: { mode: 'adaptive' } },
    });
    expect(await recentRooms()).toEqual([
      { name: 'quartet', lastJoined: 1700000000000 },
      { name: 'duo', lastJoined: 1600000000000 },
    ]);
  });

  it('creates the current version from nothing', async () => {
    const conn = await openTutti({ legacy: null });
    expect(conn.version).toBe(DB_VERSION);
    expect(await conn.count('rooms')).toBe(0);
    conn.close();
  });
});

describe('import from localStorage', () => {
  it('imports name, recent rooms and audio once, validated, then removes the old keys', async () => {
    const legacy = legacyStore({
      [LEGACY_KEYS.name]: JSON.stringify('Bea'),
      [LEGACY_KEYS.recent]: JSON.stringify(['newest', 42, 'bad name', 'newest', 'older']),
      [LEGACY_KEYS.audio]: JSON.stringify({
        inputDeviceId: 'm',
        outputDeviceId: 'o',
        channels: 2,
        blockFrames: 64,
      }),
      'other.key': 'kept',
    });
    const conn = await openTutti({ legacy });
    expect(await conn.get('settings', 'name')).toBe('Bea');
    expect(await conn.get('settings', 'audio')).toEqual({
      inputDeviceId: 'm',
      outputDeviceId: 'o',
      channels: 2,
      blockFrames: 64,
      buffer: { mode: 'adaptive' },
    });
    const rooms = await conn.getAllFromIndex('rooms', 'lastJoined');
    expect(rooms.map((r) => r.name).reverse()).toEqual(['newest', 'older']);
    expect(rooms.every((r) => r.lastJoined > 0 && Object.keys(r.mix).length === 0)).toBe(true);
    expect([...legacy.data.keys()]).toEqual(['other.key']);
    conn.close();

    // Once: values put back in localStorage later are not imported again.
    legacy.data.set(LEGACY_KEYS.name, JSON.stringify('Someone else'));
    const again = await openTutti({ legacy });
    expect(await again.get('settings', 'name')).toBe('Bea');
    expect(legacy.data.has(LEGACY_KEYS.name)).toBe(true);
    again.close();
  });

  it('reads malformed old values as defaults and never overwrites values already in the database', async () => {
    await createV1([], [['name', 'Kept']]);
    const legacy = legacyStore({
      [LEGACY_KEYS.name]: JSON.stringify('Old'),
      [LEGACY_KEYS.recent]: '{not json',
      [LEGACY_KEYS.audio]: JSON.stringify({ channels: 5, blockFrames: 100 }),
    });
    const conn = await openTutti({ legacy });
    expect(await conn.get('settings', 'name')).toBe('Kept');
    expect(await conn.get('settings', 'audio')).toEqual(DEFAULT_AUDIO);
    expect(await conn.count('rooms')).toBe(0);
    expect(legacy.data.size).toBe(0);
    conn.close();
  });

  it('leaves the old keys in place when the import cannot be committed', async () => {
    const legacy = legacyStore({ [LEGACY_KEYS.name]: JSON.stringify('Bea') });
    const conn = await openTutti({ legacy: null });
    conn.close(); // a closed connection: the import's transaction cannot start
    const { importLegacy } = await import('../../app/src/store/db');
    await expect(importLegacy(conn, legacy)).rejects.toThrow();
    expect(legacy.data.get(LEGACY_KEYS.name)).toBe(JSON.stringify('Bea'));
  });
});

describe('storage unavailable or contended', () => {
  it('works in memory and says settings will not be remembered', async () => {
    const saved = globalThis.indexedDB;
    // @ts-expect-error: a browser with IndexedDB disabled
    delete globalThis.indexedDB;
    try {
      expect(await db()).toBeNull();
      expect(storageNote()).toMatch(/will not be remembered/);
      await saveName('Eve');
      await saveAudio(FIXED6);
      expect(await loadSettings()).toEqual({ name: 'Eve', audio: FIXED6 });
      await touchRoom('mem-room', 7);
      expect(await recentRooms()).toEqual([{ name: 'mem-room', lastJoined: 7 }]);
      const m = mixMemory('mem-room');
      m.set('Bea', { gainDb: -3, pan: 0, mute: false, solo: false });
      await m.flush();
      expect(await loadMix('mem-room')).toEqual({ Bea: { gainDb: -3, pan: 0, mute: false } });
    } finally {
      globalThis.indexedDB = saved;
    }
  });

  it('closes its connection when another tab opens a newer version', async () => {
    const conn = await db();
    expect(conn).not.toBeNull();
    await saveName('Ada');
    // Another tab with a newer build: its open must not be blocked by ours.
    const other = indexedDB.open(DB_NAME, DB_VERSION + 1);
    let blocked = false;
    other.onblocked = () => (blocked = true);
    const newer = await done(other);
    expect(blocked).toBe(false);
    expect(newer.version).toBe(DB_VERSION + 1);
    newer.close();
    // This page's code is now the older one: it goes on in memory, and says so calmly.
    expect(await db()).toBeNull();
    expect(storageNote()).toMatch(/newer version of Tutti is open in another tab/);
  });

  it('goes on in memory when an older tab never lets go, and upgrades once it does', async () => {
    await createV1([{ name: 'kept', lastJoined: 3 }], []);
    // An old tab's connection that ignores versionchange.
    const old = await done(indexedDB.open(DB_NAME, 1));
    const limit = openLimits.blockedMs;
    openLimits.blockedMs = 50;
    try {
      expect(await db()).toBeNull();
      expect(storageNote()).toMatch(/Another Tutti tab/);
      await saveName('Meanwhile'); // kept in memory
      expect((await loadSettings()).name).toBe('Meanwhile');
    } finally {
      openLimits.blockedMs = limit;
    }
    old.close();
    await closeDB();
    // The next page load upgrades, with the room kept.
    expect(await recentRooms()).toEqual([{ name: 'kept', lastJoined: 3 }]);
    expect(storageNote()).toBeNull();
  });
});
