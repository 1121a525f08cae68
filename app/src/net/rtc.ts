// What every peer connection of the app needs, whoever is at the other end (a participant in the
// mesh, mesh.ts; the hub, hub.ts): which ICE candidates a link may use under the session's policy,
// and the round trip the browser measured on the link's selected candidate pair.

/** 'loopback' keeps only 127.0.0.1 candidates (one-machine tests); 'all' keeps everything. */
export type IcePolicy = 'all' | 'loopback';

/** Whether `candidate` (an a=candidate line's value) may be used under `policy`. */
export function candidateAllowed(policy: IcePolicy, candidate: string): boolean {
  if (policy === 'all') return true;
  // candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type> ...
  const address = candidate.split(' ')[4];
  return address === '127.0.0.1';
}

/** What the browser says of `pc`'s nominated, succeeded candidate pair. */
export interface SelectedPair {
  /** Its round trip, ms (null until measured). */
  rttMs: number | null;
  /** The local UDP port packets from the other end arrive at (null when not said). */
  localPort: number | null;
}

/** `pc`'s nominated, succeeded candidate pair; null while there is none (or the connection
 * closed while we asked). */
export async function selectedPair(pc: RTCPeerConnection): Promise<SelectedPair | null> {
  try {
    const report = await pc.getStats();
    let pair: { localCandidateId?: string; currentRoundTripTime?: number } | null = null;
    report.forEach((s: { type: string; state?: string; nominated?: boolean; localCandidateId?: string }) => {
      if (s.type === 'candidate-pair' && s.state === 'succeeded' && s.nominated) pair = s;
    });
    if (!pair) return null;
    const { localCandidateId, currentRoundTripTime } = pair;
    const local = localCandidateId
      ? (report.get(localCandidateId) as { port?: number } | undefined)
      : undefined;
    return {
      rttMs: typeof currentRoundTripTime === 'number' ? currentRoundTripTime * 1000 : null,
      localPort: typeof local?.port === 'number' ? local.port : null,
    };
  } catch {
    return null;
  }
}

/** The round trip of `pc`'s selected candidate pair, ms; null while there is none. */
export async function selectedPairRttMs(pc: RTCPeerConnection): Promise<number | null> {
  return (await selectedPair(pc))?.rttMs ?? null;
}
