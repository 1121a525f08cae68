// The net benchmark's players (bench/web/player-blocks.ts): the hub case's bundles are what the
// hub's forward mode sends a listener (one packet per player, each naming its stream), and the
// pump's hub path puts each packet into the slot of its stream.
import { describe, expect, it } from 'vitest';
import { newPacketInfo, parsePacket } from '../../app/src/audio/packet';
import { checkBundle, forEachPacket } from '../../app/src/net/bundle';
import { N_HUB_BUNDLES, NP_RX_PACKETS, netPeerIndex } from '../../app/src/net/pump';
import { hubBundles, playerPackets, stampBundle } from '../../bench/web/player-blocks';
import { FakeChannel, pumpWithRings } from './fake-channel';

describe('net benchmark players', () => {
  it('bundles one packet per player with its stream id, stamped in place', () => {
    const bundles = hubBundles(3, (k) => 10 + k);
    expect(bundles).toHaveLength(8);
    const b = bundles[5];
    expect(checkBundle(b.bytes)).toBe(3);
    expect(b.bytes.length).toBe(4 + 3 * (2 + 536));
    stampBundle(b, 300);
    const info = newPacketInfo();
    const seen: number[][] = [];
    forEachPacket(b.bytes, (offset, length) => {
      expect(parsePacket(b.bytes, offset, length, info)).toBe(0);
      seen.push([info.streamId, info.seq, info.timestampLo, info.frames, info.channels, info.bits]);
    });
    // Sequence 300 of 128 frames at 48 kHz is 800000 µs.
    expect(seen).toEqual([
      [10, 300, 800000, 128, 2, 16],
      [11, 300, 800000, 128, 2, 16],
      [12, 300, 800000, 128, 2, 16],
    ]);
  });

  it('gives the mesh the same audio without a trailer', () => {
    const mesh = playerPackets(1)[5];
    const hub = hubBundles(2, (k) => k + 1)[5];
    expect(mesh.length).toBe(528);
    expect([...hub.packets[1].subarray(16, 528)]).toEqual([...mesh.subarray(16)]);
  });

  it('reaches the slot of each stream through the pump', () => {
    const t = pumpWithRings(4);
    const hub = new FakeChannel();
    t.pump.setHub(hub as unknown as RTCDataChannel);
    for (let k = 0; k < 3; k++) t.pump.mapStream(k + 1, k);
    const b = hubBundles(3, (k) => k + 1)[0];
    hub.deliver(b.bytes.slice().buffer);
    hub.deliver(b.bytes.slice().buffer);
    const tags: number[] = [];
    while (t.in.pop((_buf, _off, _len, tag) => tags.push(tag))) {
      /* drain */
    }
    expect(tags).toEqual([0, 1, 2, 0, 1, 2]);
    expect(t.stats[N_HUB_BUNDLES]).toBe(2);
    expect([0, 1, 2].map((k) => t.stats[netPeerIndex(k, NP_RX_PACKETS)])).toEqual([2, 2, 2]);
    t.pump.stop();
  });
});
