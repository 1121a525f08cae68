//! Every emulated sender's tone, encoded once and shared, and the check that a listener hears
//! the room's tones in what it receives.
//!
//! Encoding once is what keeps the emulator cheap per client: a tone here repeats every
//! [`LOOP_FRAMES`] frames (its frequency is a whole number of cycles in them: bin `k` is
//! `k · 48000 / LOOP_FRAMES` Hz), so a sender's whole stream is one short loop of packets that
//! every sender of that tone shares; sending patches only the sequence number and the time
//! stamp. Tones of distinct bins are orthogonal over any stretch of [`ANALYSIS_FRAMES`] frames
//! (a whole number of loops), so a listener's level of each tone is read exactly, whatever the
//! others play and wherever the stretch starts.
//!
//! A mixing hub may resample each voice by a few hundred ppm while its drift correction steers
//! the voice's buffer (the hub here by up to `DriftConfig::max_ppm`, 1000 ppm), which moves a
//! 1 kHz tone by up to 1 Hz. So a tone's level is the peak of a Hann-windowed DFT searched over
//! that range in quarter-bin steps (the window's loss between steps is under 0.1 dB), and only
//! tones up to [`CHECK_MAX_HZ`] are checked: there the largest shift stays under a bin, and a
//! neighbour four bins away leaks in at about −40 dB. That is the first 200 senders of a room;
//! the others play higher tones.
//!
//! The received audio is read in [`SEGMENTS`] segments of [`SEGMENT_FRAMES`] and each tone's
//! level is the median of its segments: a block the hub skipped or concealed shifts the phase
//! of everything after it, which would cut a single long DFT's reading of some tones by several
//! dB, but touches one segment only. Glitches are the delivery figures' business; this check
//! asks whether each voice is in the mix at its level.
//!
//! The levels are read once per spot-checked listener after the run, not in the sending path.

use tutti_core::packet::{self, Extension, Header, SampleFormat, SampleRate, MAX_PACKET_LEN};

/// Frames after which every tone repeats.
pub const LOOP_FRAMES: usize = 2048;
/// The analysis segment: 4 loops (5.86 Hz bins; the tones are 4 bins apart).
pub const SEGMENT_FRAMES: usize = LOOP_FRAMES * 4;
/// Segments read per listener; a tone's level is their median.
pub const SEGMENTS: usize = 5;
/// Received audio analysed per listener: 0.85 s.
pub const ANALYSIS_FRAMES: usize = SEGMENT_FRAMES * SEGMENTS;
/// The lowest bin given to a sender (2 × 23.4 Hz).
pub const FIRST_BIN: usize = 2;
/// Bins given out before they repeat: up to bin 853, 19.99 kHz.
pub const DISTINCT_BINS: usize = 852;
/// A tone counts as heard at its level within this, dB.
pub const LEVEL_TOL_DB: f64 = 1.0;
/// A listener's own tone (when no one else plays its bin) must be this far below the others, dB.
pub const OWN_BELOW_DB: f64 = 30.0;
/// Tones above this are not checked (see the module docs): bin 201.
pub const CHECK_MAX_HZ: f64 = 4711.0;

/// The frequency of bin `k`, Hz.
pub fn bin_hz(k: usize) -> f64 {
    k as f64 * 48_000.0 / LOOP_FRAMES as f64
}

/// The bin of the sender with index `i` in its room: distinct for the first [`DISTINCT_BINS`].
pub fn sender_bin(i: usize) -> usize {
    FIRST_BIN + i % DISTINCT_BINS
}

/// Each tone's amplitude in a room of `n` senders: their sum (random phases, so its RMS grows as
/// √n) stays far from full scale, where a limiter would change the levels.
pub fn amplitude(n: usize) -> f32 {
    (0.2 / (n.max(1) as f32).sqrt()).min(0.05)
}

/// One tone's stream as a loop of encoded packets: JackTrip's layout (PCM16, stereo, 48 kHz, the
/// same signal on both channels) or the app's (PCM16, mono, 48 kHz, with the trailer of stream 0,
/// which the hub overwrites with the sender's own).
pub struct ToneLoop {
    packets: Vec<Vec<u8>>,
}

