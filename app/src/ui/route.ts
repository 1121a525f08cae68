// Where the app is, from the address bar's path and fragment. Pure: the router
// (router.svelte.ts) feeds it `location.pathname` and `location.hash` and renders what it returns.
//
// A private room's key rides in the fragment, `/r/<room>#k=<key>`: browsers never send a
// fragment over HTTP, so the key reaches the server only inside the `join` message.

/** Room names: what fits in a URL path segment unescaped (RFC 3986 "unreserved"), 1-64 long. */
export const ROOM_NAME = /^[A-Za-z0-9._~-]{1,64}$/;
/** A private room's key as the server accepts it (names.ts makes 22-char ones). */
export const ROOM_KEY = /^[A-Za-z0-9_-]{22,64}$/;

export type Route =
  | { kind: 'home' }
  /** `key`: the private room's key from the fragment, null for an open link. */
  | { kind: 'room'; room: string; key: string | null }
  /** A room link whose fragment holds a key that is not one (cut short when copied?). */
  | { kind: 'bad-key'; room: string }
  /** `/recordings`: the recordings kept on this device. */
  | { kind: 'recordings' }
  /** `/r/<something>` where the something is not a valid room name; `raw` is shown as text. */
  | { kind: 'bad-room'; raw: string }
  | { kind: 'not-found'; path: string };

export function isValidRoomName(name: string): boolean {
  return ROOM_NAME.test(name);
}

/** The key in a fragment such as `#k=<key>`: the key, null when there is none, undefined when
 * there is one that is malformed. */
export function keyFromHash(hash: string): string | null | undefined {
  const k = new URLSearchParams(hash.startsWith('#') ? hash.slice(1) : hash).get('k');
  if (k === null) return null;
  return ROOM_KEY.test(k) ? k : undefined;
}

export function parseRoute(pathname: string, hash = ''): Route {
  if (pathname === '/' || pathname === '' || pathname === '/index.html') return { kind: 'home' };
  if (pathname === '/recordings' || pathname === '/recordings/') return { kind: 'recordings' };
  if (pathname.startsWith('/r/')) {
    let raw = pathname.slice(3);
    if (raw.endsWith('/')) raw = raw.slice(0, -1);
    let decoded = raw;
    try {
      decoded = decodeURIComponent(raw);
    } catch {
      // A malformed %-escape: show it as typed.
    }
    if (!isValidRoomName(decoded)) return { kind: 'bad-room', raw: decoded };
    const key = keyFromHash(hash);
    return key === undefined ? { kind: 'bad-key', room: decoded } : { kind: 'room', room: decoded, key };
  }
  return { kind: 'not-found', path: pathname };
}

/** The path of a room, with a private room's key as its fragment; `room` must be valid (its
 * characters need no escaping), and so must `key` (base64url needs none either). */
export function roomPath(room: string, key: string | null = null): string {
  return key ? `/r/${room}#k=${key}` : `/r/${room}`;
}

/** The link to share: the key's fragment included, no query string, so test-only options such
 * as `?ice=loopback` stay local. */
export function shareLink(origin: string, room: string, key: string | null = null): string {
  return origin + roomPath(room, key);
}

/** A room link pasted where a room name goes: its room and key, or null when it is not one. */
export function parseRoomLink(text: string): { room: string; key: string | null } | null {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    return null;
  }
  const route = parseRoute(url.pathname, url.hash);
  return route.kind === 'room' ? { room: route.room, key: route.key } : null;
}

/** ICE policy from the page's query string: `?ice=loopback` keeps WebRTC on 127.0.0.1 (tests). */
export function icePolicy(search: string): 'all' | 'loopback' {
  return new URLSearchParams(search).get('ice') === 'loopback' ? 'loopback' : 'all';
}
