//! Known-answer tests of the mixer: pan law and ramps against their formulas, meters on
//! analytic signals, the limiter's figures, and the SIMD kernels held to the portable ones and
//! those to a scalar f64 oracle.

use super::kernels::{mix_block, scan};
use super::master::{apply_gain, knee, knee_lanes};
use super::meter::BlockStats;
use super::*;
use crate::testing::Rng;
use core::f64::consts::PI;

fn sine(freq: f64, amp: f64, start: usize, n: usize) -> Vec<f32> {
    (start..start + n)
        .map(|i| (amp * (2.0 * PI * freq * i as f64 / f64::from(SAMPLE_RATE)).sin()) as f32)
        .collect()
}

/// Least-squares amplitude of a sine at `freq` over `y` (an integer number of periods), and
/// the RMS of what is left, relative to the fitted sine (THD+N).
fn fit_sine(y: &[f32], freq: f64) -> (f64, f64) {
    let n = y.len() as f64;
    let w = 2.0 * PI * freq / f64::from(SAMPLE_RATE);
    let (mut s, mut c) = (0.0, 0.0);
    for (i, &v) in y.iter().enumerate() {
        s += f64::from(v) * (w * i as f64).sin();
        c += f64::from(v) * (w * i as f64).cos();
    }
    let (a, b) = (2.0 * s / n, 2.0 * c / n);
    let mut res = 0.0;
    for (i, &v) in y.iter().enumerate() {
        let fit = a * (w * i as f64).sin() + b * (w * i as f64).cos();
        res += (f64::from(v) - fit).powi(2);
    }
    let amp = a.hypot(b);
    let fit_rms = amp / 2f64.sqrt();
    (amp, (res / n).sqrt() / fit_rms)
}

/// Mixes `src` through `s` (`audible` or not) into `n` random buses and checks that each comes
/// out bit-identical: the strip adds nothing.
fn assert_bus_untouched(s: &mut Strip, rng: &mut Rng, src: &[f32], audible: bool, n: usize) {
    for _ in 0..n {
        let bus: Vec<f32> = (0..QUANTUM).map(|_| rng.uniform_f32(-1.0, 1.0)).collect();
        let (mut bl, mut br) = (bus.clone(), bus.clone());
        s.mix_into(src, src, &mut bl, &mut br, audible);
        assert_eq!(bl, bus);
        assert_eq!(br, bus);
    }
}

/// Frequency from interpolated upward zero crossings.
fn zero_crossing_freq(y: &[f32]) -> f64 {
    let mut first = None;
    let mut last = 0.0;
    let mut count = 0usize;
    for i in 1..y.len() {
        let (a, b) = (f64::from(y[i - 1]), f64::from(y[i]));
        if a < 0.0 && b >= 0.0 {
            let t = (i - 1) as f64 + a / (a - b);
            first.get_or_insert(t);
            last = t;
            count += 1;
        }
    }
    let first = first.expect("test signal crosses zero");
    (count - 1) as f64 * f64::from(SAMPLE_RATE) / (last - first)
}

/// Runs one strip over a whole signal in QUANTUM blocks, into a zeroed bus; returns the bus.
fn run_strip(strip: &mut Strip, l: &[f32], r: &[f32], audible: bool) -> (Vec<f32>, Vec<f32>) {
    let mut out_l = vec![0.0; l.len()];
    let mut out_r = vec![0.0; l.len()];
    for (((sl, sr), ol), or) in l
        .chunks(QUANTUM)
        .zip(r.chunks(QUANTUM))
        .zip(out_l.chunks_mut(QUANTUM))
        .zip(out_r.chunks_mut(QUANTUM))
    {
        strip.mix_into(sl, sr, ol, or, audible);
    }
    (out_l, out_r)
}

fn run_master(master: &mut Master, l: &mut [f32], r: &mut [f32]) {
    for (bl, br) in l.chunks_mut(QUANTUM).zip(r.chunks_mut(QUANTUM)) {
        master.process(bl, br);
    }
}

const CENTRE: f32 = core::f32::consts::FRAC_1_SQRT_2;

#[test]
fn pan_law_is_constant_power() {
    // Tolerance: gL² + gR² = 1 within 1e-6 over a 2001-point grid; centre −3.0103 dB ± 1e-3.
    let mut prev = (f32::INFINITY, -1.0);
    for k in 0..=2000 {
        let p = -1.0 + k as f32 / 1000.0;
        let (gl, gr) = pan_gains(p);
        assert!(
            (gl * gl + gr * gr - 1.0).abs() <= 1e-6,
            "pan {p}: {gl} {gr}"
        );
        assert!(gl >= 0.0 && gr >= 0.0);
        assert!(gl <= prev.0 && gr >= prev.1, "monotonic at {p}");
        prev = (gl, gr);
    }
    let (gl, gr) = pan_gains(0.0);
    assert_eq!(gl, gr);
    assert!((gl - CENTRE).abs() <= 1e-7);
    assert!((lin_to_db(gl) + 3.0103).abs() <= 1e-3, "{}", lin_to_db(gl));
    let (l, r) = pan_gains(-1.0);
    assert!(l == 1.0 && r <= 1e-7);
    let (l, r) = pan_gains(1.0);
    assert!(r == 1.0 && l <= 1e-7);
    // Out of range clamps, NaN reads as the centre.
    assert_eq!(pan_gains(3.0), pan_gains(1.0));
    assert_eq!(pan_gains(f32::NEG_INFINITY), pan_gains(-1.0));
    assert_eq!(pan_gains(f32::NAN), pan_gains(0.0));
}

