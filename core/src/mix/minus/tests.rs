//! Mix-minus against known answers: each listener hears every other tone at the default level
//! and not its own; a listener's change reaches only that listener; a soloing listener hears only
//! its solos; hostile blocks change nobody's output; and over random changes the O(N) mix equals
//! the direct O(N²) one (a strip per listener and source) to f32 rounding.

use super::*;
use crate::mix::GainControl;
use crate::testing::{fit_sine, Rng};
use std::f64::consts::PI;

type Block = Option<[[f32; QUANTUM]; 2]>;

/// Frequencies of the tone slots (mono: left = right), Hz: whole numbers of cycles in the
/// measured window (multiples of 48000 / (40 × 128) = 9.375 Hz), so each fit sees only its tone.
const HZ: [f64; 4] = [225.0, 328.125, 440.625, 553.125];
/// Amplitude of every tone.
const AMP: f32 = 0.2;
/// Slots in the tone tests: the four tones and a listen-only client (slot 4).
const SLOTS: usize = 5;
/// Blocks rendered in the tone tests; the last `FIT_BLOCKS` are measured.
const BLOCKS: u64 = 48;
const FIT_BLOCKS: u64 = 40;

/// Block `b` of the room: slot k < 4 plays `HZ[k]` in both channels; slot 4 listens only.
fn tones(b: u64) -> Vec<Block> {
    (0..SLOTS)
        .map(|slot| {
            let hz = *HZ.get(slot)?;
            let mut x = [0.0f32; QUANTUM];
            for (i, v) in x.iter_mut().enumerate() {
                let n = (b * QUANTUM as u64 + i as u64) as f64;
                *v = AMP * (2.0 * PI * hz * n / 48_000.0).sin() as f32;
            }
            Some([x, x])
        })
        .collect()
}

/// What every listener of `mix` gets over `BLOCKS` blocks of `room`: `[listener][channel]`.
fn run(mix: &mut MixMinus, room: impl Fn(u64) -> Vec<Block>) -> Vec<[Vec<f32>; 2]> {
    let mut outs = vec![[Vec::new(), Vec::new()]; mix.slots()];
    for b in 0..BLOCKS {
        let src = room(b);
        mix.sum(src.as_slice());
        for (listener, out) in outs.iter_mut().enumerate() {
            let (mut l, mut r) = ([0.0; QUANTUM], [0.0; QUANTUM]);
            mix.render(listener, src.as_slice(), &mut l, &mut r)
                .unwrap();
            out[0].extend_from_slice(&l);
            out[1].extend_from_slice(&r);
        }
    }
    outs
}

/// Amplitude of `hz` in the last `FIT_BLOCKS` blocks of one channel.
fn level(channel: &[f32], hz: f64) -> f64 {
    let from = ((BLOCKS - FIT_BLOCKS) * QUANTUM as u64) as usize;
    let points = channel
        .iter()
        .enumerate()
        .skip(from)
        .map(|(n, &y)| (n as f64, f64::from(y)));
    let (a, b) = fit_sine(points, 2.0 * PI * hz / 48_000.0);
    a.hypot(b)
}

/// The default strip's factor in each channel at the centre: cos(π/4).
fn centre() -> f64 {
    f64::from(AMP) * std::f64::consts::FRAC_1_SQRT_2
}

#[test]
fn each_listener_hears_the_others_at_the_default_level_and_not_itself() {
    let mut mix = MixMinus::new(SLOTS, 4);
    let outs = run(&mut mix, tones);
    for (listener, out) in outs.iter().enumerate() {
        for (slot, &hz) in HZ.iter().enumerate() {
            for channel in out {
                let got = level(channel, hz);
                if slot == listener {
                    assert!(
                        got < 1e-6,
                        "listener {listener} hears its own {hz} Hz at {got}"
                    );
                } else {
                    let want = centre();
                    assert!(
                        (got - want).abs() < 1e-5,
                        "listener {listener}: {hz} Hz at {got}, want {want}"
                    );
                }
            }
        }
        assert_eq!(mix.changes(listener), 0, "nobody changed anything");
    }
}

