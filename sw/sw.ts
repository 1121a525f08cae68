// Tutti's service worker: the app opens with no network.
//
// - Precache: everything the build emits that the app needs (the pages, JS, CSS, the engine's
//   .wasm, the worklet modules, icons, the manifest), listed by the build into self.__WB_MANIFEST.
//   Hashed assets are cached by URL; the pages by content revision.
// - Navigation: the app's routes (app/src/ui/route.ts: `/`, room links `/r/<room>`,
//   `/recordings`) get the precached index.html, as the server does (server/src/statics.rs). The other pages are precached under their own URL. `/api/*` and `/ws` are never
//   answered here: signaling has to fail for real when the network is gone, so the room page can
//   say so.
// - No runtime caching: every file the app loads is in the precache, and anything else (the
//   server's config, signaling) must not be served stale.
// - Cross-origin isolation: the engine needs SharedArrayBuffer, which needs COOP + COEP on the
//   page and COEP/CORP on its workers and worklets. Workbox keeps the headers a response came
//   with, but a response without them (a cache written by an older worker, a server that lost
//   them) would silently turn the engine off, so every response this worker hands out goes
//   through withIsolation().
// - Updates: a new worker installs and then waits. It takes over only when a page asks
//   ({type:'SKIP_WAITING'}, sent when the user presses Reload in the update prompt): swapping the
//   code under a running session would break it.
/// <reference lib="webworker" />

import { clientsClaim, type WorkboxPlugin } from 'workbox-core';
import {
  addPlugins,
  cleanupOutdatedCaches,
  createHandlerBoundToURL,
  precacheAndRoute,
} from 'workbox-precaching';
import { NavigationRoute, registerRoute } from 'workbox-routing';
import { withIsolation } from './isolation';

declare const self: ServiceWorkerGlobalScope & {
  __WB_MANIFEST: Array<string | { url: string; revision: string | null }>;
};

addPlugins([
  {
    // Only good responses go into the precache (a failed fetch fails the install instead of
    // caching an error page), and they are stored with the isolation headers.
    cacheWillUpdate: async ({ response }) => (response.status >= 400 ? null : withIsolation(response)),
    cachedResponseWillBeUsed: async ({ cachedResponse }) =>
      cachedResponse ? withIsolation(cachedResponse) : cachedResponse,
    fetchDidSucceed: async ({ response }) => withIsolation(response),
  } satisfies WorkboxPlugin,
]);

cleanupOutdatedCaches();
precacheAndRoute(self.__WB_MANIFEST, {
  // The pages read their query themselves (`/selftest.html?scenario=network`,
  // `/r/x?ice=loopback`): any query still finds the precached file.
  ignoreURLParametersMatching: [/.*/],
});

registerRoute(
  new NavigationRoute(createHandlerBoundToURL('/index.html'), {
    allowlist: [/^\/(\?.*)?$/, /^\/r\/[^/?]+/, /^\/recordings\/?(\?.*)?$/],
    denylist: [/^\/api\//, /^\/ws(\/|\?|$)/],
  }),
);

self.addEventListener('message', (event: ExtendableMessageEvent) => {
  const data: unknown = event.data;
  if (typeof data === 'object' && data !== null && (data as { type?: unknown }).type === 'SKIP_WAITING') {
    void self.skipWaiting();
  }
});

// The first install takes the open page at once, so it works offline without a reload. An
// update reaches activation only through SKIP_WAITING above, and the page that asked reloads.
clientsClaim();
