// Exporting a recording: one WAV per track ("stem") and a zip of them all, as Blobs built from
// per-chunk parts. Every stem starts at frame 0 of the recording and lasts its full `frames`, with
// silence where the participant was absent: dropped into a DAW at the same position, the stems
// line up sample for sample. Memory stays flat: chunks are read a few at a time (store.ts), and
// the parts are folded into intermediate Blobs every few MB so the browser can keep them out of
// the JS heap.

import { crc32Final, crc32Init, crc32Update } from './crc32';
import { trackChunks, type Chunk, type RecordingMeta, type TrackMeta } from './store';
import { bytesPerSample, encodeSamples, wavHeader, wavTrailer, type WavFormat } from './wav';
import { zipBlob } from './zip';

export interface Stem {
  name: string;
  blob: Blob;
  /** CRC-32 of the whole file (zip.ts uses it instead of reading the Blob back). */
  crc32: number;
  /** Chunks (or parts of them) left out: malformed, overlapping or past the recording's end. */
  dropped: number;
}

const NAME_MAX = 40;
const FOLD_BYTES = 8 << 20;
const SILENCE = new Uint8Array(1 << 20);

/** Keeps [A-Za-z0-9 _.-] (anything else becomes '_'), no leading or trailing dots or spaces,
 * at most `max` characters; `fallback` when nothing is left. Names are untrusted user text. */
export function safeName(text: string, fallback: string, max = NAME_MAX): string {
  const s = text
    .replace(/[^A-Za-z0-9 _.-]+/g, '_')
    .replace(/\s+/g, ' ')
    .slice(0, max)
    .replace(/^[ ._]+|[ ._]+$/g, '');
  return s === '' ? fallback : s;
}

const pad2 = (n: number): string => String(n).padStart(2, '0');

/** `yyyy-mm-dd-hhmm` in local time. */
export function stamp(ms: number): string {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}-${pad2(d.getHours())}${pad2(d.getMinutes())}`;
}

function baseName(meta: RecordingMeta): string {
  return `${safeName(meta.room, 'recording', 64)}-${stamp(meta.startedAt)}`;
}

/** `<room>-<yyyy-mm-dd-hhmm>-<nn>-<track name>.wav`, nn = the track's position from 01. */
export function stemFileName(meta: RecordingMeta, track: TrackMeta): string {
  const pos =
    Math.max(
      0,
      meta.tracks.findIndex((t) => t.track === track.track),
    ) + 1;
  return `${baseName(meta)}-${pad2(pos)}-${safeName(track.name, track.kind)}.wav`;
}

export function zipFileName(meta: RecordingMeta): string {
  return `${baseName(meta)}.zip`;
}

/** Collects a file's parts, its CRC and its size, folding parts into Blobs every few MB. */
class FileBuilder {
  private crc = crc32Init();
  private parts: BlobPart[] = [];
  private pending = 0;
  private readonly folded: Blob[] = [];

  add(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.crc = crc32Update(this.crc, bytes);
    // Blob construction copies the bytes (the view's range only), so views into chunks and the
    // shared silence are safe to hand over; they are released at the next fold.
    this.parts.push(bytes as Uint8Array<ArrayBuffer>);
    this.pending += bytes.length;
    if (this.pending >= FOLD_BYTES) this.fold();
  }

  silence(bytes: number): void {
    while (bytes > 0) {
      const n = Math.min(bytes, SILENCE.length);
      this.add(SILENCE.subarray(0, n));
      bytes -= n;
    }
  }

  private fold(): void {
    this.folded.push(new Blob(this.parts));
    this.parts = [];
    this.pending = 0;
  }

  finish(type: string): { blob: Blob; crc32: number } {
    this.fold();
    return { blob: new Blob(this.folded, { type }), crc32: crc32Final(this.crc) };
  }
}

/** A chunk's samples converted to `channels` (mono to both sides; stereo averaged to mono). */
function samplesOf(ch: Chunk, skip: number, frames: number, channels: 1 | 2): Float32Array {
  const src = new Float32Array(ch.data, skip * ch.channels * 4, frames * ch.channels);
  if (ch.channels === channels) return src;
  const out = new Float32Array(frames * channels);
  if (channels === 2) {
    for (let i = 0; i < frames; i++) out[2 * i] = out[2 * i + 1] = src[i]!;
  } else {
    for (let i = 0; i < frames; i++) out[i] = 0.5 * (src[2 * i]! + src[2 * i + 1]!);
  }
  return out;
}

/**
 * One track as a WAV file of the recording's full length. Chunks are placed by `startFrame`;
 * gaps are silence; a chunk overlapping what is already written loses its overlap, frames past
 * `meta.frames` are cut, malformed chunks are dropped (all counted in `dropped`).
 */
export async function exportStem(
  meta: RecordingMeta,
  track: TrackMeta,
  format: WavFormat = 'f32',
): Promise<Stem> {
  const channels = track.channels;
  const total = meta.frames;
  const frameBytes = channels * bytesPerSample(format);
  const file = new FileBuilder();
  file.add(wavHeader(format, channels, meta.sampleRate, total));
  let at = 0; // frames written
  let dropped = 0;
  for await (const ch of trackChunks(meta.id, track.track)) {
    const valid =
      (ch.channels === 1 || ch.channels === 2) &&
      Number.isInteger(ch.startFrame) &&
      ch.startFrame >= 0 &&
      Number.isInteger(ch.frames) &&
      ch.frames >= 0 &&
      ch.data instanceof ArrayBuffer &&
      ch.data.byteLength >= ch.frames * ch.channels * 4;
    if (!valid) {
      dropped++;
      continue;
    }
    const start = Math.max(ch.startFrame, at);
    const end = Math.min(ch.startFrame + ch.frames, total);
    if (start > ch.startFrame || end < ch.startFrame + ch.frames) dropped++;
    if (end <= start) continue;
    if (start > at) file.silence((start - at) * frameBytes);
    file.add(encodeSamples(format, samplesOf(ch, start - ch.startFrame, end - start, channels)));
    at = end;
  }
  if (total > at) file.silence((total - at) * frameBytes);
  file.add(wavTrailer(format, channels, total));
  const { blob, crc32 } = file.finish('audio/wav');
  return { name: stemFileName(meta, track), blob, crc32, dropped };
}

/** Every track's stem in one zip (stored, not compressed). `onTrack` reports progress. */
export async function exportZip(
  meta: RecordingMeta,
  format: WavFormat = 'f32',
  onTrack?: (done: number, total: number) => void,
): Promise<{ name: string; blob: Blob; dropped: number }> {
  const entries = [];
  let dropped = 0;
  const modified = new Date(meta.startedAt);
  for (let i = 0; i < meta.tracks.length; i++) {
    onTrack?.(i, meta.tracks.length);
    const stem = await exportStem(meta, meta.tracks[i]!, format);
    dropped += stem.dropped;
    entries.push({ name: stem.name, data: stem.blob, crc32: stem.crc32, modified });
  }
  onTrack?.(meta.tracks.length, meta.tracks.length);
  return { name: zipFileName(meta), blob: await zipBlob(entries), dropped };
}

/** Saves `blob` as a download named `name` (an <a download> with an object URL, revoked after). */
export function download(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.rel = 'noopener';
  a.style.display = 'none';
  document.body.append(a);
  a.click();
  a.remove();
  // The download has taken its reference by the time the click's task is over; a minute is ample.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
