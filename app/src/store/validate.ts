// Validation of stored values. Whatever comes back from storage is untrusted (older versions,
// other tabs, hand edits): each function here returns a well-formed value, with anything
// malformed read as its default. Pure functions, no storage access.

import {
  DEFAULT_BUFFER_SETTING,
  FIXED_PACKETS_MAX,
  FIXED_PACKETS_MIN,
  type BufferSetting,
} from '../audio/buffer-policy';
import type { AudioSettings } from '../room/types';
import { ROOM_KEY, ROOM_NAME } from '../ui/route';
import type { RememberedStrip, StageSummary } from './schema';

export const NAME_MAX = 64;
/** Latency stages kept per participant in a session record, and the length of their names. */
export const STAGES_MAX = 16;
export const STAGE_NAME_MAX = 32;
/** Recent rooms shown; the database may keep more. */
export const RECENT_MAX = 8;
const BLOCKS = [32, 64, 128, 256] as const;

export const DEFAULT_BUFFER: BufferSetting = DEFAULT_BUFFER_SETTING;
export const DEFAULT_AUDIO: AudioSettings = {
  inputDeviceId: '',
  outputDeviceId: '',
  channels: 1,
  blockFrames: 128,
  buffer: DEFAULT_BUFFER,
};

function record(v: unknown): Record<string, unknown> {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

export function validName(v: unknown): string {
  return typeof v === 'string' ? v.trim().slice(0, NAME_MAX) : '';
}

/** Room names as links carry them (route.ts accepts the same). */
export function isRoomName(v: unknown): v is string {
  return typeof v === 'string' && ROOM_NAME.test(v);
}

/** A private room's key as links carry it. */
export function isRoomKey(v: unknown): v is string {
  return typeof v === 'string' && ROOM_KEY.test(v);
}

export function validBuffer(v: unknown): BufferSetting {
  const o = record(v);
  if (o.mode === 'fixed') {
    const n = o.packets;
    if (typeof n === 'number' && Number.isInteger(n) && n >= FIXED_PACKETS_MIN && n <= FIXED_PACKETS_MAX) {
      return { mode: 'fixed', packets: n };
    }
  }
  return { ...DEFAULT_BUFFER };
}

export function validAudio(v: unknown): AudioSettings {
  const o = record(v);
  const block = o.blockFrames;
  return {
    inputDeviceId: typeof o.inputDeviceId === 'string' ? o.inputDeviceId : DEFAULT_AUDIO.inputDeviceId,
    outputDeviceId: typeof o.outputDeviceId === 'string' ? o.outputDeviceId : DEFAULT_AUDIO.outputDeviceId,
    channels: o.channels === 2 ? 2 : o.channels === 1 ? 1 : DEFAULT_AUDIO.channels,
    blockFrames: BLOCKS.includes(block as (typeof BLOCKS)[number])
      ? (block as AudioSettings['blockFrames'])
      : DEFAULT_AUDIO.blockFrames,
    buffer: validBuffer(o.buffer),
  };
}

/** A remembered strip, or null when nothing usable is stored. Gains clamp to the fader's range
 * (-60..+12 dB, below -60 is off), pan to -1..+1. */
export function validStrip(v: unknown): RememberedStrip | null {
  const o = record(v);
  const g = o.gainDb;
  const p = o.pan;
  if (typeof g !== 'number' || Number.isNaN(g) || typeof p !== 'number' || !Number.isFinite(p)) return null;
  if (typeof o.mute !== 'boolean') return null;
  return {
    gainDb: g <= -60 ? -Infinity : Math.min(12, g),
    pan: Math.max(-1, Math.min(1, p)),
    mute: o.mute,
  };
}

/** The strips of a room's `mix`, malformed entries dropped. */
export function validMix(v: unknown): Record<string, RememberedStrip> {
  const out: Record<string, RememberedStrip> = {};
  for (const [name, s] of Object.entries(record(v))) {
    const strip = validStrip(s);
    if (strip && name.length > 0 && name.length <= NAME_MAX) out[name] = strip;
  }
  return out;
}

/** A finite, non-negative number (times, counters), else `fallback`. */
export function validCount(v: unknown, fallback = 0): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : fallback;
}

/** A stage's summary when all its figures are finite and non-negative, else null. */
export function validStage(v: unknown): StageSummary | null {
  const o = record(v);
  const [p50, p95, p99, max, count] = [o.p50, o.p95, o.p99, o.max, o.count].map((x) => validCount(x, NaN));
  if ([p50, p95, p99, max, count].some(Number.isNaN)) return null;
  return { p50, p95, p99, max, count };
}

/** Stages by name: entries with a malformed summary or a name of 0 or over STAGE_NAME_MAX
 * characters dropped, the first STAGES_MAX of the rest kept. */
export function validStages(v: unknown): Record<string, StageSummary> {
  const out: [string, StageSummary][] = [];
  for (const [name, raw] of Object.entries(record(v))) {
    if (out.length >= STAGES_MAX) break;
    const stage = validStage(raw);
    if (stage && name.length > 0 && name.length <= STAGE_NAME_MAX) out.push([name, stage]);
  }
  // fromEntries defines own properties: a stage named "__proto__" stays a plain entry.
  return Object.fromEntries(out);
}
