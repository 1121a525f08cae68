//! The controller against known answers: what each layer needs, and traces of a path whose
//! capacity changes, reported once a second as a listener would (a layer that does not fit
//! loses what exceeds the capacity and its delay rises; one that fits arrives whole, and packet
//! trains measure the capacity, with noise).

use super::*;

const S: u64 = 1_000_000;

#[test]
fn what_each_layer_needs() {
    // Two senders of 128-frame PCM16 stereo, each bundle gathering one packet of each; an Opus
    // entry carries its frame and the previous one's copy (40 + 40 bytes at both rates).
    let close = |a: f64, b: f64| (a - b).abs() < 1.0;
    let message = 85.0 * 8.0;
    assert!(close(
        need_bps(Layer::AsSent, 2, 128, 2.0),
        2.0 * 375.0 * 538.0 * 8.0 + 375.0 * message
    ));
    assert!(close(
        need_bps(Layer::Opus128, 2, 128, 2.0),
        2.0 * 400.0 * 106.0 * 8.0 + 400.0 * message
    ));
    assert!(close(
        need_bps(Layer::Opus64, 2, 128, 2.0),
        2.0 * 200.0 * 106.0 * 8.0 + 200.0 * message
    ));
    // 3.48 Mbit/s, 950 and 475 kbit/s.
    assert_eq!(need_bps(Layer::AsSent, 2, 128, 2.0).round(), 3_483_000.0);
    // Every packet alone: a message each.
    assert!(close(
        need_bps(Layer::Opus128, 2, 128, 1.0),
        2.0 * 400.0 * (106.0 * 8.0 + message)
    ));
    // Two of each a message (senders whose browsers send two blocks at once): half the
    // messages. Packing is bounded by what a bundle holds, and by one packet a message.
    assert!(close(
        need_bps(Layer::AsSent, 2, 128, 4.0),
        2.0 * 375.0 * 538.0 * 8.0 + 187.5 * message
    ));
    assert_eq!(
        need_bps(Layer::Opus64, 2, 128, 1e9),
        need_bps(Layer::Opus64, 2, 128, 64.0)
    );
    assert_eq!(
        need_bps(Layer::Opus64, 2, 128, 0.1),
        need_bps(Layer::Opus64, 2, 128, 1.0)
    );
}

#[test]
fn bundles_that_gather_poorly_count_in_the_need() {
    // 1.4 Mbit/s got through, two senders: Opus 128 fits when each message carries both
    // senders' frames (950 kbit/s), not when they mostly travel alone (1.11 Mbit/s at 1.25 a
    // message, above 70 % of 1.4 Mbit/s): then Opus 64 is taken.
    let lossy = Report {
        received_bps: 1.4e6,
        loss: 0.3,
        delay_rise_ms_per_s: 50.0,
        rtt_ms: 100.0,
        capacity_bps: None,
    };
    let mut packed = Controller::new(Policy::Capacity, 2, 128, 0);
    assert_eq!(packed.report(&lossy, S).unwrap().layer, Layer::Opus128);
    let mut loose = Controller::new(Policy::Capacity, 2, 128, 0);
    loose.packing(1.25);
    assert_eq!(loose.report(&lossy, S).unwrap().layer, Layer::Opus64);
    // Nonsense is ignored.
    let mut c = Controller::new(Policy::Capacity, 2, 128, 0);
    c.packing(f64::NAN);
    c.packing(0.5);
    assert_eq!(c.report(&lossy, S).unwrap().layer, Layer::Opus128);
}

/// A listener's report of a second on a path of `capacity` taking `need`: deterministic noise
/// of ±`noise` on the measured capacity, from `k`.
fn report(need: f64, capacity: f64, k: u64, noise: f64) -> Report {
    let wobble = 1.0 + noise * (((k * 7919) % 21) as f64 / 10.0 - 1.0);
    if need > capacity {
        Report {
            received_bps: capacity,
            loss: 1.0 - capacity / need,
            delay_rise_ms_per_s: 40.0,
            rtt_ms: 80.0,
            capacity_bps: Some(capacity * wobble),
        }
    } else {
        Report {
            received_bps: need,
            loss: 0.0,
            delay_rise_ms_per_s: 0.0,
            rtt_ms: 2.0,
            capacity_bps: Some(capacity * wobble),
        }
    }
}