impl ToneLoop {
    /// The JackTrip loop of bin `bin` at `amplitude`, in blocks of `frames` (a block size that
    /// divides [`LOOP_FRAMES`]: 32, 64, 128 or 256).
    pub fn new(bin: usize, amplitude: f32, frames: u16) -> Result<ToneLoop, String> {
        ToneLoop::encode(bin, amplitude, frames, 2, None)
    }

    /// The same loop as the app sends it to the hub: mono, with a trailer.
    pub fn app(bin: usize, amplitude: f32, frames: u16) -> Result<ToneLoop, String> {
        let ext = Extension {
            stream_id: 0,
            codec: packet::CODEC_PCM,
        };
        ToneLoop::encode(bin, amplitude, frames, 1, Some(ext))
    }

    fn encode(
        bin: usize,
        amplitude: f32,
        frames: u16,
        channels: u8,
        ext: Option<Extension>,
    ) -> Result<ToneLoop, String> {
        let block = usize::from(frames);
        if block == 0 || LOOP_FRAMES % block != 0 {
            return Err(format!(
                "{frames} frames per block does not divide {LOOP_FRAMES}"
            ));
        }
        let hz = bin_hz(bin);
        let mut packets = Vec::with_capacity(LOOP_FRAMES / block);
        let mut out = vec![0u8; MAX_PACKET_LEN];
        for b in 0..LOOP_FRAMES / block {
            let samples: Vec<f32> = (0..block)
                .map(|n| {
                    let t = (b * block + n) as f64 / 48_000.0;
                    amplitude * (std::f64::consts::TAU * hz * t).sin() as f32
                })
                .collect();
            let header = Header {
                timestamp: 0,
                seq: 0,
                frames,
                rate: SampleRate::Hz48000,
                format: SampleFormat::Pcm16,
                channels_in: channels,
                channels_out: 0,
            };
            let planes: [&[f32]; 2] = [&samples, &samples];
            let n = packet::encode(
                &header,
                ext.as_ref(),
                &planes[..usize::from(channels)],
                &mut out,
            )
            .map_err(|e| format!("encoding the tone: {e:?}"))?;
            packets.push(out[..n].to_vec());
        }
        Ok(ToneLoop { packets })
    }

    /// Packet `seq` of the stream (the loop's block `seq mod len`), with its header's sequence
    /// number and time stamp set, written into `out`; returns its length.
    pub fn packet_into(&self, seq: u16, timestamp_us: u64, out: &mut [u8]) -> usize {
        let p = &self.packets[usize::from(seq) % self.packets.len()];
        out[..p.len()].copy_from_slice(p);
        out[0..8].copy_from_slice(&timestamp_us.to_le_bytes());
        out[8..10].copy_from_slice(&seq.to_le_bytes());
        p.len()
    }
}

/// `samples` times a Hann window (whose coherent gain is 1/2).
fn hann(samples: &[f32]) -> Vec<f64> {
    let n = samples.len();
    samples
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let w = 0.5 - 0.5 * (std::f64::consts::TAU * i as f64 / n as f64).cos();
            f64::from(x) * w
        })
        .collect()
}

/// The amplitude at exactly `hz` of Hann-windowed samples `xw` (48 kHz): 1.0 for a full-scale
/// sine at `hz`.
fn windowed_level(xw: &[f64], hz: f64) -> f64 {
    let n = xw.len();
    if n == 0 {
        return 0.0;
    }
    let w = std::f64::consts::TAU * hz / 48_000.0;
    let (step_re, step_im) = (w.cos(), -w.sin());
    let (mut re, mut im) = (1.0f64, 0.0f64);
    let (mut acc_re, mut acc_im) = (0.0f64, 0.0f64);
    for (i, &x) in xw.iter().enumerate() {
        acc_re += x * re;
        acc_im += x * im;
        let next_re = re * step_re - im * step_im;
        im = re * step_im + im * step_re;
        re = next_re;
        // Renormalise now and then: the recurrence drifts off the unit circle slowly.
        if i % 4096 == 4095 {
            let m = (re * re + im * im).sqrt();
            re /= m;
            im /= m;
        }
    }
    4.0 * (acc_re * acc_re + acc_im * acc_im).sqrt() / n as f64
}

