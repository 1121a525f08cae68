// Emulated mesh peers toward a real page (bench/loadgen's `tutti-mesh-peers`, its `mesh`
// module): built here, started against a room of a running server, and stopped by pid. The
// browser bench (bench/mesh-page.mjs) ramps them; a browser test checks the page hears them.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, run } from '../../scripts/lib/run.mjs';
import { waitFor } from './harness.mjs';

export const MESH_PEERS_BIN = join(ROOT, 'target', 'release', 'tutti-mesh-peers');

/** The tone of emulated peer `k` at 128 frames per block, Hz (mesh.rs: whole cycles per block). */
export function meshPeerTone(k) {
  return 375 * (1 + (k % 12));
}

/** Builds the peers' binary (release; quick when it is up to date). Throws if the build fails. */
export async function buildMeshPeers() {
  const r = await run('cargo', [
    'build',
    '--release',
    '--locked',
    '-q',
    '-p',
    'tutti-loadgen',
    '--bin',
    'tutti-mesh-peers',
  ]);
  if (r.code !== 0) throw new Error(`building tutti-mesh-peers failed:\n${r.output.slice(-2000)}`);
}

/**
 * Starts `peers` emulated peers in `room` of the server on 127.0.0.1:`port`, playing `seconds`
 * once all are linked. `playing` resolves when every peer is linked to the page (and rejects if
 * they fail or do not link within `linkTimeoutS` + 10 s); `done` resolves with their summary
 * (`mesh_peers` of their JSON line) when they end, and rejects if they fail.
 * @param {{ port: number, room: string, peers: number, seconds: number, linkTimeoutS?: number }} o
 */
export function startMeshPeers({ port, room, peers, seconds, linkTimeoutS = 30 }) {
  const args = ['--server', `127.0.0.1:${port}`, '--room', room, '--peers', String(peers)];
  args.push('--seconds', String(seconds), '--link-timeout', String(linkTimeoutS));
  const proc = spawn(MESH_PEERS_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.setEncoding('utf8').on('data', (d) => (out += d));
  /** @type {Promise<Record<string, number>>} */
  const done = new Promise((resolve, reject) => {
    proc.once('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code === 0 && line.startsWith('{')) resolve(JSON.parse(line).mesh_peers);
      else {
        const tail = err.trim().split('\n').slice(-3).join(' / ');
        reject(new Error(`tutti-mesh-peers exited with ${code}: ${tail}`));
      }
    });
  });
  const playing = new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${peers} peers not linked in ${linkTimeoutS + 10} s`)),
      (linkTimeoutS + 10) * 1000,
    );
    proc.stderr.setEncoding('utf8').on('data', (d) => {
      err += d;
      if (err.includes(': playing')) {
        clearTimeout(timer);
        resolve(undefined);
      }
    });
    done.catch((e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
  return {
    proc,
    playing,
    done,
    stop: () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    },
  };
}

/**
 * Waits until `page` hears `peers` participants: linked, and their packets decoded (the view
 * names their format).
 * @param {import('playwright-core').Page} page
 * @param {number} peers
 */
export function waitForPeersHeard(page, peers) {
  return waitFor(`the page hearing ${peers} peers`, async () => {
    const heard = await page.evaluate(
      () => window.tutti.session.view.participants.filter((p) => p.link === 'connected' && p.format).length,
    );
    return { ok: heard === peers, heard };
  });
}
