// The one live session, if any, and what the app remembers between visits (`saved`).
//
// A session is created inside the Join click (browsers start audio only from a user gesture) and
// left when the user leaves or navigates away from its room. Joining remembers the name and the
// room, applies and records the strips remembered for the room's participants, and keeps the
// session's history record.
//
// `saved` is loaded from IndexedDB once at start (a few ms); pages show once `saved.ready` is
// true, so no default flashes before the stored value. Storage that does not answer within
// SAVED_WAIT_MS does not keep the page blank: it shows with what has come, and the rest fills
// in when it comes.

import { openSession } from '../room/session';
import type { AudioSettings, JoinRequest, RoomSession } from '../room/types';
import { askPersistence, onStorageNote } from '../store/db';
import { recentSessions, SessionLog } from '../store/history';
import { mixMemory, recentRooms, touchRoom, type RecentRoom, type RoomMixMemory } from '../store/rooms';
import type { SessionRecord } from '../store/schema';
import { defaultSettings, loadSettings, saveAudio, saveName } from '../store/settings';
import { browserStorage, ownerMemory } from '../room/owner-memory';
import { icePolicy } from './route';

export const live = $state<{ session: RoomSession | null; room: string | null; key: string | null }>({
  session: null,
  room: null,
  key: null,
});

export const saved = $state<{
  ready: boolean;
  name: string;
  audio: AudioSettings;
  recent: RecentRoom[];
  sessions: SessionRecord[];
  /** A sentence when settings cannot be kept on this device. */
  note: string | null;
}>({ ready: false, ...defaultSettings(), recent: [], sessions: [], note: null });

/** The longest the pages wait for the stored values before they show. */
const SAVED_WAIT_MS = 1500;

/** Resolves once `saved` holds the stored values, or SAVED_WAIT_MS has passed. */
export const savedReady: Promise<void> = (async () => {
  const loads = Promise.all([
    loadSettings().then((settings) => {
      saved.name = settings.name;
      saved.audio = settings.audio;
    }),
    recentRooms().then((recent) => (saved.recent = recent)),
    recentSessions().then((sessions) => (saved.sessions = sessions)),
  ]).then(
    () => 'read' as const,
    (err: unknown) => console.warn(`stored settings not read: ${String(err)}`),
  );
  const waited = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), SAVED_WAIT_MS));
  if ((await Promise.race([loads, waited])) === 'late')
    console.warn(`stored settings: not all read within ${SAVED_WAIT_MS} ms; the page shows without them`);
  saved.ready = true;
})();
onStorageNote((note) => (saved.note = note));

/** Re-reads the lists Home shows (after a session ends). */
async function refreshLists(): Promise<void> {
  try {
    const [recent, sessions] = await Promise.all([recentRooms(), recentSessions()]);
    saved.recent = recent;
    saved.sessions = sessions;
  } catch (err) {
    console.warn(`recent rooms and sessions not read: ${String(err)}`);
  }
}

/** Saves audio settings: the setup card edits `saved.audio` in place and calls this with a
 * snapshot as the user changes them. */
export function setAudio(audio: AudioSettings): void {
  void saveAudio(audio);
}

/** How often the session's latency stages are handed to its history record. */
const STAGES_EVERY_MS = 1000;

let memory: RoomMixMemory | null = null;
let log: SessionLog | null = null;
let unsubscribe: (() => void) | null = null;

/** Opens a session for `req` (its audio and mix memory are filled in here), leaving any other
 * first. Call from a click handler. */
export function join(
  req: Omit<JoinRequest, 'audio' | 'mixMemory' | 'owner'> & { audio?: AudioSettings },
): RoomSession {
  if (live.session) void leave();
  saved.name = req.name;
  void saveName(req.name);
  const key = req.key ?? null;
  touchRoom(req.room, Date.now(), key).then(refreshLists, (err: unknown) =>
    console.warn(`room not remembered: ${String(err)}`),
  );
  askPersistence();
  memory = mixMemory(req.room);
  log = new SessionLog(req.room);
  const session = openSession(
    {
      ...req,
      audio: req.audio ?? $state.snapshot(saved.audio),
      mixMemory: memory,
      owner: ownerMemory(req.room, key, browserStorage()),
    },
    { ice: icePolicy(location.search) },
  );
  const l = log;
  let stagesAt = -Infinity;
  unsubscribe = session.subscribe((view) => {
    l.observe(view);
    // Reading the histograms copies a large block: once a second is plenty (they are cumulative).
    const now = Date.now();
    if (!view.joined || now - stagesAt < STAGES_EVERY_MS) return;
    stagesAt = now;
    l.observeLatency(session.latencyStages?.().peers ?? {});
  });
  live.session = session;
  live.room = req.room;
  live.key = key;
  return session;
}

/** Leaves the live session (if any); resolves once microphone and connections are released and
 * what it remembers is written. */
export async function leave(): Promise<void> {
  const s = live.session;
  const m = memory;
  const l = log;
  live.session = null;
  live.room = null;
  live.key = null;
  memory = null;
  log = null;
  unsubscribe?.();
  unsubscribe = null;
  // The stages as they stand at the end, read before the engine goes.
  if (s && l) l.observeLatency(s.latencyStages?.().peers ?? {});
  const ending = Promise.all([m?.flush(), l?.end()]).then(refreshLists);
  if (s) await s.leave();
  await ending.catch((err: unknown) => console.warn(`session not saved: ${String(err)}`));
}

// A page closed mid-session cannot wait for writes; what is started here usually lands, and the
// next start closes a record left without an end (store/history.ts).
if (typeof addEventListener === 'function') {
  addEventListener('pagehide', () => {
    void memory?.flush();
    void log?.flush();
  });
}
