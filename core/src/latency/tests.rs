//! Known-answer tests of the latency histograms: bin edges, quantiles of constant, uniform
//! and skewed input within their bin bounds, the record layout, and the TypeScript mirror's
//! constants.

use super::*;

/// The known edges both this crate and the TypeScript reader check.
#[test]
fn edges_known_values() {
    assert_eq!(bin_edge_us(0), 10.0);
    assert_eq!(bin_edge_us(8), 20.0);
    assert_eq!(bin_edge_us(80), 10_240.0);
    assert_eq!(bin_edge_us(160), 10_485_760.0);
    assert!((bin_edge_us(1) - 10.905_077_326_652_577).abs() < 1e-9);
    assert!((bin_edge_us(1) / bin_edge_us(0) - 1.0 - MAX_RELATIVE_ERROR).abs() < 1e-15);
    assert_eq!(bin_bounds_us(0), (0.0, 10.0));
    assert_eq!(bin_bounds_us(1), (10.0, bin_edge_us(1)));
    assert_eq!(bin_bounds_us(OVERFLOW).1, f64::INFINITY);
}

#[test]
fn every_value_falls_in_its_bin() {
    for b in 1..=REGULAR_BINS {
        let (low, high) = bin_bounds_us(b);
        assert_eq!(bin_of(low), b, "lower edge of bin {b}");
        assert_eq!(bin_of(low * 1.000_001), b);
        assert_eq!(bin_of(high * 0.999_999), b);
    }
    assert_eq!(bin_of(0.0), UNDERFLOW);
    assert_eq!(bin_of(9.999), UNDERFLOW);
    assert_eq!(bin_of(10.0), 1);
    assert_eq!(bin_of(bin_edge_us(160)), OVERFLOW);
    assert_eq!(bin_of(1e12), OVERFLOW);
    // A sweep: the bin found always contains the value.
    let mut us = 0.5;
    while us < 2e7 {
        let (low, high) = bin_bounds_us(bin_of(us));
        assert!(low <= us && us < high, "{us} in [{low}, {high})");
        us *= 1.0137;
    }
}

#[test]
fn empty_histogram_reports_nothing() {
    let h = Histogram::new();
    assert_eq!(h.count(), 0);
    assert_eq!(h.quantile(0.5), None);
    assert_eq!(h.mean(), None);
    assert_eq!(h.summary_ms(), [0.0; 6]);
}

#[test]
fn constant_input_every_quantile_within_its_bin() {
    for &v in &[12.0, 480.0, 2_667.0, 5_000.0, 123_456.0, 9_000_000.0] {
        let mut h = Histogram::new();
        for _ in 0..1000 {
            h.record(v);
        }
        let (low, high) = bin_bounds_us(bin_of(v));
        for q in [0.0, 0.01, 0.5, 0.95, 0.99, 1.0] {
            let e = h.quantile(q).unwrap();
            assert!(low <= e && e < high, "q{q} of constant {v}: {e}");
            // Clamped to the exact extremes, a constant comes out exact.
            assert_eq!(e, v);
        }
        assert_eq!(h.mean(), Some(v));
        assert_eq!((h.min(), h.max()), (Some(v), Some(v)));
    }
}

#[test]
fn uniform_1_to_100_ms_known_quantiles() {
    // Every 10 µs from 1 ms to 100 ms.
    let mut h = Histogram::new();
    let mut us = 1000;
    while us <= 100_000 {
        h.record(us as f64);
        us += 10;
    }
    let n = h.count() as f64;
    assert_eq!(n, 9901.0);
    let cases = [(0.5, 50_500.0), (0.95, 95_050.0), (0.99, 99_010.0)];
    for (q, want) in cases {
        let got = h.quantile(q).unwrap();
        let err = (got - want).abs() / want;
        assert!(err < MAX_RELATIVE_ERROR, "q{q}: {got} vs {want}");
        // Evenly spread values interpolate far better than the bound.
        assert!(err < 0.005, "q{q}: {got} vs {want}");
    }
    assert!((h.mean().unwrap() - 50_500.0).abs() < 1e-6);
    assert_eq!(h.max(), Some(100_000.0));
    assert_eq!(h.min(), Some(1000.0));
}

#[test]
fn quantile_error_within_bound_on_skewed_input() {
    // Exponentially spread values: the interpolation's assumption is wrong inside each bin,
    // so this exercises the bound itself.
    let mut values: Vec<f64> = (0..5000)
        .map(|i| 50.0 * (i as f64 * 0.0023).exp())
        .collect();
    let mut h = Histogram::new();
    for &v in &values {
        h.record(v);
    }
    values.sort_by(f64::total_cmp);
    for q in [0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99] {
        let rank = ((q * values.len() as f64).ceil() as usize).max(1) - 1;
        let truth = values[rank];
        let got = h.quantile(q).unwrap();
        assert!(
            (got - truth).abs() <= MAX_RELATIVE_ERROR * truth,
            "q{q}: {got} vs {truth}"
        );
    }
}

