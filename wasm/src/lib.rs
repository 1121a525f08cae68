//! Tutti's engine for the AudioWorklet: a numbers-only WebAssembly API.
//!
//! Every export takes and returns plain numbers (handles are pointers into linear memory), so the
//! worklet instantiates the module with no generated glue, no `TextDecoder` and no `fetch` — none
//! of which exist in `AudioWorkletGlobalScope`.
//!
//! The worklet creates one host with [`tutti_create`], then asks for the addresses of the buffers
//! it shares with the engine through linear memory: the inbound and outbound ring mirrors (the
//! data areas of the SharedArrayBuffer rings, copied in and out by the worklet), the input and
//! output quanta, the stats block, the histogram block, and the I/O words (ring counters passed
//! in and out). Per quantum it copies new inbound bytes into the mirror, writes the counters and
//! input, calls [`tutti_process`] (with the wall clock, for the capture interval), and copies the
//! output and any new outbound bytes back. Every few quanta it has the stats block filled
//! ([`tutti_write_stats`]), about once a second the histogram block ([`tutti_write_histograms`]),
//! and copies them into their SharedArrayBuffers.
//!
//! Peer join ([`tutti_add_peer`]) allocates and is meant for the worklet's message handler, not
//! its `process()`; everything called from `process()` is allocation-free.
//!
//! Linear memory grows only inside [`tutti_create`] and [`tutti_add_peer`]: typed-array views on
//! it must be re-created after those calls.

use tutti_core::engine::{Engine, EngineConfig, Peer, QUANTUM};
use tutti_core::jitter::BufferMode;
use tutti_core::layer::Layer;
use tutti_core::packet::SampleFormat;
use tutti_core::probe::ProbeState;
use tutti_core::ring;
use wasm_bindgen::prelude::wasm_bindgen;

mod opus;

/// I/O word: inbound ring read counter (engine → host after process).
pub const IO_IN_READ: usize = 0;
/// I/O word: inbound ring write counter (host → engine before process).
pub const IO_IN_WRITE: usize = 1;
/// I/O word: outbound ring read counter (host → engine before process).
pub const IO_OUT_READ: usize = 2;
/// I/O word: outbound ring write counter (engine → host after process).
pub const IO_OUT_WRITE: usize = 3;
/// I/O word: inbound records read by the last process call (engine → host).
pub const IO_RECORDS: usize = 4;
/// I/O word: inbound ring resynchronisations in the last process call (engine → host).
pub const IO_RESYNCS: usize = 5;
/// I/O word: outgoing packets the outbound ring refused in the last process call.
pub const IO_SEND_DROPPED: usize = 6;
/// I/O word: bytes of those refused packets.
pub const IO_SEND_DROPPED_BYTES: usize = 7;
/// I/O words in all.
pub const IO_LEN: usize = 8;

/// Everything one worklet shares with its engine.
pub struct Host {
    engine: Engine,
    inbound: Vec<u8>,
    outbound: Vec<u8>,
    input_l: [f32; QUANTUM],
    input_r: [f32; QUANTUM],
    output_l: [f32; QUANTUM],
    output_r: [f32; QUANTUM],
    stats: Vec<f64>,
    histograms: Vec<f64>,
    io: [u32; IO_LEN],
}

/// The host behind a handle from [`tutti_create`].
///
/// A handle is the address of a leaked `Box<Host>`; the worklet passes back only handles it got
/// from `tutti_create` and never uses one after `tutti_destroy`. Zero (a failed create) is
/// refused here.
fn host(handle: u32) -> Option<&'static mut Host> {
    if handle == 0 {
        return None;
    }
    // SAFETY: non-zero handles come only from `tutti_create` (Box::into_raw) and are not used
    // after `tutti_destroy`, so the pointer is live, aligned and uniquely borrowed by this call
    // (the worklet is single-threaded).
    unsafe { (handle as usize as *mut Host).as_mut() }
}

/// The address of the buffer `field` picks from the host behind `handle`, as the worklet
/// reads it (0 for no host).
fn address<T>(handle: u32, field: impl FnOnce(&Host) -> &[T]) -> u32 {
    host(handle).map_or(0, |h| field(h).as_ptr() as usize as u32)
}

/// Channel `channel` of a stereo pair: 0 left, anything else right.
fn pick<'a, T>(channel: u32, left: &'a [T], right: &'a [T]) -> &'a [T] {
    if channel == 0 {
        left
    } else {
        right
    }
}

fn sample_format(bits: u32) -> Option<SampleFormat> {
    match bits {
        16 => Some(SampleFormat::Pcm16),
        24 => Some(SampleFormat::Pcm24),
        32 => Some(SampleFormat::Float32),
        _ => None,
    }
}

