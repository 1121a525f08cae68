// Recordings in IndexedDB (fake-indexeddb): append, read back and delete; stems exported with gaps
// as silence and the full length; recovery of a recording whose recorder's lock is gone.
import 'fake-indexeddb/auto';
import { IDBFactory } from 'fake-indexeddb';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exportStem, exportZip, stemFileName } from '../../app/src/record/stems';
import { recordingLockName, recoverInterrupted } from '../../app/src/record/recovery';
import {
  appendChunks,
  createRecording,
  deleteRecording,
  finishRecording,
  getRecording,
  keepRecording,
  listRecordings,
  RecordingNotFoundError,
  trackChunks,
  type Chunk,
  type TrackMeta,
} from '../../app/src/record/store';
import { closeDB, db } from '../../app/src/store/db';
import { readWav, readZip } from '../browser/lib/record-readers.mjs';

const RATE = 48000;
const TRACKS: TrackMeta[] = [
  { track: 0, kind: 'mix', name: 'Mix', channels: 2, startFrame: 0 },
  { track: 1, kind: 'input', name: 'Me', channels: 1, startFrame: 0 },
  { track: 2, kind: 'peer', name: 'Ann / bass', channels: 1, startFrame: 0 },
];

/** A chunk whose sample k (interleaved) is `value(startFrame * channels + k)`. */
function chunk(
  id: string,
  track: number,
  index: number,
  startFrame: number,
  frames: number,
  channels: 1 | 2,
  value = (k: number) => ((k % 1000) + 1) / 1000,
): Chunk {
  const d = new Float32Array(frames * channels);
  for (let k = 0; k < d.length; k++) d[k] = value(startFrame * channels + k);
  return { recordingId: id, track, index, startFrame, frames, channels, data: d.buffer };
}

let held: string[] = [];

beforeEach(async () => {
  await closeDB();
  globalThis.indexedDB = new IDBFactory();
  held = [];
  Object.defineProperty(globalThis, 'navigator', {
    configurable: true,
    value: {
      locks: {
        query: async () => ({ held: held.map((name) => ({ name, mode: 'exclusive' })), pending: [] }),
      },
    },
  });
});

afterEach(async () => {
  await closeDB();
});

async function chunkCount(): Promise<number> {
  return await (await db())!.count('chunks');
}

