//! The hub's load benchmark: N emulated clients in one room through the real server and its
//! real hub (WebRTC data channels on loopback), in forward and in mix mode, measuring the hub
//! threads' CPU per client-second and the share of blocks delivered.
//!
//! Each client is a [`HubClient`] (str0m, as a browser would connect) on a thread of its own,
//! sending one 128-frame PCM16 stereo packet per block, in real time, its own tone, beside the
//! server in this process; the figure reported is the CPU time of the hub's worker threads only
//! (read from /proc per thread), so the emulator's own cost does not count against the hub. Delivery is counted per client: in forward mode
//! every other client's packets (in bundles), in mix mode one mix packet per block.
//!
//! Beside each row, the same run measures what the kernel alone charges the hub's threads for
//! the datagrams they moved: a probe on this thread sends 1,000-byte datagrams on loopback to
//! 32 sockets and reads them back, timing each side from `/proc/thread-self/schedstat`
//! (`udp_send_us`, `udp_recv_us` per datagram). Times the row's datagrams per client-second (in
//! and out, from the workers' counters), that is `kernel_floor_ms_per_client_s`: the part of
//! `cpu_ms_per_client_s` no change to the hub's own code can remove while each client costs
//! that many datagrams. On loopback a send also delivers into the receiving socket, so the
//! floor holds the receive side of what the hub sends, as the hub's figure does.
//!
//! Usage: `cargo run --release -p tutti-server --example hub_load -- [--clients 8,32]
//! [--modes forward,mix] [--seconds 10] [--warmup 2]`.
//! Prints a table on stderr and, as its last stdout line, `{"hub":[{"mode":..,"clients":N,
//! "cpu_ms_per_client_s":x,"delivery_pct":d,"kernel_floor_ms_per_client_s":f,...}]}`.

use std::fs;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use tutti_core::bundle;
use tutti_server::hub::client::{pcm16_packet, HubClient};
use tutti_server::hub::worker::StatsSnapshot;
use tutti_server::{Config, HubStats, Server};

const FRAMES: usize = 128;
const BLOCK_US: f64 = FRAMES as f64 * 1e6 / 48_000.0;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn option(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == &format!("--{name}"))
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string().into()))
        .await
        .expect("signaling send");
}

/// The next message of `ws` whose type is `kind`.
async fn expect(ws: &mut Ws, kind: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let next = tokio::time::timeout_at(deadline, ws.next())
            .await
            .expect("a signaling reply in time");
        if let Some(Ok(Message::Text(t))) = next {
            let v: Value = serde_json::from_str(t.as_str()).expect("JSON");
            if v["type"] == kind {
                return v;
            }
            assert_ne!(v["type"], "error", "the server refused: {v}");
        }
    }
}

/// One emulated client's tone: one block of it (multiples of 375 Hz hold whole cycles in one
/// 128-frame block, so every block is the same).
fn tone_block(k: usize) -> Vec<f32> {
    let hz = 375.0 * (1 + k % 24) as f32;
    (0..FRAMES)
        .map(|n| 0.1 * (std::f32::consts::TAU * hz * n as f32 / 48_000.0).sin())
        .collect()
}

/// The hub worker threads' CPU time so far (utime + stime of threads named `hub-*`), ms.
fn hub_cpu_ms() -> f64 {
    let ticks_per_s = 100.0; // USER_HZ on Linux
    let mut ticks = 0u64;
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    for task in tasks.flatten() {
        let comm = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("hub-") {
            continue;
        }
        let stat = fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the ")" that closes the name: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let get = |i: usize| {
            f.get(i - 3)
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += get(14) + get(15);
    }
    ticks as f64 * 1000.0 / ticks_per_s
}

/// This thread's CPU time so far, ns (the first field of `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The kernel's cost of one loopback datagram to this thread, µs: `(send, receive)`. Rounds of
/// one 1,000-byte datagram to each of 32 sockets, each round read back before the next; the
/// better of three trials of 2,000 rounds each (the machine is shared).
fn udp_floor_us() -> (f64, f64) {
    use std::net::UdpSocket;
    const SOCKETS: usize = 32;
    const ROUNDS: usize = 2000;
    let receivers: Vec<UdpSocket> = (0..SOCKETS)
        .filter_map(|_| UdpSocket::bind("127.0.0.1:0").ok())
        .collect();
    let Ok(sender) = UdpSocket::bind("127.0.0.1:0") else {
        return (f64::NAN, f64::NAN);
    };
    let to: Vec<SocketAddr> = receivers
        .iter()
        .filter_map(|r| r.local_addr().ok())
        .collect();
    for r in &receivers {
        let _ = r.set_nonblocking(true);
    }
    let payload = [0x5a_u8; 1000];
    let mut buf = [0_u8; 2048];
    let (mut best_send, mut best_recv) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        let (mut send_ns, mut recv_ns, mut sent, mut read) = (0, 0, 0_u64, 0_u64);
        for _ in 0..ROUNDS {
            let t0 = thread_cpu_ns();
            for a in &to {
                if sender.send_to(&payload, a).is_ok() {
                    sent += 1;
                }
            }
            let t1 = thread_cpu_ns();
            for r in &receivers {
                while r.recv_from(&mut buf).is_ok() {
                    read += 1;
                }
            }
            send_ns += t1 - t0;
            recv_ns += thread_cpu_ns() - t1;
        }
        best_send = best_send.min(send_ns as f64 / 1000.0 / sent.max(1) as f64);
        best_recv = best_recv.min(recv_ns as f64 / 1000.0 / read.max(1) as f64);
    }
    (best_send, best_recv)
}

