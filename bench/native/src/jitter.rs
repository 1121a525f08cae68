//! The jitter buffer against its oracle: seeded network traces played through the core's real
//! [`JitterBuffer`], [`Resampler`] and [`DriftController`], wired as the engine wires them for
//! one peer, in virtual time.
//!
//! # The model (local frames at 48 kHz; the receiver's audio clock is the reference)
//!
//! - **Sender**: 128-frame blocks. Its device calls back every `sender_period` of *its* frames
//!   and sends every block completed by then (480 → bursts of 3-4 packets); its clock runs
//!   `drift_ppm` fast, so block `k` completes at local time `(k + 1)·128 / (1 + ε)`.
//! - **Path**: a base delay (5 ms) plus the trace's jitter; loss independent or in runs (a
//!   two-state model with the trace's loss rate and mean run length); a delay step; stalls that
//!   hold back every packet due during them until they end.
//! - **Receiver**: the packet pump hands arrivals over at once or every `deliver_period` frames
//!   (its wake-ups); the device calls back every `render_period` frames (200 frames out of
//!   phase) and renders `render_period / 128` quanta back to back, so what arrived before a
//!   callback is drained at its first quantum.
//!
//! # The oracle
//!
//! A packet's lateness is `L = drained − k·128 / (1 + ε)` (when it reached the engine against
//! its own ideal time on the sender's true clock). A fixed buffer plays every packet that
//! arrived iff its fill covers `max L − min L`; counted as the buffer counts its target (fill
//! plus the block the consumer has staged), the **oracle** is `max L − min L + 128` over the
//! packets that arrived in the trace's last two minutes.
//!
//! # What is counted
//!
//! - `target / oracle` at every quantum from 10 s on: its median and maximum.
//! - **Underruns beyond losses**: moments where a packet that did arrive could not be played in
//!   time: the buffer waited for it (an underrun it ended) or passed its number before it came
//!   (counted late). Events closer than 20 ms count once. Packets that never arrived force
//!   concealment but are not counted here.
//!
//! Everything is seeded: the same trace gives the same figures on any machine.

use tutti_core::drift::DriftController;
use tutti_core::jitter::stall::LocalStall;
use tutti_core::jitter::{BufferMode, JitterBuffer, JitterConfig, JitterCounters, PopKind};
use tutti_core::packet::{encode, Header, SampleFormat, SampleRate, MAX_PACKET_LEN};
use tutti_core::resample::Resampler;

const BLOCK: u64 = 128;
const QUANTUM: u64 = 128;
const RATE: f64 = 48_000.0;
/// Frames per millisecond.
const MS: f64 = RATE / 1000.0;

/// How a packet's extra delay is drawn.
#[derive(Clone, Copy, Debug)]
pub enum Jitter {
    /// Uniform in ±`ms` around the base delay.
    Uniform(f64),
    /// `scale_ms` × (Pareto(α) − 1), capped at `cap_ms`: most packets within a few
    /// milliseconds, a tail that reaches the cap several times a second.
    Pareto {
        scale_ms: f64,
        alpha: f64,
        cap_ms: f64,
    },
}

/// One seeded network scenario.
#[derive(Clone, Copy, Debug)]
pub struct Trace {
    pub name: &'static str,
    pub seconds: u64,
    pub seed: u64,
    /// Sender device callback, sender frames.
    pub sender_period: u64,
    /// Receiver device callback, local frames (a multiple of 128).
    pub render_period: u64,
    /// Pump hand-over period, local frames (0: at once).
    pub deliver_period: u64,
    pub drift_ppm: f64,
    pub jitter: Jitter,
    /// Loss rate (0..1) and mean run length in packets (1: independent).
    pub loss: f64,
    pub loss_run: f64,
    /// Stalls: duration range (ms) and spacing range (s).
    pub stalls: Option<((f64, f64), (f64, f64))>,
    /// A path-delay step of `ms` from `from` to `to` seconds.
    pub step: Option<(f64, f64, f64)>,
}