describe('recording store', () => {
  it('appends in one transaction with the meta, reads a track back in index order', async () => {
    const m = await createRecording({
      room: 'band',
      startedAt: 1_000,
      sampleRate: RATE,
      tracks: TRACKS.slice(0, 1),
    });
    expect(m.state).toBe('recording');
    expect(m.id).toMatch(/^[0-9a-f-]{36}$/);
    // 20 chunks of 100 frames on track 1 (more than one read batch), appended out of order.
    const order = [3, 0, 19, 7, 1, 2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18];
    let meta = m;
    for (let i = 0; i < order.length; i += 5) {
      const batch = order.slice(i, i + 5).map((n) => chunk(m.id, 1, n, n * 100, 100, 1));
      meta = await appendChunks(m.id, batch, { frames: (i + 5) * 100, tracks: TRACKS });
    }
    expect(meta.frames).toBe(2000);
    expect(meta.bytes).toBe(20 * 100 * 4);
    expect(meta.tracks).toEqual(TRACKS);
    expect(await getRecording(m.id)).toEqual(meta);

    const seen: number[] = [];
    for await (const ch of trackChunks(m.id, 1)) {
      seen.push(ch.index);
      expect(ch.startFrame).toBe(ch.index * 100);
      expect(new Float32Array(ch.data)[0]).toBeCloseTo((((ch.index * 100) % 1000) + 1) / 1000, 6);
    }
    expect(seen).toEqual([...Array(20).keys()]);
    // Other tracks are separate.
    for await (const ch of trackChunks(m.id, 0)) throw new Error(`track 0 has chunk ${ch.index}`);

    const done = await finishRecording(m.id, 5_000);
    expect(done.state).toBe('complete');
    expect(done.endedAt).toBe(5_000);
  });

  it('refuses malformed chunks (nothing stored) and appends to a deleted recording', async () => {
    const m = await createRecording({ room: 'band', startedAt: 1, sampleRate: RATE, tracks: TRACKS });
    const bad = { ...chunk(m.id, 0, 0, 0, 10, 2), frames: 11 };
    await expect(appendChunks(m.id, [chunk(m.id, 0, 1, 10, 10, 2), bad], { frames: 20 })).rejects.toThrow(
      RangeError,
    );
    await expect(appendChunks(m.id, [chunk('other', 0, 0, 0, 10, 2)], { frames: 10 })).rejects.toThrow(
      RangeError,
    );
    expect(await chunkCount()).toBe(0);
    expect((await getRecording(m.id))!.bytes).toBe(0);
    await deleteRecording(m.id);
    await expect(appendChunks(m.id, [chunk(m.id, 0, 0, 0, 10, 2)], { frames: 10 })).rejects.toThrow(
      RecordingNotFoundError,
    );
    expect(await chunkCount()).toBe(0);
  });

  it('lists newest first; delete removes the meta and every chunk, and no other', async () => {
    const a = await createRecording({ room: 'a', startedAt: 100, sampleRate: RATE, tracks: TRACKS });
    const b = await createRecording({ room: 'b', startedAt: 300, sampleRate: RATE, tracks: TRACKS });
    const c = await createRecording({ room: 'c', startedAt: 200, sampleRate: RATE, tracks: TRACKS });
    for (const r of [a, b, c]) {
      for (let t = 0; t < 3; t++) {
        await appendChunks(r.id, [chunk(r.id, t, 0, 0, 50, 1), chunk(r.id, t, 1, 50, 50, 1)], {
          frames: 100,
        });
      }
    }
    expect((await listRecordings()).map((r) => r.room)).toEqual(['b', 'c', 'a']);
    expect(await chunkCount()).toBe(18);
    await deleteRecording(b.id);
    expect(await getRecording(b.id)).toBeNull();
    expect((await listRecordings()).map((r) => r.room)).toEqual(['c', 'a']);
    expect(await chunkCount()).toBe(12);
    const left = await (await db())!.getAllKeysFromIndex('chunks', 'recordingId', b.id);
    expect(left).toEqual([]);
  });
});

