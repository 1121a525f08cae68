//! The servers under test, started and stopped on this machine: Tutti's server (its hub speaks
//! JackTrip's hub protocol) or JackTrip's own hub (`jacktrip -S`) on a JACK server of its own.
//! Each gets free ports, a scratch directory for its children's logs, and is stopped by the
//! pids of the processes started here, never by name.
//!
//! Readiness is checked without touching the JackTrip handshake port: Tutti's server is ready
//! when its HTTP port answers `GET /` (the handshake port is bound before HTTP is served, and
//! every connection to it costs the client address one of its few handshakes per 10 s);
//! JackTrip is ready when the kernel lists its TCP port as listening, owned by the jacktrip
//! process (`/proc/net/tcp`, `/proc/net/tcp6`, `/proc/PID/fd`).
//!
//! Ports: TCP ports are ones the kernel handed out for port 0 a moment before, so another
//! process may take one first (the server then fails to start and the error says so). The UDP
//! base is the first port from 61002 (JackTrip's default, above Linux's usual ephemeral range
//! 32768-60999, so the clients' own sockets do not land in it) where [`UDP_SPAN`] ports in a
//! row could be bound a moment before; bases handed out in this process do not overlap until
//! the range wraps. A server binds its UDP ports as clients arrive, so another program may
//! take one meanwhile.
//!
//! JackTrip 1.7.0 has no option to bind its hub to one address: it listens on all interfaces
//! (TCP and UDP); its clients here use 127.0.0.1.
//!
//! Written by hand: starting a few processes and polling a few files needs nothing beyond std.

use std::fs;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest wait for a server (and for JACK before it) to be ready.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a process has after SIGTERM before SIGKILL. JackTrip's hub with 30 clients (past
/// its knee) took 5-9 s to end here; killed instead, it leaves its JACK clients' shared memory
/// and jackd's entry in JACK's server registry (/dev/shm), and after 8 such entries no JACK
/// server starts on the machine.
pub const STOP_GRACE: Duration = Duration::from_secs(15);
/// UDP ports kept free from the base: one per client slot (Tutti's hub tries 512).
pub const UDP_SPAN: u16 = 600;
/// The first UDP base tried.
const FIRST_UDP_BASE: u16 = 61_002;
const POLL: Duration = Duration::from_millis(25);

/// Which server is under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    TuttiHub,
    JackTrip,
    /// The store several Tutti hubs share (Debian's `redis-server`).
    Redis,
}

