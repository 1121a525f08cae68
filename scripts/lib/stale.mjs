// Staleness by modification times: an output is stale when it is missing, or when any input
// (file or folder; a folder's mtime changes when an entry is added, removed or renamed) is newer
// than the output's stamp. Stamps carry the time the build STARTED, so an input edited while the
// build ran is still seen as newer next time.
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** Folder names never descended into. */
const SKIP_DIRS = new Set(['node_modules', 'target', 'dist', '.git', 'pkg']);

/**
 * Newest mtime among `paths` (files or folders, walked recursively; missing ones ignored).
 * @param {string} root repo root
 * @param {string[]} paths paths relative to root
 * @param {{ skip?: (rel: string) => boolean }} [opts]
 * @returns {{ mtimeMs: number, path: string | null }}
 */
export function newestInput(root, paths, opts = {}) {
  /** @type {{ mtimeMs: number, path: string | null }} */
  let best = { mtimeMs: 0, path: null };
  const visit = (abs) => {
    const rel = relative(root, abs);
    if (opts.skip?.(rel)) return;
    let st;
    try {
      st = statSync(abs);
    } catch {
      return;
    }
    if (st.mtimeMs > best.mtimeMs) best = { mtimeMs: st.mtimeMs, path: rel };
    if (st.isDirectory()) {
      for (const name of readdirSync(abs)) {
        if (SKIP_DIRS.has(name)) continue;
        visit(join(abs, name));
      }
    }
  };
  for (const p of paths) visit(join(root, p));
  return best;
}

/**
 * Decides whether a build step must run.
 * @param {string} root
 * @param {{ inputs: string[], outputs: string[], stamp: string, skip?: (rel: string) => boolean }} step
 *   `outputs` must all exist; `stamp` is a file written by `markBuilt`.
 * @returns {{ stale: boolean, reason: string }}
 */
export function checkStale(root, step) {
  for (const out of step.outputs) {
    if (!existsSync(join(root, out))) return { stale: true, reason: `${out} missing` };
  }
  const stampPath = join(root, step.stamp);
  if (!existsSync(stampPath)) return { stale: true, reason: 'never built here' };
  const built = statSync(stampPath).mtimeMs;
  const newest = newestInput(root, step.inputs, { skip: step.skip });
  if (newest.mtimeMs > built) return { stale: true, reason: `${newest.path} changed` };
  return { stale: false, reason: 'up to date' };
}

/** Writes the stamp with the build's start time as its mtime. */
export function markBuilt(root, stamp, startedAtMs) {
  const p = join(root, stamp);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, `built ${new Date(startedAtMs).toISOString()}\n`);
  const t = startedAtMs / 1000;
  utimesSync(p, t, t);
}
