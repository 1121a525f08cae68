// A small static file server for the built app (dist/), with the headers the engine needs
// (cross-origin isolation, CSP) and correct MIME types (.wasm → application/wasm).
// Interim: the Rust server replaces it. Browser tests can use it too (port 0 = any free port).
import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { MIME_TYPES, SECURITY_HEADERS } from '../../app/http-headers.mjs';

/**
 * Starts serving `root`.
 * @param {{ root: string, port?: number, host?: string, log?: boolean }} opts
 * @returns {Promise<{ url: string, port: number, close: () => Promise<void> }>}
 */
export function serveStatic(opts) {
  const root = resolve(opts.root);
  const host = opts.host ?? '127.0.0.1';
  const server = createServer((req, res) => {
    const send = (status, body, headers = {}) => {
      res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'text/plain; charset=utf-8', ...headers });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(405, 'method not allowed\n', { Allow: 'GET, HEAD' });
      return;
    }
    let pathname;
    try {
      pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    } catch {
      send(400, 'bad request\n');
      return;
    }
    if (pathname.includes('\0')) {
      send(400, 'bad request\n');
      return;
    }
    let file = normalize(join(root, pathname));
    if (file !== root && !file.startsWith(root + sep)) {
      send(403, 'forbidden\n');
      return;
    }
    let st;
    try {
      st = statSync(file);
      if (st.isDirectory()) {
        file = join(file, 'index.html');
        st = statSync(file);
      }
    } catch {
      st = undefined;
    }
    if (!st?.isFile()) {
      send(404, 'not found\n');
      return;
    }
    const type = MIME_TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream';
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'Content-Type': type,
      'Content-Length': st.size,
      'Last-Modified': st.mtime.toUTCString(),
      'Cache-Control': 'no-cache',
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    createReadStream(file)
      .on('error', () => res.destroy())
      .pipe(res);
    if (opts.log) console.log(`${req.method} ${pathname} → 200 ${type}`);
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 8080, host, () => {
      const addr = server.address();
      const port = typeof addr === 'object' && addr ? addr.port : (opts.port ?? 8080);
      resolvePromise({
        url: `http://${host}:${port}/`,
        port,
        close: () =>
          new Promise((r) => {
            server.closeAllConnections?.();
            server.close(() => r());
          }),
      });
    });
  });
}