#[test]
fn strip_pans_a_mono_source_and_balances_a_stereo_one() {
    // Tolerance 1e-6 on the settled factors.
    for &p in &[-1.0f32, -0.5, 0.0, 0.3, 1.0] {
        let mut s = Strip::new();
        s.set_gain(0.5);
        s.set_pan(p);
        let dc = vec![0.8f32; 2 * QUANTUM];
        let (ol, or) = run_strip(&mut s, &dc, &dc, true);
        let (gl, gr) = pan_gains(p);
        for i in QUANTUM..2 * QUANTUM {
            assert!((ol[i] - 0.8 * 0.5 * gl).abs() <= 1e-6, "pan {p} left");
            assert!((or[i] - 0.8 * 0.5 * gr).abs() <= 1e-6, "pan {p} right");
        }
    }
    // Stereo: hard right keeps the right input only; the left input is not folded over.
    let mut s = Strip::new();
    s.set_pan(1.0);
    let ones = vec![1.0f32; 2 * QUANTUM];
    let zeros = vec![0.0f32; 2 * QUANTUM];
    let (ol, or) = run_strip(&mut s, &ones, &zeros, true);
    assert!(ol[QUANTUM..].iter().all(|&x| x.abs() <= 1e-7));
    assert!(or.iter().all(|&x| x == 0.0));
    // Hard left: the left input at unity, +3.01 dB relative to the centre.
    s.set_pan(-1.0);
    let (ol, _) = run_strip(&mut s, &ones, &zeros, true);
    assert!(ol[QUANTUM..].iter().all(|&x| (x - 1.0).abs() <= 1e-6));
}

#[test]
fn gain_step_ramps_linearly_over_exactly_one_quantum() {
    // Tolerance 1e-6 on every ramp sample; consecutive steps within 1e-6 of the increment.
    let mut s = Strip::new();
    let dc = vec![1.0f32; 4 * QUANTUM];
    run_strip(&mut s, &dc[..QUANTUM], &dc[..QUANTUM], true);
    assert_eq!(s.current_gains(), [CENTRE; 2]);
    s.set_gain(0.25);
    let (ol, or) = run_strip(&mut s, &dc[..2 * QUANTUM], &dc[..2 * QUANTUM], true);
    let (from, to) = (CENTRE, 0.25 * CENTRE);
    let inc = (to - from) / QUANTUM as f32;
    let mut prev = from;
    for i in 0..QUANTUM {
        let want = from + inc * (i + 1) as f32;
        assert!(
            (ol[i] - want).abs() <= 1e-6,
            "sample {i}: {} vs {want}",
            ol[i]
        );
        assert_eq!(ol[i], or[i]);
        let step = ol[i] - prev;
        assert!((step - inc).abs() <= 1e-6, "step {i}: {step} vs {inc}");
        prev = ol[i];
    }
    assert!((ol[QUANTUM - 1] - to).abs() <= 1e-6);
    // The ramp is over: the next quantum is flat at the target, exactly.
    assert!(ol[QUANTUM..].iter().all(|&x| x == to));
}

#[test]
fn solo_and_mute_truth_table() {
    // Exact: every combination of (any_solo, strip_solo, strip_mute).
    let table = [
        (false, false, false, true),
        (false, false, true, false),
        (false, true, false, true),
        (false, true, true, false),
        (true, false, false, false),
        (true, false, true, false),
        (true, true, false, true),
        (true, true, true, false),
    ];
    for (any, solo, mute, heard) in table {
        assert_eq!(solo_audible(any, solo, mute), heard, "{any} {solo} {mute}");
    }
    let mut s = Strip::new();
    s.set_solo(true);
    s.set_mute(true);
    assert!(s.solo() && s.mute());
    // A muted strip is silent even if the caller says audible.
    assert_eq!(s.target_gains(true), [0.0; 2]);
}

#[test]
fn mute_ramps_out_then_leaves_the_bus_untouched_and_unmute_ramps_in() {
    // Exact: untouched bus is bit-identical; ramps within 1e-6 of linear.
    let mut rng = Rng::new(7);
    let mut s = Strip::new();
    let dc = vec![1.0f32; QUANTUM];
    let (mut ol, mut or) = (vec![0.0; QUANTUM], vec![0.0; QUANTUM]);
    s.mix_into(&dc, &dc, &mut ol, &mut or, true);
    s.set_mute(true);
    assert!(!s.is_silent(true), "still has to ramp out");
    ol.fill(0.0);
    s.mix_into(&dc, &dc, &mut ol, &mut or, true);
    assert!(s.is_silent(true) && s.is_silent(false));
    let inc = -CENTRE / QUANTUM as f32;
    for (i, &x) in ol.iter().enumerate() {
        assert!((x - (CENTRE + inc * (i + 1) as f32)).abs() <= 1e-6);
    }
    assert!(ol[QUANTUM - 1].abs() <= 1e-6);
    assert_bus_untouched(&mut s, &mut rng, &dc, true, 10);
    s.set_mute(false);
    assert!(!s.is_silent(true) && s.is_silent(false));
    ol.fill(0.0);
    s.mix_into(&dc, &dc, &mut ol, &mut or, true);
    let inc = CENTRE / QUANTUM as f32;
    let mut prev = 0.0;
    for &x in &ol {
        assert!((x - prev - inc).abs() <= 1e-6, "unmute step");
        prev = x;
    }
}

