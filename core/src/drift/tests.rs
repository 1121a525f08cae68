//! Tests of the drift controller: its precomputed coefficients against the plain formulas,
//! clamp, slew and non-finite input, and simulated hours of bursty delivery through the
//! resampler, checked against the figures in the module docs.

use super::*;
use crate::resample::Resampler;
use crate::testing::{Rng, Tone};
use std::collections::VecDeque;
use std::f64::consts::PI;

/// The drift update as first written: the coefficients derived from T with four divisions
/// in every update. The oracle of the precomputed coefficients.
struct PlainController {
    alpha: f64,
    kp_scale: f64,
    ki_scale: f64,
    t_lock: f64,
    t_step: f64,
    t_now: f64,
    max: f64,
    slew: f64,
    lp1: f64,
    lp2: f64,
    integral: f64,
    drift: f64,
}

impl PlainController {
    fn new() -> Self {
        let d = DriftConfig::default();
        let dt = 1.0 / d.updates_per_second;
        PlainController {
            alpha: dt / d.smoothing_seconds,
            kp_scale: 2.0 * d.damping / d.input_rate_hz,
            ki_scale: dt / d.input_rate_hz,
            t_lock: d.loop_seconds,
            t_step: (d.loop_seconds - d.acquire_seconds) * dt / d.narrowing_seconds,
            t_now: d.acquire_seconds,
            max: d.max_ppm * 1e-6,
            slew: d.max_slew_ppm_per_second * 1e-6 * dt,
            lp1: 0.0,
            lp2: 0.0,
            integral: 0.0,
            drift: 0.0,
        }
    }

    fn update(&mut self, fill: f64, target: f64) -> f64 {
        let e = fill - target;
        let t = self.t_now;
        let alpha = self.alpha / (self.alpha + t / self.t_lock);
        self.lp1 += alpha * (e - self.lp1);
        self.lp2 += alpha * (self.lp1 - self.lp2);
        let e = self.lp2;
        if t != self.t_lock {
            self.t_now = (t + self.t_step).min(self.t_lock);
        }
        let integral = (self.integral + self.ki_scale / (t * t) * e).clamp(-self.max, self.max);
        let wanted = integral + self.kp_scale / t * e;
        let clamped = wanted.clamp(-self.max, self.max);
        if clamped == wanted || (wanted > self.max) != (e > 0.0) {
            self.integral = integral;
        }
        self.drift += (clamped - self.drift).clamp(-self.slew, self.slew);
        1.0 + self.drift
    }
}

#[test]
fn precomputed_coefficients_follow_the_plain_formulas() {
    // Tolerance 1e-6 ppm on the drift and the offset estimate through 300 s of seeded fill
    // (acquisition, narrowing, lock, and the clamp): the one-division coefficients differ
    // from the four-division ones by rounding only.
    let mut rng = Rng::new(0xd81f7);
    let (mut c, mut o) = (DriftController::default(), PlainController::new());
    let mut worst = 0.0f64;
    for q in 0..(300 * 375) {
        let fill = 1024.0
            + 300.0 * (q as f64 / 2000.0).sin()
            + (rng.unit() - 0.5) * 600.0
            + if (40_000..50_000).contains(&q) {
                9e5
            } else {
                0.0
            };
        let (a, b) = (c.update(fill, 1024.0), o.update(fill, 1024.0));
        worst = worst.max((a - b).abs() * 1e6);
        assert!((c.offset_ppm() - o.integral * 1e6).abs() <= 1e-6, "at {q}");
    }
    eprintln!("coefficients: largest drift difference {worst:e} ppm");
    assert!(worst <= 1e-6);
    assert_eq!(c.coeff, c.coeff_lock, "narrowed to the locked loop");
}

#[test]
fn controller_stays_at_unity_on_target() {
    // Fill exactly on target: the factor is exactly 1 (tolerance 0).
    let mut c = DriftController::default();
    for _ in 0..10_000 {
        assert_eq!(c.update(1024.0, 1024.0), 1.0);
    }
    assert_eq!(c.ppm(), 0.0);
}

