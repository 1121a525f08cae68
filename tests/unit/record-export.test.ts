// WAV and zip writing for recordings: headers byte for byte, samples back through an independent
// reader, CRC-32 against its check value, zip structure read from the specification, and
// `unzip -t` on the written archives (scripts/setup.sh installs it for the tests).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { crc32, crc32Final, crc32Init, crc32Update } from '../../app/src/record/crc32';
import { safeName, stamp } from '../../app/src/record/stems';
import { formatBytes, formatDuration, formatStorage } from '../../app/src/record/format';
import { encodeWav, wavHeader, WavTooLargeError } from '../../app/src/record/wav';
import { blobCrc32, dosDateTime, zipBlob } from '../../app/src/record/zip';
import { crcBitwise, readWav, readZip } from '../browser/lib/record-readers.mjs';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s.replace(/\s+/g, ''), 'hex'));

describe('WAV header and samples', () => {
  // Each file byte for byte: RIFF header, fmt (and fact for float) chunk, data.
  it.each([
    {
      name: 'float32 mono: 58-byte header with fact chunk, samples as IEEE floats',
      format: 'f32',
      channels: 1,
      rate: 48000,
      samples: [0.5, -1],
      want: `
        52494646 3a000000 57415645
        666d7420 12000000 0300 0100 80bb0000 00ee0200 0400 2000 0000
        66616374 04000000 02000000
        64617461 08000000 0000003f 000080bf`,
    },
    {
      name: 'PCM16 stereo: 44-byte header; round(x*32767), ties away from zero, clipped',
      format: 'pcm16',
      channels: 2,
      rate: 44100,
      samples: [0, 1, -1, 0.5, 2, -2, -0.5, 0.25],
      want: `
        52494646 34000000 57415645
        666d7420 10000000 0100 0200 44ac0000 10b10200 0400 1000
        64617461 10000000
        0000 ff7f 0180 0040 ff7f 0180 00c0 0020`,
    },
    {
      name: 'PCM24 mono with an odd data size: pad byte counted in RIFF size, not in data size',
      format: 'pcm24',
      channels: 1,
      rate: 48000,
      samples: [1, -0.5, 3],
      want: `
        52494646 2e000000 57415645
        666d7420 10000000 0100 0100 80bb0000 80320200 0300 1800
        64617461 09000000
        ffff7f 0000c0 ffff7f 00`,
    },
  ] as const)('$name', ({ format, channels, rate, samples, want }) => {
    expect(hex(encodeWav(format, channels, rate, new Float32Array(samples)))).toBe(hex(bytes(want)));
  });

  it('PCM24 writes NaN as 0 and -Infinity as negative full scale', () => {
    const odd = encodeWav('pcm24', 1, 48000, new Float32Array([NaN, -Infinity]));
    expect(hex(odd.subarray(44))).toBe('000000010080');
  });

  it('refuses files past 4 GiB with a clear error, accepts the largest that fits', () => {
    // float32 stereo: 8 bytes a frame; the RIFF size is 50 + data.
    const fits = Math.floor((0xffffffff - 50) / 8);
    expect(() => wavHeader('f32', 2, 48000, fits)).not.toThrow();
    expect(() => wavHeader('f32', 2, 48000, fits + 1)).toThrow(WavTooLargeError);
    expect(() => wavHeader('f32', 2, 48000, fits + 1)).toThrow(/4 GiB/);
    expect(() => wavHeader('pcm16', 3, 48000, 1)).toThrow(RangeError);
  });

  it('a 440 Hz sine written and read back: float32 exact, PCM within half a step', () => {
    const rate = 48000;
    const frames = 4800;
    const x = new Float32Array(frames * 2);
    for (let i = 0; i < frames; i++) {
      x[2 * i] = 0.8 * Math.sin((2 * Math.PI * 440 * i) / rate);
      x[2 * i + 1] = -x[2 * i]!;
    }
    for (const [format, bits, tag, step] of [
      ['f32', 32, 3, 0],
      ['pcm24', 24, 1, 1 / 8388607],
      ['pcm16', 16, 1, 1 / 32767],
    ] as const) {
      const w = readWav(encodeWav(format, 2, rate, x));
      expect(w.formatTag).toBe(tag);
      expect(w.bits).toBe(bits);
      expect(w.channels).toBe(2);
      expect(w.sampleRate).toBe(rate);
      expect(w.byteRate).toBe(rate * 2 * (bits / 8));
      expect(w.frames).toBe(frames);
      expect(w.chunkIds).toEqual(format === 'f32' ? ['fmt ', 'fact', 'data'] : ['fmt ', 'data']);
      if (format === 'f32') expect(w.factFrames).toBe(frames);
      let worst = 0;
      for (let i = 0; i < x.length; i++) {
        // The reader divides by 2^(bits-1); the writer scaled by 2^(bits-1) - 1.
        const back = step === 0 ? w.samples[i]! : w.samples[i]! * (1 / step + 1) * step;
        worst = Math.max(worst, Math.abs(back - x[i]!));
      }
      if (step === 0) expect(worst).toBe(0);
      else expect(worst).toBeLessThanOrEqual(step / 2 + 1e-9);
    }
  });
});

