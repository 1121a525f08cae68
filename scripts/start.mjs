// `npm start`: install what is missing (scripts/setup.sh), build what is stale
// (scripts/build.mjs), then serve dist/ on http://127.0.0.1:8080/ with the headers that make the
// page cross-origin isolated. Port: `--port N` or the PORT environment variable.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { build } from './build.mjs';
import { ROOT, run } from './lib/run.mjs';
import { serveStatic } from './lib/serve.mjs';

function parsePort() {
  const i = process.argv.indexOf('--port');
  const fromFlag = i >= 0 ? process.argv[i + 1] : process.argv.find((a) => a.startsWith('--port='))?.slice(7);
  const raw = fromFlag ?? process.env.PORT ?? '8080';
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`start: invalid port "${raw}"`);
    process.exit(2);
  }
  return port;
}

const port = parsePort();

const setup = await run('bash', [join(ROOT, 'scripts', 'setup.sh')]);
if (setup.code !== 0) {
  console.error('start: setup failed, see above');
  process.exit(1);
}

const { ok } = await build();
const dist = join(ROOT, 'dist');
if (!ok) {
  if (!existsSync(join(dist, 'index.html'))) {
    console.error('start: the build failed and there is no earlier build to serve');
    process.exit(1);
  }
  console.error('start: part of the build failed (see above); serving what dist/ holds now');
}

try {
  const server = await serveStatic({ root: dist, port });
  console.log(`\nTutti is running at ${server.url}\n(Ctrl+C to stop)`);
} catch (e) {
  const err = /** @type {NodeJS.ErrnoException} */ (e);
  if (err.code === 'EADDRINUSE') {
    console.error(`start: port ${port} is in use; pick another with --port N or PORT=N`);
  } else {
    console.error(`start: could not serve dist/: ${err.message}`);
  }
  process.exit(1);
}
