//! The render path allocates nothing: a counting global allocator watches thousands of quanta
//! of push, drain, capture, render, stats and latency histograms (every stage recorded), with
//! peers joining and leaving. Peers are built and freed outside the watched region, as the
//! worklet's message handler does. The mix-minus (a personal mix per listener, for a hub in mix
//! mode) is watched the same way: strips change, lists fill and clear.

mod common;

use common::{sine_packet, Rng};
use tutti_core::alloc_watch::{calls, watched, Counting};
use tutti_core::capture::Destination;
use tutti_core::engine::{Engine, EngineConfig, Peer, QUANTUM, TAG_ECHO, TAG_SEND_QUEUE};
use tutti_core::latency::HB_BLOCK_LEN;
use tutti_core::mix::{GainControl, MixMinus};
use tutti_core::ring;
use tutti_core::stats::BLOCK_LEN;

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn render_path_never_allocates() {
    let config = EngineConfig {
        max_peers: 16,
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(config);
    let mut rng = Rng::new(5);
    let packets: Vec<Vec<u8>> = (0..64).map(|s| sine_packet(s, 128, 440.0, 0.3)).collect();
    let mut inbound = vec![0u8; 1 << 16];
    let mut outbound = vec![0u8; 1 << 16];
    let (mut in_write, mut in_read) = (0u32, 0u32);
    let (mut out_write, out_read) = (0u32, 0u32);
    let mut stats = vec![0.0; BLOCK_LEN];
    let mut histograms = vec![0.0; HB_BLOCK_LEN];
    let input = [0.25f32; QUANTUM];
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let mut seqs = [0u64; 16];
    let quanta = 6000;

    for q in 0..quanta {
        // Join and leave off the render path, every 250 quanta.
        if q % 250 == 0 {
            let slot = rng.below(16) as usize;
            if engine.peer(slot).is_some() {
                let old = watched(|| engine.remove_peer(slot));
                drop(old);
            } else {
                let peer = Peer::new(&config);
                let displaced = watched(|| engine.insert_peer(slot, peer));
                drop(displaced);
                let offset = if slot < 8 {
                    Some(-50_000)
                } else {
                    Some(1 << 40)
                };
                watched(|| engine.set_clock_offset(slot, offset)).unwrap();
                seqs[slot] = 0;
            }
        }
        // The net side fills the inbound ring (not watched: it is another thread's work).
        for slot in 0..16u16 {
            let seq = &mut seqs[usize::from(slot)];
            let bytes = &packets[(*seq % 64) as usize];
            // Arrival times that give every packet a one-way delay in range for slot 0..8 and out
            // of range for the rest (their offsets below), so both paths are exercised.
            // They arrived up to 3 ms before the quantum that drains them (its wall clock below).
            let wall = (q - q % 3) as f64 * 2_666.67;
            let arrival = (wall as u64).wrapping_sub(rng.below(3_000)) as u32;
            if let Ok(w) = ring::write_record(&mut inbound, in_write, in_read, slot, arrival, bytes)
            {
                in_write = w;
            }
            *seq += 1;
            // The net side's send-queue time towards this peer, and now and then an echo request.
            let tag = if q % 500 == 7 {
                TAG_ECHO
            } else {
                TAG_SEND_QUEUE
            } | slot;
            if let Ok(w) = ring::write_record(&mut inbound, in_write, in_read, tag, 300, &[]) {
                in_write = w;
            }
        }
        watched(|| {
            // Recording on for the middle third: stems are kept without allocating.
            engine.set_recording((quanta / 3..2 * quanta / 3).contains(&q));
            // A host clock with a burst now and then.
            let wall = (q - q % 3) as f64 * 2_666.67;
            engine.begin_quantum_at(q * QUANTUM as u64, wall);
            in_read = engine.drain(&inbound, in_read, in_write);
            engine.push_packet(3, &packets[0][..10]).ok();
            engine.push_packet_at(5, &packets[1], 77).ok();
            // A probe now and then (towards a slot that may be empty: refused without a cost).
            if q % 700 == 100 {
                engine.start_probe(q as usize % 16, 10).ok();
            }
            if q % 700 == 650 {
                engine.stop_probe();
            }
            let mut sink = |to: Destination, bytes: &[u8]| match ring::write_record(
                &mut outbound,
                out_write,
                out_read,
                to.tag(),
                0,
                bytes,
            ) {
                Ok(w) => {
                    out_write = w;
                    true
                }
                Err(_) => false,
            };
            engine.capture(&input, &input, &mut sink);
            engine.render(&mut l, &mut r);
            if let Some((sl, _)) = engine.stem(usize::from(q as u16 % 16)) {
                std::hint::black_box(sl[0]);
            }
            if q % 8 == 0 {
                engine.write_stats(&mut stats);
            }
            if q % 375 == 0 {
                engine.write_histograms(&mut histograms);
            }
            if q == quanta / 2 {
                engine.reset_latency();
            }
        });
    }
    assert_eq!(calls(), 0, "allocations on the render path");
    assert!(engine.counters().records_read > 10_000);
    assert!(engine.counters().packets_sent > 0);
    // Every stage was recorded on the way.
    assert!(engine.capture_interval().count() > 1000);
    let peers: Vec<_> = (0..16).filter_map(|s| engine.peer(s)).collect();
    // (The packets' sequence numbers repeat every 64, so playout restarts often: few play.)
    assert!(peers.iter().any(|p| p.jitter_wait().count() > 10));
    assert!(peers.iter().any(|p| p.network_one_way().count() > 100));
    assert!(peers.iter().any(|p| p.network_one_way().rejected() > 100));
    assert!(peers.iter().any(|p| p.delivery().count() > 100));
    assert!(peers.iter().any(|p| p.send_queue().count() > 100));
    assert!(engine.probe().sent() > 0, "a probe ran");
    assert!(engine.counters().echo_sent > 0, "the echo lane ran");
}

#[test]
fn mix_minus_never_allocates() {
    const SLOTS: usize = 64;
    let mut mix = MixMinus::new(SLOTS, 8);
    let mut rng = Rng::new(11);
    // Every slot but the last eight plays; the sources are made before the watch.
    let room: Vec<Option<[[f32; QUANTUM]; 2]>> = (0..SLOTS)
        .map(|slot| (slot < SLOTS - 8).then_some([[0.01 * slot as f32; QUANTUM]; 2]))
        .collect();
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let mut refused = 0;
    watched(|| {
        for block in 0..2000 {
            // Changes come and go (new ones fill the listeners' lists; a full list refuses).
            for _ in 0..4 {
                let (listener, source) = (rng.below(SLOTS as u64), rng.below(SLOTS as u64));
                match mix.strip_mut(listener as usize, source as usize) {
                    Ok(strip) if rng.below(3) == 0 => {
                        strip.set_gain(1.0);
                        strip.set_pan(0.0);
                        strip.set_mute(false);
                        strip.set_solo(false);
                    }
                    Ok(strip) => {
                        strip.set_gain_db(-6.0);
                        strip.set_solo(rng.below(10) == 0);
                    }
                    Err(_) => refused += 1,
                }
            }
            if block % 100 == 0 {
                mix.clear(rng.below(SLOTS as u64) as usize).ok();
            }
            mix.sum(room.as_slice());
            for listener in 0..SLOTS {
                mix.render(listener, room.as_slice(), &mut l, &mut r).ok();
            }
        }
    });
    assert_eq!(calls(), 0, "allocations while mixing");
    assert!(refused > 0, "full change lists and own voices were refused");
    assert!(
        (0..SLOTS).any(|s| mix.changes(s) == 8),
        "some list filled up"
    );
}
