//! The echo goes to the asker only. Engine B hears peer A (slot 0, a 330 Hz sine) and peer C
//! (slot 2, 770 Hz) and captures its own input (a 550 Hz sine). While B echoes A, the packets to
//! A must carry A's own stream as it played at B, and the packets to C B's input; before the
//! echo, after a stop, after it expires and once A is muted, both carry B's input.
//!
//! The oracle is sample-exact: each frame of each packet a receiver gets must equal the PCM16
//! rounding of what it should carry (B's input frame, or B's pre-fader quantum of A for frames
//! captured while echoing), and each receiver must get every block once, in sequence. That A's
//! stream really is A's is checked against the sine A sent: fitted at 330 Hz in 20 ms windows,
//! it must come back at A's amplitude within the interpolator's tolerance, with nothing of B's
//! 550 Hz in it. Over a grid of block sizes (32-256, the larger ones switching lanes inside a
//! block) and mono/stereo capture.

mod common;

use common::{engine_with_peers, fit_sine, sine_packet};
use std::f64::consts::PI;
use tutti_core::capture::{
    Destination, OUT_ALL, OUT_ALL_BUT, OUT_EXCEPT, OUT_LAYER, OUT_LAYER_MASK, OUT_ROUTE,
    OUT_SLOT_MASK,
};
use tutti_core::engine::{EngineConfig, QUANTUM, TAG_ECHO, TAG_SEND_QUEUE, TAG_SLOT_MASK};
use tutti_core::layer::Layer;
use tutti_core::packet;

const A: usize = 0;
const C: usize = 2;
const A_HZ: f64 = 330.0;
const C_HZ: f64 = 770.0;
const IN_HZ: f64 = 550.0;
const A_AMP: f64 = 0.3;
const IN_AMP: f64 = 0.25;
const QUANTA: u64 = 1700;
/// Largest RMS of what is left after fitting a sine of A's frequency to A's echoed stream (20 ms
/// windows), relative to A's amplitude: two PCM16 roundings (~2e-5 each) and the cubic
/// interpolator's error at 330 Hz (far below; `core/src/resample.rs`).
const FIT_RESIDUAL: f64 = 2e-4;

/// B's input at local frame `n`.
fn input_at(n: u64) -> f32 {
    (IN_AMP * (2.0 * PI * IN_HZ * n as f64 / 48_000.0).sin()) as f32
}

/// What a frame becomes through PCM16 and back: `round(x · 32767) / 32768`, as the codec does.
fn pcm16(x: f32) -> f32 {
    f32::from((x.clamp(-1.0, 1.0) * 32767.0).round() as i16) / 32768.0
}

/// What one receiver got: every packet's sequence number and left channel, and what it should
/// have been.
#[derive(Default)]
struct Receiver {
    seqs: Vec<u16>,
    /// Frames that differ from the oracle.
    wrong: usize,
    /// (frame, sample) of the frames sent from the echo lane.
    echoed: Vec<(u64, f32)>,
    /// Packets of each kind: from our input, from the echo lane.
    input_packets: usize,
    echo_packets: usize,
}

struct Run {
    to_a: Receiver,
    to_c: Receiver,
    echo_refused: u64,
    echo_sent: u64,
}

