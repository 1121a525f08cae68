//! Known-answer tests of the resampler: identity at unity ratio, THD+N and frequency on both
//! paths against least-squares sine fits, bounds under seeded ratio sequences, and the SIMD and
//! fused passes held to the portable and separate ones bit for bit.

use super::*;
use crate::testing::{fit_sine, Rng, Tone};
use std::f64::consts::PI;

/// Appends `block`-frame blocks of `tone` until `n` frames can be produced, then processes.
fn render(
    res: &mut Resampler,
    tone: &mut Tone,
    block: usize,
    ratio: f64,
    l: &mut [f32],
    r: &mut [f32],
) -> usize {
    while res.frames_needed(l.len(), ratio) > 0 {
        let (a, b) = res.append_slots(block);
        assert_eq!(a.len(), block, "staging overflow");
        tone.write(a, b);
    }
    res.process(ratio, l, r)
}

/// Output frames at `ratio` (1 s warm-up skipped), `len` of them, left channel.
fn tone_through(hz: f64, ratio: f64, len: usize) -> Vec<f64> {
    let mut res = Resampler::new(2048);
    let mut tone = Tone::new(hz, hz, 48_000.0);
    let warm = 4800;
    let mut out = Vec::with_capacity(warm + len + 128);
    let (mut l, mut r) = ([0.0f32; 128], [0.0f32; 128]);
    while out.len() < warm + len {
        assert_eq!(render(&mut res, &mut tone, 128, ratio, &mut l, &mut r), 128);
        out.extend(l.iter().map(|&x| f64::from(x)));
    }
    out[warm..warm + len].to_vec()
}

fn residual_energy(y: &[f64], w: f64) -> (f64, f64) {
    let (a, b) = fit_sine(y.iter().enumerate().map(|(i, &v)| (i as f64, v)), w);
    let (mut res, mut sig) = (0.0, 0.0);
    for (i, &v) in y.iter().enumerate() {
        let (s, c) = (w * i as f64).sin_cos();
        let fit = a * c + b * s;
        sig += fit * fit;
        res += (v - fit) * (v - fit);
    }
    (res, sig)
}

/// Frequency (Hz at 48 kHz) of the best-fitting sine within ±1 Hz of `guess`, found by
/// golden-section search on the residual energy, and THD+N in dB (residual RMS / sine RMS).
fn measure(y: &[f64], guess: f64) -> (f64, f64) {
    let to_w = |hz: f64| 2.0 * PI * hz / 48_000.0;
    let (mut lo, mut hi) = (guess - 1.0, guess + 1.0);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let cost = |hz: f64| residual_energy(y, to_w(hz)).0;
    let (mut x1, mut x2) = (hi - g * (hi - lo), lo + g * (hi - lo));
    let (mut f1, mut f2) = (cost(x1), cost(x2));
    while hi - lo > 1e-5 {
        if f1 < f2 {
            hi = x2;
            (x2, f2) = (x1, f1);
            x1 = hi - g * (hi - lo);
            f1 = cost(x1);
        } else {
            lo = x1;
            (x1, f1) = (x2, f2);
            x2 = lo + g * (hi - lo);
            f2 = cost(x2);
        }
    }
    let hz = 0.5 * (lo + hi);
    assert!(
        (hz - guess).abs() < 0.9,
        "fit ran to the edge of its bracket: {hz} Hz"
    );
    let (res, sig) = residual_energy(y, to_w(hz));
    (hz, 10.0 * (res / sig).log10())
}

#[test]
fn unity_ratio_is_identity_with_zero_delay() {
    // Tolerance 1e-6 (the weights at t = 0 are exactly 0, 1, 0, 0, so it is exact).
    let mut rng = Rng::new(0x1234_5678);
    let mut res = Resampler::new(2048);
    let mut input_l = Vec::new();
    let mut input_r = Vec::new();
    let mut out_l = Vec::new();
    let mut out_r = Vec::new();
    let w = 2.0 * PI * 997.0 / 48_000.0;
    while out_l.len() < 20_000 {
        let n = rng.range(1, 256);
        while res.frames_needed(n, 1.0) > 0 {
            let b = rng.range(32, 256);
            let (l, r) = res.append_slots(b);
            for (a, b) in l.iter_mut().zip(r.iter_mut()) {
                *a = (w * input_l.len() as f64).sin() as f32;
                *b = (rng.unit() * 2.0 - 1.0) as f32;
                input_l.push(*a);
                input_r.push(*b);
            }
        }
        let (mut l, mut r) = (vec![0.0; n], vec![0.0; n]);
        assert_eq!(res.process(1.0, &mut l, &mut r), n);
        out_l.extend_from_slice(&l);
        out_r.extend_from_slice(&r);
    }
    for i in 0..out_l.len() {
        assert!((out_l[i] - input_l[i]).abs() <= 1e-6, "left {i}");
        assert!((out_r[i] - input_r[i]).abs() <= 1e-6, "right {i}");
    }
}

