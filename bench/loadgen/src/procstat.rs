//! CPU time and resident memory of a set of processes, every thread of each, read from
//! `/proc` between two moments: what the server under test spent while the load ran.
//!
//! Per thread, CPU time comes from `/proc/PID/task/TID/schedstat` (nanoseconds on a CPU, as
//! the scheduler accounts them) and, where the kernel has no schedstat, from `utime + stime`
//! of `/proc/PID/task/TID/stat` (clock ticks: 10 ms steps at the usual 100 per second). Names
//! come from `comm`, memory from `VmRSS` of `/proc/PID/status`.
//!
//! Limits of the method:
//! - A thread that ends between two samples takes its CPU time since the previous sample with
//!   it: it is not counted (short-lived threads are undercounted; the servers measured here
//!   keep theirs).
//! - A thread first seen at a sample counts all its CPU time: it started after the previous
//!   reading. A process joined with [`ProcSet::add_pid`] counts from that moment.
//! - A process that ended (or is a zombie) leaves the set without an error.
//! - VmRSS counts shared memory in every process that maps it: JACK's shared segments (locked
//!   in memory, about 100 MiB on a default jackd) count in jackd and again in each of its
//!   clients that maps them.
//!
//! Written by hand: a few files of `/proc` need no crate, and the parsers here can be tested
//! on known text, malformed text included.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;
use std::time::Instant;

/// Clock ticks per second assumed when the auxiliary vector does not say (Linux's USER_HZ).
const DEFAULT_TICKS: u64 = 100;
/// `AT_CLKTCK` in the auxiliary vector: the clock ticks per second of `/proc`'s times.
const AT_CLKTCK: usize = 17;

/// CPU and memory of a set of processes (all their threads), read from /proc.
pub struct ProcSet {
    pids: Vec<u32>,
    /// The previous reading of each thread, by (pid, tid).
    prev: HashMap<(u32, u32), Reading>,
    at: Instant,
    ticks_per_sec: u64,
    /// Readings with malformed content, skipped.
    skipped: u64,
}

/// One thread's CPU time over a sampling interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadCpu {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    pub cpu_ms: f64,
}

/// What the set spent between two readings.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcSample {
    /// CPU time of every thread of the set since the previous sample (or since `new`), ms.
    pub cpu_ms: f64,
    /// Wall time since the previous sample, ms.
    pub wall_ms: f64,
    /// Per thread over the same interval, largest first. Threads that ended in between are not
    /// here and their CPU time is lost (not in `cpu_ms` either).
    pub threads: Vec<ThreadCpu>,
    /// Resident set size of the set now (sum of VmRSS), MiB.
    pub rss_mb: f64,
}

/// A thread's total CPU time, ns, and whether it came from schedstat (else from ticks).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reading {
    ns: u64,
    precise: bool,
}

/// One process read at one moment.
struct ProcReading {
    threads: Vec<(u32, String, Reading)>,
    rss_kb: u64,
}

/// What `/proc/PID/status` says that matters here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status {
    /// The state letter (`R`, `S`, `Z` ...), if the line is there.
    pub state: Option<char>,
    /// VmRSS in kB; absent for zombies and kernel threads.
    pub rss_kb: Option<u64>,
}