#[test]
fn a_change_reaches_only_the_listener_who_made_it() {
    let mut plain = MixMinus::new(SLOTS, 4);
    let mut changed = MixMinus::new(SLOTS, 4);
    let strip = changed.strip_mut(1, 2).unwrap();
    strip.set_gain_db(-6.0);
    strip.set_pan(-1.0);
    let (a, b) = (run(&mut plain, tones), run(&mut changed, tones));
    for listener in [0, 2, 3, 4] {
        assert_eq!(
            a[listener], b[listener],
            "listener {listener} is untouched, bit for bit"
        );
    }
    // Listener 1: slot 2's tone hard left at −6 dB; the others as before.
    let gain = f64::from(crate::mix::db_to_lin(-6.0));
    let [l, r] = &b[1];
    assert!(
        (level(l, HZ[2]) - f64::from(AMP) * gain).abs() < 1e-5,
        "{}",
        level(l, HZ[2])
    );
    assert!(level(r, HZ[2]) < 1e-6, "{}", level(r, HZ[2]));
    for hz in [HZ[0], HZ[3]] {
        assert!((level(l, hz) - centre()).abs() < 1e-5);
        assert!((level(r, hz) - centre()).abs() < 1e-5);
    }
    assert!(level(l, HZ[1]) < 1e-6, "listener 1's own voice");
    assert_eq!(changed.changes(1), 1);
}

#[test]
fn a_soloing_listener_hears_only_its_solo_and_comes_back() {
    let mut mix = MixMinus::new(SLOTS, 4);
    mix.strip_mut(4, 3).unwrap().set_solo(true);
    let solo = run(&mut mix, tones);
    for (slot, &hz) in HZ.iter().enumerate() {
        let got = level(&solo[4][0], hz);
        let want = if slot == 3 { centre() } else { 0.0 };
        assert!(
            (got - want).abs() < 1e-6,
            "soloing: {hz} Hz at {got}, want {want}"
        );
    }
    assert_eq!(
        solo[0],
        run(&mut MixMinus::new(SLOTS, 4), tones)[0],
        "others untouched"
    );
    mix.strip_mut(4, 3).unwrap().set_solo(false);
    let back = run(&mut mix, tones);
    for &hz in &HZ {
        assert!(
            (level(&back[4][1], hz) - centre()).abs() < 1e-5,
            "{hz} Hz back"
        );
    }
    assert_eq!(
        mix.changes(4),
        0,
        "a change back at the default rejoins the base"
    );
}

#[test]
fn hostile_blocks_are_dropped_counted_and_disturb_nobody() {
    let bad = |b: u64| {
        let mut room = tones(b);
        let mut x = [0.1f32; QUANTUM];
        x[(b as usize * 7) % QUANTUM] = [f32::NAN, f32::INFINITY, -1e30, 4.01][(b % 4) as usize];
        room[3] = Some(if b % 2 == 0 {
            [x, [0.0; QUANTUM]]
        } else {
            [[0.0; QUANTUM], x]
        });
        room
    };
    let absent = |b: u64| {
        let mut room = tones(b);
        room[3] = None;
        room
    };
    let mut hostile = MixMinus::new(SLOTS, 4);
    let mut quiet = MixMinus::new(SLOTS, 4);
    assert_eq!(
        run(&mut hostile, bad),
        run(&mut quiet, absent),
        "every listener bit-identical"
    );
    assert_eq!(hostile.rejected_blocks(3), BLOCKS);
    assert_eq!((0..SLOTS).map(|s| quiet.rejected_blocks(s)).sum::<u64>(), 0);
}

#[test]
fn a_forgotten_source_is_at_the_default_for_every_listener() {
    let mut mix = MixMinus::new(SLOTS, 4);
    for listener in [1, 2, 4] {
        mix.strip_mut(listener, 0).unwrap().set_gain(0.25);
    }
    mix.strip_mut(1, 3).unwrap().set_gain(0.5);
    mix.forget_source(0);
    assert_eq!([mix.changes(1), mix.changes(2), mix.changes(4)], [1, 0, 0]);
    assert!(mix.strip(1, 0).is_none() && mix.strip(1, 3).is_some());
    // Heard at the default level again, by everyone but itself.
    let outs = run(&mut mix, tones);
    for listener in [1, 2, 4] {
        let got = level(&outs[listener][0], HZ[0]);
        assert!(
            (got / centre() - 1.0).abs() < 1e-3,
            "listener {listener}: {got}"
        );
    }
}