/// A sine of `hz` through the resampler at `ratio` comes out at `hz × ratio` within 0.01 Hz
/// and with THD+N below `bound` dB.
fn check_tone(path: &str, hz: f64, ratio: f64, bound: f64) {
    let y = tone_through(hz, ratio, 48_000);
    let (f, thdn) = measure(&y, hz * ratio);
    eprintln!(
        "{path} path {hz} Hz ratio {ratio}: fundamental {f:.4} Hz (expected {:.4}), \
         THD+N {thdn:.1} dB",
        hz * ratio
    );
    assert!((f - hz * ratio).abs() < 0.01, "{hz} Hz at {ratio}: {f} Hz");
    assert!(thdn < bound, "{hz} Hz at {ratio}: THD+N {thdn} dB");
}

#[test]
fn thd_n_and_frequency_on_the_fast_path() {
    // Input: a sine at f per input frame. Output: f × ratio per output frame (ratio = input
    // frames per output frame), measured within 0.01 Hz over 1 s. THD+N bounds in dB, at
    // ±300 ppm, +1000 ppm (the drift clamp) and −2000 ppm (the edge of the fast path).
    for (hz, bound) in [(1000.0, -105.0), (5000.0, -55.0), (10_000.0, -32.0)] {
        for ratio in [
            1.0 + 300e-6,
            1.0 - 300e-6,
            1.0 + 1000e-6,
            1.0 - FAST_MAX_DEVIATION,
        ] {
            check_tone("fast", hz, ratio, bound);
        }
    }
}

#[test]
fn thd_n_general_path_44k1() {
    // A 44.1 kHz peer: ratio 0.91875 × (1 + 300 ppm); same bounds as the fast path.
    let ratio = 44_100.0 / 48_000.0 * (1.0 + 300e-6);
    for (hz, bound) in [(1000.0, -105.0), (5000.0, -55.0), (10_000.0, -32.0)] {
        check_tone("general", hz, ratio, bound);
    }
}

#[test]
fn slewing_ratio_has_no_discontinuity() {
    // Ratio swept as 1 + 1000 ppm × sin(2π q / 750) per quantum (±1000 ppm, 3 ppm/quantum at
    // most: thirty times faster than the controller's slew limit). The output must follow
    // the continuous-phase sine a·sin(w·P_i), P_i = accumulated read position, within 2e-5,
    // and no sample-to-sample step may exceed the sine's largest step at the highest
    // output frequency × (1 + 1e-4).
    let mut res = Resampler::new(2048);
    let mut tone = Tone::new(1000.0, 1000.0, 48_000.0);
    let (mut l, mut r) = ([0.0f32; 128], [0.0f32; 128]);
    let mut pos = 0.0f64;
    let mut prev: Option<f32> = None;
    let mut max_step = 0.0f32;
    let mut max_err = 0.0f64;
    for q in 0..(3 * 375) {
        let ratio = 1.0 + 1000e-6 * (2.0 * PI * q as f64 / 750.0).sin();
        assert_eq!(render(&mut res, &mut tone, 128, ratio, &mut l, &mut r), 128);
        for (i, &y) in l.iter().enumerate() {
            let p = pos + i as f64 * ratio;
            if p >= 2.0 {
                max_err = max_err.max((f64::from(y) - tone.left_at(p)).abs());
            }
            if let Some(x) = prev {
                max_step = max_step.max((y - x).abs());
            }
            prev = Some(y);
        }
        pos += 128.0 * ratio;
    }
    let w_max = 2.0 * PI * 1000.0 * (1.0 + 1000e-6) / 48_000.0;
    let step_bound = 0.9 * 2.0 * (w_max / 2.0).sin() * (1.0 + 1e-4);
    eprintln!("slewing: max step {max_step:.6} (bound {step_bound:.6}), max error {max_err:.2e}");
    assert!(f64::from(max_step) <= step_bound);
    assert!(max_err <= 2e-5);
}

