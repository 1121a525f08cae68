// Meter ballistics: how a displayed level follows the measured one. Meters are updated once per
// snapshot of the session's view and glide between snapshots with CSS transitions (Meter.svelte).

/** Meter ballistics: how a displayed value follows the measured one, with peak hold. */
export interface Ballistics {
  shown: number;
  hold: number;
  holdAt: number;
}

/** Fall rate in meter fractions per second (1/3 ≈ 20 dB/s on a 60 dB scale). */
export const FALL_PER_S = 1 / 3;
/** How long the peak-hold line stays before it falls, ms. */
export const HOLD_MS = 1500;

/** Advances `b` to `now` given the measured fraction `target`: rises at once, falls smoothly. */
export function follow(b: Ballistics, target: number, now: number, dtMs: number): void {
  const fall = (FALL_PER_S * Math.min(dtMs, 100)) / 1000;
  b.shown = Math.max(target, b.shown - fall);
  if (target >= b.hold) {
    b.hold = target;
    b.holdAt = now;
  } else if (now - b.holdAt > HOLD_MS) {
    b.hold = Math.max(target, b.hold - fall);
  }
}
