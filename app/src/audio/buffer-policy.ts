// The jitter buffer's policy on the TypeScript side, in one place: the type every layer passes
// (the settings the user keeps, the engine configuration, the engine's control message, the
// JavaScript reference engine and the benchmark) and its defaults. The Rust core's defaults
// (core/src/jitter) are the same figures; a unit test reads them from the Rust source and compares.
//
// Two shapes:
// - the user's choice (BufferSetting): adaptive, or a fixed depth in packets;
// - what an engine runs (BufferPolicy): adaptive between a floor and a ceiling in frames, or the
//   fixed depth. `policyOf` turns the first into the second.

/** Frames in one render quantum: the adaptive floor's default. */
export const BUFFER_FLOOR_FRAMES = 128;
/** The adaptive buffer's ceiling: 160 ms at 48 kHz. It is far above what anyone can play in time
 * with, but a buffer that may not cover the stalls of a starved machine or a bursty path underruns
 * every few seconds instead; the figures show the depth it settled at. */
export const BUFFER_CEILING_FRAMES = 7680;

/** The fixed depth's bounds, in packets, as the settings accept them. */
export const FIXED_PACKETS_MIN = 2;
export const FIXED_PACKETS_MAX = 16;
/** JackTrip-WebRTC's fixed depth: the value offered when the user first picks the fixed mode, and
 * what an engine applies to a fixed-mode message that names no depth. */
export const FIXED_PACKETS_DEFAULT = 8;

/** What an engine runs. */
export type BufferPolicy =
  { mode: 'adaptive'; floorFrames: number; ceilingFrames: number } | { mode: 'fixed'; packets: number };

/** What the user chooses and the settings keep. */
export type BufferSetting = { mode: 'adaptive' } | { mode: 'fixed'; packets: number };

export const DEFAULT_BUFFER_POLICY: BufferPolicy = {
  mode: 'adaptive',
  floorFrames: BUFFER_FLOOR_FRAMES,
  ceilingFrames: BUFFER_CEILING_FRAMES,
};

export const DEFAULT_BUFFER_SETTING: BufferSetting = { mode: 'adaptive' };

/** The policy an engine runs for the user's choice. */
export function policyOf(setting: BufferSetting): BufferPolicy {
  return setting.mode === 'fixed'
    ? { mode: 'fixed', packets: setting.packets }
    : { ...DEFAULT_BUFFER_POLICY };
}

/**
 * A policy from a message that may be partial or hostile to the type (it crossed a thread):
 * missing or non-finite figures take the defaults, negative ones become 0, the fixed depth is
 * kept within 1..4096 packets.
 */
export function sanitizePolicy(p: {
  mode: 'adaptive' | 'fixed';
  floorFrames?: number;
  ceilingFrames?: number;
  packets?: number;
}): BufferPolicy {
  if (p.mode === 'fixed') {
    const n = Number.isFinite(p.packets) ? Math.floor(p.packets as number) : FIXED_PACKETS_DEFAULT;
    return { mode: 'fixed', packets: Math.max(1, Math.min(n || 1, 4096)) };
  }
  const frames = (v: number | undefined, dflt: number) =>
    Number.isFinite(v) ? Math.max(0, Math.floor(v as number)) : dflt;
  return {
    mode: 'adaptive',
    floorFrames: frames(p.floorFrames, BUFFER_FLOOR_FRAMES),
    ceilingFrames: frames(p.ceilingFrames, BUFFER_CEILING_FRAMES),
  };
}
