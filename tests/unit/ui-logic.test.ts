// The UI's pure logic: routes, scales, the engine-support check (room names and keys:
// room-access.test.ts).
import { describe, expect, it } from 'vitest';
import { icePolicy, isValidRoomName, parseRoute, roomPath, shareLink } from '../../app/src/ui/route';
import {
  detent,
  faderToGainDb,
  formatDb,
  formatMs,
  formatPan,
  framesToMs,
  gainDbToFader,
  meterFraction,
} from '../../app/src/ui/scale';
import { follow, HOLD_MS } from '../../app/src/ui/meter-clock';
import { describeError } from '../../app/src/room/errors';
import {
  checkEngineSupport,
  engineUnavailableReason,
  webrtcUnavailableReason,
} from '../../app/src/audio/support';

describe('routes', () => {
  it('parses home, rooms and bad room names', () => {
    expect(parseRoute('/')).toEqual({ kind: 'home' });
    expect(parseRoute('/index.html')).toEqual({ kind: 'home' });
    expect(parseRoute('/r/warm-cello-42')).toEqual({ kind: 'room', room: 'warm-cello-42', key: null });
    expect(parseRoute('/r/a.b_c~d-E9/')).toEqual({ kind: 'room', room: 'a.b_c~d-E9', key: null });
    expect(parseRoute('/r/' + 'x'.repeat(64))).toEqual({ kind: 'room', room: 'x'.repeat(64), key: null });
    expect(parseRoute('/r/' + 'x'.repeat(65)).kind).toBe('bad-room');
    expect(parseRoute('/r/')).toEqual({ kind: 'bad-room', raw: '' });
    expect(parseRoute('/r/two%20words')).toEqual({ kind: 'bad-room', raw: 'two words' });
    expect(parseRoute('/r/a/b')).toEqual({ kind: 'bad-room', raw: 'a/b' });
    expect(parseRoute('/r/%E0%A4%A')).toEqual({ kind: 'bad-room', raw: '%E0%A4%A' });
    expect(parseRoute('/r/%3Cimg%3E')).toEqual({ kind: 'bad-room', raw: '<img>' });
    expect(parseRoute('/elsewhere')).toEqual({ kind: 'not-found', path: '/elsewhere' });
    expect(parseRoute('/recordings')).toEqual({ kind: 'recordings' });
    expect(parseRoute('/recordings/')).toEqual({ kind: 'recordings' });
    expect(parseRoute('/recordings/x')).toEqual({ kind: 'not-found', path: '/recordings/x' });
  });

  it('validates names, builds paths and share links without the query', () => {
    expect(isValidRoomName('ok-room')).toBe(true);
    expect(isValidRoomName('')).toBe(false);
    expect(isValidRoomName('é')).toBe(false);
    expect(isValidRoomName('a?b')).toBe(false);
    expect(roomPath('abc')).toBe('/r/abc');
    expect(shareLink('https://tutti.example', 'abc')).toBe('https://tutti.example/r/abc');
  });

  it('reads the ICE policy from the query string', () => {
    expect(icePolicy('?ice=loopback')).toBe('loopback');
    expect(icePolicy('?x=1&ice=loopback')).toBe('loopback');
    expect(icePolicy('')).toBe('all');
    expect(icePolicy('?ice=relay')).toBe('all');
  });
});