describe('stem export', () => {
  it('fills gaps with silence, starts at frame 0 and lasts the recording', async () => {
    const m = await createRecording({
      room: 'Late Night',
      startedAt: new Date(2026, 10, 21, 20, 5).getTime(),
      sampleRate: RATE,
      tracks: TRACKS,
    });
    const id = m.id;
    // Mix: continuous 0..400. Input: 0..100 then 300..400 (absent in between). Peer: joins at 250,
    // stereo chunks on a mono track (averaged), and one chunk running past the end (cut).
    await appendChunks(
      id,
      [
        chunk(id, 0, 0, 0, 200, 2),
        chunk(id, 0, 1, 200, 200, 2),
        chunk(id, 1, 0, 0, 100, 1),
        chunk(id, 1, 1, 300, 100, 1),
        chunk(id, 2, 0, 250, 100, 2, () => 0.25),
        chunk(id, 2, 1, 350, 100, 1, () => -0.5),
      ],
      { frames: 400 },
    );
    const meta = (await getRecording(id))!;

    const mix = readWav(new Uint8Array(await (await exportStem(meta, TRACKS[0]!)).blob.arrayBuffer()));
    expect(mix.frames).toBe(400);
    expect(mix.channels).toBe(2);
    for (const k of [0, 1, 399, 400, 799]) expect(mix.samples[k]).toBeCloseTo(((k % 1000) + 1) / 1000, 6);

    const inputStem = await exportStem(meta, TRACKS[1]!);
    expect(inputStem.name).toBe('Late Night-2026-11-21-2005-02-Me.wav');
    expect(inputStem.dropped).toBe(0);
    const input = readWav(new Uint8Array(await inputStem.blob.arrayBuffer()));
    expect(input.frames).toBe(400);
    expect(input.formatTag).toBe(3);
    for (let f = 0; f < 400; f++) {
      const want = f < 100 || f >= 300 ? ((f % 1000) + 1) / 1000 : 0;
      expect(input.samples[f]).toBeCloseTo(want, 6);
    }

    const peerStem = await exportStem(meta, TRACKS[2]!, 'pcm24');
    expect(peerStem.name).toBe('Late Night-2026-11-21-2005-03-Ann _ bass.wav');
    expect(peerStem.dropped).toBe(1); // the chunk cut at the end
    const peer = readWav(new Uint8Array(await peerStem.blob.arrayBuffer()));
    expect(peer.frames).toBe(400);
    expect(peer.bits).toBe(24);
    const want = (f: number) => (f < 250 ? 0 : f < 350 ? 0.25 : -0.5);
    for (let f = 0; f < 400; f++) expect(Math.abs(peer.samples[f]! - want(f))).toBeLessThan(1e-6);
  });

  it('a zip of every stem, each readable and named by position', async () => {
    const m = await createRecording({ room: 'r', startedAt: 0, sampleRate: RATE, tracks: TRACKS });
    await appendChunks(m.id, [chunk(m.id, 1, 0, 10, 20, 1)], { frames: 30 });
    const meta = (await getRecording(m.id))!;
    const progress: number[] = [];
    const zip = await exportZip(meta, 'pcm16', (done) => progress.push(done));
    expect(progress).toEqual([0, 1, 2, 3]);
    const z = readZip(new Uint8Array(await zip.blob.arrayBuffer()));
    expect(z.entries.map((e) => e.name)).toEqual(TRACKS.map((t) => stemFileName(meta, t)));
    for (const [i, e] of z.entries.entries()) {
      const w = readWav(e.data);
      expect(w.frames).toBe(30);
      expect(w.channels).toBe(TRACKS[i]!.channels);
    }
    const input = readWav(z.entries[1]!.data);
    expect(input.samples[9]).toBe(0);
    expect(input.samples[10]).toBeCloseTo(Math.round(0.011 * 32767) / 32768, 6);
  });
});

describe('recovery', () => {
  it('marks a recording whose lock is free as interrupted, with frames and bytes from its chunks', async () => {
    const live = await createRecording({ room: 'live', startedAt: 10_000, sampleRate: RATE, tracks: TRACKS });
    const lost = await createRecording({ room: 'lost', startedAt: 20_000, sampleRate: RATE, tracks: TRACKS });
    const done = await createRecording({ room: 'done', startedAt: 30_000, sampleRate: RATE, tracks: TRACKS });
    await finishRecording(done.id, 31_000);
    held = [recordingLockName(live.id), 'some-other-lock'];
    // The meta says 0 frames and one chunk's bytes; a second chunk is put without a meta update:
    // recovery must take frames and bytes from the chunks, not from the meta.
    await appendChunks(lost.id, [chunk(lost.id, 0, 0, 0, 48000, 2)], { frames: 0 });
    await (await db())!.put('chunks', chunk(lost.id, 1, 0, 0, 96000, 1));

    const found = await recoverInterrupted();
    expect(found.map((m) => m.room)).toEqual(['lost']);
    const r = found[0]!;
    expect(r.state).toBe('interrupted');
    expect(r.frames).toBe(96000);
    expect(r.bytes).toBe(48000 * 2 * 4 + 96000 * 4);
    expect(r.endedAt).toBe(20_000 + 2000);
    expect((await getRecording(live.id))!.state).toBe('recording');
    expect((await getRecording(done.id))!.state).toBe('complete');

    // Offered again on the next start until kept; kept recordings keep their end.
    expect((await recoverInterrupted()).map((m) => m.id)).toEqual([lost.id]);
    const kept = await keepRecording(lost.id);
    expect(kept.state).toBe('complete');
    expect(kept.endedAt).toBe(22_000);
    expect(await recoverInterrupted()).toEqual([]);
  });

  it('without Web Locks no recording is judged abandoned', async () => {
    Object.defineProperty(globalThis, 'navigator', { configurable: true, value: {} });
    await createRecording({ room: 'x', startedAt: 1, sampleRate: RATE, tracks: TRACKS });
    expect(await recoverInterrupted()).toEqual([]);
  });
});
