// The net worker: hosts the packet pump (pump.ts) off the main thread, so that the page's
// rendering and the UI never sit between a peer's packets and the engine. Data channels arrive
// here transferred from the main thread, right after they are created.
//
// in:  { type: 'init', inbound, outbound, netStats, maxPeers }
//      { type: 'add', slot, channel, control }   (both channels transferred; control may be null)
//      { type: 'remove', slot }
//      { type: 'echo', slot, ms }             (ask the peer to echo our stream)
//      { type: 'echo-answer', slot, allow }   (our user's answer to the peer's echo request)
//      { type: 'echo-stop', slot }            (our user stops the echo of the peer)
//      { type: 'echo-auto', on }              (allow echo requests without asking)
//      { type: 'add-loopback', slot, control } (a link to ourselves, made here; with a control
//                                               channel to ourselves too when `control`)
//      { type: 'hold-send', slot }            (tests: the slot's send queue stops draining)
//      { type: 'hub', channel }               (the hub link's channel, transferred; null: none)
//      { type: 'stream', stream, slot }       (play the hub's stream in a slot; -1: none)
//      { type: 'stop' }
// out: { type: 'error', message } when a message could not be applied;
//      the pump's EchoEvents (pump.ts): requests to show our user, answers to ours.

import { LoopbackChannel } from './loopback';
import { PacketPump, type EchoEvent } from './pump';

export type NetWorkerMessage =
  | {
      type: 'init';
      inbound: SharedArrayBuffer;
      outbound: SharedArrayBuffer;
      netStats: SharedArrayBuffer;
      maxPeers: number;
    }
  | { type: 'add'; slot: number; channel: RTCDataChannel; control: RTCDataChannel | null }
  | { type: 'remove'; slot: number }
  | { type: 'echo'; slot: number; ms: number }
  | { type: 'echo-answer'; slot: number; allow: boolean }
  | { type: 'echo-stop'; slot: number }
  | { type: 'echo-auto'; on: boolean }
  | { type: 'add-loopback'; slot: number; control: boolean }
  | { type: 'hold-send'; slot: number }
  | { type: 'hub'; channel: RTCDataChannel | null }
  | { type: 'stream'; stream: number; slot: number }
  | { type: 'stop' };

const scope = self as unknown as {
  onmessage: ((ev: MessageEvent<NetWorkerMessage>) => void) | null;
  postMessage(message: unknown): void;
};

let pump: PacketPump | null = null;

scope.onmessage = (ev: MessageEvent<NetWorkerMessage>) => {
  const msg = ev.data;
  try {
    switch (msg.type) {
      case 'init':
        pump?.stop();
        pump = new PacketPump(
          msg.inbound,
          msg.outbound,
          msg.netStats,
          msg.maxPeers,
          'worker',
          (ev: EchoEvent) => scope.postMessage(ev),
        );
        pump.start();
        break;
      case 'add':
        if (!pump) throw new Error('add before init');
        pump.add(msg.slot, msg.channel, msg.control);
        break;
      case 'remove':
        pump?.remove(msg.slot);
        break;
      case 'echo':
        pump?.requestEcho(msg.slot, msg.ms);
        break;
      case 'echo-answer':
        pump?.answerEcho(msg.slot, msg.allow === true);
        break;
      case 'echo-stop':
        pump?.stopEcho(msg.slot);
        break;
      case 'echo-auto':
        pump?.setEchoAutoAllow(msg.on === true);
        break;
      case 'add-loopback':
        if (!pump) throw new Error('add-loopback before init');
        pump.add(
          msg.slot,
          new LoopbackChannel().asDataChannel(),
          msg.control === true ? new LoopbackChannel().asDataChannel() : null,
        );
        break;
      case 'hold-send':
        pump?.holdSend(msg.slot);
        break;
      case 'hub':
        if (!pump) throw new Error('hub before init');
        pump.setHub(msg.channel);
        break;
      case 'stream':
        pump?.mapStream(msg.stream, msg.slot);
        break;
      case 'stop':
        pump?.stop();
        pump = null;
        break;
    }
  } catch (err) {
    scope.postMessage({ type: 'error', message: err instanceof Error ? err.message : String(err) });
  }
};
