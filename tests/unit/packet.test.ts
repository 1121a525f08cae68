// Parity of app/src/audio/packet.ts with core/src/packet.rs: the same golden vectors
// (tests/vectors/packets.json, also read by the Rust tests) must give the same bytes, header
// fields, samples and errors; plus the malformed-input classes, seeded random inputs against a
// simple oracle, and round trips of analytic signals within each format's stated tolerance.
import { describe, expect, it } from 'vitest';
import {
  BLOCK_SIZES,
  CODEC_OPUS,
  EXT_LEN,
  HEADER_LEN,
  MAX_PACKET_LEN,
  OPUS_FRAMES,
  PacketError,
  decodeStereo,
  encodeOpusPacket,
  encodePacket,
  newPacketInfo,
  packetErrorName,
  packetTimestamp,
  parsePacket,
  type HeaderFields,
  type PacketInfo,
} from '../../app/src/audio/packet.ts';
import vectorFile from '../vectors/packets.json';
import rustSource from '../../core/src/packet.rs?raw';
import { Prng } from '../../app/src/selftest/prng';
import { fromHex, toHex } from './hex';

interface ValidVector {
  name: string;
  hex: string;
  len: number;
  header: {
    timestamp: string;
    seq: number;
    frames: number;
    rate_code: number;
    bits: number;
    channels_in: number;
    channels_out: number;
  };
  channels: number;
  ext: { stream_id: number; codec: number } | null;
  input: (number | string)[][] | null;
  samples: number[][] | null;
  /** Opus vectors only: the Opus bytes, hex. */
  opus_payload?: string;
  /** Opus vectors with a redundant copy of the previous frame: its bytes, hex. */
  opus_redundant?: string;
}
interface InvalidVector {
  name: string;
  hex: string;
  len: number;
  error: string;
}
const vectors = vectorFile as unknown as { valid: ValidVector[]; invalid: InvalidVector[] };

const num = (x: number | string): number =>
  x === 'NaN' ? NaN : x === 'Infinity' ? Infinity : x === '-Infinity' ? -Infinity : Number(x);
/** Bits of a value as f32, so that -0 vs 0 and exact values are compared. */
const f32bits = (x: number): number => new Uint32Array(new Float32Array([x]).buffer)[0];

const FORMATS = [16, 24, 32] as const;
/** |decoded - input| bound per format (derivation in core/src/packet/tests.rs). */
const BOUND: Record<number, number> = { 16: 1.51 / 32768, 24: 1.5 / 8388608, 32: 0 };

function headerOf(v: ValidVector): HeaderFields {
  return {
    timestamp: BigInt(v.header.timestamp),
    seq: v.header.seq,
    frames: v.header.frames,
    rateCode: v.header.rate_code,
    bits: v.header.bits,
    channelsIn: v.header.channels_in,
    channelsOut: v.header.channels_out,
  };
}

function parse(bytes: Uint8Array): { code: number; info: PacketInfo } {
  const info = newPacketInfo();
  const code = parsePacket(bytes, 0, bytes.length, info);
  return { code, info };
}

function decode(bytes: Uint8Array, info: PacketInfo): [Float32Array, Float32Array] {
  const l = new Float32Array(info.frames).fill(NaN);
  const r = new Float32Array(info.frames).fill(NaN);
  decodeStereo(bytes, info, l, r);
  return [l, r];
}

function sine(n: number, cycles: number, amp: number, phase: number): Float32Array {
  return Float32Array.from({ length: n }, (_, k) => amp * Math.sin((2 * Math.PI * cycles * k) / n + phase));
}

function build(frames: number, bits: number, channels: number, ext: boolean): Uint8Array {
  const tone = sine(frames, 1, 0.5, 0);
  const out = new Uint8Array(MAX_PACKET_LEN);
  const len = encodePacket(
    {
      timestamp: 0x0102030405060708n,
      seq: 0xa55a,
      frames,
      rateCode: 3,
      bits,
      channelsIn: channels,
      channelsOut: 0,
    },
    ext ? { streamId: 9, codec: 0 } : null,
    channels === 1 ? [tone] : [tone, tone],
    out,
  );
  expect(len).toBeGreaterThan(0);
  return out.slice(0, len);
}

