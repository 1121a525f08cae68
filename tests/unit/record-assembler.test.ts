// The recorder's assembler: ring records (one quantum of one track) → stored chunks on the
// recording's common timeline.
import { describe, expect, it } from 'vitest';
import { QUANTUM, TrackAssembler, trackTag } from '../../app/src/record/assembler';
import { RECORD_TRACK_SAMPLES } from '../../app/src/audio/engine-core';

/** One quantum, planar: left = base + i, right = -(base + i). */
function quantum(base: number): Float32Array {
  const p = new Float32Array(RECORD_TRACK_SAMPLES);
  for (let i = 0; i < QUANTUM; i++) {
    p[i] = base + i;
    p[QUANTUM + i] = -(base + i);
  }
  return p;
}

describe('TrackAssembler', () => {
  it('interleaves stereo, keeps mono left only, and cuts chunks every chunkQuanta', () => {
    const a = new TrackAssembler('rec', 4);
    a.setTrackInfo(trackTag('input'), { kind: 'input', name: 'Ana', channels: 1 });
    for (let q = 0; q < 10; q++) {
      a.push(trackTag('mix'), q, quantum(q * 1000));
      a.push(trackTag('input'), q, quantum(q * 1000));
    }
    const chunks = a.take();
    // 10 quanta at 4 per chunk: two whole chunks per track so far.
    expect(chunks.map((c) => [c.track, c.index, c.startFrame, c.frames])).toEqual([
      [0, 0, 0, 512],
      [1, 0, 0, 512],
      [0, 1, 512, 512],
      [1, 1, 512, 512],
    ]);
    const mix = new Float32Array(chunks[0].data);
    expect(mix.length).toBe(512 * 2);
    expect([mix[0], mix[1], mix[2], mix[3]]).toEqual([0, -0, 1, -1]);
    const input = new Float32Array(chunks[1].data);
    expect(input.length).toBe(512);
    expect(input[QUANTUM + 5]).toBe(1005);
    // The rest comes out when asked for all.
    const rest = a.take(true);
    expect(rest.map((c) => [c.track, c.index, c.startFrame, c.frames])).toEqual([
      [0, 2, 1024, 256],
      [1, 2, 1024, 256],
    ]);
    expect(a.frames).toBe(10 * QUANTUM);
    expect(a.trackList().map((t) => [t.track, t.kind, t.name, t.channels, t.startFrame])).toEqual([
      [0, 'mix', 'Mix', 2, 0],
      [1, 'input', 'Ana', 1, 0],
    ]);
  });

  it('places a late joiner and a gap on the common timeline', () => {
    const a = new TrackAssembler('rec', 8);
    const peer = trackTag('peer', 3);
    a.setTrackInfo(peer, { kind: 'peer', name: 'Bo', channels: 2 });
    for (let q = 0; q < 20; q++) {
      a.push(trackTag('mix'), q, quantum(q));
      if ((q >= 5 && q < 9) || q >= 12) a.push(peer, q, quantum(q));
    }
    const chunks = a.take(true).filter((c) => c.track === peer);
    expect(chunks.map((c) => [c.index, c.startFrame, c.frames])).toEqual([
      [0, 5 * QUANTUM, 4 * QUANTUM],
      [1, 12 * QUANTUM, 8 * QUANTUM],
    ]);
    expect(a.missingQuanta).toBe(3);
    expect(a.trackList().find((t) => t.track === peer)?.startFrame).toBe(5 * QUANTUM);
  });

  it('gives a slot taken over by someone else a new track', () => {
    const a = new TrackAssembler('rec', 8);
    const peer = trackTag('peer', 0);
    a.setTrackInfo(peer, { kind: 'peer', name: 'Cy', channels: 2 });
    for (let q = 0; q < 3; q++) a.push(peer, q, quantum(q));
    a.setTrackInfo(peer, { kind: 'peer', name: 'Di', channels: 2 });
    for (let q = 3; q < 6; q++) a.push(peer, q, quantum(q));
    const tracks = a.trackList();
    expect(tracks.map((t) => [t.name, t.startFrame])).toEqual([
      ['Cy', 0],
      ['Di', 3 * QUANTUM],
    ]);
    expect(tracks[1].track).toBeGreaterThanOrEqual(1000);
    // The same name again keeps the track.
    a.setTrackInfo(peer, { kind: 'peer', name: 'Di', channels: 2 });
    a.push(peer, 6, quantum(6));
    expect(a.trackList()).toHaveLength(2);
  });

  it('counts and drops malformed records', () => {
    const a = new TrackAssembler('rec', 8);
    a.push(trackTag('mix'), 0, new Float32Array(10));
    a.push(trackTag('mix'), -1, quantum(0));
    a.push(trackTag('mix'), 1.5, quantum(0));
    expect(a.rejected).toBe(3);
    expect(a.take(true)).toEqual([]);
    expect(a.frames).toBe(0);
  });
});