#[test]
fn random_sequence_stays_in_bounds_and_on_the_signal() {
    // Seeded random ratios (near 1, 44.1 kHz, anywhere in range, invalid), output lengths
    // 0..=600, blocks 32..=256, feeds that are complete, missing or excessive, skips and
    // resets. Oracle: the analytic input signal at the tracked read position, within 1e-5
    // (500/700 Hz tones: interpolation error < 3e-6); zero-filled tails exactly 0; a shadow
    // resampler that only skips must stay bit-identical in position.
    let mut rng = Rng::new(0x00c0_ffee_d00d);
    let cap = 2048;
    let mut res = Resampler::new(cap);
    let mut shadow = Resampler::new(cap);
    let mut tone = Tone::new(500.0, 700.0, 48_000.0);
    let mut pos = 0.0f64;
    let mut refused = 0;
    let (mut l, mut r) = (vec![0.0f32; 600], vec![0.0f32; 600]);
    for _ in 0..8_000 {
        let ratio = match rng.range(0, 99) {
            0..=39 => 1.0 + (rng.unit() - 0.5) * 5e-3,
            40..=59 => 44_100.0 / 48_000.0 * (1.0 + (rng.unit() - 0.5) * 2e-3),
            60..=84 => MIN_RATIO + rng.unit() * (MAX_RATIO - MIN_RATIO),
            85..=89 => [
                f64::NAN,
                f64::INFINITY,
                0.0,
                -1.0,
                9.0,
                1e300,
                MIN_RATIO * 0.99,
            ][rng.range(0, 6)],
            _ => 1.0,
        };
        let n = if rng.range(0, 19) == 0 {
            rng.range(0, 600)
        } else {
            rng.range(0, 256)
        };
        let mut complete = false;
        match rng.range(0, 99) {
            0..=69 => loop {
                if res.frames_needed(n, ratio) == 0 {
                    complete = true;
                    break;
                }
                let b = rng.range(32, 256);
                let (a, c) = res.append_slots(b);
                if a.is_empty() {
                    refused += 1;
                    assert_eq!(res.refused_appends(), refused);
                    break;
                }
                assert_eq!((a.len(), c.len()), (b, b));
                tone.write(a, c);
                let (a, c) = shadow.append_slots(b);
                assert_eq!(a.len(), b);
                c.fill(0.0);
            },
            70..=84 => {}
            _ => {
                for _ in 0..rng.range(1, 12) {
                    let b = rng.range(32, 256);
                    let (a, c) = res.append_slots(b);
                    if a.is_empty() {
                        refused += 1;
                        assert_eq!(res.refused_appends(), refused);
                        assert!(res.buffered_frames() + b as f64 > cap as f64 - 1.0);
                        break;
                    }
                    tone.write(a, c);
                    assert_eq!(shadow.append_slots(b).0.len(), b);
                }
            }
        }
        let valid = Path::of(ratio).is_some();
        let before = res.buffered_frames();
        if rng.range(0, 9) == 0 {
            let k = res.skip(n, ratio);
            assert_eq!(shadow.skip(n, ratio), k);
            assert!(k <= n);
            pos += k as f64 * ratio;
        } else {
            l[..n].fill(f32::NAN);
            r[..n].fill(f32::NAN);
            let k = res.process(ratio, &mut l[..n], &mut r[..n]);
            assert_eq!(shadow.skip(n, ratio), k);
            assert!(k <= n);
            if valid && complete {
                assert_eq!(k, n, "frames_needed said enough");
            }
            for i in 0..k {
                let p = pos + i as f64 * ratio;
                if p >= 2.0 {
                    assert!(
                        (f64::from(l[i]) - tone.left_at(p)).abs() < 1e-5,
                        "left at {p}"
                    );
                    assert!(
                        (f64::from(r[i]) - tone.right_at(p)).abs() < 1e-5,
                        "right at {p}"
                    );
                }
            }
            assert!(l[k..n].iter().chain(&r[k..n]).all(|&x| x == 0.0));
            pos += k as f64 * ratio;
        }
        if !valid {
            assert_eq!(res.buffered_frames(), before);
        }
        let buffered = res.buffered_frames();
        assert!((0.0..=cap as f64).contains(&buffered), "{buffered}");
        assert_eq!(buffered.to_bits(), shadow.buffered_frames().to_bits());
        if rng.range(0, 199) == 0 {
            res.reset();
            shadow.reset();
            tone.m = 0;
            pos = 0.0;
            assert_eq!(res.buffered_frames(), 0.0);
        }
    }
    assert!(refused > 0, "the sequence must reach the capacity limit");
}