#[test]
fn controller_is_clamped_and_slew_limited() {
    // A fill far above target drives the drift to +1000 ppm, far below to −1000 ppm; it
    // never leaves ±1000 ppm and never moves more than 200 ppm/s ÷ 375 per update
    // (+1e-12 for rounding).
    let mut c = DriftController::new(128, 48_000);
    let slew = 200e-6 / 375.0 + 1e-12;
    let mut last = 1.0;
    let mut top: f64 = 0.0;
    for q in 0..(120 * 375) {
        let fill = if q < 60 * 375 { 10_000.0 } else { -10_000.0 };
        let f = c.update(fill, 1024.0);
        assert!((f - last).abs() <= slew, "step {} at {q}", f - last);
        assert!((f - 1.0).abs() <= 1000e-6 + 1e-15);
        top = top.max(c.ppm());
        last = f;
    }
    assert!((top - 1000.0).abs() < 1e-6);
    assert!((c.ppm() + 1000.0).abs() < 1e-6);
    c.reset();
    assert_eq!(c.update(5.0, 5.0), 1.0);
}

#[test]
fn controller_ignores_non_finite_input() {
    let mut c = DriftController::default();
    for _ in 0..1000 {
        c.update(2000.0, 1024.0);
    }
    let held = c.ppm();
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(c.update(bad, 1024.0), 1.0 + held * 1e-6);
        assert_eq!(c.update(1024.0, bad), 1.0 + held * 1e-6);
    }
    assert_eq!(c.ppm(), held);
    // A configuration of NaNs and zeros falls back to the defaults.
    let mut d = DriftController::with_config(DriftConfig {
        updates_per_second: f64::NAN,
        input_rate_hz: 0.0,
        max_ppm: -1.0,
        max_slew_ppm_per_second: f64::INFINITY,
        smoothing_seconds: 0.0,
        acquire_seconds: -1.0,
        loop_seconds: f64::NAN,
        narrowing_seconds: f64::NEG_INFINITY,
        damping: -2.0,
    });
    let mut e = DriftController::new(0, 0);
    let mut f = DriftController::default();
    for q in 0..2000 {
        let fill = 1024.0 + (q % 7) as f64 * 100.0;
        let x = d.update(fill, 1024.0);
        assert_eq!(x, e.update(fill, 1024.0));
        assert_eq!(x, f.update(fill, 1024.0));
    }
}

#[test]
fn controller_does_not_wobble_at_the_burst_rate() {
    // Open loop, zero mean error: blocks of 128 arrive 3 or 4 at a time (seeded) while 128
    // frames drain per update, a sawtooth of up to 512 frames whose mean over each burst is
    // the target. After 5 s the drift must stay within ±1 ppm and change by under 0.1 ppm
    // per update: at the ~100 Hz burst rate that is a phase modulation below 1e-6 rad on a
    // 1 kHz tone (sidebands under −120 dB).
    let mut rng = Rng::new(77);
    let mut c = DriftController::default();
    let (mut fill, mut due, mut mean) = (0.0f64, 0, 0.0);
    let (mut lo, mut hi, mut max_step) = (f64::MAX, f64::MIN, 0.0f64);
    let mut last = 0.0;
    for q in 0..(60 * 375) {
        if due == 0 {
            let g = rng.range(3, 4);
            fill += (g * 128) as f64;
            mean = (g - 1) as f64 * 64.0;
            due = g;
        }
        due -= 1;
        fill -= 128.0;
        c.update(1024.0 + fill - mean, 1024.0);
        if q > 5 * 375 {
            lo = lo.min(c.ppm());
            hi = hi.max(c.ppm());
            max_step = max_step.max((c.ppm() - last).abs());
        }
        last = c.ppm();
    }
    eprintln!("burst ripple: drift in [{lo:.4}, {hi:.4}] ppm, max step {max_step:.6} ppm");
    assert!(lo > -1.0 && hi < 1.0);
    assert!(max_step < 0.1);
}

/// One simulated peer: a sender whose clock is `ppm` off, blocks of `block` frames at
/// `rate` Hz, delivered in bursts of 3-4 blocks (2 ms + up to 1 ms seeded jitter), seen by a
/// renderer whose device callback handles 480 frames (3-4 quanta back to back). The engine's
/// order per quantum: drift update, frames_needed, pop blocks into append_slots, then
/// process (with audio) or skip (frames only). Playback starts when the jitter FIFO holds
/// the target.
struct Scenario {
    ppm: f64,
    rate: f64,
    block: usize,
    seconds: f64,
    seed: u64,
    audio: bool,
}

#[derive(Debug, Default)]
struct Outcome {
    /// Last time the offset estimate was more than 10 ppm off, from the start of playback.
    settle_s: f64,
    /// Extremes of the 1 s mean fill minus target over the whole run (acquisition included).
    acquire_min: f64,
    acquire_max: f64,
    /// Over the run after the warm-up: raw fill, 1 s mean fill, errors of the applied drift
    /// and of the offset estimate against the sender's true offset.
    fill_min: f64,
    fill_max: f64,
    mean_min: f64,
    mean_max: f64,
    drift_err_max: f64,
    offset_err_max: f64,
    drift_final: f64,
    offset_final: f64,
    underruns: u64,
    jitter_overflows: u64,
    order_errors: u64,
    refused: u64,
    short_quanta: u64,
    delivered: u64,
    appended: u64,
    max_step: f32,
}