#[test]
fn inaudible_strip_adds_nothing_after_its_ramp_but_keeps_metering() {
    // Exact: after the ramp block the bus is bit-identical; meter peak equals the source peak.
    let mut rng = Rng::new(11);
    let mut s = Strip::new();
    let src: Vec<f32> = (0..QUANTUM).map(|_| rng.uniform_f32(-0.5, 0.5)).collect();
    let (mut ol, mut or) = (vec![0.0; QUANTUM], vec![0.0; QUANTUM]);
    s.mix_into(&src, &src, &mut ol, &mut or, true);
    s.mix_into(&src, &src, &mut ol, &mut or, false);
    assert_eq!(s.current_gains(), [0.0; 2]);
    let loud: Vec<f32> = (0..QUANTUM)
        .map(|i| if i == 5 { 0.9 } else { 0.1 })
        .collect();
    assert_bus_untouched(&mut s, &mut rng, &loud, false, 20);
    assert_eq!(s.meter().peak_l, 0.9);
    assert_eq!(s.meter().peak_r, 0.9);
}

#[test]
fn new_strip_fades_in_over_its_first_quantum() {
    // Tolerance 1e-6: the first block is a ramp from silence, not a step.
    let mut s = Strip::new();
    let dc = vec![1.0f32; QUANTUM];
    let (ol, _) = run_strip(&mut s, &dc, &dc, true);
    let inc = CENTRE / QUANTUM as f32;
    for (i, &x) in ol.iter().enumerate() {
        assert!((x - inc * (i + 1) as f32).abs() <= 1e-6);
    }
}

#[test]
fn meter_reads_a_sine() {
    // Tolerances: peak ± 0.01, RMS ± 0.01 after 2 s; dBFS helpers ± 0.1 dB.
    let mut s = Strip::new();
    s.set_mute(true); // pre-fader: a muted strip still meters its source
    let secs = 2 * SAMPLE_RATE as usize;
    let l = sine(997.0, 1.0, 0, secs);
    let r = sine(997.0, 0.5, 0, secs);
    run_strip(&mut s, &l, &r, true);
    let m = s.meter();
    assert!((m.peak_l - 1.0).abs() <= 0.01, "{m:?}");
    assert!((m.rms_l - CENTRE).abs() <= 0.01, "{m:?}");
    assert!((m.peak_r - 0.5).abs() <= 0.01, "{m:?}");
    assert!((m.rms_r - 0.3536).abs() <= 0.01, "{m:?}");
    assert!((m.rms_l_dbfs() + 3.01).abs() <= 0.1);
    assert!((m.peak_r_dbfs() + 6.02).abs() <= 0.1);
    assert!((m.peak_dbfs() - 0.0).abs() <= 0.1);
}

#[test]
fn meter_holds_then_decays_in_silence() {
    // Tolerances: peak held exactly for 0.5 s, then −60 dB ± 0.5 dB after 3 s more;
    // RMS within 1 % of ms0·exp(−t/τ); everything exactly zero after 20 s.
    let mut s = Strip::new();
    let q_per_s = SAMPLE_RATE as usize / QUANTUM; // 375
    let sig = sine(1000.0, 0.9, 0, q_per_s * QUANTUM);
    let mut impulse = vec![0.0f32; QUANTUM];
    impulse[0] = 1.0;
    run_strip(&mut s, &sig, &sig, true);
    run_strip(&mut s, &impulse, &impulse, true);
    let ms0 = f64::from(s.meter().rms_l).powi(2);
    assert_eq!(s.meter().peak_l, 1.0);
    let quiet = vec![0.0f32; QUANTUM];
    let mut blocks = 0usize;
    let mut run = |s: &mut Strip, k: usize| {
        for _ in 0..k {
            run_strip(s, &quiet, &quiet, true);
        }
        blocks += k;
        blocks as f64 / q_per_s as f64
    };
    run(&mut s, PEAK_HOLD_FRAMES as usize / QUANTUM - 1);
    assert_eq!(s.meter().peak_l, 1.0, "held for 0.5 s");
    let t = run(&mut s, 1);
    let want_rms = (ms0 * (-t / f64::from(RMS_TAU_S)).exp()).sqrt();
    assert!((f64::from(s.meter().rms_l) / want_rms - 1.0).abs() <= 0.01);
    run(&mut s, q_per_s * 3);
    let fall = s.meter().peak_l_dbfs();
    assert!(
        (fall + 60.0).abs() <= 0.5,
        "fell to {fall} dB after 0.5 s hold + 3 s"
    );
    run(&mut s, q_per_s * 20);
    assert_eq!(
        s.meter(),
        Meter::default(),
        "fully decayed meters read exactly zero"
    );
    assert_eq!(s.meter().peak_dbfs(), MIN_DB);
}

