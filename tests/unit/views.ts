// Room views for unit tests: a participant and a room snapshot with everything silent and
// idle, the figures a test cares about given as overrides.
import type { ParticipantView, RoomView } from '../../app/src/room/types';

export const SILENT = { peakL: -Infinity, peakR: -Infinity, rmsL: -Infinity, rmsR: -Infinity };

export function participant(peer: string, name: string, f: Partial<ParticipantView> = {}): ParticipantView {
  return {
    peer,
    name,
    link: 'connected',
    levels: SILENT,
    strip: { gainDb: 0, pan: 0, mute: false, solo: false },
    latencyMs: null,
    rttMs: null,
    bufferMs: 0,
    targetMs: 0,
    lossPct: 0,
    underruns: 0,
    senderGaps: 0,
    format: '',
    sending: 'as-sent',
    ...f,
  };
}

/** Room 'band' as the user 'me' sees it, joined or not yet. */
export function roomView(
  participants: ParticipantView[],
  { joined = true, engineUnderruns = 0 } = {},
): RoomView {
  return {
    room: 'band',
    key: null,
    access: { isOwner: false, locked: false, protected: false, private: false },
    notice: null,
    self: { peer: 'me', name: 'Me' },
    signaling: joined ? 'open' : 'connecting',
    error: null,
    joined,
    participants,
    master: { gainDb: 0, levels: SILENT, limiterDb: 0 },
    input: { levels: SILENT, channels: 1 },
    monitor: { on: false, gainDb: -6 },
    engine: { underruns: engineUnderruns, peers: participants.length, sampleRate: 48000, blockFrames: 128 },
    recording: { state: 'idle', id: null, seconds: 0, bytes: 0, error: null },
    echo: { requests: [], echoing: null, autoAllow: false },
    topology: { mode: 'mesh', hub: null, advice: null, hubRefused: false },
  };
}
