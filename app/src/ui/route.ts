// Where the app is, from the address bar's path. Pure: the router (router.svelte.ts) feeds it
// `location.pathname` and renders what it returns.

/** Room names: what fits in a URL path segment unescaped (RFC 3986 "unreserved"), 1-64 long. */
export const ROOM_NAME = /^[A-Za-z0-9._~-]{1,64}$/;

export type Route =
  | { kind: 'home' }
  | { kind: 'room'; room: string }
  /** `/recordings`: the recordings kept on this device. */
  | { kind: 'recordings' }
  /** `/r/<something>` where the something is not a valid room name; `raw` is shown as text. */
  | { kind: 'bad-room'; raw: string }
  | { kind: 'not-found'; path: string };

export function isValidRoomName(name: string): boolean {
  return ROOM_NAME.test(name);
}

export function parseRoute(pathname: string): Route {
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
    return isValidRoomName(decoded) ? { kind: 'room', room: decoded } : { kind: 'bad-room', raw: decoded };
  }
  return { kind: 'not-found', path: pathname };
}

/** The path of a room; `room` must be valid (its characters need no escaping). */
export function roomPath(room: string): string {
  return `/r/${room}`;
}

/** The link to share: no query string, so test-only options such as `?ice=loopback` stay local. */
export function shareLink(origin: string, room: string): string {
  return origin + roomPath(room);
}

/** ICE policy from the page's query string: `?ice=loopback` keeps WebRTC on 127.0.0.1 (tests). */
export function icePolicy(search: string): 'all' | 'loopback' {
  return new URLSearchParams(search).get('ice') === 'loopback' ? 'loopback' : 'all';
}
