// `npm test`: the one test command, also what CI runs (.ci/run).
//
//   setup  scripts/setup.sh (installs what is missing)             1 check
//   build  scripts/build.mjs steps (wasm, app; stale ones only)      1 check per step
//   fmt    cargo fmt --all -- --check                                1 check
//   clippy cargo clippy --workspace --all-targets -- -D warnings     1 check
//   cargo  cargo test --workspace --no-fail-fast                     sum of "test result:" lines
//   fuzz   every cargo-fuzz target of core/fuzz and server/fuzz,    1 check per target
//          TUTTI_FUZZ_SECONDS (5) each over a copy of its seeds
//   types  svelte-check (app .ts and .svelte, tsconfig.json)         1 check
//          tsc --noEmit -p tsconfig.scripts.json (JSDoc types of       1 check
//          scripts/, tests/browser/, bench/*.mjs)
//   lint   eslint (eslint.config.js)                                 1 check
//          prettier --check (.prettierrc.json, .prettierignore)      1 check
//   vitest vitest run (tests/unit), JSON report                      numPassedTests / numFailedTests
//   browser node --test tests/browser/*.test.mjs, TAP report         "# pass" / "# fail" (+ cancelled)
//
// Every suite runs even when an earlier one failed. A suite that could not run or whose report
// could not be read counts as one failure. The last line of output is `N passed, N failed`;
// the exit code is non-zero when anything failed.
//
// Usage: node scripts/test.mjs [suite ...]     e.g. `npm test -- cargo vitest`
// Environment:
//   TUTTI_CARGO_TEST_RELEASE=1   run cargo test with --release (long simulations run faster,
//                                compiling takes longer)
//   TUTTI_TEST_BUDGET_S=2640     overall time limit (44 min, under the 45 allowed: a fresh clone
//                                on 2 cores took 38-42, builds and fuzz targets included: the
//                                release build about 320 s, cargo 440, the fuzz build 230, the
//                                browser tests 1,250); each suite also has its own limit
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from './build.mjs';
import { ROOT, run } from './lib/run.mjs';
import { parseCargoTest, parseNodeTap, parseVitestJson } from './lib/reports.mjs';
import { buildFuzzTargets, fuzzTargets, runFuzzTarget } from './lib/fuzz.mjs';

const started = Date.now();
const budgetMs = Number(process.env.TUTTI_TEST_BUDGET_S ?? 2640) * 1000;
const remaining = () => Math.max(10_000, budgetMs - (Date.now() - started));
/** @param {number} seconds */
const limit = (seconds) => Math.min(seconds * 1000, remaining());
const work = mkdtempSync(join(tmpdir(), 'tutti-test-'));

/** @typedef {{ passed: number, failed: number, skipped?: number, note?: string }} Count */

/**
 * Exit 0 = one passed check, anything else = one failed check.
 * @param {string} cmd
 * @param {string[]} args
 * @param {number} seconds time limit
 * @returns {Promise<Count>}
 */
async function oneCheck(cmd, args, seconds) {
  const r = await run(cmd, args, { timeoutMs: limit(seconds) });
  if (r.code === 0) return { passed: 1, failed: 0 };
  return { passed: 0, failed: 1, note: r.timedOut ? 'timed out' : (r.error ?? `exit ${r.code}`) };
}

/** A tool installed by npm ci. @param {string} name */
const bin = (name) => join(ROOT, 'node_modules', '.bin', name);

/**
 * Several commands, one check each, all run; the note names the failed ones.
 * @param {[cmd: string, args: string[], seconds: number][]} commands
 * @returns {Promise<Count>}
 */
async function checks(commands) {
  const c = { passed: 0, failed: 0, notes: /** @type {string[]} */ ([]) };
  for (const [cmd, args, seconds] of commands) {
    const r = await oneCheck(cmd, args, seconds);
    c.passed += r.passed;
    c.failed += r.failed;
    if (r.failed) c.notes.push(`${cmd.split('/').pop()}: ${r.note}`);
  }
  return { passed: c.passed, failed: c.failed, note: c.notes.join('; ') };
}

