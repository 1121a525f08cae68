// @vitest-environment happy-dom
// The Room view rendered from RoomView fixtures: untrusted names stay text, controls reach the
// session, errors and the empty room show what the user can do.
import { flushSync, mount, unmount } from 'svelte';
import { afterEach, describe, expect, it } from 'vitest';
import Room from '../../app/src/ui/components/Room.svelte';
import type { ParticipantView, RoomSession, RoomView, StripSettings } from '../../app/src/room/types';
import * as views from './views';

/** A participant with live figures: levels, latency, buffer, loss and a format to show. */
function participant(peer: string, name: string): ParticipantView {
  return views.participant(peer, name, {
    levels: { peakL: -12, peakR: -18, rmsL: -20, rmsR: -24 },
    latencyMs: 23.4,
    rttMs: 12.1,
    bufferMs: 5.3,
    targetMs: 5.3,
    lossPct: 0.12,
    underruns: 3,
    format: 'PCM16 stereo 128',
  });
}

/** Room 'warm-cello-42', joined, empty and idle with the monitor at 0 dB, `over` on top. */
function fixture(over: Partial<RoomView> = {}): RoomView {
  return { ...views.roomView([]), room: 'warm-cello-42', monitor: { on: false, gainDb: 0 }, ...over };
}

interface FakeSession extends Omit<RoomSession, 'view'> {
  view: RoomView;
  calls: unknown[][];
  push(v: RoomView): void;
  listeners: number;
}

function fakeSession(view: RoomView): FakeSession {
  const fns = new Set<(v: RoomView) => void>();
  const s: FakeSession = {
    view,
    calls: [],
    get listeners() {
      return fns.size;
    },
    subscribe(fn) {
      fns.add(fn);
      return () => fns.delete(fn);
    },
    setStrip: (peer: string, patch: Partial<StripSettings>) => void s.calls.push(['setStrip', peer, patch]),
    setMaster: (db: number) => void s.calls.push(['setMaster', db]),
    setMonitor: (on: boolean, db?: number) => void s.calls.push(['setMonitor', on, db]),
    retryPassword: (pw?: string) => void s.calls.push(['retryPassword', pw]),
    setLocked: (locked: boolean) => void s.calls.push(['setLocked', locked]),
    removePeer: (peer: string) => void s.calls.push(['removePeer', peer]),
    leave: async () => void s.calls.push(['leave']),
    startRecording: async () => void s.calls.push(['startRecording']),
    stopRecording: async () => void s.calls.push(['stopRecording']),
    answerEcho: (peer: string, allow: boolean) => void s.calls.push(['answerEcho', peer, allow]),
    stopEcho: () => void s.calls.push(['stopEcho']),
    setEchoAutoAllow: (on: boolean) => void s.calls.push(['setEchoAutoAllow', on]),
    push(v) {
      s.view = v;
      for (const fn of fns) fn(v);
    },
  };
  return s;
}

let mounted: ReturnType<typeof mount> | null = null;

function render(session: FakeSession, extra: { onleave?: () => void; onhome?: () => void } = {}) {
  const target = document.createElement('div');
  document.body.replaceChildren(target);
  mounted = mount(Room, {
    target,
    props: { session, onleave: extra.onleave ?? (() => {}), onhome: extra.onhome ?? (() => {}) },
  });
  flushSync();
  return target;
}

const q = (root: ParentNode, id: string) => root.querySelector(`[data-testid="${id}"]`);
const qa = (root: ParentNode, id: string) => [...root.querySelectorAll(`[data-testid="${id}"]`)];

afterEach(() => {
  if (mounted) unmount(mounted);
  mounted = null;
});

