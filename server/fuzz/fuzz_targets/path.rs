//! Fuzzes the static file handler's path decoding (`statics::path_segments`) against a
//! reference of its rule, and checks that no accepted path leaves the app directory
//! (checks in `src/path.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tutti_server_fuzz::path::check_path;

fuzz_target!(|data: &[u8]| {
    if let Ok(raw) = std::str::from_utf8(data) {
        check_path(raw);
    }
});
