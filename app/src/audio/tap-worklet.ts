// A capture of what a node outputs (used by the self-test and the room's diagnostics): an
// AudioWorkletProcessor that copies its stereo input into a SharedArrayBuffer (layout in tap.ts)
// while the page has it armed. process() allocates nothing:
// the views are made in the constructor, and the frame counter is published with Atomics.store
// after each copy, so the page reads only complete quanta. Its output stays silent.
//
// processorOptions: { shared: SharedArrayBuffer } from createTapBuffer().

import { TAP_ARMED, TAP_FULL, TAP_SILENT, TAP_START, TAP_WRITTEN, tapViews, type TapViews } from './tap';

class TapProcessor extends AudioWorkletProcessor {
  private readonly views: TapViews;
  private written = 0;

  constructor(options: AudioWorkletNodeOptions) {
    super();
    this.views = tapViews((options.processorOptions as { shared: SharedArrayBuffer }).shared);
  }

  process(inputs: Float32Array[][]): boolean {
    const v = this.views;
    if (Atomics.load(v.header, TAP_ARMED) !== 1) return true;
    const input = inputs[0];
    const n = input && input.length > 0 ? input[0].length : 128;
    if (this.written + n > v.capacity) {
      Atomics.add(v.header, TAP_FULL, 1);
      return true;
    }
    if (this.written === 0) Atomics.store(v.header, TAP_START, currentFrame);
    if (!input || input.length === 0) {
      // An inactive source delivers no channels: that is silence.
      v.left.fill(0, this.written, this.written + n);
      v.right.fill(0, this.written, this.written + n);
      Atomics.add(v.header, TAP_SILENT, 1);
    } else {
      v.left.set(input[0], this.written);
      v.right.set(input.length > 1 ? input[1] : input[0], this.written);
    }
    this.written += n;
    Atomics.store(v.header, TAP_WRITTEN, this.written);
    return true;
  }
}

registerProcessor('tutti-tap', TapProcessor);