impl ProcSet {
    /// Takes the first reading of `pids`. A pid that does not exist (or is a zombie) is an
    /// error of kind `NotFound`; an empty list gives an empty set.
    pub fn new(pids: &[u32]) -> io::Result<ProcSet> {
        let mut set = ProcSet {
            pids: Vec::new(),
            prev: HashMap::new(),
            at: Instant::now(),
            ticks_per_sec: clock_ticks(),
            skipped: 0,
        };
        for &pid in pids {
            if set.pids.contains(&pid) {
                continue;
            }
            let Some(reading) = set.read_process(pid)? else {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("process {pid} does not exist or has ended"),
                ));
            };
            set.keep(pid, &reading);
            set.pids.push(pid);
        }
        set.at = Instant::now();
        Ok(set)
    }

    /// CPU time and wall time since the previous reading, and memory now. Processes that ended
    /// meanwhile are dropped from the set. An error (e.g. `/proc` refusing access) leaves the
    /// previous reading in place.
    pub fn sample(&mut self) -> io::Result<ProcSample> {
        let now = Instant::now();
        let mut next = HashMap::with_capacity(self.prev.len());
        let mut threads = Vec::with_capacity(self.prev.len());
        let mut alive = Vec::with_capacity(self.pids.len());
        let mut rss_kb = 0;
        let mut total_ns = 0u64;
        for pid in self.pids.clone() {
            let Some(reading) = self.read_process(pid)? else {
                continue;
            };
            alive.push(pid);
            rss_kb += reading.rss_kb;
            for (tid, name, now_reading) in reading.threads {
                let ns = match self.prev.get(&(pid, tid)) {
                    // The same thread, read the same way.
                    Some(r) if r.precise == now_reading.precise && r.ns <= now_reading.ns => {
                        now_reading.ns - r.ns
                    }
                    // Read another way than before: no common baseline, start over.
                    Some(r) if r.precise != now_reading.precise => 0,
                    // New, or a reused tid whose total fell: all of it is new.
                    _ => now_reading.ns,
                };
                total_ns = total_ns.saturating_add(ns);
                next.insert((pid, tid), now_reading);
                threads.push(ThreadCpu {
                    pid,
                    tid,
                    name,
                    cpu_ms: ns as f64 / 1e6,
                });
            }
        }
        threads.sort_by(|a, b| b.cpu_ms.total_cmp(&a.cpu_ms));
        let wall_ms = now.duration_since(self.at).as_secs_f64() * 1e3;
        self.prev = next;
        self.pids = alive;
        self.at = now;
        Ok(ProcSample {
            cpu_ms: total_ns as f64 / 1e6,
            wall_ms,
            threads,
            rss_mb: rss_kb as f64 / 1024.0,
        })
    }

    /// Adds a process started later (e.g. a child); its CPU time counts from now. A pid that
    /// does not exist is not added; one that cannot be read now is added, and the next
    /// [`ProcSet::sample`] reports the error.
    pub fn add_pid(&mut self, pid: u32) {
        if self.pids.contains(&pid) {
            return;
        }
        match self.read_process(pid) {
            Ok(None) => {}
            Ok(Some(reading)) => {
                self.keep(pid, &reading);
                self.pids.push(pid);
            }
            Err(_) => self.pids.push(pid),
        }
    }

    /// The processes still in the set.
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// How many readings were skipped for malformed content since [`ProcSet::new`].
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    fn keep(&mut self, pid: u32, reading: &ProcReading) {
        for (tid, _, r) in &reading.threads {
            self.prev.insert((pid, *tid), *r);
        }
    }

    /// Every thread of `pid` and its memory; `None` when the process has ended.
    fn read_process(&mut self, pid: u32) -> io::Result<Option<ProcReading>> {
        let dir = Path::new("/proc").join(pid.to_string());
        let status = match fs::read_to_string(dir.join("status")) {
            Ok(text) => text,
            Err(e) if vanished(&e) => return Ok(None),
            Err(e) => return Err(with_context(e, &format!("/proc/{pid}/status"))),
        };
        let rss_kb = match parse_status(&status) {
            Ok(Status {
                state: Some('Z' | 'X'),
                ..
            }) => return Ok(None),
            Ok(s) => s.rss_kb.unwrap_or(0),
            Err(_) => {
                self.skipped += 1;
                0
            }
        };
        let tasks = match fs::read_dir(dir.join("task")) {
            Ok(tasks) => tasks,
            Err(e) if vanished(&e) => return Ok(None),
            Err(e) => return Err(with_context(e, &format!("/proc/{pid}/task"))),
        };
        let mut threads = Vec::new();
        for entry in tasks {
            // An entry that cannot be read is a thread ending while the directory is listed.
            let Ok(entry) = entry else { continue };
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                self.skipped += 1;
                continue;
            };
            let task = entry.path();
            match self.thread_cpu(&task) {
                Ok(reading) => {
                    let name = fs::read_to_string(task.join("comm"))
                        .map(|s| s.trim_end_matches('\n').to_owned())
                        .unwrap_or_default();
                    threads.push((tid, name, reading));
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidData => self.skipped += 1,
                // The thread ended.
                Err(_) => {}
            }
        }
        Ok(Some(ProcReading { threads, rss_kb }))
    }

    /// A thread's CPU time: schedstat when it is there and well formed, else stat's ticks.
    fn thread_cpu(&mut self, task: &Path) -> io::Result<Reading> {
        match fs::read_to_string(task.join("schedstat")) {
            Ok(text) => match parse_schedstat(&text) {
                Ok(ns) => return Ok(Reading { ns, precise: true }),
                Err(_) => self.skipped += 1,
            },
            // No schedstat in this kernel: stat it is.
            Err(e) if e.kind() == io::ErrorKind::NotFound && task.exists() => {}
            Err(e) => return Err(e),
        }
        let stat = fs::read_to_string(task.join("stat"))?;
        let ticks = parse_stat_ticks(&stat)?;
        let ns = u128::from(ticks) * 1_000_000_000 / u128::from(self.ticks_per_sec.max(1));
        Ok(Reading {
            ns: u64::try_from(ns).unwrap_or(u64::MAX),
            precise: false,
        })
    }
}

