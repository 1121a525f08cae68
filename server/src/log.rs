//! The server's log: one line per event on stderr, prefixed with a UTC timestamp
//! (`2026-11-21T14:03:07Z join room=jam ...`), and [`Throttle`], which keeps a flood of similar
//! events (refused connections) from filling the disk: one line per address per window, then a
//! summary.
//!
//! Events are `tracing` events (`tracing::info!` with the whole line as the message), written
//! by `tracing-subscriber`'s formatter set up in [`init`]: the ecosystem's logger, so `RUST_LOG`
//! filters it (default `info`) and the calendar arithmetic of the timestamp is the `time`
//! crate's. The line stays what it was before the change (timestamp, space, message: no level or
//! module), because operators and tests read and grep it. Each line is one unbuffered write to
//! stderr, so a reader waiting for a line sees it at once. Written by hand here is only what is
//! Tutti's own policy: [`Throttle`]'s windows, and [`short_peer`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::time::UtcTime;
use tracing_subscriber::fmt::MakeWriter;

/// The timestamp that starts every line: UTC, to the second, `2026-11-21T14:03:07Z`.
pub const TIMESTAMP: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");

/// Installs the process's logger: events at `RUST_LOG`'s levels (`info` if unset; directives
/// it cannot parse are ignored) go to stderr as `TIMESTAMP message`. Call once, first thing.
pub fn init() {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env_lossy();
    // Only fails if a logger is installed already, which then stays.
    let _ = tracing::subscriber::set_global_default(subscriber(filter, std::io::stderr));
}

/// The formatter of [`init`], writing to `writer`.
fn subscriber<W>(filter: EnvFilter, writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_timer(UtcTime::new(TIMESTAMP))
        .with_ansi(false)
        .with_level(false)
        .with_target(false)
        .finish()
}

/// Writes each of `lines` (e.g. from a [`Throttle`]) as its own event.
pub fn lines(lines: &[String]) {
    for line in lines {
        tracing::info!("{line}");
    }
}

/// A peer id shortened for logs: its first 6 chars and an ellipsis.
pub fn short_peer(peer: &str) -> String {
    let head: String = peer.chars().take(6).collect();
    format!("{head}…")
}

/// How often [`Throttle`] writes about one key: the first event of a window is written in
/// full, the rest of the window is summarised in one line.
pub const THROTTLE_WINDOW: Duration = Duration::from_secs(10);
/// Most keys with a window open at once; events for further keys are only counted.
pub const THROTTLE_KEYS: usize = 16;

/// Decides which lines about repeated events to write. Told the time by its caller; at most
/// `2 × THROTTLE_KEYS + 1` lines per window whatever the flood.
pub struct Throttle {
    label: &'static str,
    windows: HashMap<String, Window>,
    /// Events for keys that found no free window, since the last [`Throttle::flush`].
    untracked: u64,
}

struct Window {
    start: Instant,
    /// Events after the first, by kind.
    more: Vec<(&'static str, u64)>,
}

impl Window {
    fn summary(&self, label: &str, key: &str, now: Instant) -> Option<String> {
        let total: u64 = self.more.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return None;
        }
        let kinds: Vec<String> = self.more.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let secs = now.saturating_duration_since(self.start).as_secs().max(1);
        Some(format!(
            "{label} addr={key}: {total} more in {secs} s ({})",
            kinds.join(", ")
        ))
    }
}

impl Throttle {
    /// `label` starts every line, e.g. `refused`.
    pub fn new(label: &'static str) -> Self {
        Self {
            label,
            windows: HashMap::new(),
            untracked: 0,
        }
    }