/// Warm-up excluded from the bounds.
const WARM_UP_S: f64 = 120.0;

fn simulate(s: &Scenario) -> Outcome {
    const QUANTUM: usize = 128;
    const CALLBACK: u64 = 480;
    const JITTER_BLOCKS: usize = 64;
    let mut rng = Rng::new(s.seed);
    let nominal = s.rate / 48_000.0;
    let b = s.block;
    let target = (4 * b + 512) as f64;
    let local_per_block = b as f64 * 48_000.0 / (s.rate * (1.0 + s.ppm * 1e-6));
    let quanta = (s.seconds * 375.0) as u64;
    let mut res = Resampler::new(2048);
    let mut drift = DriftController::new(128, 48_000);
    let mut jitter: VecDeque<u64> = VecDeque::with_capacity(JITTER_BLOCKS);
    let mut tone = Tone::new(1000.0, 1000.0, s.rate);
    let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
    let mut out = Outcome {
        fill_min: f64::MAX,
        fill_max: f64::MIN,
        mean_min: f64::MAX,
        mean_max: f64::MIN,
        acquire_min: f64::MAX,
        acquire_max: f64::MIN,
        ..Outcome::default()
    };
    // The next burst: its first block, size, and the callback boundary it becomes visible at.
    let mut last_release = 0.0f64;
    let mut next_burst = |first: u64, rng: &mut Rng| {
        let size = rng.range(3, 4) as u64;
        let done = (first + size) as f64 * local_per_block;
        let release = (done + 96.0 + rng.unit() * 48.0).max(last_release);
        last_release = release;
        (size, (release / CALLBACK as f64).ceil() as u64 * CALLBACK)
    };
    let mut first = 0u64;
    let (mut size, mut visible) = next_burst(first, &mut rng);
    let mut started: Option<u64> = None;
    let mut expected = 0u64;
    let mut mean = target;
    let mut prev: Option<f32> = None;
    for q in 0..quanta {
        let now = (q * QUANTUM as u64) / CALLBACK * CALLBACK;
        while visible <= now {
            for id in first..first + size {
                if jitter.len() == JITTER_BLOCKS {
                    out.jitter_overflows += 1;
                } else {
                    jitter.push_back(id);
                    out.delivered += 1;
                }
            }
            first += size;
            (size, visible) = next_burst(first, &mut rng);
        }
        let start = match started {
            Some(st) => st,
            None if (jitter.len() * b) as f64 >= target => {
                started = Some(q);
                q
            }
            None => continue,
        };
        let t = (q - start) as f64 / 375.0;
        let fill = (jitter.len() * b) as f64 + res.buffered_frames();
        let ratio = nominal * drift.update(fill, target);
        while res.frames_needed(QUANTUM, ratio) > 0 {
            let id = jitter.pop_front();
            let (sl, sr) = res.append_slots(b);
            if sl.len() != b {
                out.refused += 1;
                break;
            }
            match id {
                Some(id) => {
                    out.appended += 1;
                    if id != expected {
                        out.order_errors += 1;
                    }
                    expected = id + 1;
                    if s.audio {
                        tone.write(sl, sr);
                    }
                }
                None => {
                    out.underruns += 1;
                    sl.fill(0.0);
                    sr.fill(0.0);
                }
            }
        }
        let produced = if s.audio {
            let k = res.process(ratio, &mut l, &mut r);
            if q > start {
                for &y in &l {
                    if let Some(x) = prev {
                        out.max_step = out.max_step.max((y - x).abs());
                    }
                    prev = Some(y);
                }
            }
            k
        } else {
            res.skip(QUANTUM, ratio)
        };
        if produced != QUANTUM {
            out.short_quanta += 1;
        }
        mean += (fill - mean) / 375.0;
        out.acquire_min = out.acquire_min.min(mean - target);
        out.acquire_max = out.acquire_max.max(mean - target);
        let drift_err = (drift.ppm() - s.ppm).abs();
        let offset_err = (drift.offset_ppm() - s.ppm).abs();
        if offset_err > 10.0 {
            out.settle_s = t;
        }
        if t >= WARM_UP_S {
            out.fill_min = out.fill_min.min(fill - target);
            out.fill_max = out.fill_max.max(fill - target);
            out.mean_min = out.mean_min.min(mean - target);
            out.mean_max = out.mean_max.max(mean - target);
            out.drift_err_max = out.drift_err_max.max(drift_err);
            out.offset_err_max = out.offset_err_max.max(offset_err);
        }
    }
    out.drift_final = drift.ppm();
    out.offset_final = drift.offset_ppm();
    eprintln!(
        "drift sim {:+} ppm, {} Hz, {}-frame blocks, {} s, target {} frames: offset estimate \
         within 10 ppm from {:.1} s; 1 s mean fill {:+.1} / {:+.1} frames (whole run); after \
         {} s: fill {:+.1} / {:+.1}, 1 s mean {:+.1} / {:+.1}, drift error max {:.2} ppm \
         (final {:.2}), offset error max {:.2} ppm (final {:.2}); blocks delivered {}, \
         appended {}; underruns {}, overflows {}, order errors {}, refused {}, short quanta \
         {}, max step {}",
        s.ppm,
        s.rate,
        b,
        s.seconds,
        target,
        out.settle_s,
        out.acquire_min,
        out.acquire_max,
        WARM_UP_S,
        out.fill_min,
        out.fill_max,
        out.mean_min,
        out.mean_max,
        out.drift_err_max,
        out.drift_final,
        out.offset_err_max,
        out.offset_final,
        out.delivered,
        out.appended,
        out.underruns,
        out.jitter_overflows,
        out.order_errors,
        out.refused,
        out.short_quanta,
        out.max_step
    );
    out
}

