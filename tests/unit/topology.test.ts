// When the mesh no longer fits (app/src/room/topology.ts): known answers for the stream rate,
// the uplink estimate from the pump's totals, and the advice.
import { describe, expect, it } from 'vitest';
import * as topo from '../../app/src/room/topology';
import { hubLayerText, topologyText } from '../../app/src/room/view';

describe('mesh upload', () => {
  it('PCM16 stereo 128 frames at 48 kHz: 528-byte packets 375 times a second, plus overhead', () => {
    expect(topo.streamBitsPerSecond(128, 2, 2, 48000, 0)).toBe(528 * 8 * 375); // 1,584,000
    expect(topo.streamBitsPerSecond(128, 2)).toBe((528 + 85) * 8 * 375); // 1,839,000
    expect(topo.streamBitsPerSecond(64, 1, 2, 48000, 0)).toBe((16 + 128) * 8 * 750);
    expect(topo.formatMbit(1_584_000)).toBe('1.6 Mbit/s');
    expect(topo.formatMbit(6_000_000)).toBe('6 Mbit/s');
    expect(topo.formatMbit(12_400_000)).toBe('12 Mbit/s');
  });
});

describe('uplink meter', () => {
  const MBIT = 1e6 / 8; // bytes per second of 1 Mbit/s

  it('reads what the channels delivered: sent less what they still hold', () => {
    const m = new topo.UplinkMeter(5000);
    expect(m.estimate()).toBeNull();
    // 6 Mbit/s handed over, the queues growing by 2 Mbit/s: 4 Mbit/s delivered, saturated.
    for (let t = 0; t <= 5; t++) {
      m.add({ atMs: t * 1000, sentBytes: 6 * MBIT * t, queuedBytes: 2 * MBIT * t, skipped: 0 });
    }
    expect(m.estimate()).toEqual({ carriesBps: 4e6, saturated: true });
  });

  it('is a lower bound while queues stay short and nothing is skipped', () => {
    const m = new topo.UplinkMeter(5000);
    for (let t = 0; t <= 3; t++)
      m.add({ atMs: t * 1000, sentBytes: 3 * MBIT * t, queuedBytes: 1000, skipped: 0 });
    expect(m.estimate()).toEqual({ carriesBps: 3e6, saturated: false });
    // Skipped packets mean saturation, whatever the queue.
    m.add({ atMs: 4000, sentBytes: 3 * MBIT * 4, queuedBytes: 1000, skipped: 3 });
    expect(m.estimate()?.saturated).toBe(true);
  });

  it('starts over when the counters go back (a channel closed)', () => {
    const m = new topo.UplinkMeter(5000);
    for (let t = 0; t <= 3; t++) m.add({ atMs: t * 1000, sentBytes: MBIT * t, queuedBytes: 0, skipped: 0 });
    m.add({ atMs: 4000, sentBytes: 10, queuedBytes: 0, skipped: 0 });
    expect(m.estimate()).toBeNull();
  });
});

describe('topology advice', () => {
  const stream = 1.5e6;
  /** The advice for `players` in `mode` over an uplink carrying `mbit` (saturated or not). */
  const advise = (
    players: number,
    mbit: number | null,
    saturated = false,
    mode: 'mesh' | 'forward' = 'mesh',
  ) =>
    topo.adviseTopology({
      mode,
      players,
      streamBps: stream,
      uplink: mbit === null ? null : { carriesBps: mbit * 1e6, saturated },
    });

  it('5 players need 4 × 1.5 = 6 Mbit/s up; a saturated 4 Mbit/s uplink moves the room to forward', () => {
    expect(advise(5, 4, true)).toEqual({
      needBps: 6e6,
      fits: false,
      propose: 'forward',
      reason: '5 players: 4 streams × 1.5 Mbit/s = 6 Mbit/s up; your uplink carries ~4',
    });
  });

  it('fits while the uplink carries what the mesh asks', () => {
    expect(advise(4, 4.5)).toEqual({ needBps: 4.5e6, fits: true, propose: null, reason: null });
    // Saturated but with room: 4.5 ≤ 0.9 × 6.
    expect(advise(4, 6, true).fits).toBe(true);
  });

  it('does not know without a measurement, or from a lower bound below the need', () => {
    expect(advise(6, null).fits).toBeNull();
    expect(advise(6, 3)).toEqual({ needBps: 7.5e6, fits: null, propose: null, reason: null });
  });

  it('never proposes for two players, nor once the room is on the hub', () => {
    expect(advise(2, 0.5, true).propose).toBeNull();
    const onHub = advise(5, 0.5, true, 'forward');
    expect([onHub.propose, onHub.fits]).toEqual([null, false]);
  });

  it('proposes only advice that held for the sustain time', () => {
    const s = new topo.SustainedAdvice(3000);
    const no = { needBps: 0, fits: true, propose: null, reason: null };
    const yes = { needBps: 6e6, fits: false, propose: 'forward' as const, reason: 'r' };
    expect(s.update(yes, 0)).toBeNull();
    expect(s.update(yes, 2999)).toBeNull();
    expect(s.update(yes, 3000)).toBe('forward');
    expect(s.update(no, 3500)).toBeNull();
    expect(s.update(yes, 4000)).toBeNull();
    expect(s.update(yes, 7000)).toBe('forward');
  });
});