/// Runs B for QUANTA quanta with the echo schedule of the module docs; `block` frames per packet,
/// `channels` captured.
fn run(block: u16, channels: u8) -> Run {
    let config = EngineConfig {
        max_peers: 4,
        block_frames: block,
        capture_channels: channels,
        ..EngineConfig::default()
    };
    let mut b = engine_with_peers(config, [A, C]);
    // B's fader on A (−20 dB, panned): pre-fader, the echo carries A's stream as sent.
    b.set_strip(A, 0.1, -0.5, false, false).expect("peer A");
    let mut stem = vec![0f32; QUANTA as usize * QUANTUM];
    // Whether the echo lane was on at each quantum's capture.
    let mut echo_on = vec![false; QUANTA as usize];
    let mut sent: Vec<(Destination, Vec<u8>)> = Vec::new();
    let (mut l, mut r) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    for q in 0..QUANTA {
        let now = q * QUANTUM as u64;
        b.begin_quantum(now);
        match q {
            // The lanes switch at odd quanta, inside a 256-frame block.
            301 => b.set_echo(A, 10_000).expect("peer A"),
            701 => b.set_echo(A, 0).expect("peer A"),
            // Half a second: ends on its own at frame 901·128 + 24000 (the quantum from 1089).
            901 => b.set_echo(A, 500).expect("peer A"),
            1301 => b.set_echo(A, 5_000).expect("peer A"),
            1401 => b.set_strip(A, 0.1, -0.5, true, false).expect("peer A"),
            // Refused while A is muted.
            1451 => b.set_echo(A, 5_000).expect("peer A"),
            _ => {}
        }
        b.push_packet(A as u16, &sine_packet(q, QUANTUM, A_HZ, A_AMP))
            .expect("valid packet");
        b.push_packet(C as u16, &sine_packet(q, QUANTUM, C_HZ, 0.2))
            .expect("valid packet");
        b.render(&mut l, &mut r);
        if let Some((sl, _)) = b.stem(A) {
            stem[now as usize..now as usize + QUANTUM].copy_from_slice(sl);
        }
        echo_on[q as usize] = b.echoing() == Some(A);
        let input: Vec<f32> = (0..QUANTUM as u64).map(|i| input_at(now + i)).collect();
        b.capture(&input, &input, &mut |to, bytes| {
            sent.push((to, bytes.to_vec()));
            true
        });
    }
    let (mut to_a, mut to_c) = (Receiver::default(), Receiver::default());
    for (to, bytes) in &sent {
        let pkt = packet::parse(bytes).expect("the engine sends valid packets");
        let frames = pkt.frames();
        let (mut pl, mut pr) = (vec![0f32; frames], vec![0f32; frames]);
        pkt.decode_stereo(&mut pl, &mut pr);
        let seq = pkt.header.seq;
        let echo_lane = *to == Destination::Only(A);
        for (slot, rx) in [(A, &mut to_a), (C, &mut to_c)] {
            if !to.includes(slot, Layer::AsSent) {
                continue;
            }
            rx.seqs.push(seq);
            if echo_lane {
                rx.echo_packets += 1;
            } else {
                rx.input_packets += 1;
            }
            for (i, &x) in pl.iter().enumerate() {
                let n = u64::from(seq) * u64::from(block) + i as u64;
                let lane_on = echo_on[(n / QUANTUM as u64) as usize];
                let want = if echo_lane && lane_on {
                    rx.echoed.push((n, x));
                    pcm16(stem[n as usize])
                } else {
                    pcm16(input_at(n))
                };
                if x != want || (channels == 2 && pr[i] != want) {
                    rx.wrong += 1;
                }
            }
        }
    }
    Run {
        to_a,
        to_c,
        echo_refused: b.counters().echo_refused,
        echo_sent: b.counters().echo_sent,
    }
}

/// Amplitude and relative residual RMS of the best sine of `freq` Hz through `x` ((frame,
/// sample) pairs), least squares.
fn fit(x: &[(u64, f32)], freq: f64) -> (f64, f64) {
    let w = 2.0 * PI * freq / 48_000.0;
    // `a` multiplies the sine, `b` the cosine.
    let (b, a) = fit_sine(x.iter().map(|&(n, v)| (n as f64, f64::from(v))), w);
    let amp = a.hypot(b);
    let mut res = 0.0;
    for &(n, v) in x {
        let e = f64::from(v) - (a * (w * n as f64).sin() + b * (w * n as f64).cos());
        res += e * e;
    }
    (amp, (res / x.len() as f64).sqrt() / amp.max(1e-12))
}

#[test]
fn the_echo_goes_to_the_asker_only_and_everyone_else_keeps_our_input() {
    for (block, channels) in [(32, 2), (64, 2), (128, 2), (256, 2), (128, 1), (256, 1)] {
        let run = run(block, channels);
        let blocks = (QUANTA * QUANTUM as u64 / u64::from(block)) as usize;
        for (name, rx) in [("A", &run.to_a), ("C", &run.to_c)] {
            assert_eq!(
                rx.wrong, 0,
                "block {block}×{channels}: frames to {name} off the oracle"
            );
            // Every block once, in order: one stream whichever lane fed it.
            let expected: Vec<u16> = (0..blocks).map(|s| s as u16).collect();
            assert_eq!(rx.seqs, expected, "block {block}: sequence to {name}");
        }
        assert_eq!(run.to_c.echo_packets, 0, "C never gets A's echo");
        assert!(run.to_a.echo_packets > 0);
        assert_eq!(run.echo_sent as usize, run.to_a.echo_packets);
        assert_eq!(run.echo_refused, 1, "an echo of a muted peer is refused");

        // A's echoed stream is A's sine: in 20 ms windows, at A's amplitude, with nothing left
        // over but rounding; and no trace of B's input.
        let frames: Vec<(u64, f32)> = run.to_a.echoed.clone();
        let mut worst = (0f64, 0f64, 0f64);
        let mut windows = 0;
        for w in frames.chunks_exact(960) {
            // Contiguous windows only (the echo has three stretches).
            if w[959].0 - w[0].0 != 959 {
                continue;
            }
            windows += 1;
            let (amp, residual) = fit(w, A_HZ);
            let level_db = 20.0 * (amp / A_AMP).log10();
            worst.0 = worst.0.max(level_db.abs());
            worst.1 = worst.1.max(residual);
            assert!(
                level_db.abs() < 0.01,
                "block {block}: A back at {level_db:.4} dB re sent"
            );
            assert!(
                residual < FIT_RESIDUAL,
                "block {block}: residual {residual:.2e}"
            );
        }
        // 100 ms hold whole periods of both 330 and 550 Hz: there the two sines are orthogonal
        // and a fit at 550 Hz reads only what of B's input is there.
        for w in frames.chunks_exact(4800) {
            if w[4799].0 - w[0].0 == 4799 {
                let (leak, _) = fit(w, IN_HZ);
                worst.2 = worst.2.max(leak);
                assert!(
                    leak < 1e-4,
                    "block {block}: B's input in A's echo at {leak:.2e}"
                );
            }
        }
        assert!(windows >= 20, "block {block}: {windows} windows of echo");
        println!(
            "block {block} × {channels} ch: to A {} input + {} echo packets, to C {} input packets; \
             {} echoed frames exact; A's sine back within {:.4} dB, residual ≤ {:.2e} of its amplitude, \
             B's 550 Hz in it ≤ {:.2e} ({windows} windows of 20 ms)",
            run.to_a.input_packets,
            run.to_a.echo_packets,
            run.to_c.input_packets,
            frames.len(),
            worst.0,
            worst.1,
            worst.2,
        );
    }
}