describe('scales', () => {
  it('maps dBFS to a meter fraction on a -60..0 scale', () => {
    expect(meterFraction(-Infinity)).toBe(0);
    expect(meterFraction(NaN)).toBe(0);
    expect(meterFraction(-80)).toBe(0);
    expect(meterFraction(-60)).toBe(0);
    expect(meterFraction(-30)).toBeCloseTo(0.5, 12);
    expect(meterFraction(-6)).toBeCloseTo(0.9, 12);
    expect(meterFraction(0)).toBe(1);
    expect(meterFraction(3)).toBe(1);
    for (let db = -60; db < 0; db += 0.5) expect(meterFraction(db + 0.5)).toBeGreaterThan(meterFraction(db));
  });

  it('maps fader positions to gains: the bottom is off, the top +12 dB', () => {
    expect(faderToGainDb(-60)).toBe(-Infinity);
    expect(faderToGainDb(-59.5)).toBe(-59.5);
    expect(faderToGainDb(0)).toBe(0);
    expect(faderToGainDb(20)).toBe(12);
    expect(gainDbToFader(-Infinity)).toBe(-60);
    expect(gainDbToFader(-100)).toBe(-60);
    expect(gainDbToFader(6)).toBe(6);
    for (const p of [-59.5, -20, 0, 11.5, 12]) expect(gainDbToFader(faderToGainDb(p))).toBe(p);
  });

  it('sticks near 0 dB and formats figures at fixed widths', () => {
    expect(detent(0.8)).toBe(0);
    expect(detent(-1)).toBe(0);
    expect(detent(1.5)).toBe(1.5);
    expect(formatDb(-Infinity)).toBe('off');
    expect(formatDb(0)).toBe('0.0 dB');
    expect(formatDb(-0.01)).toBe('0.0 dB');
    expect(formatDb(3.25)).toBe('+3.3 dB');
    expect(formatDb(-12)).toBe('−12.0 dB');
    expect(formatPan(0)).toBe('C');
    expect(formatPan(-0.4)).toBe('L 40');
    expect(formatPan(1)).toBe('R 100');
    expect(formatMs(null)).toBe('–');
    expect(formatMs(12.345)).toBe('12.3');
    expect(framesToMs(128)).toBeCloseTo(2.667, 3);
    expect(framesToMs(32)).toBeCloseTo(0.667, 3);
  });

  it('meter ballistics: rise at once, hold the peak, then fall smoothly', () => {
    const b = { shown: 0, hold: 0, holdAt: 0 };
    follow(b, 0.9, 0, 16);
    expect(b.shown).toBe(0.9);
    expect(b.hold).toBe(0.9);
    follow(b, 0.1, 500, 500);
    expect(b.shown).toBeLessThan(0.9);
    expect(b.shown).toBeGreaterThan(0.1);
    expect(b.hold).toBe(0.9);
    follow(b, 0.1, HOLD_MS + 100, 100);
    expect(b.hold).toBeLessThan(0.9);
  });
});

describe('engine support check', () => {
  const ok = {
    isSecureContext: true,
    crossOriginIsolated: true,
    SharedArrayBuffer,
    AudioWorkletNode: function AudioWorkletNode() {},
    WebAssembly,
  } as unknown as typeof globalThis;

  it('passes when isolated with shared memory, worklets and WebAssembly', () => {
    expect(checkEngineSupport(ok).ok).toBe(true);
  });

  it('names what is missing', () => {
    const insecure = checkEngineSupport({ ...ok, isSecureContext: false } as typeof globalThis);
    expect(insecure.ok).toBe(false);
    expect(insecure.title).toMatch(/secure context/);
    const notIsolated = checkEngineSupport({ ...ok, crossOriginIsolated: false } as typeof globalThis);
    expect(notIsolated.title).toMatch(/crossOriginIsolated/);
    const noWorklet = checkEngineSupport({
      ...ok,
      AudioWorkletNode: undefined,
    } as unknown as typeof globalThis);
    expect(noWorklet.title).toMatch(/AudioWorklet/);
    const noShared = checkEngineSupport({
      ...ok,
      SharedArrayBuffer: undefined,
    } as unknown as typeof globalThis);
    expect(noShared.title).toMatch(/no SharedArrayBuffer/);
    // Isolated, yet no SharedArrayBuffer: what WebKitGTK's MiniBrowser answers (tests/browser/engines).
    const noSharedGlobal = { ...ok, SharedArrayBuffer: undefined } as unknown as typeof globalThis;
    expect(engineUnavailableReason(noSharedGlobal)).toBe(`${noShared.title} ${noShared.detail}`);
    expect(engineUnavailableReason(ok)).toBeNull();
  });

  it('a room also needs RTCPeerConnection, and says so where it is missing', () => {
    expect(webrtcUnavailableReason(ok)).toMatch(
      /^This browser has no RTCPeerConnection\. .*WebRTC data channels/,
    );
    const rtc = { ...ok, RTCPeerConnection: function RTCPeerConnection() {} } as unknown as typeof globalThis;
    expect(webrtcUnavailableReason(rtc)).toBeNull();
    expect(describeError({ code: 'no-webrtc', message: 'm' }, 0).title).toBe(
      'This browser cannot join a room',
    );
  });
});