/// The level of the tone near `hz` in Hann-windowed samples `xw`: the peak within `ppm` of it.
fn level_near(xw: &[f64], hz: f64, ppm: f64) -> f64 {
    let bin = 48_000.0 / xw.len().max(1) as f64;
    let span = hz * ppm * 1e-6;
    let steps = (span / (bin / 4.0)).ceil() as i64;
    (-steps..=steps)
        .map(|k| windowed_level(xw, hz + k as f64 * bin / 4.0))
        .fold(0.0, f64::max)
}

/// The amplitude of the tone at `hz` in `samples` (48 kHz), allowing a resampling of up to
/// `ppm`: 1.0 for a full-scale sine.
pub fn level(samples: &[f32], hz: f64, ppm: f64) -> f64 {
    level_near(&hann(samples), hz, ppm)
}

fn db(x: f64) -> f64 {
    20.0 * x.max(1e-12).log10()
}

/// What one listener heard of its room's tones.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Heard {
    /// Tones checked: the other senders' bins that exactly one of them plays.
    pub checked: usize,
    /// Of those, heard within [`LEVEL_TOL_DB`] of the expected amplitude.
    pub at_level: usize,
    /// The largest deviation from the expected level, dB.
    pub worst_db: f64,
    /// The listener's own tone relative to the expected level, dB (None: another plays its bin).
    pub own_db: Option<f64>,
    /// The tones off their level (up to 8): frequency, Hz, and deviation, dB.
    pub off_level: Vec<(f64, f64)>,
    /// Frames analysed.
    pub frames: usize,
}

impl Heard {
    /// Every checked tone at its level, the own tone (where checkable) absent, and enough audio.
    pub fn ok(&self) -> bool {
        self.frames >= ANALYSIS_FRAMES
            && self.checked > 0
            && self.at_level == self.checked
            && self.own_db.is_none_or(|d| d <= -OWN_BELOW_DB)
    }
}

/// Checks `samples` (one channel, at least [`ANALYSIS_FRAMES`], of which the first are used)
/// that listener `me` received in a room whose senders play `bins` (by sender index) at
/// `amplitude`, mixed with `gain` each: every other sender's tone at its level, its own absent.
pub fn check(samples: &[f32], me: usize, bins: &[usize], amplitude: f32, gain: f32) -> Heard {
    let frames = samples.len().min(ANALYSIS_FRAMES);
    let ppm = tutti_core::drift::DriftConfig::default().max_ppm;
    let others = |k: usize| {
        bins.iter()
            .enumerate()
            .filter(|&(i, &b)| i != me && b == k)
            .count()
    };
    let expected = f64::from(amplitude) * f64::from(gain);
    let mut heard = Heard {
        checked: 0,
        at_level: 0,
        worst_db: 0.0,
        own_db: None,
        off_level: Vec::new(),
        frames,
    };
    if frames < ANALYSIS_FRAMES {
        return heard;
    }
    let segments: Vec<Vec<f64>> = samples[..frames]
        .chunks_exact(SEGMENT_FRAMES)
        .map(hann)
        .collect();
    let median_level = |hz: f64| {
        let mut levels: Vec<f64> = segments.iter().map(|xw| level_near(xw, hz, ppm)).collect();
        levels.sort_by(f64::total_cmp);
        levels[levels.len() / 2]
    };
    let checkable = |k: usize| bin_hz(k) <= CHECK_MAX_HZ;
    let mut done = std::collections::BTreeSet::new();
    for (i, &k) in bins.iter().enumerate() {
        if i == me || !checkable(k) || !done.insert(k) || others(k) != 1 {
            continue;
        }
        let dev = db(median_level(bin_hz(k)) / expected);
        heard.checked += 1;
        if dev.abs() <= LEVEL_TOL_DB {
            heard.at_level += 1;
        } else if heard.off_level.len() < 8 {
            heard.off_level.push((bin_hz(k), dev));
        }
        if dev.abs() > heard.worst_db.abs() {
            heard.worst_db = dev;
        }
    }
    if let Some(&own) = bins.get(me) {
        if others(own) == 0 && checkable(own) {
            heard.own_db = Some(db(median_level(bin_hz(own)) / expected));
        }
    }
    heard
}

