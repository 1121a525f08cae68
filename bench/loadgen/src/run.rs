//! One run of a scenario against a started server: the clients join at the scenario's rate,
//! play through the warm-up, then the measuring window runs with a progress line each second
//! (on stderr) and the churn, and the run ends with its figures: delivery, inter-arrival p99,
//! the server's CPU per client-second and RSS, the emulator's own CPU, and what the
//! spot-checked listeners heard.
//!
//! In forward mode the rooms are switched to `forward` and every client joins as the app does
//! (signaling, then its WebRTC link to the hub); each listener's figures are per sender
//! (sources.rs), delivery is what the others sent (forward.rs), and a spot-checked listener
//! must hear each other member's stream carrying that member's tone and nothing else. Tones
//! are then given out over the whole run, not per room, so that a room leaking into another
//! would put a tone where it does not belong.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::client::{client_ip, handshake, loopback_ip, Client};
use crate::continuity::{self, Continuity};
use crate::driver::{Drivers, Report};
use crate::hublink::HubLink;
use crate::owner;
use crate::procstat::ProcSet;
use crate::recording::Recording;
use crate::scenario::{Mode, Scenario, ServerName};
use crate::servers::ServerUnderTest;
use crate::signal::{self, Keeper};
use crate::tones::{self, Heard, ToneLoop};

/// How long one handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Refused handshakes in a row after which the server is taken to admit no more: the rest
/// of the clients do not try (the row's `joined` says how many got in).
const GIVE_UP_AFTER: usize = 3;

/// A run's figures (one row of the output).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub scenario: String,
    pub server: &'static str,
    pub mode: &'static str,
    pub protocol: &'static str,
    pub rooms: usize,
    /// Server processes sharing the rooms.
    pub hubs: usize,
    pub clients: usize,
    /// Clients that joined (a refused or timed-out handshake is counted in `join_errors`).
    pub joined: usize,
    pub join_errors: usize,
    pub seconds: f64,
    pub cpu_ms_per_client_s: f64,
    pub delivery_pct: f64,
    pub p99_interarrival_ms: f64,
    pub max_interarrival_ms: f64,
    pub rss_mb: f64,
    /// The server's RSS at the window's first and last second, MB, and the change, %.
    pub rss_start_mb: f64,
    pub rss_end_mb: f64,
    pub rss_change_pct: f64,
    /// Clients that left during the window (as many joined).
    pub churned: usize,
    pub lost: u64,
    pub late: u64,
    pub duplicates: u64,
    pub malformed: u64,
    /// Clients that received nothing in the window (in it for a second or more), and those
    /// that joined in its last second and wait for their first packet.
    pub silent: usize,
    pub waiting: usize,
    /// The longest a client that joined in the window waited for its first packet, ms.
    pub join_wait_max_ms: f64,
    /// Blocks the emulator failed to send on time (its own overload, not the server's).
    pub emulator_skipped_blocks: u64,
    pub emulator_cpu_ms_per_client_s: f64,
    /// The server's busiest threads over the window: name (after its process's, `hubN/` or
    /// `store/`, when several processes serve) and CPU ms per second.
    pub server_threads: Vec<(String, f64)>,
    pub spot_checks: Vec<Heard>,
    pub tones_ok: bool,
    /// Each spot-checked listener's tones followed through the window: the voices that were
    /// in its room for all of it (see [`continuity`]).
    pub continuity: Vec<Continuity>,
    /// The longest interruption of a followed tone, and the longest run of lost blocks, of any
    /// spot-checked listener, ms.
    pub longest_tone_gap_ms: f64,
    pub longest_lost_ms: f64,
    /// Tones were followed and none was interrupted for longer than a concealment bridges.
    pub continuity_ok: bool,
    /// The first handshake error, if any.
    pub first_error: Option<String>,
    /// Forward mode's own figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward: Option<ForwardFigures>,
}

impl Row {
    /// The load the emulator offered, % of the scenario's (forward mode; 100 in mix mode, whose
    /// delivery figure counts what the server sends by the clock).
    pub fn offered_pct(&self) -> f64 {
        self.forward.as_ref().map_or(100.0, |f| f.offered_pct)
    }
}

