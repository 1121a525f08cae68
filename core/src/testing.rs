//! Test support shared by the modules' unit tests and, through `core/tests/common`, by the
//! integration tests (compiled only for tests): the one seeded generator every core test draws
//! from, a stereo test tone, and the reader of TypeScript layout mirrors.

use std::f64::consts::PI;

/// xorshift64* (shifts 12, 25, 27, then a multiply by 0x2545F4914F6CDD1D): a small seeded
/// generator, so every randomised test replays the same sequence on every run and machine.
pub(crate) struct Rng(u64);

impl Rng {
    /// The generator whose state is `seed` (0, a fixed point of the shifts, becomes 1).
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// For small consecutive seeds (0, 1, 2, … or a block size): the seed times the 64-bit golden
    /// ratio, made odd, so neighbouring seeds start far apart in the state space.
    pub(crate) fn spread(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in 0..n (`next_u64() % n`; n = 0 counts as 1).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in lo..=hi (`lo + next_u64() % (hi − lo + 1)`).
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// The low byte of the next output.
    pub(crate) fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }

    /// Uniform in [0, 1), from the top 53 bits of the next output.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, 1) in `f32`, from the top 24 bits of the next output.
    pub(crate) fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in [lo, hi) in `f32`: `lo + (hi − lo) · unit_f32()`.
    pub(crate) fn uniform_f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit_f32()
    }

    /// True with probability `p` (`unit_f32() < p`).
    pub(crate) fn chance(&mut self, p: f32) -> bool {
        self.unit_f32() < p
    }
}

/// Stereo test input: left = a·sin(wl·m), right = a·cos(wr·m), m = input frame index, a = 0.9.
pub(crate) struct Tone {
    wl: f64,
    wr: f64,
    amp: f64,
    /// The input frame index of the next frame [`Tone::write`] produces.
    pub(crate) m: u64,
}

impl Tone {
    pub(crate) fn new(hz_left: f64, hz_right: f64, rate: f64) -> Tone {
        Tone {
            wl: 2.0 * PI * hz_left / rate,
            wr: 2.0 * PI * hz_right / rate,
            amp: 0.9,
            m: 0,
        }
    }

    /// The left channel at a (fractional) input position.
    pub(crate) fn left_at(&self, pos: f64) -> f64 {
        self.amp * (self.wl * pos).sin()
    }

    /// The right channel at a (fractional) input position.
    pub(crate) fn right_at(&self, pos: f64) -> f64 {
        self.amp * (self.wr * pos).cos()
    }

    /// The next `l.len()` frames.
    pub(crate) fn write(&mut self, l: &mut [f32], r: &mut [f32]) {
        for (a, b) in l.iter_mut().zip(r.iter_mut()) {
            let m = self.m as f64;
            *a = self.left_at(m) as f32;
            *b = self.right_at(m) as f32;
            self.m += 1;
        }
    }
}

/// Least-squares fit of `a·cos(w·n) + b·sin(w·n)` to the points `(n, y)`: `(a, b)`. With
/// [`Tone`] or any sine of known frequency this measures what came out at that frequency.
pub(crate) fn fit_sine(points: impl Iterator<Item = (f64, f64)>, w: f64) -> (f64, f64) {
    let (mut cc, mut ss, mut cs, mut yc, mut ys) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (n, v) in points {
        let (s, c) = (w * n).sin_cos();
        cc += c * c;
        ss += s * s;
        cs += c * s;
        yc += v * c;
        ys += v * s;
    }
    let det = cc * ss - cs * cs;
    ((yc * ss - ys * cs) / det, (ys * cc - yc * cs) / det)
}

/// The TypeScript mirror `ts` (named `file` in failures) exports each of `want` with the same
/// value (it may export more).
pub(crate) fn assert_ts_exports(ts: &str, file: &str, want: &[(&str, f64)]) {
    let found = ts_numeric_constants(ts);
    for (name, value) in want {
        let got = found.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(got, Some(*value), "{file} {name}");
    }
}

/// A layout's reader refuses every strict prefix of the whole message `bytes` (`parses`: the
/// reader accepts these bytes).
pub(crate) fn assert_every_cut_refused(bytes: &[u8], parses: impl Fn(&[u8]) -> bool) {
    for cut in 0..bytes.len() {
        assert!(!parses(&bytes[..cut]), "{cut} of {} bytes", bytes.len());
    }
}

/// Every `export const NAME = <number>;` line of a TypeScript mirror (layout constants), as
/// (name, value); lines whose value is not a plain decimal number are skipped.
pub(crate) fn ts_numeric_constants(src: &str) -> Vec<(String, f64)> {
    src.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("export const ")?;
            let (name, value) = rest.split_once(" = ")?;
            let value = value.trim_end_matches(';').parse::<f64>().ok()?;
            Some((name.to_string(), value))
        })
        .collect()
}
