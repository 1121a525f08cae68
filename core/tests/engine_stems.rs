//! Recording stems: while recording, each peer's pre-fader quantum is kept beside the mix. A
//! stem is the peer's sine at the level it was sent, whatever its fader, pan or mute, and the mix
//! is the same whether stems are kept or not.

mod common;

use common::{amplitude_at, db, engine_with_peers, sine_packet};
use tutti_core::engine::{EngineConfig, QUANTUM};

const FREQS: [f64; 3] = [440.0, 660.0, 990.0];
const AMP: f64 = 0.2;
const QUANTA: u64 = 1500; // 4 s

struct Out {
    mix_l: Vec<f32>,
    mix_r: Vec<f32>,
    stems: Vec<Vec<f32>>, // left channel of each peer's stem
    stems_r: Vec<Vec<f32>>,
}

fn run(record: bool) -> Out {
    let config = EngineConfig {
        max_peers: 4,
        ..EngineConfig::default()
    };
    let mut engine = engine_with_peers(config, 0..3);
    // Fader −12 dB panned left, unity centre, and muted: none of it reaches a stem.
    let gain = 10f32.powf(-12.0 / 20.0);
    engine.set_strip(0, gain, -1.0, false, false).expect("peer");
    engine.set_strip(1, 1.0, 0.0, false, false).expect("peer");
    engine.set_strip(2, 1.0, 0.3, true, false).expect("peer");
    engine.set_recording(record);
    assert_eq!(engine.recording(), record);
    let mut out = Out {
        mix_l: Vec::new(),
        mix_r: Vec::new(),
        stems: vec![Vec::new(); 3],
        stems_r: vec![Vec::new(); 3],
    };
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    for q in 0..QUANTA {
        engine.begin_quantum(q * QUANTUM as u64);
        for (slot, f) in FREQS.iter().enumerate() {
            let pkt = sine_packet(q, QUANTUM, *f, AMP);
            engine.push_packet(slot as u16, &pkt).expect("valid packet");
        }
        engine.render(&mut l, &mut r);
        out.mix_l.extend_from_slice(&l);
        out.mix_r.extend_from_slice(&r);
        for slot in 0..3 {
            let (sl, sr) = engine.stem(slot).expect("peer present");
            out.stems[slot].extend_from_slice(sl);
            out.stems_r[slot].extend_from_slice(sr);
        }
    }
    assert!(engine.stem(3).is_none(), "an empty slot has no stem");
    out
}

#[test]
fn stems_are_each_peer_pre_fader_and_the_mix_is_unchanged() {
    let rec = run(true);
    let plain = run(false);
    // The last 2 s: the buffers have settled.
    let tail = |x: &Vec<f32>| x[x.len() - 96_000..].to_vec();
    for (slot, f) in FREQS.iter().enumerate() {
        let stem = tail(&rec.stems[slot]);
        let own = db(amplitude_at(&stem, *f) / AMP);
        assert!(
            own.abs() < 0.05,
            "peer {slot}: stem level {own:.3} dB re sent"
        );
        for (other, g) in FREQS.iter().enumerate() {
            if other != slot {
                let leak = db(amplitude_at(&stem, *g) / AMP);
                assert!(
                    leak < -90.0,
                    "peer {slot}: {g} Hz leaks into its stem at {leak:.1} dB"
                );
            }
        }
        // PCM16 stereo with the same sine on both channels: the stem's channels are equal.
        let stem_r = tail(&rec.stems_r[slot]);
        assert!(stem.iter().zip(&stem_r).all(|(a, b)| a == b));
    }
    // The mix does not change when stems are kept.
    let max_diff = rec
        .mix_l
        .iter()
        .zip(&plain.mix_l)
        .chain(rec.mix_r.iter().zip(&plain.mix_r))
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(max_diff < 1e-6, "mix differs by {max_diff} with stems kept");
    // And the mix is what the strips make of the stems: peer 0 at −12 dB hard left, peer 1 at
    // centre (−3.01 dB each side), peer 2 muted.
    let mix_l = tail(&rec.mix_l);
    let mix_r = tail(&rec.mix_r);
    let l0 = db(amplitude_at(&mix_l, FREQS[0]) / AMP);
    let r0 = db(amplitude_at(&mix_r, FREQS[0]) / AMP);
    let l1 = db(amplitude_at(&mix_l, FREQS[1]) / AMP);
    let m2 = db(amplitude_at(&mix_l, FREQS[2]) / AMP);
    assert!((l0 + 12.0).abs() < 0.1, "peer 0 left {l0:.2} dB");
    assert!(r0 < -80.0, "peer 0 right {r0:.2} dB");
    assert!((l1 + 3.01).abs() < 0.1, "peer 1 left {l1:.2} dB");
    assert!(m2 < -80.0, "muted peer in the mix at {m2:.1} dB");
}
