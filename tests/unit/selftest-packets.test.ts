// The self-test's packets against the packet module's parser: the synthetic peers' packets are
// valid and carry their sine; every bad record the bad-input scenario injects is rejected, each
// for the reason its kind names.

import { describe, expect, it } from 'vitest';
import { decodeStereo, newPacketInfo, PacketError, parsePacket } from '../../app/src/audio/packet';
import { badRecord, MAX_RECORD_PAYLOAD } from '../../app/src/selftest/bad-input';
import { BAD_INPUT } from '../../app/src/selftest/scenarios';
import { BAD_KINDS, buildSchedule, EventKind, FFT_LEN } from '../../app/src/selftest/schedule';
import { PeerSynth } from '../../app/src/selftest/synth';

const parse = (b: Uint8Array) => parsePacket(b, 0, b.length, newPacketInfo());

describe('PeerSynth', () => {
  it('makes valid PCM16 stereo packets carrying the sine within one quantization step', () => {
    const peer = { ...BAD_INPUT.spec.peers[1] }; // the stream that wraps its sequence number
    const synth = new PeerSynth(peer);
    const info = newPacketInfo();
    const left = new Float32Array(128);
    const right = new Float32Array(128);
    for (const index of [0, 1, 899, 900, 2000]) {
      const bytes = synth.packet(index);
      expect(parsePacket(bytes, 0, bytes.length, info)).toBe(0);
      expect(info).toMatchObject({
        seq: (peer.firstSeq + index) & 0xffff,
        frames: 128,
        rateHz: 48000,
        bits: 16,
        channels: 2,
      });
      decodeStereo(bytes, info, left, right);
      for (let i = 0; i < 128; i++) {
        const n = index * 128 + i;
        const want = peer.amplitude * Math.sin((2 * Math.PI * (peer.phase + peer.bin * n)) / FFT_LEN);
        // Encode rounds x * 32767, decode divides by 32768: error below 1/32768 + |x|/32768.
        expect(Math.abs(left[i] - want)).toBeLessThan(2 / 32768);
        expect(right[i]).toBe(left[i]);
      }
    }
  });
});

describe('badRecord', () => {
  const valid = new PeerSynth(BAD_INPUT.spec.peers[0]).packet(5);
  const reasons: Record<string, number[]> = {
    'truncated-header': [PacketError.Truncated],
    'truncated-payload': [PacketError.Truncated],
    oversized: [PacketError.Oversized],
    'bad-bits': [PacketError.BadBits],
    'bad-rate': [PacketError.BadRate],
  };

  it('makes records the parser rejects for the named reason (200 seeds per kind)', () => {
    for (const kind of BAD_KINDS) {
      for (let seed = 1; seed <= 200; seed++) {
        const b = badRecord(kind, valid, seed * 7919);
        expect(b.length).toBeGreaterThan(0);
        expect(b.length).toBeLessThanOrEqual(MAX_RECORD_PAYLOAD);
        const code = parse(b);
        if (kind === 'unknown-peer') expect(code).toBe(0);
        else if (kind === 'garbage') expect(code).not.toBe(0);
        else expect(reasons[kind]).toContain(code);
      }
    }
  });

  it('rejects every bad record of the bad-input schedule (except the unknown-slot ones, which are valid)', () => {
    const s = buildSchedule(BAD_INPUT.spec);
    const synths = new Map(BAD_INPUT.spec.peers.map((p) => [p.slot, new PeerSynth(p)]));
    let rejected = 0;
    for (const e of s.events) {
      if (e.kind !== EventKind.Bad) continue;
      const code = parse(badRecord(e.bad!, synths.get(e.slot)!.packet(e.index), e.badSeed!));
      if (e.bad === 'unknown-peer') expect(code).toBe(0);
      else {
        expect(code).not.toBe(0);
        rejected++;
      }
    }
    expect(rejected).toBe(s.bad.malformed);
  });
});
