//! Drift correction per 128-frame stereo quantum: the resampler's `process` on the block-constant
//! path (a 48 kHz peer 300 ppm fast) and on the general path (a 44.1 kHz peer), the whole
//! per-quantum staging step (frames_needed + append of one 128-frame block + process), and one
//! drift-controller update.
//!
//! Run: `cargo bench -p tutti-bench --bench drift`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tutti_core::drift::DriftController;
use tutti_core::resample::Resampler;

const QUANTUM: usize = 128;
/// Staging large enough that timed stretches of `process` run without refills.
const BIG: usize = 1 << 20;

fn tone(block: &mut [f32], phase: &mut f64, step: f64) {
    for x in block {
        *x = (0.5 * phase.sin()) as f32;
        *phase += step;
    }
}

/// `process` alone: the staging is filled untimed, then drained in timed stretches.
fn process_only(c: &mut Criterion) {
    let mut g = c.benchmark_group("resampler_process_128_stereo");
    for (name, ratio) in [
        ("fast_path_48k_plus_300ppm", 1.0 + 300e-6),
        (
            "general_path_44k1_plus_300ppm",
            44_100.0 / 48_000.0 * (1.0 + 300e-6),
        ),
    ] {
        let mut res = Resampler::new(BIG);
        let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
        let mut phase = 0.0;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    res.reset();
                    let (sl, sr) = res.append_slots(BIG);
                    tone(sl, &mut phase, 0.13);
                    sr.copy_from_slice(sl);
                    let mut batch = 0;
                    let start = Instant::now();
                    while left > 0 && res.frames_needed(QUANTUM, ratio) == 0 {
                        res.process(black_box(ratio), &mut l, &mut r);
                        left -= 1;
                        batch += 1;
                    }
                    total += start.elapsed();
                    black_box((&l, &r, batch));
                }
                total
            })
        });
    }
    g.finish();
}

/// What the engine does per peer-quantum on the resampler: frames_needed, append one 128-frame
/// block when needed (copied from a decoded block), process.
fn staging_step(c: &mut Criterion) {
    let mut g = c.benchmark_group("resampler_quantum_128_stereo");
    let mut bl = [0.0f32; QUANTUM];
    let mut phase = 0.0;
    tone(&mut bl, &mut phase, 0.13);
    let br = bl;
    for (name, ratio) in [
        ("fast_path_48k_plus_300ppm", 1.0 + 300e-6),
        (
            "general_path_44k1_plus_300ppm",
            44_100.0 / 48_000.0 * (1.0 + 300e-6),
        ),
    ] {
        let mut res = Resampler::new(2048);
        let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
        g.bench_function(name, |b| {
            b.iter(|| {
                while res.frames_needed(QUANTUM, ratio) > 0 {
                    let (sl, sr) = res.append_slots(QUANTUM);
                    sl.copy_from_slice(&bl);
                    sr.copy_from_slice(&br);
                }
                res.process(black_box(ratio), &mut l, &mut r)
            })
        });
        black_box((&l, &r));
    }
    g.finish();
}

fn controller(c: &mut Criterion) {
    let mut d = DriftController::new(128, 48_000);
    let mut q = 0u32;
    c.bench_function("drift_controller_update", |b| {
        b.iter(|| {
            q = q.wrapping_add(1);
            d.update(black_box(1024.0 + f64::from(q % 4) * 128.0), 1216.0)
        })
    });
}

criterion_group!(benches, process_only, staging_step, controller);
criterion_main!(benches);
