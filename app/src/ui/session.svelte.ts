// The one live session, if any. Created inside the Join click (browsers start audio only from a
// user gesture) and left when the user leaves or navigates away from its room.

import { openSession } from '../room/session';
import type { JoinRequest, RoomSession } from '../room/types';
import { addRecent, saveName } from './prefs';
import { icePolicy } from './route';

export const live = $state<{ session: RoomSession | null; room: string | null }>({
  session: null,
  room: null,
});

/** Opens a session for `req`, leaving any other first. Call from a click handler. */
export function join(req: JoinRequest): RoomSession {
  if (live.session) void leave();
  saveName(req.name);
  addRecent(req.room);
  const session = openSession(req, { ice: icePolicy(location.search) });
  live.session = session;
  live.room = req.room;
  return session;
}

/** Leaves the live session (if any); resolves once microphone and connections are released. */
export async function leave(): Promise<void> {
  const s = live.session;
  live.session = null;
  live.room = null;
  if (s) await s.leave();
}