#[test]
fn append_refuses_beyond_capacity_without_panicking() {
    // Exactly `capacity` frames fit; one more is refused with empty slices; consuming makes
    // room again (the tail is moved to the front).
    let mut res = Resampler::new(1000);
    assert_eq!(res.append_slots(1000).0.len(), 1000);
    let (a, b) = res.append_slots(1);
    assert!(a.is_empty() && b.is_empty());
    assert_eq!(res.refused_appends(), 1);
    assert_eq!(res.append_slots(usize::MAX).0.len(), 0);
    assert_eq!(res.skip(500, 1.0), 500);
    assert_eq!(res.append_slots(500).0.len(), 500);
    assert_eq!(res.buffered_frames(), 1000.0);
    assert_eq!(res.frames_needed(usize::MAX, 1.0), usize::MAX - 1000);
    assert_eq!(res.frames_needed(4000, 1.0), 3000 + LOOK_AHEAD_FRAMES + 2);
    assert_eq!(Resampler::new(0).append_slots(1).0.len(), 0);
}

#[test]
fn frames_needed_counts_the_look_ahead() {
    // Fresh FIFO, ratio 1: 128 output frames need 128 + 2 input frames; at 0.91875 from
    // fraction 0: floor(127 × 0.91875) + 3 = 119.
    let mut res = Resampler::new(2048);
    assert_eq!(res.frames_needed(128, 1.0), 130);
    assert_eq!(res.frames_needed(128, 0.91875), 119);
    assert_eq!(res.frames_needed(128, f64::NAN), 0);
    res.append_slots(129).0.fill(0.5);
    assert_eq!(res.frames_needed(128, 1.0), 1);
    let (mut l, mut r) = ([1.0f32; 128], [1.0f32; 128]);
    assert_eq!(res.process(1.0, &mut l, &mut r), 127);
    assert_eq!(l[127], 0.0);
    assert_eq!(res.buffered_frames(), 2.0);
}

/// Interpolates `frames` outputs of a staging block with lane type `V` through the
/// block-constant source ([`fill_stretches`] + [`Cubic`]), stored to memory.
fn cubic_block<V: Lanes>(
    xl: &[f32],
    xr: &[f32],
    t0: f32,
    d: f32,
    frames: usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut table = [[0.0; 32]; MAX_STRETCHES];
    let groups = frames / 4;
    let (per, count) = fill_stretches::<V>(&mut table, t0, d, groups);
    let src = Cubic {
        xl,
        xr,
        groups,
        per,
        stretches: &table[..count],
    };
    let (mut l, mut r) = (vec![f32::NAN; frames], vec![f32::NAN; frames]);
    Groups::<V>::for_each(&src, 0, &mut l, |y, o| y.store(o));
    Groups::<V>::for_each(&src, 1, &mut r, |y, o| y.store(o));
    (l, r)
}

#[test]
fn stretches_bound_the_weight_stepping_span() {
    // Exact: for every deviation the fast path accepts, a stretch is the largest of 128,
    // 64, 32, 16, 8 frames whose fraction span is at most MAX_STEP_SPAN.
    for k in -2000..=2000 {
        let d = k as f32 * 1e-6;
        let s = stretch_frames(d);
        assert!([8, 16, 32, 64, 128].contains(&s), "{d}: {s}");
        assert!(s as f32 * d.abs() <= MAX_STEP_SPAN, "{d}: {s}");
        if s < CHUNK {
            assert!(
                2.0 * s as f32 * d.abs() > MAX_STEP_SPAN,
                "{d}: {s} is not the largest"
            );
        }
    }
}

#[test]
fn cubic_source_simd_matches_portable_bit_for_bit() {
    // Exact: the SIMD lanes run the same IEEE operations in the same order as the portable
    // lanes, for weights (exact and stepped) and taps alike. Seeded random staging with edge
    // values, fractions in [0, 1), deviations across the whole fast path, every length.
    use crate::mix::simd::portable::Portable;
    let mut rng = Rng::new(0x5eed_cab1e);
    for _ in 0..400 {
        let frames = 4 * rng.range(1, 32);
        let x: Vec<f32> = (0..2 * (frames + 3))
            .map(|_| match rng.range(0, 9) {
                0 => 0.0,
                1 => -1.0,
                2 => 1e-30,
                _ => (rng.unit() * 4.0 - 2.0) as f32,
            })
            .collect();
        let (xl, xr) = x.split_at(frames + 3);
        let t0 = rng.unit() as f32;
        let d = ((rng.unit() * 2.0 - 1.0) * FAST_MAX_DEVIATION) as f32;
        let simd = cubic_block::<Simd>(xl, xr, t0, d, frames);
        let port = cubic_block::<Portable>(xl, xr, t0, d, frames);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&simd.0), bits(&port.0), "left, {frames} frames, d {d}");
        assert_eq!(
            bits(&simd.1),
            bits(&port.1),
            "right, {frames} frames, d {d}"
        );
    }
}

