// Who gets into a room, client side: generated names and keys (their entropy and format), room
// links with a key in the fragment, the join message, the welcome's owner and lock fields, the
// words each refusal shows, the display-name rule, the owner secrets kept per (room, key), the
// bound on early ICE candidates, and a signaling client that never rejoins by itself after a
// refusal (a stand-in WebSocket; the real one runs in tests/browser/security).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import {
  base64url,
  GENERATED_ROOM_NAME,
  KEY_BYTES,
  randomRoomKey,
  randomRoomName,
  randomSuffix,
  ROOM_NAME_BITS,
  SUFFIX_ALPHABET,
  SUFFIX_BITS,
  SUFFIX_CHARS,
  type RandomFill,
} from '../../app/src/ui/names';
import {
  isValidRoomName,
  keyFromHash,
  parseRoomLink,
  parseRoute,
  ROOM_KEY,
  roomPath,
  shareLink,
} from '../../app/src/ui/route';
import { FATAL_JOIN_ERRORS, joinMessage, parseServerMessage } from '../../app/src/net/protocol';
import { SignalingClient, type SignalingEvents } from '../../app/src/net/signaling';
import { describeError, noticeFor, waitText } from '../../app/src/room/errors';
import { checkDisplayName, NAME_MAX_CHARS } from '../../app/src/room/display-name';
import {
  OWNER_MAX,
  OWNER_PREFIX,
  ownerMemory,
  ownerStorageKey,
  type OwnerStorage,
} from '../../app/src/room/owner-memory';
import { CandidateQueue, MAX_PENDING_CANDIDATES } from '../../app/src/net/mesh';

/** A fill that hands out `bytes` in order (then fails: a test must give enough). */
function scripted(bytes: number[]): RandomFill {
  let i = 0;
  return (out) => {
    for (let k = 0; k < out.length; k++) {
      if (i >= bytes.length) throw new Error('scripted random bytes ran out');
      out[k] = bytes[i++]!;
    }
    return out;
  };
}

describe('generated room names', () => {
  it('carry at least 64 random bits in the suffix alone', () => {
    expect(SUFFIX_ALPHABET).toHaveLength(32);
    expect(new Set(SUFFIX_ALPHABET).size).toBe(32);
    expect(SUFFIX_CHARS).toBe(13);
    expect(SUFFIX_BITS).toBe(65);
    expect(SUFFIX_BITS).toBeGreaterThanOrEqual(64);
    // 20 adjectives × 20 instruments × 32^13 suffixes.
    expect(ROOM_NAME_BITS).toBeCloseTo(Math.log2(400) + 65, 12);
    console.log(
      `generated room names: ${SUFFIX_BITS} bits in the suffix, ${ROOM_NAME_BITS.toFixed(2)} bits in all`,
    );
  });

  it('are readable, valid room names, all different', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const n = randomRoomName();
      expect(n).toMatch(GENERATED_ROOM_NAME);
      expect(isValidRoomName(n)).toBe(true);
      expect(n.length).toBeLessThanOrEqual(29);
      seen.add(n);
    }
    expect(seen.size).toBe(2000);
    // The suffix alphabet avoids letters read as digits.
    expect(SUFFIX_ALPHABET).not.toMatch(/[ilou]/);
  });

  it('give known names for known bytes, drawing again rather than favouring a word', () => {
    const suffix = [...Array(13).keys()];
    expect(randomRoomName(scripted([0, 0, ...suffix]))).toBe('warm-cello-0123456789abc');
    expect(randomRoomName(scripted([19, 39, ...suffix.map((b) => b + 19)]))).toBe(
      'little-marimba-kmnpqrstvwxyz',
    );
    // 240 and above are not a multiple of 20 below 256: drawn again.
    expect(randomRoomName(scripted([240, 255, 21, 250, 2, ...suffix]))).toBe('bright-violin-0123456789abc');
    // The suffix keeps the low five bits of each byte: every character equally likely.
    const counts = new Map<string, number>();
    for (const c of randomSuffix(256, scripted([...Array(256).keys()])))
      counts.set(c, (counts.get(c) ?? 0) + 1);
    expect([...counts.values()]).toEqual(Array(32).fill(8));
  });

  it('come from crypto.getRandomValues, never from Math.random', () => {
    const math = vi.spyOn(Math, 'random').mockImplementation(() => {
      throw new Error('Math.random used');
    });
    const crypt = vi.spyOn(crypto, 'getRandomValues');
    try {
      expect(randomRoomName()).toMatch(GENERATED_ROOM_NAME);
      expect(randomRoomKey()).toMatch(ROOM_KEY);
      expect(math).not.toHaveBeenCalled();
      expect(crypt).toHaveBeenCalled();
    } finally {
      math.mockRestore();
      crypt.mockRestore();
    }
    const source = readFileSync(new URL('../../app/src/ui/names.ts', import.meta.url), 'utf8');
    expect(source).not.toMatch(/Math\.random/);
  });
});

