//! Whether the voices a listener follows stay in its mix all the time: the churn check. While
//! others come and go, the hub must not drop a staying voice from a staying listener's mix for
//! longer than a concealment would bridge.
//!
//! A tone's level is read in windows of one loop ([`LOOP_FRAMES`], 42.7 ms), rectangular, at
//! the tone's own bin: every tone is a whole number of cycles in a loop, so the others fall on
//! the window's zeros and the reading is exact wherever the window starts. Windows step by
//! [`HOP_FRAMES`] (5.3 ms); a window reads low when it reads below half the tone's level
//! (−6 dB).
//!
//! A window reads low when more than half of it misses the tone, but also when it straddles a
//! jump of the tone's phase: a block that a jitter buffer dropped or repeated, which is no
//! interruption at all. So a moment counts as heard when ANY window that contains it reads
//! well, and an interruption is a stretch of moments that no window hears. A jump is always
//! heard from the windows just before and just after it; inside a hole of `h` frames, a moment
//! is unheard when it is more than half a window from both of the hole's edges, so the
//! unheard stretch is `h` minus one window, and the interruption reported is that stretch plus
//! one window (within two hops, 10.7 ms). Holes up to one window (42.7 ms) do not show; they are shorter than a
//! concealment ([`CONCEALMENT_MS`], the bound), and the recording's longest run of lost blocks
//! ([`crate::recording`]) measures the transport's share. When every voice stops at once (a
//! silence, not one voice dropped), the others, cut short, are off the window's zeros and leak
//! into it, so such a silence reads up to half a window longer.
//!
//! Only tones up to [`MAX_HZ`] are followed: there a hub's drift correction (up to 1000 ppm)
//! moves a tone by at most 1.2 Hz, 5 % of a bin, which costs the reading under 0.04 dB and lets
//! each neighbour leak in at about −26 dB, far from the −6 dB that counts as a hole.
//!
//! Each window's reading is a sum of [`WINDOW_HOPS`] partial sums of one hop each, so a tone
//! costs one multiply-add per sample whatever the hop.

use serde::Serialize;

use crate::tones::{bin_hz, LOOP_FRAMES};

/// The step between windows, frames (5.3 ms).
pub const HOP_FRAMES: usize = 256;
/// Hops per window.
pub const WINDOW_HOPS: usize = LOOP_FRAMES / HOP_FRAMES;
/// Tones above this are not followed (see the module docs): bin 51.
pub const MAX_HZ: f64 = 1200.0;
/// At most this many tones are followed per listener.
pub const MAX_TONES: usize = 16;
/// A window reading this far below the tone's level is a hole, dB.
pub const HOLE_DB: f64 = 6.0;
/// What a concealment bridges before it has faded to silence: its hold plus its fade, ms.
pub const CONCEALMENT_MS: f64 =
    (tutti_core::conceal::HOLD_FRAMES + tutti_core::conceal::FADE_FRAMES) as f64 / 48.0;

/// What following a listener's tones found.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Continuity {
    /// Tones followed.
    pub tones: usize,
    /// Windows read per tone.
    pub windows: usize,
    /// The longest interruption of any followed tone, ms (0: none longer than a window).
    pub longest_gap_ms: f64,
    /// Its tone, Hz, and when it began, s into the recording.
    pub gap_hz: f64,
    pub gap_at_s: f64,
}

/// Follows the tones of `bins` (those up to [`MAX_HZ`], at most [`MAX_TONES`]) through
/// `samples` (48 kHz), each expected at amplitude `expected`.
pub fn follow(samples: &[f32], bins: &[usize], expected: f64) -> Continuity {
    let (cos, sin) = twiddles();
    let hops = samples.len() / HOP_FRAMES;
    let mut found = Continuity {
        windows: (hops + 1).saturating_sub(WINDOW_HOPS),
        ..Continuity::default()
    };
    if found.windows == 0 || expected.is_nan() || expected <= 0.0 {
        return found;
    }
    let floor = expected * 10f64.powf(-HOLE_DB / 20.0);
    let mut partial = vec![(0.0f64, 0.0f64); hops];
    for &k in bins
        .iter()
        .filter(|&&k| bin_hz(k) <= MAX_HZ)
        .take(MAX_TONES)
    {
        found.tones += 1;
        for (h, p) in partial.iter_mut().enumerate() {
            let start = h * HOP_FRAMES;
            let (mut re, mut im) = (0.0, 0.0);
            for (n, &x) in samples[start..start + HOP_FRAMES].iter().enumerate() {
                let i = (k * (start + n)) % LOOP_FRAMES;
                re += f64::from(x) * cos[i];
                im -= f64::from(x) * sin[i];
            }
            *p = (re, im);
        }
        let mut low = vec![false; found.windows];
        for (w, l) in low.iter_mut().enumerate() {
            let (re, im) = partial[w..w + WINDOW_HOPS]
                .iter()
                .fold((0.0, 0.0), |(a, b), &(c, d)| (a + c, b + d));
            *l = 2.0 * re.hypot(im) / (LOOP_FRAMES as f64) < floor;
        }
        // Hop h is heard when a window that holds it (those starting at h - WINDOW_HOPS + 1
        // ..= h) reads well.
        let mut run = 0usize;
        for h in 0..hops {
            let first = (h + 1).saturating_sub(WINDOW_HOPS);
            let last = h.min(found.windows - 1);
            if first > last || (first..=last).any(|w| !low[w]) {
                run = 0;
                continue;
            }
            run += 1;
            let ms = (run * HOP_FRAMES + LOOP_FRAMES) as f64 / 48.0;
            if ms > found.longest_gap_ms {
                found.longest_gap_ms = ms;
                found.gap_hz = bin_hz(k);
                let first_unheard = h + 1 - run;
                found.gap_at_s =
                    (first_unheard * HOP_FRAMES).saturating_sub(LOOP_FRAMES / 2) as f64 / 48_000.0;
            }
        }
    }
    found
}

