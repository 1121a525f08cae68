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

/** The round trip of `pc`'s nominated, succeeded candidate pair, ms; null while there is none
 * (or the connection closed while we asked). */
export async function selectedPairRttMs(pc: RTCPeerConnection): Promise<number | null> {
  try {
    const report = await pc.getStats();
    let rtt: number | null = null;
    report.forEach(
      (s: { type: string; state?: string; nominated?: boolean; currentRoundTripTime?: number }) => {
        if (
          s.type === 'candidate-pair' &&
          s.state === 'succeeded' &&
          s.nominated &&
          typeof s.currentRoundTripTime === 'number'
        ) {
          rtt = s.currentRoundTripTime * 1000;
        }
      },
    );
    return rtt;
  } catch {
    return null;
  }
}
