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
// ?peers=N&via=hub: the same engine and pump, but the N players reach it as through the hub's
// forward mode: ONE pair of RTCPeerConnections, its local channel ('hub') handed to the pump as
// its hub link (setHub), player k's stream (k + 1) mapped to engine slot k (mapStream); the remote
// end sends ONE message per block, a bundle of one packet per player, each with its stream id in
// the trailer (player-blocks.ts), and counts what the pump sends it (our packets, once each).
//
// ?mode=postmessage&rate=R: the baseline instead. A plain worker (post-sink-worker.ts) is posted
// R copies of a 1 KB ArrayBuffer a second, from the same kind of 10 ms timer.
//
// `window.netBench` holds `state` ('starting', 'ready' or 'error', with `error`) and
// `counters()`, a snapshot the runner reads at the start and end of its traced window.

import { createEngine } from '../../app/src/audio/host';
import { engineUnavailableReason } from '../../app/src/audio/support';
import { DEFAULT_CONFIG } from '../../app/src/audio/engine-core';
import { StatsReader } from '../../app/src/audio/stats-reader';
import { createPumpHost } from '../../app/src/net/net-host';
import {
  ChannelState,
  N_IN_PACKETS,
  N_OUT_PACKETS,
  N_THREAD,
  N_WAKEUPS,
  N_HUB_BAD_BUNDLES,
  N_HUB_BUNDLES,
  N_HUB_NO_TRAILER,
  N_HUB_STATE,
  N_HUB_TX_PACKETS,
  N_HUB_TX_SKIPPED,
  N_HUB_UNKNOWN_STREAM,
  NP_RX_DROPPED,
  NP_RX_PACKETS,
  NP_STATE,
  NP_TX_PACKETS,
  NP_TX_SKIPPED,
  netPeerIndex,
} from '../../app/src/net/pump';
import { CYCLE_BLOCKS, stampPacket } from './feeder';
import { hubBundles, playerPackets, stampBundle } from './player-blocks';
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
  mode: 'pump' | 'hub' | 'postmessage';
  /** Pump: packets its channels received (N_IN_PACKETS). Baseline: messages the worker received. */
  in_packets: number;
  /** Hub: bundles the pump took whole (N_HUB_BUNDLES); else 0. */
  in_bundles: number;
  /** Hub: messages or packets the hub path dropped (bad bundles, no trailer, unknown stream). */
  hub_dropped: number;
  /** Packets the pump put into each engine slot (NP_RX_PACKETS), slot 0 first. */
  slot_packets: number[];
  /** Packets the engine received in each slot (its peer stats), slot 0 first. */
  slot_engine_received: number[];
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

