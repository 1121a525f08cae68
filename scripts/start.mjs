// `npm start`: install what is missing (scripts/setup.sh), build what is stale
// (scripts/build.mjs: the engine's WASM, the server, the app), then run the server
// (target/release/tutti-server), which serves dist/ and the room signaling on
// http://127.0.0.1:8080/ and prints the URL to open.
//
// Port: `--port N` or the PORT environment variable. Every other argument after `--` goes to the
// server as it is (`npm start -- --addr 0.0.0.0 --room-cap 8`; `npm start -- --help` lists them).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { build } from './build.mjs';
import { ROOT, run } from './lib/run.mjs';

function parseArgs(argv) {
  const rest = [];
  let port = process.env.PORT ?? '8080';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') port = argv[++i] ?? '';
    else if (a.startsWith('--port=')) port = a.slice('--port='.length);
    else rest.push(a);
  }
  const n = Number(port);
  if (!Number.isInteger(n) || n < 0 || n > 65535) {
    console.error(`start: invalid port "${port}" (use --port N or PORT=N with 0..65535)`);
    process.exit(2);
  }
  return { port: n, rest };
}

const { port, rest } = parseArgs(process.argv.slice(2));

const setup = await run('bash', [join(ROOT, 'scripts', 'setup.sh')], { env: { TUTTI_SETUP: 'start' } });
if (setup.code !== 0) {
  console.error('start: setup failed, see above');
  process.exit(1);
}

const { ok } = await build();
const dist = join(ROOT, 'dist');
const binary = join(ROOT, 'target', 'release', 'tutti-server');
for (const [what, path] of [
  ['the app', join(dist, 'index.html')],
  ['the server', binary],
]) {
  if (!existsSync(path)) {
    console.error(`start: the build failed and there is no earlier build of ${what} to run`);
    process.exit(1);
  }
}
if (!ok) console.error('start: part of the build failed (see above); running the earlier build of it');

// Rooms (passwords, owners, member places) are kept in data/ at the top of the checkout
// (ignored by git) unless TUTTI_DATA_DIR or --data-dir says otherwise, or --no-persist.
const server = spawn(binary, ['--port', String(port), '--dist', dist, ...rest], {
  stdio: 'inherit',
  env: {
    ...process.env,
    TUTTI_DATA_DIR: process.env.TUTTI_DATA_DIR ?? join(ROOT, 'data'),
    PORT: String(port),
  },
});
// The server shuts down gracefully on SIGINT/SIGTERM: pass them on and exit when it has (the
// build's handlers, which end children at once, are no longer wanted).
for (const sig of /** @type {const} */ (['SIGINT', 'SIGTERM'])) {
  process.removeAllListeners(sig);
  process.on(sig, () => server.kill(sig));
}
server.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
server.on('error', (e) => {
  console.error(`start: could not run ${binary}: ${e.message}`);
  process.exit(1);
});
