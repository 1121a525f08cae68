//! JACK and JackTrip programs for the interop tests: the tools they need (skipped when
//! missing, except under `CI=true`), child processes stopped by their pid, JACK client commands
//! for one named server, and the tone measures read from what `jack_rec` wrote.

#![allow(dead_code)] // each test binary uses a different subset

use std::fs;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};
use std::time::{SystemTime, UNIX_EPOCH};

pub const TOOLS: [&str; 7] = [
    "jackd",
    "jack_wait",
    "jack_lsp",
    "jack_connect",
    "jack_simple_client",
    "jack_rec",
    "jacktrip",
];

/// One test's JACK server (its name) and scratch directory, where each process logs.
#[derive(Debug, Clone)]
pub struct JackRun {
    pub server: String,
    pub dir: PathBuf,
    /// Makes the JACK client names of this run unique.
    pub nanos: u32,
}

impl JackRun {
    /// A fresh server name `PREFIX-PID-NANOS` and its directory (not started yet).
    pub fn new(prefix: &str) -> JackRun {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let server = format!("{prefix}-{}-{nanos}", std::process::id());
        let dir = std::env::temp_dir().join(&server);
        fs::create_dir_all(&dir).expect("temporary directory");
        JackRun { server, dir, nanos }
    }

    /// A log file of the run's directory, for a child's output.
    pub fn log(&self, name: &str) -> Stdio {
        fs::File::create(self.dir.join(name)).map_or(Stdio::null(), Stdio::from)
    }

    /// Starts jackd on the dummy driver, 48 kHz, 128 frames (without waiting for it).
    pub fn jackd(&self) -> Proc {
        Proc::start(
            jack("jackd", &self.server)
                .args([
                    "-n",
                    &self.server,
                    "-d",
                    "dummy",
                    "-r",
                    "48000",
                    "-p",
                    "128",
                ])
                .stdout(self.log("jackd.log"))
                .stderr(self.log("jackd.err")),
            "jackd",
        )
    }

    /// Waits (at most 10 s) until jackd serves clients.
    pub fn wait_ready(&self) {
        let ready = jack("jack_wait", &self.server)
            .args(["-s", &self.server, "-w", "-t", "10"])
            .stdout(Stdio::null())
            .stderr(self.log("jack_wait.err"))
            .status();
        assert!(
            matches!(ready, Ok(s) if s.success()),
            "jackd {} did not start: {ready:?}",
            self.server
        );
    }

    /// Starts `jacktrip -C 127.0.0.1 -P tcp_port` as JACK client `client` from UDP port
    /// `udp_port`, named `key` (`room/name`), 2 channels, and waits for its JACK ports.
    pub fn jacktrip(&self, client: &str, tcp_port: u16, udp_port: u16, key: &str) -> Proc {
        let proc = Proc::start(
            jack("jacktrip", &self.server)
                .args(["-C", "127.0.0.1", "-P", &tcp_port.to_string()])
                .args(["-B", &udp_port.to_string(), "-J", client, "-K", key])
                .args(["-n", "2", "-q", "8"])
                .stdout(self.log("jacktrip.log"))
                .stderr(self.log("jacktrip.err")),
            "jacktrip",
        );
        let (send, receive) = (format!("{client}:send_1"), format!("{client}:receive_1"));
        let up = wait_until(Duration::from_secs(10), || {
            let ports = jack_ports(&self.server);
            ports.contains(&send) && ports.contains(&receive)
        });
        assert!(
            up,
            "jacktrip's JACK ports did not appear; see {}",
            self.dir.display()
        );
        proc
    }

    /// Starts `jack_simple_client`'s sine pair (240 Hz left, 720 Hz right, amplitude 0.2) and
    /// connects it to `client`'s send ports.
    pub fn tone_into(&self, client: &str) -> Proc {
        let tone = format!("tone{}", self.nanos);
        let proc = Proc::start(
            jack("jack_simple_client", &self.server)
                .arg(&tone)
                .stdout(Stdio::null())
                .stderr(self.log("tone.err")),
            "jack_simple_client",
        );
        let out = format!("{tone}:output1");
        assert!(
            wait_until(Duration::from_secs(5), || jack_ports(&self.server)
                .contains(&out)),
            "the tone's JACK ports did not appear"
        );
        for ch in 1..=2 {
            let connected = jack("jack_connect", &self.server)
                .args([format!("{tone}:output{ch}"), format!("{client}:send_{ch}")])
                .status();
            assert!(
                matches!(connected, Ok(s) if s.success()),
                "jack_connect: {connected:?}"
            );
        }
        proc
    }

