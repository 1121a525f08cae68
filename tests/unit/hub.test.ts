// The browser side of the hub: the signaling messages it adds (checked field by field), the
// stream → slot table, and the packet pump's hub path with a stand-in channel carrying real
// bundles (the golden vectors of tests/vectors/bundles.json, and bundles laid out here).
import { describe, expect, it } from 'vitest';
import { hubMixMessage, parseServerMessage, receptionMessage } from '../../app/src/net/protocol';
import {
  N_HUB_BAD_BUNDLES,
  N_HUB_BUNDLES,
  N_HUB_METERS,
  N_HUB_NO_TRAILER,
  N_HUB_TX_PACKETS,
  N_HUB_TX_SKIPPED,
  N_HUB_UNKNOWN_STREAM,
  N_OUT_PACKETS,
  NP_HUB_METER_MS,
  NP_HUB_PEAK_L,
  NP_HUB_RX_PACKETS,
  NP_OFFSET_US,
  NP_RTT_MS,
  NP_RX_PACKETS,
  NP_STAMP_LAG_MS,
  NP_TX_PACKETS,
  HUB_METER_FRESH_MS,
  hubMeter,
  OUT_ALL,
  SEND_QUEUE_LIMIT,
  netPeerIndex,
} from '../../app/src/net/pump';
import { FakeChannel, pumpWithRings } from './fake-channel';
import { createPumpHost } from '../../app/src/net/net-host';
import { createRing, MIN_CAPACITY } from '../../app/src/audio/ring';
import { MIX_STREAM, StreamSlots, trailerStream } from '../../app/src/net/pump-hub';
import { filterCandidates, restartDelayMs, RESTART_BACKOFF_MS } from '../../app/src/net/hub';
import vectorFile from '../vectors/bundles.json';
import meterVectors from '../vectors/meters.json';
import { fromHex } from './hex';

