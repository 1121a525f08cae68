//! A hub room's hot path allocates nothing: a counting global allocator watches `receive` and
//! `poll` over thousands of blocks in forward mode and in mix mode (a JackTrip listener present,
//! personal strips set, hostile messages among the good ones, a live mode switch, a link to a
//! home hub sending the room's sum and bringing the home's mix, listeners taking Opus layers so
//! that every block is re-encoded in forward mode and their own mixes are Opus in mix mode). Clients, layers and the link are set up before the watched
//! region, as the worker does off the hot path.

use tutti_core::alloc_watch::{calls, watched, Counting};
use tutti_core::packet::{encode, Extension, Header, SampleFormat, SampleRate, CODEC_PCM};
use tutti_server::hub::media::layers::Layer;
use tutti_server::hub::media::{
    tick_offset_us, ClientId, ClientKind, JackTripFormat, MediaRoom, Mode, CASCADE,
};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Block `k` of a 48 kHz tone, 128 frames PCM16 stereo, with a trailer holding `stream`.
fn packet(k: u64, hz: f64, stream: u16) -> Vec<u8> {
    let x: Vec<f32> = (0..128)
        .map(|i| {
            (0.2 * (std::f64::consts::TAU * hz * (k * 128 + i) as f64 / 48_000.0).sin()) as f32
        })
        .collect();
    let header = Header {
        timestamp: k,
        seq: k as u16,
        frames: 128,
        rate: SampleRate::Hz48000,
        format: SampleFormat::Pcm16,
        channels_in: 2,
        channels_out: 0,
    };
    let ext = Extension {
        stream_id: stream,
        codec: CODEC_PCM,
    };
    let mut out = vec![0u8; 1024];
    let n = encode(&header, Some(&ext), &[&x, &x], &mut out).unwrap();
    out.truncate(n);
    out
}

#[test]
fn receive_and_poll_never_allocate() {
    for mode in [Mode::Forward, Mode::Mix] {
        let mut room = MediaRoom::new(mode, 0);
        let ids: Vec<ClientId> = (1..=8)
            .map(|s| room.add_client(s, ClientKind::Browser, 0).unwrap())
            .collect();
        let format = JackTripFormat {
            frames: 64,
            bits: 24,
            channels: 1,
        };
        let jt = room
            .add_client(100, ClientKind::JackTrip(format), 0)
            .unwrap();
        room.set_strip(ids[0], 2, 0.5, -0.3, false, false).unwrap();
        room.set_strip(ids[1], 3, 1.0, 0.0, false, true).unwrap();
        room.set_master(ids[2], 0.7).unwrap();
        // Listeners on each Opus layer: every sender's stream is re-encoded (the layers'
        // encoders are made here, off the hot path).
        room.set_layer(ids[3], Layer::Opus128).unwrap();
        room.set_layer(ids[4], Layer::Opus64).unwrap();
        room.set_cascade(true, 0);
        let home: Vec<Vec<u8>> = (0..64)
            .map(|k| {
                let mut p = packet(k, 1_312.5, 1);
                p.truncate(p.len() - 8);
                p
            })
            .collect();
        let mut packets: Vec<Vec<Vec<u8>>> = (0..8u16)
            .map(|i| {
                (0..64)
                    .map(|k| packet(k, 375.0 * f64::from(i + 1), i + 1))
                    .collect()
            })
            .collect();
        let garbage = vec![0x5Au8; 300];
        let spoof = packet(0, 500.0, 1);
        let (mut messages, mut bytes, mut to_home) = (0u64, 0u64, 0u64);
        let mut send = |to: ClientId, b: &[u8]| {
            messages += 1;
            bytes += b.len() as u64;
            to_home += u64::from(to == CASCADE);
        };
        let before = calls();
        watched(|| {
            for k in 0..800u64 {
                let t = tick_offset_us(k);
                room.poll(t, &mut send);
                for (i, &id) in ids.iter().enumerate() {
                    let at = t + 100 + 20 * i as u64;
                    // Numbered on, so that the layers take every block.
                    let p = &mut packets[i][(k % 64) as usize];
                    p[8..10].copy_from_slice(&(k as u16).to_le_bytes());
                    room.receive(id, p, at);
                    room.poll(at, &mut send);
                }
                room.receive(ids[7], &garbage, t + 400);
                room.receive(ids[6], &spoof, t + 400);
                room.receive(jt, &garbage, t + 400);
                room.receive_cascade(&home[(k % 64) as usize], t + 450);
                room.receive_cascade(&garbage, t + 450);
                if k == 400 {
                    let other = if mode == Mode::Mix {
                        Mode::Forward
                    } else {
                        Mode::Mix
                    };
                    room.set_mode(other, t + 500);
                }
                room.poll(t + 1_500, &mut send);
            }
        });
        assert_eq!(calls() - before, 0, "{mode:?}");
        // The layers did encode while forwarding (blocks 0..=400, or 401..800 after the
        // switch): 399 blocks of 128 are 425 frames of 120 and 212 of 240.
        let layers = room.layer_counters(ids[0]).unwrap();
        assert!(layers.encoded >= 425 + 212, "{mode:?}: {layers:?}");
        // And the two listeners' own mixes were Opus while mixing (the other half).
        for (id, frames) in [(ids[3], 425), (ids[4], 212)] {
            let mix = room.mix_opus_counters(id).unwrap();
            assert!(mix.encoded >= frames, "{mode:?}: {mix:?}");
            assert_eq!(mix.failed, 0);
        }
        assert!(messages > 800 * 9, "{mode:?}: {messages} messages");
        assert!(bytes > 0);
        assert!(
            to_home >= 790,
            "{mode:?}: {to_home} sums sent to the home hub"
        );
        let (home_in, _) = room.cascade_counters().unwrap();
        assert_eq!((home_in.accepted, home_in.malformed), (800, 800));
        let c = room.client_counters(ids[7]).unwrap();
        assert_eq!((c.accepted, c.malformed), (800, 800));
    }
}
