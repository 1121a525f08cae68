// What the app remembers between visits: display name, recent rooms, audio settings.
// localStorage for now, behind these few functions, so moving to IndexedDB touches only this file.
// Stored values are untrusted (older versions, hand edits): anything malformed reads as the default.

import type { AudioSettings } from '../room/types';

/** The part of the Web Storage API used here (tests pass a Map-backed one). */
export interface KeyValueStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

export const KEYS = { name: 'tutti.name', recent: 'tutti.recent', audio: 'tutti.audio' } as const;
export const RECENT_MAX = 8;
export const DEFAULT_AUDIO: AudioSettings = {
  inputDeviceId: '',
  outputDeviceId: '',
  channels: 1,
  blockFrames: 128,
  buffer: { mode: 'adaptive' },
};

function defaultStore(): KeyValueStore | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null; // storage disabled (e.g. some privacy modes throw on access)
  }
}

function read(store: KeyValueStore | null, key: string): unknown {
  try {
    const raw = store?.getItem(key);
    return raw == null ? undefined : JSON.parse(raw);
  } catch {
    return undefined;
  }
}

function write(store: KeyValueStore | null, key: string, value: unknown): void {
  try {
    store?.setItem(key, JSON.stringify(value));
  } catch {
    // Quota or disabled storage: the app works without remembering.
  }
}

export function loadName(store = defaultStore()): string {
  const v = read(store, KEYS.name);
  return typeof v === 'string' ? v.slice(0, 64) : '';
}

export function saveName(name: string, store = defaultStore()): void {
  write(store, KEYS.name, name.trim().slice(0, 64));
}

/** Recent rooms, newest first. */
export function loadRecent(store = defaultStore()): string[] {
  const v = read(store, KEYS.recent);
  if (!Array.isArray(v)) return [];
  const out: string[] = [];
  for (const r of v) {
    if (typeof r === 'string' && /^[A-Za-z0-9._~-]{1,64}$/.test(r) && !out.includes(r)) out.push(r);
    if (out.length === RECENT_MAX) break;
  }
  return out;
}

/** Puts `room` first, drops its older entry and anything beyond RECENT_MAX; returns the new list. */
export function addRecent(room: string, store = defaultStore()): string[] {
  const list = [room, ...loadRecent(store).filter((r) => r !== room)].slice(0, RECENT_MAX);
  write(store, KEYS.recent, list);
  return list;
}

export function loadAudio(store = defaultStore()): AudioSettings {
  const v = read(store, KEYS.audio);
  const o = v && typeof v === 'object' ? (v as Record<string, unknown>) : {};
  const block = o.blockFrames;
  return {
    inputDeviceId: typeof o.inputDeviceId === 'string' ? o.inputDeviceId : DEFAULT_AUDIO.inputDeviceId,
    outputDeviceId: typeof o.outputDeviceId === 'string' ? o.outputDeviceId : DEFAULT_AUDIO.outputDeviceId,
    channels: o.channels === 2 ? 2 : o.channels === 1 ? 1 : DEFAULT_AUDIO.channels,
    blockFrames: block === 32 || block === 64 || block === 128 || block === 256 ? block : DEFAULT_AUDIO.blockFrames,
    buffer: DEFAULT_AUDIO.buffer,
  };
}

export function saveAudio(settings: AudioSettings, store = defaultStore()): void {
  write(store, KEYS.audio, settings);
}