    /// Records `seconds` of `client`'s receive ports into `received.wav` (16 bit) and returns
    /// its interleaved samples.
    pub fn record(&self, client: &str, seconds: u32) -> Vec<i16> {
        let wav = self.dir.join("received.wav");
        let mut rec = Proc::start(
            jack("jack_rec", &self.server)
                .args([
                    "-f",
                    &wav.to_string_lossy(),
                    "-d",
                    &seconds.to_string(),
                    "-b",
                    "16",
                ])
                // A ring of 5 s: its disk thread may be starved on a loaded machine.
                .args(["-B", "240000"])
                .args([format!("{client}:receive_1"), format!("{client}:receive_2")])
                .stdout(Stdio::null())
                .stderr(self.log("rec.err")),
            "jack_rec",
        );
        let recorded = wait_until(Duration::from_secs(u64::from(seconds) + 6), || {
            matches!(rec.0.try_wait(), Ok(Some(_)))
        });
        assert!(recorded, "jack_rec did not finish");
        wav_samples(&wav)
    }

    /// Removes the run's directory (its logs), once the test passed.
    pub fn clean(&self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Whether every tool is on the PATH; if not, says which are missing and, under `CI=true`,
/// fails.
pub fn tools_present() -> bool {
    let missing: Vec<&str> = TOOLS.iter().copied().filter(|t| !on_path(t)).collect();
    if missing.is_empty() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !ci,
        "CI=true and {missing:?} not found: scripts/setup.sh installs them"
    );
    eprintln!("skipped: {missing:?} not found (scripts/setup.sh installs jacktrip, jackd2)");
    false
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Puts the calling thread in the real-time class, as jackd's own threads are, so it keeps
/// time on a loaded machine (best effort: `chrt` needs the right to do it).
pub fn real_time_priority() {
    if let Ok(me) = fs::read_link("/proc/thread-self") {
        if let Some(tid) = me.file_name() {
            let _ = Command::new("chrt")
                .args(["-f", "-p", "10"])
                .arg(tid)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A child process stopped (by its pid) when dropped.
pub struct Proc(pub Child);

impl Proc {
    pub fn start(cmd: &mut Command, what: &'static str) -> Proc {
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
        Proc(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Sends `signal` by pid and waits up to `within` for the process to end.
    pub fn signal(&mut self, signal: &str, within: Duration) -> bool {
        let _ = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status();
        wait_until(within, || matches!(self.0.try_wait(), Ok(Some(_))))
    }
}

/// Stops the process by its pid: SIGTERM first, so that jackd leaves JACK's registry of
/// servers (which holds only a few, and keeps a killed server's entry), then SIGKILL.
impl Drop for Proc {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(Some(_)))
            && !self.signal("-TERM", Duration::from_secs(3))
        {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

pub fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// A command for a JACK client of the server `server` (never starting a server of its own).
pub fn jack(program: &str, server: &str) -> Command {
    let mut c = Command::new(program);
    c.env("JACK_DEFAULT_SERVER", server)
        .env("JACK_NO_START_SERVER", "1")
        .stdin(Stdio::null());
    c
}

pub fn jack_ports(server: &str) -> String {
    let out = jack("jack_lsp", server).stderr(Stdio::null()).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

pub fn free_udp_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket on loopback");
    s.local_addr().expect("bound address").port()
}

/// Interleaved int16 samples of a WAV file's `data` chunk.
pub fn wav_samples(path: &Path) -> Vec<i16> {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert_eq!(&bytes[0..4], b"RIFF", "not a WAV file");
    let mut at = 12;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        let body = at + 8;
        let end = (body + len as usize).min(bytes.len());
        if id == b"data" {
            return bytes[body..end]
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]]))
                .collect();
        }
        at = end + (len as usize & 1);
    }
    panic!("no data chunk in {}", path.display());
}

/// Mean power of one channel of interleaved stereo at `hz` (Goertzel over the whole slice).
pub fn power_at(samples: &[i16], channel: usize, hz: f64) -> f64 {
    let coeff = 2.0 * (2.0 * std::f64::consts::PI * hz / 48_000.0).cos();
    let (mut s1, mut s2, mut n) = (0.0, 0.0, 0.0);
    for &x in samples.iter().skip(channel).step_by(2) {
        let s0 = f64::from(x) / 32768.0 + coeff * s1 - s2;
        (s2, s1) = (s1, s0);
        n += 1.0;
    }
    (s1 * s1 + s2 * s2 - coeff * s1 * s2) / (n * n)
}