/** A valid Opus packet of `len` stand-in Opus bytes (a TOC byte, then a counter), stream 0x0b0a. */
function buildOpus(frames: number, channels: number, len: number): Uint8Array {
  const out = new Uint8Array(HEADER_LEN + len + EXT_LEN);
  for (let k = 0; k < len; k++) out[HEADER_LEN + k] = k === 0 ? 0xe8 : (k * 29 + len) & 0x3f;
  const h = { timestamp: 5n, seq: 9, frames, rateCode: 3, bits: 16, channelsIn: channels, channelsOut: 0 };
  expect(encodeOpusPacket(h, 0x0b0a, len, out)).toBe(out.length);
  return out;
}

/** The oracle's reading of a packet with Opus frames (the Opus section of core/src/packet.rs). */
function opusOracle(b: Uint8Array, frames: number, ch: number): string {
  const n = b.length;
  if (n < 25) return 'Truncated';
  const t = n - 8;
  if (b[t] !== 0x54 || b[t + 1] !== 0x55) return 'BadExtension';
  if (b[t + 2] !== 1) return 'UnsupportedVersion';
  if (b[t + 3] === 0) return 'BadFrames';
  if (b[t + 3] !== 1) return 'UnsupportedCodec';
  if (b[12] !== 3) return 'BadRate';
  if (b[13] !== 16) return 'BadBits';
  // The reserved field is the redundant copy's length: it leaves at least one byte of the
  // frame, and both parts are within the PCM16 bound.
  const redundant = b[t + 6] | (b[t + 7] << 8);
  const max = frames * ch * 2;
  if (redundant > max || redundant >= n - 24 || n - 24 - redundant > max) return 'BadOpusPayload';
  return 'Ok';
}

/** A straightforward reading of the layout (same oracle as the Rust tests). */
function oracle(b: Uint8Array): string {
  if (b.length === 63 && b.every((x) => x === 255)) return 'ExitSignal';
  if (b.length > 2072) return 'Oversized';
  if (b.length < 16) return 'Truncated';
  if (b[12] > 6) return 'BadRate';
  const size = b[13] === 16 ? 2 : b[13] === 24 ? 3 : b[13] === 32 ? 4 : 0;
  if (size === 0) return 'BadBits';
  const ch = b[15] === 0 ? b[14] : b[15];
  if (ch !== 1 && ch !== 2) return 'BadChannels';
  const frames = b[10] + 256 * b[11];
  if (frames === 120 || frames === 240) return opusOracle(b, frames, ch);
  if (![32, 64, 128, 256].includes(frames)) return 'BadFrames';
  const end = 16 + frames * ch * size;
  if (b.length < end) return 'Truncated';
  if (b.length === end) return 'Ok';
  if (b.length !== end + 8) return 'TrailingBytes';
  if (b[end] !== 0x54 || b[end + 1] !== 0x55) return 'BadExtension';
  if (b[end + 2] !== 1) return 'UnsupportedVersion';
  if (b[end + 3] !== 0) return 'UnsupportedCodec';
  if (b[end + 6] !== 0 || b[end + 7] !== 0) return 'BadExtension';
  return 'Ok';
}