    /// An event of `kind` about `key` at `now`, described by `detail`; returns the lines to
    /// write now (none while the key's window is open).
    pub fn note(
        &mut self,
        key: &str,
        kind: &'static str,
        detail: &str,
        now: Instant,
    ) -> Vec<String> {
        let line = format!("{} addr={key} {detail}", self.label);
        let room = self.windows.len() < THROTTLE_KEYS;
        match self.windows.get_mut(key) {
            Some(w) if now.saturating_duration_since(w.start) < THROTTLE_WINDOW => {
                match w.more.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, n)) => *n += 1,
                    None => w.more.push((kind, 1)),
                }
                Vec::new()
            }
            Some(w) => {
                let summary = w.summary(self.label, key, now);
                *w = Window {
                    start: now,
                    more: Vec::new(),
                };
                summary.into_iter().chain([line]).collect()
            }
            None if room => {
                self.windows.insert(
                    key.to_owned(),
                    Window {
                        start: now,
                        more: Vec::new(),
                    },
                );
                vec![line]
            }
            None => {
                self.untracked += 1;
                Vec::new()
            }
        }
    }

    /// Ends the windows that are over, returning their summaries; call about once per
    /// [`THROTTLE_WINDOW`].
    pub fn flush(&mut self, now: Instant) -> Vec<String> {
        self.end_windows(now, false)
    }

    /// Ends all windows, over or not (when the server stops).
    pub fn flush_all(&mut self, now: Instant) -> Vec<String> {
        self.end_windows(now, true)
    }

    fn end_windows(&mut self, now: Instant, all: bool) -> Vec<String> {
        let mut lines = Vec::new();
        let label = self.label;
        self.windows.retain(|key, w| {
            if !all && now.saturating_duration_since(w.start) < THROTTLE_WINDOW {
                return true;
            }
            lines.extend(w.summary(label, key, now));
            false
        });
        if self.untracked > 0 {
            lines.push(format!(
                "{label}: {} more from addresses not listed (at most {THROTTLE_KEYS} are)",
                self.untracked
            ));
            self.untracked = 0;
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_format_known_instants() {
        let at = |secs: i64| {
            let t = time::OffsetDateTime::from_unix_timestamp(secs).expect("a valid instant");
            t.format(TIMESTAMP).expect("formats")
        };
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // `date -u -d @951782400` → 2000-02-29 00:00:00 (a leap day).
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        // `date -u -d @1795269787` → 2026-11-21T14:03:07Z.
        assert_eq!(at(1_795_269_787), "2026-11-21T14:03:07Z");
    }

    /// What the formatter writes: each event one line, `TIMESTAMP message`, nothing below the
    /// filter's level.
    #[test]
    fn lines_are_timestamp_then_message() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("sink lock").extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        let now = || {
            let t = time::OffsetDateTime::now_utc();
            t.format(TIMESTAMP).expect("formats")
        };
        let before = now();
        tracing::subscriber::with_default(
            subscriber(EnvFilter::new("info"), move || writer.clone()),
            || {
                tracing::info!("join room=jam private peer={} name={:?}", "ba9f4a…", "Olga");
                tracing::debug!("not at the default level");
                lines(&["refused addr=1.2.3.4 status=429".to_owned()]);
            },
        );
        let after = now();
        let out = String::from_utf8(sink.0.lock().expect("sink lock").clone()).expect("UTF-8");
        let got: Vec<(&str, &str)> = out
            .lines()
            .map(|l| l.split_once(' ').expect("a space after the timestamp"))
            .collect();
        let messages: Vec<&str> = got.iter().map(|(_, m)| *m).collect();
        assert_eq!(
            messages,
            [
                "join room=jam private peer=ba9f4a… name=\"Olga\"",
                "refused addr=1.2.3.4 status=429"
            ],
            "{out}"
        );
        // Same fixed-width format: text order is time order.
        for (stamp, _) in got {
            assert!(
                before.as_str() <= stamp && stamp <= after.as_str(),
                "{stamp} not in {before}..={after}"
            );
        }
    }

    #[test]
    fn throttle_writes_one_line_per_key_per_window() {
        let t0 = Instant::now();
        let mut t = Throttle::new("refused");
        assert_eq!(
            t.note("1.2.3.4", "rate", "status=429 reason=rate", t0),
            vec!["refused addr=1.2.3.4 status=429 reason=rate"]
        );
        for i in 0..1000u32 {
            let kind = if i % 4 == 0 { "full" } else { "rate" };
            assert!(t
                .note("1.2.3.4", kind, "x", t0 + Duration::from_millis(i.into()))
                .is_empty());
        }
        assert!(
            t.flush(t0 + Duration::from_secs(9)).is_empty(),
            "window still open"
        );
        assert_eq!(
            t.flush(t0 + THROTTLE_WINDOW),
            vec!["refused addr=1.2.3.4: 1000 more in 10 s (full 250, rate 750)"]
        );
        // A new window writes in full again.
        let t1 = t0 + Duration::from_secs(11);
        assert_eq!(t.note("1.2.3.4", "rate", "y", t1).len(), 1);
        // An event after the window but before a flush writes the summary first.
        assert!(t.note("1.2.3.4", "rate", "y", t1).is_empty());
        let lines = t.note("1.2.3.4", "rate", "z", t1 + THROTTLE_WINDOW);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains(": 1 more in 10 s (rate 1)"), "{lines:?}");
    }

    #[test]
    fn throttle_bounds_lines_across_many_keys() {
        let t0 = Instant::now();
        let mut t = Throttle::new("refused");
        let mut written = 0;
        for round in 0..10u32 {
            let now = t0 + THROTTLE_WINDOW * round;
            for key in 0..10_000 {
                let key = format!("10.0.{}.{}", key / 256, key % 256);
                written += t.note(&key, "rate", "x", now).len();
            }
            written += t.flush(now + THROTTLE_WINDOW).len();
        }
        // Per window: THROTTLE_KEYS first lines + summaries + 1 untracked line at most.
        assert!(written <= 10 * (2 * THROTTLE_KEYS + 1), "{written} lines");
        assert!(written >= THROTTLE_KEYS, "{written} lines");
    }
}