/// Creates an engine and its shared buffers. Returns a handle, or 0 if a parameter is invalid
/// (peers 1..=256; block 32/64/128/256; bits 16/24/32; channels 1/2; ring sizes powers of two of
/// at least `ring::MIN_CAPACITY` bytes). Allocates.
#[wasm_bindgen]
pub fn tutti_create(
    max_peers: u32,
    block_frames: u32,
    bits: u32,
    capture_channels: u32,
    inbound_bytes: u32,
    outbound_bytes: u32,
) -> u32 {
    let Some(format) = sample_format(bits) else {
        return 0;
    };
    let config = EngineConfig {
        max_peers: max_peers as usize,
        block_frames: u16::try_from(block_frames).unwrap_or(0),
        format,
        capture_channels: u8::try_from(capture_channels).unwrap_or(0),
        ..EngineConfig::default()
    };
    let ring_ok = |n: u32| ring::is_valid_capacity(n as usize);
    if max_peers == 0
        || config.validate().is_err()
        || !ring_ok(inbound_bytes)
        || !ring_ok(outbound_bytes)
    {
        return 0;
    }
    let engine = Engine::new(config);
    let stats = vec![0.0; engine.stats_len()];
    let histograms = vec![0.0; engine.histograms_len()];
    let host = Box::new(Host {
        engine,
        inbound: vec![0; inbound_bytes as usize],
        outbound: vec![0; outbound_bytes as usize],
        input_l: [0.0; QUANTUM],
        input_r: [0.0; QUANTUM],
        output_l: [0.0; QUANTUM],
        output_r: [0.0; QUANTUM],
        stats,
        histograms,
        io: [0; IO_LEN],
    });
    Box::into_raw(host) as usize as u32
}

/// Frees an engine. The handle must not be used afterwards.
#[wasm_bindgen]
pub fn tutti_destroy(handle: u32) {
    if let Some(h) = host(handle) {
        // SAFETY: see `host`; this is the one place that takes the Box back.
        drop(unsafe { Box::from_raw(h as *mut Host) });
    }
}

/// Address of the inbound ring mirror (as many bytes as the ring's data area).
#[wasm_bindgen]
pub fn tutti_inbound_ptr(handle: u32) -> u32 {
    address(handle, |h| &h.inbound)
}

/// Address of the outbound ring mirror.
#[wasm_bindgen]
pub fn tutti_outbound_ptr(handle: u32) -> u32 {
    address(handle, |h| &h.outbound)
}

/// Address of input channel `channel` (0 left, 1 right): QUANTUM f32.
#[wasm_bindgen]
pub fn tutti_input_ptr(handle: u32, channel: u32) -> u32 {
    address(handle, |h| pick(channel, &h.input_l, &h.input_r))
}

/// Address of output channel `channel` (0 left, 1 right): QUANTUM f32.
#[wasm_bindgen]
pub fn tutti_output_ptr(handle: u32, channel: u32) -> u32 {
    address(handle, |h| pick(channel, &h.output_l, &h.output_r))
}

/// Address of the stats block (`tutti_stats_len` f64, layout in `tutti_core::stats`).
#[wasm_bindgen]
pub fn tutti_stats_ptr(handle: u32) -> u32 {
    address(handle, |h| &h.stats)
}

/// Address of the histogram block (`tutti_histograms_len` f64, layout in
/// `tutti_core::latency`).
#[wasm_bindgen]
pub fn tutti_histograms_ptr(handle: u32) -> u32 {
    address(handle, |h| &h.histograms)
}

/// Values of the histogram block this engine writes (globals, capture, one row per slot).
#[wasm_bindgen]
pub fn tutti_histograms_len(handle: u32) -> u32 {
    host(handle).map_or(0, |h| h.engine.histograms_len() as u32)
}

/// Fills the histogram block from the engine's latency histograms (the worklet then copies it
/// out). Real-time safe; costs a pass over every slot's bins, so about once a second.
#[wasm_bindgen]
pub fn tutti_write_histograms(handle: u32) {
    if let Some(h) = host(handle) {
        h.engine.write_histograms(&mut h.histograms);
    }
}

/// Sets the clock offset of the peer in `slot` (our wall clock − the peer's, µs; NaN or any
/// non-finite value: unknown). Returns 1, or 0 if no peer sits in `slot`.
#[wasm_bindgen]
pub fn tutti_set_clock_offset(handle: u32, slot: u32, offset_us: f64) -> u32 {
    let Some(h) = host(handle) else { return 0 };
    let offset = offset_us.is_finite().then(|| offset_us.round() as i64);
    u32::from(h.engine.set_clock_offset(slot as usize, offset).is_ok())
}