describe('golden vectors (shared with the Rust tests)', () => {
  it('lists the vectors', () => {
    expect(vectors.valid.length).toBeGreaterThanOrEqual(10);
    expect(vectors.valid.filter((v) => v.opus_payload !== undefined).length).toBeGreaterThanOrEqual(3);
    expect(vectors.invalid.length).toBeGreaterThanOrEqual(25);
  });

  for (const v of vectors.valid) {
    it(`${v.name}: fields, samples and bytes`, () => {
      const bytes = fromHex(v.hex);
      expect(bytes.length).toBe(v.len);
      // At offset 0 (aligned fast paths) and at an odd offset inside a bigger buffer, through a
      // Uint8Array and through a DataView: all must agree with the vector.
      for (const shift of [0, 1, 3]) {
        const big = new Uint8Array(bytes.length + 8).fill(0xcc);
        big.set(bytes, shift);
        for (const src of [big, new DataView(big.buffer)]) {
          const info = newPacketInfo();
          expect(parsePacket(src, shift, bytes.length, info)).toBe(0);
          expect(packetTimestamp(info)).toBe(BigInt(v.header.timestamp));
          expect([
            info.seq,
            info.frames,
            info.rateCode,
            info.bits,
            info.channelsIn,
            info.channelsOut,
          ]).toEqual([
            v.header.seq,
            v.header.frames,
            v.header.rate_code,
            v.header.bits,
            v.header.channels_in,
            v.header.channels_out,
          ]);
          expect(info.channels).toBe(v.channels);
          expect(info.hasExt).toBe(v.ext !== null);
          if (v.ext) expect([info.streamId, info.codec]).toEqual([v.ext.stream_id, v.ext.codec]);
          expect(info.length).toBe(v.len);
          const l = new Float32Array(info.frames).fill(NaN);
          const r = new Float32Array(info.frames).fill(NaN);
          const decoded = decodeStereo(src, info, l, r);
          if (v.opus_payload !== undefined) {
            expect([info.codec, info.bytesPerSample, info.payloadOffset]).toEqual([
              CODEC_OPUS,
              2,
              shift + 16,
            ]);
            expect(toHex(big.subarray(info.payloadOffset, info.payloadOffset + info.payloadLength))).toBe(
              v.opus_payload,
            );
            const redundantAt = info.payloadOffset + info.payloadLength;
            expect(toHex(big.subarray(redundantAt, redundantAt + info.redundantLength))).toBe(
              v.opus_redundant ?? '',
            );
            expect(decoded).toBe(0);
            expect(l.every(Number.isNaN) && r.every(Number.isNaN)).toBe(true);
            continue;
          }
          expect(info.codec).toBe(0);
          expect(decoded).toBe(info.frames);
          if (!v.samples) throw new Error(`${v.name}: a PCM vector lists its samples`);
          const wantR = v.samples[1] ?? v.samples[0];
          for (let k = 0; k < info.frames; k++) {
            expect(f32bits(l[k]), `L[${k}] shift ${shift}`).toBe(f32bits(v.samples[0][k]));
            expect(f32bits(r[k]), `R[${k}] shift ${shift}`).toBe(f32bits(wantR[k]));
          }
        }
      }
      if (v.opus_payload !== undefined) {
        const opus = fromHex(v.opus_payload);
        const redundant = fromHex(v.opus_redundant ?? '');
        expect(v.ext?.codec).toBe(CODEC_OPUS);
        const streamId = v.ext?.stream_id ?? 0;
        for (const shift of [0, 5]) {
          const out = new Uint8Array(MAX_PACKET_LEN + 8).fill(0xee);
          out.set(opus, shift + HEADER_LEN);
          out.set(redundant, shift + HEADER_LEN + opus.length);
          const len = encodeOpusPacket(headerOf(v), streamId, opus.length, out, shift, redundant.length);
          expect(len).toBe(v.len);
          expect(toHex(out.subarray(shift, shift + len))).toBe(v.hex);
          expect(out.subarray(shift + len).every((x) => x === 0xee)).toBe(true);
        }
      }
      if (v.input) {
        const planar = v.input.map((ch) => Float32Array.from(ch, num));
        const ext = v.ext ? { streamId: v.ext.stream_id, codec: v.ext.codec } : null;
        for (const shift of [0, 5]) {
          const out = new Uint8Array(MAX_PACKET_LEN + 8).fill(0xee);
          const len = encodePacket(headerOf(v), ext, planar, out, shift);
          expect(len).toBe(v.len);
          expect(toHex(out.subarray(shift, shift + len))).toBe(v.hex);
        }
        // Plain number arrays (doubles) are rounded to f32 first, as the Rust side sees them.
        const out = new Uint8Array(MAX_PACKET_LEN);
        const len = encodePacket(
          headerOf(v),
          ext,
          v.input.map((ch) => ch.map(num)),
          out,
        );
        expect(toHex(out.subarray(0, len))).toBe(v.hex);
      }
    });
  }

  it('invalid vectors give the named error', () => {
    for (const v of vectors.invalid) {
      const { code } = parse(fromHex(v.hex));
      expect(packetErrorName(code), v.name).toBe(v.error);
    }
  });
});

describe('error codes', () => {
  it('match PacketError::code() in core/src/packet.rs', () => {
    const body = rustSource.slice(rustSource.indexOf('pub const fn code(&self) -> u8'));
    const found = new Map<string, number>();
    for (const m of body.matchAll(/PacketError::(\w+)[^=\n]*=> (\d+),/g)) {
      if (!found.has(m[1])) found.set(m[1], Number(m[2]));
    }
    expect(Object.fromEntries(found)).toEqual({ ...PacketError });
  });
});