/// Runs `seconds` of reports with the capacity `capacity(t)`; returns every change (second,
/// decision).
fn run(
    c: &mut Controller,
    seconds: u64,
    senders: usize,
    capacity: impl Fn(u64) -> f64,
    noise: f64,
) -> Vec<(u64, Decision)> {
    let mut changes = Vec::new();
    for t in 1..=seconds {
        let need = need_bps(c.layer(), senders, 128, senders as f64);
        if let Some(d) = c.report(&report(need, capacity(t), t, noise), t * S) {
            changes.push((t, d));
        }
    }
    changes
}

#[test]
fn a_path_limited_to_one_megabit_gets_a_fitting_layer_at_once_and_back_when_lifted() {
    // Two senders; the path carries 1 Mbit/s for the first 30 s, then 100 Mbit/s.
    let mut c = Controller::new(Policy::Capacity, 2, 128, 0);
    let changes = run(&mut c, 60, 2, |t| if t <= 30 { 1e6 } else { 1e8 }, 0.1);
    for (t, d) in &changes {
        println!("{t:>2} s: {} ({})", d.layer.name(), d.reason);
    }
    assert_eq!(changes.len(), 2, "{changes:?}");
    // Down in the first report: the richest layer within 70 % of what got through (Opus 128
    // with its copies needs 950 kbit/s at two packets a message: Opus 64, 475 kbit/s).
    assert_eq!(changes[0].0, 1);
    assert_eq!(changes[0].1.layer, Layer::Opus64);
    assert!(matches!(changes[0].1.reason, Reason::Congested { .. }));
    // Up once the limit is gone, after the hold: the first clean second after 30 s starts it.
    assert_eq!(changes[1].1.layer, Layer::AsSent);
    assert!(
        changes[1].0 > 30 && changes[1].0 <= 31 + HOLD_US / S,
        "{changes:?}"
    );
}

#[test]
fn trial_and_error_overshoots_the_path_the_capacity_policy_stays_below() {
    // The same path (two senders, 1 Mbit/s for 60 s, ±10 % noise in the trains' measurement),
    // each policy from the packets as sent: what each loses, in seconds' worth of packets.
    let lost_seconds = |policy: Policy| {
        let mut c = Controller::new(policy, 2, 128, 0);
        let (mut lost, mut changes) = (0.0, 0);
        for t in 1..=60u64 {
            let need = need_bps(c.layer(), 2, 128, 2.0);
            let r = report(need, 1e6, t, 0.1);
            lost += r.loss;
            changes += usize::from(c.report(&r, t * S).is_some());
        }
        (lost, changes)
    };
    let (capacity_lost, capacity_changes) = lost_seconds(Policy::Capacity);
    let (probe_lost, probe_changes) = lost_seconds(Policy::Probe);
    println!("capacity: {capacity_lost:.2} s lost, {capacity_changes} changes; probe: {probe_lost:.2} s lost, {probe_changes} changes");
    // The capacity policy loses only the first second (as sent, 3.5 Mbit/s on 1 Mbit/s) and
    // changes once.
    let first = 1.0 - 1e6 / need_bps(Layer::AsSent, 2, 128, 2.0);
    assert!((capacity_lost - first).abs() < 1e-9, "{capacity_lost}");
    assert_eq!(capacity_changes, 1);
    // Trial and error goes down a rung at a time (Opus 128 fits 1 Mbit/s), then tries as sent
    // again after every hold of clean seconds: down at 1 s, up at 6 s (4 s of clean reports
    // counted from the first at 2 s), down at 7 s, and so on every 6 s: 20 changes in 60 s, and
    // nine more seconds like the first (the tenth try, at 60 s, is not reported yet).
    assert_eq!(probe_changes, 20);
    assert!((probe_lost - 10.0 * first).abs() < 1e-9, "{probe_lost}");
}

