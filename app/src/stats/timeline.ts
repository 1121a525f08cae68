// A session's stats over time: one sample per peer per second, kept in memory for the stats view
// and the export. Bounded (the oldest samples go first), so an all-day session stays small.

/** One peer's figures at one moment. */
export interface PeerSample {
  /** Seconds since the timeline started. */
  t: number;
  bufferMs: number;
  targetMs: number;
  /** Estimated one-way mouth-to-ear latency, ms: the engine's mouthToEar stage's p50 (since its
   * histograms last started) once it has any, else the view's estimate (block + RTT/2 + buffer +
   * output device); NaN when neither is known. */
  latencyMs: number;
  rttMs: number;
  /** Counters, cumulative since the peer joined. */
  received: number;
  lost: number;
  late: number;
  concealed: number;
  discarded: number;
  underruns: number;
  driftPpm: number;
  /** Where dropouts come from, cumulative (optional: samples recorded before they existed):
   * underruns that waited for a late packet, underruns ended by a stall of this machine, the
   * peer's own missed audio callbacks, ours, and stalls of this machine. */
  lateUnderruns?: number;
  stallUnderruns?: number;
  senderGaps?: number;
  ownGaps?: number;
  localStalls?: number;
}

/** Dropout causes over a recent window (counts). */
export interface Causes {
  late: number;
  stall: number;
  senderGaps: number;
  ownGaps: number;
}

export interface PeerSeries {
  peer: string;
  name: string;
  samples: PeerSample[];
}

/** About an hour at one sample a second. */
export const MAX_SAMPLES = 3600;

export class StatsTimeline {
  private readonly series = new Map<string, PeerSeries>();
  readonly startedAt: number;

  constructor(
    startedAt = Date.now(),
    private readonly maxSamples = MAX_SAMPLES,
  ) {
    this.startedAt = startedAt;
  }

  /** Adds a sample of `peer` (named `name`) taken at `at` (ms since 1970). */
  add(peer: string, name: string, at: number, s: Omit<PeerSample, 't'>): void {
    let ser = this.series.get(peer);
    if (!ser) {
      ser = { peer, name, samples: [] };
      this.series.set(peer, ser);
    }
    ser.name = name;
    ser.samples.push({ t: (at - this.startedAt) / 1000, ...s });
    if (ser.samples.length > this.maxSamples) ser.samples.splice(0, ser.samples.length - this.maxSamples);
  }

  peers(): PeerSeries[] {
    return [...this.series.values()];
  }

  get(peer: string): PeerSeries | undefined {
    return this.series.get(peer);
  }

  /**
   * Loss in percent over the last `seconds` (lost / (received + lost) between the first and the
   * last sample of that window), and underruns over the same window.
   */
  recent(peer: string, seconds = 60): { lossPct: number; underruns: number; causes: Causes } {
    const s = this.series.get(peer)?.samples;
    const none: Causes = { late: 0, stall: 0, senderGaps: 0, ownGaps: 0 };
    if (!s || s.length === 0) return { lossPct: 0, underruns: 0, causes: none };
    const last = s[s.length - 1];
    let i = s.length - 1;
    while (i > 0 && last.t - s[i - 1].t <= seconds) i--;
    const first = i === s.length - 1 && s.length > 1 ? s[s.length - 2] : s[i];
    const lost = last.lost - first.lost;
    const got = last.received - first.received;
    const expected = lost + got;
    return {
      lossPct: expected > 0 ? (100 * Math.max(0, lost)) / expected : 0,
      underruns: Math.max(0, last.underruns - first.underruns),
      causes: {
        late: grew(first.lateUnderruns, last.lateUnderruns),
        stall: grew(first.stallUnderruns, last.stallUnderruns),
        senderGaps: grew(first.senderGaps, last.senderGaps),
        ownGaps: grew(first.ownGaps, last.ownGaps),
      },
    };
  }
}

/** How much an optional cumulative counter grew (0 when either end lacks it). */
function grew(from: number | undefined, to: number | undefined): number {
  return from === undefined || to === undefined ? 0 : Math.max(0, to - from);
}