/// Whether a read failed because the process or thread is gone.
fn vanished(e: &io::Error) -> bool {
    // ESRCH: the directory is still listed but its task has been released.
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(3)
}

fn with_context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn invalid(what: &str, text: &str) -> io::Error {
    let shown: String = text.chars().take(80).collect();
    io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {shown:?}"))
}

/// Nanoseconds on a CPU: the first field of a schedstat line (`"142086 3251207 2\n"`).
pub(crate) fn parse_schedstat(text: &str) -> io::Result<u64> {
    text.split_ascii_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| invalid("schedstat", text))
}

/// `utime + stime` (clock ticks) of a stat line. The command name in parentheses may hold
/// spaces and parentheses itself, so fields are counted from the last `)`.
pub(crate) fn parse_stat_ticks(text: &str) -> io::Result<u64> {
    let rest = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or_else(|| invalid("stat", text))?;
    // After the name: state (field 3) ... utime (field 14), stime (field 15).
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| -> io::Result<u64> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .ok_or_else(|| invalid("stat", text))
    };
    Ok(field(14)?.saturating_add(field(15)?))
}

/// The state and VmRSS of a status file. A VmRSS line that is not `N kB` is malformed.
pub(crate) fn parse_status(text: &str) -> io::Result<Status> {
    let mut status = Status {
        state: None,
        rss_kb: None,
    };
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("State:") {
            status.state = v.trim_start().chars().next();
        } else if let Some(v) = line.strip_prefix("VmRSS:") {
            let kb = v
                .trim()
                .strip_suffix("kB")
                .and_then(|n| n.trim_end().parse().ok())
                .ok_or_else(|| invalid("VmRSS", line))?;
            status.rss_kb = Some(kb);
        }
    }
    Ok(status)
}

/// `AT_CLKTCK` from an auxiliary vector (pairs of native-endian words, type then value).
pub(crate) fn parse_auxv_clock_ticks(auxv: &[u8]) -> Option<u64> {
    const W: usize = std::mem::size_of::<usize>();
    auxv.chunks_exact(2 * W).find_map(|pair| {
        let kind = usize::from_ne_bytes(pair[..W].try_into().ok()?);
        let value = usize::from_ne_bytes(pair[W..].try_into().ok()?);
        (kind == AT_CLKTCK && value > 0).then_some(value as u64)
    })
}

