// The net benchmark page (app/net-bench.html): sets the scene whose CPU cost `npm run bench`
// measures from outside with Chromium tracing (bench/run.mjs, method in bench/README.md).
//
// ?peers=N (default 4, 1..16): the real engine in a realtime 48 kHz AudioContext (an oscillator
// as its input, so it publishes one packet per quantum) and the real packet pump where the app
// puts it (createPumpHost: the 'tutti-net' worker). Each of the N remote players is a pair of
// RTCPeerConnections in this page connected over loopback (only 127.0.0.1 candidates): the
// local end of its negotiated unordered channel goes to the pump as soon as it is created; the
// remote end stays here, sends valid PCM16 stereo 128-frame packets at 375 per second (from a
// 10 ms timer, what is due at each tick) and counts what the pump sends it.
//
// ?mode=postmessage&rate=R: the baseline instead. A plain worker (post-sink-worker.ts) is posted
// R copies of a 1 KB ArrayBuffer a second, from the same kind of 10 ms timer.
//
// `window.netBench` holds `state` ('starting', 'ready' or 'error', with `error`) and
// `counters()`, a snapshot the runner reads at the start and end of its traced window.

import { createEngine, engineUnavailableReason, type EngineHandle } from '../../app/src/audio/host';
import { DEFAULT_CONFIG } from '../../app/src/audio/engine-core';
import { encodePacket } from '../../app/src/audio/packet';
import { StatsReader } from '../../app/src/audio/stats-reader';
import { createPumpHost, type PumpHost } from '../../app/src/net/net-host';
import {
  ChannelState,
  N_IN_PACKETS,
  N_OUT_PACKETS,
  N_THREAD,
  N_WAKEUPS,
  NP_RX_DROPPED,
  NP_STATE,
  NP_TX_PACKETS,
  NP_TX_SKIPPED,
  netPeerIndex,
} from '../../app/src/net/pump';
import { CYCLE_BLOCKS, FRAMES, PACKET_BYTES, peerFrequency, stampPacket } from './feeder';
import PostSinkWorker from './post-sink-worker.ts?worker';

/** Packets per second per player: one 128-frame block at 48 kHz. */
export const PACKETS_PER_SECOND = 48000 / 128;
const TICK_MS = 10;
const MAX_PEERS = 16;
const OPEN_TIMEOUT_MS = 20000;
const BASELINE_BYTES = 1024;

export interface NetBenchCounters {
  /** performance.now() of the snapshot, ms. */
  t_ms: number;
  mode: 'pump' | 'postmessage';
  /** Pump: packets its channels received (N_IN_PACKETS). Baseline: messages the worker received. */
  in_packets: number;
  /** Pump: packets the engine published that the pump sent on (N_OUT_PACKETS); baseline: 0. */
  out_packets: number;
  /** Pump: channel sends (out_packets × open channels, less skips). */
  tx_packets: number;
  tx_skipped: number;
  rx_dropped: number;
  wakeups: number;
  /** Packets (or messages) this page's senders sent. */
  sent: number;
  /** Packets the remote ends received from the pump. */
  received_by_peers: number;
  /** Engine: ring records read, underruns. */
  engine_records_read: number;
  engine_underruns: number;
  /** Timer ticks that found more than 10 packets per player due (the main thread was late). */
  late_ticks: number;
  where: 'worker' | 'main' | 'none';
}

interface NetBenchApi {
  state: 'starting' | 'ready' | 'error';
  error?: string;
  peers: number;
  counters(): NetBenchCounters;
}

declare global {
  interface Window {
    netBench?: NetBenchApi;
  }
}

const api: NetBenchApi = { state: 'starting', peers: 0, counters: () => emptyCounters('pump') };
window.netBench = api;

function emptyCounters(mode: 'pump' | 'postmessage'): NetBenchCounters {
  return {
    t_ms: performance.now(),
    mode,
    in_packets: 0,
    out_packets: 0,
    tx_packets: 0,
    tx_skipped: 0,
    rx_dropped: 0,
    wakeups: 0,
    sent: 0,
    received_by_peers: 0,
    engine_records_read: 0,
    engine_underruns: 0,
    late_ticks: 0,
    where: 'none',
  };
}

function show(text: string): void {
  const box = document.getElementById('status');
  if (box) box.textContent = text;
}

