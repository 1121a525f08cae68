// One requestAnimationFrame loop for every meter on the page: meters draw at display rate from
// the latest snapshot they were given, and the loop stops when no meter is mounted.

type Draw = (now: number) => void;

const draws = new Set<Draw>();
let frame = 0;

function tick(now: number): void {
  for (const d of draws) d(now);
  frame = draws.size > 0 ? requestAnimationFrame(tick) : 0;
}

/** Calls `draw` once per displayed frame until the returned function is called. */
export function onFrame(draw: Draw): () => void {
  draws.add(draw);
  if (frame === 0 && typeof requestAnimationFrame === 'function') frame = requestAnimationFrame(tick);
  return () => {
    draws.delete(draw);
  };
}

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
