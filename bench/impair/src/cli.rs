//! Command-line flags. Every error is a sentence naming the flag; `main` prints it and exits 2.

use crate::impair::{Config, RateConfig, NS_PER_MS};
use std::path::PathBuf;

pub const USAGE: &str = "\
usage: tutti-impair --duration-s S [options]

Holds each packet of an NFQUEUE queue, then drops it or lets it through. Run as root in a private
network namespace with a rule such as
  iptables-legacy -A OUTPUT -o lo -p udp -j NFQUEUE --queue-num 0 --queue-bypass
Prints \"ready\" once bound, and the statistics as JSON when it ends.

  --duration-s S        stop after S seconds (required)
  --queue N             NFQUEUE queue number (0)
  --delay-ms MS         fixed delay (0)
  --jitter-ms MS        uniform jitter, delay ± MS; at most the delay (0)
  --reorder             draw each packet's delay alone (packets overtake); default keeps order
  --loss P              long-run fraction of packets lost, 0 <= P < 1 (0)
  --loss-run N          mean length of a run of losses; 1 = independent losses (1)
  --rate-kbit K         token-bucket rate limit in kbit/s (none)
  --rate-burst-bytes B  bucket depth (1514)
  --rate-queue N        packets that may wait for tokens; more are dropped (100)
  --seed N              random seed (1)
  --realtime            run under SCHED_FIFO (priority 10): verdicts stay on time on a busy machine
  --stats-out FILE      also write the statistics JSON to FILE (on exit, SIGTERM or SIGINT)
  --help                this text
";

/// A run's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub queue: u16,
    pub realtime: bool,
    pub duration_ns: u64,
    pub model: Config,
    pub stats_out: Option<PathBuf>,
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Run(Options),
    Help,
}

fn number(flag: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{flag} needs a number, got {value:?}")),
    }
}

fn non_negative(flag: &str, value: &str) -> Result<f64, String> {
    let v = number(flag, value)?;
    if v < 0.0 {
        return Err(format!("{flag} must not be negative, got {value}"));
    }
    Ok(v)
}

fn integer<T: std::str::FromStr>(flag: &str, value: &str, what: &str) -> Result<T, String> {
    value
        .parse::<T>()
        .map_err(|_| format!("{flag} needs {what}, got {value:?}"))
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms * NS_PER_MS as f64).round() as u64
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut queue = 0u16;
    let mut duration_s = None;
    let mut delay_ms = 0.0;
    let mut jitter_ms = 0.0;
    let mut reorder = false;
    let mut realtime = false;
    let mut loss = 0.0;
    let mut loss_run = 1.0;
    let mut rate_kbit = None;
    let mut burst = 1514u32;
    let mut rate_queue = 100u32;
    let mut seed = 1u64;
    let mut stats_out = None;

    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        match flag {
            "--help" | "-h" => return Ok(Command::Help),
            "--reorder" | "--realtime" => {
                if inline.is_some() {
                    return Err(format!("{flag} takes no value"));
                }
                if flag == "--reorder" {
                    reorder = true;
                } else {
                    realtime = true;
                }
                continue;
            }
            _ => {}
        }
        let mut value = || -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        match flag {
            "--queue" => queue = integer(flag, &value()?, "a queue number 0-65535")?,
            "--duration-s" => {
                let v = number(flag, &value()?)?;
                if v <= 0.0 {
                    return Err(format!("--duration-s must be above 0, got {v}"));
                }
                duration_s = Some(v);
            }
            "--delay-ms" => delay_ms = non_negative(flag, &value()?)?,
            "--jitter-ms" => jitter_ms = non_negative(flag, &value()?)?,
            "--loss" => loss = number(flag, &value()?)?,
            "--loss-run" => {
                loss_run = number(flag, &value()?)?;
                if loss_run < 1.0 {
                    return Err(format!(
                        "--loss-run is a mean run length, at least 1, got {loss_run}"
                    ));
                }
            }
            "--rate-kbit" => {
                let v = number(flag, &value()?)?;
                if v <= 0.0 {
                    return Err(format!("--rate-kbit must be above 0, got {v}"));
                }
                rate_kbit = Some(v);
            }
            "--rate-burst-bytes" => burst = integer(flag, &value()?, "a byte count")?,
            "--rate-queue" => rate_queue = integer(flag, &value()?, "a packet count")?,
            "--seed" => seed = integer(flag, &value()?, "an unsigned 64-bit integer")?,
            "--stats-out" => stats_out = Some(PathBuf::from(value()?)),
            _ => return Err(format!("unknown flag {arg:?}")),
        }
    }

    let duration_s = duration_s.ok_or("--duration-s is required: the run must end by itself")?;
    if jitter_ms > delay_ms {
        return Err(format!(
            "--jitter-ms ({jitter_ms}) must not exceed --delay-ms ({delay_ms}): delays would be cut at 0"
        ));
    }
    let rate = rate_kbit.map(|k| RateConfig {
        bits_per_s: (k * 1000.0).round().max(1.0) as u64,
        burst_bytes: burst,
        queue_packets: rate_queue,
    });
    Ok(Command::Run(Options {
        queue,
        realtime,
        duration_ns: (duration_s * 1e9).round() as u64,
        model: Config {
            delay_ns: ms_to_ns(delay_ms),
            jitter_ns: ms_to_ns(jitter_ms),
            reorder,
            loss,
            loss_run,
            rate,
            seed,
        },
        stats_out,
    }))
}