function fail(err: unknown): void {
  api.error = err instanceof Error ? err.message : String(err);
  api.state = 'error';
  show(`Failed: ${api.error}`);
}

/** The packets of player `k`: a sine of its own frequency, CYCLE_BLOCKS blocks that repeat
 * exactly, so its packets are encoded once. */
function playerPackets(k: number): Uint8Array<ArrayBuffer>[] {
  const hz = peerFrequency(k);
  const left = new Float32Array(FRAMES);
  const right = new Float32Array(FRAMES);
  const packets: Uint8Array<ArrayBuffer>[] = [];
  for (let b = 0; b < CYCLE_BLOCKS; b++) {
    for (let i = 0; i < FRAMES; i++) {
      left[i] = 0.2 * Math.sin((2 * Math.PI * hz * (b * FRAMES + i)) / 48000);
      right[i] = left[i];
    }
    const out = new Uint8Array(PACKET_BYTES);
    const h = { timestamp: 0, seq: b, frames: FRAMES, rateCode: 3, bits: 16, channelsIn: 2, channelsOut: 2 };
    const n = encodePacket(h, null, [left, right], out);
    if (n !== out.length) throw new Error(`encodePacket returned ${n}`);
    packets.push(out);
  }
  return packets;
}

/** Keeps only loopback candidates (the address is the fifth field of the candidate line). */
function loopback(candidate: RTCIceCandidate | null): boolean {
  return !!candidate?.candidate && candidate.candidate.split(' ')[4] === '127.0.0.1';
}

interface Player {
  local: RTCPeerConnection;
  remote: RTCPeerConnection;
  channel: RTCDataChannel;
  packets: Uint8Array<ArrayBuffer>[];
  received: number;
}

/** Connects player `slot`: its local channel is handed to the pump in the task that made it. */
async function connectPlayer(slot: number, pump: PumpHost, engine: EngineHandle): Promise<Player> {
  const local = new RTCPeerConnection();
  const remote = new RTCPeerConnection();
  const init: RTCDataChannelInit = { negotiated: true, id: 0, ordered: false, maxRetransmits: 0 };
  pump.add(slot, local.createDataChannel('audio', init));
  engine.control({ type: 'add-peer', slot });
  const channel = remote.createDataChannel('audio', init);
  channel.binaryType = 'arraybuffer';
  const player: Player = { local, remote, channel, packets: playerPackets(slot), received: 0 };
  channel.onmessage = () => {
    player.received++;
  };
  local.onicecandidate = (ev) => {
    if (loopback(ev.candidate)) void remote.addIceCandidate(ev.candidate!);
  };
  remote.onicecandidate = (ev) => {
    if (loopback(ev.candidate)) void local.addIceCandidate(ev.candidate!);
  };
  await local.setLocalDescription(await local.createOffer());
  await remote.setRemoteDescription(local.localDescription!);
  await remote.setLocalDescription(await remote.createAnswer());
  await local.setRemoteDescription(remote.localDescription!);
  return player;
}

