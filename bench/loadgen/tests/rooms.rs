//! The load generator end to end against the real servers, small: a few emulated JackTrip
//! clients in one room of this project's server (its release binary, which the build makes)
//! and of Debian's `jacktrip -S -p 2` on a dummy JACK server. Each spot-checked listener must
//! hear every other client's tone at its level and not its own, and the delivery figure must be
//! a share of what was sent (the figures themselves are the benchmark's business).
//!
//! Skipped with a message when the server binary or the JACK programs are missing, except under
//! `CI=true`, where they must be there.

use std::path::PathBuf;

use tutti_loadgen::run::run_once;
use tutti_loadgen::scenario::{Mode, Scenario, ServerName};

/// One run at a time: each starts its servers and an emulator thread per core, and their
/// checks are about the servers, not about how four runs share two cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The release server binary, or None (skipped) when it was not built.
fn server_bin() -> Option<PathBuf> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/tutti-server");
    if bin.is_file() {
        return Some(bin);
    }
    assert!(
        !ci(),
        "CI=true and {} is missing: the build suite makes it",
        bin.display()
    );
    eprintln!(
        "skipped: {} not built (npm run build makes it)",
        bin.display()
    );
    None
}

/// Runs `s` (quiet) and prints its row for the test's log.
fn run_printed(s: &Scenario, bin: &std::path::Path) -> tutti_loadgen::run::Row {
    let row = run_once(s, bin, true).expect("the run");
    eprintln!("{}", serde_json::to_string(&row).unwrap_or_default());
    row
}

fn small(server: ServerName, clients: usize) -> Scenario {
    Scenario {
        name: format!("test-{}", server.as_str()),
        server,
        clients,
        warmup_seconds: 1.5,
        seconds: 3.0,
        join_per_second: 20.0,
        spot_checks: 2,
        threads: 1,
        hub_threads: 1,
        ..Scenario::default()
    }
}

#[test]
fn clients_in_a_hub_room_hear_each_other_and_not_themselves() {
    let _one = one_at_a_time();
    let Some(bin) = server_bin() else { return };
    let row = run_printed(&small(ServerName::TuttiHub, 6), &bin);
    assert_eq!(
        (row.joined, row.join_errors),
        (6, 0),
        "{:?}",
        row.first_error
    );
    assert_eq!(row.spot_checks.len(), 2);
    for heard in &row.spot_checks {
        assert_eq!(heard.checked, 5, "{heard:?}");
        assert!(heard.ok(), "{heard:?}");
    }
    assert!(
        row.delivery_pct > 50.0 && row.delivery_pct <= 100.0,
        "delivery {}",
        row.delivery_pct
    );
    assert!(row.p99_interarrival_ms > 0.0 && row.p99_interarrival_ms.is_finite());
    assert!(row.cpu_ms_per_client_s > 0.0 && row.rss_mb > 0.0);
    assert_eq!((row.malformed, row.duplicates), (0, 0));
}

/// Clients come and go around those who stay: the leavers' places are taken, the joiners are
/// heard from, and no staying voice leaves a staying listener's mix. (The bound here is a
/// voice dropped for good, which reads as the rest of the window; whether a break stays under
/// a concealment is the churn benchmark's figure, on a quiet machine.)
#[test]
fn in_a_churn_the_staying_voices_stay_in_every_staying_listeners_mix() {
    let _one = one_at_a_time();
    let Some(bin) = server_bin() else { return };
    let s = Scenario {
        seconds: 5.0,
        churn_per_second: 2.0,
        ..small(ServerName::TuttiHub, 6)
    };
    let row = run_printed(&s, &bin);
    assert!(row.churned >= 8, "{} left", row.churned);
    assert_eq!(row.joined, 6 + row.churned, "{:?}", row.first_error);
    assert_eq!(row.silent, 0);
    assert_eq!(row.continuity.len(), 2);
    for c in &row.continuity {
        // Clients 0-2 stay; 0 and 1 listen: each follows the other two.
        assert_eq!(c.tones, 2, "{c:?}");
        assert!(c.windows > 800, "{c:?}");
    }
    assert!(
        row.longest_tone_gap_ms < 1000.0,
        "a staying voice was gone for {} ms",
        row.longest_tone_gap_ms
    );
}