describe('Room view', () => {
  it('renders a hostile participant name as text, never as markup', () => {
    const evil = '<img src=x onerror=alert(1)>';
    const target = render(fakeSession(fixture({ participants: [participant('p1', evil)] })));
    const strips = qa(target, 'strip');
    expect(strips).toHaveLength(1);
    expect(strips[0]!.getAttribute('data-peer')).toBe('p1');
    expect(strips[0]!.getAttribute('data-name')).toBe(evil);
    expect(strips[0]!.textContent).toContain(evil);
    expect(target.querySelector('img')).toBeNull();
    expect(q(target, 'strip-fader')!.getAttribute('aria-label')).toBe(`Volume of ${evil}`);
  });

  it('shows figures, header and the empty state', () => {
    const s = fakeSession(fixture());
    const target = render(s);
    expect(target.textContent).toContain('Waiting for others — share the link');
    expect(q(target, 'share-link')!.textContent).toBe(`${location.origin}/r/warm-cello-42`);
    expect(q(target, 'signaling-state')!.getAttribute('data-state')).toBe('open');

    s.push(
      fixture({
        signaling: 'reconnecting',
        participants: [participant('p1', 'Bo'), participant('p2', 'Cy')],
      }),
    );
    flushSync();
    expect(target.textContent).not.toContain('Waiting for others');
    expect(qa(target, 'strip').map((e) => e.getAttribute('data-name'))).toEqual(['Bo', 'Cy']);
    expect(q(target, 'strip-latency')!.textContent).toContain('23.4');
    expect(q(target, 'strip-buffer')!.textContent).toContain('5.3');
    expect(q(target, 'strip-loss')!.textContent).toContain('0.12');
    expect(q(target, 'signaling-state')!.textContent).toMatch(/Reconnecting/);
  });

  it('sends strip, master and monitor changes to the session', () => {
    const s = fakeSession(fixture({ participants: [participant('p1', 'Bo')] }));
    const target = render(s);
    (q(target, 'strip-mute') as HTMLButtonElement).click();
    (q(target, 'strip-solo') as HTMLButtonElement).click();
    (q(target, 'monitor-toggle') as HTMLButtonElement).click();
    const fader = q(target, 'strip-fader') as HTMLInputElement;
    fader.value = '-60';
    fader.dispatchEvent(new Event('input', { bubbles: true }));
    const pan = q(target, 'strip-pan') as HTMLInputElement;
    pan.value = '-0.5';
    pan.dispatchEvent(new Event('input', { bubbles: true }));
    const master = q(target, 'master-fader') as HTMLInputElement;
    master.value = '-6';
    master.dispatchEvent(new Event('input', { bubbles: true }));
    expect(s.calls).toEqual([
      ['setStrip', 'p1', { mute: true }],
      ['setStrip', 'p1', { solo: true }],
      ['setMonitor', true, undefined],
      ['setStrip', 'p1', { gainDb: -Infinity }],
      ['setStrip', 'p1', { pan: -0.5 }],
      ['setMaster', -6],
    ]);
    expect(q(target, 'strip-mute')!.getAttribute('aria-pressed')).toBe('false');
  });

  it('offers a password retry on wrong-password and a way home on other errors', () => {
    let home = 0;
    const s = fakeSession(
      fixture({ joined: false, error: { code: 'wrong-password', message: 'That password is not right.' } }),
    );
    const target = render(s, { onhome: () => home++ });
    const err = q(target, 'room-error')!;
    // The app's own words for the codes it knows (room/errors.ts), whatever the server said.
    expect(err.textContent).toContain('Wrong password');
    const pw = q(err, 'password') as HTMLInputElement;
    pw.value = 'sesame';
    pw.dispatchEvent(new Event('input', { bubbles: true }));
    (q(err, 'retry-password') as HTMLButtonElement).click();
    expect(s.calls).toContainEqual(['retryPassword', 'sesame']);

    s.push(fixture({ joined: false, error: { code: 'room-full', message: 'The room is full.' } }));
    flushSync();
    expect(q(target, 'password')).toBeNull();
    (q(target, 'error-home') as HTMLButtonElement).click();
    expect(home).toBe(1);
  });

  it('asks before echoing anyone, says what it does, and offers Stop while it runs', () => {
    const evil = '<b>Alex</b>';
    const s = fakeSession(fixture({ participants: [participant('p1', evil), participant('p2', 'Bea')] }));
    const target = render(s);
    expect(q(target, 'echo-request')).toBeNull();
    expect(q(target, 'echo-notice')).toBeNull();
    s.push(
      fixture({
        participants: [participant('p1', evil), participant('p2', 'Bea')],
        echo: {
          requests: [
            { peer: 'p1', name: evil, seconds: 8 },
            { peer: 'p2', name: 'Bea', seconds: 8 },
          ],
          echoing: null,
          autoAllow: false,
        },
      }),
    );
    flushSync();
    const prompts = qa(target, 'echo-request');
    expect(prompts.map((p) => p.getAttribute('data-peer'))).toEqual(['p1', 'p2']);
    expect(q(prompts[1]!, 'echo-request-text')!.textContent!.replace(/\s+/g, ' ').trim()).toBe(
      "Bea asks to measure the round trip to you: for up to 8 s your sound to Bea is Bea's own sound, sent back. Others keep hearing you.",
    );
    expect(prompts[0]!.textContent).toContain(evil);
    expect(target.querySelector('b')).toBeNull();
    (q(prompts[0]!, 'echo-deny') as HTMLButtonElement).click();
    (q(prompts[1]!, 'echo-allow') as HTMLButtonElement).click();
    const auto = q(target, 'echo-auto') as HTMLInputElement;
    expect(auto.checked).toBe(false);
    auto.click();
    s.push(
      fixture({
        participants: [participant('p2', 'Bea')],
        echo: { requests: [], echoing: { peer: 'p2', name: 'Bea' }, autoAllow: true },
      }),
    );
    flushSync();
    expect(q(target, 'echo-request')).toBeNull();
    expect(q(target, 'echo-notice')!.textContent).toContain('Bea');
    expect((q(target, 'echo-auto') as HTMLInputElement).checked).toBe(true);
    (q(target, 'echo-stop') as HTMLButtonElement).click();
    expect(s.calls).toEqual([
      ['answerEcho', 'p1', false],
      ['answerEcho', 'p2', true],
      ['setEchoAutoAllow', true],
      ['stopEcho'],
    ]);
  });

  it('unsubscribes when it goes away', () => {
    const s = fakeSession(fixture());
    render(s);
    expect(s.listeners).toBe(1);
    unmount(mounted!);
    mounted = null;
    expect(s.listeners).toBe(0);
  });
});
