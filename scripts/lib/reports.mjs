// Readers of the test tools' machine-readable output. Each returns counts taken from what the
// tool printed; none guesses.

/**
 * `cargo test` output: one "test result:" line per test binary (unit, integration, doc tests).
 * A binary that crashed prints no result line but an "error: test failed" line: counted as one
 * failure each.
 * @param {string} text
 */
export function parseCargoTest(text) {
  let passed = 0;
  let failed = 0;
  let ignored = 0;
  let results = 0;
  let crashed = 0;
  let sawFailedResult = false;
  for (const line of text.split('\n')) {
    if (/^\s+(Running|Doc-tests) /.test(line)) sawFailedResult = false;
    const m = /^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored/.exec(line);
    if (m) {
      results += 1;
      passed += Number(m[2]);
      failed += Number(m[3]);
      ignored += Number(m[4]);
      if (m[1] === 'FAILED') sawFailedResult = true;
    }
    if (/^error: (doc)?test failed, to rerun pass /.test(line)) {
      if (!sawFailedResult) crashed += 1; // the binary ended without a result line
      sawFailedResult = false;
    }
  }
  return { passed, failed: failed + crashed, ignored, results, crashed };
}

/**
 * vitest's JSON reporter file. A test file that fails to load has status "failed" but no failed
 * test in it: counted as one failure.
 * @param {string} json
 */
export function parseVitestJson(json) {
  const r = JSON.parse(json);
  const passed = Number(r.numPassedTests ?? 0);
  let failed = Number(r.numFailedTests ?? 0);
  let broken = 0;
  for (const file of r.testResults ?? []) {
    const anyFailed = (file.assertionResults ?? []).some((a) => a.status === 'failed');
    if (file.status === 'failed' && !anyFailed) broken += 1;
  }
  failed += broken;
  const files = (r.testResults ?? []).length;
  const skipped = Number(r.numPendingTests ?? 0) + Number(r.numTodoTests ?? 0);
  const parts = [`${files} files`];
  if (skipped) parts.push(`${skipped} skipped`);
  if (broken) parts.push(`${broken} files failed to load`);
  return { passed, failed, note: parts.join(', ') };
}

/**
 * Summary lines at the end of node's TAP reporter ("# pass N", "# fail N", "# cancelled N").
 * Cancelled tests (e.g. timed out, or their file crashed) count as failed.
 * @param {string} tap
 * @returns {{ passed: number, failed: number, skipped: number, note: string } | null} null when no summary
 */
export function parseNodeTap(tap) {
  const num = (key) => {
    const all = [...tap.matchAll(new RegExp(`^# ${key} (\\d+)\\s*$`, 'gm'))];
    return all.length ? Number(all[all.length - 1][1]) : null;
  };
  const pass = num('pass');
  const fail = num('fail');
  if (pass === null || fail === null) return null;
  const cancelled = num('cancelled') ?? 0;
  const skipped = (num('skipped') ?? 0) + (num('todo') ?? 0);
  const parts = [];
  if (cancelled) parts.push(`${cancelled} cancelled`);
  if (skipped) parts.push(`${skipped} skipped`);
  return { passed: pass, failed: fail + cancelled, skipped, note: parts.join(', ') };
}
