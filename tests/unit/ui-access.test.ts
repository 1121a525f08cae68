// @vitest-environment happy-dom
// The room's access controls as the user sees them: what each refusal offers (and, for a
// limited password, not before the wait is over), the owner's lock and remove controls, the
// password label and the private link in the header, and the name field's rule.
import { flushSync, mount, unmount, type Component } from 'svelte';
import { afterEach, describe, expect, it, vi } from 'vitest';
import ErrorBanner from '../../app/src/ui/components/ErrorBanner.svelte';
import RoomHeader from '../../app/src/ui/components/RoomHeader.svelte';
import Strip from '../../app/src/ui/components/Strip.svelte';
import JoinCard from '../../app/src/ui/components/JoinCard.svelte';
import Room from '../../app/src/ui/components/Room.svelte';
import type { RoomAccess, RoomError, RoomSession, RoomView } from '../../app/src/room/types';
import { participant, roomView } from './views';

let mounted: ReturnType<typeof mount> | null = null;

/** Mounts one of the components (each has its own props type) with `props`. */
function render<Props extends Record<string, unknown>>(
  component: Component<Props>,
  props: Props,
): HTMLElement {
  const target = document.createElement('div');
  document.body.replaceChildren(target);
  mounted = mount(component, { target, props });
  flushSync();
  return target;
}

const q = (root: ParentNode, id: string) => root.querySelector(`[data-testid="${id}"]`) as HTMLElement | null;

function type(input: HTMLElement | null, value: string): void {
  (input as HTMLInputElement).value = value;
  input!.dispatchEvent(new Event('input', { bubbles: true }));
  flushSync();
}

afterEach(() => {
  if (mounted) unmount(mounted);
  mounted = null;
  vi.useRealTimers();
});

