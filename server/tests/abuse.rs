//! The server under abuse, on loopback: thousands of idle connections from one address,
//! receivers that never read, stalled HTTP and TLS sockets, forged origins, and the close codes
//! clients must receive. Each test prints its figures; run with `--nocapture` to see them.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{http, message_rate, ws_from, BinaryServer, Client, TestServer, Ws};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

const HOME: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const NEIGHBOUR: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const THIRD: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
const MIB: f64 = 1024.0 * 1024.0;

/// The heavy tests (write) run alone: the machine has few cores, and their load would upset the
/// timings the light tests (read) measure, and each other's memory figures.
static HEAVY: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A peer id or token: 32 lowercase hex chars from a number.
fn id(n: u32) -> String {
    format!("{n:032x}")
}

fn join_message(room: &str, n: u32) -> String {
    json!({"type": "join", "room": room, "name": format!("m{n}"), "peer": id(n),
           "token": id(n + 100_000)})
    .to_string()
}

/// What an upgrade attempt got.
fn outcome(r: &Result<Ws, WsError>) -> String {
    match r {
        Ok(_) => "101 upgraded".into(),
        Err(WsError::Http(response)) => match response.status().as_u16() {
            429 if response.headers().contains_key("retry-after") => {
                "429 too fast (with Retry-After)".into()
            }
            429 => "429 address holds its share".into(),
            status => format!("{status}"),
        },
        Err(e) => format!("failed: {e}"),
    }
}

/// What [`open_idle`] kept open and measured.
struct Idle {
    open: Vec<Ws>,
    /// How many attempts got each outcome.
    outcomes: BTreeMap<String, usize>,
    /// The server's RSS in KiB, before the attempts and with the sockets open.
    rss_before: u64,
    rss_idle: u64,
}

/// 2000 upgrades from 127.0.0.1, one after the other; the upgraded sockets are kept open.
/// Prints what the attempts got, the server's `limits` named in the line.
async fn open_idle(server: &BinaryServer, limits: &str) -> Idle {
    let rss_before = server.rss_kib();
    let started = Instant::now();
    let mut open = Vec::new();
    let mut outcomes = BTreeMap::new();
    for _ in 0..2000 {
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            ws_from(HOME, server.addr, None, None),
        )
        .await
        .expect("every attempt is answered within 5 s");
        *outcomes.entry(outcome(&r)).or_insert(0) += 1;
        if let Ok(ws) = r {
            open.push(ws);
        }
    }
    println!(
        "2000 upgrade attempts from 127.0.0.1 in {:.2} s ({limits}): {outcomes:?}",
        started.elapsed().as_secs_f64()
    );
    Idle {
        open,
        outcomes,
        rss_before,
        rss_idle: server.rss_kib(),
    }
}

/// Joins `room` from `from` and returns the welcome.
async fn join_from(server: SocketAddr, from: IpAddr, room: &str, n: u32) -> (Client, Value) {
    let mut client = Client::connect_from(from, server).await;
    client
        .send_raw(Message::Text(join_message(room, n).into()))
        .await;
    let welcome = client.recv().await;
    (client, welcome)
}