async function runPump(peers: number): Promise<void> {
  const ctx = new AudioContext({ sampleRate: 48000, latencyHint: 'interactive' });
  const engine = await createEngine(ctx, { ...DEFAULT_CONFIG, maxPeers: MAX_PEERS });
  const osc = new OscillatorNode(ctx, { frequency: 440 });
  const gain = new GainNode(ctx, { gain: 0.1 });
  osc.connect(gain).connect(engine.node);
  engine.node.connect(ctx.destination);
  osc.start();
  await ctx.resume();
  const pump = createPumpHost(engine.buffers.inbound, engine.buffers.outbound, MAX_PEERS);
  const players: Player[] = [];
  for (let slot = 0; slot < peers; slot++) players.push(await connectPlayer(slot, pump, engine));

  const s = pump.stats;
  const opened = performance.now();
  const allOpen = () =>
    players.every(
      (p, slot) => p.channel.readyState === 'open' && s[netPeerIndex(slot, NP_STATE)] === ChannelState.Open,
    );
  while (!allOpen()) {
    if (performance.now() - opened > OPEN_TIMEOUT_MS) {
      const open = players.filter((p) => p.channel.readyState === 'open').length;
      throw new Error(
        `${open} of ${peers} channels open after ${OPEN_TIMEOUT_MS / 1000} s (pump in ${pump.where})`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  const engineStats = new StatsReader();
  engineStats.attach(engine.buffers.stats);
  let seq = 0;
  let lateTicks = 0;
  const t0 = performance.now();
  setInterval(() => {
    const due = Math.floor(((performance.now() - t0) * PACKETS_PER_SECOND) / 1000);
    if (due - seq > 10) lateTicks++;
    for (; seq < due; seq++) {
      for (let k = 0; k < players.length; k++) {
        const p = players[k];
        const packet = p.packets[seq & (CYCLE_BLOCKS - 1)];
        stampPacket(packet, seq);
        if (p.channel.readyState === 'open') p.channel.send(packet);
      }
    }
  }, TICK_MS);

  api.counters = () => {
    let tx = 0;
    let skipped = 0;
    let dropped = 0;
    for (let slot = 0; slot < peers; slot++) {
      tx += s[netPeerIndex(slot, NP_TX_PACKETS)];
      skipped += s[netPeerIndex(slot, NP_TX_SKIPPED)];
      dropped += s[netPeerIndex(slot, NP_RX_DROPPED)];
    }
    engineStats.refresh();
    const { recordsRead, underruns } = engineStats.globals();
    return {
      t_ms: performance.now(),
      mode: 'pump',
      in_packets: s[N_IN_PACKETS],
      out_packets: s[N_OUT_PACKETS],
      tx_packets: tx,
      tx_skipped: skipped,
      rx_dropped: dropped,
      wakeups: s[N_WAKEUPS],
      sent: seq * peers,
      received_by_peers: players.reduce((a, p) => a + p.received, 0),
      engine_records_read: recordsRead,
      engine_underruns: underruns,
      late_ticks: lateTicks,
      where: s[N_THREAD] === 1 ? 'worker' : s[N_THREAD] === 2 ? 'main' : 'none',
    };
  };
  api.state = 'ready';
  show(
    `${peers} players connected; the pump runs in the ${pump.where === 'worker' ? 'net worker' : 'main thread'}.`,
  );
  setInterval(() => {
    const c = api.counters();
    show(
      `${peers} players, pump in the ${c.where}: ${c.in_packets} packets in, ${c.out_packets} out ` +
        `(${c.tx_packets} channel sends), ${c.received_by_peers} received by the players, ` +
        `${c.engine_records_read} read by the engine.`,
    );
  }, 1000);
}

function runPostMessage(rate: number): void {
  const worker = new PostSinkWorker({ name: 'tutti-post-sink' });
  const shared = new SharedArrayBuffer(16);
  const counters = new Float64Array(shared);
  worker.postMessage({ type: 'init', counters: shared });
  const payload = new ArrayBuffer(BASELINE_BYTES);
  new Uint8Array(payload).fill(0x5a);
  let sent = 0;
  let lateTicks = 0;
  const t0 = performance.now();
  setInterval(() => {
    const due = Math.floor(((performance.now() - t0) * rate) / 1000);
    if (due - sent > (rate * TICK_MS) / 250) lateTicks++;
    // Not transferred: each message is a structured-clone copy of the 1 KB buffer.
    for (; sent < due; sent++) worker.postMessage(payload);
  }, TICK_MS);
  api.counters = () => ({
    ...emptyCounters('postmessage'),
    in_packets: counters[0],
    sent,
    late_ticks: lateTicks,
    where: 'worker',
  });
  api.state = 'ready';
  show(`Posting ${rate} copies of a ${BASELINE_BYTES}-byte buffer a second to a worker.`);
}

function main(): void {
  const q = new URLSearchParams(location.search);
  if (q.get('mode') === 'postmessage') {
    const rate = Number(q.get('rate') ?? 1500);
    if (!(rate > 0 && rate <= 100000)) return fail(`rate=${q.get('rate')} is outside 1..100000`);
    return runPostMessage(rate);
  }
  const reason = engineUnavailableReason();
  if (reason) return fail(reason);
  const peers = Number(q.get('peers') ?? 4);
  if (!Number.isInteger(peers) || peers < 1 || peers > MAX_PEERS)
    return fail(`peers=${q.get('peers')} is outside 1..${MAX_PEERS}`);
  api.peers = peers;
  runPump(peers).catch(fail);
}

main();
