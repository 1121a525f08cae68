// Audio-clock continuity for the plain-JavaScript engine (js-engine-core.ts), following
// core/src/continuity.rs: a missed device callback makes every later frame stamped later on the
// wall clock, so the offset `wall − audio time` steps up by the gap and stays there. The minimum
// of that offset per half-second window (of audio time) ignores callback bursts and wake-up
// jitter; a rise of at least GAP_US over the previous window's minimum is a gap. The engine feeds
// one with each quantum's wall clock (our device's gaps) and one per peer with its packets' send
// stamps against their place in the stream (the sender's gaps). Real-time safe: numbers only;
// the two times of an observation are passed in fields (`audioUs`, `wallUs`), not as arguments,
// since a double passed to a call that is not inlined is allocated as a heap number.

/** The smallest rise of the window minimum counted as a gap: 2 ms. */
export const GAP_US = 2000;
/** Window length on the audio clock, µs. */
export const WINDOW_US = 500000;

/** Gap detector for one audio clock. */
export class Continuity {
  /** Audio-clock time at which the current window began, µs (NaN: not started). */
  private start = NaN;
  private curMin = Infinity;
  /** The previous window's minimum (NaN: none). */
  private prevMin = NaN;
  /** The next observation: audio time (frames converted to µs)... */
  audioUs = 0;
  /** ...and the wall-clock time it was stamped with, µs. */
  wallUs = 0;
  /** Gaps seen. */
  gaps = 0;
  /** Their total length, µs. */
  gapUs = 0;

  /** Audio time `audioUs` was stamped `wallUs` on the wall clock (set both first). Non-finite
   * values and audio time going backwards restart the watch. */
  observe(): void {
    const audioUs = this.audioUs;
    const wallUs = this.wallUs;
    if (!Number.isFinite(audioUs) || !Number.isFinite(wallUs)) {
      this.restart();
      return;
    }
    let start = this.start;
    if (!(audioUs >= start)) {
      // Not started (NaN), or audio time went back.
      this.restart();
      this.start = start = audioUs;
    }
    if (audioUs - start >= WINDOW_US) {
      this.close();
      // A long silence of this clock: the next window starts here.
      const windows = Math.floor((audioUs - start) / WINDOW_US);
      this.start = windows > 1 ? audioUs : start + WINDOW_US;
    }
    const offset = wallUs - audioUs;
    if (offset < this.curMin) this.curMin = offset;
  }

  private close(): void {
    if (!Number.isFinite(this.curMin)) return;
    if (!Number.isNaN(this.prevMin)) {
      const rise = this.curMin - this.prevMin;
      if (rise >= GAP_US) {
        this.gaps++;
        this.gapUs += rise;
      }
    }
    this.prevMin = this.curMin;
    this.curMin = Infinity;
  }

  /** Forgets the offset history (a restarted stream); the counts stay. */
  restart(): void {
    this.start = NaN;
    this.curMin = Infinity;
    this.prevMin = NaN;
  }

  /** Forgets everything, counts too (a new peer in the slot). */
  clear(): void {
    this.restart();
    this.gaps = 0;
    this.gapUs = 0;
  }
}