#[test]
fn meter_ballistics_do_not_depend_on_block_length() {
    // Tolerances between 64- and 128-frame blocks: RMS 1e-4 relative after 1 s of sine and
    // 1 s of silence; peak 1.5e-2 relative (0.13 dB) 1.5 s after an impulse: the hold is
    // counted in whole blocks, so its end can differ by up to 128 frames (0.05 dB of fall).
    let readings: Vec<(Meter, Meter)> = [64usize, 128]
        .iter()
        .map(|&block| {
            let run = |x: &[f32]| {
                let mut s = Strip::new();
                let (mut bl, mut br) = (vec![0.0; block], vec![0.0; block]);
                for c in x.chunks(block) {
                    s.mix_into(c, c, &mut bl, &mut br, true);
                }
                s.meter()
            };
            let mut x = sine(440.0, 0.8, 0, SAMPLE_RATE as usize);
            x.extend(vec![0.0; SAMPLE_RATE as usize]);
            let mut imp = vec![0.0; 3 * SAMPLE_RATE as usize / 2];
            imp[0] = 0.8;
            (run(&x), run(&imp))
        })
        .collect();
    let ((a, ai), (b, bi)) = (readings[0], readings[1]);
    assert!((a.rms_l / b.rms_l - 1.0).abs() <= 1e-4, "{a:?} {b:?}");
    assert!(
        (ai.peak_l / bi.peak_l - 1.0).abs() <= 1.5e-2,
        "{ai:?} {bi:?}"
    );
    assert!(bi.peak_l < 0.8 * 0.9, "the impulse has decayed: {bi:?}");
}

#[test]
fn soft_knee_is_continuous_bounded_and_odd() {
    // Tolerances: identity below T exactly; one-sided slope over 1e-4 above T within 3e-3 of 1
    // (curvature 2/(1 − T) gives 9e-4, f32 rounding up to 1.2e-3); |out| ≤ 1 always.
    let t = LIMIT_THRESHOLD;
    for k in 0..=1000 {
        let x = t * k as f32 / 1000.0;
        assert_eq!(knee(x), x);
        assert_eq!(knee(-x), -x);
    }
    let h = 1e-4f32;
    let slope = (knee(t + h) - knee(t)) / h;
    assert!((slope - 1.0).abs() <= 3e-3, "slope {slope}");
    let mut prev = knee(t);
    for k in 1..=100_000 {
        let x = t + k as f32 * 1e-3;
        let y = knee(x);
        assert!(y >= prev && y <= 1.0 && y < x, "x {x} y {y}");
        assert_eq!(knee(-x), -y);
        prev = y;
    }
    for x in [1e10f32, 1e30, f32::MAX, f32::INFINITY] {
        assert!(knee(x) <= 1.0 && knee(x) > 0.99);
        assert!(knee(-x) >= -1.0);
    }
}

/// Five in-phase full-scale sines summed (peak 5.0) through the master at unity gain.
fn limit_five_sines(freq: f64) -> (Vec<f32>, Master) {
    let n = SAMPLE_RATE as usize;
    let mut l = vec![0.0f32; n];
    for _ in 0..5 {
        for (o, x) in l.iter_mut().zip(sine(freq, 1.0, 0, n)) {
            *o += x;
        }
    }
    let mut r = l.clone();
    let mut m = Master::new();
    run_master(&mut m, &mut l, &mut r);
    assert_eq!(l, r);
    (l, m)
}

#[test]
fn limiter_keeps_five_full_scale_sines_under_full_scale_and_sinusoidal() {
    // Tolerances: |out| ≤ 1.0 everywhere (exact); over the last 0.5 s: frequency within
    // 0.01 %, THD+N ≤ 1e-5 (−100 dB; measured ~4e-8: in steady state the limiter is a pure
    // gain), amplitude −1 dBFS ± 0.05 dB, gain reduction
    // 20·log10(5/T) ± 0.05 dB; after the attack block the envelope does the limiting: the
    // output never exceeds T by more than 0.1 % (the knee is only grazed).
    for freq in [1000.0, 440.0, 100.0, 60.0] {
        let (y, m) = limit_five_sines(freq);
        assert!(
            y.iter().all(|x| x.abs() <= 1.0),
            "{freq} Hz exceeds full scale"
        );
        let tail = &y[y.len() / 2..];
        let (amp, thd) = fit_sine(tail, freq);
        let f_est = zero_crossing_freq(tail);
        assert!(
            (f_est / freq - 1.0).abs() <= 1e-4,
            "{freq} Hz came out at {f_est}"
        );
        assert!(thd <= 1e-5, "{freq} Hz: THD+N {thd}");
        let amp_db = 20.0 * amp.log10();
        assert!(
            (amp_db + 1.0).abs() <= 0.05,
            "{freq} Hz: amplitude {amp_db} dB"
        );
        let gr = f64::from(m.gain_reduction_db());
        let want = 20.0 * (5.0 / f64::from(LIMIT_THRESHOLD)).log10();
        assert!((gr - want).abs() <= 0.05, "{freq} Hz: GR {gr} vs {want}");
        assert!(
            m.knee_blocks() >= 1,
            "{freq} Hz: the attack block is shaped"
        );
        // The attack lasts until the block after the one holding the first crest.
        let attack = (f64::from(SAMPLE_RATE) / (4.0 * freq)) as usize / QUANTUM + 1;
        let after = y[attack * QUANTUM..]
            .iter()
            .fold(0.0f32, |a, x| a.max(x.abs()));
        assert!(
            after <= LIMIT_THRESHOLD * 1.001,
            "{freq} Hz: {after} after the attack"
        );
        assert!((m.meter().peak_l_dbfs() + 1.0).abs() <= 0.05);
    }
}

