//! Tutti's audio core: everything between a received packet and the speaker, for every peer of a
//! session, in one place that is sans-IO, told the time, and allocation-free on the render path.
//!
//! The same crate runs natively (tests, benchmarks, later the hub) and in WebAssembly inside the
//! one AudioWorklet of a browser client (`wasm/`). It knows nothing of WebRTC, sockets, the DOM
//! or clocks: the host passes packets, input and the time in, and takes packets, output and stats
//! out.
//!
//! # Modules, one concept each
//!
//! | module | concept |
//! | --- | --- |
//! | [`packet`] | the wire format: JackTrip's header, planar PCM16/PCM24/float32, Tutti's extension |
//! | [`bundle`] | several whole packets in one data-channel message (a hub's forwarding to one listener) |
//! | [`ring`] | the lock-free single-producer/single-consumer byte ring shared with JavaScript |
//! | [`jitter`] | per-peer reordering, loss accounting and playout (submodules: the push and pop sides, the depth policy, lateness estimation, payload storage, local-stall detection) |
//! | [`conceal`] | filling a missing block without a click |
//! | [`continuity`] | noticing missed device callbacks: ours, and each sender's from its packets' stamps |
//! | [`drift`] | drift correction: the loop that turns a peer's buffer fill into a resampling ratio |
//! | [`resample`] | the per-peer staging FIFO read at that ratio by a cubic interpolator |
//! | [`mix`] | gain, pan, mute, solo, meters, master limiter (submodules: meters, the fader gain, the strip and master, their SIMD kernels and lane type, the mix-minus that makes every listener's personal mix for a hub) |
//! | [`latency`] | fixed-size latency histograms per stage, the shared histogram block's layout and its writer |
//! | [`probe`] | the round-trip probe: clicks out, found again in a peer's stream |
//! | [`capture`] | our input into outgoing packets, each with its destination; the echo lane; one stream per layer our peers take |
//! | [`layer`] | the formats a listener may take of a stream: as sent, or Opus at 128 or 64 kbit/s |
//! | [`framer`] | one Opus stream made from blocks of any length, each frame carrying the previous one's copy |
//! | [`stats`] | the shared stats block's layout and its writer |
//! | [`engine`] | the multi-peer session that ties them together (submodule: one peer, its buffers and its playout) |
//!
//! # The run loop
//!
//! The host drives an [`engine::Engine`] once per 128-frame quantum — see the example in
//! [`engine`]. Functions that may allocate say so (constructors, [`engine::Peer::new`]);
//! everything a quantum calls is real-time safe: no allocation, no lock, no log, no panic on any
//! input. `core/tests/engine_alloc.rs` proves the allocation part with the counting allocator of
//! [`alloc_watch`] (the hub's tests use it too).

pub mod alloc_watch;
pub mod bundle;
pub mod capture;
pub mod codec;
pub mod conceal;
pub mod continuity;
pub mod drift;
pub mod engine;
pub mod framer;
pub mod jitter;
pub mod latency;
pub mod layer;
pub mod meters;
pub mod mix;
pub mod packet;
pub mod probe;
pub mod resample;
pub mod ring;
pub mod stats;
#[cfg(test)]
mod testing;
pub mod train;
#[cfg(test)]
mod vectors;