describe('error banner', () => {
  function banner(error: RoomError) {
    const calls: unknown[][] = [];
    const target = render(ErrorBanner, {
      error,
      onretry: (pw?: string) => calls.push(['retry', pw]),
      onhome: () => calls.push(['home']),
    });
    return { target, calls };
  }

  it('offers to join an open room without the password given', () => {
    const { target, calls } = banner({ code: 'no-password', message: 'server words' });
    expect(q(target, 'room-error')!.textContent).toContain(
      'This room has no password: anyone with the link can join. Join without a password?',
    );
    expect(q(target, 'password')).toBeNull();
    q(target, 'join-without-password')!.click();
    expect(calls).toEqual([['retry', '']]);
  });

  it('takes another password after a wrong one', () => {
    const { target, calls } = banner({ code: 'wrong-password', message: 'm' });
    expect(q(target, 'room-error')!.textContent).toContain('Wrong password');
    type(q(target, 'password'), 'sesame');
    q(target, 'retry-password')!.click();
    expect(calls).toEqual([['retry', 'sesame']]);
  });

  it('counts down a limited password and offers it only once the wait is over', () => {
    vi.useFakeTimers();
    vi.setSystemTime(1_000_000);
    const { target, calls } = banner({ code: 'too-many-attempts', message: 'm', retryAt: 1_000_000 + 5_000 });
    const button = q(target, 'retry-password') as HTMLButtonElement;
    expect(q(target, 'room-error-message')!.textContent).toBe(
      'Too many wrong passwords were tried for this room. You can try again in 5 s.',
    );
    expect(button.disabled).toBe(true);
    button.click();
    q(target, 'retry-password')!
      .closest('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));
    expect(calls).toEqual([]);
    vi.advanceTimersByTime(3_000);
    flushSync();
    expect(q(target, 'room-error-message')!.textContent).toMatch(/in 2 s\.$/);
    vi.advanceTimersByTime(2_000);
    flushSync();
    expect(button.disabled).toBe(false);
    expect(q(target, 'room-error-message')!.textContent).toMatch(/try again now/);
    button.click();
    expect(calls).toEqual([['retry', '']]);
  });

  it('says a locked room is locked, and a removed member was removed, with nothing that rejoins by itself', () => {
    let { target, calls } = banner({ code: 'room-locked', message: 'm' });
    expect(q(target, 'room-error')!.textContent).toContain('This room is locked');
    q(target, 'retry-join')!.click();
    expect(calls).toEqual([['retry', undefined]]);
    unmount(mounted!);
    ({ target, calls } = banner({ code: 'removed', message: 'm' }));
    expect(q(target, 'room-error')!.textContent).toContain('You were removed from this room');
    expect(q(target, 'retry-join')).toBeNull();
    expect(q(target, 'retry-password')).toBeNull();
    q(target, 'error-home')!.click();
    expect(calls).toEqual([['home']]);
  });
});

describe('room header', () => {
  const access = (over: Partial<RoomAccess> = {}): RoomAccess => ({
    isOwner: false,
    locked: false,
    protected: false,
    private: false,
    ...over,
  });

  it('shows whether the room has a password, is private or locked, and shares the key', () => {
    const key = 'AbCdEfGhIjKlMnOpQrSt_-';
    const target = render(RoomHeader, {
      room: 'band',
      roomKey: key,
      signaling: 'open',
      joined: true,
      access: access({ protected: true, private: true, locked: true }),
      onleave: () => {},
    });
    expect(q(target, 'share-link')!.textContent).toBe(`${location.origin}/r/band#k=${key}`);
    expect(q(target, 'room-protected')!.dataset.protected).toBe('true');
    expect(q(target, 'room-protected')!.textContent).toContain('Password');
    expect(q(target, 'room-private')).not.toBeNull();
    expect(q(target, 'room-locked-badge')).not.toBeNull();
    expect(q(target, 'lock-room')).toBeNull();
  });

  it('gives the owner a lock that follows the server', () => {
    const locks: boolean[] = [];
    const target = render(RoomHeader, {
      room: 'band',
      signaling: 'open',
      joined: true,
      access: access({ isOwner: true }),
      onleave: () => {},
      onlock: (l: boolean) => locks.push(l),
    });
    expect(q(target, 'room-protected')!.textContent).toContain('No password');
    const lock = q(target, 'lock-room')!;
    expect(lock.getAttribute('aria-pressed')).toBe('false');
    expect(lock.textContent).toBe('Lock room');
    lock.click();
    expect(locks).toEqual([true]);
  });
});

describe('participant strip', () => {
  const p = participant('p1', 'Bo', { levels: { peakL: -12, peakR: -12, rmsL: -20, rmsR: -20 } });

  it('lets the owner remove a participant after confirming', () => {
    let removed = 0;
    const target = render(Strip, { p, onstrip: () => {}, onremove: () => removed++ });
    q(target, 'strip-remove')!.click();
    flushSync();
    expect(target.textContent).toContain('Remove Bo from the room?');
    q(target, 'strip-remove-cancel')!.click();
    flushSync();
    expect(removed).toBe(0);
    q(target, 'strip-remove')!.click();
    flushSync();
    q(target, 'strip-remove-confirm')!.click();
    flushSync();
    expect(removed).toBe(1);
  });

  it('has no remove control for others', () => {
    const target = render(Strip, { p, onstrip: () => {} });
    expect(q(target, 'strip-remove')).toBeNull();
  });
});

describe('name field', () => {
  it('refuses in place what the server would refuse, and joins with the trimmed name', () => {
    const joins: string[] = [];
    const target = render(JoinCard, {
      room: 'band',
      privateRoom: true,
      knownName: '',
      onjoin: (n: string) => joins.push(n),
    });
    expect(q(target, 'join-private')).not.toBeNull();
    const submit = () => {
      q(target, 'join')!.click();
      flushSync();
    };
    type(q(target, 'display-name'), 'Ana\u202Egpj.exe');
    submit();
    expect(q(target, 'name-problem')!.textContent).toMatch(/direction of the text/);
    expect((q(target, 'display-name') as HTMLInputElement).getAttribute('aria-invalid')).toBe('true');
    type(q(target, 'display-name'), '\u200b\u200b');
    submit();
    expect(q(target, 'name-problem')!.textContent).toMatch(/visible character/);
    expect(joins).toEqual([]);
    type(q(target, 'display-name'), '  Ana  ');
    expect(q(target, 'name-problem')).toBeNull();
    submit();
    expect(joins).toEqual(['Ana']);
  });
});

describe('room view for the owner', () => {
  function session(view: RoomView) {
    const calls: unknown[][] = [];
    const record =
      (name: string) =>
      (...args: unknown[]) =>
        void calls.push([name, ...args]);
    const s = {
      view,
      subscribe: (fn: (v: RoomView) => void) => (fn(view), () => {}),
      setStrip: record('setStrip'),
      setMaster: record('setMaster'),
      setMonitor: record('setMonitor'),
      retryPassword: record('retryPassword'),
      setLocked: record('setLocked'),
      removePeer: record('removePeer'),
      startRecording: async () => {},
      stopRecording: async () => {},
      leave: async () => {},
    } satisfies RoomSession;
    return { s, calls };
  }

  it('reaches the session with the lock and a confirmed removal, and shows a refusal as a notice', () => {
    const view = roomView([participant('p1', 'Bo')]);
    const owned: RoomView = {
      ...view,
      access: { ...view.access, isOwner: true },
      notice: 'Only the room’s owner can do that.',
    };
    const { s, calls } = session(owned);
    const target = render(Room, { session: s, onleave: () => {}, onhome: () => {} });
    q(target, 'lock-room')!.click();
    q(target, 'strip-remove')!.click();
    flushSync();
    q(target, 'strip-remove-confirm')!.click();
    expect(calls).toEqual([
      ['setLocked', true],
      ['removePeer', 'p1'],
    ]);
    expect(q(target, 'room-notice')!.textContent).toBe('Only the room’s owner can do that.');
  });

  it('gives others neither lock nor remove', () => {
    const { s } = session(roomView([participant('p1', 'Bo')]));
    const target = render(Room, { session: s, onleave: () => {}, onhome: () => {} });
    expect(q(target, 'lock-room')).toBeNull();
    expect(q(target, 'strip-remove')).toBeNull();
  });
});
