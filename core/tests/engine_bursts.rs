//! Packets that arrive in bursts while the drift correction is active must not modulate a peer's
//! audio.
//!
//! A loaded machine renders and receives in bursts: here 15 quanta's packets (40 ms) arrive at
//! once, every 15 quanta. With the fill on target (no drift correction) the output is clean. With
//! the fill 40 packets over target after the start, the drift loop steers (tens of ppm) and a
//! 1299.32 Hz tone comes out with lines at ±25 Hz (the burst rate) around −46 dB: the same line
//! the browser self-test (tests/browser/engine.test.mjs) meets on a busy machine. No counter
//! moves (nothing concealed, no underrun), the ratio the drift loop returns is smooth (its ripple
//! at 25 Hz is under 0.1 ppm) and the tone's per-quantum level and phase barely move, so the
//! error is added within quanta, in step with the bursts. Not found yet: the test states the
//! known answer and is ignored until the cause is fixed (`cargo test -- --ignored`).

mod common;

use common::{amplitude_at, db, sine_packet};
use tutti_core::engine::{Engine, EngineConfig, Peer, QUANTUM};

const TONE: f64 = 1299.32;
const AMP: f64 = 0.15;

/// Sideband level (dB re the tone's amplitude, the larger of the two) at ± the burst rate.
fn sidebands(burst: u64, lead: u64) -> f64 {
    let config = EngineConfig {
        max_peers: 2,
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(config);
    engine
        .insert_peer(0, Peer::new(&config))
        .expect("slot exists");
    engine.set_strip(0, 1.0, -1.0, false, false).expect("peer");
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let mut out = Vec::new();
    let total = 3000u64;
    let mut sent = 0u64;
    for q in 0..total {
        engine.begin_quantum(q * QUANTUM as u64);
        // After the start, `lead` packets arrive early once: the fill sits above its target.
        let due = if q > 200 { q + burst + lead } else { q + burst };
        if q % burst == 0 {
            while sent < due {
                let p = sine_packet(sent, QUANTUM, TONE, AMP);
                engine.push_packet(0, &p).expect("valid packet");
                sent += 1;
            }
        }
        engine.render(&mut l, &mut r);
        out.extend_from_slice(&l);
    }
    let x = &out[out.len() - 192_000..];
    let fm = 48_000.0 / (QUANTUM as f64 * burst as f64);
    let lo = db(amplitude_at(x, TONE - fm) / AMP);
    let hi = db(amplitude_at(x, TONE + fm) / AMP);
    lo.max(hi)
}

#[test]
fn bursts_without_drift_correction_are_clean() {
    let s = sidebands(15, 0);
    assert!(s < -100.0, "±25 Hz lines at {s:.1} dB");
}

#[test]
#[ignore = "known defect: ±25 Hz lines at about -46 dB while the drift loop steers (see the module docs)"]
fn bursts_with_drift_correction_are_clean() {
    let s = sidebands(15, 40);
    assert!(s < -80.0, "±25 Hz lines at {s:.1} dB");
}
