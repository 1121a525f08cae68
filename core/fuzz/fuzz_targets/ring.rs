//! Fuzzes the shared ring's record reader: whatever bytes and counters another thread left in
//! the ring, draining it must end, never panic, and only hand out payloads inside the data area.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tutti_core::ring::{read_record, MIN_CAPACITY};

fuzz_target!(|input: &[u8]| {
    if input.len() < 8 {
        return;
    }
    let read = u32::from_le_bytes([input[0], input[1], input[2], input[3]]);
    let write = u32::from_le_bytes([input[4], input[5], input[6], input[7]]);
    let mut data = vec![0u8; MIN_CAPACITY];
    for (d, s) in data.iter_mut().zip(input[8..].iter().cycle()) {
        *d = *s;
    }
    let mut read = read;
    // Each record moves `read` at least 8 bytes closer to `write`: bounded by the capacity.
    for _ in 0..=MIN_CAPACITY / 8 {
        match read_record(&data, read, write) {
            Ok(Some((record, next))) => {
                assert!(record.payload.len() <= data.len());
                assert_ne!(next, read, "a record must advance the read counter");
                read = next;
            }
            Ok(None) | Err(_) => return,
        }
    }
    panic!("draining the ring did not end");
});
