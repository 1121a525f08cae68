//! A mesh sender serves each peer the layer it takes of its stream, encoding once per layer:
//! a real engine captures a 440 Hz sine and sends it to three listeners' engines, two taking
//! Opus 128 (decoded by libopus) and one the packets as sent, routed by the destinations and
//! route records the engine writes, as the net side routes them. Then the takers change (one to
//! Opus 64, one back to as sent) mid-stream. Every listener must hear the sine at its level
//! after each change, and the sender must have encoded each Opus frame once, not once per
//! taker. A second test watches the sender's capture with a counting allocator: serving layers
//! allocates nothing per block.

use tutti_core::alloc_watch::{calls, watched, Counting};
use tutti_core::capture::Destination;
use tutti_core::engine::{Engine, EngineConfig, Peer, QUANTUM};
use tutti_core::layer::Layer;
use tutti_core::packet;
use tutti_server::hub::opus_stream::{StreamDecoder, StreamEncoder};

/// The core tests' support (the sine fit), compiled in from the same file.
#[path = "../../core/src/testing.rs"]
#[allow(dead_code)]
mod testing;

#[global_allocator]
static GLOBAL: Counting = Counting;

const RATE: f64 = 48_000.0;
const HZ: f64 = 440.0;
const AMP: f64 = 0.1;
/// Listeners' slots in the sender's engine.
const LISTENERS: [usize; 3] = [1, 2, 3];

fn sender() -> Engine {
    let config = EngineConfig::default();
    let mut s = Engine::new(config);
    for slot in LISTENERS {
        s.insert_peer(slot, Peer::new(&config)).unwrap();
    }
    for layer in [Layer::Opus128, Layer::Opus64] {
        let (bitrate, _) = layer.opus().unwrap();
        s.set_encoder(layer, Box::new(StreamEncoder::new(2, bitrate).unwrap()))
            .unwrap();
    }
    s
}

fn input(q: u64) -> [f32; QUANTUM] {
    let mut x = [0.0f32; QUANTUM];
    for (i, v) in x.iter_mut().enumerate() {
        let t = (q * QUANTUM as u64 + i as u64) as f64 / RATE;
        *v = (AMP * (std::f64::consts::TAU * HZ * t).sin()) as f32;
    }
    x
}

/// Level of `HZ` in `x` against the input's, dB, and the residual (what is not the sine)
/// against the sine, dB: the worst of each over 20 ms windows, each fitted on its own. (Over a
/// whole second the fit would count as residual the few ppm of pitch by which the listener's
/// drift correction pulls a restarted stream to its target depth.)
fn level(x: &[f32]) -> (f64, f64) {
    x.chunks_exact(960)
        .map(fit)
        .fold((0.0, f64::MIN), |(db, resid), (d, r)| {
            (if d.abs() > db.abs() { d } else { db }, resid.max(r))
        })
}

/// [`level`] of one window: the core tests' least-squares sine fit.
fn fit(x: &[f32]) -> (f64, f64) {
    let w = std::f64::consts::TAU * HZ / RATE;
    let points = x.iter().enumerate().map(|(n, &v)| (n as f64, f64::from(v)));
    let (a, b) = testing::fit_sine(points, w);
    let amp = a.hypot(b);
    let resid: f64 = x
        .iter()
        .enumerate()
        .map(|(n, &v)| {
            let (s, c) = (w * n as f64).sin_cos();
            (f64::from(v) - a * c - b * s).powi(2)
        })
        .sum::<f64>()
        / x.len() as f64;
    (
        20.0 * (amp / AMP).log10(),
        10.0 * (resid / (amp * amp / 2.0)).log10(),
    )
}

