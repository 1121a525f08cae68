// Recording a session, seen from the main thread: makes the ring, starts the recorder worker,
// tells the engine to write its tracks, names the tracks as participants come and go, and stops.
// The audio itself never passes through this thread.

import { createRing } from '../audio/ring';
import { askPersistence } from '../store/db';
import type { EngineHandle } from '../audio/host';
import type { RecordingMeta } from '../store/schema';
import { trackTag, type TrackInfo } from './assembler';
import type { RecorderWorkerMessage, RecorderWorkerReply } from './recorder-worker';
import RecorderWorker from './recorder-worker.ts?worker';

/** Bytes of the recording ring: ~4 s of the mix, input and 6 peers (1032 bytes a track-quantum). */
export const RECORD_RING_BYTES = 1 << 23;

export interface RecordingStatus {
  id: string;
  /** Seconds recorded so far (stored, or being stored). */
  seconds: number;
  bytes: number;
  /** Track-quanta the full ring refused (a stalled recorder): each is 2.7 ms of silence. */
  dropped: number;
}

export class SessionRecorder {
  status: RecordingStatus;
  private readonly worker: Worker;
  private readonly done: Promise<RecordingMeta>;
  private stopped = false;

  private constructor(
    private readonly engine: EngineHandle,
    readonly id: string,
    private readonly sampleRate: number,
    onStatus: (s: RecordingStatus) => void,
    started: () => void,
    failed: (err: Error) => void,
  ) {
    this.status = { id, seconds: 0, bytes: 0, dropped: 0 };
    this.worker = new RecorderWorker({ name: 'tutti-recorder' });
    this.done = new Promise<RecordingMeta>((resolve, reject) => {
      this.worker.onmessage = (ev: MessageEvent<RecorderWorkerReply>) => {
        const m = ev.data;
        if (m.type === 'started') started();
        else if (m.type === 'progress') {
          this.status = { id, seconds: m.frames / this.sampleRate, bytes: m.bytes, dropped: m.dropped };
          onStatus(this.status);
        } else if (m.type === 'stopped') {
          this.status = { ...this.status, seconds: m.meta.frames / this.sampleRate, dropped: m.dropped };
          resolve(m.meta);
          this.worker.terminate();
        } else if (m.type === 'error') {
          const err = new Error(`The recording could not be stored: ${m.message}`);
          failed(err);
          reject(err);
          this.engine.control({ type: 'record', on: false });
          this.worker.terminate();
        }
      };
      this.worker.onerror = (ev) => {
        const err = new Error(`The recorder stopped: ${ev.message}`);
        failed(err);
        reject(err);
        this.engine.control({ type: 'record', on: false });
      };
    });
    // A failed recording is reported through `failed`; this promise must not go unhandled.
    this.done.catch(() => {});
  }

  /**
   * Starts recording the engine's tracks. Resolves once the recording exists in storage and the
   * engine writes into its ring; rejects if storage refused it.
   */
  static async start(opts: {
    engine: EngineHandle;
    room: string;
    sampleRate: number;
    tracks: Iterable<[number, TrackInfo]>;
    onStatus?: (s: RecordingStatus) => void;
    /** A failure after the start (storage full, the worker died): the recording has stopped. */
    onError?: (err: Error) => void;
  }): Promise<SessionRecorder> {
    // A recording is worth keeping: ask the browser not to evict this site's storage.
    askPersistence();
    const ring = createRing(RECORD_RING_BYTES);
    let rec!: SessionRecorder;
    await new Promise<void>((resolve, reject) => {
      let started = false;
      rec = new SessionRecorder(
        opts.engine,
        crypto.randomUUID(),
        opts.sampleRate,
        opts.onStatus ?? (() => {}),
        () => {
          started = true;
          resolve();
        },
        (err) => (started ? opts.onError?.(err) : reject(err)),
      );
      for (const [tag, info] of opts.tracks) rec.setTrack(tag, info);
      rec.post({
        type: 'start',
        id: rec.id,
        room: opts.room,
        sampleRate: opts.sampleRate,
        startedAt: Date.now(),
        ring,
      });
    });
    opts.engine.control({ type: 'record', on: true, ring });
    return rec;
  }

  /** Names the track a ring tag writes to (see `trackTag`). */
  setTrack(tag: number, info: TrackInfo): void {
    if (!this.stopped) this.post({ type: 'track', tag, info });
  }

  /** Stops: the engine stops writing, the worker stores the rest. Resolves with the recording. */
  stop(): Promise<RecordingMeta> {
    if (!this.stopped) {
      this.stopped = true;
      this.engine.control({ type: 'record', on: false });
      this.post({ type: 'stop' });
    }
    return this.done;
  }

  private post(msg: RecorderWorkerMessage): void {
    this.worker.postMessage(msg);
  }
}

export { trackTag };
