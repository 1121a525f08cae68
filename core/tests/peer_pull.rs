//! A peer played by its host, one quantum at a time, without the engine (a hub's mix): packets
//! pushed with [`Peer::push`] come back out of [`Peer::pull`] at their level, before any strip,
//! and a peer that has heard nothing plays silence.

mod common;

use common::{amplitude_at, db, sine_packet};
use tutti_core::engine::{EngineConfig, Peer, QUANTUM};
use tutti_core::packet;

#[test]
fn pulled_quanta_carry_the_pushed_tone_at_its_level() {
    let mut peer = Peer::new(&EngineConfig::default());
    let (mut l, mut r) = ([1.0f32; QUANTUM], [1.0f32; QUANTUM]);
    peer.pull(0, &mut l, &mut r);
    assert!(
        l.iter().chain(&r).all(|&x| x == 0.0),
        "silence before any packet"
    );

    let mut out = Vec::new();
    for k in 0..400u64 {
        let bytes = sine_packet(k, QUANTUM, 750.0, 0.5);
        let pkt = packet::parse(&bytes).expect("valid packet");
        peer.push(&pkt, k * QUANTUM as u64);
        peer.pull(k * QUANTUM as u64, &mut l, &mut r);
        if k >= 200 {
            out.extend_from_slice(&l);
        }
    }
    // Unity before the strip: 0.5 in, 0.5 out (PCM16 rounding aside).
    let level = db(amplitude_at(&out, 750.0) / 0.5);
    assert!(level.abs() < 0.1, "level {level} dB off");
    let c = peer.jitter_counters();
    assert_eq!(c.received, 400);
    assert_eq!(c.concealed, 0);
}
