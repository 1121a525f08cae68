// Where the packet pump runs, decided once per session: in the net worker if this browser can
// transfer an RTCDataChannel to a worker (Chromium and Safari can), else on the main thread.

import { canTransferDataChannels } from '../audio/support';
import { LoopbackChannel } from './loopback';
import { PacketPump, netStatsBytes, resetNetPeer, type EchoEvent } from './pump';
import type { NetWorkerMessage } from './net-worker';
import NetWorker from './net-worker.ts?worker';

export interface PumpHost {
  readonly where: 'worker' | 'main';
  /** The pump's counters (layout in pump.ts). */
  readonly stats: Float64Array;
  /**
   * Hands freshly created channels (no event handled yet) to the pump for `slot`: the audio
   * channel and, if any, the control channel (clock pings).
   */
  add(slot: number, channel: RTCDataChannel, control?: RTCDataChannel): void;
  remove(slot: number): void;
  /** Serves `channel`, freshly created, as the one link to the hub (null: none). */
  setHub(channel: RTCDataChannel | null): void;
  /** Plays the hub's packets of `stream` in engine slot `slot` (-1: in none). */
  mapStream(stream: number, slot: number): void;
  /**
   * Serves `slot` with a loopback link to ourselves (our packets come straight back), made where
   * the pump runs. With `control`, a loopback control channel too: our clock pings come back as
   * pings, the pump answers them, and the pongs make exchanges with ourselves (offset 0).
   */
  addLoopback(slot: number, control?: boolean): void;
  /** Asks the peer in `slot` to echo our stream for `ms` ms (0: stop), over its control channel;
   * its answer comes to `onEcho` as an 'echo-reply'. */
  requestEcho(slot: number, ms: number): void;
  /** Our user's answer to the echo request of the peer in `slot` (an 'echo-request' event). */
  answerEcho(slot: number, allow: boolean): void;
  /** Our user stops the echo of the peer in `slot`, if one runs. */
  stopEcho(slot: number): void;
  /** Allow echo requests without asking, for this session. */
  setEchoAutoAllow(on: boolean): void;
  /** Tests only: the send queue of `slot`'s current channel reads as stuck (PacketPump.holdSend). */
  holdSend(slot: number): void;
  stop(): void;
}

export function createPumpHost(
  inbound: SharedArrayBuffer,
  outbound: SharedArrayBuffer,
  maxPeers: number,
  prefer: 'worker' | 'main' = 'worker',
  /** Round-trip requests to show the user, and the answers to ours (pump.ts). */
  onEcho: (ev: EchoEvent) => void = () => {},
): PumpHost {
  const netStats = new SharedArrayBuffer(netStatsBytes(maxPeers));
  const stats = new Float64Array(netStats);
  // Every slot as for a peer with nothing yet, before anyone reads: a slot that never had a link
  // (the hub's mix) would read 0 for its stamp lag until its first packet otherwise.
  for (let slot = 0; slot < maxPeers; slot++) resetNetPeer(stats, slot);
  if (prefer === 'worker' && canTransferDataChannels()) {
    const worker = new NetWorker({ name: 'tutti-net' });
    const post = (msg: NetWorkerMessage, transfer: Transferable[] = []) => worker.postMessage(msg, transfer);
    worker.onmessage = (ev: MessageEvent<{ type: string; message?: string } | EchoEvent>) => {
      const data = ev.data;
      if (data?.type === 'error') console.error(`net worker: ${(data as { message?: string }).message}`);
      else if (
        data?.type === 'echo-request' ||
        data?.type === 'echo-withdrawn' ||
        data?.type === 'echo-reply'
      ) {
        onEcho(data as EchoEvent);
      }
    };
    post({ type: 'init', inbound, outbound, netStats, maxPeers });
    return {
      where: 'worker',
      stats,
      add: (slot, channel, control) =>
        post(
          { type: 'add', slot, channel, control: control ?? null },
          control
            ? [channel as unknown as Transferable, control as unknown as Transferable]
            : [channel as unknown as Transferable],
        ),
      remove: (slot) => post({ type: 'remove', slot }),
      setHub: (channel) =>
        post({ type: 'hub', channel }, channel ? [channel as unknown as Transferable] : []),
      mapStream: (stream, slot) => post({ type: 'stream', stream, slot }),
      requestEcho: (slot, ms) => post({ type: 'echo', slot, ms }),
      answerEcho: (slot, allow) => post({ type: 'echo-answer', slot, allow }),
      stopEcho: (slot) => post({ type: 'echo-stop', slot }),
      setEchoAutoAllow: (on) => post({ type: 'echo-auto', on }),
      addLoopback: (slot, control = false) => post({ type: 'add-loopback', slot, control }),
      holdSend: (slot) => post({ type: 'hold-send', slot }),
      stop: () => {
        post({ type: 'stop' });
        setTimeout(() => worker.terminate(), 100);
      },
    };
  }
  const pump = new PacketPump(inbound, outbound, netStats, maxPeers, 'main', onEcho);
  pump.start();
  return {
    where: 'main',
    stats,
    add: (slot, channel, control) => pump.add(slot, channel, control ?? null),
    remove: (slot) => pump.remove(slot),
    setHub: (channel) => pump.setHub(channel),
    mapStream: (stream, slot) => pump.mapStream(stream, slot),
    requestEcho: (slot, ms) => void pump.requestEcho(slot, ms),
    answerEcho: (slot, allow) => pump.answerEcho(slot, allow),
    stopEcho: (slot) => pump.stopEcho(slot),
    setEchoAutoAllow: (on) => pump.setEchoAutoAllow(on),
    addLoopback: (slot, control = false) =>
      pump.add(
        slot,
        new LoopbackChannel().asDataChannel(),
        control ? new LoopbackChannel().asDataChannel() : null,
      ),
    holdSend: (slot) => void pump.holdSend(slot),
    stop: () => pump.stop(),
  };
}
