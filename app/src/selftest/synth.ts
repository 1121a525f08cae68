// A synthetic peer: the packets of a sine of one FFT bin, PCM16 stereo, 128 frames per packet.
//
// Sample n of the stream (n = index x 128 + frame) is amplitude x sin(2 pi (phase + bin x n) /
// FFT_LEN), computed from an integer phase so the tone stays exactly on its bin however long it
// runs. Both channels carry the same signal.

import { encodePacket, packetErrorName, type HeaderFields } from '../audio/packet';
import { BLOCK_FRAMES, FFT_LEN, SAMPLE_RATE, type PeerSpec } from './schedule';

/** JackTrip's sample-rate code for 48 kHz. */
const RATE_48000 = 3;

let table: Float64Array | null = null;

function sineTable(): Float64Array {
  if (!table) {
    table = new Float64Array(FFT_LEN);
    for (let i = 0; i < FFT_LEN; i++) table[i] = Math.sin((2 * Math.PI * i) / FFT_LEN);
  }
  return table;
}

export class PeerSynth {
  private readonly peer: PeerSpec;
  private readonly sine = sineTable();
  private readonly left = new Float32Array(BLOCK_FRAMES);
  private readonly right = new Float32Array(BLOCK_FRAMES);
  private readonly out = new Uint8Array(16 + BLOCK_FRAMES * 2 * 2 + 8);

  constructor(peer: PeerSpec) {
    this.peer = peer;
  }

  /** Sample `n` of the stream. */
  sample(n: number): number {
    const p = this.peer;
    return p.amplitude * this.sine[(p.phase + ((p.bin * (n % FFT_LEN)) % FFT_LEN)) % FFT_LEN];
  }

  /** A new copy of packet `index` of the stream. */
  packet(index: number): Uint8Array {
    const base = index * BLOCK_FRAMES;
    for (let i = 0; i < BLOCK_FRAMES; i++) {
      const v = this.sample(base + i);
      this.left[i] = v;
      this.right[i] = v;
    }
    const header: HeaderFields = {
      // Microseconds of the sender's audio clock, as JackTrip stamps its packets.
      timestamp: Math.round((base * 1e6) / SAMPLE_RATE),
      seq: (this.peer.firstSeq + index) & 0xffff,
      frames: BLOCK_FRAMES,
      rateCode: RATE_48000,
      bits: 16,
      // JackTrip writes 0 in byte 15 when a sender's input and output counts are equal.
      channelsIn: 2,
      channelsOut: 0,
    };
    const len = encodePacket(header, null, [this.left, this.right], this.out);
    if (len < 0) throw new Error(`encoding a test packet failed: ${packetErrorName(-len)}`);
    return this.out.slice(0, len);
  }
}
