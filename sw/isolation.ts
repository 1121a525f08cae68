// The headers a response needs for the page to stay cross-origin isolated when the service worker
// serves it: COOP + COEP on documents, COEP + CORP on workers, worklets and the .wasm. The values
// are the server's own (app/http-headers.mjs, mirrored by server/src/headers.rs).
import { SECURITY_HEADERS } from '../app/http-headers.mjs';

/** Headers whose value must be exactly the server's: without them SharedArrayBuffer is gone. */
const ISOLATION = [
  'Cross-Origin-Opener-Policy',
  'Cross-Origin-Embedder-Policy',
  'Cross-Origin-Resource-Policy',
] as const;

/** Statuses whose responses cannot carry a body. */
const NULL_BODY = new Set([204, 205, 304]);

const REQUIRED: ReadonlyArray<readonly [string, string]> = Object.entries(SECURITY_HEADERS);

/** True when `headers` lacks one of the server's headers or has another isolation value. */
export function needsIsolationHeaders(headers: Headers): boolean {
  return REQUIRED.some(([name, value]) => {
    const have = headers.get(name);
    if (have === null) return true;
    return (ISOLATION as readonly string[]).includes(name) && have !== value;
  });
}

/**
 * `response` with the isolation headers set to the server's values and the other security
 * headers (CSP, nosniff, referrer policy) added where missing: a CSP the server sent is kept.
 * Responses that already have them all are returned as they are.
 */
export function withIsolation(response: Response): Response {
  // Opaque and informational responses cannot be copied (the Response constructor takes 200-599).
  if (response.type === 'opaque' || response.type === 'opaqueredirect' || response.status < 200) {
    return response;
  }
  if (!needsIsolationHeaders(response.headers)) return response;
  const headers = new Headers(response.headers);
  for (const [name, value] of REQUIRED) {
    if ((ISOLATION as readonly string[]).includes(name) || !headers.has(name)) headers.set(name, value);
  }
  return new Response(NULL_BODY.has(response.status) ? null : response.body, {
    status: response.status,
    statusText: response.statusText,
    headers,
  });
}