/// One room over three hub processes sharing a Redis store: the clients are dealt to the hubs
/// in turn, and a listener on each hub hears every other client, on its own hub or another, at
/// the level of a local voice, and not itself.
#[test]
fn a_room_over_three_hubs_is_heard_whole_on_each() {
    let _one = one_at_a_time();
    let Some(bin) = server_bin() else { return };
    if !tutti_loadgen::servers::missing(&["redis-server"]).is_empty() {
        assert!(
            !ci(),
            "CI=true and redis-server missing: scripts/setup.sh installs it"
        );
        eprintln!("skipped: redis-server not found");
        return;
    }
    let s = Scenario {
        hubs: 3,
        spot_checks: 3,
        warmup_seconds: 4.0,
        ..small(ServerName::TuttiHub, 6)
    };
    let row = run_printed(&s, &bin);
    assert_eq!((row.hubs, row.joined), (3, 6), "{:?}", row.first_error);
    assert_eq!(row.spot_checks.len(), 3);
    for heard in &row.spot_checks {
        assert_eq!(heard.checked, 5, "{heard:?}");
        assert!(heard.ok(), "{heard:?}");
    }
    let counted = |process: &str| row.server_threads.iter().any(|(n, _)| n == process);
    assert!(
        counted("store/redis-server") && (0..3).all(|h| counted(&format!("hub{h}/hub-0"))),
        "every hub's worker and the store count, by process: {:?}",
        row.server_threads
    );
}

#[test]
fn clients_of_jacktrips_hub_hear_each_other_and_not_themselves() {
    let _one = one_at_a_time();
    let missing = tutti_loadgen::servers::jack_tools_missing();
    if !missing.is_empty() {
        assert!(
            !ci(),
            "CI=true and {missing:?} missing: scripts/setup.sh installs them"
        );
        eprintln!("skipped: {missing:?} not found");
        return;
    }
    let bin = PathBuf::from("unused");
    let row = run_printed(&small(ServerName::Jacktrip, 3), &bin);
    assert_eq!(
        (row.joined, row.join_errors),
        (3, 0),
        "{:?}",
        row.first_error
    );
    for heard in &row.spot_checks {
        assert_eq!(heard.checked, 2, "{heard:?}");
        assert!(heard.ok(), "{heard:?}");
    }
    assert!(
        row.delivery_pct > 50.0 && row.delivery_pct <= 100.0,
        "delivery {}",
        row.delivery_pct
    );
}

/// Forward mode: two rooms of three app clients (signaling, WebRTC link to the hub). Every
/// listener hears each other member of its room, nearly every block, and every spot-checked
/// listener finds each of them carrying that member's own tone and nothing else; no stream
/// from the other room, and none of its own, reaches it.
#[test]
fn in_forward_mode_each_listener_hears_each_member_of_its_room_and_no_other() {
    let _one = one_at_a_time();
    let Some(bin) = server_bin() else { return };
    let s = Scenario {
        mode: Mode::Forward,
        rooms: 2,
        clients: 3,
        spot_checks: 3,
        warmup_seconds: 2.0,
        ..small(ServerName::TuttiHub, 3)
    };
    let row = run_printed(&s, &bin);
    assert_eq!(
        (row.mode, row.protocol, row.joined, row.join_errors),
        ("forward", "webrtc", 6, 0),
        "{:?}",
        row.first_error
    );
    let f = row.forward.as_ref().expect("forward figures");
    assert_eq!((f.senders_heard, f.senders_expected), (12, 12), "{f:?}");
    assert_eq!(
        (f.echoes, f.unknown_streams, f.failed_links),
        (0, 0, 0),
        "{f:?}"
    );
    assert!(f.worst_sender_pct >= 99.0 && f.offered_pct >= 99.0, "{f:?}");
    assert!(row.delivery_pct >= 99.0, "delivery {}", row.delivery_pct);
    assert_eq!(row.spot_checks.len(), 6);
    for heard in &row.spot_checks {
        assert_eq!(heard.checked, 2, "{heard:?}");
        assert!(heard.ok(), "{heard:?}");
    }
    assert!(row.tones_ok);
    assert_eq!((row.malformed, row.duplicates, row.silent), (0, 0, 0));
    assert!(row.cpu_ms_per_client_s > 0.0 && row.p99_interarrival_ms.is_finite());
}
