//! Round trip between two engines over a simulated network: A probes with clicks, B echoes A's
//! stream. The clicks' round trip, timed on A's audio clock, must equal the sum of the transit
//! stages each side measured per packet (A→B at B, B→A at A), and the delivery, network and
//! send-queue stages must read what the simulated network did.

mod common;

use std::collections::VecDeque;
use tutti_core::engine::{Engine, EngineConfig, Peer, QUANTUM, TAG_ECHO, TAG_SEND_QUEUE};
use tutti_core::jitter::BufferMode;
use tutti_core::layer::Layer;
use tutti_core::probe::ProbeState;
use tutti_core::ring;
use tutti_core::stats::*;

const RATE: f64 = 48_000.0;
const FRAME_US: f64 = 1_000_000.0 / RATE;
/// Wall clock at frame 0, µs since 1970 (beyond 2^32, so that the low-32-bit arithmetic wraps).
const WALL0_US: f64 = 1.763e15;

/// A packet in flight: its bytes and its arrival at the receiving net side, µs.
struct InFlight {
    arrival_us: f64,
    bytes: Vec<u8>,
}

/// One direction of the simulated network: fixed one-way delay plus a deterministic jitter.
struct Link {
    one_way_us: f64,
    jitter_us: f64,
    queue: VecDeque<InFlight>,
    n: u64,
}

impl Link {
    fn new(one_way_us: f64, jitter_us: f64) -> Link {
        Link {
            one_way_us,
            jitter_us,
            queue: VecDeque::new(),
            n: 0,
        }
    }

    /// Sends a packet at `wall_us`: the net side stamps the send time into the header, as the
    /// app's pump does.
    fn send(&mut self, bytes: &[u8], wall_us: f64) {
        let mut bytes = bytes.to_vec();
        bytes[..8].copy_from_slice(&(wall_us as u64).to_le_bytes());
        // A pseudo-random jitter in 0..jitter_us, the same on every run.
        self.n += 1;
        let j = (self.n.wrapping_mul(2_654_435_761) % 1000) as f64 / 1000.0 * self.jitter_us;
        self.queue.push_back(InFlight {
            arrival_us: wall_us + self.one_way_us + j,
            bytes,
        });
    }

    /// Everything that has arrived by `wall_us`, into `engine` as peer `slot` (through the
    /// engine's inbound ring, as the worklet does).
    fn deliver(&mut self, engine: &mut Engine, slot: u16, wall_us: f64, ring_buf: &mut [u8]) {
        let (mut read, mut write) = (0u32, 0u32);
        let mut rest = VecDeque::new();
        while let Some(p) = self.queue.pop_front() {
            if p.arrival_us <= wall_us {
                let time = (p.arrival_us as u64 % (1u64 << 32)) as u32;
                write = ring::write_record(ring_buf, write, read, slot, time, &p.bytes).unwrap();
            } else {
                rest.push_back(p);
            }
        }
        self.queue = rest;
        read = engine.drain(ring_buf, read, write);
        assert_eq!(read, write);
    }
}

fn engine(slot: usize) -> Engine {
    let config = EngineConfig {
        max_peers: 4,
        buffer: BufferMode::Fixed { packets: 3 },
        ..EngineConfig::default()
    };
    let mut e = Engine::new(config);
    e.insert_peer(slot, Peer::new(&config)).unwrap();
    e.set_clock_offset(slot, Some(0)).unwrap();
    e
}

/// Runs A (peer B in slot 1) and B (peer A in slot 2) for `quanta` quanta; A's input is a tone,
/// B's is a different tone. Returns both engines.
/// `burst`: quanta per audio callback (1: one callback per quantum; 4: four quanta run back to
/// back every 10.67 ms, as headless Chromium's fake devices do), on both sides.
fn run(ab: &mut Link, ba: &mut Link, quanta: u64, clicks: usize, burst: u64) -> (Engine, Engine) {
    let (mut a, mut b) = (engine(1), engine(2));
    // A's devices: 10 ms out, 5 ms in; B's unknown.
    a.set_device_latency(10_000.0, 5_000.0);
    b.set_device_latency(f64::NAN, -1.0);
    let mut ring_buf = vec![0u8; 1 << 16];
    for q in 0..quanta {
        let now = q * QUANTUM as u64;
        let callback = QUANTUM as u64 * burst;
        let wall = WALL0_US + (now - now % callback) as f64 * FRAME_US;
        let tone_a: Vec<f32> = (0..QUANTUM)
            .map(|i| 0.3 * ((now as f64 + i as f64) * 0.05).sin() as f32)
            .collect();
        let tone_b: Vec<f32> = (0..QUANTUM)
            .map(|i| 0.3 * ((now as f64 + i as f64) * 0.07).sin() as f32)
            .collect();
        if q == 200 {
            // Buffers settled: B is asked to echo (as the app asks over its control channel)
            // and A starts clicking.
            let mut req = vec![0u8; 16_384];
            let w = ring::write_record(&mut req, 0, 0, TAG_ECHO | 2, 8_000, &[]).unwrap();
            b.begin_quantum_at(now, wall);
            assert_eq!(b.drain(&req, 0, w), w);
            assert_eq!(b.echoing(), Some(2));
            a.reset_latency();
            b.reset_latency();
            a.start_probe(1, clicks).unwrap();
        }
        step(&mut a, &tone_a, ba, 1, ab, now, wall, &mut ring_buf);
        step(&mut b, &tone_b, ab, 2, ba, now, wall, &mut ring_buf);
    }
    (a, b)
}