/// The settings as JSON, echoed in the statistics.
pub fn config_json(o: &Options) -> String {
    let m = &o.model;
    let rate = match &m.rate {
        Some(r) => format!(
            "{{\"kbit\":{},\"burst_bytes\":{},\"queue_packets\":{}}}",
            r.bits_per_s as f64 / 1000.0,
            r.burst_bytes,
            r.queue_packets
        ),
        None => "null".into(),
    };
    format!(
        "{{\"queue\":{},\"realtime\":{},\"duration_s\":{},\"delay_ms\":{},\"jitter_ms\":{},\"reorder\":{},\
         \"loss\":{},\"loss_run\":{},\"rate\":{},\"seed\":{}}}",
        o.queue,
        o.realtime,
        o.duration_ns as f64 / 1e9,
        m.delay_ns as f64 / 1e6,
        m.jitter_ns as f64 / 1e6,
        m.reorder,
        m.loss,
        m.loss_run,
        rate,
        m.seed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, String> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn opts(args: &[&str]) -> Options {
        match p(args) {
            Ok(Command::Run(o)) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn parses_every_flag() {
        let o = opts(&[
            "--duration-s",
            "2.5",
            "--queue=3",
            "--delay-ms",
            "10",
            "--jitter-ms",
            "3",
            "--reorder",
            "--loss",
            "0.02",
            "--loss-run",
            "4",
            "--rate-kbit",
            "800",
            "--rate-burst-bytes",
            "3000",
            "--rate-queue",
            "20",
            "--seed",
            "7",
            "--stats-out",
            "/tmp/x.json",
            "--realtime",
        ]);
        assert_eq!(o.queue, 3);
        assert!(o.realtime);
        assert_eq!(o.duration_ns, 2_500_000_000);
        assert_eq!(o.model.delay_ns, 10_000_000);
        assert_eq!(o.model.jitter_ns, 3_000_000);
        assert!(o.model.reorder);
        assert_eq!(
            (o.model.loss, o.model.loss_run, o.model.seed),
            (0.02, 4.0, 7)
        );
        assert_eq!(
            o.model.rate,
            Some(RateConfig {
                bits_per_s: 800_000,
                burst_bytes: 3000,
                queue_packets: 20
            })
        );
        assert_eq!(o.stats_out, Some(PathBuf::from("/tmp/x.json")));
        let j = config_json(&o);
        assert!(
            j.contains(
                "\"delay_ms\":10,\"jitter_ms\":3,\"reorder\":true,\"loss\":0.02,\"loss_run\":4"
            ),
            "{j}"
        );
    }

    #[test]
    fn defaults_impair_nothing() {
        let o = opts(&["--duration-s", "1"]);
        assert_eq!(o.model, Config::default());
        assert_eq!(o.queue, 0);
        assert!(!o.realtime);
        assert_eq!(p(&["--help"]), Ok(Command::Help));
    }

    #[test]
    fn bad_flags_are_sentences() {
        let err = |args: &[&str]| p(args).expect_err("must be refused");
        assert!(err(&[]).contains("--duration-s is required"));
        assert!(err(&["--duration-s", "0"]).contains("above 0"));
        assert!(err(&["--duration-s", "1", "--delay-ms"]).contains("needs a value"));
        assert!(err(&["--duration-s", "1", "--delay-ms", "ten"]).contains("needs a number"));
        assert!(err(&["--duration-s", "1", "--delay-ms", "-1"]).contains("negative"));
        assert!(err(&["--duration-s", "1", "--queue", "70000"]).contains("queue number"));
        assert!(err(&["--duration-s", "1", "--loss-run", "0.5"]).contains("at least 1"));
        assert!(err(&["--duration-s", "1", "--jitter-ms", "5"]).contains("must not exceed"));
        assert!(err(&["--duration-s", "1", "--rate-kbit", "0"]).contains("above 0"));
        assert!(err(&["--duration-s", "1", "--frobnicate"]).contains("unknown flag"));
        assert!(err(&["--duration-s", "1", "--reorder=yes"]).contains("no value"));
        assert!(err(&["--duration-s", "inf"]).contains("needs a number"));
    }
}