/** @type {{ name: string, run: () => Promise<Count> }[]} */
const suites = [
  {
    name: 'fmt',
    run: () =>
      oneCheck(
        'cargo',
        ['fmt', '--all', '--', '--check', ...(process.env.CI ? ['--color', 'never'] : [])],
        120,
      ),
  },
  {
    name: 'clippy',
    run: () => oneCheck('cargo', ['clippy', '--workspace', '--all-targets', '--', '-D', 'warnings'], 900),
  },
  {
    name: 'cargo',
    run: async () => {
      const release = process.env.TUTTI_CARGO_TEST_RELEASE === '1';
      const args = ['test', '--workspace', '--no-fail-fast', ...(release ? ['--release'] : [])];
      const r = await run('cargo', args, { timeoutMs: limit(1200) });
      const c = parseCargoTest(r.output);
      const profile = release ? 'release' : 'debug';
      if (r.code !== 0 && c.failed === 0) {
        const why = r.timedOut ? 'timed out' : c.results === 0 ? 'did not compile' : `exit ${r.code}`;
        return { passed: c.passed, failed: 1, note: `${why} (${profile})` };
      }
      return {
        passed: c.passed,
        failed: c.failed,
        note: `${c.results} result lines, ${c.ignored} ignored (${profile})`,
      };
    },
  },
  {
    name: 'fuzz',
    run: async () => {
      const seconds = Number(process.env.TUTTI_FUZZ_SECONDS ?? 5);
      if (!Number.isInteger(seconds) || seconds < 1)
        return { passed: 0, failed: 1, note: 'TUTTI_FUZZ_SECONDS must be a whole number of seconds' };
      const targets = fuzzTargets();
      const unbuilt = await buildFuzzTargets(limit(900));
      if (unbuilt.length) return { passed: 0, failed: targets.length, note: unbuilt.join('; ') };
      const c = { passed: 0, failed: 0, notes: /** @type {string[]} */ ([]) };
      for (const t of targets) {
        const r = await runFuzzTarget(t, {
          seconds: Math.min(seconds, Math.floor(remaining() / 1000 / targets.length)),
          quiet: true,
        });
        console.log(`fuzz ${t.crate}/${t.name}: ${r.ok ? 'ok' : 'FAILED'}, ${r.note}`);
        if (r.ok) c.passed += 1;
        else c.failed += 1;
        c.notes.push(`${t.name} ${r.ok ? (r.execs ?? '?') : r.note}`);
      }
      return { passed: c.passed, failed: c.failed, note: `inputs: ${c.notes.join(', ')}` };
    },
  },
  {
    name: 'types',
    run: () =>
      checks([
        [bin('svelte-check'), ['--tsconfig', 'tsconfig.json', '--output', 'human'], 300],
        [bin('tsc'), ['--noEmit', '-p', 'tsconfig.scripts.json'], 300],
      ]),
  },
  {
    name: 'lint',
    run: () =>
      checks([
        [bin('eslint'), ['--max-warnings', '0', '.'], 300],
        [bin('prettier'), ['--check', '--log-level', 'warn', '.'], 300],
      ]),
  },
  {
    name: 'vitest',
    run: async () => {
      const out = join(work, 'vitest.json');
      const args = [
        'run',
        '--reporter=default',
        '--reporter=json',
        `--outputFile.json=${out}`,
        '--passWithNoTests',
      ];
      const r = await run(bin('vitest'), args, { timeoutMs: limit(600) });
      if (!existsSync(out)) {
        return { passed: 0, failed: 1, note: r.timedOut ? 'timed out' : `no JSON report (exit ${r.code})` };
      }
      const c = parseVitestJson(readFileSync(out, 'utf8'));
      if (r.code !== 0 && c.failed === 0) return { passed: c.passed, failed: 1, note: `exit ${r.code}` };
      return { passed: c.passed, failed: c.failed, note: c.note };
    },
  },
  {
    name: 'browser',
    run: async () => {
      const dir = join(ROOT, 'tests', 'browser');
      const files = existsSync(dir)
        ? readdirSync(dir)
            .filter((f) => f.endsWith('.test.mjs'))
            .sort()
            .map((f) => join('tests', 'browser', f))
        : [];
      if (files.length === 0) return { passed: 0, failed: 0, note: 'no tests/browser/*.test.mjs yet' };
      // The browser tests load dist/: after a failed app build they would test a stale app.
      const app = buildResults.find((s) => s.name === 'app');
      if (app?.action === 'failed')
        return { passed: 0, failed: 1, note: `not run: the app build failed (${files.length} files)` };
      const tap = join(work, 'browser.tap');
      const args = [
        '--test',
        '--test-concurrency=1', // audio renders in real time: one browser at a time
        '--test-timeout=420000',
        '--test-reporter=spec',
        '--test-reporter-destination=stdout',
        '--test-reporter=tap',
        `--test-reporter-destination=${tap}`,
        ...files,
      ];
      const env = { TUTTI_DIST: join(ROOT, 'dist'), CHROMIUM_PATH: '/usr/bin/chromium' };
      // A fresh build leaves gigabytes of files not yet on disk; written back while audio renders
      // in real time, they could hold up this small machine's threads. Write them first.
      await run('sync', [], { timeoutMs: 120_000, quiet: true });
      const r = await run(process.execPath, args, { timeoutMs: limit(1300), env });
      const c = existsSync(tap) ? parseNodeTap(readFileSync(tap, 'utf8')) : null;
      if (!c)
        return { passed: 0, failed: 1, note: r.timedOut ? 'timed out' : `no TAP summary (exit ${r.code})` };
      if (r.code !== 0 && c.failed === 0) return { passed: c.passed, failed: 1, note: `exit ${r.code}` };
      return {
        passed: c.passed,
        failed: c.failed,
        skipped: c.skipped,
        note: `${files.length} files${c.note ? ', ' + c.note : ''}`,
      };
    },
  },
];