describe('topology in the room view', () => {
  it('says how the packets travel, that the mix is made on the server, and how the hub link stands', () => {
    const t = { mode: 'mesh' as const, hub: null, advice: null, hubRefused: false };
    expect(topologyText(t)).toBe('Mesh: a direct link to each player.');
    expect(topologyText({ ...t, mode: 'forward', hub: 'connected' })).toBe(
      "Through the hub: one link to the server, which forwards every player's stream; your mix is made here.",
    );
    expect(topologyText({ ...t, mode: 'mix', hub: 'connected' })).toContain('the server makes your mix');
    expect(topologyText({ ...t, mode: 'forward', hub: 'connected', hubRttMs: 23.46 })).toMatch(
      /your mix is made here\. Round trip to the server: 23\.5 ms\.$/,
    );
    expect(topologyText({ ...t, mode: 'forward', hub: 'connected', hubRttMs: null })).toMatch(/made here\.$/);
    expect(topologyText({ ...t, mode: 'mix', hub: 'connecting' })).toMatch(/Hub link connecting…$/);
    expect(topologyText({ ...t, mode: 'forward', hub: 'failed', hubRefused: true })).toMatch(
      /The server has no hub for this room now: trying again\.$/,
    );
  });
});

describe('the hub layer in the room view', () => {
  it('says what the hub (or in a mesh, every other member) sends us and why', () => {
    const t = { mode: 'forward' as const, hub: 'connected' as const, advice: null, hubRefused: false };
    expect(hubLayerText(t)).toBe('');
    expect(hubLayerText({ ...t, layer: null })).toBe('');
    expect(
      hubLayerText({
        ...t,
        layer: { layer: 'opus-128', reason: '71.3 % of packets lost; 1.0 Mbit/s got through' },
      }),
    ).toBe('From the hub: Opus 128 kbit/s — 71.3 % of packets lost; 1.0 Mbit/s got through.');
    expect(hubLayerText({ ...t, layer: { layer: 'as-sent', reason: 'the path carries 12.0 Mbit/s' } })).toBe(
      'From the hub: as sent — the path carries 12.0 Mbit/s.',
    );
    expect(hubLayerText({ ...t, layer: { layer: 'opus-64', reason: '  ' } })).toBe(
      'From the hub: Opus 64 kbit/s.',
    );
    expect(hubLayerText({ ...t, layer: { layer: 'opus-64', reason: 'done.' } })).toBe(
      'From the hub: Opus 64 kbit/s — done.',
    );
    expect(hubLayerText({ ...t, layer: { layer: 'opus-64', reason: 'x'.repeat(5000) } }).length).toBeLessThan(
      300,
    );
    // In mix mode it is our own mix's format.
    expect(hubLayerText({ ...t, mode: 'mix', layer: { layer: 'opus-64', reason: 'r' } })).toBe(
      'Your mix from the hub: Opus 64 kbit/s — r.',
    );
    expect(
      hubLayerText({ ...t, mode: 'mix', layer: { layer: 'as-sent', reason: 'the path carries 9 Mbit/s' } }),
    ).toBe('Your mix from the hub: PCM16, as mixed — the path carries 9 Mbit/s.');
    // In a mesh the others send it (the session drops a hub's notice at a switch to the mesh).
    expect(hubLayerText({ ...t, mode: 'mesh', layer: { layer: 'opus-64', reason: 'r' } })).toBe(
      'From the others: Opus 64 kbit/s — r.',
    );
  });
});

describe('mesh-fit watch over the pump', () => {
  it('once the mesh has not fitted for SUSTAIN_MS, gives the reason and both rates', async () => {
    const { NP_BUFFERED, NP_TX_PACKETS, netPeerIndex, netStatsBytes } =
      await import('../../app/src/net/net-stats');
    const net = new Float64Array(netStatsBytes(8) / 8);
    const slots = [1, 2, 3, 4];
    const audio = { blockFrames: 128, channels: 2 };
    const wire = 16 + 128 * 2 * 2 + topo.PACKET_OVERHEAD_BYTES; // 613 bytes a packet
    const w = new topo.MeshFitWatch();
    // Five players: each block goes to four peers, 375 blocks a second, but only 3 Mbit/s of it
    // leaves: the rest piles up in the channels' queues.
    const asked = 4 * topo.streamBitsPerSecond(128, 2); // 7,356,000 bit/s
    let got = null;
    for (let s = 0; s <= 10 && !got; s++) {
      const queued = Math.max(0, (asked - 3e6) / 8) * s; // bytes held, all channels
      for (const slot of slots) {
        net[netPeerIndex(slot, NP_TX_PACKETS)] = 375 * s;
        net[netPeerIndex(slot, NP_BUFFERED)] = queued / slots.length;
      }
      got = w.update(s * 1000, 'mesh', 5, audio, net, slots);
      if (s < 3) expect(got, `at ${s} s: too early to tell`).toBeNull();
    }
    expect(got).not.toBeNull();
    expect(got!.needBps).toBe(asked);
    // What the channels were handed (4 × 375 × 613 bytes a second: the ask) less the queues' growth.
    expect(4 * 375 * wire * 8).toBe(asked);
    expect(got!.carriesBps).toBeCloseTo(3e6, -3);
    expect(got!.reason).toMatch(
      /^5 players: 4 streams × 1\.8 Mbit\/s = 7\.4 Mbit\/s up; your uplink carries ~3/,
    );
  });
});