/// One quantum of one engine: what arrived on `inbound` goes in as peer `slot`, the output is
/// rendered, and the captured packets leave on `outbound`.
#[allow(clippy::too_many_arguments)]
fn step(
    e: &mut Engine,
    input: &[f32],
    inbound: &mut Link,
    slot: u16,
    outbound: &mut Link,
    now: u64,
    wall: f64,
    ring_buf: &mut [u8],
) {
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    e.begin_quantum_at(now, wall);
    inbound.deliver(e, slot, wall, ring_buf);
    e.render(&mut l, &mut r);
    let mut sent = Vec::new();
    // The link leads to the one peer, in `slot`: what is addressed to it.
    e.capture(input, input, &mut |to, p| {
        if to.includes(usize::from(slot), Layer::AsSent) {
            sent.push(p.to_vec());
        }
        true
    });
    for p in sent {
        outbound.send(&p, wall);
    }
}

fn mean_ms(h: &tutti_core::latency::Histogram) -> f64 {
    h.mean().unwrap() / 1000.0
}

#[test]
fn click_round_trip_is_the_sum_of_both_transits() {
    for (one_way_us, jitter_us) in [(5_000.0, 0.0), (3_000.0, 2_000.0), (12_345.0, 700.0)] {
        let (mut ab, mut ba) = (
            Link::new(one_way_us, jitter_us),
            Link::new(one_way_us, jitter_us),
        );
        let (a, b) = run(&mut ab, &mut ba, 1200, 10, 1);
        let p = a.probe();
        assert_eq!(p.state(), ProbeState::Done, "{one_way_us}: all clicks back");
        assert_eq!(p.heard(), 10);
        let rtts: Vec<f64> = p.results().iter().map(|f| f * 1000.0 / RATE).collect();
        let rtt_mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
        let a_b = b.peer(2).unwrap();
        let b_a = a.peer(1).unwrap();
        let sum = mean_ms(a_b.transit()) + mean_ms(b_a.transit());
        println!(
            "one-way {one_way_us} µs, jitter {jitter_us} µs: clicks {rtts:.3?} ms, mean {rtt_mean:.3} ms; \
             transit A→B {:.3} + B→A {:.3} = {sum:.3} ms; network {:.3}/{:.3}, delivery {:.3}/{:.3}, wait {:.3}/{:.3} ms",
            mean_ms(a_b.transit()),
            mean_ms(b_a.transit()),
            mean_ms(a_b.network_one_way()),
            mean_ms(b_a.network_one_way()),
            mean_ms(a_b.delivery()),
            mean_ms(b_a.delivery()),
            mean_ms(a_b.jitter_wait()),
            mean_ms(b_a.jitter_wait()),
        );
        // Each click's round trip is one packet's transit each way; with jitter the clicks'
        // packets are ten samples of distributions whose means are summed: allow the spread of
        // the jitter plus one frame.
        let tolerance = 2.0 * jitter_us / 1000.0 + FRAME_US / 1000.0;
        assert!(
            (rtt_mean - sum).abs() <= tolerance,
            "{one_way_us}: round trip {rtt_mean} ms vs sum {sum} ms (±{tolerance})"
        );
        // The stages read what the network did.
        let mean_jitter = jitter_us / 2.0 / 1000.0;
        for h in [a_b.network_one_way(), b_a.network_one_way()] {
            assert!((mean_ms(h) - (one_way_us / 1000.0 + mean_jitter)).abs() < 0.05);
        }
        // Delivery: a packet waits for the next quantum, less than 2.667 ms; without jitter
        // every packet waits the same: from its arrival to the next quantum boundary.
        let quantum_us = QUANTUM as f64 * FRAME_US;
        for h in [a_b.delivery(), b_a.delivery()] {
            assert!(h.max().unwrap() <= quantum_us + 1.0);
            if jitter_us == 0.0 {
                let expected = (one_way_us / quantum_us).ceil() * quantum_us - one_way_us;
                assert!((h.mean().unwrap() - expected).abs() < 1.0, "{:?}", h.mean());
            }
        }
        // Added one-way = transit + the sender's block (2.667 ms) + our send queue (none
        // here); the devices' latency is not in it.
        let block_ms = QUANTUM as f64 * FRAME_US / 1000.0;
        for peer in [a_b, b_a] {
            let extra = mean_ms(peer.one_way()) - mean_ms(peer.transit());
            assert!((extra - block_ms).abs() < 0.001, "{extra}");
            assert_eq!(peer.one_way().count(), peer.transit().count());
        }
        let mut hb = vec![0.0; a.histograms_len()];
        a.write_histograms(&mut hb);
        assert_eq!(hb[tutti_core::latency::HB_OUTPUT_US], 10_000.0);
        assert_eq!(hb[tutti_core::latency::HB_INPUT_US], 5_000.0);
        let mut hb = vec![0.0; b.histograms_len()];
        b.write_histograms(&mut hb);
        assert!(hb[tutti_core::latency::HB_OUTPUT_US].is_nan());
        assert!(hb[tutti_core::latency::HB_INPUT_US].is_nan());
        // Transit = network + delivery + wait, packet by packet, so the means add up.
        for peer in [a_b, b_a] {
            let parts = mean_ms(peer.network_one_way())
                + mean_ms(peer.delivery())
                + mean_ms(peer.jitter_wait());
            assert!((mean_ms(peer.transit()) - parts).abs() < 0.2, "{parts}");
        }
    }
}

