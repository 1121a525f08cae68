// Parity of app/src/net/bundle.ts with core/src/bundle.rs: the golden vectors
// (tests/vectors/bundles.json, also read by the Rust tests) must give the same packets and the
// same errors, every cut of a bundle is refused, and each packet inside parses as a packet.
import { describe, expect, it } from 'vitest';
import { checkBundle, forEachPacket } from '../../app/src/net/bundle.ts';
import { newPacketInfo, parsePacket } from '../../app/src/audio/packet.ts';
import vectorFile from '../vectors/bundles.json';
import { fromHex, toHex } from './hex';

function packetsOf(bytes: Uint8Array): string[] {
  const out: string[] = [];
  forEachPacket(bytes, (offset, length) => out.push(toHex(bytes.subarray(offset, offset + length))));
  return out;
}

describe('bundles', () => {
  it.each(vectorFile.valid)('$name parses to its packets', (v) => {
    const bytes = fromHex(v.hex);
    expect(checkBundle(bytes)).toBe(v.packets.length);
    expect(packetsOf(bytes)).toEqual(v.packets);
  });

  it.each(vectorFile.invalid)('$name is refused as $error', (v) => {
    expect(checkBundle(fromHex(v.hex))).toBe(v.error);
  });

  it('refuses every cut of a bundle and a byte too many', () => {
    const bytes = fromHex(vectorFile.valid[1].hex);
    for (let cut = 0; cut < bytes.length; cut++) {
      expect(typeof checkBundle(bytes.subarray(0, cut)), `cut at ${cut}`).toBe('string');
    }
    const longer = new Uint8Array(bytes.length + 1);
    longer.set(bytes);
    expect(checkBundle(longer)).toBe('TrailingBytes');
  });

  it('carries whole packets, with the stream ids of their trailers', () => {
    const bytes = fromHex(vectorFile.valid[1].hex);
    const streams: (number | null)[] = [];
    const info = newPacketInfo();
    forEachPacket(bytes, (offset, length) => {
      expect(parsePacket(bytes, offset, length, info)).toBe(0);
      streams.push(info.hasExt ? info.streamId : null);
    });
    expect(streams.map((s) => s !== null)).toEqual([true, false, true]);
  });
});