#[test]
fn cubic_source_matches_exact_lagrange_in_f64() {
    // Oracle: the cubic through x[i..i + 4] at t_i = t0 + i·d evaluated in f64 with exact
    // weights. The stepped weights may differ by the linear-stepping error: on a sine of
    // amplitude A at ω rad/frame at most A·ω²·s²/8 (s = stretch × |d| ≤ 0.016), here with a
    // factor 1.5 of margin for the curvature's variation, plus 2e-6 of f32 rounding.
    let mut rng = Rng::new(0xf00d);
    for &hz in &[100.0, 1000.0, 5000.0, 12_000.0] {
        for _ in 0..40 {
            let frames = 128;
            let w = 2.0 * PI * hz / 48_000.0;
            let phase = rng.unit() * 6.0;
            let amp = 0.9;
            let sig = |m: usize| amp * (w * m as f64 + phase).sin();
            let xl: Vec<f32> = (0..frames + 3).map(|m| sig(m) as f32).collect();
            let xr: Vec<f32> = xl.iter().map(|v| -v).collect();
            let t0 = rng.unit() as f32;
            let d = ((rng.unit() * 2.0 - 1.0) * FAST_MAX_DEVIATION) as f32;
            let (l, r) = cubic_block::<Simd>(&xl, &xr, t0, d, frames);
            let s = stretch_frames(d) as f64 * f64::from(d.abs());
            let tol = 1.5 * amp * w * w * s * s / 8.0 + 2e-6;
            for i in 0..frames {
                let t = f64::from(t0) + i as f64 * f64::from(d);
                let c = [
                    -t * (t - 1.0) * (t - 2.0) / 6.0,
                    (t + 1.0) * (t - 1.0) * (t - 2.0) / 2.0,
                    -(t + 1.0) * t * (t - 2.0) / 2.0,
                    (t + 1.0) * t * (t - 1.0) / 6.0,
                ];
                let want: f64 = (0..4).map(|k| c[k] * f64::from(xl[i + k])).sum();
                let err = (f64::from(l[i]) - want).abs();
                assert!(
                    err <= tol,
                    "{hz} Hz, d {d}, output {i}: error {err:e} > {tol:e}"
                );
                assert_eq!(r[i], -l[i], "channels share the weights");
            }
        }
    }
}

