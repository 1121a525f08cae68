// The recorder's thread: drains the recording ring the engine worklet fills, assembles chunks
// and writes them to IndexedDB as the session plays. It holds the Web Lock
// `tutti-recording:<id>` while it records, so that a recording whose lock is free and whose
// state is still 'recording' is known to have been cut off (recovery.ts).
//
// At most one chunk per track plus one poll interval is ever unwritten: ~0.6 s of audio.

import { RingReader } from '../audio/ring-ends';
import { RECORD_TRACK_SAMPLES } from '../audio/engine-core';
import { TrackAssembler, type TrackInfo } from './assembler';
import { appendChunks, createRecording, finishRecording } from './store';
import type { RecordingMeta } from '../store/schema';

export type RecorderWorkerMessage =
  | {
      type: 'start';
      id: string;
      room: string;
      sampleRate: number;
      startedAt: number;
      ring: SharedArrayBuffer;
    }
  | { type: 'track'; tag: number; info: TrackInfo }
  | { type: 'stop' };

export type RecorderWorkerReply =
  | { type: 'started' }
  | { type: 'progress'; frames: number; bytes: number; dropped: number }
  | { type: 'stopped'; meta: RecordingMeta; dropped: number; missingQuanta: number }
  | { type: 'error'; message: string };

/** How often the ring is drained, ms. */
const POLL_MS = 100;
/** The ring counts as quiet (the worklet stopped writing) after this long without a record. */
const QUIET_MS = 60;

const scope = self as unknown as {
  postMessage(msg: RecorderWorkerReply): void;
  onmessage: ((ev: MessageEvent<RecorderWorkerMessage>) => void) | null;
};

let reader: RingReader | null = null;
let ringWords: Uint32Array | null = null;
let asm: TrackAssembler | null = null;
let meta: RecordingMeta | null = null;
let stopping = false;
let releaseLock: (() => void) | null = null;
let writing: Promise<void> = Promise.resolve();
let bytes = 0;
const planar = new Float32Array(RECORD_TRACK_SAMPLES);
const planarBytes = new Uint8Array(planar.buffer);
const pendingInfo: { tag: number; info: TrackInfo }[] = [];

function reply(msg: RecorderWorkerReply): void {
  scope.postMessage(msg);
}

/** Moves every published record into the assembler; returns how many. */
function drain(): number {
  if (!reader || !asm) return 0;
  let n = 0;
  while (reader.peek()) {
    if (reader.length === planarBytes.length) {
      planarBytes.set(reader.bytes.subarray(reader.offset, reader.offset + reader.length));
      asm.push(reader.tag, reader.time, planar);
    } else {
      asm.rejected++;
    }
    reader.consume();
    n++;
  }
  return n;
}

/** Stores what the assembler completed (all of it when `final`), one transaction per call. */
function store(final: boolean): Promise<void> {
  const a = asm!;
  const m = meta!;
  const chunks = a.take(final);
  if (chunks.length === 0 && !final) return writing;
  for (const c of chunks) bytes += c.data.byteLength;
  const patch = { frames: a.frames, tracks: a.trackList() };
  writing = writing.then(async () => {
    if (chunks.length > 0) await appendChunks(m.id, chunks, patch);
    reply({ type: 'progress', frames: patch.frames, bytes, dropped: droppedRecords() });
  });
  return writing;
}

function droppedRecords(): number {
  // The ring's dropped_records word (ring.ts layout: word 1).
  return ringWords ? Atomics.load(ringWords, 1) : 0;
}

async function run(msg: Extract<RecorderWorkerMessage, { type: 'start' }>): Promise<void> {
  reader = new RingReader(msg.ring);
  ringWords = new Uint32Array(msg.ring, 0, 32);
  asm = new TrackAssembler(msg.id);
  for (const p of pendingInfo.splice(0)) asm.setTrackInfo(p.tag, p.info);
  meta = {
    id: msg.id,
    room: msg.room,
    startedAt: msg.startedAt,
    endedAt: null,
    state: 'recording',
    sampleRate: msg.sampleRate,
    tracks: [],
    frames: 0,
    bytes: 0,
  };
  await new Promise<void>((held) => {
    void navigator.locks.request(`tutti-recording:${msg.id}`, () => {
      held();
      return new Promise<void>((release) => (releaseLock = release));
    });
  });
  await createRecording({ id: msg.id, room: msg.room, startedAt: msg.startedAt, sampleRate: msg.sampleRate });
  reply({ type: 'started' });
  let lastRecordAt = performance.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, stopping ? QUIET_MS / 3 : POLL_MS));
    const n = drain();
    const now = performance.now();
    if (n > 0) lastRecordAt = now;
    if (stopping && n === 0 && now - lastRecordAt >= QUIET_MS) break;
    void store(false);
  }
  await store(true);
  const endedAt = meta.startedAt + (asm.frames / meta.sampleRate) * 1000;
  await finishRecording(meta.id, endedAt);
  meta = { ...meta, state: 'complete', endedAt, frames: asm.frames, bytes, tracks: asm.trackList() };
  releaseLock?.();
  reply({ type: 'stopped', meta, dropped: droppedRecords(), missingQuanta: asm.missingQuanta });
}

scope.onmessage = (ev) => {
  const msg = ev.data;
  switch (msg?.type) {
    case 'start':
      run(msg).catch((err: unknown) => {
        releaseLock?.();
        reply({ type: 'error', message: err instanceof Error ? err.message : String(err) });
      });
      break;
    case 'track':
      if (asm) asm.setTrackInfo(msg.tag, msg.info);
      else pendingInfo.push({ tag: msg.tag, info: msg.info });
      break;
    case 'stop':
      stopping = true;
      break;
  }
};