#[test]
fn refusals_say_why() {
    let mut mix = MixMinus::new(3, 1);
    assert_eq!(mix.strip_mut(0, 0).err(), Some(MixMinusError::OwnVoice(0)));
    assert_eq!(
        mix.strip_mut(3, 0).err(),
        Some(MixMinusError::NoSuchSlot(3))
    );
    assert_eq!(
        mix.strip_mut(0, 7).err(),
        Some(MixMinusError::NoSuchSlot(7))
    );
    mix.strip_mut(0, 1).unwrap().set_mute(true);
    assert!(
        mix.strip_mut(0, 1).is_ok(),
        "the same source again is no new change"
    );
    assert_eq!(
        mix.strip_mut(0, 2).err(),
        Some(MixMinusError::TooManyChanges(0))
    );
    let (mut l, mut r) = ([0.0; QUANTUM], [0.0; QUANTUM]);
    let room: Vec<Block> = vec![None; 3];
    assert_eq!(
        mix.render(3, room.as_slice(), &mut l, &mut r),
        Err(MixMinusError::NoSuchSlot(3))
    );
    assert!(mix.strip(0, 1).is_some_and(|s| s.mute()));
    mix.clear(0).unwrap();
    assert_eq!((mix.changes(0), mix.strip(0, 1).is_none()), (0, true));
    assert_eq!(mix.clear(3), Err(MixMinusError::NoSuchSlot(3)));
}

/// The oracle: one strip per (listener, source), each settled at the default, mixed directly.
struct Direct {
    strips: Vec<Vec<Strip>>,
    masters: Vec<Master>,
}

impl Direct {
    fn new(slots: usize) -> Direct {
        let (l, r) = pan_gains(0.0);
        Direct {
            strips: vec![vec![Strip::settled([l, r]); slots]; slots],
            masters: vec![Master::new(); slots],
        }
    }

    fn render(&mut self, listener: usize, room: &[Block], out_l: &mut [f32], out_r: &mut [f32]) {
        out_l.fill(0.0);
        out_r.fill(0.0);
        let strips = &mut self.strips[listener];
        let any_solo = (0..room.len()).any(|j| j != listener && strips[j].solo());
        for (j, block) in room.iter().enumerate() {
            if let (false, Some([l, r])) = (j == listener, block) {
                let audible = solo_audible(any_solo, strips[j].solo(), strips[j].mute());
                strips[j].mix_into(l, r, out_l, out_r, audible);
            }
        }
        self.masters[listener].process(out_l, out_r);
    }
}

/// One random change, made the same way to both mixes' strips.
fn change(rng: &mut Rng, a: &mut Strip, b: &mut Strip) {
    match rng.below(6) {
        0 | 1 => {
            let db = rng.uniform_f32(-40.0, 12.0);
            a.set_gain_db(db);
            b.set_gain_db(db);
        }
        2 => {
            let pan = rng.uniform_f32(-1.0, 1.0);
            a.set_pan(pan);
            b.set_pan(pan);
        }
        3 => {
            a.set_mute(!a.mute());
            b.set_mute(!b.mute());
        }
        4 if rng.chance(0.3) => {
            a.set_solo(!a.solo());
            b.set_solo(!b.solo());
        }
        _ => {
            reset(a);
            reset(b);
        }
    }
}

/// Back to the room default: unity, centre, not muted or soloed.
fn reset(strip: &mut Strip) {
    strip.set_gain(1.0);
    strip.set_pan(0.0);
    strip.set_mute(false);
    strip.set_solo(false);
}