describe('hub signaling', () => {
  it('reads the topology and the stream ids of a welcome and a peer-joined', () => {
    const welcome = {
      type: 'welcome',
      room: 'r',
      peer: 'p',
      peers: [
        { peer: 'q', name: 'Q', stream: 7 },
        { peer: 'j', name: 'JT', stream: 9, kind: 'jacktrip' },
      ],
      cap: 16,
      topology: 'forward',
      stream: 3,
    };
    expect(parseServerMessage(JSON.stringify(welcome))).toMatchObject({
      topology: 'forward',
      stream: 3,
      peers: [
        { peer: 'q', name: 'Q', stream: 7 },
        { peer: 'j', name: 'JT', stream: 9, kind: 'jacktrip' },
      ],
    });
    const joined = parseServerMessage('{"type":"peer-joined","peer":"q","name":"Q","stream":65534}');
    expect(joined).toEqual({ type: 'peer-joined', peer: 'q', name: 'Q', stream: 65534 });
    expect(parseServerMessage('{"type":"topology","mode":"mix"}')).toEqual({ type: 'topology', mode: 'mix' });
    expect(parseServerMessage('{"type":"topology","mode":"forward","reason":"Ann\'s uplink"}')).toEqual({
      type: 'topology',
      mode: 'forward',
      reason: "Ann's uplink",
    });
    expect(parseServerMessage('{"type":"hub-answer","sdp":"v=0"}')).toEqual({
      type: 'hub-answer',
      sdp: 'v=0',
    });
    // A server before the hub: a mesh, no streams.
    expect(
      parseServerMessage(
        '{"type":"welcome","room":"r","peer":"p","peers":[{"peer":"q","name":"Q"}],"cap":16}',
      ),
    ).toMatchObject({ topology: 'mesh', peers: [{ peer: 'q', name: 'Q' }] });
  });

  it('refuses a present but malformed field as a malformed message', () => {
    const base = '"type":"welcome","room":"r","peer":"p","cap":16';
    for (const bad of [
      `{${base},"peers":[],"topology":"star"}`,
      `{${base},"peers":[],"stream":0}`,
      `{${base},"peers":[],"stream":65535}`,
      `{${base},"peers":[{"peer":"q","name":"Q","stream":1.5}]}`,
      `{${base},"peers":[{"peer":"q","name":"Q","kind":"robot"}]}`,
      '{"type":"peer-joined","peer":"q","name":"Q","stream":"7"}',
      '{"type":"peer-joined","peer":"q","name":"Q","stream":-1}',
      '{"type":"topology","mode":"MESH"}',
      '{"type":"topology"}',
      '{"type":"topology","mode":"forward","reason":5}',
      '{"type":"hub-answer","sdp":""}',
      '{"type":"hub-answer","sdp":5}',
      '{"type":"layer","layer":"opus-32","reason":"r"}',
      '{"type":"layer","layer":"OPUS-128","reason":"r"}',
      '{"type":"layer","reason":"r"}',
      '{"type":"layer","layer":"opus-64"}',
      '{"type":"layer","layer":"opus-64","reason":7}',
    ]) {
      expect(parseServerMessage(bad), bad).toBeNull();
    }
  });

  it('reads the layer the hub sends us, with its reason', () => {
    for (const layer of ['as-sent', 'opus-128', 'opus-64']) {
      expect(
        parseServerMessage(JSON.stringify({ type: 'layer', layer, reason: 'the path carries 2.0 Mbit/s' })),
      ).toEqual({ type: 'layer', layer, reason: 'the path carries 2.0 Mbit/s', mesh: false });
    }
    // In a mesh the server's notice says so; only `true` counts.
    const notice = { type: 'layer', layer: 'opus-64', reason: 'r' };
    expect(parseServerMessage(JSON.stringify({ ...notice, mesh: true }))).toMatchObject({ mesh: true });
    expect(parseServerMessage(JSON.stringify({ ...notice, mesh: 'yes' }))).toMatchObject({ mesh: false });
  });

  it('reads which layer of our stream a mesh member takes, refusing anything else', () => {
    const peer = 'a'.repeat(32);
    expect(parseServerMessage(JSON.stringify({ type: 'send-layer', peer, layer: 'opus-128' }))).toEqual({
      type: 'send-layer',
      peer,
      layer: 'opus-128',
    });
    for (const bad of [
      { peer, layer: 'opus-96' },
      { peer: 'not-a-peer', layer: 'opus-64' },
      { layer: 'opus-64' },
      { peer, layer: 2 },
    ]) {
      expect(parseServerMessage(JSON.stringify({ type: 'send-layer', ...bad }))).toBeNull();
    }
  });

  it('writes reception reports within the ranges the hub takes', () => {
    expect(
      receptionMessage({
        receivedBps: 1e6 + 0.4,
        loss: 0.5,
        delayRiseMsPerS: 12.25,
        rttMs: 30,
        capacityBps: 2e6,
      }),
    ).toEqual({
      type: 'reception',
      receivedBps: 1_000_000,
      loss: 0.5,
      delayRiseMsPerS: 12.25,
      rttMs: 30,
      capacityBps: 2_000_000,
    });
    expect(
      receptionMessage({
        receivedBps: NaN,
        loss: 3,
        delayRiseMsPerS: -5e9,
        rttMs: Infinity,
        capacityBps: NaN,
      }),
    ).toEqual({
      type: 'reception',
      receivedBps: 0,
      loss: 1,
      delayRiseMsPerS: -1e6,
      rttMs: 0,
      capacityBps: null,
    });
    expect(
      receptionMessage({ receivedBps: 1e12, loss: -1, delayRiseMsPerS: 0, rttMs: 2e6, capacityBps: 0.2 }),
    ).toEqual({
      type: 'reception',
      receivedBps: 1e11,
      loss: 0,
      delayRiseMsPerS: 0,
      rttMs: 1e6,
      capacityBps: 1,
    });
  });

  it('writes hub-mix with only what the hub can take', () => {
    expect(
      hubMixMessage({
        master: 0.5,
        strips: [
          { stream: 7, gain: 1.5, pan: -0.25, mute: false, solo: true },
          { stream: 0, gain: 1, pan: 0, mute: false, solo: false },
          { stream: 8, gain: NaN, pan: 0, mute: false, solo: false },
          { stream: 9, gain: -1, pan: 3, mute: true, solo: false },
        ],
      }),
    ).toEqual({
      type: 'hub-mix',
      master: 0.5,
      strips: [
        { stream: 7, gain: 1.5, pan: -0.25, mute: false, solo: true },
        { stream: 9, gain: 0, pan: 1, mute: true, solo: false },
      ],
    });
    expect(hubMixMessage({ strips: [] })).toEqual({ type: 'hub-mix', strips: [] });
  });

  it('offers only the candidates the ICE policy allows, and backs off', () => {
    const sdp = [
      'v=0',
      'a=candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host',
      'a=candidate:2 1 udp 2122260223 192.168.1.5 50001 typ host',
      'a=end-of-candidates',
      '',
    ].join('\r\n');
    expect(filterCandidates(sdp, 'all')).toBe(sdp);
    expect(filterCandidates(sdp, 'loopback')).toBe(
      ['v=0', 'a=candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host', 'a=end-of-candidates', ''].join(
        '\r\n',
      ),
    );
    expect([0, 1, 2, 3, 4, 5, 50].map(restartDelayMs)).toEqual([500, 1000, 2000, 4000, 8000, 8000, 8000]);
    expect(RESTART_BACKOFF_MS[0]).toBe(500);
  });
});