/// What only forward mode counts.
#[derive(Clone, Debug, Serialize)]
pub struct ForwardFigures {
    /// Senders heard, summed over the listeners, of `senders_expected` (each listener the
    /// other members of its room).
    pub senders_heard: u64,
    pub senders_expected: u64,
    /// Packets of a listener's own stream, and of streams beyond its room's size.
    pub echoes: u64,
    pub unknown_streams: u64,
    /// WebRTC links that failed, and signaling connections the server closed.
    pub failed_links: u64,
    pub signaling_closed: usize,
    /// Blocks a client could not send (its channel not open, or full).
    pub send_errors: u64,
    /// The smallest share of one sender's blocks one listener received, %, of those the time
    /// allows (so an emulator that could not send them all lowers it too).
    pub worst_sender_pct: f64,
    /// The blocks the clients sent of those the time allows, %: the load the emulator offered.
    /// Under 100 the emulator ran out of CPU (`emulator_skipped_blocks`), and the row measures
    /// the server under that share of the scenario's load.
    pub offered_pct: f64,
}

/// The client name the server gets for client `i` of room `r`: Tutti's hub reads `room/name`;
/// JackTrip's makes JACK clients of the names, so they must be plain and unique.
fn client_name(server: ServerName, r: usize, i: usize) -> String {
    match server {
        ServerName::TuttiHub => format!("{}/c{i}", room_name(r)),
        ServerName::Jacktrip => format!("lg{r}x{i}"),
    }
}

/// Starts the scenario's servers (this project's from `bin`, as many hubs as it asks for and
/// the store they share; or JackTrip's), runs the scenario, stops them.
pub fn run_once(s: &Scenario, bin: &std::path::Path, quiet: bool) -> Result<Row, String> {
    let mut store = None;
    let mut servers = Vec::new();
    match s.server {
        ServerName::TuttiHub => {
            // Rooms as large as the hub's (the owner's place too).
            let mut extra = vec!["--room-cap".to_owned(), "1024".to_owned()];
            if s.hubs > 1 {
                let redis = ServerUnderTest::start_redis()?;
                extra.extend(["--redis".to_owned(), redis.redis_url()]);
                store = Some(redis);
            }
            for _ in 0..s.hubs {
                servers.push(ServerUnderTest::start_tutti(bin, s.hub_threads, &extra)?);
            }
        }
        ServerName::Jacktrip => servers.push(ServerUnderTest::start_jacktrip(&[])?),
    }
    let store_pids = store.as_ref().map(|r| r.pids.clone()).unwrap_or_default();
    let row = run(s, &servers, &store_pids, quiet);
    // The first hub is every room's home: the others leave it first.
    for server in servers.into_iter().rev() {
        server.stop();
    }
    if let Some(redis) = store {
        redis.stop();
    }
    row
}

/// Room `r`'s name on this project's server.
fn room_name(r: usize) -> String {
    format!("load{r}")
}