#[test]
fn quiet_bus_passes_bit_exact_and_limiter_releases_to_exact_unity() {
    // Exact: a −12 dBFS bus (sine, and noise peaking at −12 dBFS) is returned bit-identical
    // at unity master gain, from the first block and again 3 s after a loud passage.
    let n = SAMPLE_RATE as usize;
    let amp = f64::from(db_to_lin(-12.0));
    let mut rng = Rng::new(3);
    let noise: Vec<f32> = (0..n)
        .map(|_| rng.uniform_f32(-1.0, 1.0) * amp as f32)
        .collect();
    let mut m = Master::new();
    for src in [sine(1234.5, amp, 0, n), noise.clone()] {
        let (mut l, mut r) = (src.clone(), src.clone());
        run_master(&mut m, &mut l, &mut r);
        assert_eq!(l, src);
        assert_eq!(r, src);
    }
    assert_eq!(m.gain_reduction_db(), 0.0);
    let mut loud = sine(200.0, 3.0, 0, n / 2);
    let mut loud_r = loud.clone();
    run_master(&mut m, &mut loud, &mut loud_r);
    assert!(m.gain_reduction_db() > 10.0);
    let mut settle = sine(1234.5, amp, 0, 3 * n);
    let mut settle_r = settle.clone();
    run_master(&mut m, &mut settle, &mut settle_r);
    assert_eq!(m.limiter_gain(), 1.0);
    assert_eq!(m.gain_reduction_db(), 0.0);
    let (mut l, mut r) = (noise.clone(), noise.clone());
    run_master(&mut m, &mut l, &mut r);
    assert_eq!(l, noise);
}

#[test]
fn master_gain_step_ramps_linearly() {
    // Tolerance 1e-6: a step from 1 to 2 on a 0.25 DC bus (below threshold) ramps over the
    // block, then holds.
    let mut m = Master::new();
    m.set_gain_db(6.0206);
    assert!((m.gain() - 2.0).abs() <= 1e-4);
    let g = m.gain();
    let (mut l, mut r) = (vec![0.25f32; 2 * QUANTUM], vec![0.25f32; 2 * QUANTUM]);
    run_master(&mut m, &mut l, &mut r);
    for (i, &x) in l[..QUANTUM].iter().enumerate() {
        let want = 0.25 * (1.0 + (g - 1.0) * (i + 1) as f32 / QUANTUM as f32);
        assert!((x - want).abs() <= 1e-6, "{i}: {x} vs {want}");
    }
    assert!(l[QUANTUM..].iter().all(|&x| (x - 0.25 * g).abs() <= 1e-6));
    assert_eq!(m.gain_reduction_db(), 0.0);
}

#[test]
fn nonfinite_bus_blocks_are_silenced_and_counted() {
    // Exact: poisoned blocks come out as zeros, the count matches, and the next clean
    // quiet block is still bit-exact (no state poisoned).
    let mut m = Master::new();
    for (k, bad) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30]
        .iter()
        .enumerate()
    {
        let mut l = sine(500.0, 0.5, 0, QUANTUM);
        let mut r = l.clone();
        if k % 2 == 0 {
            l[37] = *bad;
        } else {
            r[QUANTUM - 1] = *bad;
        }
        m.process(&mut l, &mut r);
        assert!(l.iter().chain(&r).all(|&x| x == 0.0), "{bad}");
        assert_eq!(m.nonfinite_blocks(), k as u64 + 1);
    }
    let clean = sine(500.0, 0.25, 0, QUANTUM);
    let (mut l, mut r) = (clean.clone(), clean.clone());
    m.process(&mut l, &mut r);
    assert_eq!(l, clean);
    let meter = m.meter();
    assert!(meter.peak_l.is_finite() && meter.rms_l.is_finite());
}

#[test]
fn nonfinite_source_is_counted_and_kept_out_of_the_meter() {
    // Exact: the meter reading is unchanged by the poisoned block; the master cleans the bus.
    let mut s = Strip::new();
    let good = sine(300.0, 0.5, 0, QUANTUM);
    let (mut l, mut r) = (vec![0.0; QUANTUM], vec![0.0; QUANTUM]);
    s.mix_into(&good, &good, &mut l, &mut r, true);
    let before = s.meter();
    let mut bad = good.clone();
    bad[10] = f32::NAN;
    s.mix_into(&bad, &good, &mut l, &mut r, true);
    assert_eq!(s.nonfinite_blocks(), 1);
    assert_eq!(s.meter(), before);
    let mut m = Master::new();
    m.process(&mut l, &mut r);
    assert!(l.iter().chain(&r).all(|x| x.is_finite() && x.abs() <= 1.0));
    assert_eq!(m.nonfinite_blocks(), 1);
}

