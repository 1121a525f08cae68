//! Helpers shared by the engine's integration tests: the seeded generator, an engine with
//! peers, a sine source, packet building, a single-bin DFT and a sine fit for level checks.

#![allow(dead_code)]

use tutti_core::engine::{Engine, EngineConfig, Peer};
use tutti_core::packet::{encode, Header, SampleFormat, SampleRate, MAX_PACKET_LEN};

/// The core tests' one seeded generator (and the rest of their shared support), compiled into
/// the integration tests from the same file the unit tests use.
#[path = "../../src/testing.rs"]
mod testing;
#[allow(unused_imports)] // not every test file draws random numbers or fits sines
pub(crate) use testing::{fit_sine, Rng};

/// An engine of `config` with a new peer (unity gain, centre, unmuted) in each of `slots`.
/// Allocates, like [`Peer::new`].
pub fn engine_with_peers(config: EngineConfig, slots: impl IntoIterator<Item = usize>) -> Engine {
    let mut engine = Engine::new(config);
    for slot in slots {
        engine
            .insert_peer(slot, Peer::new(&config))
            .expect("slot exists");
    }
    engine
}

/// Encodes block `seq` of a sine (`freq` Hz, amplitude `amp`, 48 kHz) as a stereo PCM16 packet.
pub fn sine_packet(seq: u64, frames: usize, freq: f64, amp: f64) -> Vec<u8> {
    let mut l = vec![0f32; frames];
    for (i, x) in l.iter_mut().enumerate() {
        let n = seq as f64 * frames as f64 + i as f64;
        *x = (amp * (2.0 * std::f64::consts::PI * freq * n / 48_000.0).sin()) as f32;
    }
    stereo_packet(seq, &l, seq * frames as u64)
}

/// Block `seq` holding `samples` on both channels, as a stereo PCM16 packet stamped `timestamp`.
pub fn stereo_packet(seq: u64, samples: &[f32], timestamp: u64) -> Vec<u8> {
    let header = Header {
        timestamp,
        seq: seq as u16,
        frames: samples.len() as u16,
        rate: SampleRate::Hz48000,
        format: SampleFormat::Pcm16,
        channels_in: 2,
        channels_out: 2,
    };
    let mut out = vec![0u8; MAX_PACKET_LEN];
    let len = encode(&header, None, &[samples, samples], &mut out).expect("valid test packet");
    out.truncate(len);
    out
}

/// Amplitude of the `freq` component of `x` (48 kHz), by a Hann-windowed single-bin DFT.
/// For a pure sine of amplitude A whose frequency is `freq`, this returns A within ~1e-3 when
/// the window holds many periods.
pub fn amplitude_at(x: &[f32], freq: f64) -> f64 {
    let n = x.len() as f64;
    let (mut re, mut im, mut wsum) = (0.0, 0.0, 0.0);
    for (i, &v) in x.iter().enumerate() {
        let w = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n).cos();
        let ph = 2.0 * std::f64::consts::PI * freq * i as f64 / 48_000.0;
        re += w * v as f64 * ph.cos();
        im -= w * v as f64 * ph.sin();
        wsum += w;
    }
    2.0 * (re * re + im * im).sqrt() / wsum
}

pub fn db(x: f64) -> f64 {
    20.0 * x.max(1e-12).log10()
}