#[test]
fn trains_that_misread_the_path_are_believed_less_each_time() {
    // A 1 Mbit/s path whose trains all read 189.6 Mbit/s until 120 s (a loaded listener that
    // handles each train in one batch), then read right: 100 Mbit/s until 150 s, 1 Mbit/s
    // until 170 s, 100 Mbit/s again.
    let path = |t: u64| match t {
        0..=120 => 1e6,
        121..=150 => 1e8,
        151..=170 => 1e6,
        _ => 1e8,
    };
    let mut c = Controller::new(Policy::Capacity, 2, 128, 0);
    let (mut ups, mut downs) = (Vec::new(), Vec::new());
    for t in 1..=200u64 {
        let mut r = report(need_bps(c.layer(), 2, 128, 2.0), path(t), t, 0.0);
        if t <= 120 {
            r.capacity_bps = Some(189.6e6);
        }
        if let Some(d) = c.report(&r, t * S) {
            if d.layer == Layer::AsSent {
                ups.push(t);
            } else {
                downs.push(t);
            }
        }
    }
    // Each step up on the misread trains fails at the next report, and the next try waits
    // twice as long: clean reports from the second after each step down, then 4, 8, 16, 32 s
    // and 32 s (the longest hold) of them. Without the back-off: a try every 6 s, 20 by 120 s.
    assert_eq!(ups[..5], [6, 16, 34, 68, 102], "{ups:?}");
    assert_eq!(downs[..6], [1, 7, 17, 35, 69, 103], "{downs:?}");
    // Read right, the path is 100 Mbit/s from 121 s: the next try, at 136 s, lasts its hold
    // and the hold is 4 s again: down at 151 s on the narrowing, back up at the first report
    // after it widens (171 s), not 32 s after the step down.
    assert_eq!(ups[5..], [136, 171], "{ups:?}");
    assert_eq!(downs[6..], [151], "{downs:?}");
}

#[test]
fn congestion_just_after_a_step_down_is_the_old_layers() {
    // The path's queue still drains the packets as sent for a second or two after the step
    // down: what the listener reports then does not step it further down; after the settle,
    // congestion on the new layer does.
    let mut c = Controller::new(Policy::Capacity, 2, 128, 0);
    let lossy = |received_bps: f64| Report {
        received_bps,
        loss: 0.6,
        delay_rise_ms_per_s: 80.0,
        rtt_ms: 600.0,
        capacity_bps: None,
    };
    assert_eq!(c.report(&lossy(1.4e6), S).unwrap().layer, Layer::Opus128);
    assert_eq!(c.report(&lossy(200e3), 2 * S), None);
    assert_eq!(c.report(&lossy(200e3), S + SETTLE_US - 1), None);
    assert_eq!(c.layer(), Layer::Opus128);
    let d = c.report(&lossy(200e3), S + SETTLE_US).unwrap();
    assert_eq!(d.layer, Layer::Opus64);
}

#[test]
fn a_steady_path_near_a_boundary_never_oscillates() {
    // Capacities around each layer's need, ±10 % noise in what packet trains measure: at most
    // one change (the first step down) in 120 s.
    for senders in [1usize, 2, 4, 8] {
        for layer in LADDER {
            for factor in [0.9, 1.0, 1.1, 1.3, 1.6, 1.8] {
                let capacity = need_bps(layer, senders, 128, senders as f64) * factor;
                let mut c = Controller::new(Policy::Capacity, senders, 128, 0);
                let changes = run(&mut c, 120, senders, |_| capacity, 0.1);
                assert!(
                    changes.len() <= 1,
                    "{senders} senders, {} × {factor}: {changes:?}",
                    layer.name()
                );
            }
        }
    }
}