/// A running server and what it takes to measure and stop it.
pub struct ServerUnderTest {
    pub kind: ServerKind,
    /// Where JackTrip clients do the TCP handshake (127.0.0.1:port).
    pub handshake: SocketAddr,
    /// The first UDP port the server hands to clients.
    pub udp_base: u16,
    /// Tutti's HTTP and WebSocket address (rooms are opened through `/ws`); `None` for JackTrip.
    pub http: Option<SocketAddr>,
    /// The pids whose CPU counts as the server's: the tutti server; or jacktrip AND jackd (the
    /// JACK server runs the graph JackTrip's hub patches).
    pub pids: Vec<u32>,
    /// Keep the scratch directory (the logs) when stopped. A failed start always keeps it.
    pub keep_logs: bool,
    /// Started here, in start order (stopped last first).
    children: Vec<(&'static str, Child)>,
    dir: PathBuf,
}

impl ServerUnderTest {
    /// Starts the tutti server binary `bin` (release build of package tutti-server) on
    /// 127.0.0.1 with free ports, rooms in memory only and an app directory holding a bare
    /// `index.html`, with `hub_threads` hub workers, then `extra` (later flags win). Its
    /// `TUTTI_*` and `PORT` environment variables are removed: they would change its flags.
    /// Waits (at most [`START_TIMEOUT`]) until its HTTP port answers.
    pub fn start_tutti(
        bin: &Path,
        hub_threads: u32,
        extra: &[String],
    ) -> Result<ServerUnderTest, String> {
        if !bin.is_file() {
            return Err(format!(
                "find the server failed: {} is no file (cargo build --release -p tutti-server)",
                bin.display()
            ));
        }
        let mut s = ServerUnderTest::scratch(ServerKind::TuttiHub)?;
        let dist = s.dir.join("dist");
        let index = "<!doctype html><title>tutti-loadgen</title>\n";
        let written =
            fs::create_dir_all(&dist).and_then(|()| fs::write(dist.join("index.html"), index));
        s.step("write the app directory", written)?;
        let (http, jacktrip) = s.step("find free TCP ports", free_tcp_ports())?;
        let udp_base = s.step("find free UDP ports", free_udp_base())?;
        let mut cmd = Command::new(bin);
        for (key, _) in std::env::vars_os() {
            if key
                .to_str()
                .is_some_and(|k| k.starts_with("TUTTI_") || k == "PORT")
            {
                cmd.env_remove(key);
            }
        }
        cmd.args(["--addr", "127.0.0.1"])
            .args(["--port", &http.to_string()])
            .args(["--jacktrip-port", &jacktrip.to_string()])
            .args(["--jacktrip-udp-base", &udp_base.to_string()])
            .args(["--hub-threads", &hub_threads.to_string()])
            .arg("--no-persist")
            .arg("--dist")
            .arg(&dist)
            .args(extra);
        let spawned = s.spawn("tutti-server", &mut cmd);
        s.step("start tutti-server", spawned)?;
        let http_addr = loopback(http);
        s.handshake = loopback(jacktrip);
        s.udp_base = udp_base;
        s.http = Some(http_addr);
        s.pids = s.children.iter().map(|(_, c)| c.id()).collect();
        let ready = s.wait_ready("tutti-server", || http_answers(http_addr));
        s.step("wait for tutti-server's HTTP port", ready)?;
        Ok(s)
    }

    /// Starts `jackd -n NAME -d dummy -r 48000 -p 128` (a fresh server name; real-time as
    /// jackd's default, falling back to normal scheduling where that is refused), waits for it
    /// with `jack_wait`, then `jacktrip -S -p 2 -B TCP -U UDP -b 16 -q 8` and `extra` (later
    /// flags win) as its client, and waits (at most [`START_TIMEOUT`]) until jacktrip listens.
    ///
    /// `-p 2` patches every client to every other, not back to itself: JACK sums what reaches
    /// a port, so each client gets the mix of the others, as from Tutti's hub. `-B` is the
    /// hub's TCP port, `-U` its UDP base; `-b 16` the 16-bit samples the clients send; `-q 8`
    /// the queue the interop tests' clients use.
    pub fn start_jacktrip(extra: &[String]) -> Result<ServerUnderTest, String> {
        let missing = jack_tools_missing();
        if !missing.is_empty() {
            return Err(format!("{missing:?} not found (Debian's jackd2 and jacktrip; scripts/setup.sh installs them)"));
        }
        let mut s = ServerUnderTest::scratch(ServerKind::JackTrip)?;
        let name = s
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut jackd = jack_command("jackd", &name);
        jackd.args(["-n", &name, "-d", "dummy", "-r", "48000", "-p", "128"]);
        let spawned = s.spawn("jackd", &mut jackd);
        s.step("start jackd", spawned)?;
        let ready = s.wait_for_jack(&name);
        s.step("wait for jackd", ready)?;
        let (tcp, _) = s.step("find a free TCP port", free_tcp_ports())?;
        let udp_base = s.step("find free UDP ports", free_udp_base())?;
        let mut jacktrip = jack_command("jacktrip", &name);
        jacktrip
            .args(["-S", "-p", "2"])
            .args(["-B", &tcp.to_string(), "-U", &udp_base.to_string()])
            .args(["-b", "16", "-q", "8"])
            .args(extra);
        let spawned = s.spawn("jacktrip", &mut jacktrip);
        let pid = s.step("start jacktrip", spawned)?;
        s.handshake = loopback(tcp);
        s.udp_base = udp_base;
        // jacktrip, then jackd.
        s.pids = s.children.iter().rev().map(|(_, c)| c.id()).collect();
        let ready = s.wait_ready("jacktrip", || listens(tcp, pid));
        s.step("wait for jacktrip's TCP port", ready)?;
        Ok(s)
    }