describe('private room keys and links', () => {
  it('are 128 random bits in base64url', () => {
    expect(KEY_BYTES * 8).toBe(128);
    const keys = new Set<string>();
    for (let i = 0; i < 500; i++) {
      const k = randomRoomKey();
      expect(k).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(k).toMatch(ROOM_KEY);
      keys.add(k);
    }
    expect(keys.size).toBe(500);
    // RFC 4648 test vectors, and the two characters base64url changes.
    const text = (s: string) => base64url(new TextEncoder().encode(s));
    expect(['', 'f', 'fo', 'foo', 'foob', 'fooba', 'foobar'].map(text)).toEqual([
      '',
      'Zg',
      'Zm8',
      'Zm9v',
      'Zm9vYg',
      'Zm9vYmE',
      'Zm9vYmFy',
    ]);
    expect(base64url(new Uint8Array([0xfb, 0xff, 0xbf]))).toBe('-_-_');
    expect(randomRoomKey(scripted(Array(16).fill(0)))).toBe('A'.repeat(22));
  });

  it('ride in the fragment, never in the path or the query', () => {
    const key = 'AbCdEfGhIjKlMnOpQrSt_-';
    expect(roomPath('band', key)).toBe(`/r/band#k=${key}`);
    expect(roomPath('band')).toBe('/r/band');
    expect(shareLink('https://tutti.example', 'band', key)).toBe(`https://tutti.example/r/band#k=${key}`);
    const url = new URL(shareLink('https://tutti.example', 'band', key));
    expect(url.pathname + url.search).toBe('/r/band');
    expect(parseRoute('/r/band', `#k=${key}`)).toEqual({ kind: 'room', room: 'band', key });
    expect(parseRoute('/r/band', '')).toEqual({ kind: 'room', room: 'band', key: null });
    expect(parseRoute('/r/band', '#other=1')).toEqual({ kind: 'room', room: 'band', key: null });
    // A key cut short when copied is said to be damaged, not dropped into the open room.
    expect(parseRoute('/r/band', '#k=AbCd')).toEqual({ kind: 'bad-key', room: 'band' });
    expect(parseRoute('/r/band', '#k=' + 'x'.repeat(65))).toEqual({ kind: 'bad-key', room: 'band' });
    expect(keyFromHash(`#k=${key}`)).toBe(key);
    expect(keyFromHash('')).toBeNull();
    expect(keyFromHash('#k=bad key with spaces....')).toBeUndefined();
    expect(parseRoomLink(`https://tutti.example/r/band?ice=loopback#k=${key}`)).toEqual({
      room: 'band',
      key,
    });
    expect(parseRoomLink('https://tutti.example/r/band')).toEqual({ room: 'band', key: null });
    expect(parseRoomLink('band')).toBeNull();
    expect(parseRoomLink('https://tutti.example/recordings')).toBeNull();
  });
});