fn refusal_lines(log: &[String], addr: &str) -> Vec<String> {
    let needle = format!("refused addr={addr}");
    log.iter()
        .filter(|l| l.contains(&needle))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_from_one_address_do_not_stop_another() {
    let _heavy = HEAVY.write().await;
    // Defaults, but idle connections are kept for the whole test.
    let server = BinaryServer::start(&["--join-timeout-ms", "30000"]);
    let started = Instant::now();
    let Idle {
        open: idle,
        outcomes,
        rss_before,
        rss_idle,
    } = open_idle(&server, "defaults").await;

    let t = Instant::now();
    let (_neighbour, welcome) = join_from(server.addr, NEIGHBOUR, "jam", 1).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    println!(
        "127.0.0.2 connected and joined in {:.1} ms while 127.0.0.1 held {} connections; \
         server RSS {} KiB before, {} KiB with them",
        t.elapsed().as_secs_f64() * 1e3,
        idle.len(),
        rss_before,
        rss_idle
    );
    assert_eq!(idle.len(), 32, "the per-address cap");
    assert_eq!(outcomes.get("429 address holds its share"), Some(&1968));

    // Connections opened and closed again are paced by the bucket (2/s after a burst of 32).
    drop(idle);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let churn_start = Instant::now();
    let mut churn: BTreeMap<String, usize> = BTreeMap::new();
    let mut retry_after = None;
    for _ in 0..20_000 {
        if churn_start.elapsed() >= Duration::from_secs(3) {
            break;
        }
        let r = ws_from(HOME, server.addr, None, None).await;
        *churn.entry(outcome(&r)).or_insert(0) += 1;
        match r {
            Ok(mut ws) => {
                let _ = ws.close(None).await;
            }
            Err(WsError::Http(response)) => {
                retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok().map(String::from));
            }
            Err(_) => {}
        }
    }
    let since_start = started.elapsed().as_secs_f64();
    let admitted = churn.get("101 upgraded").copied().unwrap_or(0);
    println!(
        "then 3 s of opening and closing from 127.0.0.1: {churn:?}, last Retry-After {retry_after:?}"
    );
    assert!(
        admitted as f64 <= 2.0 * since_start + 1.0,
        "{admitted} admitted; the bucket was emptied {since_start:.1} s ago"
    );
    assert!(
        churn
            .get("429 too fast (with Retry-After)")
            .copied()
            .unwrap_or(0)
            > 0
    );
    assert_eq!(retry_after.as_deref(), Some("1"));

    let (code, log) = server.stop().await;
    assert_eq!(code, Some(0));
    let refused = refusal_lines(&log, "127.0.0.1");
    println!(
        "{} log lines about the {} refusals from 127.0.0.1:\n  {}",
        refused.len(),
        1968 + churn.values().sum::<usize>() - admitted,
        refused.join("\n  ")
    );
    // One line when a 10 s window opens and one summary when it ends.
    let windows = (started.elapsed().as_secs() / 10 + 1) as usize;
    assert!(refused.len() <= 2 * windows, "{refused:#?}");
    assert!(refused[0].contains("status=429 reason=address-full"));
    assert!(
        log.iter()
            .any(|l| l.contains("join room=jam") && l.contains("addr=127.0.0.2:")),
        "the join is logged with the address"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_cap_is_shared_even_without_a_per_address_cap() {
    let _heavy = HEAVY.write().await;
    // No per-address cap or bucket to speak of: only the fair share holds the attacker back.
    let server = BinaryServer::start(&[
        "--join-timeout-ms",
        "30000",
        "--max-connections",
        "1024",
        "--max-connections-per-address",
        "100000",
        "--connect-rate",
        "100000",
        "--connect-burst",
        "100000",
    ]);
    let Idle {
        open: idle,
        rss_before,
        rss_idle,
        ..
    } = open_idle(&server, "cap 1024, no per-address cap").await;
    assert_eq!(idle.len(), 512, "alone, an address gets half of the cap");
    let (_b, welcome) = join_from(server.addr, NEIGHBOUR, "jam", 1).await;
    assert_eq!(welcome["type"], "welcome");
    let (_c, welcome) = join_from(server.addr, THIRD, "jam", 2).await;
    assert_eq!(welcome["type"], "welcome");
    println!(
        "127.0.0.2 and 127.0.0.3 joined; server RSS {rss_before} KiB before, {rss_idle} KiB \
         with 512 idle connections ({:.1} KiB each)",
        (rss_idle.saturating_sub(rss_before)) as f64 / 512.0
    );
    drop(idle);
    let (code, _) = server.stop().await;
    assert_eq!(code, Some(0));
}

/// A WebSocket client written out by hand, so that reading megabytes of backlog costs a copy
/// and no parsing: it upgrades, joins, reads its welcome, then reads nothing until asked for
/// the close code.
struct RawReceiver {
    stream: TcpStream,
    /// Bytes read and not yet used.
    buf: Vec<u8>,
}

impl RawReceiver {
    async fn join(server: SocketAddr, room: &str, n: u32) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(SocketAddr::new(HOME, 0)).expect("bind");
        socket.set_recv_buffer_size(4096).expect("receive buffer");
        let mut stream = socket.connect(server).await.expect("connect");
        let upgrade = format!(
            "GET /ws HTTP/1.1\r\nHost: {server}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(upgrade.as_bytes()).await.expect("send");
        let mut me = Self {
            stream,
            buf: Vec::new(),
        };
        let end = loop {
            if let Some(i) = me.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            assert!(me.fill().await > 0, "closed during the upgrade");
        };
        assert!(me.buf.starts_with(b"HTTP/1.1 101"), "upgrade refused");
        me.buf.drain(..end);
        // One masked text frame (mask 1,2,3,4).
        let payload = join_message(room, n).into_bytes();
        assert!(payload.len() < 65536);
        let mut frame = vec![0x81];
        if payload.len() < 126 {
            frame.push(0x80 | payload.len() as u8);
        } else {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        }
        let mask = [1u8, 2, 3, 4];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        me.stream.write_all(&frame).await.expect("send the join");
        let (opcode, welcome) = me.frame().await.expect("a welcome frame");
        assert_eq!(opcode, 1);
        let welcome: Value = serde_json::from_slice(&welcome).expect("JSON");
        assert_eq!(welcome["type"], "welcome");
        me
    }

    async fn fill(&mut self) -> usize {
        let mut chunk = vec![0u8; 64 * 1024];
        let n = self.stream.read(&mut chunk).await.unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    /// The next frame's opcode and payload; `None` at the end of the stream.
    async fn frame(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 2 {
                let (opcode, short) = (self.buf[0] & 0x0f, usize::from(self.buf[1] & 0x7f));
                let (head, len) = match short {
                    126 if self.buf.len() >= 4 => (
                        4,
                        usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]])),
                    ),
                    127 if self.buf.len() >= 10 => {
                        let mut n = [0u8; 8];
                        n.copy_from_slice(&self.buf[2..10]);
                        (10, u64::from_be_bytes(n) as usize)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (2, n),
                };
                if head != usize::MAX && self.buf.len() >= head + len {
                    let payload = self.buf[head..head + len].to_vec();
                    self.buf.drain(..head + len);
                    return Some((opcode, payload));
                }
            }
            if self.fill().await == 0 {
                return None;
            }
        }
    }

    /// Reads frames until the close frame; its code, or what came instead.
    async fn close_code(&mut self) -> String {
        loop {
            match self.frame().await {
                Some((8, payload)) if payload.len() >= 2 => {
                    return format!("close {}", u16::from_be_bytes([payload[0], payload[1]]));
                }
                Some((8, _)) => return "close frame without code".into(),
                Some(_) => {}
                None => return "end without close frame".into(),
            }
        }
    }
}

