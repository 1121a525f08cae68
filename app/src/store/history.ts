// Session history: one record per time the user was in a room. The start record is written once
// the server accepts the join, updated every UPDATE_EVERY_MS while the session runs and ended at
// leave. A page that closes without leaving leaves a record without an end; the next start gives
// it its last update as its end (a record updated recently may be a session running in another
// tab, so only older ones are closed).
//
// Latency stages (observeLatency) come from the engine's histograms, which are cumulative since
// the peer joined: the latest per peer is that peer's distribution over the session. The verdict
// kept with them is stats/verdict.ts's grade over the whole session: one-way latency is the
// mouthToEar stage's median, jitter the network stage's spread (p95 − min, as the jitter buffer
// measures its lateness spread), loss the session's, underruns per minute of the participant's
// time in the room (at least a minute, as the verdict counts them over the last minute).

import type { StageHistogram } from '../audio/latency';
import type { ParticipantView, RoomView } from '../room/types';
import { verdict } from '../stats/verdict';
import { db, newestFirst, type TuttiDB } from './db';
import type { ParticipantSummary, SessionRecord, SessionSummary, StageSummary } from './schema';
import {
  isRoomName,
  NAME_MAX,
  STAGE_NAME_MAX,
  STAGES_MAX,
  validCount,
  validStage,
  validStages,
} from './validate';

/** Figures are sampled from the view at most this often. */
const SAMPLE_EVERY_MS = 1000;
/** The running session's record is rewritten this often. */
export const UPDATE_EVERY_MS = 15_000;
/** A record without an end and not updated for this long belongs to a page that has gone. */
export const STALE_AFTER_MS = 4 * UPDATE_EVERY_MS;

/** Records when there is no database. */
const memory = new Map<string, SessionRecord>();

