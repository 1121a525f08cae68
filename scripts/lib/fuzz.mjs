// The cargo-fuzz targets of core/fuzz and server/fuzz: building them, and running each over a
// copy of its committed seed corpus (`<crate>/fuzz/seeds/<target>/`) for a bounded time or a
// number of inputs, reading libFuzzer's final statistics.
//
// Used by `npm test` (suite `fuzz`, 10 s per target by default) and by `npm run fuzz` for long
// runs (`npm run fuzz -- --runs 10000000`, or `--seconds N`, `--target NAME`, `--merge` to
// fold what a run found back into the seeds, minimised).
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, run } from './run.mjs';

/** The crates holding fuzz targets, relative to the repository. */
export const FUZZ_CRATES = ['core', 'server'];

/** One target directory for both crates, so that they share one build of libFuzzer. */
const TARGET_DIR = join(ROOT, 'target', 'fuzz');

/** Every target: its crate, name, binary and seed directory. */
export function fuzzTargets() {
  return FUZZ_CRATES.flatMap((crate) => {
    const manifest = join(ROOT, crate, 'fuzz', 'Cargo.toml');
    const names = [...readFileSync(manifest, 'utf8').matchAll(/^\[\[bin\]\]\s*\nname\s*=\s*"([^"]+)"/gm)].map(
      (m) => m[1],
    );
    return names.map((name) => ({
      crate,
      name,
      binary: join(TARGET_DIR, 'x86_64-unknown-linux-gnu', 'release', name),
      seeds: join(ROOT, crate, 'fuzz', 'seeds', name),
    }));
  });
}

/** Builds every target, optimised with debug assertions and overflow checks, one crate after
 * the other. No sanitizer: the code under test is safe Rust (out-of-bounds access and overflow
 * already panic), and AddressSanitizer made the runs 3-30 times slower and the build twice as
 * long (measured here: the ring target 6,000 inputs/s with it, 95,000 without). */
export async function buildFuzzTargets(timeoutMs) {
  const notes = [];
  for (const crate of FUZZ_CRATES) {
    const r = await run(
      'cargo',
      ['+nightly', 'fuzz', 'build', '--sanitizer', 'none', '--target-dir', TARGET_DIR],
      {
        cwd: join(ROOT, crate),
        timeoutMs,
      },
    );
    if (r.code !== 0)
      notes.push(`${crate}/fuzz did not build (${r.timedOut ? 'timed out' : `exit ${r.code}`})`);
  }
  return notes;
}

/** The number libFuzzer reports for `stat::<name>`, or null. */
function stat(output, name) {
  const m = output.match(new RegExp(`stat::${name}:\\s*(\\d+)`));
  return m ? Number(m[1]) : null;
}

/**
 * Runs one target over a fresh copy of its seeds. `seconds` bounds the time, `runs` the inputs
 * (either may be 0 for no bound; one of them must be set). With `merge`, the inputs of the run
 * that add coverage are merged into the seed directory (libFuzzer's -merge=1 keeps a minimal
 * set). Never rejects.
 * @returns {Promise<{ ok: boolean, execs: number|null, ms: number, note: string }>}
 */
export async function runFuzzTarget(target, { seconds = 20, runs = 0, merge = false, quiet = false } = {}) {
  if (!existsSync(target.binary)) return { ok: false, execs: null, ms: 0, note: 'not built' };
  const work = mkdtempSync(join(tmpdir(), `tutti-fuzz-${target.name}-`));
  try {
    const corpus = join(work, 'corpus');
    mkdirSync(corpus);
    if (existsSync(target.seeds)) cpSync(target.seeds, corpus, { recursive: true });
    const artifacts = join(work, 'artifacts');
    mkdirSync(artifacts);
    const args = [
      corpus,
      `-artifact_prefix=${artifacts}/`,
      '-print_final_stats=1',
      '-timeout=10', // one input taking 10 s is a hang
      '-rss_limit_mb=2048',
      '-max_len=4096',
      ...(seconds ? [`-max_total_time=${seconds}`] : []),
      ...(runs ? [`-runs=${runs}`] : []),
    ];
    // The hard limit is libFuzzer's own bound plus start-up, or a day for a bound on inputs.
    const timeoutMs = seconds ? (seconds + 60) * 1000 : 24 * 3600 * 1000;
    const r = await run(target.binary, args, { timeoutMs, quiet });
    const execs = stat(r.output, 'number_of_executed_units');
    const found = readdirSync(artifacts);
    if (r.code !== 0 || found.length) {
      const keep = join(ROOT, target.crate, 'fuzz', 'artifacts', target.name);
      mkdirSync(keep, { recursive: true });
      for (const f of found) cpSync(join(artifacts, f), join(keep, f));
      const what = found.length
        ? `crash: ${found.map((f) => join(target.crate, 'fuzz', 'artifacts', target.name, f)).join(', ')}`
        : r.timedOut
          ? 'timed out'
          : `exit ${r.code}`;
      return { ok: false, execs, ms: r.ms, note: what };
    }
    if (merge) {
      mkdirSync(target.seeds, { recursive: true });
      const m = await run(target.binary, ['-merge=1', target.seeds, corpus], {
        timeoutMs: 600_000,
        quiet: true,
      });
      if (m.code !== 0) return { ok: false, execs, ms: r.ms, note: `merge failed (exit ${m.code})` };
    }
    return { ok: true, execs, ms: r.ms, note: `${execs ?? '?'} inputs in ${(r.ms / 1000).toFixed(1)} s` };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
