// HTTP response headers every server of the app sends, written once for the JavaScript side: the
// dev server (vite.config.ts), the static server of the benchmarks and tests
// (tests/kit/serve.mjs) and the service worker (sw/isolation.ts). The real server's copy
// (server/src/headers.rs) is checked against this file by its tests.
//
// COOP same-origin + COEP require-corp make the page cross-origin isolated
// (`crossOriginIsolated === true`), which is what allows SharedArrayBuffer: the engine's
// AudioWorklet exchanges audio with the network side through lock-free rings in shared memory,
// so without these two headers the engine cannot run at all.

/** Content-Security-Policy. `'wasm-unsafe-eval'` lets the page and the worklet compile WASM;
 * nothing else may be evaluated. Inline styles are allowed for the dev server's CSS injection.
 * `connect-src 'self'` also covers the page's own origin over ws:/wss: (CSP Level 3; Chromium
 * since 71, Safari since 16, Firefox): the page may open its own server's signaling socket and no
 * other. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "worker-src 'self' blob:",
  "connect-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "media-src 'self' blob:",
  "font-src 'self'",
  "manifest-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers for every response. */
export const SECURITY_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/** MIME types by file extension (lower case, with the dot). */
export const MIME_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webmanifest': 'application/manifest+json',
  '.txt': 'text/plain; charset=utf-8',
  '.wav': 'audio/wav',
  '.woff2': 'font/woff2',
};
