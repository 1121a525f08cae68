// The net side's pure parts: the signaling protocol's parsers, and the packet pump's ring
// handling with a stand-in for RTCDataChannel (the real channels run in tests/browser/room).
import { describe, expect, it } from 'vitest';
import { MIN_CAPACITY, RingReader, RingWriter, createRing } from '../../app/src/audio/ring';
import { parsePeerSignal, parseServerMessage, randomId, PEER_ID } from '../../app/src/net/protocol';
import {
  N_IN_PACKETS,
  N_OUT_PACKETS,
  NP_RX_DROPPED,
  NP_RX_PACKETS,
  NP_TX_PACKETS,
  NP_TX_SKIPPED,
  PacketPump,
  SEND_QUEUE_LIMIT,
  netPeerIndex,
  netStatsBytes,
} from '../../app/src/net/pump';

describe('signaling protocol', () => {
  it('accepts the server messages it knows', () => {
    expect(parseServerMessage('{"type":"welcome","room":"r","peer":"p","peers":[{"peer":"q","name":"Q"}],"cap":16}')).toEqual({
      type: 'welcome', room: 'r', peer: 'p', peers: [{ peer: 'q', name: 'Q' }], cap: 16,
    });
    expect(parseServerMessage('{"type":"peer-left","peer":"q","reason":"timeout"}')).toEqual({ type: 'peer-left', peer: 'q', reason: 'timeout' });
    expect(parseServerMessage('{"type":"error","code":"room-full","message":"Full."}')).toEqual({ type: 'error', code: 'room-full', message: 'Full.' });
    expect(parseServerMessage('{"type":"pong","t":5}')).toEqual({ type: 'pong', t: 5 });
  });

  it('refuses malformed or unknown messages with null, never throwing', () => {
    for (const bad of ['', 'nope', '[]', 'null', '{"type":1}', '{"type":"welcome","peers":"x"}',
      '{"type":"welcome","room":"r","peer":"p","peers":[{"peer":1}],"cap":1}', '{"type":"peer-joined","peer":"p"}',
      '{"type":"signal"}', '{"type":"error"}', '{"type":"surprise"}']) {
      expect(parseServerMessage(bad)).toBeNull();
    }
  });

  it('checks peer signals field by field', () => {
    expect(parsePeerSignal({ kind: 'offer', sdp: 'v=0', epoch: 2 })).toEqual({ kind: 'offer', sdp: 'v=0', epoch: 2 });
    expect(parsePeerSignal({ kind: 'candidate', epoch: 1, candidate: { candidate: 'candidate:1 1 udp 1 127.0.0.1 5 typ host', sdpMid: '0', sdpMLineIndex: 0, extra: 'x' } }))
      .toEqual({ kind: 'candidate', epoch: 1, candidate: { candidate: 'candidate:1 1 udp 1 127.0.0.1 5 typ host', sdpMid: '0', sdpMLineIndex: 0 } });
    for (const bad of [null, 'x', {}, { kind: 'offer', sdp: 1, epoch: 1 }, { kind: 'offer', sdp: 'v', epoch: 1.5 },
      { kind: 'candidate', epoch: 1, candidate: { candidate: 5 } }, { kind: 'rollback', epoch: 1 }]) {
      expect(parsePeerSignal(bad)).toBeNull();
    }
  });

  it('makes peer ids of the form the server accepts', () => {
    const a = randomId();
    expect(a).toMatch(PEER_ID);
    expect(randomId()).not.toBe(a);
  });
});

/** Stands in for an RTCDataChannel: records what is sent, lets the test deliver messages. */
class FakeChannel {
  readyState: RTCDataChannelState = 'open';
  bufferedAmount = 0;
  binaryType = 'blob';
  sent: Uint8Array[] = [];
  closed = false;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onopen: (() => void) | null = null;
  onclose: (() => void) | null = null;
  send(buf: Uint8Array): void {
    this.sent.push(buf.slice());
  }
  close(): void {
    this.closed = true;
  }
  deliver(data: unknown): void {
    this.onmessage?.({ data });
  }
}

