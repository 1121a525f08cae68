//! The load generator: many emulated JackTrip clients against a hub, measured from outside.
//!
//! ```text
//! tutti-loadgen SCENARIO.toml              one scenario (scenario.rs has the fields)
//! tutti-loadgen --sweep [--clients 5,10,20] [--seconds 10]
//!               [--servers tutti-hub,jacktrip,tutti-hub-forward]
//!               [--plot FILE.svg]
//! tutti-loadgen --plot FILE.svg --from SWEEP.json   the picture of an earlier sweep's output
//! ```
//!
//! Each run starts its server afresh on loopback (servers.rs): this project's server (the
//! `tutti-server` beside this binary, or `--server-bin`) or Debian's `jacktrip -S -p 2` on a
//! dummy JACK server, and stops it by its pid afterwards. A progress line per second goes to
//! stderr; the last line on stdout is one JSON object: `{"rows": [...]}`, and for a sweep also
//! `"knee"`: per line, the most clients at ≥ 99.9 % delivery. `tutti-hub-forward` is this
//! project's hub in forward mode, the clients in rooms of 5 (scenario.rs, `Series`).
//!
//! The sweep runs the same client counts against each server in one run, so their figures
//! compare on this machine; a server's sweep ends at the first count where it delivers under
//! [`FELL_APART_PCT`] or admits fewer clients than asked, and the whole sweep is bounded by
//! [`SWEEP_BOUND`].
//!
//! Written here rather than taken from a WebRTC load tool: the clients must speak JackTrip's
//! protocol to both servers (and in forward mode the app's signaling and bundles), cost little
//! each (one shared encoded loop per tone), and report per-sequence delivery and the room's
//! tones, which no such tool does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;

use tutti_loadgen::scenario::{Scenario, Series};
use tutti_loadgen::{plot, run};
use tutti_loadgen::{FELL_APART_PCT, KNEE_PCT};

/// The longest a sweep runs; counts not reached by then are left out (and said so).
pub const SWEEP_BOUND: Duration = Duration::from_secs(38 * 60);
const DEFAULT_COUNTS: &str = "5,10,20,30,50,100,200,300,400,500";