#[test]
fn outbound_tags_name_their_destinations() {
    assert_eq!(Destination::All.tag(), 0xFFFF);
    assert_eq!(Destination::AllBut(3).tag(), 0x8003);
    assert_eq!(Destination::Only(3).tag(), 3);
    assert_eq!(Destination::AllBut(255).tag(), 0x80FF);
    let opus = |except| Destination::Layer {
        layer: Layer::Opus128,
        except,
    };
    assert_eq!(opus(None).tag(), 0x4100);
    assert_eq!(opus(Some(3)).tag(), 0x4903);
    assert_eq!(Destination::Route(9).tag(), 0x2009);
    let mut named = 0;
    for tag in 0..=u16::MAX {
        match Destination::from_tag(tag) {
            Some(d) => {
                named += 1;
                assert_eq!(d.tag(), tag, "round trip of {tag:#06x}");
            }
            None => assert!(
                tag != OUT_ALL
                    && tag & !OUT_SLOT_MASK != OUT_ALL_BUT
                    && tag & !OUT_SLOT_MASK != OUT_ROUTE
                    && tag > OUT_SLOT_MASK,
                "{tag:#06x} names a destination"
            ),
        }
    }
    // All, 256 each of all-but, only and route, and per layer: none excepted or one of 256.
    assert_eq!(named, 1 + 3 * 256 + 3 * 257);
    let plain = Layer::AsSent;
    assert!(Destination::All.includes(7, plain));
    assert!(
        !Destination::AllBut(7).includes(7, plain) && Destination::AllBut(7).includes(6, plain)
    );
    assert!(Destination::Only(7).includes(7, plain) && !Destination::Only(7).includes(6, plain));
    assert!(opus(None).includes(7, Layer::Opus128) && !opus(None).includes(7, plain));
    assert!(
        !opus(Some(7)).includes(7, Layer::Opus128) && opus(Some(7)).includes(6, Layer::Opus128)
    );
    assert!(!Destination::Route(7).includes(7, plain));
}

/// The inbound tags (`TAG_*` in core/src/engine.rs) and the outbound ones
/// (core/src/capture.rs) are written once in Rust; the net side's copies in
/// app/src/net/pump.ts must be the same numbers.
#[test]
fn the_net_side_uses_the_same_tags() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../app/src/net/pump.ts");
    let ts = std::fs::read_to_string(&path).expect("pump.ts");
    let value = |name: &str| -> i64 {
        let line = ts
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("export const {name} = ")))
            .unwrap_or_else(|| panic!("pump.ts exports {name}"));
        let text = line.trim_end_matches(';').trim().replace('_', "");
        match text.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => text.parse(),
        }
        .unwrap_or_else(|_| panic!("{name} = {text} is a number"))
    };
    for (name, rust) in [
        ("TAG_SEND_QUEUE", TAG_SEND_QUEUE),
        ("TAG_ECHO", TAG_ECHO),
        ("TAG_SLOT_MASK", TAG_SLOT_MASK),
        ("OUT_ALL", OUT_ALL),
        ("OUT_ALL_BUT", OUT_ALL_BUT),
        ("OUT_SLOT_MASK", OUT_SLOT_MASK),
        ("OUT_LAYER", OUT_LAYER),
        ("OUT_EXCEPT", OUT_EXCEPT),
        ("OUT_LAYER_MASK", OUT_LAYER_MASK),
        ("OUT_ROUTE", OUT_ROUTE),
    ] {
        assert_eq!(value(name), i64::from(rust), "{name}");
    }
    // The inbound ring tags of the two kinds of note stay apart from slots and each other.
    assert_eq!(TAG_ECHO & TAG_SEND_QUEUE, 0);
    assert_eq!((TAG_ECHO | TAG_SEND_QUEUE) & TAG_SLOT_MASK, 0);
}