function setup(maxPeers = 4) {
  const inbound = createRing(MIN_CAPACITY);
  const outbound = createRing(MIN_CAPACITY);
  const netStats = new SharedArrayBuffer(netStatsBytes(maxPeers));
  const pump = new PacketPump(inbound, outbound, netStats, maxPeers, 'main');
  return { pump, in: new RingReader(inbound), out: new RingWriter(outbound), stats: new Float64Array(netStats) };
}

function bytes(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

describe('packet pump', () => {
  it('writes each received packet into the inbound ring, tagged with its slot', () => {
    const t = setup();
    const a = new FakeChannel();
    const b = new FakeChannel();
    t.pump.add(1, a as unknown as RTCDataChannel);
    t.pump.add(3, b as unknown as RTCDataChannel);
    expect(a.binaryType).toBe('arraybuffer');
    const pa = bytes(1040, 1);
    const pb = bytes(1041, 2);
    a.deliver(pa.slice().buffer);
    b.deliver(pb.slice().buffer);
    const got: [number, number[]][] = [];
    while (t.in.pop((buf, off, len, tag) => got.push([tag, [...buf.subarray(off, off + len)]]))) { /* drain */ }
    expect(got).toEqual([[1, [...pa]], [3, [...pb]]]);
    expect(t.stats[netPeerIndex(1, NP_RX_PACKETS)]).toBe(1);
    expect(t.stats[N_IN_PACKETS]).toBe(2);
  });

  it('counts and drops messages that are not binary', () => {
    const t = setup();
    const a = new FakeChannel();
    t.pump.add(0, a as unknown as RTCDataChannel);
    a.deliver('hello');
    a.deliver(new Blob(['x']));
    expect(t.in.peek()).toBe(false);
    expect(t.stats[netPeerIndex(0, NP_RX_DROPPED)]).toBe(2);
  });

  it('sends every outbound packet, byte for byte, to every open channel', () => {
    const t = setup();
    const chans = [new FakeChannel(), new FakeChannel(), new FakeChannel()];
    chans[2].readyState = 'connecting';
    chans.forEach((c, i) => t.pump.add(i, c as unknown as RTCDataChannel));
    const packets = [bytes(1040, 7), bytes(523, 9), bytes(1040, 11)];
    for (const p of packets) expect(t.out.push(0xffff, 0, p)).toBe(true);
    expect(t.pump.drainOutbound()).toBe(3);
    expect(chans[0].sent.map((s) => [...s])).toEqual(packets.map((p) => [...p]));
    expect(chans[1].sent.map((s) => [...s])).toEqual(packets.map((p) => [...p]));
    expect(chans[2].sent).toEqual([]);
    expect(t.stats[N_OUT_PACKETS]).toBe(3);
    // The channel opens: from then on it gets packets too.
    chans[2].readyState = 'open';
    chans[2].onopen?.();
    t.out.push(0xffff, 0, packets[0]);
    t.pump.drainOutbound();
    expect(chans[2].sent.length).toBe(1);
  });

  it('skips packets for a channel whose send queue is over the limit, and counts them', () => {
    const t = setup();
    const slow = new FakeChannel();
    slow.bufferedAmount = SEND_QUEUE_LIMIT + 1;
    t.pump.add(2, slow as unknown as RTCDataChannel);
    t.out.push(0xffff, 0, bytes(100, 1));
    t.pump.drainOutbound();
    expect(slow.sent).toEqual([]);
    expect(t.stats[netPeerIndex(2, NP_TX_SKIPPED)]).toBe(1);
    expect(t.stats[netPeerIndex(2, NP_TX_PACKETS)]).toBe(0);
  });

  it('removes a slot: closes its channel and no longer reads from it', () => {
    const t = setup();
    const a = new FakeChannel();
    t.pump.add(0, a as unknown as RTCDataChannel);
    t.pump.remove(0);
    expect(a.closed).toBe(true);
    expect(a.onmessage).toBeNull();
    t.out.push(0xffff, 0, bytes(64, 3));
    t.pump.drainOutbound();
    expect(a.sent).toEqual([]);
    expect(() => t.pump.add(4, a as unknown as RTCDataChannel)).toThrow(RangeError);
  });
});
