// Joining asks the server, not navigator.onLine: a browser whose only interface is loopback
// reports offline while the server that served the page answers (transport.ts, pwa.ts).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fetchIceServers } from '../../app/src/room/transport';
import { serverAnswers } from '../../app/src/ui/pwa';

const ice = [{ urls: 'stun:stun.example.org:3478' }];
const answer = (body: unknown, status = 200) =>
  vi.fn(async () => new Response(JSON.stringify(body), { status })) as unknown as typeof fetch;
const unreachable = vi.fn(async () => {
  throw new TypeError('Failed to fetch');
}) as unknown as typeof fetch;

describe('reaching the server', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('joins when the browser says offline but the server answers', async () => {
    vi.stubGlobal('navigator', { onLine: false });
    expect(await fetchIceServers(answer({ iceServers: ice }))).toEqual(ice);
    expect(await serverAnswers(answer({}))).toBe(true);
  });

  it('is offline when the server cannot be reached, whatever the browser says', async () => {
    for (const onLine of [true, false]) {
      vi.stubGlobal('navigator', { onLine });
      expect(await fetchIceServers(unreachable)).toBe('offline');
      expect(await serverAnswers(unreachable)).toBe(false);
    }
  });

  it('a server that answers without usable ICE servers means none (a LAN needs none)', async () => {
    expect(await fetchIceServers(answer({ iceServers: 'nope' }))).toEqual([]);
    expect(await fetchIceServers(answer({}, 500))).toEqual([]);
    expect(await serverAnswers(answer({}, 500))).toBe(true);
  });

  it('asks /api/config afresh, bounded in time', async () => {
    const get = answer({ iceServers: [] });
    await fetchIceServers(get);
    const [url, init] = (get as unknown as { mock: { calls: [string, RequestInit][] } }).mock.calls[0];
    expect(url).toBe('/api/config');
    expect(init.cache).toBe('no-store');
    expect(init.signal).toBeInstanceOf(AbortSignal);
  });
});