/// Runs `s` against `servers` (several hubs share its rooms: each room's clients are dealt to
/// them in turn); the CPU of `store_pids` (the hubs' shared store) counts as the servers'.
/// `quiet`: no progress lines.
pub fn run(
    s: &Scenario,
    servers: &[ServerUnderTest],
    store_pids: &[u32],
    quiet: bool,
) -> Result<Row, String> {
    let threads = if s.threads == 0 {
        thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        s.threads
    };
    let block = Duration::from_nanos(u64::from(s.frames) * 1_000_000_000 / 48_000);
    // One loop per distinct bin, shared by every sender of it.
    // The room's clients, then those who join in its churn: each plays a tone of its own.
    let churn_joins = (s.churn_per_second * s.seconds / s.rooms as f64).ceil() as usize + 1;
    // Forward mode: client i of room r plays `bins[r * clients + i]`.
    let senders = match s.mode {
        Mode::Mix => s.clients + churn_joins,
        Mode::Forward => s.total(),
    };
    let bins: Vec<usize> = (0..senders).map(tones::sender_bin).collect();
    let amplitude = tones::amplitude(s.clients);
    let mut loop_of: BTreeMap<usize, usize> = BTreeMap::new();
    let mut loops = Vec::new();
    for &k in &bins {
        if let std::collections::btree_map::Entry::Vacant(e) = loop_of.entry(k) {
            e.insert(loops.len());
            loops.push(match s.mode {
                Mode::Mix => ToneLoop::new(k, amplitude, s.frames)?,
                Mode::Forward => ToneLoop::app(k, amplitude, s.frames)?,
            });
        }
    }
    let mut drivers = Drivers::start(threads, block, Arc::new(loops))?;
    let pids: Vec<u32> = servers
        .iter()
        .flat_map(|sv| sv.pids.iter().copied())
        .chain(store_pids.iter().copied())
        .collect();
    let mut server_cpu =
        ProcSet::new(&pids).map_err(|e| format!("reading the server's /proc: {e}"))?;
    // Thread names, with the process they are in when there are several: `hub1/hub-0`,
    // `store/redis-server`.
    let mut process_of: BTreeMap<u32, String> = BTreeMap::new();
    if servers.len() > 1 || !store_pids.is_empty() {
        for (h, server) in servers.iter().enumerate() {
            process_of.extend(server.pids.iter().map(|&p| (p, format!("hub{h}/"))));
        }
        process_of.extend(store_pids.iter().map(|&p| (p, "store/".to_owned())));
    }
    let mut own_cpu =
        ProcSet::new(&[std::process::id()]).map_err(|e| format!("reading our /proc: {e}"))?;

    let mut joiner = Joiner {
        scenario: s,
        handshakes: servers.iter().map(|sv| sv.handshake).collect(),
        http: servers.first().and_then(|sv| sv.http),
        keeper: Keeper::start()?,
        streams: vec![Vec::new(); s.rooms],
        bins: &bins,
        loop_of: &loop_of,
        next_index: vec![0; s.rooms],
        members: vec![Vec::new(); s.rooms],
        touched: vec![BTreeSet::new(); s.rooms],
        in_window: false,
        joined: 0,
        errors: 0,
        failing: 0,
        first_error: None,
    };
    // This project's server admits JackTrip clients only into rooms a member opened and
    // switched to the hub, and a room's topology is its owner's: one owner per room on every
    // hub, each from an address of its own.
    if s.server == ServerName::TuttiHub {
        for (h, server) in servers.iter().enumerate() {
            let http = server.http.ok_or("the server has no HTTP address")?;
            for r in 0..s.rooms {
                let from = loopback_ip(2, r * servers.len() + h);
                joiner
                    .keeper
                    .keep(owner::open(http, from, &room_name(r), s.mode.as_str())?)?;
            }
        }
    }
    let t0 = Instant::now();
    let every = Duration::from_secs_f64(1.0 / s.join_per_second);
    for k in 0..s.total() {
        let due = t0 + every * k as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        let (r, i) = (k % s.rooms, k / s.rooms);
        joiner.join(&mut drivers, r, i < s.spot_checks)?;
        if joiner.failing >= GIVE_UP_AFTER {
            break;
        }
    }
    if !quiet {
        eprintln!(
            "{}: {} of {} clients joined in {:.1} s ({} refused)",
            s.name,
            joiner.joined,
            s.total(),
            t0.elapsed().as_secs_f64(),
            joiner.errors
        );
    }
    thread::sleep(Duration::from_secs_f64(s.warmup_seconds));

    drivers.window();
    joiner.in_window = true;
    let _ = server_cpu.sample();
    let _ = own_cpu.sample();
    let w0 = Instant::now();
    let mut server_ms = 0.0;
    let mut own_ms = 0.0;
    let mut rss_mb: f64 = 0.0;
    let (mut rss_start_mb, mut rss_end_mb) = (None, 0.0);
    let mut churned = 0;
    let mut per_thread: BTreeMap<String, f64> = BTreeMap::new();
    let mut churn_due = 0.0;
    let mut second = 0u32;
    let mut churn_room = 0usize;
    while w0.elapsed().as_secs_f64() < s.seconds {
        second += 1;
        let due = w0 + Duration::from_secs(u64::from(second));
        let end = w0 + Duration::from_secs_f64(s.seconds);
        if let Some(wait) = due.min(end).checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        // Churn: as many leave as join, spread over the rooms.
        churn_due += s.churn_per_second;
        while churn_due >= 1.0 {
            churn_due -= 1.0;
            let r = churn_room % s.rooms;
            churn_room += 1;
            let left = drivers.leave(r, 1);
            if !left.is_empty() {
                churned += left.len();
                joiner.touched[r].extend(left);
                joiner.join(&mut drivers, r, false)?;
            }
        }
        let cpu = server_cpu
            .sample()
            .map_err(|e| format!("sampling the server: {e}"))?;
        let own = own_cpu
            .sample()
            .map_err(|e| format!("sampling ourselves: {e}"))?;
        server_ms += cpu.cpu_ms;
        own_ms += own.cpu_ms;
        rss_mb = rss_mb.max(cpu.rss_mb);
        rss_start_mb.get_or_insert(cpu.rss_mb);
        rss_end_mb = cpu.rss_mb;
        for t in &cpu.threads {
            let process = process_of.get(&t.pid).map_or("", String::as_str);
            *per_thread
                .entry(format!("{process}{}", t.name))
                .or_default() += t.cpu_ms;
        }
        if !quiet {
            let r = drivers.report();
            eprintln!(
                "{}{} t={:>4.0}s clients {:>4} delivery {:>7.3}% lost {:>6} late {:>5} p99 gap {:>5.2} ms | server {:>6.1} ms CPU/s ({:.2} ms per client-s), RSS {:.0} MB | emulator {:.0} ms CPU/s",
                s.name,
                // Forward mode: what share of the load the emulator managed to send.
                match s.mode {
                    Mode::Mix => String::new(),
                    Mode::Forward => format!(" offered {:.1}%", r.offered_pct()),
                },
                w0.elapsed().as_secs_f64(),
                r.clients,
                r.delivery_pct(),
                r.lost,
                r.late,
                r.gaps.quantile_ms(0.99),
                cpu.cpu_ms * 1000.0 / cpu.wall_ms.max(1.0),
                cpu.cpu_ms * 1000.0 / cpu.wall_ms.max(1.0) / r.clients.max(1) as f64,
                cpu.rss_mb,
                own.cpu_ms * 1000.0 / own.wall_ms.max(1.0),
            );
        }
    }
    let window = w0.elapsed().as_secs_f64();
    let report: Report = drivers.report();
    let signaling_closed = joiner.keeper.closed();
    let clients = drivers.stop();
    joiner.keeper.stop();

    // Each voice's gain in a listener's mix: this project's hub pans every voice through a
    // strip with a constant-power law, centred by default (−3.01 dB a side); JackTrip's `-p 2`
    // sums the ports as they come.
    let gain = match s.server {
        ServerName::TuttiHub => tutti_core::mix::pan_gains(0.0).0,
        ServerName::Jacktrip => 1.0,
    };
    let mut spot_checks = Vec::new();
    let mut continuity = Vec::new();
    let mut longest_lost_ms: f64 = 0.0;
    for c in &clients {
        if let Some(link) = c.link.as_ref().filter(|l| l.sources.records()) {
            let others: Vec<(u16, usize)> = joiner.streams[c.room]
                .iter()
                .filter(|&&(_, i)| i != c.index)
                .map(|&(stream, i)| (stream, bins[c.room * s.clients + i]))
                .collect();
            spot_checks.push(link.sources.check(&others, amplitude));
            let longest = link.sources.longest_fill_frames();
            longest_lost_ms = longest_lost_ms.max(longest as f64 / 48.0);
        }
        if let Some(rec) = &c.recording {
            // Read in the window's first second, before the churn's first change.
            let first = &bins[..s.clients];
            spot_checks.push(tones::check(rec.samples(), c.index, first, amplitude, gain));
            let steady = joiner.steady_bins(c.room, c.index);
            let expected = f64::from(amplitude) * f64::from(gain);
            continuity.push(continuity::follow(rec.samples(), &steady, expected));
            longest_lost_ms = longest_lost_ms.max(rec.longest_fill_frames as f64 / 48.0);
        }
    }
    let tones_ok = !spot_checks.is_empty() && spot_checks.iter().all(Heard::ok);
    let longest_tone_gap_ms = continuity
        .iter()
        .map(|c| c.longest_gap_ms)
        .fold(0.0, f64::max);
    // Forward mode follows no mix: its streams are whole as long as no run of lost blocks
    // outlasts what a concealment bridges.
    let continuity_ok = match s.mode {
        Mode::Mix => {
            continuity.iter().all(|c| c.tones > 0)
                && !continuity.is_empty()
                && longest_tone_gap_ms <= continuity::CONCEALMENT_MS
        }
        Mode::Forward => longest_lost_ms <= continuity::CONCEALMENT_MS,
    };
    let rss_start_mb = rss_start_mb.unwrap_or(0.0);
    let client_seconds = report.clients.max(1) as f64 * window;
    let mut server_threads: Vec<(String, f64)> = per_thread
        .into_iter()
        .map(|(n, ms)| (n, ms / window))
        .collect();
    server_threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    server_threads.truncate(8);
    Ok(Row {
        scenario: s.name.clone(),
        server: s.server.as_str(),
        mode: s.mode.as_str(),
        protocol: match s.mode {
            Mode::Mix => "jacktrip",
            Mode::Forward => "webrtc",
        },
        rooms: s.rooms,
        hubs: servers.len(),
        clients: s.total(),
        joined: joiner.joined,
        join_errors: joiner.errors,
        seconds: window,
        cpu_ms_per_client_s: server_ms / client_seconds,
        delivery_pct: report.delivery_pct(),
        p99_interarrival_ms: report.gaps.quantile_ms(0.99),
        max_interarrival_ms: report.gaps.max_ms(),
        rss_mb,
        rss_start_mb,
        rss_end_mb,
        rss_change_pct: (rss_end_mb - rss_start_mb) / rss_start_mb.max(f64::MIN_POSITIVE) * 100.0,
        churned,
        lost: report.lost,
        late: report.late,
        duplicates: report.duplicates,
        malformed: report.malformed,
        silent: report.silent,
        waiting: report.waiting,
        join_wait_max_ms: report.join_wait_max_ms,
        emulator_skipped_blocks: report.skipped_blocks,
        emulator_cpu_ms_per_client_s: own_ms / client_seconds,
        server_threads,
        spot_checks,
        tones_ok,
        continuity,
        longest_tone_gap_ms,
        longest_lost_ms,
        continuity_ok,
        first_error: joiner.first_error,
        forward: (s.mode == Mode::Forward).then(|| ForwardFigures {
            senders_heard: report.senders_heard,
            senders_expected: joiner
                .streams
                .iter()
                .map(|m| (m.len() * m.len().saturating_sub(1)) as u64)
                .sum(),
            echoes: report.echoes,
            unknown_streams: report.unknown_streams,
            failed_links: report.failed_links,
            signaling_closed,
            send_errors: report.send_errors,
            worst_sender_pct: report.worst_sender_pct.unwrap_or(0.0),
            offered_pct: report.offered_pct(),
        }),
    })
}

