//! Known-answer tests of concealment: pitch search on sines, seamless single losses, fades to
//! silence, no jumps on noise, and recovery across short blocks.

use super::*;
use std::f64::consts::PI;

fn sine(freq: f64, amp: f64, start: usize, out: &mut [f32]) {
    for (i, x) in out.iter_mut().enumerate() {
        *x = (amp * (2.0 * PI * freq * (start + i) as f64 / 48_000.0).sin()) as f32;
    }
}

/// Largest |x[n] - x[n-1]|.
fn max_step(x: &[f32]) -> f32 {
    x.windows(2)
        .map(|w| (w[1] - w[0]).abs())
        .fold(0.0, f32::max)
}

/// Plays `blocks` blocks of a sine through the concealer, concealing those in `lost`.
fn run(freq: f64, amp: f64, block: usize, blocks: usize, lost: &[usize]) -> Vec<f32> {
    let mut c = Concealer::new();
    let mut out = Vec::new();
    let (mut l, mut r) = (vec![0f32; block], vec![0f32; block]);
    for b in 0..blocks {
        if lost.contains(&b) {
            c.conceal(&mut l, &mut r);
        } else {
            sine(freq, amp, b * block, &mut l);
            r.copy_from_slice(&l);
            c.play(&mut l, &mut r);
        }
        assert_eq!(l, r, "both channels carry the same signal");
        out.extend_from_slice(&l);
    }
    out
}

#[test]
fn pitch_search_finds_the_period_of_a_sine() {
    // 440 Hz at 48 kHz: 109.09 frames; the search must land on 109 (or 218, 327, ... the
    // multiples) within one frame of a multiple of the true period.
    for &(freq, per) in &[(440.0, 48_000.0 / 440.0), (200.0, 240.0), (1000.0, 48.0)] {
        let mut c = Concealer::new();
        let (mut l, mut r) = (vec![0f32; 256], vec![0f32; 256]);
        for b in 0..8 {
            sine(freq, 0.5, b * 256, &mut l);
            r.copy_from_slice(&l);
            c.play(&mut l, &mut r);
        }
        c.conceal(&mut l, &mut r);
        let k = (c.period as f64 / per).round();
        assert!(k >= 1.0, "{freq} Hz: period {}", c.period);
        let err = (c.period as f64 - k * per).abs();
        assert!(err <= 1.0, "{freq} Hz: loop {} vs {k} x {per:.2}", c.period);
    }
}

#[test]
fn single_loss_is_seamless_on_a_sine() {
    // Tolerance: no step larger than 1.5 x the clean sine's largest step; the gap's output
    // stays within 5% of the true waveform (the loop is the signal one period earlier).
    let (freq, amp) = (440.0, 0.5);
    let clean_step = (2.0 * amp * (PI * freq / 48_000.0).sin()) as f32;
    for &block in &[32usize, 64, 128, 256] {
        let blocks = 48_000 / block / 4;
        let lost = [blocks / 2];
        let out = run(freq, amp, block, blocks, &lost);
        let step = max_step(&out[block..]); // after the initial fade-in
        assert!(
            step <= 1.5 * clean_step,
            "block {block}: step {step} vs {clean_step}"
        );
        let mut truth = vec![0f32; block];
        sine(freq, amp, lost[0] * block, &mut truth);
        let gap = &out[lost[0] * block..(lost[0] + 1) * block];
        let err = gap
            .iter()
            .zip(&truth)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(err <= 0.05 * amp as f32, "block {block}: gap error {err}");
    }
}

#[test]
fn long_gap_fades_to_silence_without_jumps() {
    // 100 ms of loss at 128-frame blocks: full level for HOLD_FRAMES, exact zero after
    // HOLD_FRAMES + FADE_FRAMES, no step above 1.5 x the clean step anywhere, and the
    // recovery fades in.
    let (freq, amp, block) = (300.0, 0.8, 128);
    let clean_step = (2.0 * amp * (PI * freq / 48_000.0).sin()) as f32;
    let lost: Vec<usize> = (40..78).collect();
    let out = run(freq, amp, block, 120, &lost);
    assert!(out.iter().all(|x| x.is_finite() && x.abs() <= 1.0));
    assert!(max_step(&out[block..]) <= 1.5 * clean_step);
    let start = 40 * block;
    let held = out[start..start + HOLD_FRAMES]
        .iter()
        .fold(0f32, |m, x| m.max(x.abs()));
    assert!(held > 0.95 * amp as f32, "held level {held}");
    let silent = &out[start + RUN_END..78 * block];
    assert!(silent.iter().all(|&x| x == 0.0), "silence after the fade");
    // Recovery: the first real frames rise from 0 over RECOVER_FRAMES.
    let rec = &out[78 * block..78 * block + RECOVER_FRAMES];
    assert!(rec[0].abs() < 0.01, "recovery starts near zero: {}", rec[0]);
    let after = &out[78 * block + RECOVER_FRAMES..];
    let peak = after.iter().fold(0f32, |m, x| m.max(x.abs()));
    assert!(
        (peak - amp as f32).abs() < 0.01,
        "full level after recovery: {peak}"
    );
}

