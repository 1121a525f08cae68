// The app's one piece of navigation state: the current route, kept in step with the address bar
// through history.pushState and popstate. No library: three routes do not need one.

import { parseRoute, type Route } from './route';

const here = (): Route => parseRoute(location.pathname, location.hash);

export const router = $state<{ route: Route }>({ route: here() });

/** Goes to `path` (its `#fragment`, if any, kept after the query), keeping the query string
 * (e.g. `?ice=loopback` from the test harness). */
export function navigate(path: string): void {
  const cut = path.indexOf('#');
  const pathname = cut < 0 ? path : path.slice(0, cut);
  const hash = cut < 0 ? '' : path.slice(cut);
  if (pathname !== location.pathname || hash !== location.hash) {
    history.pushState(null, '', pathname + location.search + hash);
  }
  router.route = here();
}

addEventListener('popstate', () => {
  router.route = here();
});
// A fragment edited by hand in the address bar.
addEventListener('hashchange', () => {
  router.route = here();
});