describe('join message', () => {
  const base = { room: 'band', name: 'Ana', peer: 'a'.repeat(32), token: 'b'.repeat(32) };

  it('carries key, owner and password only when set', () => {
    expect(joinMessage(base)).toEqual({ type: 'join', ...base });
    expect(joinMessage({ ...base, password: '', key: null, owner: null })).toEqual({ type: 'join', ...base });
    const key = 'k'.repeat(22);
    const owner = 'c'.repeat(32);
    expect(joinMessage({ ...base, password: 'pw', key, owner })).toEqual({
      type: 'join',
      ...base,
      password: 'pw',
      key,
      owner,
    });
    expect(Object.keys(joinMessage({ ...base, key }))).toEqual([
      'type',
      'room',
      'name',
      'peer',
      'token',
      'key',
    ]);
  });

  it('goes to a socket URL that has no fragment or query', () => {
    const loc = {
      protocol: 'https:',
      host: 'tutti.example:8443',
      hash: '#k=' + 'k'.repeat(22),
      search: '?x=1',
    } as Location;
    expect(SignalingClient.urlFor(loc)).toBe('wss://tutti.example:8443/ws');
    expect(SignalingClient.urlFor({ ...loc, protocol: 'http:' } as Location)).toBe(
      'ws://tutti.example:8443/ws',
    );
  });
});

describe('welcome, room and error messages', () => {
  const welcome = { type: 'welcome', room: 'r', peer: 'p', peers: [{ peer: 'q', name: 'Q' }], cap: 16 };

  it('read the owner secret, the owner flag, the lock and the password flag', () => {
    const owner = '0123456789abcdef0123456789abcdef';
    expect(
      parseServerMessage(
        JSON.stringify({ ...welcome, owner, isOwner: true, locked: false, protected: true }),
      ),
    ).toEqual({
      ...welcome,
      owner,
      isOwner: true,
      locked: false,
      protected: true,
      topology: 'mesh',
    });
    // Fields missing (an older server) or malformed read as "not": no owner, not locked.
    expect(parseServerMessage(JSON.stringify(welcome))).toEqual({
      ...welcome,
      owner: null,
      isOwner: false,
      locked: false,
      protected: false,
      topology: 'mesh',
    });
    expect(
      parseServerMessage(JSON.stringify({ ...welcome, owner: 'NOT-HEX', isOwner: 'yes', locked: 1 })),
    ).toMatchObject({
      owner: null,
      isOwner: false,
      locked: false,
    });
    expect(parseServerMessage('{"type":"room","locked":true}')).toEqual({ type: 'room', locked: true });
    expect(parseServerMessage('{"type":"room","locked":"yes"}')).toBeNull();
    expect(parseServerMessage('{"type":"peer-left","peer":"q","reason":"removed"}')).toEqual({
      type: 'peer-left',
      peer: 'q',
      reason: 'removed',
    });
  });

  it('read how long to wait, and only a sane wait', () => {
    expect(
      parseServerMessage(
        '{"type":"error","code":"too-many-attempts","message":"Wait.","retryAfterMs":42000}',
      ),
    ).toEqual({
      type: 'error',
      code: 'too-many-attempts',
      message: 'Wait.',
      retryAfterMs: 42000,
    });
    for (const bad of ['-1', '"soon"', 'null', '1e999']) {
      expect(
        parseServerMessage(`{"type":"error","code":"too-many-attempts","message":"m","retryAfterMs":${bad}}`),
      ).toEqual({
        type: 'error',
        code: 'too-many-attempts',
        message: 'm',
      });
    }
  });

  it('treat every refusal a rejoin would meet again as final', () => {
    for (const code of [
      'wrong-password',
      'no-password',
      'too-many-attempts',
      'room-locked',
      'removed',
      'room-full',
      'bad-name',
    ]) {
      expect(FATAL_JOIN_ERRORS.has(code), code).toBe(true);
    }
    for (const code of ['rate-limited', 'shutting-down', 'not-owner', 'replaced'])
      expect(FATAL_JOIN_ERRORS.has(code), code).toBe(false);
  });
});

