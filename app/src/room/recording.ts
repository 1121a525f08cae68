// The session's recorder glue: which tracks a recording of the room has (the mix, the user's
// input, one per participant), starting and stopping the recorder (record/recorder.ts) on the
// engine, and the recording part of the view as it goes.

import type { EngineHandle } from '../audio/host';
import { SessionRecorder, trackTag } from '../record/recorder';
import type { Participant } from './membership';
import type { RecordingView } from './types';
import { IDLE_RECORDING } from './view';

type TrackInfo = { kind: 'mix' | 'input' | 'peer'; name: string; channels: 1 | 2 };

function peerTrack(p: Participant): { kind: 'peer'; name: string; channels: 2 } {
  return { kind: 'peer', name: p.member.name, channels: 2 };
}

export class Recording {
  /** The recording part of the view. */
  view: RecordingView = IDLE_RECORDING;
  private recorder: SessionRecorder | null = null;

  constructor(
    private readonly opts: {
      /** The room's name in the recording ('sound-check' for the self-test). */
      room: string;
      sampleRate: number;
      /** The user's own track: their name and input channels. */
      input: { name: string; channels: 1 | 2 };
      /** The session was left. */
      ended: () => boolean;
      /** The view's part changed. */
      changed: (view: RecordingView) => void;
    },
  ) {}

  get active(): boolean {
    return this.recorder !== null;
  }

  async start(engine: EngineHandle | null, participants: Iterable<Participant>): Promise<void> {
    const state = this.view.state;
    if (!engine || state === 'starting' || state === 'recording' || this.opts.ended()) return;
    this.set({ ...IDLE_RECORDING, state: 'starting' });
    const tracks: [number, TrackInfo][] = [
      [trackTag('mix'), { kind: 'mix', name: 'Mix', channels: 2 }],
      [
        trackTag('input'),
        { kind: 'input', name: this.opts.input.name || 'Me', channels: this.opts.input.channels },
      ],
    ];
    for (const p of participants) tracks.push([trackTag('peer', p.slot), peerTrack(p)]);
    try {
      const rec = await SessionRecorder.start({
        engine,
        room: this.opts.room,
        sampleRate: this.opts.sampleRate,
        tracks,
        onStatus: (st) => {
          if (this.view.id !== st.id || this.view.state !== 'recording') return;
          this.set({ ...this.view, seconds: st.seconds, bytes: st.bytes });
        },
        onError: (err) => {
          // One recorder at a time: this is the one that failed.
          this.recorder = null;
          this.set({ ...this.view, state: 'idle', error: err.message });
        },
      });
      this.recorder = rec;
      if (this.opts.ended()) {
        this.recorder = null;
        await rec.stop().catch(() => {});
        return;
      }
      this.set({ ...IDLE_RECORDING, state: 'recording', id: rec.id });
    } catch (err) {
      this.set({ ...IDLE_RECORDING, error: err instanceof Error ? err.message : String(err) });
    }
  }

  async stop(): Promise<void> {
    const rec = this.recorder;
    if (!rec) return;
    this.recorder = null;
    this.set({ ...this.view, state: 'stopping' });
    try {
      const meta = await rec.stop();
      this.set({
        ...this.view,
        state: 'idle',
        seconds: meta.frames / this.opts.sampleRate,
        bytes: meta.bytes,
      });
    } catch (err) {
      this.set({ ...this.view, state: 'idle', error: err instanceof Error ? err.message : String(err) });
    }
  }

  /** A participant came or was named again: its track follows (while recording). */
  participant(p: Participant): void {
    this.recorder?.setTrack(trackTag('peer', p.slot), peerTrack(p));
  }

  private set(view: RecordingView): void {
    this.view = view;
    this.opts.changed(view);
  }
}