describe('CRC-32', () => {
  it('matches the check value and the bitwise definition, also fed in pieces', () => {
    const check = new TextEncoder().encode('123456789');
    expect(crc32(check)).toBe(0xcbf43926);
    expect(crcBitwise(check)).toBe(0xcbf43926);
    expect(crc32(new Uint8Array(0))).toBe(0);
    const data = new Uint8Array(1003);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7919 + 13) & 0xff;
    let s = crc32Init();
    for (const cut of [
      [0, 1],
      [1, 6],
      [6, 500],
      [500, 1003],
    ])
      s = crc32Update(s, data.subarray(cut[0], cut[1]));
    expect(crc32Final(s)).toBe(crcBitwise(data));
    expect(crc32(data)).toBe(crcBitwise(data));
  });

  it('of a Blob, streamed', async () => {
    const data = new Uint8Array(300_000).map((_, i) => (i * 31) & 0xff);
    expect(await blobCrc32(new Blob([data.subarray(0, 1000), data.subarray(1000)]))).toBe(crcBitwise(data));
  });
});

describe('zip', () => {
  const when = new Date(2026, 10, 21, 17, 42, 10);
  const files = [
    { name: 'one.txt', text: '123456789' },
    { name: 'zwei-ü.txt', text: 'hello, zip\n'.repeat(50) },
  ];
  const entries = (withCrc: boolean) =>
    files.map((f) => ({
      name: f.name,
      data: new Blob([f.text]),
      crc32: withCrc ? crc32(new TextEncoder().encode(f.text)) : undefined,
      modified: when,
    }));

  for (const zip64 of ['auto', 'always'] as const) {
    it(`two stored files (${zip64 === 'always' ? 'ZIP64' : 'classic'}): headers, offsets, CRCs`, async () => {
      const blob = await zipBlob(entries(zip64 === 'auto'), { zip64 });
      const b = new Uint8Array(await blob.arrayBuffer());
      const z = readZip(b);
      expect(z.zip64).toBe(zip64 === 'always');
      expect(z.entries.map((e) => e.name)).toEqual(files.map((f) => f.name));
      expect(z.entries[0]!.localOffset).toBe(0);
      expect(z.entries[0]!.crc).toBe(0xcbf43926);
      for (let i = 0; i < files.length; i++) {
        const e = z.entries[i]!;
        expect(e.method).toBe(0);
        expect(e.flags).toBe(0x0800);
        expect(new TextDecoder().decode(e.data)).toBe(files[i]!.text);
      }
      const v = new DataView(b.buffer);
      // The local header's date and time fields: 2026-11-21 17:42:10.
      expect(v.getUint16(10, true)).toBe((17 << 11) | (42 << 5) | 5);
      expect(v.getUint16(12, true)).toBe((46 << 9) | (11 << 5) | 21);
      if (zip64 === 'auto') {
        // Second local header right after the first entry: 30 + name + data.
        expect(z.entries[1]!.localOffset).toBe(30 + 7 + 9);
        expect(b.length).toBe(30 + 7 + 9 + 30 + 11 + 550 + 46 + 7 + 46 + 11 + 22);
      }

      const dir = mkdtempSync(join(tmpdir(), 'tutti-zip-'));
      try {
        const path = join(dir, 'test.zip');
        writeFileSync(path, b);
        const out = execFileSync('unzip', ['-t', path], { encoding: 'utf8' });
        expect(out).toMatch(/No errors detected/);
        expect(execFileSync('unzip', ['-p', path, 'one.txt'], { encoding: 'utf8' })).toBe('123456789');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it('refuses duplicate and empty names', async () => {
    await expect(
      zipBlob([
        { name: 'a', data: new Blob([]) },
        { name: 'a', data: new Blob([]) },
      ]),
    ).rejects.toThrow(/two zip entries/);
    await expect(zipBlob([{ name: '', data: new Blob([]) }])).rejects.toThrow(RangeError);
  });

  it('DOS dates clamp before 1980', () => {
    expect(dosDateTime(new Date(1970, 0, 1))).toEqual({ date: 33, time: 0 });
  });
});

describe('file names', () => {
  it('keep [A-Za-z0-9 _.-], are capped and never empty', () => {
    expect(safeName('Ann (bass)', 'peer')).toBe('Ann _bass');
    expect(safeName('../../etc/passwd', 'peer')).toBe('etc_passwd');
    expect(safeName('日本語', 'peer')).toBe('peer');
    expect(safeName('   ', 'mix')).toBe('mix');
    expect(safeName('x'.repeat(100), 'peer')).toHaveLength(40);
    expect(stamp(new Date(2026, 0, 2, 3, 4).getTime())).toBe('2026-01-02-0304');
  });
});

describe('figures on the recordings page', () => {
  it('durations, sizes and storage', () => {
    expect(formatDuration(0)).toBe('0:00');
    expect(formatDuration(59.99)).toBe('0:59');
    expect(formatDuration(187)).toBe('3:07');
    expect(formatDuration(3723)).toBe('1:02:03');
    expect(formatDuration(NaN)).toBe('0:00');
    expect(formatBytes(400_000)).toBe('0.4 MB');
    expect(formatBytes(12_345_678)).toBe('12 MB');
    expect(formatBytes(1.5e9)).toBe('1.5 GB');
    expect(formatBytes(-1)).toBe('0.0 MB');
    expect(formatStorage({ usage: 52_000_000, quota: 120e9 })).toBe('52 MB used of 120 GB available');
    expect(formatStorage({})).toBeNull();
  });
});