/// Empties every latency histogram (each peer's stages and the capture interval).
#[wasm_bindgen]
pub fn tutti_reset_latency(handle: u32) {
    if let Some(h) = host(handle) {
        h.engine.reset_latency();
    }
}

/// Starts the round-trip probe towards the peer in `slot` with `clicks` clicks (1..=16).
/// Returns 1, or 0 if no peer sits in `slot`.
#[wasm_bindgen]
pub fn tutti_start_probe(handle: u32, slot: u32, clicks: u32) -> u32 {
    let Some(h) = host(handle) else { return 0 };
    u32::from(h.engine.start_probe(slot as usize, clicks as usize).is_ok())
}

/// Stops the round-trip probe (its results stay in the stats block).
#[wasm_bindgen]
pub fn tutti_stop_probe(handle: u32) {
    if let Some(h) = host(handle) {
        h.engine.stop_probe();
    }
}

/// Sends the peer in `slot` its own stream back for `ms` milliseconds (0 stops), everyone else
/// keeping our input. Returns 1, or 0 if no peer sits in `slot`.
#[wasm_bindgen]
pub fn tutti_set_echo(handle: u32, slot: u32, ms: u32) -> u32 {
    let Some(h) = host(handle) else { return 0 };
    u32::from(h.engine.set_echo(slot as usize, ms).is_ok())
}

/// The devices' output and input latency, µs (NaN: unknown).
#[wasm_bindgen]
pub fn tutti_set_device_latency(handle: u32, output_us: f64, input_us: f64) {
    if let Some(h) = host(handle) {
        h.engine.set_device_latency(output_us, input_us);
    }
}

/// Address of the I/O words (`IO_LEN` u32: ring counters in and out).
#[wasm_bindgen]
pub fn tutti_io_ptr(handle: u32) -> u32 {
    address(handle, |h| &h.io)
}

/// Builds a peer (with an Opus decoder when the host linked the codec module) and puts it in
/// `slot`. Returns 1, or 0 if the slot does not exist. Allocates: call it from the message
/// handler, not from `process()`.
#[wasm_bindgen]
pub fn tutti_add_peer(handle: u32, slot: u32) -> u32 {
    let Some(h) = host(handle) else { return 0 };
    let mut peer = Peer::new(h.engine.config());
    if let Some(decoder) = opus::ImportedDecoder::new() {
        peer.set_decoder(Box::new(decoder));
    }
    match h.engine.insert_peer(slot as usize, peer) {
        Ok(_displaced) => 1,
        Err(_) => 0,
    }
}

/// Removes the peer in `slot` and frees it. Returns 1 if there was one.
#[wasm_bindgen]
pub fn tutti_remove_peer(handle: u32, slot: u32) -> u32 {
    let Some(h) = host(handle) else { return 0 };
    u32::from(h.engine.remove_peer(slot as usize).is_some())
}

/// The peer in `slot` takes layer `code` of our stream (0 as sent, 1 Opus 128, 2 Opus 64:
/// `tutti_core::layer::Layer::code`) from the next block on. The first time an Opus layer is
/// taken its encoder is made in the codec module (allocates: call it from the message handler,
/// not from `process()`). Returns 1; 0 if no peer sits in `slot`, the code names no layer, or
/// the host has no codec module.
#[wasm_bindgen]
pub fn tutti_set_send_layer(handle: u32, slot: u32, code: u32) -> u32 {
    let Some(h) = host(handle) else { return 0 };
    let Some(layer) = Layer::from_code(code) else {
        return 0;
    };
    if !h.engine.can_send(layer) {
        let made = layer
            .opus()
            .and_then(|(bitrate, _)| opus::ImportedEncoder::new(bitrate))
            .map(|encoder| h.engine.set_encoder(layer, Box::new(encoder)));
        if !matches!(made, Some(Ok(()))) {
            return 0;
        }
    }
    u32::from(h.engine.set_send_layer(slot as usize, layer).is_ok())
}

/// Sets a peer's strip. Returns 1, or 0 if no peer sits in `slot`.
#[wasm_bindgen]
pub fn tutti_set_strip(handle: u32, slot: u32, gain: f32, pan: f32, mute: u32, solo: u32) -> u32 {
    let Some(h) = host(handle) else { return 0 };
    u32::from(
        h.engine
            .set_strip(slot as usize, gain, pan, mute != 0, solo != 0)
            .is_ok(),
    )
}

/// Keeps (1) or stops keeping (0) each peer's pre-fader quantum for [`tutti_stem_ptr`].
#[wasm_bindgen]
pub fn tutti_set_recording(handle: u32, on: u32) {
    if let Some(h) = host(handle) {
        h.engine.set_recording(on != 0);
    }
}

