// The net side's pure parts: the signaling protocol's parsers, and the packet pump's ring
// handling with a stand-in for RTCDataChannel (the real channels run in tests/browser/room).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LoopbackChannel } from '../../app/src/net/loopback';
import { parsePeerSignal, parseServerMessage, randomId, PEER_ID } from '../../app/src/net/protocol';
import {
  N_IN_PACKETS,
  N_OUT_PACKETS,
  NP_RX_DROPPED,
  NP_RX_PACKETS,
  NP_TX_PACKETS,
  NP_TX_SKIPPED,
  NP_BUFFERED,
  NP_EXCHANGES,
  NP_OFFSET_US,
  NP_PINGS,
  NP_RTT_MS,
  NP_SEND_QUEUE_MS,
  NP_CTL_BAD,
  SEND_QUEUE_LIMIT,
  HELD_SEND_BYTES,
  netPeerIndex,
  N_OUT_UNROUTED,
  NP_ECHO_DROPPED,
  OUT_ALL_BUT,
  OUT_EXCEPT,
  OUT_LAYER,
  OUT_ROUTE,
  NP_SEND_LAYER,
  TAG_ECHO,
  TAG_SEND_QUEUE,
  type EchoEvent,
} from '../../app/src/net/pump';
import {
  CTL_ECHO,
  CTL_ECHO_REPLY,
  ECHO_ALLOWED,
  ECHO_DECLINED,
  ECHO_LEN,
  ECHO_STOPPED,
  ECHO_UNANSWERED,
  MAX_ECHO_MS,
  newControlMessage,
  parseControl,
  writeEcho,
  writeEchoReply,
} from '../../app/src/net/clock';
import { ANSWER_TIMEOUT_MS } from '../../app/src/net/echo-consent';
import { FakeChannel, pumpWithRings } from './fake-channel';

describe('signaling protocol', () => {
  it('accepts the server messages it knows', () => {
    expect(
      parseServerMessage(
        '{"type":"welcome","room":"r","peer":"p","peers":[{"peer":"q","name":"Q"}],"cap":16}',
      ),
    ).toEqual({
      type: 'welcome',
      room: 'r',
      peer: 'p',
      peers: [{ peer: 'q', name: 'Q' }],
      cap: 16,
      owner: null,
      isOwner: false,
      locked: false,
      protected: false,
      topology: 'mesh',
    });
    expect(parseServerMessage('{"type":"peer-left","peer":"q","reason":"timeout"}')).toEqual({
      type: 'peer-left',
      peer: 'q',
      reason: 'timeout',
    });
    expect(parseServerMessage('{"type":"error","code":"room-full","message":"Full."}')).toEqual({
      type: 'error',
      code: 'room-full',
      message: 'Full.',
    });
    expect(parseServerMessage('{"type":"pong","t":5}')).toEqual({ type: 'pong', t: 5 });
  });

  it('refuses malformed or unknown messages with null, never throwing', () => {
    for (const bad of [
      '',
      'nope',
      '[]',
      'null',
      '{"type":1}',
      '{"type":"welcome","peers":"x"}',
      '{"type":"welcome","room":"r","peer":"p","peers":[{"peer":1}],"cap":1}',
      '{"type":"peer-joined","peer":"p"}',
      '{"type":"signal"}',
      '{"type":"error"}',
      '{"type":"surprise"}',
    ]) {
      expect(parseServerMessage(bad)).toBeNull();
    }
  });

  it('checks peer signals field by field', () => {
    expect(parsePeerSignal({ kind: 'offer', sdp: 'v=0', epoch: 2 })).toEqual({
      kind: 'offer',
      sdp: 'v=0',
      epoch: 2,
    });
    expect(
      parsePeerSignal({
        kind: 'candidate',
        epoch: 1,
        candidate: {
          candidate: 'candidate:1 1 udp 1 127.0.0.1 5 typ host',
          sdpMid: '0',
          sdpMLineIndex: 0,
          extra: 'x',
        },
      }),
    ).toEqual({
      kind: 'candidate',
      epoch: 1,
      candidate: { candidate: 'candidate:1 1 udp 1 127.0.0.1 5 typ host', sdpMid: '0', sdpMLineIndex: 0 },
    });
    expect(parsePeerSignal({ kind: 'restart', epoch: 3, reason: 'send-stall', extra: 1 })).toEqual({
      kind: 'restart',
      epoch: 3,
      reason: 'send-stall',
    });
    for (const bad of [
      null,
      'x',
      {},
      { kind: 'offer', sdp: 1, epoch: 1 },
      { kind: 'offer', sdp: 'v', epoch: 1.5 },
      { kind: 'candidate', epoch: 1, candidate: { candidate: 5 } },
      { kind: 'rollback', epoch: 1 },
      { kind: 'restart', epoch: 1 },
      { kind: 'restart', epoch: 1, reason: 'whim' },
      { kind: 'restart', epoch: '1', reason: 'send-stall' },
    ]) {
      expect(parsePeerSignal(bad)).toBeNull();
    }
  });

  it('makes peer ids of the form the server accepts', () => {
    const a = randomId();
    expect(a).toMatch(PEER_ID);
    expect(randomId()).not.toBe(a);
  });
});

