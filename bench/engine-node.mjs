// Quick, browser-free measurement of the real WASM engine in Node (the same V8 as Chromium):
// N synthetic PCM16 stereo peers, one packet each per quantum, engine time only (the feeding is
// not timed). For developers iterating on the core; `npm run bench` is the reference figure,
// measured inside the real AudioWorklet.
//
//   node bench/engine-node.mjs [peers=64] [quanta=20000] [wasm=wasm/pkg/tutti_wasm_bg.wasm]

import { readFileSync } from 'node:fs';

const peers = Number(process.argv[2] ?? 64);
const quanta = Number(process.argv[3] ?? 20000);
const wasmPath = process.argv[4] ?? new URL('../wasm/pkg/tutti_wasm_bg.wasm', import.meta.url);
const RING = 1 << 22;

const module = new WebAssembly.Module(readFileSync(wasmPath));
/** @type {Record<string, Record<string, () => void>>} */
const imports = {};
for (const imp of WebAssembly.Module.imports(module)) (imports[imp.module] ??= {})[imp.name] = () => {};
/** @typedef {import('../app/src/audio/engine-core.ts').TuttiExports} TuttiExports */
const e = /** @type {TuttiExports & { __wbindgen_start?: () => void }} */ (
  /** @type {unknown} */ (new WebAssembly.Instance(module, imports).exports)
);
e.__wbindgen_start?.();
const h = e.tutti_create(256, 128, 16, 2, RING, 1 << 16);
for (let s = 0; s < peers; s++) {
  e.tutti_add_peer(h, s);
  e.tutti_set_strip(h, s, 0.5, 0, 0, 0);
}

// JackTrip header + planar PCM16 stereo, 128 frames; 16 different blocks of a sine.
const packets = [];
for (let b = 0; b < 16; b++) {
  const p = new Uint8Array(16 + 512);
  const dv = new DataView(p.buffer);
  dv.setUint16(10, 128, true);
  p.set([3, 16, 2, 2], 12);
  for (let c = 0; c < 2; c++) {
    for (let i = 0; i < 128; i++) {
      dv.setInt16(16 + c * 256 + i * 2, Math.round(9000 * Math.sin((b * 128 + i) * 0.05)), true);
    }
  }
  packets.push(p);
}

const mem = () => new Uint8Array(e.memory.buffer, e.tutti_inbound_ptr(h), RING);
let ring = mem();
let io = new Uint32Array(e.memory.buffer, e.tutti_io_ptr(h), 8);
let write = 0;
/** @param {number} q quantum index */
function feed(q) {
  for (let s = 0; s < peers; s++) {
    const p = packets[q % 16];
    p[8] = q & 255;
    p[9] = (q >> 8) & 255;
    let pos = write & (RING - 1);
    if (pos + 8 + p.length > RING) {
      ring[pos] = 0xff; // wrap marker
      ring[pos + 1] = 0xff;
      write += RING - pos;
      pos = 0;
    }
    ring[pos] = p.length & 255;
    ring[pos + 1] = p.length >> 8;
    ring[pos + 2] = s & 255;
    ring[pos + 3] = s >> 8;
    ring.fill(0, pos + 4, pos + 8);
    ring.set(p, pos + 8);
    write += 8 + ((p.length + 3) & ~3);
  }
  io[1] = write >>> 0;
}

const warm = 2000;
let ns = 0;
for (let q = 0; q < warm + quanta; q++) {
  feed(q);
  const t = performance.now();
  e.tutti_process(h, q * 128, 0, 0);
  if (q >= warm) ns += (performance.now() - t) * 1e6;
}
const perPeer = ns / quanta / peers;
console.log(JSON.stringify({ peers, quanta, wasm_ns_per_peer_quantum: Math.round(perPeer * 10) / 10 }));