#[test]
fn each_listener_hears_the_layer_it_takes_and_each_opus_frame_is_encoded_once() {
    let config = EngineConfig::default();
    let mut s = sender();
    let mut listeners: Vec<Engine> = LISTENERS
        .iter()
        .map(|_| {
            let mut e = Engine::new(config);
            let mut p = Peer::new(&config);
            p.set_decoder(Box::new(StreamDecoder::new().unwrap()));
            e.insert_peer(0, p).unwrap();
            e
        })
        .collect();
    // The net side's view of who takes which layer: route records only.
    let mut routes = [Layer::AsSent; 256];
    // Phases of 1.5 s: who takes what.
    let phases = [
        [Layer::Opus128, Layer::Opus128, Layer::AsSent],
        [Layer::Opus64, Layer::AsSent, Layer::AsSent],
        [Layer::AsSent, Layer::AsSent, Layer::AsSent],
    ];
    let per_phase = (1.5 * RATE) as u64 / QUANTUM as u64;
    let mut heard = vec![vec![Vec::<f32>::new(); LISTENERS.len()]; phases.len()];
    let mut got = vec![[0u64; 3]; phases.len()];
    let mut encoded = Vec::new();
    let mut q = 0u64;
    for (p, takes) in phases.iter().enumerate() {
        for (&slot, &layer) in LISTENERS.iter().zip(takes) {
            s.set_send_layer(slot, layer).unwrap();
        }
        let encoded_before = s.counters().opus_encoded;
        for _ in 0..per_phase {
            let now = q * QUANTUM as u64;
            s.begin_quantum(now);
            let x = input(q);
            let mut out: Vec<(Destination, Vec<u8>)> = Vec::new();
            s.capture(&x, &x, &mut |to, bytes| {
                out.push((to, bytes.to_vec()));
                true
            });
            for (to, bytes) in &out {
                if let Destination::Route(slot) = *to {
                    routes[slot] = Layer::from_code(u32::from(bytes[0])).unwrap();
                    continue;
                }
                let pkt = packet::parse(bytes).expect("the engine sends valid packets");
                for (i, &slot) in LISTENERS.iter().enumerate() {
                    if to.includes(slot, routes[slot]) {
                        assert_eq!(
                            pkt.is_opus(),
                            routes[slot] != Layer::AsSent,
                            "slot {slot} takes {:?}",
                            routes[slot]
                        );
                        got[p][i] += 1;
                        listeners[i].push_packet(0, bytes).unwrap();
                    }
                }
            }
            for (i, e) in listeners.iter_mut().enumerate() {
                e.begin_quantum(now);
                let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
                e.render(&mut l, &mut r);
                heard[p][i].extend_from_slice(&l);
            }
            q += 1;
        }
        encoded.push(s.counters().opus_encoded - encoded_before);

        for (&slot, &layer) in LISTENERS.iter().zip(takes) {
            assert_eq!(
                routes[slot], layer,
                "the net side was told slot {slot}'s layer"
            );
        }
    }
    let seconds = per_phase as f64 * QUANTUM as f64 / RATE;
    let mut levels = Vec::new();
    for (p, takes) in phases.iter().enumerate() {
        // Frames each Opus layer in use makes in the phase (a frame under way at a change is
        // in one phase or the next).
        let want: f64 = [Layer::Opus128, Layer::Opus64]
            .into_iter()
            .filter(|l| takes.contains(l))
            .map(|l| seconds * RATE / l.opus().unwrap().1 as f64)
            .sum();
        println!(
            "phase {p} {takes:?}: {} Opus frames encoded (one stream per layer taken: {want:.0}); \
             packets to the listeners {:?}",
            encoded[p], got[p]
        );
        assert!(
            (encoded[p] as f64 - want).abs() <= 2.0,
            "phase {p}: {} frames encoded, {want:.0} expected",
            encoded[p]
        );
        for (i, layer) in takes.iter().enumerate() {
            // The last second of the phase: the change and the listener's restart are over.
            // Every 20 ms of it must be the sine at its level, less the centre pan's 3.01 dB.
            let x = &heard[p][i][heard[p][i].len() - RATE as usize..];
            let (db, resid) = level(x);
            println!(
                "  listener {} on {}: 440 Hz at {db:+.2} dB (the centre pan: -3.01), the rest {resid:.1} \
                 dB under it (worst of 50 windows)",
                LISTENERS[i],
                layer.name()
            );
            levels.push((p, i, *layer, db, resid));
        }
    }
    for (p, i, layer, db, resid) in levels {
        assert!(
            (db + 3.01).abs() < 0.5,
            "phase {p} listener {i} on {layer:?}: {db:+.2} dB"
        );
        // PCM16 at this level is 78 dB clean; a listener's drift correction after a restart
        // resamples for a while (about 50 dB). Opus 128 measured 52, Opus 64 40.
        let floor = if layer == Layer::AsSent { -40.0 } else { -30.0 };
        assert!(
            resid < floor,
            "phase {p} listener {i} on {layer:?}: residual {resid:.1} dB"
        );
    }
}

#[test]
fn serving_opus_layers_allocates_nothing_per_block() {
    let mut s = sender();
    s.set_send_layer(1, Layer::Opus128).unwrap();
    s.set_send_layer(2, Layer::Opus64).unwrap();
    let mut sent = 0u64;
    let mut sink = |_: Destination, bytes: &[u8]| {
        sent += bytes.len() as u64;
        true
    };
    let quanta = (2.0 * RATE) as u64 / QUANTUM as u64;
    let inputs: Vec<[f32; QUANTUM]> = (0..quanta).map(input).collect();
    let before = calls();
    watched(|| {
        for (q, x) in inputs.iter().enumerate() {
            s.begin_quantum(q as u64 * QUANTUM as u64);
            s.capture(x, x, &mut sink);
            if q as u64 == quanta / 2 {
                // Takers change on the render path too.
                s.set_send_layer(1, Layer::AsSent).unwrap();
                s.set_send_layer(3, Layer::Opus128).unwrap();
            }
        }
    });
    let counted = calls() - before;
    let encoded = s.counters().opus_encoded;
    println!("2 s of capture serving Opus 128 and 64: {encoded} frames encoded, {sent} bytes sent, {counted} allocator calls");
    assert!(encoded > 1000);
    assert_eq!(counted, 0);
}

#[test]
fn a_layer_without_an_encoder_or_a_slot_without_a_peer_is_refused() {
    let mut s = Engine::new(EngineConfig::default());
    s.insert_peer(1, Peer::new(&EngineConfig::default()))
        .unwrap();
    assert!(s.set_send_layer(1, Layer::Opus128).is_err());
    assert!(s.set_send_layer(2, Layer::AsSent).is_err());
    assert!(s.set_send_layer(1, Layer::AsSent).is_ok());
    assert_eq!(s.send_layer(1), Layer::AsSent);
}