/// With callbacks of four quanta, the prober clicks only at a callback's start (where a frame's
/// number and its send time agree), but the echoing side sends a click back in whichever quantum
/// of its callback it played: up to three quanta before that quantum's audio time. The round
/// trip is then the sum of the transits minus 0..3 quanta.
#[test]
fn with_bursty_callbacks_the_round_trip_is_the_sum_less_the_echo_side_burst_offset() {
    let (mut ab, mut ba) = (Link::new(5_000.0, 1_500.0), Link::new(5_000.0, 1_500.0));
    let (a, b) = run(&mut ab, &mut ba, 2000, 10, 4);
    let p = a.probe();
    assert_eq!(p.heard(), 10);
    let rtt_mean = p.results().iter().sum::<f64>() / 10.0 * 1000.0 / RATE;
    let sum = mean_ms(b.peer(2).unwrap().transit()) + mean_ms(a.peer(1).unwrap().transit());
    let quantum_ms = QUANTUM as f64 * FRAME_US / 1000.0;
    println!(
        "bursts of 4: clicks {:?} frames, mean {rtt_mean:.3} ms; transit sum {sum:.3} ms",
        p.results()
    );
    assert!(
        rtt_mean <= sum + 1.6 && rtt_mean >= sum - 3.0 * quantum_ms - 1.6,
        "{rtt_mean} vs {sum}"
    );
}

#[test]
fn echo_sends_the_peers_stream_and_ends_on_time() {
    let (mut ab, mut ba) = (Link::new(4_000.0, 0.0), Link::new(4_000.0, 0.0));
    let (a, b) = run(&mut ab, &mut ba, 400, 1, 1);
    assert_eq!(a.probe().heard(), 1);
    // 8 s of echo asked at quantum 200: still on at quantum 400.
    assert_eq!(b.echoing(), Some(2));
    let mut stats = vec![0.0; b.stats_len()];
    b.write_stats(&mut stats);
    assert_eq!(stats[G_ECHO_SLOT], 2.0);
    let mut stats = vec![0.0; a.stats_len()];
    a.write_stats(&mut stats);
    assert_eq!(stats[G_PROBE_STATE], 2.0);
    assert_eq!(stats[G_PROBE_HEARD], 1.0);
    assert!(stats[G_PROBE_RESULTS_AT] > 8.0 && stats[G_PROBE_RESULTS_AT] < 40.0);
    assert!(stats[G_PROBE_RESULTS_AT + 1].is_nan());

    // An echo ends when its time is up, and a stop request ends it at once.
    let mut e = engine(2);
    e.begin_quantum(0);
    e.set_echo(2, 10).unwrap();
    assert_eq!(e.echoing(), Some(2));
    e.begin_quantum(479);
    assert_eq!(e.echoing(), Some(2));
    e.begin_quantum(480);
    assert_eq!(e.echoing(), None);
    e.set_echo(2, 50_000).unwrap();
    e.set_echo(2, 0).unwrap();
    assert_eq!(e.echoing(), None);
    assert!(e.set_echo(3, 10).is_err(), "no peer in slot 3");
}