#[test]
fn fused_path_matches_separate_stages_bit_for_bit() {
    // Oracle: the separate stages (process into a block, then Strip::mix_into). The fused
    // path (interpolate_with + Strip::mix_groups_into) must leave the same bus and the same
    // meters, bit for bit, through seeded ratios (fast path, 44.1 kHz, invalid), gain, pan,
    // mute and audibility changes (ramps), and short stagings; where it declines it must
    // leave the resampler untouched.
    use crate::mix::{GainControl, Strip};
    let mut rng = Rng::new(0xfeed_f00d);
    let (mut fused, mut plain) = (Resampler::new(2048), Resampler::new(2048));
    let (mut sf, mut sp) = (Strip::new(), Strip::new());
    let mut tone = Tone::new(440.0, 3000.0, 48_000.0);
    let (mut bus_f, mut bus_p) = ([[0.0f32; 128]; 2], [[0.0f32; 128]; 2]);
    let (mut tl, mut tr) = ([0.0f32; 128], [0.0f32; 128]);
    let mut taken = 0;
    for q in 0..6000 {
        let ratio = match rng.range(0, 19) {
            0 => 44_100.0 / 48_000.0,
            1 => f64::NAN,
            _ => 1.0 + (rng.unit() * 2.0 - 1.0) * FAST_MAX_DEVIATION,
        };
        if rng.range(0, 29) == 0 {
            let (g, p) = (rng.unit() as f32 * 2.0, rng.unit() as f32 * 2.0 - 1.0);
            sf.set_gain(g);
            sp.set_gain(g);
            sf.set_pan(p);
            sp.set_pan(p);
        }
        if rng.range(0, 39) == 0 {
            sf.set_mute(!sf.mute());
            sp.set_mute(sf.mute());
        }
        let audible = rng.range(0, 49) != 0;
        let n = if rng.range(0, 9) == 0 {
            4 * rng.range(0, 32)
        } else {
            128
        };
        // Usually enough input; sometimes one block short.
        let short = rng.range(0, 49) == 0;
        while !short && plain.frames_needed(n, ratio) > 0 {
            let b = rng.range(32, 256);
            let (a, c) = plain.append_slots(b);
            tone.write(a, c);
            let (a2, c2) = fused.append_slots(b);
            a2.copy_from_slice(a);
            c2.copy_from_slice(c);
        }
        let before = fused.buffered_frames();
        let [fl, fr] = &mut bus_f;
        let out = fused.interpolate_with(ratio, n, |g| {
            sf.mix_groups_into(g, &mut fl[..n], &mut fr[..n], audible)
        });
        if out.is_some() {
            taken += 1;
            let k = plain.process(ratio, &mut tl[..n], &mut tr[..n]);
            assert_eq!(k, n, "the fused path only runs on a full block");
        } else {
            assert_eq!(fused.buffered_frames().to_bits(), before.to_bits());
            fused.process(ratio, &mut tl[..n], &mut tr[..n]);
            sf.mix_into(&tl[..n], &tr[..n], &mut fl[..n], &mut fr[..n], audible);
            plain.process(ratio, &mut tl[..n], &mut tr[..n]);
        }
        let [pl, pr] = &mut bus_p;
        sp.mix_into(&tl[..n], &tr[..n], &mut pl[..n], &mut pr[..n], audible);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&bus_f[0]), bits(&bus_p[0]), "left bus, quantum {q}");
        assert_eq!(bits(&bus_f[1]), bits(&bus_p[1]), "right bus, quantum {q}");
        assert_eq!(sf.meter(), sp.meter(), "meters, quantum {q}");
        assert_eq!(sf.current_gains(), sp.current_gains());
        assert_eq!(
            fused.buffered_frames().to_bits(),
            plain.buffered_frames().to_bits()
        );
        // Keep the bus bounded, identically on both sides.
        for b in bus_f.iter_mut().chain(bus_p.iter_mut()) {
            b.iter_mut().for_each(|x| *x *= 0.5);
        }
    }
    assert!(taken > 4000, "the fused path ran {taken} times");
}

#[test]
fn fused_path_declines_what_it_does_not_serve() {
    // Exact: no call, no state change for lengths that are not a multiple of 4 or exceed a
    // chunk, ratios off the fast path or invalid, and a staging that cannot cover the block.
    let mut res = Resampler::new(2048);
    res.append_slots(200).0.fill(0.5);
    let before = res.buffered_frames();
    for (ratio, n) in [
        (1.0, 126),
        (1.0, 132),
        (44_100.0 / 48_000.0, 128),
        (f64::NAN, 128),
        (1.0, 0),
    ] {
        let mut called = false;
        let out = res.interpolate_with(ratio, n, |_| called = true);
        assert!(out.is_none() || n == 0, "{ratio} {n}");
        assert_eq!(called, out.is_some());
        assert_eq!(res.buffered_frames(), before);
    }
    assert!(res.interpolate_with(1.0, 128, |_| ()).is_some());
    assert_eq!(res.buffered_frames(), before - 128.0);
    // 72 frames left: 68 outputs need 70; 72 need 74.
    assert!(res.interpolate_with(1.0, 72, |_| ()).is_none());
    assert!(res.interpolate_with(1.0, 68, |_| ()).is_some());
}

#[test]
fn staged_frames_start_at_the_read_position() {
    // Exact: the staged view is the input the next outputs are made of (ratio near 1),
    // clipped to what is buffered.
    let mut res = Resampler::new(2048);
    let (l, r) = res.append_slots(300);
    for (i, (a, b)) in l.iter_mut().zip(r.iter_mut()).enumerate() {
        *a = i as f32;
        *b = -(i as f32);
    }
    assert_eq!(res.skip(100, 1.0), 100);
    let (l, r) = res.staged(128);
    assert_eq!(l.len(), 128);
    assert_eq!((l[0], r[0], l[127]), (100.0, -100.0, 227.0));
    assert_eq!(res.staged(1000).0.len(), 200);
}