impl Trace {
    const BASE: Trace = Trace {
        name: "",
        seconds: 300,
        seed: 1,
        sender_period: 128,
        render_period: 128,
        deliver_period: 0,
        drift_ppm: 0.0,
        jitter: Jitter::Uniform(1.0),
        loss: 0.0,
        loss_run: 1.0,
        stalls: None,
        step: None,
    };
}

/// The benchmark's traces (the list), 300 s each.
pub fn traces() -> Vec<Trace> {
    let b = Trace::BASE;
    vec![
        Trace {
            name: "loss_0",
            seed: 11,
            ..b
        },
        Trace {
            name: "loss_2",
            seed: 12,
            loss: 0.02,
            ..b
        },
        Trace {
            name: "loss_5",
            seed: 13,
            loss: 0.05,
            ..b
        },
        Trace {
            name: "loss_runs_2_mean_4",
            seed: 14,
            loss: 0.02,
            loss_run: 4.0,
            ..b
        },
        Trace {
            name: "jitter_3",
            seed: 15,
            jitter: Jitter::Uniform(3.0),
            ..b
        },
        Trace {
            name: "jitter_10",
            seed: 16,
            jitter: Jitter::Uniform(10.0),
            ..b
        },
        Trace {
            name: "jitter_heavy_tail",
            seed: 17,
            jitter: Jitter::Pareto {
                scale_ms: 1.0,
                alpha: 1.5,
                cap_ms: 30.0,
            },
            ..b
        },
        Trace {
            name: "bursts_10ms_render_4q_loss_1",
            seed: 18,
            sender_period: 480,
            render_period: 512,
            deliver_period: 480,
            loss: 0.01,
            ..b
        },
        Trace {
            name: "stalls_50_150ms",
            seed: 19,
            stalls: Some(((50.0, 150.0), (10.0, 30.0))),
            ..b
        },
        Trace {
            name: "delay_step_20ms",
            seed: 20,
            step: Some((200.0, 240.0, 20.0)),
            ..b
        },
        Trace {
            name: "drift_plus_300ppm",
            seed: 21,
            drift_ppm: 300.0,
            ..b
        },
        Trace {
            name: "drift_minus_300ppm",
            seed: 22,
            drift_ppm: -300.0,
            ..b
        },
    ]
}

/// splitmix64: seeded, deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}

/// One packet of a trace: its block number and the quantum that drains it (`None`: lost).
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    pub block: u64,
    pub quantum: Option<u64>,
}

/// The deliveries of a trace from one peer (`peer` seeds its path), in block order. Stalls are
/// the local machine's: every peer's packets stop and resume together.
pub fn deliveries(t: &Trace, peer: u64) -> Vec<Delivery> {
    let mut rng = Rng::new(t.seed.wrapping_mul(1000).wrapping_add(peer));
    let blocks = t.seconds * RATE as u64 / BLOCK;
    let eps = t.drift_ppm * 1e-6;
    // Stall intervals (local frames), the same for every peer.
    let mut stalls = Vec::new();
    if let Some(((d_lo, d_hi), (e_lo, e_hi))) = t.stalls {
        let mut rng = Rng::new(t.seed ^ 0x0515_7a11);
        let mut at = rng.range(e_lo, e_hi) * RATE;
        while at < t.seconds as f64 * RATE {
            let len = rng.range(d_lo, d_hi) * MS;
            stalls.push((at, at + len));
            at += len + rng.range(e_lo, e_hi) * RATE;
        }
    }
    let p_bad_to_good = 1.0 / t.loss_run.max(1.0);
    let p_good_to_bad = if t.loss > 0.0 {
        t.loss * p_bad_to_good / (1.0 - t.loss)
    } else {
        0.0
    };
    let mut bad = false;
    let base = 5.0 * MS;
    let phase = 200.0;
    (0..blocks)
        .map(|k| {
            bad = if bad {
                rng.unit() >= p_bad_to_good
            } else {
                rng.unit() < p_good_to_bad
            };
            let sent_sender = ((k + 1) * BLOCK).div_ceil(t.sender_period) * t.sender_period;
            let sent = sent_sender as f64 / (1.0 + eps);
            let extra = match t.jitter {
                Jitter::Uniform(ms) => rng.range(-ms, ms) * MS,
                Jitter::Pareto {
                    scale_ms,
                    alpha,
                    cap_ms,
                } => {
                    let u = 1.0 - rng.unit();
                    (scale_ms * (u.powf(-1.0 / alpha) - 1.0)).min(cap_ms) * MS
                }
            };
            let mut arrival = sent + base + extra;
            if let Some((from, to, ms)) = t.step {
                if sent >= from * RATE && sent < to * RATE {
                    arrival += ms * MS;
                }
            }
            for &(s, e) in &stalls {
                if arrival >= s && arrival < e {
                    arrival = e;
                }
            }
            if t.deliver_period > 0 {
                let p = t.deliver_period as f64;
                arrival = (arrival / p).ceil() * p;
            }
            let callback = ((arrival - phase) / t.render_period as f64).ceil().max(0.0) as u64;
            Delivery {
                block: k,
                quantum: (!bad).then_some(callback * t.render_period / QUANTUM),
            }
        })
        .collect()
}

