//! Fuzzes the signaling parser with arbitrary bytes, as a hostile client would send them in a
//! text frame: `protocol::parse` must never panic, its errors stay small, and what it accepts
//! is valid and re-serialises to the same thing (checks in `src/signaling.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tutti_server_fuzz::signaling::check_text;

fuzz_target!(|data: &[u8]| {
    // WebSocket text frames are UTF-8: the server never parses anything else.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = check_text(text);
    }
});