const only = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const unknown = only.filter((n) => !suites.some((s) => s.name === n));
if (unknown.length) {
  console.error(`test: unknown suite ${unknown.join(', ')}; known: ${suites.map((s) => s.name).join(', ')}`);
  process.exit(2);
}

/** @type {{ name: string, passed: number, failed: number, skipped?: number, ms: number, note: string }[]} */
const rows = [];
/** @type {{ name: string, action: string }[]} */
let buildResults = [];
const banner = (name) => console.log(`\n===== ${name} ${'='.repeat(Math.max(0, 60 - name.length))}`);

banner('setup');
{
  const t = Date.now();
  const r = await run('bash', [join(ROOT, 'scripts', 'setup.sh')], { timeoutMs: limit(1200) });
  rows.push({
    name: 'setup',
    passed: r.code === 0 ? 1 : 0,
    failed: r.code === 0 ? 0 : 1,
    ms: Date.now() - t,
    note: r.code === 0 ? '' : `exit ${r.code}`,
  });
}

if (rows[0].failed === 0) {
  banner('build');
  const t = Date.now();
  const b = await build();
  buildResults = b.results;
  rows.push({
    name: 'build',
    passed: b.results.filter((s) => s.action !== 'failed').length,
    failed: b.results.filter((s) => s.action === 'failed').length,
    ms: Date.now() - t,
    note: b.results.map((s) => `${s.name} ${s.action}`).join(', '),
  });

  for (const suite of suites) {
    if (only.length && !only.includes(suite.name)) continue;
    banner(suite.name);
    const t = Date.now();
    let c;
    try {
      c = await suite.run();
    } catch (e) {
      c = { passed: 0, failed: 1, note: `runner error: ${e instanceof Error ? e.message : e}` };
    }
    rows.push({
      name: suite.name,
      passed: c.passed,
      failed: c.failed,
      skipped: c.skipped ?? 0,
      ms: Date.now() - t,
      note: c.note ?? '',
    });
  }
} else {
  console.error('test: setup failed; no suite can run');
}

rmSync(work, { recursive: true, force: true });

const total = rows.reduce(
  (a, r) => ({
    passed: a.passed + r.passed,
    failed: a.failed + r.failed,
    skipped: a.skipped + (r.skipped ?? 0),
  }),
  { passed: 0, failed: 0, skipped: 0 },
);
console.log(
  `\n${'suite'.padEnd(8)} ${'passed'.padStart(6)} ${'failed'.padStart(6)} ${'time'.padStart(8)}  note`,
);
for (const r of rows) {
  const mark = r.failed ? '  <-- FAILED' : '';
  console.log(
    `${r.name.padEnd(8)} ${String(r.passed).padStart(6)} ${String(r.failed).padStart(6)} ${((r.ms / 1000).toFixed(1) + ' s').padStart(8)}  ${r.note}${mark}`,
  );
}
console.log(`total time ${((Date.now() - started) / 1000).toFixed(1)} s`);
// Skipped checks are named in their suite's output with the reason (and the figures).
console.log(
  `${total.passed} passed, ${total.failed} failed${total.skipped ? `, ${total.skipped} skipped` : ''}`,
);
process.exit(total.failed > 0 ? 1 : 0);