#[test]
fn setters_validate_their_input() {
    // Exact, per the documented rules: NaN ignored, out of range clamped.
    let mut s = Strip::new();
    s.set_gain(0.5);
    s.set_gain(f32::NAN);
    assert_eq!(s.gain(), 0.5);
    s.set_gain(-3.0);
    assert_eq!(s.gain(), 0.0);
    s.set_gain(f32::INFINITY);
    assert_eq!(s.gain(), MAX_GAIN);
    s.set_gain_db(100.0);
    assert_eq!(s.gain(), MAX_GAIN);
    s.set_gain_db(f32::NEG_INFINITY);
    assert_eq!(s.gain(), 0.0);
    assert_eq!(s.gain_db(), MIN_DB);
    s.set_gain_db(-6.0);
    s.set_gain_db(f32::NAN);
    assert!((s.gain_db() + 6.0).abs() <= 1e-4);
    s.set_pan(0.25);
    s.set_pan(f32::NAN);
    assert_eq!(s.pan(), 0.25);
    s.set_pan(-7.0);
    assert_eq!(s.pan(), -1.0);
    let mut m = Master::new();
    m.set_gain(f32::NAN);
    assert_eq!(m.gain(), 1.0);
    m.set_gain(9.0);
    assert_eq!(m.gain(), MAX_GAIN);
    m.set_gain(-1.0);
    assert_eq!(m.gain(), 0.0);
    // dB helpers, tolerance 1e-4 dB / 1e-5 linear.
    assert_eq!(db_to_lin(0.0), 1.0);
    assert!((db_to_lin(-6.0206) - 0.5).abs() <= 1e-5);
    assert!((lin_to_db(0.5) + 6.0206).abs() <= 1e-4);
    assert_eq!(db_to_lin(f32::NAN), 0.0);
    assert_eq!(lin_to_db(0.0), MIN_DB);
    assert_eq!(lin_to_db(-1.0), MIN_DB);
    assert_eq!(lin_to_db(f32::NAN), MIN_DB);
}

#[test]
fn odd_and_mismatched_lengths() {
    // Tolerance 1e-6 against the linear-ramp formula on a 131-frame block (tail path);
    // the master zeroes the longer slice's extra frames and still limits.
    let mut s = Strip::new();
    let n = 131;
    let dc = vec![1.0f32; n];
    let (mut l, mut r) = (vec![0.0; n], vec![0.0; n + 9]);
    s.mix_into(&dc, &dc, &mut l, &mut r, true);
    let inc = CENTRE / n as f32;
    for i in 0..n {
        assert!((l[i] - inc * (i + 1) as f32).abs() <= 1e-6, "{i}");
        assert_eq!(l[i], r[i]);
    }
    assert!(r[n..].iter().all(|&x| x == 0.0));
    let mut m = Master::new();
    let mut l = vec![4.0f32; 7];
    let mut r = vec![4.0f32; 12];
    m.process(&mut l, &mut r);
    assert!(l.iter().all(|x| x.abs() <= 1.0));
    assert!(r[..7].iter().all(|x| x.abs() <= 1.0));
    assert!(r[7..].iter().all(|&x| x == 0.0));
    m.process(&mut [], &mut []);
}

fn stats_bits(s: &BlockStats) -> [u32; 4] {
    [
        s.peak[0].to_bits(),
        s.peak[1].to_bits(),
        s.sumsq[0].to_bits(),
        s.sumsq[1].to_bits(),
    ]
}

/// Random samples including edge values: zeros, ±T, beyond full scale, huge, tiny.
fn edgy_block(rng: &mut Rng, n: usize) -> Vec<f32> {
    let edges = [
        0.0,
        -0.0,
        LIMIT_THRESHOLD,
        -LIMIT_THRESHOLD,
        1.0,
        -1.0,
        3.7,
        -1e10,
        1e-30,
    ];
    (0..n)
        .map(|_| {
            if rng.chance(0.2) {
                edges[rng.below(edges.len() as u64) as usize]
            } else {
                rng.uniform_f32(-2.0, 2.0)
            }
        })
        .collect()
}

#[test]
fn peak_from_the_largest_square_is_exact() {
    // Exact: sqrt(fl(y·y)) == |y| for every 37th f32 in [1, 4) (scaling by powers of 4 is
    // exact for both the square and the root, so this covers every exponent whose square
    // stays normal; the whole range was checked once, 25 million values), and for seeded
    // values from 2^-62 to 2^62. Below ~1.1e-19 the square is subnormal and the peak may
    // read lower: far under the meters' −140 dB floor.
    let (lo, hi) = (1.0f32.to_bits(), 4.0f32.to_bits());
    for b in (lo..hi).step_by(37) {
        let y = f32::from_bits(b);
        assert_eq!((y * y).sqrt(), y, "{y:e}");
    }
    let mut rng = Rng::new(0x5a5a);
    for _ in 0..100_000 {
        let sign = if rng.chance(0.5) { -1.0 } else { 1.0 };
        let y = sign * rng.uniform_f32(1.0, 2.0) * 2f32.powi(rng.below(124) as i32 - 62);
        assert_eq!((y * y).sqrt(), y.abs(), "{y:e}");
    }
    let block: Vec<f32> = (0..131).map(|_| rng.uniform_f32(-3.0, 3.0)).collect();
    let stats = scan::<Simd>(&block, &block, block.len());
    let peak = block.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    assert_eq!(stats.peak, [peak, peak]);
}

