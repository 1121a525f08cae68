// Settings: the display name and the audio settings, in the `settings` store (one key each).
// Reads validate (validate.ts); when storage is unavailable the values live in memory for this
// page's life (db.ts says so to the user).

import type { AudioSettings } from '../room/types';
import { db } from './db';
import type { SettingsKey, SettingsValues } from './schema';
import { DEFAULT_AUDIO, validAudio, validName } from './validate';

export interface Settings {
  name: string;
  audio: AudioSettings;
}

export function defaultSettings(): Settings {
  return { name: '', audio: structuredClone(DEFAULT_AUDIO) };
}

/** Values kept when there is no database (and the last values written, either way). */
let memory: Settings = defaultSettings();

export async function loadSettings(): Promise<Settings> {
  const conn = await db();
  if (!conn) return structuredClone(memory);
  const tx = conn.transaction('settings');
  const [name, audio] = await Promise.all([tx.store.get('name'), tx.store.get('audio'), tx.done]);
  memory = { name: validName(name), audio: validAudio(audio) };
  return structuredClone(memory);
}

async function put<K extends SettingsKey>(key: K, value: SettingsValues[K]): Promise<void> {
  const conn = await db();
  if (!conn) return;
  try {
    await conn.put('settings', value, key);
  } catch (err) {
    // Quota or a closing connection: the value stays in memory for this page.
    console.warn(`settings: ${key} not saved: ${String(err)}`);
  }
}

export async function saveName(name: string): Promise<void> {
  const v = validName(name);
  memory = { ...memory, name: v };
  await put('name', v);
}

export async function saveAudio(audio: AudioSettings): Promise<void> {
  // Stored as validated, so what is read back equals what was kept.
  const v = validAudio(audio);
  memory = { ...memory, audio: v };
  await put('audio', v);
}

/** Forgets the in-memory values (tests). */
export function resetSettingsMemory(): void {
  memory = defaultSettings();
}