#[test]
fn no_measured_capacity_means_no_step_up() {
    // After a congestion, clean reports without a packet-train measurement keep the layer.
    let mut c = Controller::new(Policy::Capacity, 2, 128, 0);
    let lossy = Report {
        received_bps: 500_000.0,
        loss: 0.3,
        delay_rise_ms_per_s: 30.0,
        rtt_ms: 50.0,
        capacity_bps: None,
    };
    let d = c.report(&lossy, S).unwrap();
    assert_eq!(d.layer, Layer::Opus64);
    let clean = Report {
        received_bps: 466_000.0,
        loss: 0.0,
        delay_rise_ms_per_s: 0.0,
        rtt_ms: 2.0,
        capacity_bps: None,
    };
    for t in 2..100 {
        assert_eq!(c.report(&clean, t * S), None);
    }
}

#[test]
fn a_mesh_listener_without_trains_tries_up_after_the_hold_and_backs_off_when_it_fails() {
    // A mesh listener (no trains: every report's capacity is unknown), one sender (each packet
    // in its own message). The path carries 1 Mbit/s for 120 s, then 100 Mbit/s.
    let mut c = Controller::new(Policy::Capacity, 1, 128, 0).trying_unmeasured();
    c.packing(1.0);
    let mut changes = Vec::new();
    for t in 1..=160 {
        let need = need_bps(c.layer(), 1, 128, 1.0);
        let capacity = if t <= 120 { 1e6 } else { 1e8 };
        let mut r = report(need, capacity, t, 0.0);
        r.capacity_bps = None;
        if let Some(d) = c.report(&r, t * S) {
            println!("{t:>3} s: {} ({})", d.layer.name(), d.reason);
            changes.push((t, d.layer));
        }
    }
    // Down at once to what fits what got through (Opus 128 with its copies, alone in its
    // messages: 611 kbit/s).
    assert_eq!(changes[0], (1, Layer::Opus128));
    // Tries the packets as sent, which fail every time: the holds double (4, 8, 16, 32, 32 s).
    let tries: Vec<u64> = changes
        .iter()
        .filter(|&&(t, l)| l == Layer::AsSent && t <= 120)
        .map(|&(t, _)| t)
        .collect();
    let gaps: Vec<u64> = tries.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(tries.len() <= 6, "{changes:?}");
    assert!(
        gaps.windows(2).all(|g| g[1] >= g[0]),
        "holds only grow: {gaps:?}"
    );
    assert!(gaps.last().is_some_and(|&g| g >= 32), "{gaps:?}");
    // The path widens at 120 s: back to the packets as sent within two of the longest holds.
    let last = changes.last().unwrap();
    assert_eq!(last.1, Layer::AsSent, "{changes:?}");
    assert!(last.0 <= 120 + 2 * (MAX_HOLD_US / S) + 2, "{changes:?}");
    // The hub's listeners, with trains to come, do not try unmeasured.
    let mut hub = Controller::new(Policy::Capacity, 1, 128, 0);
    let lossy = report(3e6, 1e6, 1, 0.0);
    assert!(hub.report(&lossy, S).is_some());
    let mut clean = report(0.0, 1e6, 2, 0.0);
    clean.capacity_bps = None;
    assert!((2..60).all(|t| hub.report(&clean, t * S).is_none()));
}

#[test]
fn a_rising_delay_steps_down_before_anything_is_lost() {
    let mut c = Controller::new(Policy::Capacity, 2, 128, 0);
    let r = Report {
        received_bps: 3_400_000.0,
        loss: 0.0,
        delay_rise_ms_per_s: 40.0,
        rtt_ms: 30.0,
        capacity_bps: None,
    };
    let d = c.report(&r, S).unwrap();
    // What got through (3.4 Mbit/s) still carries AsSent's 3.48 at no margin: one step down.
    assert_eq!(d.layer, Layer::Opus128);
    assert!(d
        .reason
        .to_string()
        .starts_with("delay rising 40.0 ms per second"));
}