describe('what each refusal tells the user', () => {
  const now = 1_000_000;

  it('says what happened and offers the one useful action', () => {
    const d = (code: string, extra: object = {}) =>
      describeError({ code, message: `server says ${code}`, ...extra }, now);
    expect(d('wrong-password')).toMatchObject({ title: 'Wrong password', action: 'password', waitMs: 0 });
    expect(d('no-password')).toEqual({
      title: 'This room has no password',
      message: 'This room has no password: anyone with the link can join. Join without a password?',
      action: 'without-password',
      waitMs: 0,
    });
    expect(d('room-locked')).toMatchObject({ title: 'This room is locked', action: 'retry' });
    expect(d('room-locked').message).toMatch(/nobody new can join/);
    expect(d('removed')).toMatchObject({ title: 'You were removed from this room', action: 'none' });
    expect(d('room-full')).toMatchObject({ title: 'This room is full', message: 'server says room-full' });
    expect(d('something-new')).toMatchObject({
      title: 'Could not join',
      message: 'server says something-new',
      action: 'none',
    });
    expect(noticeFor('not-owner', 'x')).toBe('Only the room’s owner can do that.');
    // The server's own words say why the room stays on the hub (who is in it).
    expect(
      noticeFor('topology-refused', 'The room stays on the hub while JackTrip players are in it (Ann)'),
    ).toMatch(/Ann/);
  });

  it('says when a limited password may be tried again, and offers it only then', () => {
    const wait = describeError({ code: 'too-many-attempts', message: 'm', retryAt: now + 42_000 }, now);
    expect(wait).toMatchObject({ title: 'Too many password attempts', action: 'password', waitMs: 42_000 });
    expect(wait.message).toBe(
      'Too many wrong passwords were tried for this room. You can try again in 42 s.',
    );
    const later = describeError(
      { code: 'too-many-attempts', message: 'm', retryAt: now + 42_000 },
      now + 41_001,
    );
    expect(later.message).toMatch(/in 1 s\.$/);
    const over = describeError(
      { code: 'too-many-attempts', message: 'm', retryAt: now + 42_000 },
      now + 42_000,
    );
    expect(over.waitMs).toBe(0);
    expect(over.message).toMatch(/try again now/);
    expect(
      [1, 999, 1000, 1001, 89_000, 90_000, 150_000, 5_340_000, 5_400_000, 7_200_001].map(waitText),
    ).toEqual(['1 s', '1 s', '1 s', '2 s', '89 s', '2 min', '3 min', '89 min', '2 h', '3 h']);
  });
});

describe('display-name rule', () => {
  it('trims and keeps ordinary names, in any script', () => {
    for (const [raw, name] of [
      ['  Ana ', 'Ana'],
      ['\u00a0Zoë\u3000', 'Zoë'],
      ['李小龍', '李小龍'],
      ['e\u0301mile', 'e\u0301mile'],
      ['👩‍🎤 Jo', '👩‍🎤 Jo'],
      ['x'.repeat(NAME_MAX_CHARS), 'x'.repeat(NAME_MAX_CHARS)],
      ['🎻'.repeat(NAME_MAX_CHARS), '🎻'.repeat(NAME_MAX_CHARS)],
    ]) {
      expect(checkDisplayName(raw!), JSON.stringify(raw)).toEqual({ ok: true, name });
    }
  });

  it('judges the shared vectors as the server does (tests/vectors/display-names.json)', () => {
    const v = JSON.parse(readFileSync(new URL('../vectors/display-names.json', import.meta.url), 'utf8')) as {
      accepted: [string, string][];
      refused: string[];
    };
    expect(v.accepted.length).toBeGreaterThanOrEqual(10);
    expect(v.refused.length).toBeGreaterThanOrEqual(20);
    for (const [raw, name] of v.accepted)
      expect(checkDisplayName(raw), JSON.stringify(raw)).toEqual({ ok: true, name });
    for (const raw of v.refused) expect(checkDisplayName(raw).ok, JSON.stringify(raw)).toBe(false);
  });

  it('refuses, saying why, what the server refuses', () => {
    const problem = (raw: string) => {
      const c = checkDisplayName(raw);
      return c.ok ? null : c.problem;
    };
    expect(problem('')).toMatch(/Enter the name/);
    expect(problem(' \t\n ')).toMatch(/Enter the name/);
    expect(problem('a\tb')).toMatch(/control characters/);
    expect(problem('a\u0000')).toMatch(/control characters/);
    expect(problem('a\u0085b')).toMatch(/control characters/);
    for (const c of [0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]) {
      expect(problem(`Ana${String.fromCodePoint(c)}gpj.exe`), c.toString(16)).toMatch(
        /direction of the text/,
      );
    }
    for (const invisible of [
      '\u200b',
      '\u200b\u200c\u200d',
      '\u2060\ufeff',
      '\u3164',
      '\u115f\u1160',
      '\ufe0f',
      '\u0301',
      '\u00ad',
      '\u{e0041}',
      '\u2800\u2800',
      '\u061c',
      '\u17b4',
      '\u180e',
      '\ufff9',
      '\u{1bca0}',
      '\u{1d173}',
    ]) {
      expect(problem(invisible), JSON.stringify(invisible)).toMatch(/visible character/);
    }
    expect(problem('x'.repeat(NAME_MAX_CHARS + 1))).toBe(
      `A name is at most ${NAME_MAX_CHARS} characters (this one has 41).`,
    );
    // Right-to-left text is fine; only the overrides and isolates are refused.
    expect(checkDisplayName('שלום\u200f')).toEqual({ ok: true, name: 'שלום\u200f' });
  });
});