/// Joins clients one at a time: names, tones and the count of refusals.
struct Joiner<'a> {
    scenario: &'a Scenario,
    /// Each server's handshake address (a room's clients are dealt to them in turn).
    handshakes: Vec<std::net::SocketAddr>,
    /// Forward mode: the server's signaling address, the keeper of the members' connections,
    /// and per room each member's stream id and index.
    http: Option<std::net::SocketAddr>,
    keeper: Keeper,
    streams: Vec<Vec<(u16, usize)>>,
    bins: &'a [usize],
    loop_of: &'a BTreeMap<usize, usize>,
    /// The next client index per room (churn adds clients past `clients`; they reuse the
    /// room's tones in turn).
    next_index: Vec<usize>,
    /// Per room, the tone index of every client that joined, in order.
    members: Vec<Vec<usize>>,
    /// Per room, the tone indices of clients that left or joined during the window.
    touched: Vec<BTreeSet<usize>>,
    in_window: bool,
    joined: usize,
    errors: usize,
    /// Refusals since the last client got in.
    failing: usize,
    first_error: Option<String>,
}

impl Joiner<'_> {
    /// One client joins room `r` (spot-checked or not); a refused handshake is counted, not an
    /// error. Err only when the emulator itself failed.
    fn join(&mut self, drivers: &mut Drivers, r: usize, spot: bool) -> Result<(), String> {
        let s = self.scenario;
        let i = self.next_index[r];
        self.next_index[r] += 1;
        let name = client_name(s.server, r, i);
        // An address per client (the server limits handshakes per address).
        let k = self.joined + self.errors;
        let to = self.handshakes[i % self.handshakes.len()];
        let joined = match s.mode {
            Mode::Mix => {
                handshake(to, client_ip(k), &name, HANDSHAKE_TIMEOUT).map(|(socket, hub)| {
                    let index = i % self.bins.len();
                    Client::new(index, r, socket, hub, self.loop_of[&self.bins[index]])
                })
            }
            Mode::Forward => self.join_app(client_ip(k), r, i, spot),
        };
        match joined {
            Ok(mut c) => {
                let index = c.index;
                // Half of each room's first clients, and every listener checked, stay all
                // along: the churn comes and goes around them.
                c.stays = spot || i < s.clients.div_ceil(2);
                if spot && c.link.is_none() {
                    // The whole window and a block to spare.
                    let frames = (s.seconds * 48_000.0) as usize + usize::from(s.frames);
                    c.recording = Some(Recording::with_capacity(frames));
                }
                drivers.add(c)?;
                self.members[r].push(index);
                if self.in_window {
                    self.touched[r].insert(index);
                }
                self.joined += 1;
                self.failing = 0;
            }
            Err(e) => {
                self.errors += 1;
                self.failing += 1;
                self.first_error.get_or_insert(e);
            }
        }
        Ok(())
    }

    /// Member `i` of room `r` joins as the app does, from `from`: signaling (kept open by the
    /// keeper), then its WebRTC link to the hub, offered and answered. Its link's channel opens
    /// once its driver runs it. A spot-checked listener records each sender's first
    /// [`tones::ANALYSIS_FRAMES`] in the window.
    fn join_app(
        &mut self,
        from: std::net::IpAddr,
        r: usize,
        i: usize,
        spot: bool,
    ) -> Result<Client, String> {
        let s = self.scenario;
        let http = self.http.ok_or("the server has no HTTP address")?;
        let name = format!("c{i}");
        let mut ws = signal::connect(http, from)?;
        let stream = signal::join(&mut ws, &room_name(r), &name, &signal::member_id(r, i))
            .map_err(|e| format!("{name} joining: {e}"))?;
        let record = if spot {
            tones::ANALYSIS_FRAMES + usize::from(s.frames)
        } else {
            0
        };
        let (mut link, socket, offer) = HubLink::offer(from, stream, s.clients - 1, record)?;
        let answer = signal::hub_offer(&mut ws, &offer).map_err(|e| format!("{name}: {e}"))?;
        link.accept(&answer)?;
        socket
            .set_nonblocking(true)
            .map_err(|e| format!("non-blocking UDP: {e}"))?;
        // The link speaks to whatever address the hub's candidate has; `hub` goes unused.
        let local = socket
            .local_addr()
            .map_err(|e| format!("UDP address: {e}"))?;
        self.keeper.keep(ws)?;
        self.streams[r].push((stream, i));
        let tone = self.loop_of[&self.bins[r * s.clients + i]];
        Ok(Client::new(i, r, socket, local, tone).with_link(link))
    }

    /// The bins of room `r` that the same one sender played through the whole window, except
    /// listener `me`'s own: the voices `me` must hear all along.
    fn steady_bins(&self, r: usize, me: usize) -> Vec<usize> {
        // Per bin: its senders over the run, and whether one came or went in the window.
        let mut senders: BTreeMap<usize, (usize, bool)> = BTreeMap::new();
        for &i in &self.members[r] {
            let e = senders.entry(self.bins[i]).or_default();
            e.0 += 1;
            e.1 |= i == me || self.touched[r].contains(&i);
        }
        senders
            .into_iter()
            .filter(|&(_, (n, touched))| n == 1 && !touched)
            .map(|(k, _)| k)
            .collect()
    }
}
