// `npm run fuzz`: builds the cargo-fuzz targets and runs each for a bound, one after the other.
//
//   npm run fuzz -- --runs 10000000          ten million inputs per target
//   npm run fuzz -- --seconds 600 --target signaling
//   npm run fuzz -- --runs 1000000 --merge   fold what the run found into the seeds, minimised
//
// Prints one line per target and a JSON summary as its last line; exits 1 on a crash.
import { buildFuzzTargets, fuzzTargets, runFuzzTarget } from './lib/fuzz.mjs';

const argv = process.argv.slice(2);
const value = (flag) => {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
};
const runs = Number(value('--runs') ?? 0);
const seconds = Number(value('--seconds') ?? (runs ? 0 : 60));
const only = value('--target');
if (!Number.isInteger(runs) || runs < 0 || !Number.isInteger(seconds) || seconds < 0 || (!runs && !seconds)) {
  console.error('fuzz: --runs N and --seconds N take whole numbers, and one of them must be above 0');
  process.exit(2);
}
const targets = fuzzTargets().filter((t) => !only || t.name === only);
if (targets.length === 0) {
  console.error(
    `fuzz: no target ${only}; known: ${fuzzTargets()
      .map((t) => t.name)
      .join(', ')}`,
  );
  process.exit(2);
}
const failedBuilds = await buildFuzzTargets(3600_000);
if (failedBuilds.length) {
  console.error(`fuzz: ${failedBuilds.join('; ')}`);
  process.exit(1);
}
const results = [];
for (const t of targets) {
  const r = await runFuzzTarget(t, { seconds, runs, merge: argv.includes('--merge'), quiet: true });
  console.log(`${t.crate}/${t.name}: ${r.ok ? 'ok' : 'FAILED'}, ${r.note}`);
  results.push({
    target: `${t.crate}/${t.name}`,
    ok: r.ok,
    inputs: r.execs,
    seconds: Math.round(r.ms / 100) / 10,
    note: r.note,
  });
}
console.log(JSON.stringify({ fuzz: results }));
process.exit(results.every((r) => r.ok) ? 0 : 1);