/// The oracle depth (frames) over the deliveries of the last two minutes.
pub fn oracle_frames(t: &Trace, ds: &[Delivery]) -> f64 {
    let eps = t.drift_ppm * 1e-6;
    let from = (t.seconds.saturating_sub(120)) * RATE as u64 / BLOCK;
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for d in ds.iter().filter(|d| d.block >= from) {
        if let Some(q) = d.quantum {
            let l = (q * QUANTUM) as f64 - (d.block * BLOCK) as f64 / (1.0 + eps);
            lo = lo.min(l);
            hi = hi.max(l);
        }
    }
    (hi - lo).max(0.0) + BLOCK.min(QUANTUM) as f64
}

/// What one trace gave.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub trace: &'static str,
    pub oracle_ms: f64,
    pub target_p50_ms: f64,
    pub target_over_oracle_p50: f64,
    pub max_target_over_oracle_after_10s: f64,
    pub underruns_beyond_losses: u64,
    pub underruns_beyond_losses_per_min: f64,
    pub counters: JitterCounters,
    pub dropped: u64,
    /// Local stalls the detector saw.
    pub local_stalls: u64,
    /// The buffer's own oracle five seconds before the end (`JitterBuffer::oracle_frames`, with
    /// the drift loop's estimate), ms: it should match `oracle_ms`.
    pub buffer_oracle_ms: f64,
}

fn packet(block: u64) -> Vec<u8> {
    let l: Vec<f32> = (0..BLOCK)
        .map(|i| {
            0.25 * (((block * BLOCK + i) as f64) * 2.0 * std::f64::consts::PI * 440.0 / RATE).sin()
                as f32
        })
        .collect();
    let header = Header {
        timestamp: 0,
        seq: block as u16,
        frames: BLOCK as u16,
        rate: SampleRate::Hz48000,
        format: SampleFormat::Pcm16,
        channels_in: 1,
        channels_out: 1,
    };
    let mut out = vec![0u8; MAX_PACKET_LEN];
    let n = encode(&header, None, &[&l], &mut out).expect("a valid mono block");
    out.truncate(n);
    out
}