    /// Starts `redis-server` on 127.0.0.1 at a free port, keeping nothing on disk, and waits
    /// (at most [`START_TIMEOUT`]) until it answers PING; `http` is None, `handshake` its
    /// address (the URL hubs take is [`ServerUnderTest::redis_url`]).
    pub fn start_redis() -> Result<ServerUnderTest, String> {
        let mut s = ServerUnderTest::scratch(ServerKind::Redis)?;
        let (port, _) = s.step("find a free TCP port", free_tcp_ports())?;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .arg("--dir")
            .arg(&s.dir);
        let spawned = s.spawn("redis-server", &mut cmd);
        s.step(
            "start redis-server (Debian's redis-server; scripts/setup.sh installs it)",
            spawned,
        )?;
        s.handshake = loopback(port);
        s.pids = s.children.iter().map(|(_, c)| c.id()).collect();
        let addr = s.handshake;
        let ready = s.wait_ready("redis-server", || redis_answers(addr));
        s.step("wait for redis-server", ready)?;
        Ok(s)
    }

    /// The URL of a store started with [`ServerUnderTest::start_redis`].
    pub fn redis_url(&self) -> String {
        format!("redis://{}/0", self.handshake)
    }

    /// Stops what this started, last started first, by pid (SIGTERM, then SIGKILL after
    /// [`STOP_GRACE`]), and removes the scratch directory unless `keep_logs`.
    pub fn stop(mut self) {
        self.halt();
    }

    /// The scratch directory: `NAME.log` and `NAME.err` of each child.
    pub fn log_dir(&self) -> &Path {
        &self.dir
    }

    /// A server not started yet, with its scratch directory.
    fn scratch(kind: ServerKind) -> Result<ServerUnderTest, String> {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let label = match kind {
            ServerKind::TuttiHub => "tutti",
            ServerKind::JackTrip => "jacktrip",
            ServerKind::Redis => "redis",
        };
        let name = format!(
            "loadgen-{label}-{}-{nanos}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(name);
        fs::create_dir_all(&dir)
            .map_err(|e| format!("create the scratch directory {}: {e}", dir.display()))?;
        Ok(ServerUnderTest {
            kind,
            handshake: loopback(0),
            udp_base: 0,
            http: None,
            pids: Vec::new(),
            keep_logs: false,
            children: Vec::new(),
            dir,
        })
    }

    /// Starts `cmd` with its output in `WHAT.log` and `WHAT.err`, kept to be stopped; returns
    /// its pid.
    fn spawn(&mut self, what: &'static str, cmd: &mut Command) -> Result<u32, String> {
        let child = spawn_logged(&self.dir, what, cmd)?;
        let pid = child.id();
        self.children.push((what, child));
        Ok(pid)
    }

    /// Runs `jack_wait` until the JACK server `name` serves clients, bounded twice: by its own
    /// timeout and by ours, and failing at once if jackd ends.
    fn wait_for_jack(&mut self, name: &str) -> Result<(), String> {
        let mut wait = jack_command("jack_wait", name);
        wait.args(["-s", name, "-w", "-t", "10"]);
        let mut waiter = spawn_logged(&self.dir, "jack_wait", &mut wait)?;
        let end = Instant::now() + START_TIMEOUT + Duration::from_secs(2);
        let result = loop {
            match waiter.try_wait() {
                Ok(Some(status)) if status.success() => break Ok(()),
                Ok(Some(status)) => break Err(format!("jack_wait ended with {status}")),
                Ok(None) => {}
                Err(e) => break Err(format!("jack_wait: {e}")),
            }
            if let Some(why) = self.ended() {
                break Err(why);
            }
            if Instant::now() >= end {
                break Err(format!("not ready within {START_TIMEOUT:?}"));
            }
            thread::sleep(POLL);
        };
        stop_child(&mut waiter);
        result
    }

    /// Polls `ready` until it holds, a child ends or [`START_TIMEOUT`] passes.
    fn wait_ready(&mut self, what: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
        let end = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(why) = self.ended() {
                return Err(why);
            }
            if ready() {
                return Ok(());
            }
            if Instant::now() >= end {
                return Err(format!("{what} not ready within {START_TIMEOUT:?}"));
            }
            thread::sleep(POLL);
        }
    }

