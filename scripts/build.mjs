// Builds what is stale, and only that:
//   wasm: `wasm-pack build wasm --target web --release --out-dir pkg`, fat LTO → wasm/pkg/ (the app imports it)
//   server: `cargo build --release -p tutti-server` → target/release/tutti-server
//   opus: libopus built with emscripten (scripts/build-opus.mjs) → wasm/opus/pkg/tutti_opus.wasm
//   app:  `vite build` (root app/, see vite.config.ts) → dist/
// A step runs when one of its outputs is missing or an input is newer than its last build.
// `--force` rebuilds everything. Exit code is non-zero when a step fails.
//
// Usage: node scripts/build.mjs [--force]      (also: npm run build)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, run } from './lib/run.mjs';
import { checkStale, markBuilt } from './lib/stale.mjs';
import { OPUS_WASM } from './build-opus.mjs';

/** Build stamps live apart from the outputs: writing one must not change an input's folder. */
const STAMP_DIR = 'node_modules/.cache/tutti-build';

function wasmCrateFileStem() {
  const toml = readFileSync(join(ROOT, 'wasm', 'Cargo.toml'), 'utf8');
  const name = /^\s*name\s*=\s*"([^"]+)"/m.exec(toml)?.[1] ?? 'tutti-wasm';
  return name.replace(/-/g, '_');
}

/**
 * @typedef {object} Step
 * @property {string} name
 * @property {string[]} inputs paths relative to the repo root
 * @property {(rel: string) => boolean} [skip] input paths (relative) that do not count
 * @property {string[]} outputs paths relative to the repo root, all present after a good build
 * @property {string} stamp
 * @property {[string, string[]]} command program and arguments
 * @property {Record<string, string>} [env] set for the command
 */

/**
 * The build steps, in order.
 * @returns {Step[]}
 */
export function steps() {
  const stem = wasmCrateFileStem();
  return [
    {
      name: 'wasm',
      inputs: [
        'core/src',
        'core/Cargo.toml',
        'wasm/src',
        'wasm/Cargo.toml',
        'Cargo.toml',
        'Cargo.lock',
        '.cargo/config.toml',
      ],
      outputs: [`wasm/pkg/${stem}.js`, `wasm/pkg/${stem}_bg.wasm`],
      stamp: STAMP_DIR + '/wasm.stamp',
      // npm's binaryen (wasm-opt 132) is first on PATH via run(): Debian's wasm-opt 108
      // produces modules that fail at init with wasm-bindgen's output.
      command: ['wasm-pack', ['build', 'wasm', '--target', 'web', '--release', '--out-dir', 'pkg']],
      // Fat LTO for the engine (the workspace's release profile links native binaries thin).
      // `true`, not `fat`: the same code either way, but the setting's spelling is hashed into
      // the symbols, and `true` keeps the module byte for byte what was measured before.
      env: { CARGO_PROFILE_RELEASE_LTO: 'true' },
    },
    {
      name: 'server',
      // The hub links tutti-core: a change to the core is a change to the server.
      inputs: [
        'server/src',
        'server/Cargo.toml',
        'core/src',
        'core/Cargo.toml',
        'Cargo.toml',
        'Cargo.lock',
        '.cargo/config.toml',
      ],
      outputs: ['target/release/tutti-server'],
      stamp: STAMP_DIR + '/server.stamp',
      command: ['cargo', ['build', '--release', '--locked', '-p', 'tutti-server']],
    },
    {
      name: 'opus',
      // libopus (the hub's vendored copy, pinned by Cargo.lock) built with emscripten.
      inputs: ['wasm/opus/shim.c', 'wasm/opus/alloc.h', 'scripts/build-opus.mjs', 'Cargo.lock'],
      outputs: [OPUS_WASM],
      stamp: STAMP_DIR + '/opus.stamp',
      command: [process.execPath, [join(ROOT, 'scripts', 'build-opus.mjs')]],
    },
    {
      name: 'app',
      inputs: [
        'app',
        'wasm/pkg',
        'wasm/opus/pkg',
        'bench/web',
        'sw',
        'vite.config.ts',
        'tsconfig.json',
        'package.json',
        'package-lock.json',
      ],
      outputs: ['dist/index.html'],
      stamp: STAMP_DIR + '/app.stamp',
      command: [join(ROOT, 'node_modules', '.bin', 'vite'), ['build']],
    },
  ];
}

/**
 * Builds the stale steps. Never throws for a failed step; reports it.
 * @param {{ force?: boolean }} [opts]
 * @returns {Promise<{ ok: boolean, results: { name: string, action: 'built'|'skipped'|'failed', reason: string, ms: number }[] }>}
 */
export async function build(opts = {}) {
  /** @type {{ name: string, action: 'built'|'skipped'|'failed', reason: string, ms: number }[]} */
  const results = [];
  for (const step of steps()) {
    const check = opts.force ? { stale: true, reason: '--force' } : checkStale(ROOT, step);
    if (!check.stale) {
      console.log(`build: ${step.name.padEnd(6)} skipped (${check.reason})`);
      results.push({ name: step.name, action: 'skipped', reason: check.reason, ms: 0 });
      continue;
    }
    console.log(
      `build: ${step.name.padEnd(6)} building (${check.reason}): ${step.command[0].replace(ROOT + '/', '')} ${step.command[1].join(' ')}`,
    );
    const started = Date.now();
    const r = await run(step.command[0], step.command[1], { env: step.env });
    const missing = step.outputs.filter((o) => !existsSync(join(ROOT, o)));
    if (r.code === 0 && missing.length === 0) {
      markBuilt(ROOT, step.stamp, started);
      console.log(`build: ${step.name.padEnd(6)} built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      results.push({ name: step.name, action: 'built', reason: check.reason, ms: Date.now() - started });
    } else {
      const why =
        r.code !== 0 ? `exit ${r.code}${r.error ? `: ${r.error}` : ''}` : `missing ${missing.join(', ')}`;
      console.error(`build: ${step.name.padEnd(6)} FAILED (${why})`);
      results.push({ name: step.name, action: 'failed', reason: why, ms: Date.now() - started });
    }
  }
  return { ok: results.every((r) => r.action !== 'failed'), results };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { ok } = await build({ force: process.argv.includes('--force') });
  process.exit(ok ? 0 : 1);
}