/// Plays a trace through a buffer in `mode` and measures it against the oracle.
pub fn run(t: &Trace, mode: BufferMode) -> Outcome {
    let ds = deliveries(t, 0);
    let oracle = oracle_frames(t, &ds);
    // A second peer in the same room: the engine's local-stall detector sees both.
    let mut other: Vec<u64> = deliveries(t, 1).iter().filter_map(|d| d.quantum).collect();
    other.sort_unstable();
    let mut other_next = 0;
    let mut detector = LocalStall::new();
    let dropped = ds.iter().filter(|d| d.quantum.is_none()).count() as u64;
    let mut order: Vec<(u64, u64)> = ds
        .iter()
        .filter_map(|d| d.quantum.map(|q| (q, d.block)))
        .collect();
    order.sort_unstable();
    // One packet per sequence number modulo 65536 is enough: the payload is a function of it.
    let packets: Vec<Vec<u8>> = (0..65_536u64).map(packet).collect();

    let mut jb = JitterBuffer::new(JitterConfig {
        mode,
        ..JitterConfig::default()
    });
    let mut res = Resampler::new(1024);
    let mut drift = DriftController::new(QUANTUM as u32, RATE as u32);
    let quanta = t.seconds * RATE as u64 / QUANTUM;
    let warm = 10 * RATE as u64 / QUANTUM;
    let mut ratios = Vec::with_capacity(quanta as usize);
    let mut max_ratio: f64 = 0.0;
    let mut events = 0;
    let mut last_event: Option<u64> = None;
    let mut prev = jb.counters();
    let mut buffer_oracle_ms = 0.0;
    let mut next = 0;
    for q in 0..quanta {
        while other_next < other.len() && other[other_next] == q {
            detector.arrival(q * QUANTUM, 2);
            other_next += 1;
        }
        while next < order.len() && order[next].0 == q {
            if let Some(until) = detector.arrival(q * QUANTUM, 2) {
                jb.excuse_until(until);
            }
            let bytes = &packets[(order[next].1 % 65_536) as usize];
            let pkt = tutti_core::packet::parse(bytes).expect("a packet we encoded");
            jb.push(&pkt, q * QUANTUM);
            next += 1;
        }
        // As `engine::Peer::play` does.
        if jb.block_frames() > 0 {
            let fill = f64::from(jb.buffered_frames()) + res.buffered_frames();
            let ratio = drift.update(fill, f64::from(jb.target_frames()));
            let mut need = res.frames_needed(QUANTUM as usize, ratio);
            let mut playing = true;
            while need > 0 {
                let (l, r) = res.append_slots(BLOCK as usize);
                if l.len() < BLOCK as usize {
                    break;
                }
                let pop = jb.pop_block(l, r);
                if pop.kind == PopKind::Silence {
                    playing = false;
                }
                if pop.frames == 0 {
                    break;
                }
                need = need.saturating_sub(pop.frames);
                let excess = jb.take_start_excess();
                if excess > 0 {
                    res.skip(excess, 1.0);
                    need = res.frames_needed(QUANTUM as usize, ratio);
                }
            }
            if !playing {
                drift.reset();
            }
            res.skip(QUANTUM as usize, ratio);
        }
        let c = jb.counters();
        let glitch = c.late > prev.late || c.late_underruns > prev.late_underruns;
        prev = c;
        if q >= warm {
            if glitch && last_event.is_none_or(|e| q - e > 8) {
                events += 1;
                if std::env::var_os("TUTTI_JITTER_EVENTS").is_some() {
                    eprintln!(
                        "  {} event at {:.3} s: target {} fill {:.0} {:?}",
                        t.name,
                        (q * QUANTUM) as f64 / RATE,
                        jb.target_frames(),
                        f64::from(jb.buffered_frames()) + res.buffered_frames(),
                        c
                    );
                }
            }
            let r = f64::from(jb.target_frames()) / oracle;
            max_ratio = max_ratio.max(r);
            ratios.push(r);
        }
        if glitch {
            last_event = Some(q);
        }
        if q + 5 * RATE as u64 / QUANTUM == quanta {
            // Five seconds before the end (a fast sender's stream ends before the trace does).
            buffer_oracle_ms = f64::from(jb.oracle_frames(drift.offset_ppm())) / MS;
        }
    }
    ratios.sort_by(f64::total_cmp);
    let p50 = ratios.get(ratios.len() / 2).copied().unwrap_or(0.0);
    let minutes = (t.seconds - 10) as f64 / 60.0;
    Outcome {
        trace: t.name,
        oracle_ms: oracle / MS,
        target_p50_ms: p50 * oracle / MS,
        target_over_oracle_p50: p50,
        max_target_over_oracle_after_10s: max_ratio,
        underruns_beyond_losses: events,
        underruns_beyond_losses_per_min: events as f64 / minutes,
        counters: jb.counters(),
        dropped,
        local_stalls: detector.stalls(),
        buffer_oracle_ms,
    }
}

/// The adaptive mode the engine uses by default (the room's floor and ceiling).
pub const ADAPTIVE: BufferMode = BufferMode::DEFAULT;
