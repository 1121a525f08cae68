//! Shared pieces of the native benchmarks of `tutti-core`: a synthetic network that writes one
//! PCM16 stereo packet per peer per quantum into an inbound ring, as the browser's net side does.
//! The criterion benches live in `benches/`, a profiling run in `examples/profile_engine.rs`.

pub mod jitter;

use tutti_core::engine::{Engine, EngineConfig, Peer};
use tutti_core::packet::{encode, Header, SampleFormat, SampleRate, MAX_PACKET_LEN};
use tutti_core::ring;

/// Sixteen consecutive 128-frame blocks of a sine, as stereo PCM16 packets.
pub fn sine_packets() -> Vec<Vec<u8>> {
    (0..16u64)
        .map(|b| {
            let l: Vec<f32> = (0..128)
                .map(|i| 0.3 * ((b * 128 + i) as f32 * 0.05).sin())
                .collect();
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
            let n = encode(&header, None, &[&l, &l], &mut out).expect("valid packet");
            out.truncate(n);
            out
        })
        .collect()
}

/// An engine with `peers` peers at gain 0.5, and the ring that feeds it.
pub struct Session {
    pub engine: Engine,
    pub peers: usize,
    packets: Vec<Vec<u8>>,
    data: Vec<u8>,
    write: u32,
    read: u32,
}

impl Session {
    pub fn new(peers: usize) -> Session {
        let config = EngineConfig {
            max_peers: 256,
            ..EngineConfig::default()
        };
        let mut engine = Engine::new(config);
        for slot in 0..peers {
            engine
                .insert_peer(slot, Peer::new(&config))
                .expect("slot exists");
            engine
                .set_strip(slot, 0.5, 0.0, false, false)
                .expect("peer present");
        }
        Session {
            engine,
            peers,
            packets: sine_packets(),
            data: vec![0; 1 << 22],
            write: 0,
            read: 0,
        }
    }

    /// Writes quantum `q`'s packet of every peer into the ring (the net side's work).
    pub fn feed(&mut self, q: u64) {
        for slot in 0..self.peers {
            let p = &mut self.packets[(q % 16) as usize];
            p[8..10].copy_from_slice(&(q as u16).to_le_bytes());
            self.write =
                ring::write_record(&mut self.data, self.write, self.read, slot as u16, 0, p)
                    .expect("the ring is drained every quantum");
        }
    }

    /// The engine's part of quantum `q`: drain the ring (parse, place, decode).
    pub fn drain(&mut self, q: u64) {
        self.engine.begin_quantum(q * 128);
        self.read = self.engine.drain(&self.data, self.read, self.write);
    }
}
