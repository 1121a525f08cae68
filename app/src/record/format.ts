// How recordings' figures read on screen: lengths, sizes, storage. Pure functions.

/** `m:ss` under an hour, `h:mm:ss` from an hour; seconds are floored (never shows more than
 * there is). */
export function formatDuration(seconds: number): string {
  const s = Number.isFinite(seconds) && seconds > 0 ? Math.floor(seconds) : 0;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** Decimal units as file managers show them: "0.4 MB", "12 MB", "1.5 GB". */
export function formatBytes(bytes: number): string {
  const b = Number.isFinite(bytes) && bytes > 0 ? bytes : 0;
  if (b >= 1e9) return `${(b / 1e9).toFixed(b >= 1e10 ? 0 : 1)} GB`;
  const mb = b / 1e6;
  return `${mb >= 10 ? Math.round(mb) : mb.toFixed(1)} MB`;
}

/** "X MB used of Y GB available", from navigator.storage.estimate(); null when unknown. */
export function formatStorage(estimate: { usage?: number; quota?: number } | null): string | null {
  if (!estimate || estimate.usage === undefined || estimate.quota === undefined) return null;
  return `${formatBytes(estimate.usage)} used of ${formatBytes(estimate.quota)} available`;
}