describe('owner secrets', () => {
  function memoryStorage(): OwnerStorage & { map: Map<string, string> } {
    const map = new Map<string, string>();
    return {
      map,
      get length() {
        return map.size;
      },
      key: (i) => [...map.keys()][i] ?? null,
      getItem: (k) => map.get(k) ?? null,
      setItem: (k, v) => void map.set(k, String(v)),
      removeItem: (k) => void map.delete(k),
    };
  }
  const secret = (n: number) => n.toString(16).padStart(32, '0');

  it('are kept per room and key: a private room and the open one of its name differ', () => {
    const st = memoryStorage();
    const key = 'K'.repeat(22);
    ownerMemory('band', key, st).set(secret(1));
    ownerMemory('band', null, st).set(secret(2));
    expect(ownerMemory('band', key, st).get()).toBe(secret(1));
    expect(ownerMemory('band', null, st).get()).toBe(secret(2));
    expect(ownerMemory('band', 'L'.repeat(22), st).get()).toBeNull();
    expect(ownerStorageKey('band', key)).toBe(`${OWNER_PREFIX}band#${key}`);
    // Not a secret: not kept; garbage read back: none.
    ownerMemory('solo', null, st).set('<script>');
    expect(ownerMemory('solo', null, st).get()).toBeNull();
    st.map.set(ownerStorageKey('solo', null), '{"secret":"zz"}');
    expect(ownerMemory('solo', null, st).get()).toBeNull();
    st.map.set(ownerStorageKey('solo', null), 'not json');
    expect(ownerMemory('solo', null, st).get()).toBeNull();
  });

  it('keep at most OWNER_MAX rooms, the oldest dropped, and survive a storage that throws', () => {
    const st = memoryStorage();
    st.map.set('tutti.audio', '{}');
    let t = 0;
    for (let i = 0; i < OWNER_MAX + 10; i++) ownerMemory(`room-${i}`, null, st, () => t++).set(secret(i));
    expect([...st.map.keys()].filter((k) => k.startsWith(OWNER_PREFIX))).toHaveLength(OWNER_MAX);
    expect(ownerMemory('room-0', null, st).get()).toBeNull();
    expect(ownerMemory(`room-${OWNER_MAX + 9}`, null, st).get()).toBe(secret(OWNER_MAX + 9));
    expect(st.map.get('tutti.audio')).toBe('{}');
    const broken = {
      ...memoryStorage(),
      setItem: () => {
        throw new Error('quota');
      },
    };
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    expect(() => ownerMemory('x', null, broken).set(secret(1))).not.toThrow();
    warn.mockRestore();
    expect(ownerMemory('x', null, null).get()).toBeNull();
  });
});

describe('early ICE candidates', () => {
  it(`are held to ${MAX_PENDING_CANDIDATES} per link, the excess counted and dropped`, () => {
    const q = new CandidateQueue();
    const cand = (i: number) => ({
      candidate: `candidate:${i} 1 udp 1 127.0.0.1 ${1000 + i} typ host`,
      sdpMid: '0',
      sdpMLineIndex: 0,
    });
    const kept = Array.from({ length: 1000 }, (_, i) => q.push(cand(i))).filter(Boolean).length;
    expect(kept).toBe(MAX_PENDING_CANDIDATES);
    expect(q.length).toBe(64);
    expect(q.dropped).toBe(1000 - 64);
    const taken = q.take();
    expect(taken.map((c) => c.candidate)).toEqual(Array.from({ length: 64 }, (_, i) => cand(i).candidate));
    expect(q.length).toBe(0);
    expect(q.push(cand(2000))).toBe(true);
    expect(q.dropped).toBe(936);
  });
});