/// Address of channel `channel` (0 left, 1 right) of the pre-fader quantum the peer in `slot`
/// played last (QUANTUM f32, written by `tutti_process` while recording), or 0 for an empty slot.
/// The address stays valid until that peer is removed; views on it must be re-made after memory
/// grows, like every other view.
#[wasm_bindgen]
pub fn tutti_stem_ptr(handle: u32, slot: u32, channel: u32) -> u32 {
    let Some(h) = host(handle) else { return 0 };
    h.engine
        .stem(slot as usize)
        .map_or(0, |(l, r)| pick(channel, l, r).as_ptr() as usize as u32)
}

/// Sets the master gain (linear).
#[wasm_bindgen]
pub fn tutti_set_master(handle: u32, gain: f32) {
    if let Some(h) = host(handle) {
        h.engine.set_master_gain(gain);
    }
}

/// Sets the jitter-buffer mode: `fixed` 0 → adaptive between `floor` and `ceiling` frames;
/// `fixed` 1 → a fixed depth of `packets` packets.
#[wasm_bindgen]
pub fn tutti_set_buffer(handle: u32, fixed: u32, floor: u32, ceiling: u32, packets: u32) {
    if let Some(h) = host(handle) {
        let mode = if fixed != 0 {
            BufferMode::Fixed { packets }
        } else {
            BufferMode::Adaptive {
                floor_frames: floor,
                ceiling_frames: ceiling.max(floor),
            }
        };
        h.engine.set_buffer_mode(mode);
    }
}

/// Runs one quantum at local time `now` (frames) whose input reached the engine at `wall_us` on
/// the host's wall clock (µs; NaN when there is none: no capture interval or delivery time is
/// recorded): drains the inbound mirror between the I/O counters (each record's time is its
/// arrival), renders the output, and captures `input_channels` (0: no input, 1: mono in input
/// 0, 2: stereo) into the outbound mirror, each record tagged with its packet's destination
/// (`tutti_core::capture`: every peer, every peer but one, or one). Rendering comes first so that
/// an echo sends the peer's quantum of this very callback. Real-time safe.
#[wasm_bindgen]
pub fn tutti_process(handle: u32, now: f64, wall_us: f64, input_channels: u32) {
    let Some(h) = host(handle) else { return };
    let Host {
        engine,
        inbound,
        outbound,
        input_l,
        input_r,
        output_l,
        output_r,
        io,
        ..
    } = h;
    let now = if now.is_finite() && now > 0.0 {
        now as u64
    } else {
        0
    };
    if wall_us.is_finite() {
        engine.begin_quantum_at(now, wall_us);
    } else {
        engine.begin_quantum(now);
    }
    let before = *engine.counters();
    io[IO_IN_READ] = engine.drain(inbound, io[IO_IN_READ], io[IO_IN_WRITE]);
    let after = *engine.counters();
    io[IO_RECORDS] = (after.records_read - before.records_read) as u32;
    io[IO_RESYNCS] = (after.ring_resyncs - before.ring_resyncs) as u32;
    engine.render(output_l, output_r);
    let (mut dropped, mut dropped_bytes) = (0u32, 0u32);
    // Without an input, a running probe or an echo still has something to send.
    let sending = engine.probe().state() == ProbeState::Running || engine.echoing().is_some();
    if input_channels == 0 && sending {
        input_l.fill(0.0);
    }
    if input_channels > 0 || sending {
        let right: &[f32] = if input_channels == 2 {
            input_r
        } else {
            input_l
        };
        let read = io[IO_OUT_READ];
        let mut write = io[IO_OUT_WRITE];
        // Each record's tag is the packet's destination (`tutti_core::capture`).
        engine.capture(input_l, right, &mut |to, bytes| match ring::write_record(
            outbound,
            write,
            read,
            to.tag(),
            0,
            bytes,
        ) {
            Ok(next) => {
                write = next;
                true
            }
            Err(_) => {
                dropped += 1;
                dropped_bytes += bytes.len() as u32;
                false
            }
        });
        io[IO_OUT_WRITE] = write;
    }
    io[IO_SEND_DROPPED] = dropped;
    io[IO_SEND_DROPPED_BYTES] = dropped_bytes;
}

/// Fills the stats block from the engine's current figures (the worklet then copies it out).
#[wasm_bindgen]
pub fn tutti_write_stats(handle: u32) {
    if let Some(h) = host(handle) {
        h.engine.write_stats(&mut h.stats);
    }
}

/// Frames per quantum the engine renders.
#[wasm_bindgen]
pub fn tutti_quantum() -> u32 {
    QUANTUM as u32
}

/// Values of the stats block this engine writes (globals and one row per slot); the rest of the
/// block stays zero.
#[wasm_bindgen]
pub fn tutti_stats_len(handle: u32) -> u32 {
    host(handle).map_or(0, |h| h.engine.stats_len() as u32)
}
