// What a failed join or an ended session tells the user: a title, a sentence saying what
// happened, and the one thing they can do about it. Pure: the error banner renders it, tests
// read it.
//
// The sentences for the codes the app knows are the app's own (the server's `message` is shown
// for codes it does not know), so the user reads the same words whichever server version
// answered.

import type { RoomError } from './types';

/**
 * What the banner offers: a password field and "Try again" (`password`), joining without the
 * password given (`without-password`), the same join again (`retry`), or only the way home.
 */
export type ErrorAction = 'password' | 'without-password' | 'retry' | 'none';

export interface ErrorText {
  title: string;
  message: string;
  action: ErrorAction;
  /** ms until the action may be taken (the server asked to wait); 0: now. */
  waitMs: number;
}

/** "12 s", "3 min", "2 h": how long a wait of `ms` is, rounded up. */
export function waitText(ms: number): string {
  const s = Math.max(1, Math.ceil(ms / 1000));
  if (s < 90) return `${s} s`;
  const min = Math.ceil(s / 60);
  if (min < 90) return `${min} min`;
  return `${Math.ceil(min / 60)} h`;
}

/** The banner's words and action for `error` at time `now` (Date.now() ms). */
export function describeError(error: RoomError, now: number): ErrorText {
  const waitMs = error.retryAt !== undefined ? Math.max(0, error.retryAt - now) : 0;
  const text = (title: string, message: string, action: ErrorAction = 'none'): ErrorText => ({
    title,
    message,
    action,
    waitMs,
  });
  switch (error.code) {
    case 'wrong-password':
      return text(
        'Wrong password',
        'This room has a password and the one given does not match it. Check it with whoever invited you and try again.',
        'password',
      );
    case 'no-password':
      return text(
        'This room has no password',
        'This room has no password: anyone with the link can join. Join without a password?',
        'without-password',
      );
    case 'too-many-attempts':
      return text(
        'Too many password attempts',
        waitMs > 0
          ? `Too many wrong passwords were tried for this room. You can try again in ${waitText(waitMs)}.`
          : 'Too many wrong passwords were tried for this room. You can try again now.',
        'password',
      );
    case 'room-locked':
      return text(
        'This room is locked',
        'Its owner has locked the room: nobody new can join. Ask them to unlock it, then try again.',
        'retry',
      );
    case 'removed':
      return text(
        'You were removed from this room',
        'The room’s owner removed you. You no longer send or hear audio in it.',
      );
    case 'room-full':
      return text('This room is full', error.message, 'retry');
    case 'bad-name':
    case 'bad-message':
      return text('Could not join', error.message);
    case 'offline':
      return text('No network', error.message);
    case 'no-microphone':
      return text('No microphone', error.message);
    case 'engine-unavailable':
      return text('The audio engine cannot run here', error.message);
    case 'no-webrtc':
      return text('This browser cannot join a room', error.message);
    case 'network':
      return text('Network problem', error.message);
    default:
      return text('Could not join', error.message);
  }
}

/** What a refusal of an in-room request (not a failed join) says, as a passing notice. */
export function noticeFor(code: string, message: string): string {
  if (code === 'not-owner') return 'Only the room’s owner can do that.';
  return message;
}