describe('malformed input', () => {
  it('every prefix of every valid packet is Truncated, cuts into the trailer TrailingBytes', () => {
    for (const frames of BLOCK_SIZES) {
      for (const bits of FORMATS) {
        for (const channels of [1, 2]) {
          const bytes = build(frames, bits, channels, true);
          const end = HEADER_LEN + frames * channels * (bits / 8);
          for (let cut = 0; cut < bytes.length; cut++) {
            const want = cut < end ? PacketError.Truncated : cut === end ? 0 : PacketError.TrailingBytes;
            expect(parse(bytes.subarray(0, cut)).code, `${bits} ${frames} ${channels} cut ${cut}`).toBe(want);
          }
          expect(parse(bytes).code).toBe(0);
        }
      }
    }
  });

  it('rate code 7 and above, bits other than 16/24/32', () => {
    const base = build(32, 16, 1, false);
    for (let code = 0; code < 256; code++) {
      const b = base.slice();
      b[12] = code;
      expect(parse(b).code).toBe(code <= 6 ? 0 : PacketError.BadRate);
    }
    for (let bits = 0; bits < 256; bits++) {
      const b = base.slice();
      b[13] = bits;
      const want = bits === 16 ? 0 : bits === 24 || bits === 32 ? PacketError.Truncated : PacketError.BadBits;
      expect(parse(b).code).toBe(want);
    }
  });

  it('all 65536 channel byte pairs follow JackTrip’s rule', () => {
    const mono = build(32, 16, 1, false);
    const stereo = build(32, 16, 2, false);
    for (let cin = 0; cin < 256; cin++) {
      for (let cout = 0; cout < 256; cout++) {
        const ch = cout === 0 ? cin : cout;
        for (const [base, have] of [
          [mono, 1],
          [stereo, 2],
        ] as const) {
          const b = base.slice();
          b[14] = cin;
          b[15] = cout;
          const want =
            ch === 0 || ch > 2
              ? PacketError.BadChannels
              : ch === have
                ? 0
                : ch > have
                  ? PacketError.Truncated
                  : PacketError.TrailingBytes;
          const got = parse(b);
          if (got.code !== want) expect(`${cin},${cout} → ${got.code}`).toBe(`${cin},${cout} → ${want}`);
        }
      }
    }
  });

  it('every frames value but 32/64/128/256 (and Opus’s 120/240) is BadFrames', () => {
    const base = build(32, 16, 1, false);
    for (let f = 0; f < 65536; f++) {
      const b = base.slice();
      b[10] = f & 255;
      b[11] = f >> 8;
      // 120/240 are read as Opus: the last 8 bytes are samples, not a trailer.
      const want =
        f === 32
          ? 0
          : BLOCK_SIZES.includes(f)
            ? PacketError.Truncated
            : OPUS_FRAMES.includes(f)
              ? PacketError.BadExtension
              : PacketError.BadFrames;
      if (parse(b).code !== want) expect(`frames ${f}: ${parse(b).code}`).toBe(`frames ${f}: ${want}`);
    }
  });

  it('every trailer byte value', () => {
    const base = build(64, 24, 2, true);
    const t = base.length - EXT_LEN;
    for (let pos = 0; pos < EXT_LEN; pos++) {
      for (let val = 0; val < 256; val++) {
        const b = base.slice();
        b[t + pos] = val;
        const want =
          val === base[t + pos] || pos === 4 || pos === 5
            ? 0
            : pos === 2
              ? PacketError.UnsupportedVersion
              : pos === 3
                ? PacketError.UnsupportedCodec
                : PacketError.BadExtension;
        expect(parse(b).code, `trailer ${pos}=${val}`).toBe(want);
      }
    }
  });

  it('oversized, trailing bytes, JackTrip exit signal', () => {
    const max = build(256, 32, 2, true);
    expect(max.length).toBe(MAX_PACKET_LEN);
    expect(parse(max).code).toBe(0);
    const over = new Uint8Array(MAX_PACKET_LEN + 1);
    over.set(max);
    expect(parse(over).code).toBe(PacketError.Oversized);
    const base = build(32, 16, 1, false);
    for (let extra = 1; extra <= 20; extra++) {
      const b = new Uint8Array(base.length + extra);
      b.set(base);
      expect(parse(b).code).toBe(extra === EXT_LEN ? PacketError.BadExtension : PacketError.TrailingBytes);
    }
    expect(parse(new Uint8Array(63).fill(0xff)).code).toBe(PacketError.ExitSignal);
    const almost = new Uint8Array(63).fill(0xff);
    almost[40] = 0;
    expect(parse(almost).code).toBe(PacketError.BadRate);
    expect(parse(new Uint8Array(64).fill(0xff)).code).toBe(PacketError.BadRate);
    // A length past the end of the array is reported, not thrown.
    expect(parsePacket(base, 10, base.length, newPacketInfo())).toBe(PacketError.Truncated);
  });

  it('seeded mutations agree with the oracle; random bytes never throw and decode in range', () => {
    const prng = new Prng(0xc0ffee);
    const rnd = () => prng.nextU32();
    const l = new Float32Array(256);
    const r = new Float32Array(256);
    const info = newPacketInfo();
    let ok = 0;
    for (let i = 0; i < 20000; i++) {
      const frames = BLOCK_SIZES[rnd() % 4];
      let b = build(frames, FORMATS[rnd() % 3], 1 + (rnd() % 2), rnd() % 2 === 0);
      if (rnd() % 4 === 0) {
        const opusFrames = OPUS_FRAMES[rnd() % 2];
        const channels = 1 + (rnd() % 2);
        b = buildOpus(opusFrames, channels, 1 + (rnd() % (opusFrames * channels * 2)));
      }
      for (let m = rnd() % 3; m > 0; m--) {
        const op = rnd() % 4;
        if (op === 0 && b.length >= 16) b[rnd() % 16] = rnd() & 255;
        else if (op === 1 && b.length > 0) b[rnd() % b.length] = rnd() & 255;
        else if (op === 2) b = b.slice(0, rnd() % (b.length + 1));
        else {
          const n = new Uint8Array(b.length + (rnd() % 12));
          n.set(b);
          for (let k = b.length; k < n.length; k++) n[k] = rnd() & 255;
          b = n;
        }
      }
      const code = parsePacket(b, 0, b.length, info);
      if (packetErrorName(code) !== oracle(b))
        expect([toHex(b), packetErrorName(code)]).toEqual([toHex(b), oracle(b)]);
      if (code === 0) ok++;
    }
    expect(ok).toBeGreaterThan(2000);
    const buf = new Uint8Array(MAX_PACKET_LEN + 64);
    for (let i = 0; i < 100000; i++) {
      const len = rnd() % (buf.length + 1);
      for (let k = 0; k < len; k++) buf[k] = rnd() & 255;
      if (i % 2 === 0 && len >= 16) {
        buf[12] = rnd() % 8;
        buf[13] = [16, 24, 32][rnd() % 3];
        buf[14] = rnd() % 3;
        buf[15] = rnd() % 3;
        const f = BLOCK_SIZES[rnd() % 4];
        buf[10] = f & 255;
        buf[11] = f >> 8;
      }
      const code = parsePacket(buf, 0, len, info);
      const want = oracle(buf.subarray(0, len));
      if (packetErrorName(code) !== want) expect([i, packetErrorName(code)]).toEqual([i, want]);
      if (code === 0) {
        decodeStereo(buf, info, l, r);
        for (let k = 0; k < info.frames; k++) {
          if (!(Math.abs(l[k]) <= 1 && Math.abs(r[k]) <= 1))
            expect([l[k], r[k]]).toEqual('finite in [-1, 1]');
        }
      }
    }
  });
});