/// cos and sin of 2πi/[`LOOP_FRAMES`] for every i.
fn twiddles() -> (Vec<f64>, Vec<f64>) {
    (0..LOOP_FRAMES)
        .map(|i| {
            let a = std::f64::consts::TAU * i as f64 / LOOP_FRAMES as f64;
            (a.cos(), a.sin())
        })
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    const AMP: f64 = 0.01;

    /// Tones of bins 2..=41, `ppm` off their bins (a hub's drift correction), `seconds` long;
    /// `hole(k, n)` says whether bin `k` is missing at frame `n`.
    fn mix(seconds: f64, ppm: f64, hole: impl Fn(usize, usize) -> bool) -> Vec<f32> {
        let frames = (seconds * 48_000.0) as usize;
        (0..frames)
            .map(|n| {
                (2..=41usize)
                    .filter(|&k| !hole(k, n))
                    .map(|k| {
                        let hz = bin_hz(k) * (1.0 + ppm * 1e-6);
                        let phase = k as f64 * 0.7;
                        AMP * (std::f64::consts::TAU * hz * n as f64 / 48_000.0 + phase).sin()
                    })
                    .sum::<f64>() as f32
            })
            .collect()
    }

    #[test]
    fn steady_tones_have_no_interruption_even_off_their_bins() {
        let bins: Vec<usize> = (2..=41).collect();
        for ppm in [0.0, 1000.0, -1000.0] {
            let c = follow(&mix(1.0, ppm, |_, _| false), &bins, AMP);
            assert_eq!(c.tones, MAX_TONES);
            assert_eq!(c.windows, 48_000 / HOP_FRAMES + 1 - WINDOW_HOPS);
            assert_eq!(c.longest_gap_ms, 0.0, "{ppm} ppm: {c:?}");
        }
    }

    #[test]
    fn one_voice_missing_for_100_ms_reads_as_100_ms_at_its_place() {
        let bins: Vec<usize> = (2..=17).collect();
        let x = mix(1.5, 300.0, |k, n| k == 9 && (48_000..52_800).contains(&n));
        let c = follow(&x, &bins, AMP);
        assert!((c.longest_gap_ms - 100.0).abs() <= 10.7, "{c:?}");
        assert_eq!(c.gap_hz, bin_hz(9));
        assert!((c.gap_at_s - 1.0).abs() <= 0.006, "{c:?}");
    }

    #[test]
    fn a_dropped_block_or_a_lost_one_is_no_interruption_and_a_long_silence_is() {
        let bins: Vec<usize> = (2..=17).collect();
        // A block cut out of the stream: every tone's phase jumps.
        let mut cut = mix(1.0, 0.0, |_, _| false);
        cut.drain(24_000..24_128);
        assert_eq!(follow(&cut, &bins, AMP).longest_gap_ms, 0.0);
        let lost = follow(
            &mix(1.0, 0.0, |_, n| (24_000..24_128).contains(&n)),
            &bins,
            AMP,
        );
        assert_eq!(lost.longest_gap_ms, 0.0, "{lost:?}");
        // 80 ms of silence: every voice cut, up to half a window long (see the module docs).
        let silence = follow(
            &mix(1.0, 0.0, |_, n| (24_000..27_840).contains(&n)),
            &bins,
            AMP,
        );
        let ms = silence.longest_gap_ms;
        assert!(
            (80.0 - 10.7..=80.0 + 21.4 + 5.4).contains(&ms),
            "{silence:?}"
        );
    }

    #[test]
    fn too_little_audio_or_no_level_reads_nothing() {
        assert_eq!(follow(&[0.0; 100], &[2, 3], AMP).windows, 0);
        let c = follow(&mix(0.1, 0.0, |_, _| false), &[2], 0.0);
        assert_eq!((c.tones, c.longest_gap_ms), (0, 0.0));
    }
}
