//! The drift controller: how far a sender's sound card runs from ours, and the resampling
//! ratio that keeps its buffer fill on target ([`DriftController`]). The ratio is applied by the
//! resampler ([`crate::resample::Resampler`]).
//!
//! Every sound card runs on its own crystal; two of them differ by up to a few hundred ppm, so a
//! peer's blocks arrive slightly faster or slower than this machine plays them and the jitter
//! buffer would slowly fill up or run dry. Instead of dropping or repeating blocks, the engine
//! reads the peer's audio at `ratio = nominal × (1 + ε)` input frames per output frame, where ε
//! (|ε| ≤ 1000 ppm) comes from [`DriftController::update`], driven by the fill (jitter buffer +
//! staging, in input frames) against the jitter buffer's target. The example in
//! [`crate::resample`] shows one quantum of the two together.
//!
//! # The drift loop
//!
//! The fill is bursty: blocks arrive 3-4 at a time and a 480-frame device callback renders 3-4
//! quanta back to back, so the raw fill is a sawtooth several blocks deep. The controller
//! low-passes the fill error with two one-pole stages (3 s each once locked) and feeds a PI loop
//! (damping 0.7) whose 1/ωn narrows from 10 s right after a reset (acquisition) to 60 s over
//! 200 s (low noise when locked). The output is clamped to ±1000 ppm and slew-limited to
//! 200 ppm/s: the ratio never steps, and under a burst sawtooth of up to 512 frames it moves by
//! under 0.01 ppm per quantum. Its integral part, [`DriftController::offset_ppm`], is the
//! estimate of the sender's clock offset; [`DriftController::ppm`] adds the proportional
//! correction that holds the fill.
//!
//! One simulated hour in `drift/tests.rs` (seeded bursts of 3-4 blocks, 2-3 ms delivery, 480-frame
//! callbacks; target = 4 blocks + 512 frames) with the sender ±300 ppm off and 128-frame blocks,
//! −300 ppm with 32-frame blocks, and +300 ppm from a 44.1 kHz peer with 256-frame blocks: no block
//! dropped, repeated, reordered or concealed, no overflow. After 120 s: 1 s mean fill within target
//! ±61 frames (±12 with 32-frame blocks), raw fill within target −536/+482 frames with 128-frame
//! blocks (the burst sawtooth itself); offset estimate within ±8.2 ppm of the truth (first within
//! 10 ppm after 56-86 s; final error under 0.5 ppm), applied ε within ±14 ppm. During acquisition
//! the 1 s mean fill moves by up to ~2 blocks from target (playback starts up to a burst above
//! target). A 128-frame target step is 90% made up in 11 s (peak 300 ppm) during acquisition and in
//! 53 s (peak 60 ppm) once locked. A sender beyond the ±1000 ppm clamp cannot be followed: the fill
//! then drifts.
//!
//! [`DriftController::update`] costs 5 ns (criterion, `cargo bench -p tutti-bench --bench drift`).
//!
//! # Real-time safety
//!
//! [`DriftController`] holds no buffers: it allocates nothing, locks nothing, and never panics
//! on any argument; a non-finite fill is refused and leaves the state unchanged.

/// Tuning of [`DriftController`]. Times in seconds, rates in Hz.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DriftConfig {
    /// Calls to [`DriftController::update`] per second (48000 / 128 = 375).
    pub updates_per_second: f64,
    /// Nominal input rate in Hz (the sender's rate): how fast the fill moves per unit of drift.
    /// Sets the loop gain; the fill is counted in input frames.
    pub input_rate_hz: f64,
    /// Clamp of the drift, in ppm.
    pub max_ppm: f64,
    /// Largest change of the drift per second, in ppm.
    pub max_slew_ppm_per_second: f64,
    /// Time constant of each of the two one-pole low-pass stages on the fill error once the loop
    /// has narrowed; it scales with 1 / ωn, so it is shorter during acquisition.
    pub smoothing_seconds: f64,
    /// Inverse natural frequency (1 / ωn) of the PI loop right after a reset: fast acquisition.
    pub acquire_seconds: f64,
    /// Inverse natural frequency of the PI loop once narrowed: low noise when locked.
    pub loop_seconds: f64,
    /// Time over which 1 / ωn moves linearly from `acquire_seconds` to `loop_seconds`.
    pub narrowing_seconds: f64,
    /// Damping ratio of the PI loop.
    pub damping: f64,
}