    /// Which child has ended, if one has.
    fn ended(&mut self) -> Option<String> {
        self.children
            .iter_mut()
            .find_map(|(what, child)| match child.try_wait() {
                Ok(Some(status)) => Some(format!("{what} ended with {status}")),
                Ok(None) => None,
                Err(e) => Some(format!("{what}: {e}")),
            })
    }

    /// `r`'s value, or, when it is an error, [`Self::failed`] for `step`.
    fn step<T, E: std::fmt::Display>(&mut self, step: &str, r: Result<T, E>) -> Result<T, String> {
        r.map_err(|e| self.failed(step, &e.to_string()))
    }

    /// Stops every child (keeping the logs) and says which step failed and where the logs are.
    fn failed(&mut self, step: &str, why: &str) -> String {
        self.keep_logs = true;
        self.halt();
        format!("{step} failed: {why} (logs in {})", self.dir.display())
    }

    fn halt(&mut self) {
        while let Some((_, mut child)) = self.children.pop() {
            stop_child(&mut child);
        }
        if !self.keep_logs {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Stops the children still running, by their own pids.
impl Drop for ServerUnderTest {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Starts `cmd` with its output in `DIR/WHAT.log` and `DIR/WHAT.err`.
/// The programs a JackTrip hub run needs, and which of them are not on the PATH.
pub const JACK_TOOLS: [&str; 3] = ["jackd", "jack_wait", "jacktrip"];

pub fn jack_tools_missing() -> Vec<&'static str> {
    missing(&JACK_TOOLS)
}

/// Which of `programs` are not on the PATH.
pub fn missing(programs: &[&'static str]) -> Vec<&'static str> {
    let on_path = |tool: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    };
    programs.iter().copied().filter(|t| !on_path(t)).collect()
}

fn spawn_logged(dir: &Path, what: &str, cmd: &mut Command) -> Result<Child, String> {
    let log = |ext: &str| {
        fs::File::create(dir.join(format!("{what}.{ext}")))
            .map(Stdio::from)
            .map_err(|e| format!("create {what}'s log: {e}"))
    };
    cmd.stdin(Stdio::null())
        .stdout(log("log")?)
        .stderr(log("err")?)
        .spawn()
        .map_err(|e| format!("{what}: {e}"))
}

/// SIGTERM to the child's pid, SIGKILL after [`STOP_GRACE`]; then reaps it. The pid is still
/// the child's when signalled: only this process reaps it, and it is not reaped yet.
fn stop_child(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let end = Instant::now() + STOP_GRACE;
    while Instant::now() < end {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        thread::sleep(POLL);
    }
    eprintln!(
        "process {} did not end within {STOP_GRACE:?} of SIGTERM: killed",
        child.id()
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A command run as a client of the JACK server `name` that never starts a server itself.
fn jack_command(program: &str, name: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("JACK_DEFAULT_SERVER", name)
        .env("JACK_NO_START_SERVER", "1");
    cmd
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Two different loopback TCP ports free a moment ago.
fn free_tcp_ports() -> io::Result<(u16, u16)> {
    let a = TcpListener::bind(loopback(0))?;
    let b = TcpListener::bind(loopback(0))?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// A UDP base from which [`UDP_SPAN`] loopback ports could all be bound a moment ago, not
/// overlapping the bases handed out before in this process (until the range wraps).
fn free_udp_base() -> Result<u16, String> {
    static NEXT: Mutex<u16> = Mutex::new(FIRST_UDP_BASE);
    let mut next = NEXT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let last = u16::MAX - UDP_SPAN;
    let mut base = (*next).clamp(FIRST_UDP_BASE, last);
    let mut wrapped = false;
    loop {
        if base > last {
            if wrapped {
                return Err(format!(
                    "no {UDP_SPAN} free UDP ports in a row from {FIRST_UDP_BASE}"
                ));
            }
            (base, wrapped) = (FIRST_UDP_BASE, true);
        }
        match (base..base + UDP_SPAN).find(|&p| UdpSocket::bind(loopback(p)).is_err()) {
            None => {
                *next = base + UDP_SPAN;
                return Ok(base);
            }
            Some(busy) => base = busy + 1,
        }
    }
}

/// Whether a Redis server answers PING.
fn redis_answers(addr: SocketAddr) -> bool {
    let ask = || -> io::Result<bool> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
        s.set_read_timeout(Some(Duration::from_secs(1)))?;
        s.write_all(b"PING\r\n")?;
        let mut answer = [0u8; 5];
        s.read_exact(&mut answer)?;
        Ok(&answer == b"+PONG")
    };
    ask().unwrap_or(false)
}

/// Whether `GET /` gets an HTTP response.
fn http_answers(addr: SocketAddr) -> bool {
    let ask = || -> io::Result<bool> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
        s.set_read_timeout(Some(Duration::from_secs(1)))?;
        s.set_write_timeout(Some(Duration::from_secs(1)))?;
        write!(
            s,
            "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )?;
        let mut head = [0u8; 7];
        s.read_exact(&mut head)?;
        Ok(&head == b"HTTP/1.")
    };
    ask().unwrap_or(false)
}

/// Whether process `pid` holds a socket listening on TCP `port` (any address).
fn listens(port: u16, pid: u32) -> bool {
    let inodes: Vec<u64> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .flat_map(|text| listening_inodes(&text, port))
        .collect();
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok)
        .filter_map(|fd| fs::read_link(fd.path()).ok())
        .any(|link| {
            inodes
                .iter()
                .any(|i| link.as_os_str() == format!("socket:[{i}]").as_str())
        })
}

/// The inodes of the sockets listening on `port` in a `/proc/net/tcp` or `tcp6` table
/// (malformed lines are passed over).
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    const LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            let local_port = f.get(1)?.rsplit_once(':')?.1;
            let listening = *f.get(3)? == LISTEN;
            (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                .then(|| f.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JackTrip's handshake as the load generator runs it: the UDP port answered, or why not.
    fn hello(addr: SocketAddr, client: usize, name: &str) -> Result<u16, String> {
        crate::client::handshake(
            addr,
            crate::client::client_ip(client),
            name,
            Duration::from_secs(5),
        )
        .map(|(_, hub)| hub.port())
    }

    /// The handshake's answer is one of the server's UDP ports; stopping ends every process
    /// started and removes the scratch directory.
    fn answered_then_stopped(server: ServerUnderTest, answer: Result<u16, String>) {
        let dir = server.log_dir().to_path_buf();
        let port = answer.unwrap_or(0);
        assert!(
            port >= server.udp_base,
            "port {port}, base {}; logs in {}",
            server.udp_base,
            dir.display()
        );
        let pids = server.pids.clone();
        let t = Instant::now();
        server.stop();
        eprintln!("stopped in {:?}", t.elapsed());
        assert!(pids.iter().all(|&p| gone(p)), "{pids:?} still running");
        assert!(!dir.exists());
    }

    /// Whether the process is gone (or a zombie no one will reap).
    fn gone(pid: u32) -> bool {
        fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    }

    #[test]
    fn jacktrip_hub_starts_answers_a_handshake_and_stops() {
        let missing = jack_tools_missing();
        if !missing.is_empty() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and {missing:?} not found"
            );
            eprintln!("skipped: {missing:?} not found (Debian: jackd2, jacktrip)");
            return;
        }
        let t0 = Instant::now();
        let server = ServerUnderTest::start_jacktrip(&[]).unwrap_or_else(|e| panic!("{e}"));
        let started = t0.elapsed();
        assert_eq!(server.kind, ServerKind::JackTrip);
        assert_eq!(server.pids.len(), 2);
        let dir = server.log_dir().to_path_buf();
        assert!(dir.join("jacktrip.log").is_file());
        let t1 = Instant::now();
        let answer = hello(server.handshake, 0, "loadgen-test");
        eprintln!(
            "jacktrip: ready after {started:?}, answered {answer:?} after {:?}",
            t1.elapsed()
        );
        answered_then_stopped(server, answer);
    }

    #[test]
    fn tutti_hub_starts_answers_a_handshake_and_stops() {
        let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/tutti-server");
        if !bin.is_file() {
            eprintln!(
                "skipped: {} not found (cargo build --release -p tutti-server)",
                bin.display()
            );
            return;
        }
        let t0 = Instant::now();
        let server = ServerUnderTest::start_tutti(&bin, 1, &[]).unwrap_or_else(|e| panic!("{e}"));
        let started = t0.elapsed();
        assert_eq!(server.kind, ServerKind::TuttiHub);
        assert_eq!(server.pids.len(), 1);
        let http = server.http.expect("tutti's HTTP address");
        // No room yet: refused (closed without an answer).
        let refused = hello(server.handshake, 0, "room1/loadgen-test");
        assert!(refused.is_err(), "{refused:?}");
        let owner_ip = crate::client::loopback_ip(2, 0);
        let _owner = crate::owner::open(http, owner_ip, "room1", "forward")
            .unwrap_or_else(|e| panic!("open room1: {e}"));
        let answer = hello(server.handshake, 1, "room1/loadgen-test");
        eprintln!("tutti: ready after {started:?}, answered {answer:?}");
        answered_then_stopped(server, answer);
    }

    #[test]
    fn a_missing_binary_is_an_error_naming_the_step() {
        let e = ServerUnderTest::start_tutti(Path::new("/nonexistent/tutti-server"), 1, &[])
            .err()
            .unwrap_or_default();
        assert!(e.starts_with("find the server failed"), "{e}");
    }

    #[test]
    fn udp_bases_do_not_overlap() {
        let a = free_udp_base().expect("a base");
        let b = free_udp_base().expect("another base");
        assert!(a >= FIRST_UDP_BASE && b >= FIRST_UDP_BASE);
        assert!(a.abs_diff(b) >= UDP_SPAN, "{a} {b}");
    }

    #[test]
    fn reads_listening_sockets_from_proc_net_tcp() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1\n\
   2: 00000000000000000000000000000000:B043 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 687592 1 0 100 0 0 10 0\n\
   3: garbage\n\
   4: 0100007F:ZZZZ 00000000:0000 0A 0 0 0 0 0 99\n";
        assert_eq!(listening_inodes(table, 8080), vec![4242]);
        assert_eq!(listening_inodes(table, 45123), vec![687592]);
        assert!(listening_inodes(table, 1).is_empty());
        assert!(listening_inodes("", 8080).is_empty());
        // This process listens; the port is found as its own.
        let l = TcpListener::bind(loopback(0)).expect("a listener");
        let port = l.local_addr().map_or(0, |a| a.port());
        assert!(listens(port, std::process::id()));
        drop(l);
        assert!(!listens(port, std::process::id()));
    }
}
