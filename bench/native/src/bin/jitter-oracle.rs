//! `cargo run --release -p tutti-bench --bin jitter-oracle`: every trace of
//! [`tutti_bench::jitter::traces`] through the adaptive buffer (and a fixed 8-packet one beside
//! it), against the oracle. A table on stderr, one line of JSON on stdout:
//! `{"jitter":[{"trace":..,"target_over_oracle_p50":r,"max_target_over_oracle_after_10s":m,
//! "underruns_beyond_losses_per_min":u,...},...]}`.

use tutti_bench::jitter::{run, traces, Outcome, ADAPTIVE};
use tutti_core::jitter::BufferMode;

fn row(o: &Outcome, fixed: &Outcome) -> String {
    let c = &o.counters;
    format!(
        concat!(
            "{{\"trace\":\"{}\",\"target_over_oracle_p50\":{:.3},",
            "\"max_target_over_oracle_after_10s\":{:.3},\"underruns_beyond_losses_per_min\":{:.3},",
            "\"underruns_beyond_losses\":{},\"oracle_ms\":{:.2},\"target_p50_ms\":{:.2},",
            "\"dropped\":{},\"lost\":{},\"concealed\":{},\"late\":{},\"underruns\":{},",
            "\"stall_underruns\":{},\"local_stalls\":{},",
            "\"fixed8_underruns_beyond_losses_per_min\":{:.3}}}"
        ),
        o.trace,
        o.target_over_oracle_p50,
        o.max_target_over_oracle_after_10s,
        o.underruns_beyond_losses_per_min,
        o.underruns_beyond_losses,
        o.oracle_ms,
        o.target_p50_ms,
        o.dropped,
        c.lost,
        c.concealed,
        c.late,
        c.underruns,
        c.stall_underruns,
        o.local_stalls,
        fixed.underruns_beyond_losses_per_min,
    )
}

fn main() {
    let only = std::env::args().nth(1);
    let mut rows = Vec::new();
    eprintln!(
        "{:<30} {:>9} {:>9} {:>7} {:>7} {:>9} {:>7} {:>7}",
        "trace", "oracle ms", "target ms", "p50 ×", "max ×", "beyond/min", "lost", "fixed8/min"
    );
    for t in traces() {
        if only.as_deref().is_some_and(|n| n != t.name) {
            continue;
        }
        let o = run(&t, ADAPTIVE);
        let f = run(&t, BufferMode::Fixed { packets: 8 });
        eprintln!(
            "{:<30} {:>9.2} {:>9.2} {:>7.2} {:>7.2} {:>9.2} {:>7} {:>7.2}",
            t.name,
            o.oracle_ms,
            o.target_p50_ms,
            o.target_over_oracle_p50,
            o.max_target_over_oracle_after_10s,
            o.underruns_beyond_losses_per_min,
            o.counters.lost,
            f.underruns_beyond_losses_per_min
        );
        rows.push(row(&o, &f));
    }
    println!("{{\"jitter\":[{}]}}", rows.join(","));
}