/// What a listener received of one forwarded stream: the tone it carries.
#[derive(Clone, Copy, Debug)]
pub struct StreamTone {
    /// The expected tone's level against `amplitude`, dB (0: exactly at it).
    pub level_db: f64,
    /// Everything else in the stream against the tone's expected power, dB: another sender's
    /// audio (a room leaking into another) or broken samples raise it.
    pub stray_db: f64,
}

impl StreamTone {
    /// At its level and nothing else in it.
    pub fn ok(&self) -> bool {
        self.level_db.abs() <= LEVEL_TOL_DB && self.stray_db <= -OWN_BELOW_DB
    }
}

/// Reads one forwarded stream's decoded samples (the first [`ANALYSIS_FRAMES`], None when fewer
/// came): the level of bin `bin` and what else is there. A forwarding hub passes samples through
/// untouched, so the tone is read at its exact frequency, and the stray power is the stream's
/// power less the tone's (the tone's power is `level²/2`).
pub fn check_stream(samples: &[f32], bin: usize, amplitude: f32) -> Option<StreamTone> {
    let x = samples.get(..ANALYSIS_FRAMES)?;
    let found = level(x, bin_hz(bin), 0.0);
    let power = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / x.len() as f64;
    let expected = f64::from(amplitude);
    let stray = (power - found * found / 2.0).max(0.0);
    Some(StreamTone {
        level_db: db(found / expected),
        stray_db: 10.0 * (stray / (expected * expected / 2.0)).max(1e-12).log10(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a loop's packets back into one channel, `blocks` of them from block `from`.
    fn decode(l: &ToneLoop, from: u16, blocks: usize) -> Vec<f32> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; MAX_PACKET_LEN];
        for b in 0..blocks {
            let n = l.packet_into(from.wrapping_add(b as u16), 7, &mut buf);
            let p = packet::parse(&buf[..n]).expect("a whole packet");
            let (mut left, mut right) = (vec![0f32; p.frames()], vec![0f32; p.frames()]);
            p.decode_stereo(&mut left, &mut right);
            out.extend_from_slice(&left);
        }
        out
    }

    #[test]
    fn a_loop_is_a_continuous_sine_at_its_bin_and_level() {
        let l = ToneLoop::new(40, 0.1, 128).unwrap();
        // Start mid-loop: the stream is continuous across the loop's end.
        let x = decode(&l, 5, ANALYSIS_FRAMES / 128);
        let at = level(&x, bin_hz(40), 0.0);
        assert!((at - 0.1).abs() < 1e-3, "{at}");
        // The neighbouring tones' places hold nothing (below -80 dB of the tone), even searched
        // over the drift range.
        for k in [39, 41, 80] {
            let l = level(&x, bin_hz(k), 1000.0);
            assert!(l < 1e-5, "bin {k}: {l}");
        }
    }

    #[test]
    fn a_tone_resampled_within_the_drift_range_is_read_at_its_level() {
        // A 4.6 kHz tone played 1000 ppm fast: 4.6 Hz off its bin.
        let hz = bin_hz(196);
        let x: Vec<f32> = (0..ANALYSIS_FRAMES)
            .map(|n| 0.1 * (std::f64::consts::TAU * hz * 1.001 * n as f64 / 48_000.0).sin() as f32)
            .collect();
        let found = level(&x, hz, 1000.0);
        assert!((20.0 * (found / 0.1).log10()).abs() < 0.1, "{found}");
        // Read at its nominal frequency alone, it is far below its level.
        assert!(level(&x, hz, 0.0) < 0.05);
    }

    #[test]
    fn packets_carry_the_sequence_number_and_time_stamp_asked() {
        let l = ToneLoop::new(3, 0.05, 64).unwrap();
        let mut buf = vec![0u8; MAX_PACKET_LEN];
        let n = l.packet_into(65_535, 1_234_567, &mut buf);
        assert_eq!(n, 16 + 64 * 2 * 2);
        let p = packet::parse(&buf[..n]).unwrap();
        assert_eq!(
            (p.header.seq, p.header.timestamp, p.header.frames),
            (65_535, 1_234_567, 64)
        );
        assert!(ToneLoop::new(3, 0.05, 96).is_err());
    }

    #[test]
    fn a_mix_minus_passes_and_a_mix_with_the_own_tone_or_a_missing_one_fails() {
        let n = 6;
        let bins: Vec<usize> = (0..n).map(sender_bin).collect();
        let a = amplitude(n);
        let loops: Vec<ToneLoop> = bins
            .iter()
            .map(|&k| ToneLoop::new(k, a, 128).unwrap())
            .collect();
        let blocks = ANALYSIS_FRAMES / 128 + 2;
        let streams: Vec<Vec<f32>> = loops.iter().map(|l| decode(l, 0, blocks)).collect();
        let mix = |skip: &[usize]| -> Vec<f32> {
            (0..ANALYSIS_FRAMES + 256)
                .map(|t| {
                    (0..n)
                        .filter(|i| !skip.contains(i))
                        .map(|i| streams[i][t])
                        .sum()
                })
                .collect()
        };
        let good = check(&mix(&[2]), 2, &bins, a, 1.0);
        assert!(good.ok(), "{good:?}");
        assert_eq!(good.checked, n - 1);
        let with_own = check(&mix(&[]), 2, &bins, a, 1.0);
        assert!(
            !with_own.ok() && with_own.own_db.unwrap() > -1.0,
            "{with_own:?}"
        );
        let missing = check(&mix(&[2, 4]), 2, &bins, a, 1.0);
        assert!(!missing.ok() && missing.at_level == n - 2, "{missing:?}");
        // A block lost in the middle (every tone's phase jumps) is not a missing voice.
        let mut jumped = mix(&[2]);
        jumped.drain(20_000..20_128);
        let after_jump = check(&jumped, 2, &bins, a, 1.0);
        assert!(after_jump.ok(), "{after_jump:?}");
        // A mix at another gain than the one expected is not at level.
        let half: Vec<f32> = mix(&[2]).iter().map(|x| x * 0.5).collect();
        assert!(!check(&half, 2, &bins, a, 1.0).ok());
        assert!(check(&half, 2, &bins, a, 0.5).ok());
        // Too little audio is not a pass.
        assert!(!check(&mix(&[2])[..1000], 2, &bins, a, 1.0).ok());
    }

    #[test]
    fn an_app_stream_reads_at_its_tone_and_another_sender_mixed_in_is_stray() {
        let l = ToneLoop::app(30, 0.05, 128).unwrap();
        let mut buf = vec![0u8; MAX_PACKET_LEN];
        let n = l.packet_into(3, 0, &mut buf);
        let p = packet::parse(&buf[..n]).unwrap();
        assert_eq!((p.channels, p.ext.map(|e| e.stream_id)), (1, Some(0)));
        let x = decode(&l, 0, ANALYSIS_FRAMES / 128);
        let heard = check_stream(&x, 30, 0.05).unwrap();
        assert!(heard.ok() && heard.level_db.abs() < 0.05, "{heard:?}");
        // The wrong sender's tone: nothing at the expected bin, all of it stray.
        let wrong = check_stream(&x, 34, 0.05).unwrap();
        assert!(!wrong.ok() && wrong.stray_db > -1.0, "{wrong:?}");
        // A second sender's packets interleaved: stray.
        let other = decode(
            &ToneLoop::app(70, 0.05, 128).unwrap(),
            0,
            ANALYSIS_FRAMES / 128,
        );
        let mixed: Vec<f32> = x
            .chunks(128)
            .zip(other.chunks(128))
            .enumerate()
            .flat_map(|(i, (a, b))| if i % 7 == 3 { b } else { a }.to_vec())
            .collect();
        assert!(!check_stream(&mixed, 30, 0.05).unwrap().ok());
        assert!(check_stream(&x[..1000], 30, 0.05).is_none());
    }

    #[test]
    fn bins_are_distinct_until_they_run_out_and_stay_below_20_khz() {
        let bins: Vec<usize> = (0..DISTINCT_BINS).map(sender_bin).collect();
        let mut sorted = bins.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), DISTINCT_BINS);
        assert!(bin_hz(*bins.last().unwrap()) < 20_000.0);
        assert_eq!(sender_bin(DISTINCT_BINS), FIRST_BIN);
    }
}
