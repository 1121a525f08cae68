// What the packet pump's tests share: a stand-in for RTCDataChannel, and a pump on fresh rings
// with the ends a test drives (the real channels run in tests/browser/room).
import { MIN_CAPACITY, createRing } from '../../app/src/audio/ring';
import { RingReader, RingWriter } from '../../app/src/audio/ring-ends';
import { PacketPump, netStatsBytes, type EchoEvent } from '../../app/src/net/pump';

/** Stands in for an RTCDataChannel: records what is sent, lets the test deliver messages. */
export class FakeChannel {
  readyState: RTCDataChannelState = 'open';
  bufferedAmount = 0;
  binaryType = 'blob';
  sent: Uint8Array[] = [];
  closed = false;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onopen: (() => void) | null = null;
  onclose: (() => void) | null = null;
  send(buf: Uint8Array | ArrayBuffer): void {
    this.sent.push(buf instanceof ArrayBuffer ? new Uint8Array(buf.slice(0)) : buf.slice());
  }
  close(): void {
    this.closed = true;
  }
  deliver(data: unknown): void {
    this.onmessage?.({ data });
  }
}

/** A pump on the main thread over fresh rings: `in` reads what it gives the engine, `out`
 * writes what the engine would send, `stats` is its counters block. */
export function pumpWithRings(maxPeers: number, onEcho: (ev: EchoEvent) => void = () => {}) {
  const inbound = createRing(MIN_CAPACITY);
  const outbound = createRing(MIN_CAPACITY);
  const netStats = new SharedArrayBuffer(netStatsBytes(maxPeers));
  const pump = new PacketPump(inbound, outbound, netStats, maxPeers, 'main', onEcho);
  return {
    pump,
    in: new RingReader(inbound),
    out: new RingWriter(outbound),
    stats: new Float64Array(netStats),
  };
}