#[test]
fn simd_kernels_match_the_portable_kernels_bit_for_bit() {
    // Exact: the SIMD lanes run the same IEEE operations in the same order as the portable
    // fallback, so outputs and stats must be bit-identical, for every length (tails too).
    use super::simd::portable::Portable;
    let mut rng = Rng::new(0xB17);
    for &n in &[0usize, 1, 3, 4, 5, 8, 127, 128, 131, 256] {
        for _ in 0..20 {
            let (a, b) = (edgy_block(&mut rng, n), edgy_block(&mut rng, n));
            let (oa, ob) = (edgy_block(&mut rng, n), edgy_block(&mut rng, n));
            assert_eq!(
                stats_bits(&scan::<Simd>(&a, &b, n)),
                stats_bits(&scan::<Portable>(&a, &b, n))
            );
            let g0 = [rng.uniform_f32(0.0, 4.0), rng.uniform_f32(0.0, 4.0)];
            let step = [rng.uniform_f32(-0.03, 0.03), rng.uniform_f32(-0.03, 0.03)];
            for ramp in [false, true] {
                let (mut sl, mut sr, mut pl, mut pr) =
                    (oa.clone(), ob.clone(), oa.clone(), ob.clone());
                let (s1, s2) = if ramp {
                    (
                        mix_block::<Simd, true>([&a, &b], &mut sl, &mut sr, n, g0, step),
                        mix_block::<Portable, true>([&a, &b], &mut pl, &mut pr, n, g0, step),
                    )
                } else {
                    (
                        mix_block::<Simd, false>([&a, &b], &mut sl, &mut sr, n, g0, step),
                        mix_block::<Portable, false>([&a, &b], &mut pl, &mut pr, n, g0, step),
                    )
                };
                assert_eq!(stats_bits(&s1), stats_bits(&s2));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&sl), bits(&pl));
                assert_eq!(bits(&sr), bits(&pr));
            }
            let (t0, st) = (rng.uniform_f32(0.0, 4.0), rng.uniform_f32(-0.03, 0.03));
            for with_knee in [false, true] {
                let (mut sl, mut sr, mut pl, mut pr) = (a.clone(), b.clone(), a.clone(), b.clone());
                let (s1, s2) = if with_knee {
                    (
                        apply_gain::<Simd, true>(&mut sl, &mut sr, n, t0, st),
                        apply_gain::<Portable, true>(&mut pl, &mut pr, n, t0, st),
                    )
                } else {
                    (
                        apply_gain::<Simd, false>(&mut sl, &mut sr, n, t0, st),
                        apply_gain::<Portable, false>(&mut pl, &mut pr, n, t0, st),
                    )
                };
                assert_eq!(stats_bits(&s1), stats_bits(&s2));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&sl), bits(&pl));
                assert_eq!(bits(&sr), bits(&pr));
            }
        }
    }
    // The lane knee is the scalar knee, lane by lane, including ±0, ±T, ±∞.
    let xs = [
        0.0f32,
        -0.0,
        LIMIT_THRESHOLD,
        -LIMIT_THRESHOLD,
        0.9,
        -0.95,
        1.0,
        7.0,
        -1e20,
    ];
    let xs = xs.iter().chain(&[f32::INFINITY, f32::NEG_INFINITY, 0.5]);
    let v: Vec<f32> = xs.copied().collect();
    for c in v.chunks_exact(4) {
        let q = [c[0], c[1], c[2], c[3]];
        let simd = knee_lanes(Simd::from_array(q)).to_array();
        let port = knee_lanes(Portable::from_array(q)).to_array();
        for k in 0..4 {
            assert_eq!(simd[k].to_bits(), knee(q[k]).to_bits(), "{}", q[k]);
            assert_eq!(port[k].to_bits(), knee(q[k]).to_bits(), "{}", q[k]);
        }
    }
}

#[test]
fn portable_kernels_match_a_scalar_oracle() {
    // Tolerances: peaks exact; sums of squares within 1e-5 relative of f64; mixed samples
    // within 1e-6 (plus 1e-6 relative) of f64 `out + src·(g0 + step·(i + 1))`.
    use super::simd::portable::Portable;
    let mut rng = Rng::new(0x0AC1E);
    for &n in &[1usize, 4, 7, 128, 131] {
        for _ in 0..50 {
            let a: Vec<f32> = (0..n).map(|_| rng.uniform_f32(-1.5, 1.5)).collect();
            let b: Vec<f32> = (0..n).map(|_| rng.uniform_f32(-1.5, 1.5)).collect();
            let stats = scan::<Portable>(&a, &b, n);
            for (ch, x) in [&a, &b].iter().enumerate() {
                let peak = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let ss: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
                assert_eq!(stats.peak[ch], peak);
                assert!((f64::from(stats.sumsq[ch]) / ss - 1.0).abs() <= 1e-5);
            }
            let g0 = [rng.uniform_f32(0.0, 2.0), rng.uniform_f32(0.0, 2.0)];
            let step = [rng.uniform_f32(-0.01, 0.01), rng.uniform_f32(-0.01, 0.01)];
            let (mut ol, mut or) = (a.clone(), b.clone());
            mix_block::<Portable, true>([&b, &a], &mut ol, &mut or, n, g0, step);
            for i in 0..n {
                let k = (i + 1) as f64;
                let gl = f64::from(g0[0]) + f64::from(step[0]) * k;
                let gr = f64::from(g0[1]) + f64::from(step[1]) * k;
                let wl = f64::from(a[i]) + f64::from(b[i]) * gl;
                let wr = f64::from(b[i]) + f64::from(a[i]) * gr;
                assert!((f64::from(ol[i]) - wl).abs() <= 1e-6 + 1e-6 * wl.abs());
                assert!((f64::from(or[i]) - wr).abs() <= 1e-6 + 1e-6 * wr.abs());
            }
        }
    }
}

