// The app as an installed, offline-capable PWA, seen from the page: registers the service worker
// (sw/sw.ts, built to /sw.js), tells when a new version is waiting, applies it only when the user
// asks, offers the browser's install prompt, and follows whether the server can be reached.
//
// State is a Svelte store (`$pwa` in components). The service worker is registered in the
// production build only: under the dev server the files change on every save and a precache
// would serve stale ones.

import { writable, type Readable } from 'svelte/store';
import { Workbox } from 'workbox-window';

export interface PwaState {
  /** A new version is installed and waiting for the user's go-ahead. */
  updateReady: boolean;
  /** The browser offered to install the app (beforeinstallprompt) and it is not installed. */
  canInstall: boolean;
  /** The browser says there is no network and the server does not answer either. */
  offline: boolean;
  /**
   * The browser has no install prompt of its own to offer (no beforeinstallprompt: Safari,
   * Firefox) and the app is not already running installed: the header tells how to add it to
   * the home screen instead.
   */
  installByHand: boolean;
}

/** How often a long-open page asks the server whether there is a new version. */
export const UPDATE_CHECK_EVERY_MS = 60 * 60 * 1000;

/** The event Chromium fires when the app can be installed (not in the DOM typings). */
interface InstallPromptEvent extends Event {
  prompt(): Promise<void>;
  readonly userChoice: Promise<{ outcome: 'accepted' | 'dismissed' }>;
}

const state = writable<PwaState>({
  updateReady: false,
  canInstall: false,
  offline: false,
  installByHand: false,
});

/** Whether the page runs as an installed app (a standalone window, or iOS's home-screen app). */
function runsInstalled(): boolean {
  const ios = (navigator as Navigator & { standalone?: boolean }).standalone === true;
  return ios || (typeof matchMedia === 'function' && matchMedia('(display-mode: standalone)').matches);
}

/** How often the server is asked again while the page counts as offline. */
const OFFLINE_RECHECK_MS = 10_000;
/** How long the server may take to answer before the page counts as offline. */
const REACH_TIMEOUT_MS = 3000;

/**
 * Whether the server that served the app answers (any HTTP answer counts). `navigator.onLine`
 * alone is not trusted: on a machine whose only interface is loopback Chromium reports offline
 * while its server is right there; it only says when to ask.
 */
export async function serverAnswers(
  get: typeof fetch = (input, init) => fetch(input, init),
): Promise<boolean> {
  try {
    await get('/api/config', { cache: 'no-store', signal: AbortSignal.timeout(REACH_TIMEOUT_MS) });
    return true;
  } catch {
    return false;
  }
}

let recheck: ReturnType<typeof setTimeout> | null = null;

/** Counts the page offline only when the browser says so and the server does not answer; while
 * offline, asks again every OFFLINE_RECHECK_MS. */
async function checkReach(): Promise<void> {
  if (recheck !== null) clearTimeout(recheck);
  recheck = null;
  const offline = navigator.onLine === false && !(await serverAnswers());
  state.update((s) => ({ ...s, offline }));
  if (offline) recheck = setTimeout(() => void checkReach(), OFFLINE_RECHECK_MS);
}

/** The PWA state, for `$pwa.updateReady` and the like. */
export const pwa: Readable<PwaState> = { subscribe: state.subscribe };

let started = false;
let workbox: Workbox | null = null;
let installPrompt: InstallPromptEvent | null = null;
let applying = false;

/**
 * Starts it all once per page: network state, install prompt and (in the production build, where
 * the browser has service workers) the registration. Safe to call more than once.
 */
export function startPwa(): void {
  if (started || typeof window === 'undefined') return;
  started = true;

  const reach = (): void => void checkReach();
  window.addEventListener('online', reach);
  window.addEventListener('offline', reach);
  reach();

  // Asked of the browser, never of its name: no prompt event at all means it never offers one.
  if (!('onbeforeinstallprompt' in window) && !runsInstalled()) {
    state.update((s) => ({ ...s, installByHand: true }));
  }
  window.addEventListener('beforeinstallprompt', (e) => {
    // Keep the browser from showing its own mini-bar; the header's Install button uses it.
    e.preventDefault();
    installPrompt = e as InstallPromptEvent;
    state.update((s) => ({ ...s, canInstall: true }));
  });
  window.addEventListener('appinstalled', () => {
    installPrompt = null;
    state.update((s) => ({ ...s, canInstall: false }));
  });

  if (import.meta.env.PROD && 'serviceWorker' in navigator) register();
}

function register(): void {
  const wb = new Workbox('/sw.js', { scope: '/' });
  workbox = wb;
  // A worker that installed while this page runs (or was already waiting when it loaded) waits
  // for the user: the page shows the prompt and nothing reloads by itself.
  wb.addEventListener('waiting', () => state.update((s) => ({ ...s, updateReady: true })));
  navigator.serviceWorker.addEventListener('controllerchange', () => {
    // Only the page that asked reloads. Others keep running on what they loaded.
    if (applying) location.reload();
  });
  wb.register().catch((err: unknown) => {
    console.warn(`the app will not work offline: the service worker did not register (${String(err)})`);
  });

  const check = (): void => {
    wb.update().catch(() => {
      // Offline or the server is away: the next check will try again.
    });
  };
  setInterval(check, UPDATE_CHECK_EVERY_MS);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') check();
  });
}

/**
 * Lets the waiting version take over and reloads the page once it controls it. Only ever called
 * from the user's click on Reload.
 */
export function applyUpdate(): void {
  if (!workbox) return;
  applying = true;
  workbox.messageSkipWaiting();
}

/** Shows the browser's install dialog; resolves true if the user accepted. */
export async function install(): Promise<boolean> {
  const prompt = installPrompt;
  if (!prompt) return false;
  installPrompt = null;
  state.update((s) => ({ ...s, canInstall: false }));
  await prompt.prompt();
  const { outcome } = await prompt.userChoice;
  return outcome === 'accepted';
}