#[test]
fn equals_the_direct_mix_over_random_changes() {
    const N: usize = 7; // six players and one listen-only client
    const LIVE: usize = 6;
    let mut rng = Rng::new(0x6d69_786d_696e_7573);
    let mut mix = MixMinus::new(N, N);
    let mut direct = Direct::new(N);
    let mut worst = 0.0f32;
    let mut most_changes = 0;
    for block in 0..3000 {
        let room: Vec<Block> = (0..N)
            .map(|slot| {
                (slot < LIVE).then(|| {
                    let mut x = [[0.0; QUANTUM]; 2];
                    x.iter_mut()
                        .flatten()
                        .for_each(|v| *v = rng.uniform_f32(-0.3, 0.3));
                    x
                })
            })
            .collect();
        if block % 3 == 0 && block < 2500 {
            let listener = rng.below(N as u64) as usize;
            let source = rng.below(LIVE as u64) as usize;
            if source != listener {
                let strip = mix.strip_mut(listener, source).unwrap();
                change(&mut rng, strip, &mut direct.strips[listener][source]);
            }
        }
        if block == 2500 {
            // Everyone back at the default: every change must leave within a block.
            for listener in 0..N {
                for source in (0..LIVE).filter(|&s| s != listener) {
                    reset(mix.strip_mut(listener, source).unwrap());
                    reset(&mut direct.strips[listener][source]);
                }
            }
        }
        mix.sum(room.as_slice());
        for listener in 0..N {
            let (mut l, mut r) = ([0.0; QUANTUM], [0.0; QUANTUM]);
            let (mut dl, mut dr) = ([0.0; QUANTUM], [0.0; QUANTUM]);
            mix.render(listener, room.as_slice(), &mut l, &mut r)
                .unwrap();
            direct.render(listener, &room, &mut dl, &mut dr);
            for (x, y) in l.iter().chain(&r).zip(dl.iter().chain(&dr)) {
                worst = worst.max((x - y).abs());
            }
            most_changes = most_changes.max(mix.changes(listener));
        }
    }
    eprintln!("mix-minus vs direct: worst difference {worst:e}, at most {most_changes} changes");
    assert!(worst < 2e-6, "worst difference {worst:e}");
    assert!(
        most_changes >= 3,
        "the schedule exercised several changes at once"
    );
    assert!(
        (0..N).all(|l| mix.changes(l) == 0),
        "all back at the default"
    );
}

#[test]
fn source_meters_read_each_player_as_it_arrives_before_any_fader() {
    let mut mix = MixMinus::new(SLOTS, 4);
    // Faders do not move a source meter: it is the player's level, not a listener's.
    mix.strip_mut(1, 0).unwrap().set_gain(0.0);
    mix.strip_mut(2, 1).unwrap().set_pan(1.0);
    // The worklet's strip, fed the same blocks, is the meter a mesh listener would see.
    let mut strip = Strip::new();
    let (mut l, mut r) = ([0.0; QUANTUM], [0.0; QUANTUM]);
    for b in 0..1_500 {
        let room = tones(b);
        mix.sum(room.as_slice());
        let [x, y] = room[0].unwrap();
        strip.mix_into(&x, &y, &mut l, &mut r, true);
    }
    let amp = f64::from(AMP);
    for slot in 0..4 {
        let m = mix.source_meter(slot).unwrap();
        for peak in [m.peak_l, m.peak_r] {
            let peak = f64::from(peak);
            assert!(
                peak <= amp * 1.000_01 && peak >= amp * 0.999,
                "slot {slot}: peak {peak}, tone {amp}"
            );
        }
        for rms in [m.rms_l, m.rms_r] {
            let want = amp * std::f64::consts::FRAC_1_SQRT_2;
            assert!(
                (f64::from(rms) / want - 1.0).abs() < 0.01,
                "slot {slot}: RMS {rms}, want {want}"
            );
        }
    }
    let (ours, worklet) = (mix.source_meter(0).unwrap(), strip.meter());
    for (a, b) in ours.to_f64s().iter().zip(worklet.to_f64s()) {
        assert!(
            (a - b).abs() < 1e-6,
            "hub {ours:?}, worklet strip {worklet:?}"
        );
    }
    assert_eq!(
        mix.source_meter(4),
        Some(Meter::default()),
        "a listener only"
    );
    assert_eq!(mix.source_meter(SLOTS), None);
    mix.forget_source(0);
    assert_eq!(mix.source_meter(0), Some(Meter::default()));
}

