// What the net benchmark's remote players send (bench/web/net-bench.ts): each player's blocks, a
// sine of its own frequency encoded as valid PCM16 stereo 128-frame packets, in the two forms a
// browser receives them in.
//
// - Through the mesh: one packet per player per block (`playerPackets`), each its own
//   data-channel message.
// - Through the hub's forward mode: ONE message per block holding one packet per player, as the
//   hub sends a listener (HUB-SPEC: a bundle, core/src/bundle.rs), each packet with the trailer
//   that names its sender's stream (`hubBundles`). The packets are encoded in place inside the
//   bundle laid out with bundle.ts's constants, and each bundle is read back with bundle.ts's
//   reader (checkBundle, forEachPacket) before it is used.
//
// A player's sine repeats every CYCLE_BLOCKS blocks, so everything is encoded once; only the
// sequence numbers and timestamps change (stampPacket), in place, before each send.

import { CODEC_PCM, EXT_LEN, encodePacket, type ExtensionFields } from '../../app/src/audio/packet';
import {
  BUNDLE_HEADER_LEN,
  BUNDLE_MAGIC,
  BUNDLE_VERSION,
  ENTRY_LEN_BYTES,
  checkBundle,
  forEachPacket,
} from '../../app/src/net/bundle';
import { CYCLE_BLOCKS, FRAMES, PACKET_BYTES, peerFrequency, stampPacket } from './feeder';

/** Bytes of one player's entry in a hub bundle: its length, the packet and its trailer. */
const HUB_ENTRY_BYTES = ENTRY_LEN_BYTES + PACKET_BYTES + EXT_LEN;

/** One block of every player, as the hub sends it: the message and a view of each packet in it. */
export interface HubBundle {
  bytes: Uint8Array<ArrayBuffer>;
  packets: Uint8Array<ArrayBuffer>[];
}

/**
 * Encodes block `b` of player `k` into `out` at `offset` (with `ext`'s trailer when not null);
 * `left` and `right` are scratch of FRAMES samples. Returns the packet's length.
 */
function encodePlayerBlock(
  k: number,
  b: number,
  ext: ExtensionFields | null,
  scratch: [Float32Array, Float32Array],
  out: Uint8Array,
  offset: number,
): number {
  const hz = peerFrequency(k);
  const [left, right] = scratch;
  for (let i = 0; i < FRAMES; i++) {
    left[i] = 0.2 * Math.sin((2 * Math.PI * hz * (b * FRAMES + i)) / 48000);
    right[i] = left[i];
  }
  const h = { timestamp: 0, seq: b, frames: FRAMES, rateCode: 3, bits: 16, channelsIn: 2, channelsOut: 2 };
  const n = encodePacket(h, ext, scratch, out, offset);
  if (n !== PACKET_BYTES + (ext ? EXT_LEN : 0)) throw new Error(`encodePacket returned ${n}`);
  return n;
}

/** The packets of player `k` for the mesh: CYCLE_BLOCKS blocks without a trailer. */
export function playerPackets(k: number): Uint8Array<ArrayBuffer>[] {
  const scratch: [Float32Array, Float32Array] = [new Float32Array(FRAMES), new Float32Array(FRAMES)];
  const packets: Uint8Array<ArrayBuffer>[] = [];
  for (let b = 0; b < CYCLE_BLOCKS; b++) {
    const out = new Uint8Array(PACKET_BYTES);
    encodePlayerBlock(k, b, null, scratch, out, 0);
    packets.push(out);
  }
  return packets;
}

/**
 * The hub's bundles for a listener of `players` players: CYCLE_BLOCKS bundles, bundle b holding
 * block b of players 0..players-1 in that order, player k's packet with stream id `streamOf(k)`.
 */
export function hubBundles(players: number, streamOf: (k: number) => number): HubBundle[] {
  const scratch: [Float32Array, Float32Array] = [new Float32Array(FRAMES), new Float32Array(FRAMES)];
  const bundles: HubBundle[] = [];
  for (let b = 0; b < CYCLE_BLOCKS; b++) {
    const bytes = new Uint8Array(BUNDLE_HEADER_LEN + players * HUB_ENTRY_BYTES);
    bytes.set([BUNDLE_MAGIC[0], BUNDLE_MAGIC[1], BUNDLE_VERSION, players]);
    for (let k = 0; k < players; k++) {
      const at = BUNDLE_HEADER_LEN + k * HUB_ENTRY_BYTES;
      const ext = { streamId: streamOf(k), codec: CODEC_PCM };
      const n = encodePlayerBlock(k, b, ext, scratch, bytes, at + ENTRY_LEN_BYTES);
      bytes[at] = n & 0xff;
      bytes[at + 1] = n >>> 8;
    }
    const count = checkBundle(bytes);
    if (count !== players) throw new Error(`hub bundle of ${players} players reads as ${count}`);
    const packets: Uint8Array<ArrayBuffer>[] = [];
    forEachPacket(bytes, (offset, length) => packets.push(bytes.subarray(offset, offset + length)));
    bundles.push({ bytes, packets });
  }
  return bundles;
}

/** Sets every packet of `bundle` to sequence number `seq` (and its timestamp), in place. */
export function stampBundle(bundle: HubBundle, seq: number): void {
  for (const p of bundle.packets) stampPacket(p, seq);
}
