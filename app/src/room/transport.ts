// How the session's packets reach the other participants. Today that is the mesh (net/mesh.ts):
// one peer connection per participant, each handing its data channels to the packet pump. A room
// served by a hub is a second way to do the same job; the session only needs what is below.

import { Mesh, type MeshOptions } from '../net/mesh';
import type { LinkState, RestartCounts } from './types';

export interface Transport {
  /** Makes sure `peer` is reached, its packets going to and from engine slot `slot`. */
  ensure(peer: string, slot: number): void;
  /** Stops reaching `peer` (it left the room). */
  drop(peer: string): void;
  /** How the link to `peer` stands; null when there is none. */
  state(peer: string): LinkState | null;
  /** The round trip to `peer` the link itself measured, ms; null while unknown. */
  rttMs(peer: string): number | null;
  /** How often the link to `peer` was made anew, by reason; absent when links are not restarted. */
  restarts?(peer: string): RestartCounts;
  /** A signal from `peer`, relayed by the server, for this transport. */
  handleSignal(from: string, data: unknown): Promise<void>;
  close(): void;
}

/** The mesh: a peer connection to each participant. */
export function openMesh(opts: MeshOptions): Mesh & Transport {
  return new Mesh(opts);
}

/** How long the server may take to answer /api/config before it counts as out of reach. */
export const CONFIG_TIMEOUT_MS = 5000;

/**
 * The ICE servers the Tutti server configures (/api/config); none when it names none or its
 * answer is unusable (a LAN or loopback needs none). 'offline' when the server cannot be reached.
 * `navigator.onLine` is not asked: a browser on a machine whose only interface is loopback says
 * it is offline while the server that served this page answers, and the server's answer is what
 * a room needs.
 */
export async function fetchIceServers(
  get: typeof fetch = (input, init) => fetch(input, init),
): Promise<RTCIceServer[] | 'offline'> {
  let res: Response;
  try {
    res = await get('/api/config', { cache: 'no-store', signal: AbortSignal.timeout(CONFIG_TIMEOUT_MS) });
  } catch {
    return 'offline';
  }
  try {
    if (res.ok) {
      const cfg = (await res.json()) as { iceServers?: RTCIceServer[] };
      if (Array.isArray(cfg.iceServers)) return cfg.iceServers;
    }
  } catch {
    // No usable server config: a LAN or loopback needs no ICE servers.
  }
  return [];
}