#[test]
fn noise_and_silence_never_jump_or_blow_up() {
    // White noise in [-0.3, 0.3] (no pitch): the continuation starts with a step the noise
    // itself made, and the junction offset (at most 0.6) adds at most 0.6 / 32 per frame, so
    // no step may exceed 0.6 + 0.6 / 32 plus the recovery crossfade's share
    // (0.9 x pi / 256 < 0.012); values stay within 0.3 + 0.6.
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.6
    };
    let mut c = Concealer::new();
    let (mut l, mut r) = (vec![0f32; 128], vec![0f32; 128]);
    let mut out = Vec::new();
    for b in 0..200 {
        if b % 7 == 3 || b % 7 == 4 {
            c.conceal(&mut l, &mut r);
        } else {
            for (x, y) in l.iter_mut().zip(r.iter_mut()) {
                *x = noise();
                *y = noise();
            }
            c.play(&mut l, &mut r);
        }
        out.extend_from_slice(&l);
    }
    assert!(out.iter().all(|x| x.is_finite() && x.abs() <= 0.9 + 1e-6));
    let bound = 0.6 + 0.6 / 32.0 + 0.012;
    assert!(max_step(&out) <= bound, "step {}", max_step(&out));
    // Silence in, silence out (exactly).
    let mut c = Concealer::new();
    assert!(!c.conceal(&mut l, &mut r));
    assert!(l.iter().chain(&r).all(|&x| x == 0.0));
    assert!(c.is_silent());
}

#[test]
fn continuation_enters_with_the_signals_own_step() {
    // Known answer of the junction: the first synthesized sample follows the last played
    // one with exactly the step the history made one loop length earlier (tolerance 1e-6),
    // for noise, where the loop start is far from the last value.
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut c = Concealer::new();
    let (mut l, mut r) = (vec![0f32; 128], vec![0f32; 128]);
    for _ in 0..20 {
        for (x, y) in l.iter_mut().zip(r.iter_mut()) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *x = ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.8;
            *y = -*x * 0.5;
        }
        c.play(&mut l, &mut r);
    }
    let ring: Vec<(f32, f32)> = (1..=MAX_LAG + 2)
        .map(|back| {
            (
                Concealer::hist(&c.hist_l, c.pos, back),
                Concealer::hist(&c.hist_r, c.pos, back),
            )
        })
        .collect();
    c.conceal(&mut l, &mut r);
    let t = c.period;
    let (last, prev_start, before) = (ring[0], ring[t - 1], ring[t]);
    assert!(
        (l[0] - last.0 - (prev_start.0 - before.0)).abs() < 1e-6,
        "left"
    );
    assert!(
        (r[0] - last.1 - (prev_start.1 - before.1)).abs() < 1e-6,
        "right"
    );
}

#[test]
fn history_by_reference_equals_a_copied_history() {
    // Known answer: a concealer told about real blocks by reference (decoded again on demand
    // from the caller's storage) writes exactly what one given copies writes (tolerance 0:
    // same samples, same arithmetic), through losses, recoveries and a detach, for every
    // block size; it reads only references of the last HISTORY_NEED frames, and none
    // recorded before a detach (those are overwritten with 9.0 at the detach, a value no
    // output could contain).
    let mut s = 0x1234_5678_9abc_def1u64;
    for &block in &[32usize, 64, 128, 256] {
        let (mut by_copy, mut by_ref) = (Concealer::new(), Concealer::new());
        let mut stored: Vec<(Vec<f32>, Vec<f32>)> = Vec::new();
        let mut detached_below = 0;
        let (mut l, mut r) = (vec![0f32; block], vec![0f32; block]);
        let (mut l2, mut r2) = (vec![0f32; block], vec![0f32; block]);
        let mut concealed = 0;
        for b in 0..48_000 / block {
            if b == 24_000 / block {
                let stored_ref = &stored;
                by_ref.detach_with(|t, l, r| {
                    l.copy_from_slice(&stored_ref[t as usize].0);
                    r.copy_from_slice(&stored_ref[t as usize].1);
                });
                for (sl, sr) in &mut stored {
                    sl.fill(9.0);
                    sr.fill(9.0);
                }
                detached_below = stored.len();
            }
            if b % 23 == 7 || b % 23 == 8 || b % 41 == 30 {
                concealed += 1;
                by_copy.conceal(&mut l, &mut r);
                let newest = stored.len();
                let stored_ref = &stored;
                by_ref.conceal_with(&mut l2, &mut r2, |t, l, r| {
                    let t = t as usize;
                    assert!(t >= detached_below, "block {t} read after the detach");
                    assert!(
                        newest - t <= HISTORY_NEED.div_ceil(block),
                        "block {t} of {newest} read"
                    );
                    l.copy_from_slice(&stored_ref[t].0);
                    r.copy_from_slice(&stored_ref[t].1);
                });
            } else {
                for i in 0..block {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    let noise = ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2;
                    let t = (b * block + i) as f64 / 48_000.0;
                    l[i] = (0.5 * (2.0 * PI * 233.0 * t).sin()) as f32 + noise;
                    r[i] = (0.3 * (2.0 * PI * 587.0 * t).sin()) as f32 - noise;
                }
                l2.copy_from_slice(&l);
                r2.copy_from_slice(&r);
                stored.push((l.clone(), r.clone()));
                by_copy.play(&mut l, &mut r);
                by_ref.play_ref(&mut l2, &mut r2, (stored.len() - 1) as u32);
            }
            assert_eq!((&l, &r), (&l2, &r2), "block size {block}, block {b}");
        }
        assert!(concealed >= 16, "block size {block}: {concealed} concealed");
    }
}

#[test]
fn blocks_shorter_than_the_crossfade_recover_across_calls() {
    // 32-frame blocks: the 128-frame recovery spans 4 blocks; the output is identical to the
    // same stream concealed and recovered in one 128-frame call per block boundary
    // (tolerance 1e-6: same arithmetic, different call boundaries).
    let a = run(440.0, 0.5, 32, 200, &[100, 101, 102, 103]);
    let b = run(440.0, 0.5, 128, 50, &[25]);
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(diff < 1e-6, "difference {diff}");
}