#[test]
fn underflow_overflow_and_rejects_are_counted() {
    let mut h = Histogram::new();
    h.record(0.0);
    h.record(3.0);
    h.record(20e6);
    h.record(-1.0);
    h.record(f64::NAN);
    h.record(f64::INFINITY);
    h.reject();
    assert_eq!(h.counts()[UNDERFLOW], 2);
    assert_eq!(h.counts()[OVERFLOW], 1);
    assert_eq!(h.count(), 3);
    assert_eq!(h.rejected(), 4);
    assert_eq!(h.max(), Some(20e6));
    assert_eq!(h.min(), Some(0.0));
    let p99 = h.quantile(0.99).unwrap();
    assert!(p99 >= bin_edge_us(REGULAR_BINS) && p99 <= 20e6);
    assert!(h.quantile(0.3).unwrap() < MIN_US);
    h.reset();
    assert_eq!(h, Histogram::new());
}

#[test]
fn quantiles_in_one_pass_agree_with_single_ones() {
    let mut h = Histogram::new();
    for i in 0..777 {
        h.record((i * i) as f64 * 3.1);
    }
    let many = h.quantiles([0.0, 0.5, 0.95, 0.99, 1.0]).unwrap();
    for (k, q) in [0.0, 0.5, 0.95, 0.99, 1.0].into_iter().enumerate() {
        assert_eq!(many[k], h.quantile(q).unwrap());
    }
    assert_eq!(many[0], 0.0);
    assert_eq!(many[4], h.max().unwrap());
}

#[test]
fn record_layout() {
    let mut h = Histogram::new();
    for _ in 0..4 {
        h.record(2_000.0);
    }
    let mut out = [f64::NAN; HIST_LEN + 3];
    h.write_record(&mut out);
    assert_eq!(out[H_COUNT], 4.0);
    assert_eq!(out[H_MEAN_MS], 2.0);
    assert_eq!(out[H_P50_MS], 2.0);
    assert_eq!(out[H_BINS_AT + bin_of(2_000.0)], 4.0);
    assert_eq!(out[H_BINS_AT..HIST_LEN].iter().sum::<f64>(), 4.0);
    assert!(out[HIST_LEN].is_nan(), "nothing past the record");
    assert_eq!(
        hist_index(HB_MAX_PEERS - 1, STAGES - 1) + HIST_LEN,
        HB_BLOCK_LEN
    );
}

/// Every `export const NAME = value;` in the TypeScript reader must equal the Rust constant.
#[test]
fn typescript_mirror_agrees() {
    let ts = include_str!("../../../app/src/audio/latency.ts");
    let rust: &[(&str, f64)] = &[
        ("MIN_US", MIN_US),
        ("BINS_PER_OCTAVE", BINS_PER_OCTAVE as f64),
        ("REGULAR_BINS", REGULAR_BINS as f64),
        ("BINS", BINS as f64),
        ("H_COUNT", H_COUNT as f64),
        ("H_MEAN_MS", H_MEAN_MS as f64),
        ("H_MIN_MS", H_MIN_MS as f64),
        ("H_MAX_MS", H_MAX_MS as f64),
        ("H_P50_MS", H_P50_MS as f64),
        ("H_P95_MS", H_P95_MS as f64),
        ("H_P99_MS", H_P99_MS as f64),
        ("H_REJECTED", H_REJECTED as f64),
        ("H_BINS_AT", H_BINS_AT as f64),
        ("HIST_LEN", HIST_LEN as f64),
        ("STAGE_JITTER_WAIT", STAGE_JITTER_WAIT as f64),
        ("STAGE_NETWORK", STAGE_NETWORK as f64),
        ("STAGE_DELIVERY", STAGE_DELIVERY as f64),
        ("STAGE_SEND_QUEUE", STAGE_SEND_QUEUE as f64),
        ("STAGE_TRANSIT", STAGE_TRANSIT as f64),
        ("STAGE_ONE_WAY", STAGE_ONE_WAY as f64),
        ("STAGES", STAGES as f64),
        ("HB_SEQUENCE", HB_SEQUENCE as f64),
        ("HB_SLOTS", HB_SLOTS as f64),
        ("HB_STAGES", HB_STAGES as f64),
        ("HB_OUTPUT_US", HB_OUTPUT_US as f64),
        ("HB_INPUT_US", HB_INPUT_US as f64),
        ("HB_BINS", HB_BINS as f64),
        ("HB_GLOBAL_LEN", HB_GLOBAL_LEN as f64),
        ("CAPTURE_AT", CAPTURE_AT as f64),
        ("SLOTS_AT", SLOTS_AT as f64),
        ("HB_MAX_PEERS", HB_MAX_PEERS as f64),
        ("HB_BLOCK_LEN", HB_BLOCK_LEN as f64),
    ];
    let found = crate::testing::ts_numeric_constants(ts);
    for (name, value) in &found {
        let expected = rust.iter().find(|(n, _)| n == name);
        assert_eq!(expected.map(|e| e.1), Some(*value), "{name} in latency.ts");
    }
    assert_eq!(
        found.len(),
        rust.len(),
        "latency.ts must define every constant as a plain number"
    );
}