fn option(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn server_bin(args: &[String]) -> Result<PathBuf, String> {
    if let Some(p) = option(args, "--server-bin") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe().map_err(|e| format!("where this program is: {e}"))?;
    Ok(me.with_file_name("tutti-server"))
}

fn sweep(args: &[String]) -> Result<serde_json::Value, String> {
    let counts: Vec<usize> = option(args, "--clients")
        .unwrap_or_else(|| DEFAULT_COUNTS.into())
        .split(',')
        .map(|c| {
            c.trim()
                .parse::<usize>()
                .map_err(|_| format!("--clients: {c:?} is not a count"))
        })
        .collect::<Result<_, _>>()?;
    let seconds: f64 = option(args, "--seconds").map_or(Ok(10.0), |v| {
        v.parse()
            .map_err(|_| format!("--seconds: {v:?} is not a number"))
    })?;
    let servers: Vec<Series> = option(args, "--servers")
        .unwrap_or_else(|| "tutti-hub,jacktrip,tutti-hub-forward".into())
        .split(',')
        .map(|n| Series::parse(n.trim()).map_err(|e| format!("--servers: {e}")))
        .collect::<Result<_, _>>()?;
    let bin = server_bin(args)?;
    let t0 = Instant::now();
    let mut rows = Vec::new();
    let mut knee = serde_json::Map::new();
    let mut notes = Vec::new();
    for &server in &servers {
        let mut best: Option<usize> = None;
        for &n in &counts {
            if t0.elapsed() > SWEEP_BOUND {
                notes.push(format!(
                    "{}: stopped before {n} clients, the sweep's time bound",
                    server.label()
                ));
                break;
            }
            let Some(s) = server.scenario(n, seconds) else {
                continue;
            };
            s.validate()?;
            let row = run::run_once(&s, &bin, false)?;
            eprintln!(
                "{} {n:>4} clients: delivery {:.3}%, {:.2} ms CPU per client-s, p99 gap {:.2} ms, RSS {:.0} MB, tones {}",
                server.label(),
                row.delivery_pct,
                row.cpu_ms_per_client_s,
                row.p99_interarrival_ms,
                row.rss_mb,
                if row.tones_ok { "ok" } else { "NOT heard" }
            );
            let (delivered, joined) = (row.delivery_pct, row.joined);
            // Forward mode's delivery is a share of what the emulator sent: a count where it
            // could not send the whole load measured the server under less.
            let offered = row.offered_pct();
            if delivered >= KNEE_PCT && joined == n && offered >= KNEE_PCT {
                best = Some(n);
            }
            rows.push(row);
            if delivered < FELL_APART_PCT || joined < n || offered < FELL_APART_PCT {
                notes.push(format!(
                    "{}: {delivered:.2}% delivered to the {joined} of {n} clients it admitted, \
                     {offered:.2}% of the load offered; larger counts not run",
                    server.label()
                ));
                break;
            }
        }
        knee.insert(
            server.label().into(),
            best.map_or(serde_json::Value::Null, |n| json!(n)),
        );
    }
    let out =
        json!({ "rows": rows, "knee": knee, "notes": notes, "seconds": t0.elapsed().as_secs() });
    if let Some(file) = option(args, "--plot") {
        write_plot(&out, &file)?;
    }
    Ok(out)
}

/// Draws the rows of a sweep's output `v` into `file` (SVG).
fn write_plot(v: &serde_json::Value, file: &str) -> Result<(), String> {
    let points: Vec<plot::Point> = v["rows"]
        .as_array()
        .ok_or("the sweep output has no rows")?
        .iter()
        .map(|r| plot::Point {
            server: plot::series(
                r["server"].as_str().unwrap_or("?"),
                r["mode"].as_str().unwrap_or("mix"),
            ),
            clients: r["clients"].as_u64().unwrap_or(0) as usize,
            cpu_ms_per_client_s: r["cpu_ms_per_client_s"].as_f64().unwrap_or(f64::NAN),
            delivery_pct: r["delivery_pct"].as_f64().unwrap_or(f64::NAN),
        })
        .collect();
    let title =
        "Mix: one room of JackTrip clients; forward: rooms of 5 app clients (loopback, same run)";
    std::fs::write(file, plot::svg(&points, title)).map_err(|e| format!("{file}: {e}"))
}

/// `--plot FILE --from JSON`: the picture of a sweep's output (its last line).
fn replot(args: &[String], file: &str) -> Result<serde_json::Value, String> {
    let from = option(args, "--from").ok_or("--plot without --sweep needs --from SWEEP.json")?;
    let text = std::fs::read_to_string(&from).map_err(|e| format!("{from}: {e}"))?;
    let last = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or("no JSON line")?;
    let v: serde_json::Value = serde_json::from_str(last).map_err(|e| format!("{from}: {e}"))?;
    write_plot(&v, file)?;
    Ok(json!({ "plot": file, "rows": v["rows"].as_array().map_or(0, Vec::len) }))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = if args.iter().any(|a| a == "--sweep") {
        sweep(&args)
    } else if let Some(file) = option(&args, "--plot") {
        replot(&args, &file)
    } else if let Some(path) = args.iter().find(|a| !a.starts_with("--")) {
        std::fs::read_to_string(path)
            .map_err(|e| format!("{path}: {e}"))
            .and_then(|text| Scenario::from_toml(&text))
            .and_then(|s| {
                let bin = server_bin(&args)?;
                run::run_once(&s, &bin, false)
            })
            .map(|row| json!({ "rows": [row] }))
    } else {
        Err("usage: tutti-loadgen SCENARIO.toml | --sweep [--clients 5,10,20] [--seconds 10] [--servers tutti-hub,jacktrip] [--server-bin PATH] [--plot FILE.svg] | --plot FILE.svg --from SWEEP.json".into())
    };
    match result {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tutti-loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}