describe('round trips', () => {
  it('grid: block size × format × channels × rate, sine within the format’s bound', () => {
    const out = new Uint8Array(MAX_PACKET_LEN);
    for (const frames of BLOCK_SIZES) {
      for (const bits of FORMATS) {
        for (const channels of [1, 2]) {
          for (const rateCode of [3, 2]) {
            const cycles = frames / 32;
            const left = sine(frames, cycles, 0.8, 0.3);
            const right = sine(frames, 2 * cycles, -0.45, 1.1);
            const h = { timestamp: 7, seq: 1, frames, rateCode, bits, channelsIn: channels, channelsOut: 0 };
            const len = encodePacket(h, null, channels === 1 ? [left] : [left, right], out);
            expect(len).toBe(HEADER_LEN + frames * channels * (bits / 8));
            const { code, info } = parse(out.subarray(0, len));
            expect(code).toBe(0);
            expect([info.rateHz, info.channels]).toEqual([rateCode === 3 ? 48000 : 44100, channels]);
            const [l, r] = decode(out, info);
            const wantR = channels === 2 ? right : left;
            let worst = 0;
            for (let k = 0; k < frames; k++) {
              worst = Math.max(worst, Math.abs(l[k] - left[k]), Math.abs(r[k] - wantR[k]));
            }
            expect(worst, `${bits} ${frames} ${channels}`).toBeLessThanOrEqual(BOUND[bits]);
          }
        }
      }
    }
  });

  it('NaN, ±Infinity and out-of-range inputs are mapped as in Rust', () => {
    const specials = [NaN, Infinity, -Infinity, 2, -2, -0];
    const full: Record<number, number> = { 16: 32767 / 32768, 24: 8388607 / 8388608, 32: 1 };
    for (const bits of FORMATS) {
      const input = Float32Array.from({ length: 32 }, (_, k) => specials[k % 6]);
      const out = new Uint8Array(MAX_PACKET_LEN);
      const h = { timestamp: 0, seq: 0, frames: 32, rateCode: 3, bits, channelsIn: 1, channelsOut: 0 };
      const len = encodePacket(h, null, [input], out);
      const { info } = parse(out.subarray(0, len));
      const [l] = decode(out, info);
      const f = full[bits];
      const want = [0, f, -f, f, -f, bits === 32 ? -0 : 0];
      for (let k = 0; k < 32; k++) expect(Object.is(l[k], want[k % 6]), `${bits} ${k}`).toBe(true);
    }
  });

  it('decodes into shorter outputs without writing past them', () => {
    const bytes = build(128, 16, 2, false);
    const { info } = parse(bytes);
    const [fl, fr] = decode(bytes, info);
    const l = new Float32Array(50).fill(NaN);
    const r = new Float32Array(70).fill(NaN);
    decodeStereo(bytes, info, l, r);
    expect(Array.from(l)).toEqual(Array.from(fl.subarray(0, 50)));
    expect(Array.from(r.subarray(0, 50))).toEqual(Array.from(fr.subarray(0, 50)));
    expect(r.subarray(50).every((x) => Number.isNaN(x))).toBe(true);
  });
});