describe('stream → slot table', () => {
  it('maps, remaps and forgets streams; refuses what is not a u16', () => {
    const t = new StreamSlots();
    expect(t.slotOf(7)).toBe(-1);
    t.set(7, 2);
    t.set(MIX_STREAM, 63);
    t.set(65534, 0);
    expect([t.slotOf(7), t.slotOf(0), t.slotOf(65534), t.slotOf(8)]).toEqual([2, 63, 0, -1]);
    t.set(7, 5);
    expect(t.slotOf(7)).toBe(5);
    t.set(7, -1);
    expect(t.slotOf(7)).toBe(-1);
    t.set(70000, 1);
    t.set(-1, 1);
    t.set(3, 1.5);
    expect([t.slotOf(70000), t.slotOf(-1), t.slotOf(3)]).toEqual([-1, -1, -1]);
    t.set(9, 1);
    t.clear();
    expect(t.slotOf(9)).toBe(-1);
  });
});

/** A PCM16 stereo 128-frame packet whose samples are all `fill`, with a trailer for `stream`
 * (none when null), laid out as core/src/packet.rs does. */
function packet(seq: number, fill: number, stream: number | null): Uint8Array {
  const audio = 128 * 2 * 2;
  const b = new Uint8Array(16 + audio + (stream === null ? 0 : 8));
  const v = new DataView(b.buffer);
  v.setUint16(8, seq, true);
  v.setUint16(10, 128, true);
  b[12] = 3; // 48 kHz
  b[13] = 16;
  b[14] = 2;
  b[15] = 2;
  for (let i = 0; i < audio; i += 2) v.setInt16(16 + i, fill, true);
  if (stream !== null) {
    const t = 16 + audio;
    b.set([0x54, 0x55, 1, 0], t);
    v.setUint16(t + 4, stream, true);
  }
  return b;
}

/** A bundle of `packets` as core/src/bundle.rs lays it out. */
function bundle(packets: Uint8Array[]): ArrayBuffer {
  const total = 4 + packets.reduce((n, p) => n + 2 + p.length, 0);
  const b = new Uint8Array(total);
  b.set([0x54, 0x42, 1, packets.length]);
  let at = 4;
  for (const p of packets) {
    b[at] = p.length & 0xff;
    b[at + 1] = p.length >> 8;
    b.set(p, at + 2);
    at += 2 + p.length;
  }
  return b.buffer;
}

function setup(maxPeers = 8) {
  const t = pumpWithRings(maxPeers);
  const hub = new FakeChannel();
  t.pump.setHub(hub as unknown as RTCDataChannel);
  const drain = (): [number, number[]][] => {
    const got: [number, number[]][] = [];
    while (t.in.pop((buf, off, len, tag) => got.push([tag, [...buf.subarray(off, off + len)]]))) {
      /* drain */
    }
    return got;
  };
  return { ...t, hub, drain };
}