/// Clock ticks per second of `/proc`'s times (this process's auxiliary vector says).
fn clock_ticks() -> u64 {
    fs::read("/proc/self/auxv")
        .ok()
        .and_then(|a| parse_auxv_clock_ticks(&a))
        .unwrap_or(DEFAULT_TICKS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::sync::mpsc;
    use std::time::Duration;

    /// The calling thread's CPU time, ns, if the kernel has schedstat.
    fn own_cpu_ns() -> Option<u64> {
        let text = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        parse_schedstat(&text).ok()
    }

    #[test]
    fn a_busy_thread_is_counted_by_name() {
        let mut set = ProcSet::new(&[std::process::id()]).expect("reads this process");
        let (done_tx, done_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let busy = std::thread::Builder::new()
            .name("busy-probe".into())
            .spawn(move || {
                // About 220 ms of CPU by the thread's own clock (a wall deadline where there
                // is none), at most 5 s of waiting for a CPU on a loaded machine.
                let start = (Instant::now(), own_cpu_ns());
                let give_up = start.0 + Duration::from_secs(5);
                let target = Duration::from_millis(220);
                let mut x = 0u64;
                loop {
                    for i in 0..10_000u64 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                    }
                    let spent = match (start.1, own_cpu_ns()) {
                        (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
                        _ => start.0.elapsed(),
                    };
                    if spent >= target || Instant::now() >= give_up {
                        break;
                    }
                }
                let _ = done_tx.send(());
                // Alive until sampled: an ended thread's time is not counted.
                let _ = release_rx.recv_timeout(Duration::from_secs(10));
            })
            .expect("spawns a thread");
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the busy thread finishes");
        let s = set.sample().expect("samples this process");
        let _ = release_tx.send(());
        let _ = busy.join();
        assert!(s.cpu_ms >= 150.0, "cpu_ms {}", s.cpu_ms);
        assert!(s.wall_ms > 0.0);
        assert!(s.rss_mb > 0.0, "rss_mb {}", s.rss_mb);
        let probe = s.threads.iter().find(|t| t.name == "busy-probe");
        assert!(
            probe.is_some_and(|t| t.cpu_ms >= 150.0 && t.pid == std::process::id()),
            "busy-probe: {probe:?} of {:?}",
            s.threads
        );
        assert!(s.threads.windows(2).all(|w| w[0].cpu_ms >= w[1].cpu_ms));
        assert_eq!(set.pids(), &[std::process::id()]);
    }

    #[test]
    fn a_missing_pid_is_an_error_and_an_ended_one_leaves_the_set() {
        // Above any pid_max: no such process.
        let e = ProcSet::new(&[u32::MAX - 1]).err().map(|e| e.kind());
        assert_eq!(e, Some(io::ErrorKind::NotFound));
        assert!(ProcSet::new(&[]).is_ok_and(|s| s.pids().is_empty()));

        let mut child = Command::new("sleep")
            .arg("30")
            .stdout(Stdio::null())
            .spawn()
            .expect("starts sleep");
        let mut set = ProcSet::new(&[std::process::id()]).expect("reads this process");
        set.add_pid(child.id());
        set.add_pid(u32::MAX - 1);
        assert_eq!(set.pids(), &[std::process::id(), child.id()]);
        let _ = child.kill();
        let _ = child.wait();
        let s = set.sample().expect("an ended process is no error");
        assert_eq!(set.pids(), &[std::process::id()]);
        assert!(s.threads.iter().all(|t| t.pid == std::process::id()));
    }

    #[test]
    fn parses_schedstat() {
        assert_eq!(parse_schedstat("142086 3251207 2\n").ok(), Some(142_086));
        assert_eq!(parse_schedstat("7").ok(), Some(7));
        for bad in [
            "",
            "\n",
            "abc 1 2",
            "-5 1 2",
            "1.5 2 3",
            "99999999999999999999999 1 1",
        ] {
            let e = parse_schedstat(bad).err().map(|e| e.kind());
            assert_eq!(e, Some(io::ErrorKind::InvalidData), "{bad:?}");
        }
    }

    #[test]
    fn parses_stat_ticks() {
        let line = "24667 (cat) R 24662 24662 20066 0 -1 4194304 97 0 0 0 12 30 0 0 20 0 1 0 \
                    1254137 3133440 359 18446744073709551615";
        assert_eq!(parse_stat_ticks(line).ok(), Some(42));
        // A name with spaces and parentheses.
        let odd = "5 (a) b (c) S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1";
        assert_eq!(parse_stat_ticks(odd).ok(), Some(7));
        for bad in [
            "",
            "5 (x S 1",
            "5 (x) S 1 1 1 0 -1 0 0 0 0 0",
            "5 (x) S 1 1 1 0 -1 0 0 0 0 0 u 4 0",
        ] {
            let e = parse_stat_ticks(bad).err().map(|e| e.kind());
            assert_eq!(e, Some(io::ErrorKind::InvalidData), "{bad:?}");
        }
    }

    #[test]
    fn parses_status() {
        let text = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\nVmPeak:\t    3060 kB\n\
                    VmRSS:\t    1932 kB\nThreads:\t1\n";
        let s = parse_status(text).ok();
        assert_eq!(
            s,
            Some(Status {
                state: Some('R'),
                rss_kb: Some(1932)
            })
        );
        let zombie = parse_status("Name:\tx\nState:\tZ (zombie)\nThreads:\t1\n").ok();
        assert_eq!(
            zombie,
            Some(Status {
                state: Some('Z'),
                rss_kb: None
            })
        );
        assert_eq!(
            parse_status("").ok(),
            Some(Status {
                state: None,
                rss_kb: None
            })
        );
        for bad in [
            "VmRSS:\t 12 MB\n",
            "VmRSS:\t kB\n",
            "VmRSS:\t-3 kB\n",
            "VmRSS:",
        ] {
            let e = parse_status(bad).err().map(|e| e.kind());
            assert_eq!(e, Some(io::ErrorKind::InvalidData), "{bad:?}");
        }
    }

    #[test]
    fn parses_the_clock_ticks_of_an_auxiliary_vector() {
        let words = |pairs: &[(usize, usize)]| -> Vec<u8> {
            pairs
                .iter()
                .flat_map(|&(k, v)| [k.to_ne_bytes(), v.to_ne_bytes()])
                .flatten()
                .collect()
        };
        assert_eq!(
            parse_auxv_clock_ticks(&words(&[(6, 4096), (17, 100), (0, 0)])),
            Some(100)
        );
        assert_eq!(parse_auxv_clock_ticks(&words(&[(6, 4096), (0, 0)])), None);
        assert_eq!(parse_auxv_clock_ticks(&words(&[(17, 0)])), None);
        assert_eq!(parse_auxv_clock_ticks(&[1, 2, 3]), None);
        assert!(clock_ticks() > 0);
    }
}
