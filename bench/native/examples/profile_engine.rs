//! Runs the engine with N peers for a while, for a profiler to look at:
//! `cargo run --release -p tutti-bench --example profile_engine -- 64 20000`.
//! Prints ns per peer-quantum for drain (parse, place, decode) and render separately.

use std::time::Instant;

use tutti_bench::Session;
use tutti_core::engine::QUANTUM;

fn main() {
    let mut args = std::env::args().skip(1);
    let peers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let quanta: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let warm = 1000;
    let mut session = Session::new(peers);
    let (mut left, mut right) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let (mut t_drain, mut t_render) = (0u128, 0u128);
    for q in 0..warm + quanta {
        session.feed(q);
        let a = Instant::now();
        session.drain(q);
        let b = Instant::now();
        session.engine.render(&mut left, &mut right);
        let c = Instant::now();
        if q >= warm {
            t_drain += (b - a).as_nanos();
            t_render += (c - b).as_nanos();
        }
    }
    let per = (quanta * peers as u64) as f64;
    println!(
        "{peers} peers: drain {:.1} ns, render {:.1} ns per peer-quantum",
        t_drain as f64 / per,
        t_render as f64 / per
    );
}