/** Stands in for the browser's WebSocket: records what is sent, lets the test answer and close. */
class FakeSocket {
  static readonly OPEN = 1;
  static all: FakeSocket[] = [];
  readyState = 0;
  sent: Record<string, unknown>[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number }) => void) | null = null;
  onerror: (() => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.all.push(this);
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.();
  }
  send(text: string): void {
    this.sent.push(JSON.parse(text) as Record<string, unknown>);
  }
  receive(msg: object): void {
    this.onmessage?.({ data: JSON.stringify(msg) });
  }
  close(code = 1000): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.onclose?.({ code });
  }
}

describe('signaling client after a refusal', () => {
  const events: unknown[][] = [];
  const on: SignalingEvents = {
    status: (s) => void events.push(['status', s]),
    welcome: (peers, cap, access) => void events.push(['welcome', access]),
    room: (locked) => void events.push(['room', locked]),
    joined: () => {},
    left: (peer, reason) => void events.push(['left', peer, reason]),
    signal: () => {},
    error: (code, message, fatal, retryAfterMs) => void events.push(['error', code, fatal, retryAfterMs]),
  };
  const params = {
    room: 'band',
    name: 'Ana',
    peer: 'a'.repeat(32),
    token: 'b'.repeat(32),
    key: 'K'.repeat(22),
    password: 'pw',
  };
  const welcome = { type: 'welcome', room: 'band', peer: 'a'.repeat(32), peers: [], cap: 16 };

  beforeEach(() => {
    vi.useFakeTimers();
    FakeSocket.all = [];
    events.length = 0;
    vi.stubGlobal('WebSocket', FakeSocket);
    vi.stubGlobal('performance', { now: () => Date.now() });
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it('sends the key and, once given, the owner secret only in join', () => {
    const c = new SignalingClient('ws://x/ws', params, on);
    const ws = FakeSocket.all[0]!;
    expect(ws.url).toBe('ws://x/ws');
    ws.open();
    expect(ws.sent).toEqual([
      {
        type: 'join',
        room: 'band',
        name: 'Ana',
        peer: params.peer,
        token: params.token,
        password: 'pw',
        key: params.key,
      },
    ]);
    const owner = 'c'.repeat(32);
    ws.receive({ ...welcome, owner, isOwner: true, locked: false, protected: true });
    expect(events).toContainEqual(['welcome', { isOwner: true, owner, locked: false, protected: true }]);
    c.lock(true);
    c.remove('d'.repeat(32));
    ws.receive({ type: 'room', locked: true });
    expect(events).toContainEqual(['room', true]);
    // A server restart: the rejoin carries the owner secret.
    ws.close(1001);
    vi.advanceTimersByTime(300);
    const ws2 = FakeSocket.all[1]!;
    ws2.open();
    expect(ws2.sent[0]).toMatchObject({ type: 'join', key: params.key, owner });
    expect(ws.sent.slice(1)).toEqual([
      { type: 'lock', locked: true },
      { type: 'remove', peer: 'd'.repeat(32) },
    ]);
    c.close();
  });

  for (const code of ['wrong-password', 'no-password', 'too-many-attempts', 'room-locked']) {
    it(`stops on ${code} and joins again only when asked`, () => {
      const c = new SignalingClient('ws://x/ws', params, on);
      FakeSocket.all[0]!.open();
      FakeSocket.all[0]!.receive({
        type: 'error',
        code,
        message: 'no',
        ...(code === 'too-many-attempts' ? { retryAfterMs: 30000 } : {}),
      });
      expect(events).toContainEqual(['error', code, true, code === 'too-many-attempts' ? 30000 : undefined]);
      expect(FakeSocket.all[0]!.readyState).toBe(3);
      vi.advanceTimersByTime(120_000);
      expect(FakeSocket.all).toHaveLength(1);
      expect(c.status).toBe('closed');
      // "Join without a password": the same join without one.
      c.retry('');
      expect(FakeSocket.all).toHaveLength(2);
      FakeSocket.all[1]!.open();
      expect(FakeSocket.all[1]!.sent[0]).not.toHaveProperty('password');
      expect(FakeSocket.all[1]!.sent[0]).toHaveProperty('key', params.key);
      c.close();
    });
  }

  it('stays out after the owner removes it, by error or by close code 4001 alone', () => {
    const c = new SignalingClient('ws://x/ws', params, on);
    FakeSocket.all[0]!.open();
    FakeSocket.all[0]!.receive(welcome);
    FakeSocket.all[0]!.receive({ type: 'not-a-thing' });
    FakeSocket.all[0]!.receive({ type: 'error', code: 'not-owner', message: 'no' });
    expect(events).toContainEqual(['error', 'not-owner', false, undefined]);
    FakeSocket.all[0]!.receive({ type: 'error', code: 'removed', message: 'bye' });
    expect(events).toContainEqual(['error', 'removed', true, undefined]);
    vi.advanceTimersByTime(60_000);
    expect(FakeSocket.all).toHaveLength(1);
    c.close();

    events.length = 0;
    const d = new SignalingClient('ws://x/ws', params, on);
    const ws = FakeSocket.all[1]!;
    ws.open();
    ws.receive(welcome);
    ws.close(4001);
    expect(events).toContainEqual(['error', 'removed', true, undefined]);
    vi.advanceTimersByTime(60_000);
    expect(FakeSocket.all).toHaveLength(2);
    d.close();
  });

  it('sends reception reports, passes layer notices on, and counts a bad one as malformed', () => {
    const layers: [string, string][] = [];
    const c = new SignalingClient('ws://x/ws', params, {
      ...on,
      layer: (layer, reason) => void layers.push([layer, reason]),
    });
    const ws = FakeSocket.all[0]!;
    ws.open();
    ws.receive(welcome);
    c.reception({
      receivedBps: 1_318_750.4,
      loss: 0.02,
      delayRiseMsPerS: -1.5,
      rttMs: 23.4,
      capacityBps: null,
    });
    c.reception({ receivedBps: 6e5, loss: 0, delayRiseMsPerS: 0, rttMs: 0, capacityBps: 1.5e6 });
    expect(ws.sent.slice(1)).toEqual([
      {
        type: 'reception',
        receivedBps: 1_318_750,
        loss: 0.02,
        delayRiseMsPerS: -1.5,
        rttMs: 23.4,
        capacityBps: null,
      },
      {
        type: 'reception',
        receivedBps: 600_000,
        loss: 0,
        delayRiseMsPerS: 0,
        rttMs: 0,
        capacityBps: 1_500_000,
      },
    ]);
    ws.receive({
      type: 'layer',
      layer: 'opus-128',
      reason: '71.3 % of packets lost; 1.0 Mbit/s got through',
    });
    ws.receive({ type: 'layer', layer: 'opus-32', reason: 'x' });
    ws.receive({ type: 'layer', layer: 'as-sent' });
    expect(layers).toEqual([['opus-128', '71.3 % of packets lost; 1.0 Mbit/s got through']]);
    expect(c.malformed).toBe(2);
    c.close();
  });

  it('still reconnects after a plain drop, and a refusal on that rejoin stops it', () => {
    const c = new SignalingClient('ws://x/ws', params, on);
    FakeSocket.all[0]!.open();
    FakeSocket.all[0]!.receive(welcome);
    FakeSocket.all[0]!.close(1006);
    vi.advanceTimersByTime(300);
    expect(FakeSocket.all).toHaveLength(2);
    FakeSocket.all[1]!.open();
    FakeSocket.all[1]!.receive({ type: 'error', code: 'room-locked', message: 'locked' });
    vi.advanceTimersByTime(60_000);
    expect(FakeSocket.all).toHaveLength(2);
    expect(c.status).toBe('closed');
    c.close();
  });
});
