// Each participant's clock offset, from the packet pump's exchanges (net/clock.ts) to the engine,
// which needs it to measure network one-way delays. Sent when it moves enough to matter, not at
// every view refresh.

import type { Control } from '../audio/engine-core';
import { NP_OFFSET_US, netPeerIndex } from '../net/pump';
import type { Participant } from './membership';

/** A peer's clock offset goes to the engine when it moves by more than this, µs... */
export const OFFSET_STEP_US = 50;
/** ...and no more often than this per peer, ms (the first estimate goes at once). */
export const OFFSET_EVERY_MS = 1000;

/**
 * Tells the engine each peer's clock offset (the pump's estimate, in the net stats `net`) when it
 * moved by more than OFFSET_STEP_US, at most once per OFFSET_EVERY_MS; NaN once it is lost.
 * Remembers what went in each participant (offsetSentUs, offsetSentAt).
 */
export function forwardClockOffsets(
  participants: Iterable<Participant>,
  net: Float64Array,
  control: (msg: Control) => void,
  now: number,
): void {
  for (const p of participants) {
    const offsetUs = net[netPeerIndex(p.slot, NP_OFFSET_US)];
    const sent = p.offsetSentUs;
    const known = Number.isFinite(offsetUs);
    if (!known && !Number.isFinite(sent)) continue;
    if (known && Number.isFinite(sent)) {
      if (Math.abs(offsetUs - sent) <= OFFSET_STEP_US || now - p.offsetSentAt < OFFSET_EVERY_MS) continue;
    }
    control({ type: 'clock-offset', slot: p.slot, offsetUs: known ? offsetUs : NaN });
    p.offsetSentUs = known ? offsetUs : NaN;
    p.offsetSentAt = now;
  }
}