/// The documented strip behaviour, written the plain way: validated parameters, pan law,
/// linear ramp of the effective factors across each block.
struct OracleStrip {
    gain: f64,
    pan: f64,
    mute: bool,
    solo: bool,
    current: [f64; 2],
}

impl OracleStrip {
    fn target(&self, any_solo: bool) -> [f64; 2] {
        let heard = !self.mute && (self.solo || !any_solo);
        if !heard {
            return [0.0; 2];
        }
        let theta = (self.pan + 1.0) * PI / 4.0;
        [self.gain * theta.cos(), self.gain * theta.sin()]
    }
}

#[test]
fn random_parameter_changes_match_the_oracle_and_never_exceed_full_scale() {
    // Tolerances: bus before the master within 2e-5 of the f64 oracle; after the master
    // every sample finite and |x| ≤ 1.0 (exact). Five strips, 3000 quanta, seeded.
    let mut rng = Rng::new(0x5EED_1234_ABCD);
    const PEERS: usize = 5;
    let mut strips: Vec<Strip> = (0..PEERS).map(|_| Strip::new()).collect();
    let mut oracle: Vec<OracleStrip> = (0..PEERS)
        .map(|_| OracleStrip {
            gain: 1.0,
            pan: 0.0,
            mute: false,
            solo: false,
            current: [0.0; 2],
        })
        .collect();
    let mut master = Master::new();
    let freqs = [110.0, 220.5, 440.0, 997.0, 3001.0];
    let wild = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -5.0, 1e9];
    let mut worst = 0.0f64;
    for q in 0..3000usize {
        for (s, o) in strips.iter_mut().zip(oracle.iter_mut()) {
            if rng.chance(0.1) {
                let g = if rng.chance(0.1) {
                    wild[rng.below(5) as usize]
                } else {
                    rng.uniform_f32(0.0, 5.0)
                };
                s.set_gain(g);
                if !g.is_nan() {
                    o.gain = f64::from(g.clamp(0.0, MAX_GAIN));
                }
            }
            if rng.chance(0.1) {
                let p = if rng.chance(0.1) {
                    wild[rng.below(5) as usize]
                } else {
                    rng.uniform_f32(-1.5, 1.5)
                };
                s.set_pan(p);
                if !p.is_nan() {
                    o.pan = f64::from(p.clamp(-1.0, 1.0));
                }
            }
            if rng.chance(0.05) {
                o.mute = !o.mute;
                s.set_mute(o.mute);
            }
            if rng.chance(0.03) {
                o.solo = !o.solo;
                s.set_solo(o.solo);
            }
        }
        if rng.chance(0.05) {
            master.set_gain(rng.uniform_f32(-0.5, 5.0));
        }
        if rng.chance(0.01) {
            master.set_gain(wild[rng.below(5) as usize]);
        }
        let any_solo = strips.iter().any(|s| s.solo());
        let mut bus_l = vec![0.0f32; QUANTUM];
        let mut bus_r = vec![0.0f32; QUANTUM];
        let mut want_l = vec![0.0f64; QUANTUM];
        let mut want_r = vec![0.0f64; QUANTUM];
        for (k, (s, o)) in strips.iter_mut().zip(oracle.iter_mut()).enumerate() {
            let amp = f64::from(rng.uniform_f32(0.0, 2.0));
            let src_l = sine(freqs[k], amp, q * QUANTUM, QUANTUM);
            let src_r: Vec<f32> = (0..QUANTUM).map(|_| rng.uniform_f32(-1.0, 1.0)).collect();
            let heard = solo_audible(any_solo, s.solo(), s.mute());
            s.mix_into(&src_l, &src_r, &mut bus_l, &mut bus_r, heard);
            let target = o.target(any_solo);
            for i in 0..QUANTUM {
                let f = (i + 1) as f64 / QUANTUM as f64;
                let gl = o.current[0] + (target[0] - o.current[0]) * f;
                let gr = o.current[1] + (target[1] - o.current[1]) * f;
                want_l[i] += f64::from(src_l[i]) * gl;
                want_r[i] += f64::from(src_r[i]) * gr;
            }
            o.current = target;
        }
        for i in 0..QUANTUM {
            worst = worst.max((f64::from(bus_l[i]) - want_l[i]).abs());
            worst = worst.max((f64::from(bus_r[i]) - want_r[i]).abs());
        }
        master.process(&mut bus_l, &mut bus_r);
        assert!(
            bus_l
                .iter()
                .chain(&bus_r)
                .all(|x| x.is_finite() && x.abs() <= 1.0),
            "quantum {q}"
        );
        assert!(master.gain_reduction_db().is_finite());
    }
    assert!(worst <= 2e-5, "bus differs from the oracle by {worst}");
}
