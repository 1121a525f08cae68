//! Glitches are counted where they happen, and the counters add up.
//!
//! - A sender whose device missed callbacks (its audio clock fell behind its wall clock): every
//!   listener hears the gap at once; each listener's engine sees it in that peer's send stamps
//!   (`P_SENDER_GAPS`, with its length), and the underrun it causes is the only one.
//! - Our own device missing callbacks: `G_CAPTURE_GAPS`.
//! - A stall of this machine (every peer's packets stop and come back together): counted once
//!   (`G_LOCAL_STALLS`), its underruns counted as stall underruns, and no peer's depth raised.
//! - Lost, concealed, late and underruns: concealed = lost + late, underruns = late underruns +
//!   stall underruns + the ones that ended with a gap.

mod common;

use common::{engine_with_peers, sine_packet, stereo_packet};
use tutti_core::engine::{Engine, EngineConfig, QUANTUM};
use tutti_core::stats::*;

const US_PER_BLOCK: f64 = 128.0 / 48_000.0 * 1e6;

fn engine(peers: usize) -> Engine {
    let config = EngineConfig {
        max_peers: 4,
        ..EngineConfig::default()
    };
    engine_with_peers(config, 0..peers)
}

fn stats(e: &Engine) -> Vec<f64> {
    let mut st = vec![0.0; e.stats_len()];
    e.write_stats(&mut st);
    st
}

/// A block of a 440 Hz sine stamped `stamp_us` (the sender's wall clock at sending).
fn packet(seq: u64, stamp_us: f64) -> Vec<u8> {
    let samples: Vec<f32> = (0..QUANTUM)
        .map(|i| {
            let n = (seq as usize * QUANTUM + i) as f64;
            (0.2 * (2.0 * std::f64::consts::PI * 440.0 * n / 48_000.0).sin()) as f32
        })
        .collect();
    stereo_packet(seq, &samples, stamp_us as u64)
}

#[test]
fn a_senders_missed_callbacks_are_seen_by_its_listener() {
    // 20 s: the sender's device misses 20 ms at 8 s and 5.3 ms at 14 s; after each, its packets
    // are sent (and arrive) that much later for good.
    let mut e = engine(1);
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let t0 = 1.7e15;
    let mut behind_us = 0.0;
    for q in 0..7500u64 {
        if q == 3000 {
            behind_us += 20_000.0;
        }
        if q == 5250 {
            behind_us += 2.0 * US_PER_BLOCK;
        }
        // Blocks arrive one quantum after they are sent, or later by what the sender lost.
        let late_q = (behind_us / US_PER_BLOCK).round() as u64;
        e.begin_quantum_at(q * QUANTUM as u64, t0 + q as f64 * US_PER_BLOCK);
        if q > late_q {
            let k = q - 1 - late_q;
            if k as f64 * US_PER_BLOCK + behind_us <= q as f64 * US_PER_BLOCK {
                let stamp = t0 + k as f64 * US_PER_BLOCK + behind_us;
                e.push_packet(0, &packet(k, stamp)).expect("valid");
            }
        }
        e.render(&mut l, &mut r);
    }
    let st = stats(&e);
    let row = |f| st[peer_index(0, f)];
    assert_eq!(
        row(P_SENDER_GAPS),
        2.0,
        "{:?}",
        &st[peer_index(0, 0)..peer_index(0, 41)]
    );
    assert!(
        (row(P_SENDER_GAP_MS) - 25.3).abs() < 1.5,
        "{}",
        row(P_SENDER_GAP_MS)
    );
    // Our own device kept its pace.
    assert_eq!(st[G_CAPTURE_GAPS], 0.0);
    // Nothing was lost; the gaps cost late underruns, and the counters add up.
    assert_eq!(row(P_LOST), 0.0);
    assert_eq!(row(P_CONCEALED), row(P_LOST) + row(P_LATE));
    assert!(
        row(P_UNDERRUNS) >= 1.0 && row(P_UNDERRUNS) <= 2.0,
        "{}",
        row(P_UNDERRUNS)
    );
    assert_eq!(
        row(P_UNDERRUNS),
        row(P_LATE_UNDERRUNS) + row(P_STALL_UNDERRUNS)
    );
}

#[test]
fn our_own_missed_callbacks_are_counted() {
    // 10 s of quanta whose wall clock jumps by 30 ms at 4 s (callbacks missed), in whole ms.
    let mut e = engine(0);
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    for q in 0..3750u64 {
        let extra = if q >= 1500 { 30_000.0 } else { 0.0 };
        let wall = 1.7e15 + q as f64 * US_PER_BLOCK + extra;
        e.begin_quantum_at(q * QUANTUM as u64, (wall / 1000.0).floor() * 1000.0 + 500.0);
        e.render(&mut l, &mut r);
    }
    let st = stats(&e);
    assert_eq!(st[G_CAPTURE_GAPS], 1.0);
    assert!(
        (st[G_CAPTURE_GAP_MS] - 30.0).abs() < 1.5,
        "{}",
        st[G_CAPTURE_GAP_MS]
    );
}

#[test]
fn a_local_stall_is_ours_and_raises_no_depth() {
    // Two peers streaming; from 5 s on, every 3 s this machine stalls for 80 ms: both peers'
    // packets are held back and delivered together when it ends. Known answers: each stall is
    // seen once, the underruns it causes are stall underruns, and the depth stays where it
    // was (the peers' paths did not change); nothing is lost.
    let mut e = engine(2);
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let stall_q = 30u64; // 80 ms
    let mut target_before = 0.0;
    let mut target_max_after: f64 = 0.0;
    let mut held: Vec<u64> = Vec::new();
    for q in 0..7500u64 {
        let in_stall = q >= 1875 && (q - 1875) % 1125 < stall_q;
        e.begin_quantum(q * QUANTUM as u64);
        if q >= 1 {
            held.push(q - 1);
        }
        if !in_stall {
            for k in held.drain(..) {
                for slot in 0..2u16 {
                    e.push_packet(slot, &sine_packet(k, QUANTUM, 440.0, 0.2))
                        .expect("valid");
                }
            }
        }
        e.render(&mut l, &mut r);
        let st = stats(&e);
        if q == 1800 {
            target_before = st[peer_index(0, P_TARGET_FRAMES)];
        }
        if q > 1875 {
            target_max_after = target_max_after.max(st[peer_index(0, P_TARGET_FRAMES)]);
        }
    }
    let st = stats(&e);
    let stalls = st[G_LOCAL_STALLS];
    assert_eq!(stalls, 5.0, "stalls at 5, 8, 11, 14 and 17 s");
    for slot in 0..2 {
        let row = |f| st[peer_index(slot, f)];
        assert_eq!(row(P_LOST), 0.0);
        assert_eq!(row(P_STALL_UNDERRUNS), stalls, "peer {slot}");
        assert_eq!(row(P_LATE_UNDERRUNS), 0.0, "peer {slot}");
        assert_eq!(row(P_CONCEALED), row(P_LOST) + row(P_LATE));
    }
    assert!(
        target_max_after <= target_before,
        "target {target_before} -> {target_max_after}"
    );
}