#[test]
fn a_hostile_block_is_not_metered() {
    let mut mix = MixMinus::new(2, 1);
    let mut x = [0.1f32; QUANTUM];
    x[5] = f32::NAN;
    mix.sum([Some([x, x]), Some([[0.5; QUANTUM]; 2])].as_slice());
    assert_eq!(mix.source_meter(0), Some(Meter::default()));
    assert_eq!(mix.source_meter(1).unwrap().peak_l, 0.5);
}

/// Two hubs carrying one room (a star of one link): hub B plays tones 2 and 3 and sends A its
/// raw sum, which A mixes as one more source (its slot 2); A's mix for that slot comes back and
/// B adds it to each of its listeners at unit gain. Every tone then reaches every listener on
/// either hub at the default level, and nobody hears itself.
#[test]
fn a_remote_hubs_sum_and_mix_reach_every_listener_at_the_default_level() {
    let mut home = MixMinus::new(3, 4);
    let mut far = MixMinus::new(2, 4);
    let mut heard_home = vec![[Vec::new(), Vec::new()]; 2];
    let mut heard_far = vec![[Vec::new(), Vec::new()]; 2];
    for b in 0..BLOCKS {
        let all = tones(b);
        let local_far: Vec<Block> = vec![all[2], all[3]];
        far.sum(local_far.as_slice());
        let (sl, sr) = far.room_sum();
        let link = Some([*sl, *sr]);
        let local_home: Vec<Block> = vec![all[0], all[1], link];
        home.sum(local_home.as_slice());
        for (listener, out) in heard_home.iter_mut().enumerate() {
            let (mut l, mut r) = ([0.0; QUANTUM], [0.0; QUANTUM]);
            home.render(listener, local_home.as_slice(), &mut l, &mut r)
                .unwrap();
            out[0].extend_from_slice(&l);
            out[1].extend_from_slice(&r);
        }
        let (mut ml, mut mr) = ([0.0; QUANTUM], [0.0; QUANTUM]);
        home.render(2, local_home.as_slice(), &mut ml, &mut mr)
            .unwrap();
        for (listener, out) in heard_far.iter_mut().enumerate() {
            let (mut l, mut r) = ([0.0; QUANTUM], [0.0; QUANTUM]);
            far.render_plus(
                listener,
                local_far.as_slice(),
                Some((&ml, &mr)),
                &mut l,
                &mut r,
            )
            .unwrap();
            out[0].extend_from_slice(&l);
            out[1].extend_from_slice(&r);
        }
    }
    let hubs = [(&heard_home, [0, 1]), (&heard_far, [2, 3])];
    for (heard, slots) in hubs {
        for (listener, out) in heard.iter().enumerate() {
            let own = slots[listener];
            for (tone, &hz) in HZ.iter().enumerate() {
                for channel in out {
                    let got = level(channel, hz);
                    if tone == own {
                        assert!(got < 1e-6, "tone {own} hears itself at {got}");
                    } else {
                        let want = centre();
                        assert!(
                            (got - want).abs() < 1e-5,
                            "tone {own}'s listener: {hz} Hz at {got}, want {want}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_hostile_extra_block_is_left_out() {
    let mut mix = MixMinus::new(2, 4);
    let src = tones(0);
    let two: Vec<Block> = vec![src[0], src[1]];
    mix.sum(two.as_slice());
    let (mut plain_l, mut plain_r) = ([0.0; QUANTUM], [0.0; QUANTUM]);
    mix.render(0, two.as_slice(), &mut plain_l, &mut plain_r)
        .unwrap();
    let mut mix2 = MixMinus::new(2, 4);
    mix2.sum(two.as_slice());
    let mut bad = [0.0f32; QUANTUM];
    bad[5] = f32::NAN;
    let loud = [MAX_SOURCE_PEAK * 2.0; QUANTUM];
    for extra in [(&bad, &bad), (&loud, &loud)] {
        let (mut l, mut r) = ([0.0; QUANTUM], [0.0; QUANTUM]);
        mix2.render_plus(0, two.as_slice(), Some(extra), &mut l, &mut r)
            .unwrap();
        assert_eq!((l, r), (plain_l, plain_r));
    }
}