function emptyCounters(mode: NetBenchCounters['mode']): NetBenchCounters {
  return {
    t_ms: performance.now(),
    mode,
    in_packets: 0,
    in_bundles: 0,
    hub_dropped: 0,
    slot_packets: [],
    slot_engine_received: [],
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

/** Keeps only loopback candidates (the address is the fifth field of the candidate line). */
function loopback(candidate: RTCIceCandidate | null): boolean {
  return !!candidate?.candidate && candidate.candidate.split(' ')[4] === '127.0.0.1';
}

/** A loopback pair of peer connections with one negotiated unordered channel. */
interface Link {
  local: RTCPeerConnection;
  remote: RTCPeerConnection;
  /** The remote end's channel: it sends here and counts what the pump sends it. */
  channel: RTCDataChannel;
  received: number;
}

/** Connects a link whose local channel goes to `take` in the task that made it. */
async function connectLink(label: string, take: (local: RTCDataChannel) => void): Promise<Link> {
  const local = new RTCPeerConnection();
  const remote = new RTCPeerConnection();
  const init: RTCDataChannelInit = { negotiated: true, id: 0, ordered: false, maxRetransmits: 0 };
  take(local.createDataChannel(label, init));
  const channel = remote.createDataChannel(label, init);
  channel.binaryType = 'arraybuffer';
  const link: Link = { local, remote, channel, received: 0 };
  channel.onmessage = () => {
    link.received++;
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
  return link;
}

/** The hub's stream id of player `k` (0 is the hub's mix). */
const streamOf = (k: number): number => k + 1;

async function runPump(peers: number, viaHub: boolean): Promise<void> {
  const ctx = new AudioContext({ sampleRate: 48000, latencyHint: 'interactive' });
  const engine = await createEngine(ctx, { ...DEFAULT_CONFIG, maxPeers: MAX_PEERS });
  const osc = new OscillatorNode(ctx, { frequency: 440 });
  const gain = new GainNode(ctx, { gain: 0.1 });
  osc.connect(gain).connect(engine.node);
  engine.node.connect(ctx.destination);
  osc.start();
  await ctx.resume();
  const pump = createPumpHost(engine.buffers.inbound, engine.buffers.outbound, MAX_PEERS);
  const s = pump.stats;
  const links: Link[] = [];
  if (viaHub) {
    for (let slot = 0; slot < peers; slot++) {
      engine.control({ type: 'add-peer', slot });
      pump.mapStream(streamOf(slot), slot);
    }
    links.push(await connectLink('hub', (ch) => pump.setHub(ch)));
  } else {
    for (let slot = 0; slot < peers; slot++) {
      links.push(await connectLink('audio', (ch) => pump.add(slot, ch)));
      engine.control({ type: 'add-peer', slot });
    }
  }

  const opened = performance.now();
  const pumpOpen = (i: number) =>
    (viaHub ? s[N_HUB_STATE] : s[netPeerIndex(i, NP_STATE)]) === ChannelState.Open;
  const allOpen = () => links.every((l, i) => l.channel.readyState === 'open' && pumpOpen(i));
  while (!allOpen()) {
    if (performance.now() - opened > OPEN_TIMEOUT_MS) {
      const open = links.filter((l) => l.channel.readyState === 'open').length;
      throw new Error(
        `${open} of ${links.length} channels open after ${OPEN_TIMEOUT_MS / 1000} s (pump in ${pump.where})`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  const engineStats = new StatsReader();
  engineStats.attach(engine.buffers.stats);
  let seq = 0;
  let lateTicks = 0;
  const t0 = performance.now();
  const packets = viaHub ? [] : links.map((_, k) => playerPackets(k));
  const bundles = viaHub ? hubBundles(peers, streamOf) : [];
  const hub = links[0];
  setInterval(() => {
    const due = Math.floor(((performance.now() - t0) * PACKETS_PER_SECOND) / 1000);
    if (due - seq > 10) lateTicks++;
    for (; seq < due; seq++) {
      if (viaHub) {
        const bundle = bundles[seq & (CYCLE_BLOCKS - 1)];
        stampBundle(bundle, seq);
        if (hub.channel.readyState === 'open') hub.channel.send(bundle.bytes);
        continue;
      }
      for (let k = 0; k < links.length; k++) {
        const packet = packets[k][seq & (CYCLE_BLOCKS - 1)];
        stampPacket(packet, seq);
        if (links[k].channel.readyState === 'open') links[k].channel.send(packet);
      }
    }
  }, TICK_MS);

  api.counters = () => {
    let tx = viaHub ? s[N_HUB_TX_PACKETS] : 0;
    let skipped = viaHub ? s[N_HUB_TX_SKIPPED] : 0;
    let dropped = 0;
    const slotPackets: number[] = [];
    const slotEngine: number[] = [];
    engineStats.refresh();
    for (let slot = 0; slot < peers; slot++) {
      if (!viaHub) {
        tx += s[netPeerIndex(slot, NP_TX_PACKETS)];
        skipped += s[netPeerIndex(slot, NP_TX_SKIPPED)];
      }
      dropped += s[netPeerIndex(slot, NP_RX_DROPPED)];
      slotPackets.push(s[netPeerIndex(slot, NP_RX_PACKETS)]);
      slotEngine.push(engineStats.peer(slot).received);
    }
    const { recordsRead, underruns } = engineStats.globals();
    return {
      t_ms: performance.now(),
      mode: viaHub ? 'hub' : 'pump',
      in_packets: s[N_IN_PACKETS],
      in_bundles: s[N_HUB_BUNDLES],
      hub_dropped: s[N_HUB_BAD_BUNDLES] + s[N_HUB_NO_TRAILER] + s[N_HUB_UNKNOWN_STREAM],
      slot_packets: slotPackets,
      slot_engine_received: slotEngine,
      out_packets: s[N_OUT_PACKETS],
      tx_packets: tx,
      tx_skipped: skipped,
      rx_dropped: dropped,
      wakeups: s[N_WAKEUPS],
      sent: seq * peers,
      received_by_peers: links.reduce((a, l) => a + l.received, 0),
      engine_records_read: recordsRead,
      engine_underruns: underruns,
      late_ticks: lateTicks,
      where: s[N_THREAD] === 1 ? 'worker' : s[N_THREAD] === 2 ? 'main' : 'none',
    };
  };
  api.state = 'ready';
  const through = viaHub ? 'through one hub link' : 'on a channel each';
  show(
    `${peers} players connected ${through}; the pump runs in the ${pump.where === 'worker' ? 'net worker' : 'main thread'}.`,
  );
  setInterval(() => {
    const c = api.counters();
    show(
      `${peers} players ${through}, pump in the ${c.where}: ${c.in_packets} packets in` +
        `${viaHub ? ` (${c.in_bundles} bundles)` : ''}, ${c.out_packets} out ` +
        `(${c.tx_packets} channel sends), ${c.received_by_peers} received by the remote ends, ` +
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
  const via = q.get('via') ?? 'mesh';
  if (via !== 'mesh' && via !== 'hub') return fail(`via=${via} is neither mesh nor hub`);
  api.peers = peers;
  runPump(peers, via === 'hub').catch(fail);
}

main();
