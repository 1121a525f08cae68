//! The engine's latency stages against known answers: the jitter-buffer wait of a fixed buffer
//! of N packets, the network one-way delay of packets stamped with a known clock offset and
//! delay, and the capture interval of a steady and of a bursty host; and how they reach the
//! stats block and the histogram block.

mod common;

use common::{sine_packet, stereo_packet};
use tutti_core::engine::{Engine, EngineConfig, Peer, QUANTUM};
use tutti_core::jitter::BufferMode;
use tutti_core::latency::{self, bin_of, HIST_LEN, H_BINS_AT, H_COUNT, H_P50_MS};
use tutti_core::stats::*;

const FRAME_US: f64 = 1_000_000.0 / 48_000.0;

/// A silent stereo PCM16 packet of `frames` frames stamped `timestamp` (µs).
fn stamped_packet(seq: u64, frames: usize, timestamp: u64) -> Vec<u8> {
    stereo_packet(seq, &vec![0.1f32; frames], timestamp)
}

fn engine_with_peer(buffer: BufferMode) -> Engine {
    let config = EngineConfig {
        max_peers: 4,
        buffer,
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(config);
    engine.insert_peer(1, Peer::new(&config)).unwrap();
    engine
}

/// Packets of `block` frames arriving exactly on time (each at the quantum in which its audio
/// was complete at the sender) into a fixed buffer of `packets` packets: the median wait.
fn fixed_buffer_wait_us(packets: u32, block: usize, quanta: u64) -> (f64, u64) {
    let mut engine = engine_with_peer(BufferMode::Fixed { packets });
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let mut next_seq = 0u64;
    for q in 0..quanta {
        let now = q * QUANTUM as u64;
        engine.begin_quantum(now);
        // Every block that ends by the end of this quantum has arrived.
        while (next_seq + 1) * block as u64 <= now + QUANTUM as u64 {
            let p = sine_packet(next_seq, block, 440.0, 0.2);
            engine.push_packet(1, &p).unwrap();
            next_seq += 1;
        }
        engine.render(&mut l, &mut r);
    }
    let wait = engine.peer(1).unwrap().jitter_wait();
    (wait.quantile(0.5).unwrap(), wait.count())
}

#[test]
fn jitter_wait_of_a_fixed_buffer_is_its_depth() {
    for block in [64usize, 256] {
        for packets in [2u32, 6] {
            let (p50, count) = fixed_buffer_wait_us(packets, block, 2000);
            let depth_us = f64::from(packets) * block as f64 * FRAME_US;
            let block_us = block as f64 * FRAME_US;
            println!(
                "block {block}, {packets} packets: p50 {:.3} ms, depth {:.3} ms ({count} packets)",
                p50 / 1000.0,
                depth_us / 1000.0
            );
            assert!(
                (p50 - depth_us).abs() <= block_us,
                "block {block}, {packets} packets: p50 {p50} µs vs depth {depth_us} µs"
            );
            // Nearly every packet played was measured (the first few start the stream).
            let expected = 2000 * QUANTUM as u64 / block as u64;
            assert!(count + u64::from(packets) + 4 >= expected && count <= expected);
        }
    }
}

#[test]
fn deeper_buffers_wait_longer_by_their_extra_depth() {
    let (two, _) = fixed_buffer_wait_us(2, 128, 1000);
    let (six, _) = fixed_buffer_wait_us(6, 128, 1000);
    let four_blocks = 4.0 * 128.0 * FRAME_US;
    assert!(
        ((six - two) - four_blocks).abs() <= 128.0 * FRAME_US,
        "{two} → {six}"
    );
}

/// A sender whose wall clock is `offset` µs behind ours, packets taking `one_way` µs.
fn network_run(engine: &mut Engine, from_seq: u64, count: u64, offset: i64, one_way: u64) {
    // The sender's wall clock: microseconds since 1970, in 2026 (beyond 2^32: the low 32 bits
    // wrap many times over, as in the browser).
    let sender_start: u64 = 1_795_000_000_000_000;
    let block_us = 128.0 * FRAME_US;
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    for seq in from_seq..from_seq + count {
        let sent = sender_start + (seq as f64 * block_us) as u64;
        let arrival = (sent as i64 + offset) as u64 + one_way;
        engine.begin_quantum(seq * QUANTUM as u64);
        let p = stamped_packet(seq, 128, sent);
        engine.push_packet_at(1, &p, arrival as u32).unwrap();
        engine.render(&mut l, &mut r);
    }
}

#[test]
fn network_one_way_with_a_known_offset() {
    let offset: i64 = 123_456_789; // ours − theirs
    let mut engine = engine_with_peer(EngineConfig::default().buffer);
    // Until the offset is known, nothing is recorded.
    network_run(&mut engine, 0, 500, offset, 5_000);
    let net = engine.peer(1).unwrap().network_one_way();
    assert_eq!((net.count(), net.rejected()), (0, 0));
    let mut stats = vec![0.0; BLOCK_LEN];
    engine.write_stats(&mut stats);
    assert_eq!(stats[peer_index(1, P_NET_COUNT)], 0.0);
    assert!(stats[peer_index(1, P_CLOCK_OFFSET_US)].is_nan());

    engine.set_clock_offset(1, Some(offset)).unwrap();
    network_run(&mut engine, 500, 1000, offset, 5_000);
    let net = engine.peer(1).unwrap().network_one_way();
    assert_eq!(net.count(), 1000);
    for q in [0.5, 0.95, 0.99] {
        let v = net.quantile(q).unwrap();
        assert!((v - 5_000.0).abs() <= 50.0, "q{q}: {v} µs");
    }
    engine.write_stats(&mut stats);
    let row = |f| stats[peer_index(1, f)];
    assert!((row(P_NET_P50_MS) - 5.0).abs() <= 0.05);
    assert!((row(P_NET_MEAN_MS) - 5.0).abs() <= 0.05);
    assert!((row(P_NET_MAX_MS) - 5.0).abs() <= 0.05);
    assert_eq!(row(P_NET_COUNT), 1000.0);
    assert_eq!(row(P_CLOCK_OFFSET_US), offset as f64);

    // A negative offset (our clock ahead of theirs) and a different delay.
    let mut engine = engine_with_peer(EngineConfig::default().buffer);
    engine.set_clock_offset(1, Some(-987_654)).unwrap();
    network_run(&mut engine, 0, 400, -987_654, 12_345);
    let net = engine.peer(1).unwrap().network_one_way();
    assert!((net.quantile(0.5).unwrap() - 12_345.0).abs() <= 50.0);

    // A wrong offset puts the delays out of range: counted, not recorded.
    engine.reset_latency();
    engine.set_clock_offset(1, Some(0)).unwrap();
    network_run(&mut engine, 400, 100, -987_654, 12_345);
    let net = engine.peer(1).unwrap().network_one_way();
    assert_eq!((net.count(), net.rejected()), (0, 100));
    // Unknown again: nothing more is counted.
    engine.set_clock_offset(1, None).unwrap();
    network_run(&mut engine, 500, 100, -987_654, 12_345);
    assert_eq!(engine.peer(1).unwrap().network_one_way().rejected(), 100);
    assert!(engine.set_clock_offset(3, Some(0)).is_err(), "empty slot");
}

#[test]
fn drain_passes_the_ring_time_as_arrival() {
    use tutti_core::ring;
    let mut engine = engine_with_peer(EngineConfig::default().buffer);
    engine.set_clock_offset(1, Some(1_000)).unwrap();
    let mut data = vec![0u8; 1 << 14];
    let (mut write, mut read) = (0u32, 0u32);
    let sent = 1_795_000_000_123_456u64;
    for seq in 0..10u64 {
        let ts = sent + seq * 2_667;
        let p = stamped_packet(seq, 128, ts);
        // Arrives 3 ms later on a clock 1 ms ahead.
        let arrival = (ts + 1_000 + 3_000) as u32;
        write = ring::write_record(&mut data, write, read, 1, arrival, &p).unwrap();
    }
    engine.begin_quantum(0);
    read = engine.drain(&data, read, write);
    assert_eq!(read, write);
    let net = engine.peer(1).unwrap().network_one_way();
    assert_eq!(net.count(), 10);
    assert_eq!((net.min(), net.max()), (Some(3_000.0), Some(3_000.0)));
}

#[test]
fn capture_interval_steady_and_in_bursts() {
    // A steady host: one quantum every 128/48000 s.
    let mut engine = engine_with_peer(EngineConfig::default().buffer);
    let period = 128.0 * FRAME_US;
    for q in 0..3000u64 {
        engine.begin_quantum_at(q * QUANTUM as u64, 1.0e12 + q as f64 * period);
    }
    let cap = engine.capture_interval();
    assert_eq!(cap.count(), 2999);
    let p50 = cap.quantile(0.5).unwrap();
    assert!((p50 - 2_666.667).abs() < 1.0, "{p50}");
    assert!((cap.max().unwrap() - 2_666.667).abs() < 1.0);

    // A bursty host: four quanta at once every 10.667 ms.
    let mut engine = engine_with_peer(EngineConfig::default().buffer);
    for q in 0..4000u64 {
        let burst = (q / 4) as f64;
        engine.begin_quantum_at(q * QUANTUM as u64, 5.0e11 + burst * 4.0 * period);
    }
    let cap = engine.capture_interval();
    let p50 = cap.quantile(0.5).unwrap();
    assert!(p50 < latency::MIN_US, "p50 {p50} µs");
    assert!((cap.max().unwrap() - 10_666.667).abs() < 1.0);
    assert!((cap.mean().unwrap() - period).abs() < 5.0);
    let mut stats = vec![0.0; BLOCK_LEN];
    engine.write_stats(&mut stats);
    assert!(stats[G_CAPTURE_P50_MS] < 0.01);
    assert!((stats[G_CAPTURE_MAX_MS] - 10.667).abs() < 0.001);
    assert_eq!(stats[G_CAPTURE_COUNT], 3999.0);

    // A millisecond clock (Date.now() in a worklet): single intervals read 2 or 3 ms, the mean
    // stays right.
    let mut engine = engine_with_peer(EngineConfig::default().buffer);
    for q in 0..3000u64 {
        let ms = ((1.7e12 + q as f64 * period) / 1000.0).floor();
        engine.begin_quantum_at(q * QUANTUM as u64, ms * 1000.0);
    }
    let cap = engine.capture_interval();
    assert!((cap.mean().unwrap() - period).abs() < 2.0);
    assert!(cap.min().unwrap() >= 2_000.0 && cap.max().unwrap() <= 3_000.0);

    // A clock that steps back is rejected, not recorded; non-finite times restart.
    engine.reset_latency();
    engine.begin_quantum_at(0, 100.0);
    engine.begin_quantum_at(128, 50.0);
    engine.begin_quantum_at(256, f64::NAN);
    engine.begin_quantum_at(384, 60.0);
    engine.begin_quantum_at(512, 70.0);
    let cap = engine.capture_interval();
    assert_eq!((cap.count(), cap.rejected()), (1, 1));
}

#[test]
fn histogram_block_carries_every_stage() {
    let mut engine = engine_with_peer(BufferMode::Fixed { packets: 3 });
    engine.set_clock_offset(1, Some(0)).unwrap();
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let sent = 1_800_000_000_000_000u64;
    for q in 0..800u64 {
        engine.begin_quantum_at(q * QUANTUM as u64, q as f64 * 2_000.0);
        let ts = sent + q * 2_667;
        let p = stamped_packet(q, 128, ts);
        engine.push_packet_at(1, &p, (ts + 7_000) as u32).unwrap();
        engine.render(&mut l, &mut r);
    }
    let mut block = vec![f64::NAN; latency::HB_BLOCK_LEN];
    engine.write_histograms(&mut block);
    assert_eq!(block[latency::HB_SLOTS], 4.0);
    assert_eq!(block[latency::HB_BINS], latency::BINS as f64);
    let cap = &block[latency::CAPTURE_AT..latency::CAPTURE_AT + HIST_LEN];
    assert_eq!(cap[H_COUNT], 799.0);
    assert_eq!(cap[H_BINS_AT + bin_of(2_000.0)], 799.0);
    assert_eq!(cap[H_P50_MS], 2.0);
    let net_at = latency::hist_index(1, latency::STAGE_NETWORK);
    let net = &block[net_at..net_at + HIST_LEN];
    assert_eq!(net[H_COUNT], 800.0);
    assert_eq!(net[H_P50_MS], 7.0);
    let wait_at = latency::hist_index(1, latency::STAGE_JITTER_WAIT);
    let wait = &block[wait_at..wait_at + HIST_LEN];
    assert!(wait[H_COUNT] > 790.0);
    assert!((wait[H_P50_MS] - 3.0 * 128.0 * FRAME_US / 1000.0).abs() <= 128.0 * FRAME_US / 1000.0);
    let bins: f64 = wait[H_BINS_AT..].iter().sum();
    assert_eq!(bins, wait[H_COUNT]);
    // Empty slots are zeros; nothing past this engine's slots is written.
    let empty = latency::hist_index(0, latency::STAGE_JITTER_WAIT);
    assert!(block[empty..empty + 2 * HIST_LEN].iter().all(|&v| v == 0.0));
    assert!(block[engine.histograms_len()].is_nan());
    assert!(
        block[latency::HB_SEQUENCE].is_nan(),
        "the publisher owns the sequence word"
    );

    // The stats block summarises the same histograms.
    let mut stats = vec![0.0; BLOCK_LEN];
    engine.write_stats(&mut stats);
    assert_eq!(stats[peer_index(1, P_WAIT_P50_MS)], wait[H_P50_MS]);
    assert_eq!(stats[peer_index(1, P_WAIT_COUNT)], wait[H_COUNT]);
    assert_eq!(stats[peer_index(1, P_NET_P50_MS)], 7.0);

    // Reset: every stage starts again.
    engine.reset_latency();
    engine.write_histograms(&mut block);
    assert_eq!(block[latency::CAPTURE_AT + H_COUNT], 0.0);
    assert_eq!(block[wait_at + H_COUNT], 0.0);
    assert_eq!(block[net_at + H_COUNT], 0.0);
    // A short block is left alone.
    let mut short = vec![1.5; engine.histograms_len() - 1];
    engine.write_histograms(&mut short);
    assert!(short.iter().all(|&v| v == 1.5));
}

/// A packet whose every frame holds a level that names its sequence number (modulo 40).
fn level_packet(seq: u64, frames: usize) -> Vec<u8> {
    stereo_packet(seq, &vec![level_of(seq); frames], 0)
}

fn level_of(seq: u64) -> f32 {
    0.02 * (1 + seq % 40) as f32
}

/// The recorded wait against the truth: each packet carries its own level, so the output frame
/// at which that level first appears is where the packet started to play.
#[test]
fn jitter_wait_matches_where_the_audio_comes_out() {
    for block in [64usize, 128, 256] {
        for packets in [2u32, 6] {
            let mut engine = engine_with_peer(BufferMode::Fixed { packets });
            let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
            let mut arrivals: Vec<u64> = Vec::new();
            let mut waits: Vec<f64> = Vec::new();
            let mut next_seq = 0u64;
            let mut last_code = u64::MAX;
            let (mut run_code, mut run_start) = (u64::MAX, 0u64);
            for q in 0..1500u64 {
                let now = q * QUANTUM as u64;
                engine.begin_quantum(now);
                while (next_seq + 1) * block as u64 <= now + QUANTUM as u64 {
                    engine
                        .push_packet(1, &level_packet(next_seq, block))
                        .unwrap();
                    arrivals.push(now);
                    next_seq += 1;
                }
                engine.render(&mut l, &mut r);
                for (i, &x) in l.iter().enumerate() {
                    let t = now + i as u64;
                    // Levels are 0.02 apart; the centre pan scales them alike. A level counts
                    // once it holds for 8 frames (an interpolated transition passes others).
                    let code = (x / (0.02 * l_gain()) - 1.0).round();
                    let exact = ((code + 1.0) * 0.02 * l_gain() - x).abs() < 1e-3;
                    let code = if exact && code >= 0.0 {
                        code as u64
                    } else {
                        u64::MAX
                    };
                    if code != run_code {
                        (run_code, run_start) = (code, t);
                    }
                    if code == u64::MAX || code == last_code || t - run_start + 1 < 8 {
                        continue;
                    }
                    last_code = code;
                    // The latest packet with this code that has arrived.
                    let Some(seq) = (0..arrivals.len()).rev().find(|&s| s as u64 % 40 == code)
                    else {
                        continue;
                    };
                    if q > 100 {
                        waits.push((run_start - arrivals[seq]) as f64);
                    }
                }
            }
            let truth = waits.iter().sum::<f64>() / waits.len() as f64;
            let recorded = engine.peer(1).unwrap().jitter_wait().mean().unwrap() / FRAME_US;
            println!("block {block} x{packets}: truth {truth:.1} frames, recorded {recorded:.1}");
            assert!(waits.len() as u64 > 1200 * QUANTUM as u64 / block as u64);
            assert!(
                (truth - recorded).abs() <= 4.0,
                "block {block} x{packets}: truth {truth} frames, recorded {recorded}"
            );
        }
    }
}

/// The centre pan's gain on each side (constant-power pan law).
fn l_gain() -> f32 {
    std::f32::consts::FRAC_1_SQRT_2
}
