// Layout of the capture buffer shared by the tap worklet (tap-worklet.ts) and the page.
//
//   Int32 words at byte 0 (TAP_HEADER_BYTES):
//     [TAP_WRITTEN]  frames captured so far (published with Atomics.store after the copy)
//     [TAP_ARMED]    1 while the page wants frames captured (set by the page)
//     [TAP_START]    context frame (currentFrame) of the first captured frame
//     [TAP_SILENT]   quanta whose input had no channels (source inactive), captured as zeros
//     [TAP_FULL]     quanta dropped because the buffer was full
//   Float32 left plane at TAP_HEADER_BYTES, right plane after it, `capacity` frames each.

export const TAP_HEADER_BYTES = 64;
export const TAP_WRITTEN = 0;
export const TAP_ARMED = 1;
export const TAP_START = 2;
export const TAP_SILENT = 3;
export const TAP_FULL = 4;

export interface TapViews {
  header: Int32Array;
  left: Float32Array;
  right: Float32Array;
  capacity: number;
}

export function createTapBuffer(capacityFrames: number): SharedArrayBuffer {
  return new SharedArrayBuffer(TAP_HEADER_BYTES + 2 * 4 * capacityFrames);
}

export function tapViews(shared: SharedArrayBuffer): TapViews {
  const capacity = (shared.byteLength - TAP_HEADER_BYTES) / 8;
  return {
    header: new Int32Array(shared, 0, TAP_HEADER_BYTES / 4),
    left: new Float32Array(shared, TAP_HEADER_BYTES, capacity),
    right: new Float32Array(shared, TAP_HEADER_BYTES + 4 * capacity, capacity),
    capacity,
  };
}
