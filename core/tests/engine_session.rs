//! A five-peer session through the engine, checked against known answers: each peer's sine comes
//! out at its expected level, the counters equal the injected schedule, and bad input is counted
//! and dropped without changing a single output sample of the other peers.

mod common;

use common::{amplitude_at, db, engine_with_peers, sine_packet, Rng};
use tutti_core::engine::{Engine, EngineConfig, QUANTUM};
use tutti_core::jitter::BufferMode;
use tutti_core::stats::*;

const FREQS: [f64; 5] = [300.0, 500.0, 700.0, 1100.0, 1300.0];
const AMP: f64 = 0.15;
const BLOCKS: u64 = 2400; // 6.4 s of audio per peer
const LATE_BY: u64 = 40; // quanta: beyond the deepest the buffer may go here (32)

/// What was injected for one peer.
#[derive(Default, Debug, Clone, Copy)]
struct Ledger {
    unique_sent: u64,
    dropped: u64,
    late: u64,
    duplicates: u64,
}

/// Deliveries per quantum: (quantum, slot, seq).
fn schedule(seed: u64) -> (Vec<(u64, u16, u64)>, [Ledger; 5]) {
    let mut rng = Rng::new(seed);
    let mut deliveries = Vec::new();
    let mut ledgers = [Ledger::default(); 5];
    for (slot, ledger) in ledgers.iter_mut().enumerate() {
        for seq in 0..BLOCKS {
            // The first and last packets always arrive on time, so that "expected" (highest −
            // lowest + 1) covers the whole stream.
            let edge = seq < 4 || seq + 4 >= BLOCKS;
            let at = seq + 2 + rng.below(4); // 0..3 quanta of jitter: bursts and reordering
            let roll = rng.unit();
            if !edge && roll < 0.02 {
                ledger.dropped += 1;
                continue;
            }
            ledger.unique_sent += 1;
            if !edge && roll < 0.025 {
                ledger.late += 1;
                deliveries.push((seq + LATE_BY, slot as u16, seq));
                continue;
            }
            deliveries.push((at, slot as u16, seq));
            if !edge && roll > 0.98 {
                ledger.duplicates += 1;
                deliveries.push((at + 1 + rng.below(2), slot as u16, seq));
            }
        }
    }
    deliveries.sort_by_key(|d| d.0);
    (deliveries, ledgers)
}

struct Run {
    left: Vec<f32>,
    right: Vec<f32>,
    stats: Vec<f64>,
}

/// Runs the session; `garbage(quantum, engine)` may inject bad input each quantum.
fn run(seed: u64, mut garbage: impl FnMut(u64, &mut Engine)) -> (Run, [Ledger; 5]) {
    // The ceiling (32 quanta) stays below LATE_BY, so the buffer can never adapt deep enough
    // to play the late packets in time: every one of them is late, exactly.
    let config = EngineConfig {
        max_peers: 8,
        buffer: BufferMode::Adaptive {
            floor_frames: QUANTUM as u32,
            ceiling_frames: 32 * QUANTUM as u32,
        },
        ..EngineConfig::default()
    };
    let mut engine = engine_with_peers(config, 0..6);
    let packets: Vec<Vec<Vec<u8>>> = FREQS
        .iter()
        .map(|&f| (0..BLOCKS).map(|s| sine_packet(s, 128, f, AMP)).collect())
        .collect();
    let (deliveries, ledgers) = schedule(seed);
    let total_quanta = BLOCKS + LATE_BY + 200;
    let mut out = Run {
        left: Vec::new(),
        right: Vec::new(),
        stats: vec![0.0; BLOCK_LEN],
    };
    let mut next = 0;
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    for q in 0..total_quanta {
        engine.begin_quantum(q * QUANTUM as u64);
        while next < deliveries.len() && deliveries[next].0 == q {
            let (_, slot, seq) = deliveries[next];
            engine
                .push_packet(slot, &packets[usize::from(slot)][seq as usize])
                .expect("well-formed packet for a present peer");
            next += 1;
        }
        garbage(q, &mut engine);
        engine.render(&mut l, &mut r);
        out.left.extend_from_slice(&l);
        out.right.extend_from_slice(&r);
    }
    engine.write_stats(&mut out.stats);
    (out, ledgers)
}