impl Default for DriftConfig {
    fn default() -> Self {
        DriftConfig {
            updates_per_second: 375.0,
            input_rate_hz: 48_000.0,
            max_ppm: 1000.0,
            max_slew_ppm_per_second: 200.0,
            smoothing_seconds: 3.0,
            acquire_seconds: 10.0,
            loop_seconds: 60.0,
            narrowing_seconds: 200.0,
            damping: 0.7,
        }
    }
}

/// Steers the resampling ratio so that the buffer fill stays at its target: a PI loop on the
/// twice low-passed fill error, narrowing after each reset, clamped and slew-limited (see the
/// module docs for the figures). Holds no buffers; every method is real-time safe.
#[derive(Clone, Debug)]
pub struct DriftController {
    /// `dt / smoothing_seconds × t_lock`: the low-pass coefficient of an update at T is
    /// `c / (c + T)` (a time constant of smoothing × T / T_lock).
    c: f64,
    /// Proportional gain = `kp_scale / T`, integral gain per update = `ki_scale / T²`, where
    /// T = 1 / ωn narrows from `t_acquire` to `t_lock` by `t_step` per update.
    kp_scale: f64,
    ki_scale: f64,
    t_acquire: f64,
    t_lock: f64,
    t_step: f64,
    t_now: f64,
    /// Coefficients (low-pass, proportional, integral) at `t_now`, for the next update, and
    /// at `t_lock`, where narrowing ends.
    coeff: [f64; 3],
    coeff_lock: [f64; 3],
    max: f64,
    slew: f64,
    lp1: f64,
    lp2: f64,
    integral: f64,
    drift: f64,
}

impl Default for DriftController {
    fn default() -> Self {
        DriftController::with_config(DriftConfig::default())
    }
}

impl DriftController {
    /// A controller updated once per `quantum_frames` at `local_rate_hz`, with the default
    /// tuning (loop gain set for an input at the local rate; a 44.1 kHz peer's loop then runs 8%
    /// slower, which is harmless). Zero arguments take the defaults (128, 48000).
    pub fn new(quantum_frames: u32, local_rate_hz: u32) -> Self {
        let d = DriftConfig::default();
        let rate = if local_rate_hz > 0 {
            f64::from(local_rate_hz)
        } else {
            d.input_rate_hz
        };
        let quantum = if quantum_frames > 0 {
            f64::from(quantum_frames)
        } else {
            128.0
        };
        DriftController::with_config(DriftConfig {
            updates_per_second: rate / quantum,
            input_rate_hz: rate,
            ..d
        })
    }

    /// A controller with `config`; a field that is not finite and positive takes its default,
    /// and `max_ppm` is capped at 1e5.
    pub fn with_config(config: DriftConfig) -> Self {
        let d = DriftConfig::default();
        let pick = |v: f64, dv: f64| if v.is_finite() && v > 0.0 { v } else { dv };
        let rate = pick(config.updates_per_second, d.updates_per_second);
        let gain = pick(config.input_rate_hz, d.input_rate_hz);
        let max_ppm = pick(config.max_ppm, d.max_ppm).min(1e5);
        let slew = pick(config.max_slew_ppm_per_second, d.max_slew_ppm_per_second);
        let smooth = pick(config.smoothing_seconds, d.smoothing_seconds);
        let t_acquire = pick(config.acquire_seconds, d.acquire_seconds);
        let t_lock = pick(config.loop_seconds, d.loop_seconds);
        let narrowing = pick(config.narrowing_seconds, d.narrowing_seconds);
        let zeta = pick(config.damping, d.damping);
        let dt = 1.0 / rate;
        let mut c = DriftController {
            c: dt / smooth * t_lock,
            kp_scale: 2.0 * zeta / gain,
            ki_scale: dt / gain,
            t_acquire,
            t_lock,
            t_step: (t_lock - t_acquire) * dt / narrowing,
            t_now: t_acquire,
            coeff: [0.0; 3],
            coeff_lock: [0.0; 3],
            max: max_ppm * 1e-6,
            slew: slew * 1e-6 * dt,
            lp1: 0.0,
            lp2: 0.0,
            integral: 0.0,
            drift: 0.0,
        };
        c.coeff_lock = c.coefficients(t_lock);
        c.coeff = c.coefficients(t_acquire);
        c
    }

