//! The load generator's parts (main.rs is its command line): emulated clients that cost little
//! each (JackTrip's protocol, or in forward mode the app's WebRTC link to the hub), the threads
//! that drive them, the servers under test started and stopped on loopback, and the measures:
//! delivery by sequence number, inter-arrival times, the tones a listener hears, the server's
//! CPU and memory from /proc. `mesh` is apart: peers toward one real browser page, run by
//! bench/mesh-page.mjs.

pub mod client;
pub mod continuity;
pub mod driver;
pub mod forward;
pub mod hublink;
pub mod mesh;
pub mod owner;
pub mod plot;
pub mod procstat;
pub mod reception;
pub mod recording;
pub mod run;
pub mod scenario;
pub mod servers;
pub mod signal;
pub mod sources;
pub mod tones;

/// Delivery at or above which a client count is carried, %.
pub const KNEE_PCT: f64 = 99.9;
/// Delivery under which a server has fallen apart: a sweep stops there, %.
pub const FELL_APART_PCT: f64 = 95.0;
