//! The `tutti-impair` command: flags in, "ready" once bound, statistics JSON out. See the crate
//! documentation for the design and `--help` for the flags.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use tutti_impair::cli::{self, Command, USAGE};
use tutti_impair::impair::Impairer;
use tutti_impair::run;
use tutti_impair::stats::{Stats, Stop};
use tutti_impair::sys::{self, SignalFd};

/// Writes `json` to `path` through a temporary file, so a reader never sees half of it.
fn write_stats(path: &Path, json: &str) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{json}\n"))?;
    std::fs::rename(&tmp, path)
}

fn bind_hint(err: &io::Error, queue: u16) -> String {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match err.raw_os_error() {
        Some(libc::EPERM) if !root => {
            "run it as root (CAP_NET_ADMIN), inside a private network namespace (unshare -n)".into()
        }
        Some(libc::EPERM) => format!("another program holds queue {queue}"),
        Some(libc::EPROTONOSUPPORT) | Some(libc::EAFNOSUPPORT) => {
            "this kernel has no netfilter netlink (nfnetlink_queue)".into()
        }
        _ => "is nfnetlink_queue available, and are we root in a network namespace?".into(),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match cli::parse(&args) {
        Ok(Command::Run(o)) => o,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("tutti-impair: {e}\n(see tutti-impair --help)");
            return ExitCode::from(2);
        }
    };
    let mut model = match Impairer::new(&opts.model) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("tutti-impair: {e}");
            return ExitCode::from(2);
        }
    };
    // Before binding: a SIGTERM that comes right after "ready" must already be ours to handle.
    let signals = match SignalFd::term_and_int() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tutti-impair: cannot set up signal handling: {e}");
            return ExitCode::from(1);
        }
    };
    let realtime = opts.realtime
        && match sys::set_realtime() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("tutti-impair: --realtime refused ({e}): running at normal priority");
                false
            }
        };
    if let Err(e) = sys::set_timer_slack_ns(1) {
        eprintln!("tutti-impair: warning: timer slack stays at its default: {e}");
    }
    let (sock, rcvbuf) = match run::bind(opts.queue) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "tutti-impair: cannot bind NFQUEUE queue {}: {e} ({})",
                opts.queue,
                bind_hint(&e, opts.queue)
            );
            return ExitCode::from(1);
        }
    };
    {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }

    let mut stats = Stats {
        rcvbuf,
        realtime,
        ..Stats::default()
    };
    let result = run::run(
        &sock,
        &signals,
        opts.queue,
        &mut model,
        opts.duration_ns,
        &mut stats,
    );
    let failed = match result {
        Ok(stop) => {
            stats.stop = Some(stop);
            None
        }
        Err(e) => {
            stats.stop = Some(Stop::Error);
            Some(e)
        }
    };
    let json = stats.to_json(&cli::config_json(&opts));
    let mut code = ExitCode::SUCCESS;
    if let Some(path) = &opts.stats_out {
        if let Err(e) = write_stats(path, &json) {
            eprintln!("tutti-impair: cannot write {}: {e}", path.display());
            code = ExitCode::from(1);
        }
    }
    let _ = writeln!(io::stdout().lock(), "{json}");
    if let Some(e) = failed {
        eprintln!("tutti-impair: stopped: {e}");
        code = ExitCode::from(1);
    }
    code
}
