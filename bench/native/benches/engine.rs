//! The whole engine per quantum (drain N packets: parse, place, decode; render N peers: drift
//! resampling, gain/pan, mix, meters; master), for N = 1, 16, 64, 256 PCM16 stereo peers.
//! Throughput is in peers, so criterion's "elem/s" inverts to time per peer-quantum.
//!
//! Run: `cargo bench -p tutti-bench --bench engine`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tutti_bench::Session;
use tutti_core::engine::QUANTUM;

fn engine(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_quantum");
    for peers in [1usize, 16, 64, 256] {
        let mut session = Session::new(peers);
        let (mut left, mut right) = ([0f32; QUANTUM], [0f32; QUANTUM]);
        let mut q = 0u64;
        // Warm up past prefill so that every peer is playing.
        while q < 200 {
            session.feed(q);
            session.drain(q);
            session.engine.render(&mut left, &mut right);
            q += 1;
        }
        g.throughput(Throughput::Elements(peers as u64));
        g.bench_function(format!("{peers}_peers"), |b| {
            b.iter(|| {
                // The feed is the net side's work; it is inside the timing but costs ~10 ns per
                // packet natively (a memcpy into the ring).
                session.feed(q);
                session.drain(q);
                session
                    .engine
                    .render(black_box(&mut left), black_box(&mut right));
                q += 1;
            })
        });
    }
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