/// What [`non_reading_receivers`] measured.
struct Flood {
    rss_before: u64,
    rss_peak: u64,
    rss_after: u64,
    sent_bytes: u64,
    took: Duration,
    codes: BTreeMap<String, usize>,
}

/// 32 receivers in 4 rooms join and stop reading; one sender per room sends them 60 KB
/// signals round robin until the server has dropped all of them (at most 20 s). Each receiver
/// starts reading once its departure is announced and reports the close code it got.
async fn non_reading_receivers(per_connection: u64, total: u64) -> Flood {
    let per_connection = per_connection.to_string();
    let total = total.to_string();
    let server = BinaryServer::start(&[
        "--outbound-bytes-per-connection",
        &per_connection,
        "--outbound-bytes-total",
        &total,
        "--rate",
        "100000",
        "--burst",
        "100000",
        "--heartbeat-timeout-ms",
        "60000",
        "--max-connections-per-address",
        "64",
        "--connect-burst",
        "64",
    ]);
    let addr = server.addr;
    let mut receivers = Vec::new();
    let mut senders = Vec::new();
    for room in 0..4u32 {
        let name = format!("room{room}");
        for k in 0..8u32 {
            let n = room * 100 + k + 1;
            receivers.push((id(n), RawReceiver::join(addr, &name, n).await));
        }
        let (sender, welcome) = join_from(addr, HOME, &name, room * 100 + 99).await;
        assert_eq!(welcome["peers"].as_array().map(Vec::len), Some(8));
        let targets: Vec<String> = (0..8u32).map(|k| id(room * 100 + k + 1)).collect();
        senders.push((sender, targets));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_before = server.rss_kib();

    // Departures announced to the senders.
    let dropped = Arc::new(Mutex::new(HashSet::<String>::new()));
    let (dropped_tx, dropped_rx) = watch::channel(0usize);
    let dropped_tx = Arc::new(dropped_tx);
    let receiver_tasks: Vec<_> = receivers
        .into_iter()
        .map(|(peer, mut c): (String, RawReceiver)| {
            let dropped = dropped.clone();
            let mut changed = dropped_rx.clone();
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(25);
                let is_dropped = || dropped.lock().expect("lock").contains(&peer);
                while !is_dropped() {
                    let woken = tokio::time::timeout_at(deadline, changed.changed()).await;
                    if !matches!(woken, Ok(Ok(()))) && !is_dropped() {
                        return "not dropped within 25 s".to_string();
                    }
                }
                // Now read the backlog, then the close frame.
                tokio::time::timeout(Duration::from_secs(5), c.close_code())
                    .await
                    .unwrap_or_else(|_| "nothing within 5 s".into())
            })
        })
        .collect();

    let sampling = Arc::new(Mutex::new(true));
    let sampler = {
        let sampling = sampling.clone();
        let pid = server.pid;
        tokio::spawn(async move {
            let mut peak = 0;
            for _ in 0..5000 {
                if !*sampling.lock().expect("lock") {
                    break;
                }
                if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                    let rss = status
                        .lines()
                        .find_map(|l| l.strip_prefix("VmRSS:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                        .unwrap_or(0u64);
                    peak = peak.max(rss);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            peak
        })
    };

    let started = Instant::now();
    let pad = "x".repeat(60_000);
    let sender_tasks: Vec<_> = senders
        .into_iter()
        .map(|(sender, targets)| {
            let dropped = dropped.clone();
            let dropped_tx = dropped_tx.clone();
            // Made once: serialising 60 KB per message would slow the test, not the server.
            let signals: Vec<Message> = targets
                .iter()
                .map(|to| {
                    let text = json!({"type": "signal", "to": to, "data": {"pad": pad}});
                    Message::Text(text.to_string().into())
                })
                .collect();
            tokio::spawn(async move {
                let (mut sink, mut stream) = sender.ws.split();
                let mine: HashSet<String> = targets.iter().cloned().collect();
                let reader = {
                    let dropped = dropped.clone();
                    tokio::spawn(async move {
                        let mut left = 0;
                        while let Ok(Some(Ok(msg))) =
                            tokio::time::timeout(Duration::from_secs(30), stream.next()).await
                        {
                            let Message::Text(t) = msg else { continue };
                            let v: Value = serde_json::from_str(t.as_str()).unwrap_or_default();
                            if v["type"] == "peer-left" {
                                let peer = v["peer"].as_str().unwrap_or_default().to_string();
                                dropped.lock().expect("lock").insert(peer);
                                dropped_tx.send_modify(|n| *n += 1);
                                left += 1;
                                if left == 8 {
                                    break;
                                }
                            }
                        }
                    })
                };
                let mut sent = 0u64;
                let deadline = Instant::now() + Duration::from_secs(20);
                'sending: for i in 0..1_000_000u64 {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let live: Vec<usize> = {
                        let gone = dropped.lock().expect("lock");
                        if mine.iter().all(|p| gone.contains(p)) {
                            break 'sending;
                        }
                        (0..targets.len())
                            .filter(|k| !gone.contains(&targets[*k]))
                            .collect()
                    };
                    let msg = signals[live[(i as usize) % live.len()]].clone();
                    sent += msg.len() as u64;
                    if sink.send(msg).await.is_err() {
                        break;
                    }
                }
                let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
                sent
            })
        })
        .collect();
    let mut sent_bytes = 0;
    for t in sender_tasks {
        sent_bytes += t.await.expect("sender task");
    }
    let took = started.elapsed();
    let mut codes = BTreeMap::new();
    for t in receiver_tasks {
        *codes.entry(t.await.expect("receiver task")).or_insert(0) += 1;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    *sampling.lock().expect("lock") = false;
    let rss_peak = sampler.await.expect("sampler");
    let rss_after = server.rss_kib();
    let (code, log) = server.stop().await;
    assert_eq!(code, Some(0));
    let slow_lines = log
        .iter()
        .filter(|l| l.contains("reason=\"too slow"))
        .count();
    let with_addr = log
        .iter()
        .filter(|l| l.contains("reason=\"too slow") && l.contains("addr=127.0.0.1:"))
        .count();
    let closes: Vec<&String> = log.iter().filter(|l| l.contains(" close")).collect();
    assert_eq!(
        (slow_lines, with_addr),
        (32, 32),
        "each drop logged with its address: {closes:#?}"
    );
    Flood {
        rss_before,
        rss_peak,
        rss_after,
        sent_bytes,
        took,
        codes,
    }
}

fn print_flood(what: &str, f: &Flood) {
    println!(
        "{what}: sent {:.0} MiB of signals in {:.1} s; server RSS {:.1} MiB before, peak {:.1} \
         MiB (+{:.1} MiB), {:.1} MiB 1 s after the last drop; receivers got {:?}",
        f.sent_bytes as f64 / MIB,
        f.took.as_secs_f64(),
        f.rss_before as f64 / 1024.0,
        f.rss_peak as f64 / 1024.0,
        f.rss_peak.saturating_sub(f.rss_before) as f64 / 1024.0,
        f.rss_after as f64 / 1024.0,
        f.codes
    );
}

/// Runs [`non_reading_receivers`] with these budgets and prints its figures under `what`;
/// every receiver must have been closed with 1013 and the server's RSS have risen by at most
/// `bound_kib`.
async fn flood_is_contained(per_connection: u64, total: u64, what: &str, bound_kib: u64) {
    let f = non_reading_receivers(per_connection, total).await;
    print_flood(what, &f);
    assert_eq!(f.codes.get("close 1013"), Some(&32), "{:?}", f.codes);
    let rise_kib = f.rss_peak.saturating_sub(f.rss_before);
    assert!(
        rise_kib <= bound_kib,
        "RSS rose by {rise_kib} KiB (bound {bound_kib} KiB)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reading_receivers_stay_within_the_default_budgets() {
    let _heavy = HEAVY.write().await;
    // The defaults: 1 MiB per connection, 64 MiB in all.
    flood_is_contained(
        1 << 20,
        64 << 20,
        "32 non-reading receivers, default budgets (1 MiB each, 64 MiB total; RSS bound +64 MiB)",
        64 * 1024,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reading_receivers_are_held_to_the_total_budget() {
    let _heavy = HEAVY.write().await;
    // Each queue could hold 4 MiB (128 MiB for 32), but all together only 8 MiB. The bound:
    // the total, each queue's unshared 16 KiB, and 12 MiB for what the budget does not count:
    // messages being parsed, the sockets' read and write buffers (each keeps the capacity of
    // the largest frame it held, up to 64 KiB), the allocator's slack.
    flood_is_contained(
        4 << 20,
        8 << 20,
        "32 non-reading receivers, 4 MiB each but 8 MiB total (RSS bound +20.5 MiB)",
        8 * 1024 + 32 * 16 + 12 * 1024,
    )
    .await;
}

/// Reads until the peer closes or resets; returns how long after `since` that was, or `None`
/// if it was not within `limit`.
async fn time_to_close(
    (io, since): &mut (impl AsyncRead + Unpin, Instant),
    limit: Duration,
) -> Option<Duration> {
    let mut buf = [0u8; 4096];
    let done = tokio::time::timeout(limit, async {
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    done.ok().map(|()| since.elapsed())
}

/// Sends a keep-alive GET / and reads its whole response (Content-Length bodies only).
async fn keep_alive_get(io: &mut (impl AsyncRead + AsyncWrite + Unpin)) -> u16 {
    io.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("send");
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), io.read(&mut buf))
            .await
            .expect("a response in time")
            .expect("read");
        assert!(n > 0, "closed before the response ended");
        raw.extend_from_slice(&buf[..n]);
        let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a content-length");
        if raw.len() >= end + 4 + length {
            return head[9..12].parse().expect("a status");
        }
    }
}

fn summary(times: &[Option<Duration>]) -> String {
    let mut ms: Vec<f64> = times
        .iter()
        .flatten()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    ms.sort_by(f64::total_cmp);
    if ms.is_empty() {
        return "none closed".into();
    }
    format!(
        "{} of {} closed, after {:.0}-{:.0} ms (median {:.0})",
        ms.len(),
        times.len(),
        ms[0],
        ms[ms.len() - 1],
        ms[ms.len() / 2]
    )
}

/// How long each of `sockets` took to be closed by the server (see [`time_to_close`]), all
/// waited for together, at most 5 s.
async fn close_times(sockets: &mut [(impl AsyncRead + Unpin, Instant)]) -> Vec<Option<Duration>> {
    let limit = Duration::from_secs(5);
    futures_util::future::join_all(sockets.iter_mut().map(|s| time_to_close(s, limit))).await
}

/// Prints under `title` how each kind of stalled socket was closed, then checks that each was
/// closed near its timeout. A kind: what it is (as printed), its name in a failure, the close
/// times and the timeout in ms.
fn report_closes(title: &str, kinds: &[(&str, &str, &[Option<Duration>], u64)]) {
    println!("{title}:");
    for (label, _, times, _) in kinds {
        println!("  {:<35}{}", format!("{label}:"), summary(times));
    }
    for (_, what, times, timeout_ms) in kinds {
        assert_closed_near(what, times, *timeout_ms);
    }
}

fn assert_closed_near(what: &str, times: &[Option<Duration>], timeout_ms: u64) {
    for t in times {
        let t = t.unwrap_or_else(|| panic!("{what}: a socket was not closed"));
        assert!(
            t >= Duration::from_millis(timeout_ms * 9 / 10)
                && t <= Duration::from_millis(timeout_ms + 1000),
            "{what}: closed after {t:?}, the timeout being {timeout_ms} ms"
        );
    }
}

#[tokio::test]
async fn stalled_http_sockets_are_closed_after_the_header_timeout() {
    let _light = HEAVY.read().await;
    let server = TestServer::start(|c| c.header_timeout_ms = 500).await;
    let mut half_lines = Vec::new();
    let mut silent = Vec::new();
    let mut idle = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        let since = Instant::now();
        s.write_all(b"GET / HT").await.expect("send");
        half_lines.push((s, since));
        let s = TcpStream::connect(server.addr).await.expect("connect");
        silent.push((s, Instant::now()));
    }
    for _ in 0..5 {
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        assert_eq!(keep_alive_get(&mut s).await, 200);
        idle.push((s, Instant::now()));
    }
    // The server still answers others meanwhile.
    assert_eq!(http(server.addr, "GET", "/").await.status, 200);
    let (half, quiet, kept) = tokio::join!(
        close_times(&mut half_lines),
        close_times(&mut silent),
        close_times(&mut idle),
    );
    report_closes(
        "plain HTTP, header timeout 500 ms",
        &[
            (
                "half a request line, then nothing",
                "half request line",
                &half,
                500,
            ),
            ("connected, nothing sent", "silent", &quiet, 500),
            (
                "idle keep-alive after a response",
                "idle keep-alive",
                &kept,
                500,
            ),
        ],
    );
}

#[tokio::test]
async fn stalled_tls_sockets_are_closed_after_the_handshake_and_header_timeouts() {
    let _light = HEAVY.read().await;
    let dir = common::tls_dir();
    let server = TestServer::start(|c| {
        c.tls_cert = Some(dir.join("test-cert.pem"));
        c.tls_key = Some(dir.join("test-key.pem"));
        c.tls_handshake_timeout_ms = 500;
        c.header_timeout_ms = 700;
    })
    .await;
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let connector = common::tls_client();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");

    let mut silent = Vec::new();
    let mut partial_hello = Vec::new();
    let mut half_lines = Vec::new();
    let mut idle = Vec::new();
    for _ in 0..10 {
        let s = TcpStream::connect(server.addr).await.expect("connect");
        silent.push((s, Instant::now()));
        let mut s = TcpStream::connect(server.addr).await.expect("connect");
        let since = Instant::now();
        // A TLS record header announcing a ClientHello that never comes.
        s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            .await
            .expect("send");
        partial_hello.push((s, since));
    }
    for _ in 0..5 {
        let tcp = TcpStream::connect(server.addr).await.expect("connect");
        let mut tls = connector
            .connect(name.clone(), tcp)
            .await
            .expect("TLS handshake");
        let since = Instant::now();
        tls.write_all(b"GET / HT").await.expect("send");
        half_lines.push((tls, since));
        let tcp = TcpStream::connect(server.addr).await.expect("connect");
        let mut tls = connector
            .connect(name.clone(), tcp)
            .await
            .expect("TLS handshake");
        assert_eq!(keep_alive_get(&mut tls).await, 200, "HTTPS works");
        idle.push((tls, Instant::now()));
    }
    let (quiet, hello, half, kept) = tokio::join!(
        close_times(&mut silent),
        close_times(&mut partial_hello),
        close_times(&mut half_lines),
        close_times(&mut idle),
    );
    report_closes(
        "TLS, handshake timeout 500 ms, header timeout 700 ms",
        &[
            ("connected, nothing sent", "silent", &quiet, 500),
            (
                "a ClientHello begun, never ended",
                "partial ClientHello",
                &hello,
                500,
            ),
            (
                "half a request line after TLS",
                "half request line",
                &half,
                700,
            ),
            (
                "idle keep-alive after a response",
                "idle keep-alive",
                &kept,
                700,
            ),
        ],
    );
}

#[tokio::test]
async fn a_forged_origin_is_refused() {
    let _light = HEAVY.read().await;
    let server = TestServer::start(|c| {
        c.allowed_origins = vec!["https://proxy.example".into()];
    })
    .await;
    let own = format!("http://{}", server.addr);
    let cases: [(Option<&str>, u16); 7] = [
        (None, 101),
        (Some(own.as_str()), 101),
        (Some("https://proxy.example"), 101),
        (Some("http://evil.example"), 403),
        (Some(&format!("https://{}", server.addr)), 403),
        (
            Some(&format!("http://localhost:{}", server.addr.port())),
            403,
        ),
        (Some("null"), 403),
    ];
    for (origin, expected) in cases {
        let r = ws_from(HOME, server.addr, origin, None).await;
        let (status, body) = match &r {
            Ok(_) => (101, String::new()),
            Err(WsError::Http(response)) => (
                response.status().as_u16(),
                String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                    .into_owned(),
            ),
            Err(e) => panic!("{origin:?}: {e}"),
        };
        println!("Origin {origin:?}: {status} {}", body.trim());
        assert_eq!(status, expected, "Origin {origin:?}");
        if status == 403 {
            assert!(body.contains("may not connect"), "{body}");
        }
    }
}

/// What the client got: the close code, or what came instead.
fn code_of(closed: (Option<u16>, Vec<Value>)) -> String {
    closed.0.map_or("no close frame".into(), |c| c.to_string())
}

#[tokio::test]
async fn the_documented_close_codes_arrive() {
    let _light = HEAVY.read().await;
    let mut results: BTreeMap<&str, BTreeMap<String, usize>> = BTreeMap::new();
    let runs = 10;

    // A client that is not reading yet: its receive window is full of the server's replies, so
    // the server's close frame waits in the server's send queue. Closing the socket then, with
    // the client's input unread, would reset it and throw the close frame away.
    async fn stuffed(addr: SocketAddr) -> Client {
        let mut c = Client {
            ws: ws_from(HOME, addr, None, Some(4096))
                .await
                .expect("connects"),
        };
        let unknown = json!({"type": "y".repeat(40)}).to_string();
        for _ in 0..100 {
            c.ws.feed(Message::Text(unknown.clone().into()))
                .await
                .expect("send");
        }
        c.ws.flush().await.expect("flush");
        tokio::time::sleep(Duration::from_millis(50)).await;
        c
    }

    // 1009: a message far over the limit, most of it left unread by the server.
    let server = TestServer::start(|c| c.max_message_bytes = 1024).await;
    for _ in 0..runs {
        let mut c = stuffed(server.addr).await;
        let big = json!({"type": "ping", "pad": "x".repeat(256 * 1024)}).to_string();
        let _ = c.ws.send(Message::Text(big.into())).await;
        *results
            .entry("1009 too large")
            .or_default()
            .entry(code_of(c.closed().await))
            .or_insert(0) += 1;
    }

    // 1008: flooding, with thousands of messages still unread when the server closes.
    let server = TestServer::start(message_rate(5.0, 100)).await;
    for _ in 0..runs {
        let mut c = stuffed(server.addr).await;
        for i in 0..3000 {
            let ping = json!({"type": "ping", "t": i}).to_string();
            if c.ws.feed(Message::Text(ping.into())).await.is_err() {
                break;
            }
        }
        let _ = c.ws.flush().await;
        *results
            .entry("1008 flooding")
            .or_default()
            .entry(code_of(c.closed().await))
            .or_insert(0) += 1;
    }

    // 1008: no join within the deadline, from the start or after leaving.
    let server = TestServer::start(|c| c.join_timeout_ms = 300).await;
    let mut waited = Vec::new();
    for i in 0..runs {
        let mut c = Client::connect_from(HOME, server.addr).await;
        let start = Instant::now();
        if i % 2 == 1 {
            c.join("r", "A", 'a', '1', None).await;
            tokio::time::sleep(Duration::from_millis(400)).await;
            c.send(json!({"type": "leave"})).await;
        }
        let closed = c.closed().await;
        waited.push(start.elapsed());
        *results
            .entry("1008 join deadline")
            .or_default()
            .entry(code_of(closed))
            .or_insert(0) += 1;
    }
    for (i, w) in waited.iter().enumerate() {
        let expected = if i % 2 == 1 { 700 } else { 300 };
        assert!(
            *w >= Duration::from_millis(expected - 20)
                && *w < Duration::from_millis(expected + 900),
            "run {i}: closed after {w:?}"
        );
    }

    // 1001: shutdown, for every member at once.
    let mut server = TestServer::start(|_| {}).await;
    let mut members = Vec::new();
    for n in 0..runs as u32 {
        let mut c = Client::connect_from(HOME, server.addr).await;
        c.send_raw(Message::Text(join_message("r", n + 1).into()))
            .await;
        assert_eq!(c.recv().await["type"], "welcome");
        members.push(c);
    }
    server.begin_shutdown();
    for mut c in members {
        *results
            .entry("1001 shutdown")
            .or_default()
            .entry(code_of(c.closed().await))
            .or_insert(0) += 1;
    }

    for (what, got) in &results {
        println!("{what}: {got:?} in {runs} runs");
    }
    let expect = [
        ("1009 too large", "1009"),
        ("1008 flooding", "1008"),
        ("1008 join deadline", "1008"),
        ("1001 shutdown", "1001"),
    ];
    for (what, code) in expect {
        assert_eq!(
            results[what].get(code),
            Some(&runs),
            "{what}: {:?}",
            results[what]
        );
    }
    println!(
        "join deadline closes after {:?}",
        waited
            .iter()
            .map(|w| format!("{:.0} ms", w.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
    );
}