#[test]
fn send_queue_records_and_stray_tags_are_counted_not_played() {
    let mut e = engine(2);
    let mut buf = vec![0u8; 16_384];
    let mut w = 0;
    for us in [0u32, 250, 1_000, 40_000] {
        w = ring::write_record(&mut buf, w, 0, TAG_SEND_QUEUE | 2, us, &[]).unwrap();
    }
    // Tags naming an empty slot, or a slot past the engine's: counted as unknown peers.
    w = ring::write_record(&mut buf, w, 0, TAG_SEND_QUEUE | 3, 5, &[]).unwrap();
    w = ring::write_record(&mut buf, w, 0, TAG_ECHO | 200, 5, &[]).unwrap();
    e.begin_quantum(0);
    assert_eq!(e.drain(&buf, 0, w), w);
    let q = e.peer(2).unwrap().send_queue();
    assert_eq!(q.count(), 4);
    assert_eq!(q.max(), Some(40_000.0));
    assert_eq!(e.counters().unknown_peer, 2);
    assert_eq!(e.echoing(), None);
    assert_eq!(
        e.peer(2).unwrap().jitter_wait().count(),
        0,
        "nothing was played"
    );
}

/// One engine hearing its own packets over a near-instant link (the sound check's shape), with
/// host callbacks of `period` frames each: every callback renders, back to back, the quanta that
/// start in it, as headless Chromium's 480-frame fake devices do. Returns the clicks' mean round
/// trip and the transit's mean, ms.
fn self_loop(period: u64) -> (f64, f64) {
    let mut e = engine(1);
    let mut link = Link::new(50.0, 0.0);
    let mut ring_buf = vec![0u8; 1 << 16];
    let quiet = [0f32; QUANTUM];
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    for q in 0..3000u64 {
        let now = q * QUANTUM as u64;
        let wall = WALL0_US + (now / period * period) as f64 * FRAME_US;
        if q == 1000 {
            e.reset_latency();
            e.start_probe(1, 10).unwrap();
        }
        e.begin_quantum_at(now, wall);
        link.deliver(&mut e, 1, wall, &mut ring_buf);
        e.render(&mut l, &mut r);
        let mut sent = Vec::new();
        e.capture(&quiet, &quiet, &mut |to, p| {
            if to.includes(1, Layer::AsSent) {
                sent.push(p.to_vec());
            }
            true
        });
        for p in sent {
            link.send(&p, wall);
        }
    }
    let p = e.probe();
    assert_eq!(p.heard(), 10, "period {period}");
    let rtt = p.results().iter().sum::<f64>() / 10.0 * 1000.0 / RATE;
    (rtt, mean_ms(e.peer(1).unwrap().transit()))
}

/// With callbacks of n quanta, a callback's packets all leave at its start, so the wall-clock
/// transit of the k-th one counts k quanta that its audio, on the audio clock, does not: the
/// transit's mean exceeds a click's round trip (a click leaves from a callback's first quantum)
/// by (n − 1) / 2 quanta. Known answers for n = 1, 2, 3, 4, and 3.75 (480-frame callbacks).
#[test]
fn transit_counts_the_wait_inside_a_callback_and_clicks_do_not() {
    let quantum_ms = QUANTUM as f64 * FRAME_US / 1000.0;
    for period in [128u64, 256, 384, 512, 480] {
        let (rtt, transit) = self_loop(period);
        let n = period as f64 / QUANTUM as f64;
        let expected = (n - 1.0) / 2.0 * quantum_ms;
        println!("callbacks of {period} frames: clicks {rtt:.3} ms, transit mean {transit:.3} ms, difference {:.3} (expected {expected:.3})", transit - rtt);
        // From four quanta per callback the drift loop is still steering the buffer level while
        // the clicks run (they move by 0.4 ms over the ten), and 480-frame callbacks alternate
        // three and four quanta: within a quarter of a quantum there.
        let tolerance = if period <= 384 { 0.1 } else { 0.7 };
        assert!(
            (transit - rtt - expected).abs() <= tolerance,
            "period {period}: {} vs {expected}",
            transit - rtt
        );
    }
}
