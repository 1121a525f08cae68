//! Tests of the stats block layout: the TypeScript mirror's constants and the block's extent.

use super::*;

/// Every `export const NAME = value;` in the TypeScript mirror must equal the Rust constant.
#[test]
fn typescript_mirror_agrees() {
    let ts = include_str!("../../../app/src/audio/stats.ts");
    let rust: &[(&str, usize)] = &[
        ("GLOBAL_LEN", GLOBAL_LEN),
        ("PEER_LEN", PEER_LEN),
        ("MAX_PEERS", MAX_PEERS),
        ("BLOCK_LEN", BLOCK_LEN),
        ("G_SEQUENCE", G_SEQUENCE),
        ("G_QUANTA", G_QUANTA),
        ("G_NOW_FRAMES", G_NOW_FRAMES),
        ("G_PEERS", G_PEERS),
        ("G_UNKNOWN_PEER", G_UNKNOWN_PEER),
        ("G_MALFORMED", G_MALFORMED),
        ("G_RECORDS_READ", G_RECORDS_READ),
        ("G_RING_RESYNCS", G_RING_RESYNCS),
        ("G_MASTER_PEAK_L", G_MASTER_PEAK_L),
        ("G_MASTER_PEAK_R", G_MASTER_PEAK_R),
        ("G_MASTER_RMS_L", G_MASTER_RMS_L),
        ("G_MASTER_RMS_R", G_MASTER_RMS_R),
        ("G_LIMITER_DB", G_LIMITER_DB),
        ("G_PACKETS_SENT", G_PACKETS_SENT),
        ("G_SEND_DROPPED", G_SEND_DROPPED),
        ("G_INPUT_PEAK", G_INPUT_PEAK),
        ("G_INPUT_RMS", G_INPUT_RMS),
        ("G_NONFINITE", G_NONFINITE),
        ("G_UNDERRUNS", G_UNDERRUNS),
        ("G_CAPTURE_P50_MS", G_CAPTURE_P50_MS),
        ("G_CAPTURE_P95_MS", G_CAPTURE_P95_MS),
        ("G_CAPTURE_P99_MS", G_CAPTURE_P99_MS),
        ("G_CAPTURE_MAX_MS", G_CAPTURE_MAX_MS),
        ("G_CAPTURE_MEAN_MS", G_CAPTURE_MEAN_MS),
        ("G_CAPTURE_COUNT", G_CAPTURE_COUNT),
        ("G_PROBE_STATE", G_PROBE_STATE),
        ("G_PROBE_SLOT", G_PROBE_SLOT),
        ("G_PROBE_CLICKS", G_PROBE_CLICKS),
        ("G_PROBE_SENT", G_PROBE_SENT),
        ("G_PROBE_HEARD", G_PROBE_HEARD),
        ("G_ECHO_SLOT", G_ECHO_SLOT),
        ("G_PROBE_RESULTS_AT", G_PROBE_RESULTS_AT),
        ("G_CAPTURE_GAPS", G_CAPTURE_GAPS),
        ("G_CAPTURE_GAP_MS", G_CAPTURE_GAP_MS),
        ("G_LOCAL_STALLS", G_LOCAL_STALLS),
        ("PROBE_MAX_CLICKS", crate::probe::MAX_CLICKS),
        ("P_ACTIVE", P_ACTIVE),
        ("P_RECEIVED", P_RECEIVED),
        ("P_LOST", P_LOST),
        ("P_LATE", P_LATE),
        ("P_DUPLICATES", P_DUPLICATES),
        ("P_CONCEALED", P_CONCEALED),
        ("P_UNDERRUNS", P_UNDERRUNS),
        ("P_DISCARDED", P_DISCARDED),
        ("P_MALFORMED", P_MALFORMED),
        ("P_BUFFERED_FRAMES", P_BUFFERED_FRAMES),
        ("P_TARGET_FRAMES", P_TARGET_FRAMES),
        ("P_DRIFT_PPM", P_DRIFT_PPM),
        ("P_PEAK_L", P_PEAK_L),
        ("P_PEAK_R", P_PEAK_R),
        ("P_RMS_L", P_RMS_L),
        ("P_RMS_R", P_RMS_R),
        ("P_BLOCK_FRAMES", P_BLOCK_FRAMES),
        ("P_SAMPLE_RATE", P_SAMPLE_RATE),
        ("P_CHANNELS", P_CHANNELS),
        ("P_BITS", P_BITS),
        ("P_JITTER_FRAMES", P_JITTER_FRAMES),
        ("P_RESETS", P_RESETS),
        ("P_WAIT_P50_MS", P_WAIT_P50_MS),
        ("P_WAIT_P95_MS", P_WAIT_P95_MS),
        ("P_WAIT_P99_MS", P_WAIT_P99_MS),
        ("P_WAIT_MAX_MS", P_WAIT_MAX_MS),
        ("P_WAIT_MEAN_MS", P_WAIT_MEAN_MS),
        ("P_WAIT_COUNT", P_WAIT_COUNT),
        ("P_NET_P50_MS", P_NET_P50_MS),
        ("P_NET_P95_MS", P_NET_P95_MS),
        ("P_NET_P99_MS", P_NET_P99_MS),
        ("P_NET_MAX_MS", P_NET_MAX_MS),
        ("P_NET_MEAN_MS", P_NET_MEAN_MS),
        ("P_NET_COUNT", P_NET_COUNT),
        ("P_NET_OUT_OF_RANGE", P_NET_OUT_OF_RANGE),
        ("P_CLOCK_OFFSET_US", P_CLOCK_OFFSET_US),
        ("P_LATE_UNDERRUNS", P_LATE_UNDERRUNS),
        ("P_STALL_UNDERRUNS", P_STALL_UNDERRUNS),
        ("P_SENDER_GAPS", P_SENDER_GAPS),
        ("P_SENDER_GAP_MS", P_SENDER_GAP_MS),
        ("P_STRETCHED", P_STRETCHED),
        ("P_ORACLE_FRAMES", P_ORACLE_FRAMES),
        ("P_UNDECODABLE", P_UNDECODABLE),
        ("P_RECOVERED", P_RECOVERED),
    ];
    let found = crate::testing::ts_numeric_constants(ts);
    for (name, value) in &found {
        let expected = rust.iter().find(|(n, _)| n == name);
        assert_eq!(
            expected.map(|e| e.1 as f64),
            Some(*value),
            "{name} in stats.ts"
        );
    }
    assert_eq!(
        found.len(),
        rust.len(),
        "stats.ts must define every constant as a plain number"
    );
}

// Fields fit their rows; checked when the crate compiles.
const _: () =
    assert!(G_PROBE_RESULTS_AT + crate::probe::MAX_CLICKS <= GLOBAL_LEN && P_RECOVERED < PEER_LEN);

#[test]
fn last_peer_row_ends_the_block() {
    assert_eq!(peer_index(MAX_PEERS - 1, PEER_LEN - 1), BLOCK_LEN - 1);
}