function randomId(): string {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** What is gathered for one participant (one peer id) from the views. */
interface Tally {
  name: string;
  underruns: number;
  lossPct: number;
  bufferSum: number;
  bufferMax: number;
  samples: number;
  latencySum: number;
  latencySamples: number;
  rttSum: number;
  rttSamples: number;
  /** Times of the first and the latest sample that saw the participant. */
  firstAt: number;
  lastAt: number;
}

/** One peer's latency stages as last observed. */
interface PeerStages {
  stages: Map<string, StageSummary>;
  /** Spread of the network stage (p95 − min), ms; null until that stage holds anything. */
  jitterMs: number | null;
}

const MINUTE_MS = 60_000;

/** Gathers a session's figures from RoomView snapshots and keeps its record written. */
export class SessionLog {
  readonly id = randomId();
  private readonly byPeer = new Map<string, Tally>();
  private readonly stagesByPeer = new Map<string, PeerStages>();
  private readonly names: string[] = [];
  private startedAt: number | null = null;
  private lastSample = -Infinity;
  private lastWrite = -Infinity;
  private engineUnderruns = 0;
  private ended = false;
  private writing: Promise<void> = Promise.resolve();
  /** The latest snapshot not sampled yet (sampling is once a second). */
  private pending: RoomView | null = null;

  constructor(readonly room: string) {}

  /** Takes a view snapshot (call with every one; sampling is rate-limited here). */
  observe(view: RoomView, now = Date.now()): void {
    if (this.ended) return;
    if (this.startedAt === null) {
      if (!view.joined) return;
      this.startedAt = now;
    }
    if (now - this.lastSample < SAMPLE_EVERY_MS) {
      this.pending = view;
      return;
    }
    this.pending = null;
    this.lastSample = now;
    this.engineUnderruns = Math.max(this.engineUnderruns, validCount(view.engine.underruns));
    for (const p of view.participants) this.sample(p, now);
    if (now - this.lastWrite >= UPDATE_EVERY_MS) void this.write(now, null);
  }

  /** Ends the session (leave): its record gets its end. Nothing is written for a session the
   * server never accepted. */
  async end(now = Date.now()): Promise<void> {
    if (this.ended) return this.writing;
    this.ended = true;
    if (this.startedAt === null) return this.writing;
    // A participant met in the last second (or a visit shorter than a second) still counts.
    if (this.pending) for (const p of this.pending.participants) this.sample(p, now);
    this.pending = null;
    return this.write(now, now);
  }

  /** Takes the engine's latency stages by peer id (Session.latencyStages().peers). Per peer, each
   * stage that holds anything replaces what was kept for it; stages with nothing measured yet,
   * and peers no longer listed, keep what they had. Stage names longer than STAGE_NAME_MAX are
   * ignored, and at most STAGES_MAX stages are kept per peer. */
  observeLatency(peers: Record<string, Record<string, StageHistogram>>): void {
    if (this.ended) return;
    for (const [peer, stages] of Object.entries(peers)) {
      let kept = this.stagesByPeer.get(peer);
      if (!kept) {
        kept = { stages: new Map(), jitterMs: null };
        this.stagesByPeer.set(peer, kept);
      }
      for (const [name, h] of Object.entries(stages)) {
        if (name.length === 0 || name.length > STAGE_NAME_MAX) continue;
        if (!kept.stages.has(name) && kept.stages.size >= STAGES_MAX) continue;
        const stage = validStage(h);
        if (!stage || stage.count === 0) continue;
        kept.stages.set(name, stage);
        if (name === 'network' && Number.isFinite(h.min)) kept.jitterMs = Math.max(0, stage.p95 - h.min);
      }
    }
  }

  /** Writes the record as it stands (page hiding: the last chance to save the latest figures). */
  flush(now = Date.now()): Promise<void> {
    if (this.ended || this.startedAt === null) return this.writing;
    return this.write(now, null);
  }

  record(now: number, endedAt: number | null): SessionRecord {
    return {
      id: this.id,
      room: this.room,
      startedAt: this.startedAt ?? now,
      endedAt,
      updatedAt: now,
      participants: [...this.names],
      summary: this.summary(),
    };
  }

  private sample(p: ParticipantView, now: number): void {
    const name = p.name.slice(0, NAME_MAX);
    if (!this.names.includes(name)) this.names.push(name);
    let t = this.byPeer.get(p.peer);
    if (!t) {
      t = {
        name,
        underruns: 0,
        lossPct: 0,
        bufferSum: 0,
        bufferMax: 0,
        samples: 0,
        latencySum: 0,
        latencySamples: 0,
        rttSum: 0,
        rttSamples: 0,
        firstAt: now,
        lastAt: now,
      };
      this.byPeer.set(p.peer, t);
    }
    t.lastAt = now;
    // Underruns and loss are running totals over the peer's time in the room: keep the latest.
    t.underruns = Math.max(t.underruns, validCount(p.underruns));
    t.lossPct = validCount(p.lossPct, t.lossPct);
    if (p.link !== 'connected') return;
    const buf = validCount(p.bufferMs);
    t.bufferSum += buf;
    t.bufferMax = Math.max(t.bufferMax, buf);
    t.samples++;
    if (p.latencyMs !== null && Number.isFinite(p.latencyMs)) {
      t.latencySum += p.latencyMs;
      t.latencySamples++;
    }
    if (p.rttMs !== null && Number.isFinite(p.rttMs) && p.rttMs >= 0) {
      t.rttSum += p.rttMs;
      t.rttSamples++;
    }
  }

  /** Per participant name: a name seen with several peer ids (a rejoin) sums its underruns and
   * weighs the rest by samples; of its latency stages, each comes from the peer id whose stage
   * holds the most values. */
  private summary(): SessionSummary {
    const byName = new Map<string, [string, Tally][]>();
    for (const [peer, t] of this.byPeer) byName.set(t.name, [...(byName.get(t.name) ?? []), [peer, t]]);
    const participants: Record<string, ParticipantSummary> = {};
    for (const [name, entries] of byName) {
      const ts = entries.map(([, t]) => t);
      const samples = ts.reduce((a, t) => a + t.samples, 0);
      const latencySamples = ts.reduce((a, t) => a + t.latencySamples, 0);
      const rttSamples = ts.reduce((a, t) => a + t.rttSamples, 0);
      const p: ParticipantSummary = {
        underruns: ts.reduce((a, t) => a + t.underruns, 0),
        lossPct:
          samples > 0
            ? ts.reduce((a, t) => a + t.lossPct * t.samples, 0) / samples
            : Math.max(...ts.map((t) => t.lossPct)),
        avgBufferMs: samples > 0 ? ts.reduce((a, t) => a + t.bufferSum, 0) / samples : 0,
        maxBufferMs: Math.max(...ts.map((t) => t.bufferMax)),
        meanLatencyMs: latencySamples > 0 ? ts.reduce((a, t) => a + t.latencySum, 0) / latencySamples : null,
      };
      if (rttSamples > 0) p.rttMs = ts.reduce((a, t) => a + t.rttSum, 0) / rttSamples;
      const kept = entries.flatMap(([peer]) => this.stagesByPeer.get(peer) ?? []);
      if (kept.length > 0) {
        const presentMs = ts.reduce((a, t) => a + t.lastAt - t.firstAt, 0);
        Object.assign(p, mergeStages(kept, p, p.underruns / (Math.max(presentMs, MINUTE_MS) / MINUTE_MS)));
      }
      participants[name] = p;
    }
    return { participants, engineUnderruns: this.engineUnderruns };
  }

  private write(now: number, endedAt: number | null): Promise<void> {
    this.lastWrite = now;
    const rec = this.record(now, endedAt);
    this.writing = this.writing.then(() => putSession(rec));
    return this.writing;
  }
}

/** The stages of one name's peer ids (each stage from the one holding the most values) and the
 * verdict they give with the name's loss and underrun rate. */
function mergeStages(
  kept: PeerStages[],
  p: ParticipantSummary,
  underrunsPerMinute: number,
): Pick<ParticipantSummary, 'stages' | 'verdict'> {
  const merged = new Map<string, StageSummary>();
  let jitterMs: number | null = null;
  for (const k of kept) {
    for (const [name, s] of k.stages) {
      const had = merged.get(name);
      if (!had && merged.size >= STAGES_MAX) continue;
      if (had && had.count >= s.count) continue;
      merged.set(name, s);
      if (name === 'network') jitterMs = k.jitterMs;
    }
  }
  const grade =
    jitterMs === null
      ? null
      : verdict({
          oneWayMs: merged.get('mouthToEar')?.p50 ?? null,
          jitterMs,
          lossPct: p.lossPct,
          underrunsPerMinute,
          // Only the grade is kept; these two shape the hints alone.
          blockFrames: 128,
          bufferMode: 'adaptive',
        }).grade;
  return { stages: Object.fromEntries(merged), verdict: grade };
}

async function putSession(rec: SessionRecord): Promise<void> {
  const conn = await db();
  if (!conn) {
    memory.set(rec.id, rec);
    return;
  }
  try {
    await conn.put('sessions', rec);
  } catch (err) {
    console.warn(`history: session not saved: ${String(err)}`);
  }
}

function validSession(v: unknown): SessionRecord | null {
  const o = v && typeof v === 'object' ? (v as Record<string, unknown>) : null;
  if (!o || typeof o.id !== 'string' || !isRoomName(o.room)) return null;
  const startedAt = validCount(o.startedAt, NaN);
  if (Number.isNaN(startedAt)) return null;
  const updatedAt = validCount(o.updatedAt, startedAt);
  const endedAt = o.endedAt === null ? null : validCount(o.endedAt, updatedAt);
  const participants = Array.isArray(o.participants)
    ? o.participants.filter((n): n is string => typeof n === 'string').map((n) => n.slice(0, NAME_MAX))
    : [];
  const s = o.summary && typeof o.summary === 'object' ? (o.summary as Record<string, unknown>) : {};
  const per =
    s.participants && typeof s.participants === 'object' ? (s.participants as Record<string, unknown>) : {};
  const summary: SessionSummary = { participants: {}, engineUnderruns: validCount(s.engineUnderruns) };
  for (const [name, raw] of Object.entries(per)) {
    const p = raw && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
    summary.participants[name] = {
      underruns: validCount(p.underruns),
      lossPct: validCount(p.lossPct),
      avgBufferMs: validCount(p.avgBufferMs),
      maxBufferMs: validCount(p.maxBufferMs),
      meanLatencyMs:
        typeof p.meanLatencyMs === 'number' && Number.isFinite(p.meanLatencyMs) ? p.meanLatencyMs : null,
    };
    // Later fields: absent in older records, and dropped when malformed.
    const out = summary.participants[name];
    if (p.stages !== undefined) out.stages = validStages(p.stages);
    if (p.verdict === null || p.verdict === 'good' || p.verdict === 'fair' || p.verdict === 'poor')
      out.verdict = p.verdict;
    const rtt = p.rttMs === null ? null : validCount(p.rttMs, NaN);
    if (rtt === null || !Number.isNaN(rtt)) out.rttMs = rtt;
  }
  return { id: o.id, room: o.room, startedAt, endedAt, updatedAt, participants, summary };
}

/** Gives each record without an end, not updated for STALE_AFTER_MS, its last update as its end.
 * Returns how many were closed. */
export async function closeDangling(now = Date.now()): Promise<number> {
  const conn = await db();
  let closed = 0;
  if (!conn) return 0;
  try {
    // Looked for read-only first: a read-write transaction on the store waits for every other
    // one, and a page just left with one under way can hold it for good (WebKitGTK: the next
    // page's list of sessions never came, 2 loads in 5). Written only when a record needs it.
    if (!(await hasDangling(conn, now))) return 0;
    const tx = conn.transaction('sessions', 'readwrite');
    for (let c = await tx.store.openCursor(); c; c = await c.continue()) {
      const rec = dangling(c.value, now);
      if (!rec) continue;
      await c.update({ ...rec, endedAt: rec.updatedAt });
      closed++;
    }
    await tx.done;
  } catch (err) {
    console.warn(`history: ${String(err)}`);
  }
  return closed;
}

/** A stored value that is a valid record left open (no end) and not updated for
 * STALE_AFTER_MS at `now`, or null. */
function dangling(v: unknown, now: number): SessionRecord | null {
  const o = v && typeof v === 'object' ? (v as Record<string, unknown>) : null;
  if (!o || o.endedAt !== null) return null;
  const rec = validSession(v);
  return rec && now - rec.updatedAt >= STALE_AFTER_MS ? rec : null;
}

/** Whether a record is dangling at `now`: read-only. */
async function hasDangling(conn: TuttiDB, now: number): Promise<boolean> {
  const tx = conn.transaction('sessions');
  for (let c = await tx.store.openCursor(); c; c = await c.continue()) {
    if (dangling(c.value, now)) return true;
  }
  return false;
}

/** The latest sessions, newest first (dangling ones closed first). */
export async function recentSessions(limit = 5, now = Date.now()): Promise<SessionRecord[]> {
  const conn = await db();
  if (!conn) return [...memory.values()].sort((a, b) => b.startedAt - a.startedAt).slice(0, limit);
  await closeDangling(now);
  return newestFirst(conn, 'sessions', 'startedAt', limit, validSession);
}

/** Forgets the in-memory records (tests). */
export function resetHistoryMemory(): void {
  memory.clear();
}
