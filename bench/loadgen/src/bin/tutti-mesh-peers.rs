//! Mesh peers toward one real browser page (the library's `mesh` module): joins `--peers`
//! emulated members to `--room` on the server at `--server` (loopback), waits until each is
//! linked to the page, plays `--seconds`, and prints one JSON line with what they did. A line of
//! progress per second goes to stderr. The browser bench (bench/mesh-page.mjs) runs it.
//!
//! Usage: `tutti-mesh-peers --server 127.0.0.1:PORT --room ROOM --peers N [--seconds 60]
//! [--frames 128] [--link-timeout 30]`

use std::process::ExitCode;

use serde_json::json;
use tutti_loadgen::mesh::{run, Options};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn options(args: &[String]) -> Result<Options, String> {
    let number = |name: &str, default: &str| -> Result<f64, String> {
        let v = arg(args, name).unwrap_or_else(|| default.into());
        v.parse::<f64>()
            .map_err(|_| format!("{name} {v}: not a number"))
    };
    let server = arg(args, "--server").ok_or("--server ADDR is required")?;
    Ok(Options {
        server: server
            .parse()
            .map_err(|_| format!("--server {server}: not an IP:PORT"))?,
        room: arg(args, "--room").ok_or("--room NAME is required")?,
        peers: number("--peers", "4")? as usize,
        frames: number("--frames", "128")? as u16,
        seconds: number("--seconds", "60")?,
        link_timeout: number("--link-timeout", "30")?,
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = options(&args).and_then(|o| run(&o, &mut |line| eprintln!("{line}")));
    match result {
        Ok(s) => {
            println!(
                "{}",
                json!({"mesh_peers": {"peers": s.peers, "linked": s.linked, "sent": s.sent,
                       "refused": s.refused, "skipped": s.skipped, "received": s.received, "pongs": s.pongs,
                       "renegotiated": s.renegotiated, "dropped": s.dropped}})
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tutti-mesh-peers: {e}");
            ExitCode::FAILURE
        }
    }
}