#[test]
fn five_peers_tones_levels_and_counters() {
    let (run, ledgers) = run(7, |_, _| {});
    assert!(
        run.left.iter().chain(&run.right).all(|x| x.is_finite()),
        "NaN or Inf in output"
    );
    let peak = run
        .left
        .iter()
        .chain(&run.right)
        .fold(0f32, |m, x| m.max(x.abs()));
    assert!(peak <= 1.0, "sample beyond ±1: {peak}");

    // One second of steady state, well after warm-up and before the streams end.
    let from = 3 * 48_000;
    let window = &run.left[from..from + 48_000];
    let window_r = &run.right[from..from + 48_000];
    // A stereo source with both channels equal, panned centre: constant power gives each side
    // cos(π/4) of the source.
    let expected = AMP * std::f64::consts::FRAC_1_SQRT_2;
    for slot in 0..5 {
        let s = |field| run.stats[peer_index(slot, field)];
        eprintln!(
            "peer {slot}: depth {:.0}/{:.0} frames, drift {:+.1} ppm, jitter {:.0}, concealed {}, underruns {}",
            s(P_BUFFERED_FRAMES), s(P_TARGET_FRAMES), s(P_DRIFT_PPM), s(P_JITTER_FRAMES),
            s(P_CONCEALED), s(P_UNDERRUNS)
        );
    }
    for &f in &FREQS {
        eprintln!(
            "{f} Hz: {:+.2} dB",
            db(amplitude_at(window, f)) - db(expected)
        );
    }
    for &f in &FREQS {
        for (side, w) in [("left", window), ("right", window_r)] {
            let got = amplitude_at(w, f);
            let err_db = db(got) - db(expected);
            // 2.5% of blocks are concealed; a concealed block carries a decaying continuation,
            // which lowers the tone's mean level by well under 0.5 dB.
            assert!(
                err_db.abs() < 0.5,
                "{f} Hz {side}: {got:.5} vs {expected:.5} ({err_db:+.2} dB)"
            );
        }
    }
    // Between the tones: nothing above −40 dB relative to a tone.
    for f in [400.0, 900.0, 2000.0, 5000.0] {
        let got = amplitude_at(window, f);
        assert!(
            db(got) - db(expected) < -40.0,
            "{f} Hz is at {:.1} dB",
            db(got) - db(expected)
        );
    }

    for (slot, ledger) in ledgers.iter().enumerate() {
        let s = |field| run.stats[peer_index(slot, field)] as u64;
        assert_eq!(
            s(P_RECEIVED),
            ledger.unique_sent,
            "received, peer {slot}: {ledger:?}"
        );
        assert_eq!(s(P_LOST), ledger.dropped, "lost, peer {slot}: {ledger:?}");
        assert_eq!(s(P_LATE), ledger.late, "late, peer {slot}: {ledger:?}");
        assert_eq!(
            s(P_DUPLICATES),
            ledger.duplicates,
            "duplicates, peer {slot}: {ledger:?}"
        );
        assert_eq!(s(P_MALFORMED), 0);
    }
}

#[test]
fn bad_input_is_counted_and_leaves_other_peers_untouched() {
    let (clean, _) = run(11, |_, _| {});
    let mut rng = Rng::new(99);
    let mut injected = (0u64, 0u64); // (malformed, unknown peer)
    let good = sine_packet(0, 128, 440.0, 0.5);
    let (dirty, _) = run(11, |q, engine| {
        if q % 3 != 0 {
            return;
        }
        let slot = (q % 5) as u16;
        let bad: Vec<u8> = match q % 7 {
            // Truncated at a random length.
            0 => good[..rng.below(good.len() as u64) as usize].to_vec(),
            // Oversized: trailing bytes that are not an extension.
            1 => [good.as_slice(), &[0xAB; 37]].concat(),
            // Random garbage.
            2 => (0..rng.below(3000)).map(|_| rng.next_u64() as u8).collect(),
            // Wrong format: 8-bit resolution.
            3 => {
                let mut p = good.clone();
                p[13] = 8;
                p
            }
            // Undefined sample-rate code.
            4 => {
                let mut p = good.clone();
                p[12] = 7;
                p
            }
            // A valid packet for a slot that holds no peer.
            _ => {
                assert!(engine.push_packet(7, &good).is_err());
                injected.1 += 1;
                return;
            }
        };
        assert!(
            engine.push_packet(slot, &bad).is_err(),
            "bad packet accepted (q {q})"
        );
        injected.0 += 1;
    });
    assert!(injected.0 > 100 && injected.1 > 10);
    assert_eq!(dirty.stats[G_MALFORMED] as u64, injected.0);
    assert_eq!(dirty.stats[G_UNKNOWN_PEER] as u64, injected.1);
    let first_diff = clean
        .left
        .iter()
        .zip(&dirty.left)
        .position(|(a, b)| a.to_bits() != b.to_bits());
    assert_eq!(
        first_diff, None,
        "bad input changed the output of well-behaved peers"
    );
    assert!(clean
        .right
        .iter()
        .zip(&dirty.right)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}