describe('encode errors', () => {
  it('returns minus the error code and leaves the buffer untouched', () => {
    const tone = new Float32Array(256).fill(0.25);
    const out = new Uint8Array(MAX_PACKET_LEN).fill(0xee);
    const h = { timestamp: 1, seq: 1, frames: 128, rateCode: 3, bits: 16, channelsIn: 2, channelsOut: 0 };
    for (const frames of [0, 16, 100, 512]) {
      expect(encodePacket({ ...h, frames }, null, [tone, tone], out)).toBe(-PacketError.BadFrames);
    }
    for (const [channelsIn, channelsOut] of [
      [0, 0],
      [3, 0],
      [1, 255],
      [2, 7],
    ]) {
      expect(encodePacket({ ...h, channelsIn, channelsOut }, null, [tone, tone], out)).toBe(
        -PacketError.BadChannels,
      );
    }
    expect(encodePacket({ ...h, rateCode: 7 }, null, [tone, tone], out)).toBe(-PacketError.BadRate);
    expect(encodePacket({ ...h, bits: 8 }, null, [tone, tone], out)).toBe(-PacketError.BadBits);
    expect(encodePacket(h, null, [tone], out)).toBe(-PacketError.ChannelMismatch);
    expect(encodePacket(h, null, [tone, tone.subarray(0, 127)], out)).toBe(-PacketError.ShortInput);
    expect(encodePacket(h, { streamId: 1, codec: 1 }, [tone, tone], out)).toBe(-PacketError.UnsupportedCodec);
    const needed = HEADER_LEN + 128 * 2 * 2 + EXT_LEN;
    for (let size = 0; size < needed; size++) {
      expect(encodePacket(h, { streamId: 1, codec: 0 }, [tone, tone], out.subarray(0, size))).toBe(
        -PacketError.BufferTooSmall,
      );
    }
    expect(out.every((x) => x === 0xee)).toBe(true);
    expect(encodePacket(h, { streamId: 1, codec: 0 }, [tone, tone], out)).toBe(needed);
  });
});

