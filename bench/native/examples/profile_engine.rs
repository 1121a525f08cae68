//! Runs the engine with N peers for a while, for a profiler to look at:
//! `cargo run --release -p tutti-bench --example profile_engine -- 64 20000`.
//! Prints ns per peer-quantum for drain (parse, place, decode) and render separately.

use std::time::Instant;

use tutti_core::engine::{Engine, EngineConfig, Peer, QUANTUM};
use tutti_core::packet::{encode, Header, SampleFormat, SampleRate, MAX_PACKET_LEN};
use tutti_core::ring;

fn main() {
    let mut args = std::env::args().skip(1);
    let peers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let quanta: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let config = EngineConfig { max_peers: 256, ..EngineConfig::default() };
    let mut engine = Engine::new(config);
    for slot in 0..peers {
        engine.insert_peer(slot, Peer::new(&config)).expect("slot exists");
        engine.set_strip(slot, 0.5, 0.0, false, false).expect("peer present");
    }
    let mut packets = Vec::new();
    for b in 0..16u64 {
        let l: Vec<f32> = (0..128).map(|i| 0.3 * ((b * 128 + i) as f32 * 0.05).sin()).collect();
        let header = Header {
            timestamp: 0,
            seq: 0,
            frames: 128,
            rate: SampleRate::Hz48000,
            format: SampleFormat::Pcm16,
            channels_in: 2,
            channels_out: 2,
        };
        let mut out = vec![0u8; MAX_PACKET_LEN];
        let n = encode(&header, None, &[&l, &l], &mut out).expect("valid");
        out.truncate(n);
        packets.push(out);
    }
    let mut data = vec![0u8; 1 << 22];
    let (mut write, mut read) = (0u32, 0u32);
    let (mut left, mut right) = ([0f32; QUANTUM], [0f32; QUANTUM]);
    let (mut t_drain, mut t_render) = (0u128, 0u128);
    for q in 0..quanta {
        for slot in 0..peers {
            let p = &mut packets[(q % 16) as usize];
            p[8..10].copy_from_slice(&(q as u16).to_le_bytes());
            write = ring::write_record(&mut data, write, read, slot as u16, 0, p).expect("room");
        }
        engine.begin_quantum(q * QUANTUM as u64);
        let a = Instant::now();
        read = engine.drain(&data, read, write);
        let b = Instant::now();
        engine.render(&mut left, &mut right);
        let c = Instant::now();
        if q >= 1000 {
            t_drain += (b - a).as_nanos();
            t_render += (c - b).as_nanos();
        }
    }
    let per = ((quanta - 1000) * peers as u64) as f64;
    println!(
        "{peers} peers: drain {:.1} ns, render {:.1} ns per peer-quantum",
        t_drain as f64 / per,
        t_render as f64 / per
    );
}