struct Row {
    mode: &'static str,
    clients: usize,
    cpu_ms_per_client_s: f64,
    /// Datagrams the hub's workers received and sent, per client-second.
    in_per_client_s: f64,
    out_per_client_s: f64,
    delivery_pct: f64,
    seconds: f64,
    channel_refused: u64,
}

/// Counts the packets in the messages a client received (and forgets them).
fn count_packets(c: &mut HubClient) -> u64 {
    let mut n = 0;
    for m in c.received.drain(..) {
        if let Ok(b) = bundle::parse(&m) {
            n += b.len() as u64;
        }
    }
    n
}

/// Drives one client in real time for `warmup + seconds` from `start`; returns the packets it
/// received during the measured window, the blocks it sent then and its channel refusals.
fn drive(
    client: &mut HubClient,
    tone: &[f32],
    start: Instant,
    warmup: f64,
    seconds: f64,
) -> (u64, u64, u64) {
    let measure_from = start + Duration::from_secs_f64(warmup);
    let end = measure_from + Duration::from_secs_f64(seconds);
    let (mut received, mut sent_blocks) = (0u64, 0u64);
    let mut measuring = false;
    for block in 0u64.. {
        let due = start + Duration::from_secs_f64(block as f64 * BLOCK_US / 1e6);
        if due >= end {
            break;
        }
        client.run_until(due);
        if !measuring && due >= measure_from {
            measuring = true;
            count_packets(client);
            client.refused = 0;
        }
        client.send(&pcm16_packet(block as u16, tone));
        let got = count_packets(client);
        if measuring {
            received += got;
            sent_blocks += 1;
        }
    }
    (received, sent_blocks, client.refused)
}

/// The hub workers' figures summed over workers.
fn hub_totals(stats: &HubStats) -> StatsSnapshot {
    stats.snapshot().iter().sum()
}

