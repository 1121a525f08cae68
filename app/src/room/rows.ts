// Each participant's row of figures for the view (view.ts): what the session knows of it
// (membership), what the engine measured in its slot, and what the pump and the hub add. The
// round trip is the pump's own exchanges on the data channels where there are any, else the
// link's (the ICE pair's). In mix mode our engine hears only the mix, so each player's meter is
// the hub's reading of that player (net-stats.ts, NP_HUB_*); silence when none is fresh.

import type { EnginePeerStats, LinearLevels } from '../audio/stats-reader';
import { NP_RTT_MS, NP_SEND_LAYER, hubMeter, netPeerIndex } from '../net/net-stats';
import { HUB_LAYERS } from '../net/protocol';
import type { Participant } from './membership';
import type { RestartCounts } from './types';
import type { ParticipantRow } from './view';

const SILENT: LinearLevels = { peakL: 0, peakR: 0, rmsL: 0, rmsR: 0 };

export interface RowSources {
  /** The engine's figures of a slot. */
  engine(slot: number): EnginePeerStats;
  /** The pump's net stats, null while there is no pump. */
  net: Float64Array | null;
  /** The meters come from the hub (mix mode). */
  hubMeters: boolean;
  /** The link's own round trip to a peer, ms, or null. */
  linkRttMs(peer: string): number | null;
  /** The link's restarts by reason, when the transport counts them. */
  restarts(peer: string): RestartCounts | undefined;
  /** Now, ms since the epoch (timeOrigin + now()), to tell a hub reading's age. */
  epochMs: number;
}

export function participantRows(participants: Map<string, Participant>, src: RowSources): ParticipantRow[] {
  const rows: ParticipantRow[] = [];
  for (const [peer, p] of participants) {
    const net = src.net;
    const pumpRtt = net ? net[netPeerIndex(p.slot, NP_RTT_MS)] : NaN;
    const engine = src.engine(p.slot);
    rows.push({
      peer,
      name: p.member.name,
      kind: p.member.kind,
      link: p.link,
      restarts: src.restarts(peer),
      strip: p.strip,
      stats:
        src.hubMeters && net ? { ...engine, levels: hubMeter(net, p.slot, src.epochMs) ?? SILENT } : engine,
      rttMs: Number.isFinite(pumpRtt) ? pumpRtt : src.linkRttMs(peer),
      sending: (net && HUB_LAYERS[net[netPeerIndex(p.slot, NP_SEND_LAYER)]]) || 'as-sent',
    });
  }
  return rows;
}
