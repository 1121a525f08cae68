// The pages wait for the stored settings before they show (no default flashing in), but storage
// that never answers must not keep them blank: WebKit left a room link's page empty when the
// previous page went into its back-forward cache with a read-write transaction under way.
import { afterEach, describe, expect, it, vi } from 'vitest';

vi.mock('../../app/src/store/history', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../app/src/store/history')>()),
  // Storage that never answers this one read.
  recentSessions: () => new Promise(() => {}),
}));
vi.mock('../../app/src/store/settings', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../app/src/store/settings')>()),
  loadSettings: () => Promise.resolve({ name: 'Ada', audio: { stored: true } }),
}));
vi.mock('../../app/src/store/rooms', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../app/src/store/rooms')>()),
  recentRooms: () => Promise.resolve([{ room: 'band', at: 1, key: null }]),
}));

afterEach(() => {
  vi.useRealTimers();
});

describe('saved settings at start', () => {
  it('the page shows after a bounded wait with what was read, when one read never answers', async () => {
    vi.useFakeTimers();
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { saved, savedReady } = await import('../../app/src/ui/session.svelte');
    let ready = false;
    void savedReady.then(() => (ready = true));
    await vi.advanceTimersByTimeAsync(1000);
    // What answered is in; the page still waits for the rest.
    expect(saved.name).toBe('Ada');
    expect(saved.recent).toEqual([{ room: 'band', at: 1, key: null }]);
    expect(saved.ready).toBe(false);
    expect(ready).toBe(false);
    await vi.advanceTimersByTimeAsync(600);
    expect(ready).toBe(true);
    expect(saved.ready).toBe(true);
    expect(saved.sessions).toEqual([]);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/not all read within 1500 ms/));
  });
});
