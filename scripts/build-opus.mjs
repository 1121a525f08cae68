// Builds libopus with emscripten into wasm/opus/pkg/tutti_opus.wasm, the codec module the engine
// worklet instantiates beside the Rust core.
//
// The C source is the one the hub links (the opusic-sys crate vendors libopus; Cargo.lock pins
// its version), so the browser and the hub run one codec. The file lists are libopus's own
// (celt_sources.mk, silk_sources.mk, opus_sources.mk: the float build), read at build time, so
// a new libopus needs no edit here. wasm/opus/shim.c is the module's whole API (numbers only).
//
// The module is standalone (no JavaScript glue, no imports) with a fixed memory that never
// grows, so the worklet's views of it stay valid and nothing is allocated per frame.
//
// Usage: node scripts/build-opus.mjs   (a step of scripts/build.mjs)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, run, toolPath } from './lib/run.mjs';

export const OPUS_WASM = 'wasm/opus/pkg/tutti_opus.wasm';
/** The crate whose vendored libopus is built (the hub's, in server/Cargo.toml). */
const CRATE = 'opusic-sys';

/** The exports: the shim's functions (wasm/opus/shim.c), the C library's set-up and memory. */
const EXPORTS = [
  'tutti_opus_pcm',
  'tutti_opus_pcm_samples',
  'tutti_opus_packet',
  'tutti_opus_packet_bytes',
  'tutti_opus_encoder_new',
  'tutti_opus_encoder_set_bitrate',
  'tutti_opus_encoder_lookahead',
  'tutti_opus_encoder_reset',
  'tutti_opus_encoder_set_mono',
  'tutti_opus_encode',
  'tutti_opus_decoder_new',
  'tutti_opus_decode',
  'tutti_opus_decoder_reset',
  'tutti_opus_free',
  'tutti_opus_allocations',
];

/**
 * The directory of libopus's source inside the pinned crate (fetched first if need be).
 * @returns {string}
 */
function opusSource() {
  const cargo = (/** @type {string[]} */ args) =>
    execFileSync('cargo', args, {
      cwd: ROOT,
      env: { ...process.env, PATH: toolPath() },
      encoding: 'utf8',
      maxBuffer: 64 << 20,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
  cargo(['fetch', '--locked']);
  /** @type {{ packages: { name: string, manifest_path: string }[] }} */
  const { packages } = JSON.parse(cargo(['metadata', '--format-version', '1', '--locked']));
  const pkg = packages.find((p) => p.name === CRATE);
  if (!pkg) throw new Error(`${CRATE} is not in Cargo.lock's packages`);
  const dir = join(dirname(pkg.manifest_path), 'opus');
  if (!existsSync(join(dir, 'include', 'opus.h'))) throw new Error(`no libopus source in ${dir}`);
  return dir;
}

/**
 * The value of `NAME = a b \ c` in a libopus .mk file, as a list of paths.
 * @param {string} dir
 * @param {string} file
 * @param {string} name
 */
function mkList(dir, file, name) {
  const text = readFileSync(join(dir, file), 'utf8').replace(/\\\n/g, ' ');
  const line = text.split('\n').find((l) => new RegExp(`^${name}\\s*=`).test(l));
  if (!line) throw new Error(`${file} has no ${name}`);
  return line
    .slice(line.indexOf('=') + 1)
    .split(/\s+/)
    .filter(Boolean);
}

export async function buildOpus() {
  const dir = opusSource();
  const sources = [
    ...mkList(dir, 'celt_sources.mk', 'CELT_SOURCES'),
    ...mkList(dir, 'silk_sources.mk', 'SILK_SOURCES'),
    ...mkList(dir, 'silk_sources.mk', 'SILK_SOURCES_FLOAT'),
    ...mkList(dir, 'opus_sources.mk', 'OPUS_SOURCES'),
    ...mkList(dir, 'opus_sources.mk', 'OPUS_SOURCES_FLOAT'),
  ].map((s) => join(dir, s));
  const out = join(ROOT, OPUS_WASM);
  mkdirSync(dirname(out), { recursive: true });
  const args = [
    '-O3',
    '-flto',
    // libopus's configuration for a float build without a config.h.
    '-DOPUS_BUILD',
    '-DUSE_ALLOCA',
    '-DHAVE_LRINTF',
    '-DHAVE_LRINT',
    // Every heap call in the module through the shim's counting allocator.
    '-include',
    join(ROOT, 'wasm', 'opus', 'alloc.h'),
    ...['include', 'celt', 'silk', 'silk/float', '.'].map((d) => `-I${join(dir, d)}`),
    ...sources,
    join(ROOT, 'wasm', 'opus', 'shim.c'),
    '-sSTANDALONE_WASM',
    '--no-entry',
    `-sEXPORTED_FUNCTIONS=${EXPORTS.map((e) => '_' + e).join(',')}`,
    // Room for a decoder per peer (64 stereo: 1.7 MB) and a few encoders; it never grows.
    '-sINITIAL_MEMORY=8MB',
    '-sALLOW_MEMORY_GROWTH=0',
    // libopus puts its scratch on the stack (USE_ALLOCA).
    '-sTOTAL_STACK=256KB',
    '-o',
    out,
  ];
  const r = await run('emcc', args, { cwd: ROOT });
  if (r.code !== 0) throw new Error(`emcc failed (exit ${r.code})`);
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const out = await buildOpus();
    console.log(`opus: ${out.replace(ROOT + '/', '')}`);
  } catch (err) {
    console.error(`opus: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  }
}
