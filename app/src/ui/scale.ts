// Number ↔ screen mappings for meters, faders and figures. Pure, so they are unit-tested.

/** Meters show -60..0 dBFS, linear in dB. */
export const METER_FLOOR_DB = -60;
/** Faders run -60..+12 dB; the bottom position means off (-Infinity). */
export const FADER_MIN_DB = -60;
export const FADER_MAX_DB = 12;

/** Fraction 0..1 of a meter's length for a level in dBFS (-Infinity and NaN → 0). */
export function meterFraction(db: number): number {
  if (!(db > METER_FLOOR_DB)) return 0;
  if (db >= 0) return 1;
  return (db - METER_FLOOR_DB) / -METER_FLOOR_DB;
}

/** A fader position (dB, as the range input holds it) to the gain the engine gets. */
export function faderToGainDb(pos: number): number {
  if (!(pos > FADER_MIN_DB)) return -Infinity;
  return Math.min(FADER_MAX_DB, pos);
}

/** The engine's gain to a fader position. */
export function gainDbToFader(db: number): number {
  if (!(db > FADER_MIN_DB)) return FADER_MIN_DB;
  return Math.min(FADER_MAX_DB, db);
}

/** Pointer drags near 0 dB stick to 0 dB (within `width` dB), like a fader's centre detent. */
export function detent(db: number, width = 1): number {
  return Math.abs(db) <= width ? 0 : db;
}

/** "off", "0.0 dB", "+3.5 dB", "−12.0 dB" (a real minus sign, same width as plus). */
export function formatDb(db: number): string {
  if (!(db > FADER_MIN_DB)) return 'off';
  const v = Math.round(db * 10) / 10;
  if (v === 0) return '0.0 dB';
  return `${v > 0 ? '+' : '−'}${Math.abs(v).toFixed(1)} dB`;
}

/** "C", "L 40", "R 100" for pan -1..1. */
export function formatPan(pan: number): string {
  const p = Math.round(pan * 100);
  if (p === 0) return 'C';
  return p < 0 ? `L ${-p}` : `R ${p}`;
}

/** Milliseconds for a number of frames at a sample rate. */
export function framesToMs(frames: number, sampleRate = 48_000): number {
  return (frames / sampleRate) * 1000;
}

/** A figure with fixed decimals, or "–" when unknown. */
export function formatMs(ms: number | null, digits = 1): string {
  return ms === null || !Number.isFinite(ms) ? '–' : ms.toFixed(digits);
}
