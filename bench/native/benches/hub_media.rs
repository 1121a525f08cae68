//! The media of one hub room alone (no sockets, no WebRTC): CPU time per client-second in
//! forward mode (each browser gets the others' packets bundled) and in mix mode (each client
//! gets its personal mix minus its own voice) at 8, 32 and 200 clients, each sending one
//! 128-frame PCM16 stereo packet per block. The room is driven as a worker would: a poll at
//! each tick and after each packet. Prints one line per case; the target for mix mode is
//! at most 5 ms of CPU per client-second.
//!
//! Run: `cargo bench -p tutti-bench --bench hub_media`.

use std::hint::black_box;
use std::time::Instant;

use tutti_bench::sine_packets;
use tutti_server::hub::media::{tick_offset_us, ClientId, ClientKind, MediaRoom, Mode};

/// Blocks in one second at 48 kHz.
const BLOCKS_PER_S: u64 = 375;

/// CPU µs per client-second of `seconds` of a room of `n` clients in `mode`, and the messages
/// sent per client-second.
fn run(mode: Mode, n: usize, seconds: u64) -> (f64, f64) {
    let mut room = MediaRoom::new(mode, 0);
    let ids: Vec<ClientId> = (0..n)
        .map(|i| {
            room.add_client(i as u16 + 1, ClientKind::Browser, 0)
                .expect("room has space")
        })
        .collect();
    let mut blocks: Vec<Vec<Vec<u8>>> = (0..n).map(|_| sine_packets()).collect();
    let mut messages = 0u64;
    let mut send = |_: ClientId, b: &[u8]| {
        messages += 1;
        black_box(b);
    };
    let ticks = seconds * BLOCKS_PER_S;
    // One second of warm-up (jitter buffers fill), not timed.
    let warm = BLOCKS_PER_S;
    let mut start = Instant::now();
    for k in 0..warm + ticks {
        if k == warm {
            start = Instant::now();
        }
        let t = tick_offset_us(k);
        room.poll(t, &mut send);
        for (i, &id) in ids.iter().enumerate() {
            let p = &mut blocks[i][k as usize % 16];
            p[8..10].copy_from_slice(&(k as u16).to_le_bytes());
            let at = t + 200 + (i as u64 * 1_000 / n as u64);
            room.receive(id, p, at);
            room.poll(at, &mut send);
        }
        room.poll(t + 2_000, &mut send);
    }
    let us = start.elapsed().as_secs_f64() * 1e6;
    let client_s = (n as u64 * seconds) as f64;
    (
        us / client_s,
        messages as f64 / ((warm + ticks) as f64 / 375.0 * n as f64),
    )
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    for mode in [Mode::Forward, Mode::Mix] {
        let sizes: &[usize] = if quick { &[8] } else { &[8, 32, 200] };
        for &n in sizes {
            let seconds = if quick {
                1
            } else if n >= 200 {
                2
            } else {
                5
            };
            let (us, msgs) = run(mode, n, seconds);
            let name = if mode == Mode::Forward {
                "forward"
            } else {
                "mix"
            };
            println!(
                "hub_media/{name}/{n}: {us:.0} µs CPU per client-second \
                 ({:.2} ms), {msgs:.0} messages per client-second",
                us / 1_000.0
            );
        }
    }
}
