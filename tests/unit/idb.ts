// The IndexedDB side of the store's unit tests: a fresh, empty database per test (fake-indexeddb),
// a raw write that bypasses the app's validation, and the summary the history keeps for a
// participant of whom nothing was measured.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { afterEach, beforeEach } from 'vitest';
import { closeDB, db } from '../../app/src/store/db';

/** Gives each test of the calling file its own empty IndexedDB, and closes the app's connection after. */
export function freshDatabasePerTest(): void {
  beforeEach(async () => {
    await closeDB();
    globalThis.indexedDB = new IDBFactory();
  });
  afterEach(async () => {
    await closeDB();
  });
}

/** Writes a raw value into a store of the current database (what a hand edit or an older build
 * could leave behind). */
export async function putRaw(
  store: 'settings' | 'rooms' | 'sessions',
  value: unknown,
  key?: string,
): Promise<void> {
  const conn = await db();
  if (!conn) throw new Error('no database');
  const tx = conn.transaction(store, 'readwrite');
  // Deliberately untyped: the point is to store what the types forbid.
  await (tx.store.put as (v: unknown, k?: string) => Promise<unknown>)(value, key);
  await tx.done;
}

/** A session summary's figures for a participant seen but never measured. */
export const NOTHING_MEASURED = {
  underruns: 0,
  lossPct: 0,
  avgBufferMs: 0,
  maxBufferMs: 0,
  meanLatencyMs: null,
};