    /// Low-pass, proportional and integral coefficients of an update at T = `t`, with one
    /// division: `r = 1 / (T (c + T))` gives both `c / (c + T)` and `1 / T`.
    fn coefficients(&self, t: f64) -> [f64; 3] {
        let s = self.c + t;
        let r = 1.0 / (t * s);
        let inv_t = s * r;
        [
            self.c * t * r,
            self.kp_scale * inv_t,
            self.ki_scale * inv_t * inv_t,
        ]
    }

    /// Forgets the fill history; the drift returns to 0.
    pub fn reset(&mut self) {
        self.lp1 = 0.0;
        self.lp2 = 0.0;
        self.integral = 0.0;
        self.drift = 0.0;
        self.t_now = self.t_acquire;
        self.coeff = self.coefficients(self.t_acquire);
    }

    /// The loop's estimate of the sender's clock offset in ppm: the integral part of the drift,
    /// smoother than [`DriftController::ppm`], which adds the proportional correction.
    pub fn offset_ppm(&self) -> f64 {
        self.integral * 1e6
    }

    /// Current drift ε in ppm (the factor is 1 + ε).
    pub fn ppm(&self) -> f64 {
        self.drift * 1e6
    }

    /// Once per quantum: `fill_frames` = input frames buffered (jitter buffer + resampler),
    /// `target_frames` = where the fill should sit. Returns the drift factor 1 + ε to multiply
    /// into the nominal ratio. Non-finite arguments leave the state unchanged. Real-time safe:
    /// a few multiply-adds and compares; while the loop narrows (200 s after a reset) also one
    /// division, for the next update's coefficients.
    pub fn update(&mut self, fill_frames: f64, target_frames: f64) -> f64 {
        let e = fill_frames - target_frames;
        if !e.is_finite() {
            return 1.0 + self.drift;
        }
        // Backward-Euler one-poles whose time constant (smoothing × T / T_lock) narrows
        // together with the loop, then the PI loop at T = 1 / ωn.
        let [alpha, kp, ki] = self.coeff;
        self.lp1 += alpha * (e - self.lp1);
        self.lp2 += alpha * (self.lp1 - self.lp2);
        let e = self.lp2;
        let integral = (self.integral + ki * e).clamp(-self.max, self.max);
        let wanted = integral + kp * e;
        let clamped = wanted.clamp(-self.max, self.max);
        // Conditional integration: hold the integral while the output is pinned at the clamp
        // and the error pushes further into it.
        if clamped == wanted || (wanted > self.max) != (e > 0.0) {
            self.integral = integral;
        }
        self.drift += (clamped - self.drift).clamp(-self.slew, self.slew);
        let t = self.t_now;
        if t != self.t_lock {
            let next = t + self.t_step;
            let past = (self.t_step > 0.0 && next > self.t_lock)
                || (self.t_step < 0.0 && next < self.t_lock);
            if past {
                self.t_now = self.t_lock;
                self.coeff = self.coeff_lock;
            } else {
                self.t_now = next;
                self.coeff = self.coefficients(next);
            }
        }
        1.0 + self.drift
    }
}

#[cfg(test)]
mod tests;