/// The stated bounds: every block appended exactly once and in order, no underrun, no
/// overflow, no short quantum; over the whole run the 1 s mean fill within target ± (4
/// blocks + 128 frames: playback starts up to a burst above target); after the warm-up: raw
/// fill within target ± (4 blocks + 480 frames of callback grouping + 96: the burst sawtooth
/// itself), 1 s mean fill within target ± 96 frames, offset estimate within ±10 ppm of the
/// sender's offset (for good within 120 s) and applied drift within ±25 ppm of it.
fn check(s: &Scenario, o: &Outcome) {
    let swing = (4 * s.block + 480 + 96) as f64;
    assert_eq!(o.underruns, 0);
    assert_eq!(o.jitter_overflows, 0);
    assert_eq!(o.order_errors, 0);
    assert_eq!(o.refused, 0);
    assert_eq!(o.short_quanta, 0);
    assert!(o.delivered - o.appended <= 64);
    let start = (4 * s.block + 128) as f64;
    assert!(o.acquire_min >= -start && o.acquire_max <= start);
    assert!(o.fill_min >= -swing && o.fill_max <= swing);
    assert!(o.mean_min >= -96.0 && o.mean_max <= 96.0);
    assert!(o.offset_err_max <= 10.0);
    assert!(o.settle_s <= 120.0);
    assert!(o.drift_err_max <= 25.0);
}

#[test]
fn one_hour_runs() {
    // An hour of frames only, each row within the bounds of `check`:
    // (name, sender ppm, sender rate, block frames, seed).
    let rows = [
        ("sender 300 ppm fast", 300.0, 48_000.0, 128, 1),
        ("sender 300 ppm slow", -300.0, 48_000.0, 128, 2),
        (
            "44.1 kHz sender with 256-frame blocks",
            300.0,
            44_100.0,
            256,
            3,
        ),
        ("32-frame blocks", -300.0, 48_000.0, 32, 4),
    ];
    for (name, ppm, rate, block, seed) in rows {
        eprintln!("one hour: {name}");
        let s = Scenario {
            ppm,
            rate,
            block,
            seconds: 3600.0,
            seed,
            audio: false,
        };
        check(&s, &simulate(&s));
    }
}

#[test]
fn drift_chain_with_audio_is_continuous() {
    // Three minutes with real samples: a 1 kHz tone through jitter FIFO, resampler and
    // controller. Same bounds as the hour runs; the output's largest sample-to-sample step
    // stays under the analytic largest step of a 0.9-amplitude sine at 1 kHz × (1 + 1000 ppm)
    // × (1 + 1e-4): no drop, repeat or click anywhere.
    let s = Scenario {
        ppm: 300.0,
        rate: 48_000.0,
        block: 128,
        seconds: 180.0,
        seed: 5,
        audio: true,
    };
    let o = simulate(&s);
    check(&s, &o);
    let w_max = 2.0 * PI * 1000.0 * 1.001 / 48_000.0;
    assert!(f64::from(o.max_step) <= 0.9 * 2.0 * (w_max / 2.0).sin() * (1.0 + 1e-4));
}
