// The Opus packets of the benchmark's codec rows, encoded once on the page's main thread with the
// app's codec module (app/src/audio/opus-module.ts) and handed to the feeder (feeder.ts), which
// only patches their sequence numbers and timestamps as it sends them.
//
// Each peer sends the same tone as in the PCM16 rows (peerFrequency, peerPhase, the same
// amplitude, identical left and right) as stereo Opus frames of OPUS_FRAMES samples. A peer's
// sine repeats every CYCLE_BLOCKS × 128 = 1024 samples and a loop of OPUS_LOOP_FRAMES frames is
// 15 360 samples, 15 periods, so the loop's last frame runs on into its first without a step in
// the signal. The encoder first codes one whole loop to settle, and the next loop is kept: the
// decoder then sees, at each seam, a frame coded after the loop's end by an encoder in nearly the
// state the previous loop left it. That is not the stream a real encoder would produce, but the
// decoder does the same work on it, which is all a cost measurement needs.

import { OpusModule } from '../../app/src/audio/opus-module';
import { encodeOpusPacket, HEADER_LEN } from '../../app/src/audio/packet';
import { peerFrequency, peerPhase, type OpusPackets } from './feeder';

/** Samples per Opus frame (5 ms at 48 kHz). */
export const OPUS_FRAMES = 240;
/** Frames in a peer's loop: 15 360 samples, a whole number of periods of every peer's sine. */
export const OPUS_LOOP_FRAMES = 64;
const CHANNELS = 2;
const TRAILER_LEN = 8;

/** The codec rows: PCM16 (the feeder's own packets) and Opus at two bitrates. */
export const CODECS = [
  { codec: 'pcm16', bitrate: 0 },
  { codec: 'opus-128', bitrate: 128_000 },
  { codec: 'opus-64', bitrate: 64_000 },
] as const;
export type CodecName = (typeof CODECS)[number]['codec'];

/** Every peer's loop of stereo Opus frames at `bitrate` bit/s, framed as packets. */
export function encodeOpusLoops(
  codecModule: WebAssembly.Module,
  peers: number,
  bitrate: number,
  amplitude: number,
): OpusPackets & { payloadBytes: number } {
  const opus = new OpusModule(codecModule);
  const packets: Uint8Array[] = [];
  let payloadBytes = 0;
  const header = {
    timestamp: 0,
    seq: 0,
    frames: OPUS_FRAMES,
    rateCode: 3,
    bits: 16,
    channelsIn: CHANNELS,
    channelsOut: CHANNELS,
  };
  for (let k = 0; k < peers; k++) {
    const encoder = opus.newEncoder(CHANNELS, bitrate);
    const w = (2 * Math.PI * peerFrequency(k)) / 48000;
    const phase = peerPhase(k);
    for (let f = 0; f < 2 * OPUS_LOOP_FRAMES; f++) {
      const start = (f % OPUS_LOOP_FRAMES) * OPUS_FRAMES;
      for (let i = 0; i < OPUS_FRAMES; i++) {
        const x = amplitude * Math.sin(w * (start + i) + phase);
        opus.pcm[CHANNELS * i] = x;
        opus.pcm[CHANNELS * i + 1] = x;
      }
      const n = opus.encode(encoder, OPUS_FRAMES);
      if (n <= 0) throw new Error(`Opus encoder: error ${n} on peer ${k}'s frame ${f}`);
      // The first loop only settles the encoder.
      if (f < OPUS_LOOP_FRAMES) continue;
      const packet = new Uint8Array(HEADER_LEN + n + TRAILER_LEN);
      packet.set(opus.packet.subarray(0, n), HEADER_LEN);
      const len = encodeOpusPacket(header, 0, n, packet);
      if (len !== packet.length) throw new Error(`Opus packet framing: error ${-len}`);
      packets.push(packet);
      payloadBytes += n;
    }
    opus.free(encoder);
  }
  const offsets = new Uint32Array(packets.length + 1);
  for (let j = 0; j < packets.length; j++) offsets[j + 1] = offsets[j] + packets[j].length;
  const bytes = new Uint8Array(offsets[packets.length]);
  for (let j = 0; j < packets.length; j++) bytes.set(packets[j], offsets[j]);
  return {
    frames: OPUS_FRAMES,
    loop: OPUS_LOOP_FRAMES,
    bytes,
    offsets,
    payloadBytes: packets.length > 0 ? payloadBytes / packets.length : 0,
  };
}