function setup(maxPeers = 4) {
  const events: EchoEvent[] = [];
  return { ...pumpWithRings(maxPeers, (ev) => events.push(ev)), events };
}

/** The control messages `ch` was sent, parsed. */
function controls(ch: FakeChannel): { type: number; ms: number; answer: number }[] {
  return ch.sent.map((b) => {
    const m = newControlMessage();
    parseControl(new DataView(b.buffer, b.byteOffset, b.byteLength), m);
    return { type: m.type, ms: m.ms, answer: m.answer };
  });
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
    while (t.in.pop((buf, off, len, tag) => got.push([tag, [...buf.subarray(off, off + len)]]))) {
      /* drain */
    }
    expect(got).toEqual([
      [1, [...pa]],
      [3, [...pb]],
    ]);
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
    // Byte for byte past the header's timestamp (bytes 0..8, the pump's send time).
    expect(chans[0].sent.map((s) => [...s.subarray(8)])).toEqual(packets.map((p) => [...p.subarray(8)]));
    expect(chans[1].sent.map((s) => [...s.subarray(8)])).toEqual(packets.map((p) => [...p.subarray(8)]));
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

  it('holds a slot as stuck for tests until a new channel takes the slot', () => {
    const t = setup();
    const ch = new FakeChannel();
    t.pump.add(1, ch as unknown as RTCDataChannel);
    expect(t.pump.holdSend(1)).toBe(true);
    expect(t.pump.holdSend(3)).toBe(false);
    t.out.push(0xffff, 0, bytes(100, 1));
    t.pump.drainOutbound();
    expect(ch.sent).toEqual([]);
    expect(t.stats[netPeerIndex(1, NP_BUFFERED)]).toBe(HELD_SEND_BYTES);
    expect(t.stats[netPeerIndex(1, NP_TX_SKIPPED)]).toBe(1);
    const fresh = new FakeChannel();
    t.pump.add(1, fresh as unknown as RTCDataChannel);
    t.out.push(0xffff, 0, bytes(100, 2));
    t.pump.drainOutbound();
    expect(fresh.sent.length).toBe(1);
    expect(t.stats[netPeerIndex(1, NP_TX_SKIPPED)]).toBe(0);
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

/** A PCM16 stereo 128-frame packet at 48 kHz: header with its format, audio bytes of `fill`. */
function audioPacket(fill: number): Uint8Array {
  const b = new Uint8Array(16 + 128 * 2 * 2).fill(fill);
  for (let i = 0; i < 8; i++) b[i] = 0xee; // the engine's own timestamp: must be overwritten
  b[8] = 1;
  b[9] = 0; // seq
  b[10] = 128;
  b[11] = 0; // frames
  b[12] = 3; // 48 kHz
  b[13] = 16;
  b[14] = 2;
  b[15] = 2;
  return b;
}

function u64(b: Uint8Array): number {
  const dv = new DataView(b.buffer, b.byteOffset, 8);
  return dv.getUint32(4, true) * 2 ** 32 + dv.getUint32(0, true);
}

describe('packet pump times and clock', () => {
  afterEach(() => vi.restoreAllMocks());

  /** Makes performance.now() return `ms` (the time origin stays the real one). */
  function fakeNow(ms: number): void {
    vi.spyOn(performance, 'now').mockReturnValue(ms);
  }

  it('writes the arrival time as the wall clock, µs since 1970, low 32 bits', () => {
    fakeNow(1234.5678);
    const t = setup();
    const a = new FakeChannel();
    t.pump.add(0, a as unknown as RTCDataChannel);
    a.deliver(audioPacket(1).buffer);
    const wall = Math.round((performance.timeOrigin + 1234.5678) * 1000);
    let time = -1;
    t.in.pop((_b, _o, _l, _tag, tm) => {
      time = tm;
    });
    expect(wall).toBeGreaterThan(2 ** 50); // really absolute: not relative to the time origin
    expect(time).toBe(wall % 2 ** 32);
  });

  it('stamps the outgoing copy with the send time, leaving the rest and exit signals alone', () => {
    fakeNow(500.25);
    const t = setup();
    const a = new FakeChannel();
    t.pump.add(0, a as unknown as RTCDataChannel);
    const p = audioPacket(7);
    t.out.push(0xffff, 0, p);
    const exit = new Uint8Array(63).fill(0xff);
    t.out.push(0xffff, 0, exit);
    t.pump.drainOutbound();
    const sent = a.sent[0];
    expect(u64(sent)).toBe(Math.round((performance.timeOrigin + 500.25) * 1000));
    expect([...sent.subarray(8)]).toEqual([...p.subarray(8)]);
    expect([...a.sent[1]]).toEqual([...exit]);
  });

  it('turns the send queue into time with the stream rate from the packet', () => {
    const t = setup();
    const a = new FakeChannel();
    t.pump.add(0, a as unknown as RTCDataChannel);
    // 528-byte packets, 375 a second (48000 / 128): 198000 B/s; 19800 bytes queued = 100 ms.
    a.bufferedAmount = 19800;
    t.out.push(0xffff, 0, audioPacket(3));
    t.pump.drainOutbound();
    expect(t.stats[netPeerIndex(0, NP_SEND_QUEUE_MS)]).toBeCloseTo(100, 9);
    // The engine's send-queue stage gets the same figure, µs, as a tagged record without payload.
    expect(t.in.peek()).toBe(true);
    expect([t.in.tag, t.in.time, t.in.length]).toEqual([TAG_SEND_QUEUE | 0, 100_000, 0]);
    t.in.consume();
  });

  it('counts as backlog only what the channel held before the pass, not the packets of the same pass', () => {
    const t = setup();
    const a = new FakeChannel();
    // Like a real channel within one task: every send adds to bufferedAmount.
    a.send = function (buf: Uint8Array | ArrayBuffer) {
      this.bufferedAmount += buf.byteLength;
    };
    t.pump.add(2, a as unknown as RTCDataChannel);
    for (let i = 0; i < 4; i++) t.out.push(0xffff, 0, audioPacket(i));
    t.pump.drainOutbound();
    const backlog: number[] = [];
    while (t.in.peek()) {
      expect(t.in.tag).toBe(TAG_SEND_QUEUE | 2);
      backlog.push(t.in.time);
      t.in.consume();
    }
    expect(backlog).toEqual([0, 0, 0, 0]);
    // The next pass finds 2 packets still queued (1056 bytes at 198000 B/s = 5.333 ms).
    a.bufferedAmount = 1056;
    t.out.push(0xffff, 0, audioPacket(4));
    t.pump.drainOutbound();
    expect(t.in.peek()).toBe(true);
    expect(t.in.time).toBe(5333);
    expect(t.stats[netPeerIndex(2, NP_SEND_QUEUE_MS)]).toBeCloseTo(5.333, 3);
  });

  it('passes an echo request to its host and tells the engine only once the user allows it', () => {
    const t = setup();
    const audio = new FakeChannel();
    const ctl = new FakeChannel();
    t.pump.add(1, audio as unknown as RTCDataChannel, ctl as unknown as RTCDataChannel);
    const req = new DataView(new ArrayBuffer(ECHO_LEN));
    writeEcho(req, 8000);
    ctl.deliver(req.buffer.slice(0));
    // Asked, not applied: nothing for the engine yet, the host shows the prompt.
    expect(t.in.peek()).toBe(false);
    expect(t.events).toEqual([{ type: 'echo-request', slot: 1, ms: 8000 }]);
    // Asking again while the prompt is up is dropped and counted.
    ctl.deliver(req.buffer.slice(0));
    ctl.deliver(req.buffer.slice(0));
    expect(t.events).toHaveLength(1);
    expect(t.stats[netPeerIndex(1, NP_ECHO_DROPPED)]).toBe(2);
    // The user allows it: the engine's record, and the asker is told.
    t.pump.answerEcho(1, true);
    expect(t.in.peek()).toBe(true);
    expect([t.in.tag, t.in.time, t.in.length]).toEqual([TAG_ECHO | 1, 8000, 0]);
    t.in.consume();
    expect(controls(ctl).at(-1)).toMatchObject({ type: CTL_ECHO_REPLY, answer: ECHO_ALLOWED });
    // The user stops it: the engine stops, the asker is told.
    t.pump.stopEcho(1);
    expect([t.in.peek(), t.in.tag, t.in.time]).toEqual([true, TAG_ECHO | 1, 0]);
    t.in.consume();
    expect(controls(ctl).at(-1)).toMatchObject({ type: CTL_ECHO_REPLY, answer: ECHO_STOPPED });
    // Asking again right after a stop: dropped (cooldown).
    ctl.deliver(req.buffer.slice(0));
    expect(t.events).toHaveLength(1);
    expect(t.in.peek()).toBe(false);
    // A malformed one is counted and dropped.
    writeEcho(req, 0.5);
    ctl.deliver(req.buffer.slice(0));
    expect(t.in.peek()).toBe(false);
    expect(t.stats[netPeerIndex(1, NP_CTL_BAD)]).toBe(1);
    // Ours goes out on the control channel; a slot without a link cannot ask.
    expect(t.pump.requestEcho(1, 20_000)).toBe(true);
    expect(controls(ctl).at(-1)).toMatchObject({ type: CTL_ECHO, ms: MAX_ECHO_MS });
    expect(t.pump.requestEcho(3, 100)).toBe(false);
    // The answer to ours goes to the host.
    const reply = new DataView(new ArrayBuffer(16));
    writeEchoReply(reply, ECHO_DECLINED);
    ctl.deliver(reply.buffer);
    expect(t.events.at(-1)).toEqual({ type: 'echo-reply', slot: 1, answer: ECHO_DECLINED });
  });

  it('declines for the user, withdraws prompts, and allows unasked only when told to', () => {
    const t = setup();
    const links = [0, 2].map((slot) => {
      const audio = new FakeChannel();
      const ctl = new FakeChannel();
      t.pump.add(slot, audio as unknown as RTCDataChannel, ctl as unknown as RTCDataChannel);
      return ctl;
    });
    const ask = (ctl: FakeChannel, ms: number) => {
      const req = new DataView(new ArrayBuffer(ECHO_LEN));
      writeEcho(req, ms);
      ctl.deliver(req.buffer);
    };
    ask(links[0], 5000);
    t.pump.answerEcho(0, false);
    expect(controls(links[0]).at(-1)).toMatchObject({ type: CTL_ECHO_REPLY, answer: ECHO_DECLINED });
    expect(t.in.peek()).toBe(false);
    // The asker takes its request back: the prompt goes.
    ask(links[1], 5000);
    ask(links[1], 0);
    expect(t.events.slice(-2)).toEqual([
      { type: 'echo-request', slot: 2, ms: 5000 },
      { type: 'echo-withdrawn', slot: 2 },
    ]);
    t.pump.answerEcho(2, true);
    expect(t.in.peek()).toBe(false);
    // "Allow without asking": the next one is applied at once (after the cooldowns).
    t.pump.setEchoAutoAllow(true);
    vi.spyOn(performance, 'now').mockReturnValue(performance.now() + 60_000);
    ask(links[1], 4000);
    expect([t.in.peek(), t.in.tag, t.in.time]).toEqual([true, TAG_ECHO | 2, 4000]);
    t.in.consume();
    expect(controls(links[1]).at(-1)).toMatchObject({ type: CTL_ECHO_REPLY, answer: ECHO_ALLOWED });
    // The asker's own stop ends it in the engine.
    ask(links[1], 0);
    expect([t.in.peek(), t.in.tag, t.in.time]).toEqual([true, TAG_ECHO | 2, 0]);
    vi.restoreAllMocks();
  });

  it('counts an unanswered prompt as declined after the timeout, and a leaving peer takes its prompt along', () => {
    let now = 1000;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    const t = setup();
    const ctl = new FakeChannel();
    t.pump.add(3, new FakeChannel() as unknown as RTCDataChannel, ctl as unknown as RTCDataChannel);
    const req = new DataView(new ArrayBuffer(ECHO_LEN));
    writeEcho(req, 8000);
    ctl.deliver(req.buffer.slice(0));
    now += ANSWER_TIMEOUT_MS - 1;
    t.pump.tickClock(now);
    expect(t.events).toHaveLength(1);
    now += 1;
    t.pump.tickClock(now);
    expect(t.events.at(-1)).toEqual({ type: 'echo-withdrawn', slot: 3 });
    expect(controls(ctl).filter((c) => c.type === CTL_ECHO_REPLY)).toMatchObject([
      { answer: ECHO_UNANSWERED },
    ]);
    // A late answer changes nothing.
    t.pump.answerEcho(3, true);
    expect(t.in.peek()).toBe(false);
    now += 60_000;
    ctl.deliver(req.buffer.slice(0));
    expect(t.events.at(-1)).toEqual({ type: 'echo-request', slot: 3, ms: 8000 });
    t.pump.remove(3);
    expect(t.events.at(-1)).toEqual({ type: 'echo-withdrawn', slot: 3 });
    vi.restoreAllMocks();
  });

  it('sends each outbound packet to the peers its tag names', () => {
    const t = setup();
    const chans = [new FakeChannel(), new FakeChannel(), new FakeChannel()];
    chans.forEach((c, i) => t.pump.add(i, c as unknown as RTCDataChannel));
    // One block while echoing slot 1: our input to all but 1, slot 1's own stream to it alone.
    t.out.push(OUT_ALL_BUT | 1, 0, audioPacket(1));
    t.out.push(1, 0, audioPacket(2));
    t.out.push(0xffff, 0, audioPacket(3));
    // A tag that names nobody: counted and dropped.
    t.out.push(0x4001, 0, audioPacket(4));
    expect(t.pump.drainOutbound()).toBe(3);
    // Each packet's payload is its fill byte.
    const got = (c: FakeChannel) => c.sent.map((p) => p[20]);
    expect(got(chans[0])).toEqual([1, 3]);
    expect(got(chans[1])).toEqual([2, 3]);
    expect(got(chans[2])).toEqual([1, 3]);
    expect(t.stats[N_OUT_UNROUTED]).toBe(1);
  });

  it('sends each layer of our stream to the peers the route records say take it', () => {
    const t = setup();
    const chans = [new FakeChannel(), new FakeChannel(), new FakeChannel()];
    chans.forEach((c, i) => t.pump.add(i, c as unknown as RTCDataChannel));
    const route = (slot: number, layer: number) => t.out.push(OUT_ROUTE | slot, 0, new Uint8Array([layer]));
    // Before any route record every peer takes the packets as sent.
    t.out.push(OUT_LAYER, 0, audioPacket(1));
    t.out.push(OUT_LAYER | (1 << 8), 0, audioPacket(2));
    // Slots 0 and 2 take Opus 128, slot 1 stays as sent.
    route(0, 1);
    route(2, 1);
    t.out.push(OUT_LAYER, 0, audioPacket(3));
    t.out.push(OUT_LAYER | (1 << 8), 0, audioPacket(4));
    // While echoing slot 2: its layer's packets go to the others taking it.
    t.out.push(OUT_LAYER | (1 << 8) | OUT_EXCEPT | 2, 0, audioPacket(5));
    // Slot 0 takes Opus 64.
    route(0, 2);
    t.out.push(OUT_LAYER | (2 << 8), 0, audioPacket(6));
    // A route record naming no layer, and a layer tag with a slot but no OUT_EXCEPT: dropped.
    route(1, 3);
    t.out.push(OUT_LAYER | 1, 0, audioPacket(7));
    expect(t.pump.drainOutbound()).toBe(6);
    const got = (c: FakeChannel) => c.sent.map((p) => p[20]);
    expect(got(chans[0])).toEqual([1, 4, 5, 6]);
    expect(got(chans[1])).toEqual([1, 3]);
    expect(got(chans[2])).toEqual([1, 4]);
    expect(t.stats[N_OUT_UNROUTED]).toBe(2);
    expect([0, 1, 2].map((slot) => t.stats[netPeerIndex(slot, NP_SEND_LAYER)])).toEqual([2, 0, 1]);
    // A new link in a slot keeps what the engine said of the slot.
    t.pump.add(0, new FakeChannel() as unknown as RTCDataChannel);
    expect(t.stats[netPeerIndex(0, NP_SEND_LAYER)]).toBe(2);
  });

  it('pings, answers pings and publishes RTT and offset from the pongs', () => {
    const t = setup();
    const audio = new FakeChannel();
    const ctl = new FakeChannel();
    t.pump.add(1, audio as unknown as RTCDataChannel, ctl as unknown as RTCDataChannel);
    expect(t.stats[netPeerIndex(1, NP_OFFSET_US)]).toBeNaN();
    fakeNow(1000);
    t.pump.tickClock(1000);
    expect(ctl.sent.length).toBe(1);
    const ping = new DataView(ctl.sent[0].buffer);
    expect(ping.getUint8(0)).toBe(1);
    const t1 = ping.getFloat64(8, true);
    expect(t1).toBe((performance.timeOrigin + 1000) * 1000);
    // Not due again until the burst's spacing has passed.
    t.pump.tickClock(1050);
    expect(ctl.sent.length).toBe(1);
    // The peer, 3.2 ms behind us, answers: 400 µs each way, 30 µs to turn around.
    const t2 = t1 + 400 - 3200;
    const pong = new DataView(new ArrayBuffer(32));
    pong.setUint8(0, 2);
    pong.setFloat64(8, t1, true);
    pong.setFloat64(16, t2, true);
    pong.setFloat64(24, t2 + 30, true);
    fakeNow(1000 + 0.83); // t4 = t1 + 830 µs on our clock
    ctl.deliver(pong.buffer);
    expect(t.stats[netPeerIndex(1, NP_EXCHANGES)]).toBe(1);
    expect(t.stats[netPeerIndex(1, NP_RTT_MS)]).toBeCloseTo(0.8, 3);
    expect(Math.abs(t.stats[netPeerIndex(1, NP_OFFSET_US)] - 3200)).toBeLessThan(1);
    // A ping from the peer is answered with t1 echoed and our receive and send times.
    const theirs = new DataView(new ArrayBuffer(16));
    theirs.setUint8(0, 1);
    theirs.setFloat64(8, 42e12, true);
    fakeNow(2000);
    ctl.deliver(theirs.buffer);
    const answer = new DataView(ctl.sent[1].buffer);
    expect(answer.getUint8(0)).toBe(2);
    expect(answer.getFloat64(8, true)).toBe(42e12);
    expect(answer.getFloat64(16, true)).toBe((performance.timeOrigin + 2000) * 1000);
    // Malformed control messages are counted and dropped.
    ctl.deliver('ping');
    ctl.deliver(new ArrayBuffer(5));
    expect(t.stats[netPeerIndex(1, NP_CTL_BAD)]).toBe(2);
    expect(t.stats[netPeerIndex(1, NP_PINGS)]).toBe(1);
  });

  it('on a loopback link, carries packets back and measures an offset of 0', () => {
    const t = setup();
    const audio = new LoopbackChannel();
    const ctl = new LoopbackChannel();
    t.pump.add(2, audio.asDataChannel(), ctl.asDataChannel());
    for (let i = 0; i < 3; i++) t.pump.tickClock(1e9 + i * 2000);
    expect(t.stats[netPeerIndex(2, NP_EXCHANGES)]).toBe(3);
    expect(Math.abs(t.stats[netPeerIndex(2, NP_OFFSET_US)])).toBeLessThan(1000);
    expect(t.stats[netPeerIndex(2, NP_RTT_MS)]).toBeGreaterThanOrEqual(0);
    const p = audioPacket(5);
    t.out.push(0xffff, 0, p);
    t.pump.drainOutbound();
    let got: number[] = [];
    t.in.pop((b, o, l) => {
      got = [...b.subarray(o, o + l)];
    });
    expect(got.slice(8)).toEqual([...p.subarray(8)]);
  });
});
