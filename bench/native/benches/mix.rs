//! Mixer kernels per 128-frame stereo quantum: one strip (steady, ramping, inaudible), the master
//! (passthrough, limiting), the whole mix section of a five-peer quantum, and a room's personal
//! mixes for a hub in mix mode: every listener's mix-minus of N players (O(N) for the room) beside
//! the direct mix (a strip per listener and player, O(N²)). Divide a room's time by N for the
//! cost per listener and block; 375 blocks make a second.
//!
//! Run: `cargo bench -p tutti-bench --bench mix`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use tutti_core::mix::{GainControl, Master, MixMinus, Strip, QUANTUM};

fn sine(freq: f32, amp: f32, phase: f32) -> [f32; QUANTUM] {
    let mut out = [0.0; QUANTUM];
    for (i, x) in out.iter_mut().enumerate() {
        *x = amp * (phase + core::f32::consts::TAU * freq * i as f32 / 48_000.0).sin();
    }
    out
}

fn strip(c: &mut Criterion) {
    let src_l = sine(440.0, 0.5, 0.0);
    let src_r = sine(660.0, 0.5, 1.0);
    let mut out_l = [0.0f32; QUANTUM];
    let mut out_r = [0.0f32; QUANTUM];
    let mut g = c.benchmark_group("strip_mix_into_128");

    // (name, pan, gain changed every block, audible)
    let cases = [
        ("steady", -0.3, false, true),
        ("ramping", 0.0, true, true),
        ("inaudible_meter_only", 0.0, false, false),
    ];
    for (name, pan, ramping, audible) in cases {
        let mut s = Strip::new();
        s.set_pan(pan);
        let mut flip = false;
        g.bench_function(name, |b| {
            b.iter(|| {
                if ramping {
                    flip = !flip;
                    s.set_gain(if flip { 0.5 } else { 0.8 });
                }
                s.mix_into(
                    black_box(&src_l),
                    black_box(&src_r),
                    &mut out_l,
                    &mut out_r,
                    audible,
                );
                out_l[0] = 0.0;
            })
        });
    }
    g.finish();
    black_box((&out_l, &out_r));
}

fn master(c: &mut Criterion) {
    let mut g = c.benchmark_group("master_process_128");

    let quiet_l = sine(440.0, 0.25, 0.0);
    let quiet_r = sine(660.0, 0.25, 1.0);
    let mut m = Master::new();
    let (mut l, mut r) = (quiet_l, quiet_r);
    g.bench_function("passthrough", |b| {
        b.iter(|| m.process(black_box(&mut l), black_box(&mut r)))
    });

    let loud_l = sine(440.0, 5.0, 0.0);
    let loud_r = sine(660.0, 5.0, 1.0);
    // (name, master gain, input)
    let cases = [
        ("gain_no_limiting", 0.8, (quiet_l, quiet_r)),
        ("limiting", 1.0, (loud_l, loud_r)),
    ];
    for (name, gain, input) in cases {
        let mut m = Master::new();
        m.set_gain(gain);
        g.bench_function(name, |b| {
            b.iter_batched_ref(|| input, |(l, r)| m.process(l, r), BatchSize::SmallInput)
        });
    }

    let mut m = Master::new();
    let mut loud_gain = false;
    g.bench_function("limiting_with_knee", |b| {
        b.iter_batched_ref(
            || (loud_l, loud_r),
            |(l, r)| {
                // Alternate the master gain so every block ramps down into the knee.
                loud_gain = !loud_gain;
                m.set_gain(if loud_gain { 4.0 } else { 1.0 });
                m.process(l, r)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn five_peers(c: &mut Criterion) {
    let sources: Vec<([f32; QUANTUM], [f32; QUANTUM])> = (0..5)
        .map(|k| {
            let f = 220.0 * (k + 1) as f32;
            (sine(f, 0.9, 0.0), sine(f * 1.01, 0.9, 0.5))
        })
        .collect();
    let mut strips: Vec<Strip> = (0..5)
        .map(|k| {
            let mut s = Strip::new();
            s.set_pan(-1.0 + 0.5 * k as f32);
            s
        })
        .collect();
    let mut m = Master::new();
    let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
    c.bench_function("mix_section_5_peers_128", |b| {
        b.iter(|| {
            l.fill(0.0);
            r.fill(0.0);
            for (s, (sl, sr)) in strips.iter_mut().zip(&sources) {
                s.mix_into(black_box(sl), black_box(sr), &mut l, &mut r, true);
            }
            m.process(&mut l, &mut r);
            black_box((&l, &r));
        })
    });
}

/// One block of a room of `n` players: every listener's personal mix, by mix-minus (each listener
/// with `changes` faders of its own moved) and, where N² stays affordable, directly.
fn room(c: &mut Criterion) {
    let mut g = c.benchmark_group("room_personal_mixes_128");
    for n in [8usize, 32, 128, 500] {
        let sources: Vec<Option<[[f32; QUANTUM]; 2]>> = (0..n)
            .map(|k| {
                let f = 110.0 + 7.0 * k as f32;
                Some([sine(f, 0.05, 0.0), sine(f, 0.05, 0.3)])
            })
            .collect();
        let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
        for changes in [0usize, 4] {
            let mut mix = MixMinus::new(n, 8);
            for listener in 0..n {
                for k in 1..=changes {
                    let strip = mix.strip_mut(listener, (listener + k) % n).unwrap();
                    strip.set_gain_db(-3.0 * k as f32);
                    strip.set_pan(0.2);
                }
            }
            g.bench_function(format!("mix_minus_{n}_players_{changes}_changes"), |b| {
                b.iter(|| {
                    mix.sum(black_box(sources.as_slice()));
                    for listener in 0..n {
                        mix.render(listener, sources.as_slice(), &mut l, &mut r)
                            .unwrap();
                        black_box((&l, &r));
                    }
                })
            });
        }
        if n <= 32 {
            let mut strips: Vec<Vec<Strip>> = vec![vec![Strip::new(); n]; n];
            let mut masters = vec![Master::new(); n];
            g.bench_function(format!("direct_{n}_players"), |b| {
                b.iter(|| {
                    for (listener, (row, master)) in strips.iter_mut().zip(&mut masters).enumerate()
                    {
                        l.fill(0.0);
                        r.fill(0.0);
                        for (j, (s, src)) in row.iter_mut().zip(&sources).enumerate() {
                            if let (false, Some([sl, sr])) = (j == listener, src) {
                                s.mix_into(black_box(sl), black_box(sr), &mut l, &mut r, true);
                            }
                        }
                        master.process(&mut l, &mut r);
                        black_box((&l, &r));
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, strip, master, five_peers, room);
criterion_main!(benches);