describe('Opus packets (codec 1)', () => {
  it('every frame size, channel count and payload length round-trips; PCM decode writes nothing', () => {
    const l = new Float32Array(256).fill(NaN);
    const r = new Float32Array(256).fill(NaN);
    const out = new Uint8Array(MAX_PACKET_LEN);
    const info = newPacketInfo();
    for (const frames of OPUS_FRAMES) {
      for (const [channelsIn, channelsOut] of [
        [1, 0],
        [2, 0],
        [2, 1],
        [1, 2],
      ]) {
        const channels = channelsOut === 0 ? channelsIn : channelsOut;
        const most = frames * channels * 2;
        const h = { timestamp: 3, seq: 65535, frames, rateCode: 3, bits: 16, channelsIn, channelsOut };
        for (let len = 1; len <= most; len++) {
          for (let k = 0; k < len; k++) out[HEADER_LEN + k] = (k * 7 + len) & 255;
          const n = encodeOpusPacket(h, len, len, out);
          expect(n).toBe(HEADER_LEN + len + EXT_LEN);
          const code = parsePacket(out, 0, n, info);
          if (code !== 0) expect(`${frames} ${channels} ${len}: ${packetErrorName(code)}`).toBe('Ok');
          if (
            info.codec !== CODEC_OPUS ||
            info.channels !== channels ||
            info.streamId !== len ||
            info.payloadOffset !== HEADER_LEN ||
            info.payloadLength !== len ||
            info.bytesPerSample !== 2 ||
            out[HEADER_LEN + len - 1] !== ((len - 1) * 7 + len) % 256
          ) {
            expect([frames, channels, len, { ...info }]).toBe('an Opus packet of len bytes');
          }
          expect(decodeStereo(out, info, l, r)).toBe(0);
        }
        expect(l.every(Number.isNaN) && r.every(Number.isNaN)).toBe(true);
        // One byte over the bound.
        const over = new Uint8Array(HEADER_LEN + most + 1 + EXT_LEN);
        over.set(buildOpus(frames, channels, most).subarray(0, HEADER_LEN));
        over.set(buildOpus(frames, channels, most).subarray(HEADER_LEN), HEADER_LEN + 1);
        over[14] = channelsIn;
        over[15] = channelsOut;
        expect(parse(over).code).toBe(PacketError.BadOpusPayload);
      }
    }
  });

  it('prefixes, empty payload, no trailer', () => {
    const b = buildOpus(240, 2, 40);
    for (let cut = 0; cut < b.length; cut++) {
      const want = cut < 25 ? PacketError.Truncated : PacketError.BadExtension;
      expect(parse(b.subarray(0, cut)).code, `cut ${cut}`).toBe(want);
    }
    const empty = new Uint8Array(24);
    empty.set(b.subarray(0, 16));
    empty.set(b.subarray(b.length - 8), 16);
    expect(parse(empty).code).toBe(PacketError.Truncated);
    expect(parse(b.subarray(0, b.length - 8)).code).toBe(PacketError.BadExtension);
    expect(parse(buildOpus(240, 2, 960)).code).toBe(0);
  });

  it('every trailer byte; codec 0 on Opus frames is BadFrames, codec 1 on PCM frames UnsupportedCodec', () => {
    for (const frames of OPUS_FRAMES) {
      const base = buildOpus(frames, 1, 30);
      const t = base.length - EXT_LEN;
      for (let pos = 0; pos < EXT_LEN; pos++) {
        for (let val = 0; val < 256; val++) {
          const b = base.slice();
          b[t + pos] = val;
          const want =
            val === base[t + pos] || pos === 4 || pos === 5 || (pos === 6 && val < 30) // a copy of up to 29 of the 30 bytes
              ? 0
              : pos === 6 || pos === 7
                ? PacketError.BadOpusPayload
                : pos === 2
                  ? PacketError.UnsupportedVersion
                  : pos === 3
                    ? val === 0
                      ? PacketError.BadFrames
                      : PacketError.UnsupportedCodec
                    : PacketError.BadExtension;
          expect(parse(b).code, `trailer ${pos}=${val}`).toBe(want);
        }
      }
    }
    const pcm = build(128, 16, 1, true);
    pcm[pcm.length - EXT_LEN + 3] = CODEC_OPUS;
    expect(parse(pcm).code).toBe(PacketError.UnsupportedCodec);
  });

  it('rate, bits and channel bytes', () => {
    const base = buildOpus(120, 1, 30);
    for (let code = 0; code < 256; code++) {
      const b = base.slice();
      b[12] = code;
      expect(parse(b).code, `rate ${code}`).toBe(code === 3 ? 0 : PacketError.BadRate);
    }
    for (let bits = 0; bits < 256; bits++) {
      const b = base.slice();
      b[13] = bits;
      expect(parse(b).code, `bits ${bits}`).toBe(bits === 16 ? 0 : PacketError.BadBits);
    }
    // 44.1 kHz is checked after the trailer, code 7 before it (as for every packet).
    const b = base.slice();
    b[12] = 2;
    b[b.length - EXT_LEN] = 0;
    expect(parse(b).code).toBe(PacketError.BadExtension);
    b[12] = 7;
    expect(parse(b).code).toBe(PacketError.BadRate);
    for (let cin = 0; cin < 256; cin++) {
      for (let cout = 0; cout < 256; cout++) {
        const c = base.slice();
        c[14] = cin;
        c[15] = cout;
        const ch = cout === 0 ? cin : cout;
        const want = ch === 1 || ch === 2 ? 0 : PacketError.BadChannels;
        const got = parse(c).code;
        if (got !== want) expect(`${cin},${cout} → ${got}`).toBe(`${cin},${cout} → ${want}`);
      }
    }
  });

  it('encodeOpusPacket returns minus the error code and leaves the buffer untouched', () => {
    const out = new Uint8Array(MAX_PACKET_LEN).fill(0xee);
    const h = { timestamp: 1n, seq: 1, frames: 240, rateCode: 3, bits: 16, channelsIn: 2, channelsOut: 0 };
    for (const frames of [0, 32, 119, 121, 128, 239, 241, 256, 480]) {
      expect(encodeOpusPacket({ ...h, frames }, 1, 10, out)).toBe(-PacketError.BadFrames);
    }
    for (const rateCode of [0, 2, 4, 6, 7, 255]) {
      expect(encodeOpusPacket({ ...h, rateCode }, 1, 10, out)).toBe(-PacketError.BadRate);
    }
    for (const bits of [0, 8, 24, 32]) {
      expect(encodeOpusPacket({ ...h, bits }, 1, 10, out)).toBe(-PacketError.BadBits);
    }
    for (const [channelsIn, channelsOut] of [
      [0, 0],
      [3, 0],
      [1, 255],
      [2, 7],
    ]) {
      expect(encodeOpusPacket({ ...h, channelsIn, channelsOut }, 1, 10, out)).toBe(-PacketError.BadChannels);
    }
    for (const len of [0, -1, 1.5, NaN, 961, 5000]) {
      expect(encodeOpusPacket(h, 1, len, out)).toBe(-PacketError.BadOpusPayload);
    }
    expect(encodeOpusPacket({ ...h, frames: 120, channelsIn: 1 }, 1, 241, out)).toBe(
      -PacketError.BadOpusPayload,
    );
    // The first failing check wins: frames, then rate, then bits.
    expect(encodeOpusPacket({ ...h, frames: 100, rateCode: 2, bits: 32, channelsIn: 9 }, 1, 0, out)).toBe(
      -PacketError.BadFrames,
    );
    const needed = HEADER_LEN + 50 + EXT_LEN;
    for (let size = 0; size < needed; size++) {
      expect(encodeOpusPacket(h, 1, 50, out.subarray(0, size))).toBe(-PacketError.BufferTooSmall);
    }
    expect(encodeOpusPacket(h, 1, 50, out, out.length - needed + 1)).toBe(-PacketError.BufferTooSmall);
    expect(out.every((x) => x === 0xee)).toBe(true);
    // Exactly large enough; the Opus bytes in between are not touched.
    expect(encodeOpusPacket(h, 1, 50, out.subarray(0, needed))).toBe(needed);
    expect(out.subarray(HEADER_LEN, HEADER_LEN + 50).every((x) => x === 0xee)).toBe(true);
    expect(out.subarray(needed).every((x) => x === 0xee)).toBe(true);
    expect(Array.from(out.subarray(HEADER_LEN + 50, needed))).toEqual([0x54, 0x55, 1, 1, 1, 0, 0, 0]);
  });

  it('encodePacket refuses the Opus codec: Opus goes through encodeOpusPacket', () => {
    const tone = new Float32Array(256);
    const out = new Uint8Array(MAX_PACKET_LEN).fill(0xee);
    const h = { timestamp: 1, seq: 1, frames: 128, rateCode: 3, bits: 16, channelsIn: 1, channelsOut: 0 };
    expect(encodePacket(h, { streamId: 1, codec: CODEC_OPUS }, [tone], out)).toBe(
      -PacketError.UnsupportedCodec,
    );
    expect(encodePacket({ ...h, frames: 120 }, { streamId: 1, codec: CODEC_OPUS }, [tone], out)).toBe(
      -PacketError.BadFrames,
    );
    expect(out.every((x) => x === 0xee)).toBe(true);
  });
});
