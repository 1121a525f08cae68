// Plain wording for times and durations in lists (recent rooms, session history).

const DAY_MS = 86_400_000;

function startOfDay(t: number): number {
  const d = new Date(t);
  d.setHours(0, 0, 0, 0);
  return d.getTime();
}

/** "today 18:05", "yesterday 21:40", "12 Nov 19:00", or "" for an unknown time (0). */
export function whenText(t: number, now = Date.now()): string {
  if (!(t > 0)) return '';
  const d = new Date(t);
  const hm = `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
  const days = Math.round((startOfDay(now) - startOfDay(t)) / DAY_MS);
  if (days === 0) return `today ${hm}`;
  if (days === 1) return `yesterday ${hm}`;
  const month = d.toLocaleString('en', { month: 'short' });
  return `${d.getDate()} ${month}${d.getFullYear() === new Date(now).getFullYear() ? '' : ` ${d.getFullYear()}`} ${hm}`;
}

/** "45 s", "12 min", "1 h 05 min". */
export function durationText(ms: number): string {
  if (!(ms >= 0)) return '';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min`;
  return `${Math.floor(min / 60)} h ${String(min % 60).padStart(2, '0')} min`;
}