async fn measure(
    stats: &HubStats,
    addr: SocketAddr,
    mode: &'static str,
    n: usize,
    warmup: f64,
    seconds: f64,
) -> Row {
    let room = format!("load-{mode}-{n}");
    let mut sockets = Vec::new();
    for k in 0..n {
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws"))
            .await
            .expect("signaling connects");
        let peer = format!("{:032x}", k + 1);
        let token = format!("{:032x}", k + 1001);
        send(
            &mut ws,
            json!({"type": "join", "room": room, "name": format!("c{k}"), "peer": peer, "token": token}),
        )
        .await;
        expect(&mut ws, "welcome").await;
        sockets.push(ws);
    }
    send(&mut sockets[0], json!({"type": "topology", "mode": mode})).await;
    expect(&mut sockets[0], "topology").await;
    let mut clients = Vec::new();
    for (k, ws) in sockets.iter_mut().enumerate() {
        let (mut client, offer) = HubClient::offer([127, 0, 0, 1].into());
        send(ws, json!({"type": "hub-offer", "sdp": offer})).await;
        let answer = expect(ws, "hub-answer").await;
        client.accept(answer["sdp"].as_str().expect("sdp"));
        clients.push((client, tone_block(k)));
    }
    // The signaling stays read while the audio runs, as a page's does: the server closes a
    // connection that leaves its pings unanswered (5 s), and the member's hub link with it.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let readers: Vec<_> = sockets
        .into_iter()
        .map(|mut ws| {
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = stopped.changed() => break,
                        next = ws.next() => if !matches!(next, Some(Ok(_))) { break },
                    }
                }
                let _ = ws.close(None).await;
            })
        })
        .collect();
    let cpu_before = hub_cpu_ms();
    let hub_before = hub_totals(stats);
    let started = Instant::now();
    // One thread per client, as each browser runs on its own: clients sharing a thread starve
    // each other's SCTP (acknowledgements read late), which would measure the emulator.
    let start = started + Duration::from_secs(2);
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|(mut c, tone)| {
            tokio::task::spawn_blocking(move || {
                c.open_within(Duration::from_secs(10));
                drive(&mut c, &tone, start, warmup, seconds)
            })
        })
        .collect();
    let (mut received, mut blocks, mut refused) = (0, 0, 0);
    for t in tasks {
        let (r, b, f) = t.await.expect("an emulator thread");
        received += r;
        blocks = blocks.max(b);
        refused += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = hub_cpu_ms() - cpu_before;
    let hub_after = hub_totals(stats);
    eprintln!(
        "hub {mode} {n}: datagrams in {} out {}, unknown {}, send failed {}, channel full {}",
        hub_after.datagrams_in - hub_before.datagrams_in,
        hub_after.datagrams_out - hub_before.datagrams_out,
        hub_after.unknown_source - hub_before.unknown_source,
        hub_after.send_failed - hub_before.send_failed,
        hub_after.channel_full - hub_before.channel_full,
    );
    let expected_per_block = if mode == "forward" { n * (n - 1) } else { n } as f64;
    let expected = expected_per_block * blocks as f64;
    let _ = stop.send(true);
    for r in readers {
        let _ = r.await;
    }
    Row {
        mode,
        clients: n,
        // The CPU window includes the warm-up, which carries the same load.
        cpu_ms_per_client_s: cpu / (n as f64 * elapsed),
        in_per_client_s: (hub_after.datagrams_in - hub_before.datagrams_in) as f64
            / (n as f64 * elapsed),
        out_per_client_s: (hub_after.datagrams_out - hub_before.datagrams_out) as f64
            / (n as f64 * elapsed),
        delivery_pct: if expected > 0.0 {
            100.0 * received as f64 / expected
        } else {
            0.0
        },
        seconds,
        channel_refused: refused,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let counts: Vec<usize> = option("clients", "8,32")
        .split(',')
        .map(|s| s.parse().expect("--clients takes numbers, e.g. 8,32"))
        .collect();
    let modes: Vec<&'static str> = option("modes", "forward,mix")
        .split(',')
        .map(|m| match m {
            "forward" => "forward",
            "mix" => "mix",
            other => panic!("--modes takes forward and mix, not {other}"),
        })
        .collect();
    let seconds: f64 = option("seconds", "10").parse().expect("--seconds");
    let warmup: f64 = option("warmup", "2").parse().expect("--warmup");
    let base = std::env::temp_dir().join(format!("tutti-hub-load-{}", std::process::id()));
    let dist = base.join("dist");
    fs::create_dir_all(&dist).expect("a temporary dist");
    fs::write(
        dist.join("index.html"),
        "<!doctype html><title>Tutti</title>",
    )
    .expect("index");
    let mut config = Config::with_dist(&dist);
    config.addr = [127, 0, 0, 1].into();
    config.port = 0;
    config.no_persist = true;
    config.room_cap = 1024;
    config.max_connections_per_address = 1024;
    config.connect_burst = 1024;
    let server = Server::bind(config).await.expect("the server starts");
    let addr = server.local_addr();
    let stats = server.hub_stats();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    let mut rows = Vec::new();
    for &mode in &modes {
        for &n in &counts {
            let row = measure(&stats, addr, mode, n, warmup, seconds).await;
            eprintln!(
                "hub {:>7} {:>4} clients: {:>7.3} ms CPU per client-second, {:>6.2} % delivered, {} sends refused",
                row.mode, row.clients, row.cpu_ms_per_client_s, row.delivery_pct, row.channel_refused
            );
            rows.push(row);
        }
    }
    let _ = stop.send(());
    let _ = task.await;
    let _ = fs::remove_dir_all(&base);
    // With the server stopped, so that nothing else of this process runs meanwhile.
    let (send_us, recv_us) = udp_floor_us();
    let round3 = |x: f64| (x * 1000.0).round() / 1000.0;
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let floor = (r.out_per_client_s * send_us + r.in_per_client_s * recv_us) / 1000.0;
            eprintln!(
                "hub {:>7} {:>4} clients: {:.0} datagrams in and {:.0} out per client-second; the kernel's loopback floor for them {:.3} ms of the {:.3}",
                r.mode, r.clients, r.in_per_client_s, r.out_per_client_s, floor, r.cpu_ms_per_client_s
            );
            json!({"mode": r.mode, "clients": r.clients,
                   "cpu_ms_per_client_s": round3(r.cpu_ms_per_client_s),
                   "delivery_pct": (r.delivery_pct * 100.0).round() / 100.0,
                   "datagrams_in_per_client_s": r.in_per_client_s.round(),
                   "datagrams_out_per_client_s": r.out_per_client_s.round(),
                   "kernel_floor_ms_per_client_s": round3(floor),
                   "udp_send_us": round3(send_us), "udp_recv_us": round3(recv_us),
                   "seconds": r.seconds, "sends_refused": r.channel_refused})
        })
        .collect();
    println!("{}", json!({ "hub": rows }));
}