#[test]
fn more_senders_step_down_when_the_measured_capacity_no_longer_fits() {
    let mut c = Controller::new(Policy::Capacity, 2, 128, 0);
    let fits = Report {
        received_bps: 3_483_000.0,
        loss: 0.0,
        delay_rise_ms_per_s: 0.0,
        rtt_ms: 2.0,
        capacity_bps: Some(6e6),
    };
    assert_eq!(c.report(&fits, S), None);
    // Four senders need 6.7 Mbit/s as sent; 70 % of 6 Mbit/s takes Opus 128 (1.6 Mbit/s).
    let d = c.senders(4, 2 * S).unwrap();
    assert_eq!(d.layer, Layer::Opus128);
    assert_eq!(
        d.reason.to_string(),
        "4 players need more than the path's 6.0 Mbit/s"
    );
    assert_eq!(c.senders(4, 3 * S), None);
}

#[test]
fn nonsense_reports_change_nothing() {
    let mut c = Controller::new(Policy::Capacity, 2, 128, 0);
    for r in [
        Report {
            received_bps: f64::NAN,
            loss: 0.5,
            delay_rise_ms_per_s: 0.0,
            rtt_ms: 1.0,
            capacity_bps: None,
        },
        Report {
            received_bps: 1e5,
            loss: 7.0,
            delay_rise_ms_per_s: 0.0,
            rtt_ms: 1.0,
            capacity_bps: None,
        },
        Report {
            received_bps: -1.0,
            loss: 0.5,
            delay_rise_ms_per_s: 0.0,
            rtt_ms: 1.0,
            capacity_bps: None,
        },
        Report {
            received_bps: 1e5,
            loss: 0.5,
            delay_rise_ms_per_s: f64::INFINITY,
            rtt_ms: 1.0,
            capacity_bps: None,
        },
        Report {
            received_bps: 1e5,
            loss: 0.5,
            delay_rise_ms_per_s: 0.0,
            rtt_ms: 1.0,
            capacity_bps: Some(-3.0),
        },
    ] {
        assert_eq!(c.report(&r, S), None, "{r:?}");
    }
    assert_eq!(c.layer(), Layer::AsSent);
}

#[test]
fn reports_parse_with_stated_errors() {
    use serde_json::json;
    let obj = |v: serde_json::Value| v.as_object().unwrap().clone();
    let r = parse_report(&obj(json!({
        "receivedBps": 950000.0, "loss": 0.03, "delayRiseMsPerS": -1.5, "rttMs": 12, "capacityBps": null
    })))
    .unwrap();
    assert_eq!(
        r,
        Report {
            received_bps: 950_000.0,
            loss: 0.03,
            delay_rise_ms_per_s: -1.5,
            rtt_ms: 12.0,
            capacity_bps: None
        }
    );
    let r = parse_report(&obj(json!({
        "receivedBps": 1, "loss": 0, "delayRiseMsPerS": 0, "rttMs": 0, "capacityBps": 2e6
    })))
    .unwrap();
    assert_eq!(r.capacity_bps, Some(2e6));
    for (bad, field) in [
        (
            json!({"loss": 0, "delayRiseMsPerS": 0, "rttMs": 0}),
            "receivedBps",
        ),
        (
            json!({"receivedBps": 1, "loss": 1.5, "delayRiseMsPerS": 0, "rttMs": 0}),
            "loss",
        ),
        (
            json!({"receivedBps": "fast", "loss": 0, "delayRiseMsPerS": 0, "rttMs": 0}),
            "receivedBps",
        ),
        (
            json!({"receivedBps": 1, "loss": 0, "delayRiseMsPerS": 0, "rttMs": -1}),
            "rttMs",
        ),
        (
            json!({"receivedBps": 1, "loss": 0, "delayRiseMsPerS": 0, "rttMs": 0, "capacityBps": 0}),
            "capacityBps",
        ),
        (
            json!({"receivedBps": 1e12, "loss": 0, "delayRiseMsPerS": 0, "rttMs": 0}),
            "receivedBps",
        ),
    ] {
        let e = parse_report(&obj(bad.clone())).unwrap_err();
        assert_eq!(e.code, "bad-message", "{bad}");
        assert!(
            e.message.contains(&format!("\"{field}\"")),
            "{bad}: {}",
            e.message
        );
    }
    assert_eq!(
        layer_notice(Layer::Opus64, "why"),
        r#"{"layer":"opus-64","reason":"why","type":"layer"}"#
    );
}
