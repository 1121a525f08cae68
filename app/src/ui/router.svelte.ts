// The app's one piece of navigation state: the current route, kept in step with the address bar
// through history.pushState and popstate. No library: three routes do not need one.

import { parseRoute, type Route } from './route';

export const router = $state<{ route: Route }>({ route: parseRoute(location.pathname) });

/** Goes to `path`, keeping the query string (e.g. `?ice=loopback` from the test harness). */
export function navigate(path: string): void {
  if (path !== location.pathname) history.pushState(null, '', path + location.search);
  router.route = parseRoute(location.pathname);
}

addEventListener('popstate', () => {
  router.route = parseRoute(location.pathname);
});