describe('packet pump, hub path', () => {
  it('plays each packet of a bundle in the slot its stream maps to', () => {
    const t = setup();
    t.pump.mapStream(7, 2);
    t.pump.mapStream(9, 5);
    const a = packet(1, 100, 7);
    const b = packet(1, -200, 9);
    t.hub.deliver(bundle([a, b]));
    expect(t.hub.binaryType).toBe('arraybuffer');
    expect(t.drain()).toEqual([
      [2, [...a]],
      [5, [...b]],
    ]);
    expect(t.stats[N_HUB_BUNDLES]).toBe(1);
    expect(t.stats[netPeerIndex(2, NP_RX_PACKETS)]).toBe(1);
    expect(t.stats[netPeerIndex(5, NP_RX_PACKETS)]).toBe(1);
    // Counted apart as having come through the hub (what a switch from the mesh waits for).
    t.hub.deliver(bundle([packet(2, 100, 7)]));
    t.drain();
    expect(t.stats[netPeerIndex(2, NP_HUB_RX_PACKETS)]).toBe(2);
    expect(t.stats[netPeerIndex(5, NP_HUB_RX_PACKETS)]).toBe(1);
  });

  it('plays the golden vectors by their trailers, and drops a packet without one', () => {
    const t = setup();
    const v = vectorFile.valid.find((x) => x.name === 'three-formats')!;
    // Its packets carry streams 0xbeef, none, 1 (bundle.test.ts reads the same).
    expect(v.packets.map((p) => trailerStream(fromHex(p), 0, p.length / 2))).toEqual([0xbeef, -1, 1]);
    t.pump.mapStream(0xbeef, 3);
    t.pump.mapStream(1, 4);
    t.hub.deliver(fromHex(v.hex).slice().buffer);
    expect(t.drain()).toEqual([
      [3, [...fromHex(v.packets[0])]],
      [4, [...fromHex(v.packets[2])]],
    ]);
    expect(t.stats[N_HUB_NO_TRAILER]).toBe(1);
  });

  it('plays the hub mix (stream 0) in the slot kept for it', () => {
    const t = setup(64);
    t.pump.mapStream(MIX_STREAM, 63);
    const mix = packet(5, 1234, MIX_STREAM);
    t.hub.deliver(bundle([mix]));
    expect(t.drain()).toEqual([[63, [...mix]]]);
  });

  it('starts every slot of a new pump host with no stamp lag, round trip or clock offset yet', () => {
    const host = createPumpHost(createRing(MIN_CAPACITY), createRing(MIN_CAPACITY), 64, 'main');
    try {
      for (const slot of [0, 17, 63]) {
        for (const f of [NP_STAMP_LAG_MS, NP_RTT_MS, NP_OFFSET_US])
          expect(host.stats[netPeerIndex(slot, f)]).toBeNaN();
        expect(host.stats[netPeerIndex(slot, NP_RX_PACKETS)]).toBe(0);
      }
    } finally {
      host.stop();
    }
  });

  it("starts a slot's stamp lag afresh when a stream is newly mapped to it", () => {
    const t = setup(64);
    const lag = () => t.stats[netPeerIndex(63, NP_STAMP_LAG_MS)];
    // A block left at 0 for a slot no link ever used (the host fills it with NaN): a delay
    // trend from there to the first packet's lag (another clock) would be a step of hours.
    expect(lag()).toBe(0);
    t.pump.mapStream(MIX_STREAM, 63);
    expect(lag()).toBeNaN();
    t.hub.deliver(bundle([packet(5, 1234, MIX_STREAM)]));
    t.drain();
    const first = lag();
    expect(Number.isFinite(first)).toBe(true);
    // Mapped again as it was: the lag goes on.
    t.pump.mapStream(MIX_STREAM, 63);
    expect(lag()).toBe(first);
    // Another stream in that slot: afresh.
    t.pump.mapStream(MIX_STREAM, -1);
    t.pump.mapStream(7, 63);
    expect(lag()).toBeNaN();
  });

  it('counts and drops unknown streams, and bad bundles whole', () => {
    const t = setup();
    t.pump.mapStream(7, 1);
    t.hub.deliver(bundle([packet(1, 1, 8), packet(1, 1, 7)]));
    expect(t.drain().map(([tag]) => tag)).toEqual([1]);
    expect(t.stats[N_HUB_UNKNOWN_STREAM]).toBe(1);
    // A stream unmapped (its member left) is unknown again.
    t.pump.mapStream(7, -1);
    t.hub.deliver(bundle([packet(2, 1, 7)]));
    expect(t.drain()).toEqual([]);
    expect(t.stats[N_HUB_UNKNOWN_STREAM]).toBe(2);
    for (const v of vectorFile.invalid) t.hub.deliver(fromHex(v.hex).slice().buffer);
    t.hub.deliver('text');
    const cut = new Uint8Array(bundle([packet(3, 1, 7)])).subarray(0, 100).slice().buffer;
    t.pump.mapStream(7, 1);
    t.hub.deliver(cut);
    expect(t.drain()).toEqual([]);
    expect(t.stats[N_HUB_BAD_BUNDLES]).toBe(vectorFile.invalid.length + 2);
    expect(t.stats[N_HUB_BUNDLES]).toBe(2);
  });

  it("puts each player's meter from the hub in its participant's slot", () => {
    const t = setup();
    // The golden three-players message: streams 1, 65534 (unmapped here) and 300.
    const v = meterVectors.valid.find((x) => x.name === 'three-players')!;
    t.pump.mapStream(1, 2);
    t.pump.mapStream(300, 5);
    const before = performance.timeOrigin + performance.now();
    t.hub.deliver(fromHex(v.hex).slice().buffer);
    const after = performance.timeOrigin + performance.now();
    expect(t.stats[N_HUB_METERS]).toBe(1);
    expect(t.stats[N_HUB_BAD_BUNDLES]).toBe(0);
    expect(t.drain()).toEqual([]);
    const db = (x: number) => (x > 0 ? 20 * Math.log10(x) : null);
    for (const [slot, entry] of [
      [2, v.entries[0]],
      [5, v.entries[2]],
    ] as const) {
      const at = t.stats[netPeerIndex(slot, NP_HUB_METER_MS)];
      expect(at).toBeGreaterThanOrEqual(before);
      expect(at).toBeLessThanOrEqual(after);
      const m = hubMeter(t.stats, slot, after)!;
      [m.peakL, m.peakR, m.rmsL, m.rmsR].forEach((x, k) => {
        const want = entry.dbfs[k];
        if (want === null) expect(db(x)).toBeNull();
        else expect(db(x)).toBeCloseTo(want, 2);
      });
      // Stale once the hub has stopped sending for a while (it sends one every ~51 ms).
      expect(hubMeter(t.stats, slot, after + HUB_METER_FRESH_MS + 1)).toBeNull();
    }
    // Nothing written to a slot no stream maps to.
    for (let slot = 0; slot < 8; slot++) {
      if (slot !== 2 && slot !== 5) expect(t.stats[netPeerIndex(slot, NP_HUB_PEAK_L)]).toBe(0);
      if (slot !== 2 && slot !== 5) expect(hubMeter(t.stats, slot, after)).toBeNull();
    }
    // A bad meters message is dropped whole and counted with the bad bundles.
    for (const bad of meterVectors.invalid.filter((x) => x.error !== 'BadMagic')) {
      t.hub.deliver(fromHex(bad.hex).slice().buffer);
    }
    expect(t.stats[N_HUB_METERS]).toBe(1);
    expect(t.stats[N_HUB_BAD_BUNDLES]).toBe(meterVectors.invalid.length - 1);
  });

  it('sends each of our packets once to the hub, not once per peer', () => {
    const t = setup();
    // Three participants reached through the hub: none has a channel of its own.
    for (const [stream, slot] of [
      [7, 0],
      [8, 1],
      [9, 2],
    ]) {
      t.pump.mapStream(stream, slot);
    }
    const p = packet(1, 5, null);
    t.out.push(OUT_ALL, 0, p);
    t.out.push(OUT_ALL, 0, packet(2, 5, null));
    // A packet for one peer only (an echo) has no way through the hub.
    t.out.push(1, 0, packet(3, 5, null));
    expect(t.pump.drainOutbound()).toBe(3);
    expect(t.hub.sent.length).toBe(2);
    expect([...t.hub.sent[0].subarray(8)]).toEqual([...p.subarray(8)]);
    expect(t.stats[N_HUB_TX_PACKETS]).toBe(2);
    expect(t.stats[N_OUT_PACKETS]).toBe(3);
    expect(t.stats[netPeerIndex(0, NP_TX_PACKETS)]).toBe(0);
    // A congested hub channel skips, and counts.
    t.hub.bufferedAmount = SEND_QUEUE_LIMIT + 1;
    t.out.push(OUT_ALL, 0, p);
    t.pump.drainOutbound();
    expect(t.hub.sent.length).toBe(2);
    expect(t.stats[N_HUB_TX_SKIPPED]).toBe(1);
  });

  it('replaces the hub channel, closing the old one; null stops sending', () => {
    const t = setup();
    const next = new FakeChannel();
    t.pump.setHub(next as unknown as RTCDataChannel);
    expect(t.hub.closed).toBe(true);
    t.pump.mapStream(7, 1);
    t.hub.deliver(bundle([packet(1, 1, 7)]));
    expect(t.drain()).toEqual([]);
    next.deliver(bundle([packet(1, 1, 7)]));
    expect(t.drain().length).toBe(1);
    t.pump.setHub(null);
    expect(next.closed).toBe(true);
    t.out.push(OUT_ALL, 0, packet(2, 1, null));
    t.pump.drainOutbound();
    expect(next.sent).toEqual([]);
  });
});
