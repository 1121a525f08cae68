//! Known-answer tests of the round-trip probe: a known delay measured exactly, smeared and lost
//! clicks, callback alignment, and signals that must not count as clicks.

use super::*;

const Q: usize = 128;

/// Sends through a delay line of `delay` frames (and a gain) and returns the probe's results.
fn run(delay: usize, gain: f32, clicks: usize, quanta: usize) -> ClickProbe {
    let mut p = ClickProbe::new();
    p.start(3, clicks, 0);
    let mut line = vec![0.0f32; delay + Q * (quanta + 1)];
    for q in 0..quanta {
        let now = (q * Q) as u64;
        let (mut l, mut r) = ([0.3f32; Q], [0.3f32; Q]);
        if !p.outgoing(now, true, &mut l, &mut r) {
            break;
        }
        assert!(l[1..].iter().all(|&x| x == 0.0), "the microphone is muted");
        for i in 0..Q {
            line[q * Q + i + delay] += l[i] * gain;
        }
        let back = &line[q * Q..q * Q + Q];
        p.incoming(now, back, back);
    }
    p
}

#[test]
fn measures_a_known_delay_exactly() {
    for delay in [1usize, 127, 128, 1000, 4321] {
        let p = run(delay, 0.5, 10, 20_000);
        assert_eq!(p.state(), ProbeState::Done);
        assert_eq!(p.heard(), 10);
        assert!(
            p.results().iter().all(|&f| f == delay as f64),
            "{delay}: {:?}",
            p.results()
        );
    }
}

#[test]
fn finds_the_peak_of_a_smeared_click() {
    // An interpolated click: 0.25, 0.6, 0.3 around the true position.
    let mut p = ClickProbe::new();
    p.start(0, 1, 0);
    let (mut l, mut r) = ([0f32; Q], [0f32; Q]);
    // Quiet for QUIET_FRAMES first: the click goes out at frame 2432 (19 quanta).
    let mut now = 0;
    while p.sent() == 0 {
        p.incoming(now, &[0.0; Q], &[0.0; Q]);
        now += Q as u64;
        p.outgoing(now, true, &mut l, &mut r);
    }
    assert_eq!(now, QUIET_FRAMES.div_ceil(Q as u64) * Q as u64);
    assert_eq!(l[0], CLICK_LEVEL);
    let mut back = [0f32; Q];
    back[40] = 0.25;
    back[41] = 0.6;
    back[42] = 0.3;
    p.incoming(now + 256, &back, &back);
    assert_eq!(p.results(), &[297.0]);
    assert_eq!(p.state(), ProbeState::Done);
}

#[test]
fn a_click_that_never_returns_is_lost_and_the_probe_goes_on() {
    let p = run(10, 0.0, 3, 3 * (TIMEOUT_FRAMES as usize / Q + 60));
    assert_eq!(p.state(), ProbeState::Done);
    assert_eq!(p.sent(), 3);
    assert_eq!(p.heard(), 0);
    assert!(p.results().iter().all(|f| f.is_nan()));
}

#[test]
fn clicks_wait_for_the_start_of_a_callback() {
    let mut p = ClickProbe::new();
    p.start(0, 1, 0);
    let mut now = 0;
    while now < 2 * QUIET_FRAMES {
        let (mut l, mut r) = ([0f32; Q], [0f32; Q]);
        p.incoming(now, &[0.0; Q], &[0.0; Q]);
        // Callbacks of four quanta: only every fourth quantum starts one.
        p.outgoing(now, now % (4 * Q as u64) == 0, &mut l, &mut r);
        if l[0] != 0.0 {
            assert_eq!(now % (4 * Q as u64), 0, "click at {now}");
        }
        now += Q as u64;
    }
    assert_eq!(p.sent(), 1);
}

#[test]
fn a_peer_that_never_goes_quiet_gets_no_clicks() {
    let mut p = ClickProbe::new();
    p.start(0, 2, 0);
    let music = [0.5f32; Q];
    let mut now = 0;
    while p.state() == ProbeState::Running && now < 10 * TIMEOUT_FRAMES {
        let (mut l, mut r) = ([0f32; Q], [0f32; Q]);
        p.incoming(now, &music, &music);
        p.outgoing(now, true, &mut l, &mut r);
        assert!(l.iter().all(|&x| x == 0.0), "no click while the peer plays");
        now += Q as u64;
    }
    assert_eq!(p.state(), ProbeState::Done);
    assert_eq!((p.sent(), p.heard()), (2, 0));
    assert!(now < 3 * TIMEOUT_FRAMES, "gave up in time: {now}");
}

#[test]
fn quiet_signals_are_not_clicks_and_clicks_are_clamped() {
    let p = run(500, DETECT_LEVEL * 0.9, 2, 2_000);
    assert_eq!(p.heard(), 0);
    let mut p = ClickProbe::new();
    p.start(1, 1000, 0);
    assert_eq!(p.clicks(), MAX_CLICKS);
    p.start(1, 0, 0);
    assert_eq!(p.clicks(), 1);
}

#[test]
fn idle_and_stopped_probes_leave_audio_alone() {
    let mut p = ClickProbe::new();
    let (mut l, mut r) = ([0.5f32; Q], [0.5f32; Q]);
    assert!(!p.outgoing(0, true, &mut l, &mut r));
    assert!(l.iter().all(|&x| x == 0.5));
    p.start(2, 4, 0);
    assert!(p.listens_to(2) && !p.listens_to(1));
    p.stop();
    assert!(!p.outgoing(128, true, &mut l, &mut r));
    assert_eq!(p.state(), ProbeState::Idle);
    // Empty buffers do not panic.
    p.start(2, 1, 0);
    assert!(p.outgoing(0, true, &mut [], &mut []));
    p.incoming(0, &[], &[]);
}
