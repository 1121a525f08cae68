//! What must hold for the server's parsers of hostile input, shared by the fuzz targets in
//! `fuzz_targets/`. Each check panics when a property fails: libFuzzer then saves the input as
//! a crash artifact.
//!
//! - [`signaling`]: every text a client can send over `/ws` (`protocol::parse`).
//! - [`path`]: every request path the static file handler decodes (`statics::path_segments`).
//!
//! Only the crate's public entry points are called, so the checks keep working while the
//! protocol grows (a message type added later is parsed and its error checked, nothing more).

pub mod path;
pub mod signaling;
