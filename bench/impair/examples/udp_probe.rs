//! A UDP probe for checking `tutti-impair` on loopback: sends numbered, timestamped packets at a
//! fixed rate from one thread to a socket read by another, then prints one JSON line: delays
//! (p50/p99/max, µs), losses and their runs, reordering.
//!
//! ```text
//! cargo run --release -p tutti-impair --example udp_probe -- --rate 400 --duration-s 5
//! ```
//!
//! Traffic goes to 127.0.0.1 only. Both threads read the same monotonic clock, so a packet's
//! delay is its one-way time through the kernel (and the impairer, when a rule queues it).
//! `--realtime` runs both under SCHED_FIFO (root), so other load on the machine disturbs the
//! measurement less.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    rate: f64,
    duration_s: f64,
    size: usize,
    drain_ms: u64,
    realtime: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        rate: 400.0,
        duration_s: 5.0,
        size: 1024,
        drain_ms: 500,
        realtime: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--realtime" {
            a.realtime = true;
            continue;
        }
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = || format!("{flag}: not a number: {v:?}");
        match flag.as_str() {
            "--rate" => a.rate = v.parse().map_err(|_| bad())?,
            "--duration-s" => a.duration_s = v.parse().map_err(|_| bad())?,
            "--size" => a.size = v.parse().map_err(|_| bad())?,
            "--drain-ms" => a.drain_ms = v.parse().map_err(|_| bad())?,
            _ => return Err(format!("unknown flag {flag:?}")),
        }
    }
    if !(a.rate > 0.0 && a.rate <= 100_000.0) {
        return Err("--rate must be in (0, 100000] packets/s".into());
    }
    if !(a.duration_s > 0.0 && a.duration_s <= 600.0) {
        return Err("--duration-s must be in (0, 600]".into());
    }
    if !(16..=65_000).contains(&a.size) {
        return Err("--size must be 16..65000 bytes".into());
    }
    if a.drain_ms > 60_000 {
        return Err("--drain-ms must be at most 60000".into());
    }
    Ok(a)
}

/// Sets a socket buffer size beyond the system default (as root), else as far as allowed.
fn set_buffer(sock: &UdpSocket, force: libc::c_int, plain: libc::c_int, bytes: libc::c_int) {
    for name in [force, plain] {
        // SAFETY: `bytes` outlives the call and its size is passed alongside.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                name,
                (&bytes as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("udp_probe: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = probe(&args) {
        eprintln!("udp_probe: {e}");
        std::process::exit(1);
    }
}

fn probe(args: &Args) -> std::io::Result<()> {
    if args.realtime {
        // Both threads under SCHED_FIFO (the receiver inherits it), so a busy machine delays
        // the measurement less than what it measures.
        let param = libc::sched_param { sched_priority: 10 };
        // SAFETY: `param` is valid for the call; pid 0 is this thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    rx.set_read_timeout(Some(Duration::from_millis(20)))?;
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    tx.connect(rx.local_addr()?)?;
    // Packets held by the impairer still count against the sender's send buffer: at 10,000
    // packets/s and 13 ms that is ~130 packets, more than the default buffer holds, and send()
    // would block. Give both sides room for a second of traffic.
    set_buffer(&tx, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, 32 << 20);
    set_buffer(&rx, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, 32 << 20);
    let total = (args.rate * args.duration_s).round() as u64;
    let epoch = Instant::now();
    let done = Arc::new(AtomicBool::new(false));

    let receiver = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut got: Vec<(u64, u64)> = Vec::with_capacity(total as usize);
            let mut buf = vec![0u8; 65_536];
            loop {
                match rx.recv(&mut buf) {
                    Ok(n) if n >= 16 => {
                        let now = epoch.elapsed().as_nanos() as u64;
                        let seq = u64::from_le_bytes(buf[0..8].try_into().expect("8 bytes"));
                        let sent = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
                        got.push((seq, now.saturating_sub(sent)));
                    }
                    Ok(_) => {}
                    Err(_) if done.load(Ordering::Acquire) => break,
                    Err(_) => {}
                }
            }
            got
        })
    };

    let mut packet = vec![0u8; args.size];
    let interval = 1e9 / args.rate;
    let mut send_errors = 0u64;
    let mut late_sends = 0u64;
    for seq in 0..total {
        let due = Duration::from_nanos((seq as f64 * interval) as u64);
        let now = epoch.elapsed();
        if due > now {
            std::thread::sleep(due - now);
        } else if now - due > Duration::from_millis(1) {
            late_sends += 1;
        }
        packet[0..8].copy_from_slice(&seq.to_le_bytes());
        let sent = epoch.elapsed().as_nanos() as u64;
        packet[8..16].copy_from_slice(&sent.to_le_bytes());
        if tx.send(&packet).is_err() {
            send_errors += 1;
        }
    }
    let send_s = epoch.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(args.drain_ms));
    done.store(true, Ordering::Release);
    let got = receiver.join().expect("the receiver thread does not panic");

    let mut seen = vec![false; total as usize];
    let (mut duplicates, mut reordered, mut highest) = (0u64, 0u64, None::<u64>);
    let mut delays = Vec::with_capacity(got.len());
    for &(seq, delay) in &got {
        let Some(slot) = seen.get_mut(seq as usize) else {
            continue;
        };
        if *slot {
            duplicates += 1;
            continue;
        }
        *slot = true;
        if highest.is_some_and(|h| seq < h) {
            reordered += 1;
        }
        highest = highest.max(Some(seq));
        delays.push(delay);
    }
    let mut runs = Vec::new();
    let mut run = 0u64;
    for &s in &seen {
        if s {
            if run > 0 {
                runs.push(run);
            }
            run = 0;
        } else {
            run += 1;
        }
    }
    if run > 0 {
        runs.push(run);
    }
    let received = delays.len() as u64;
    let lost = total - received;
    delays.sort_unstable();
    let mean_us =
        delays.iter().map(|&d| d as f64).sum::<f64>() / delays.len().max(1) as f64 / 1000.0;
    let mean_run = if runs.is_empty() {
        0.0
    } else {
        lost as f64 / runs.len() as f64
    };
    println!(
        "{{\"rate_pps\":{},\"size_bytes\":{},\"sent\":{},\"send_s\":{:.3},\"late_sends\":{},\"send_errors\":{},\
         \"received\":{},\"lost\":{},\"loss_rate\":{:.5},\"loss_runs\":{},\"mean_loss_run\":{:.3},\
         \"reordered\":{},\"duplicates\":{},\
         \"delay_us\":{{\"min\":{:.1},\"p50\":{:.1},\"p90\":{:.1},\"p99\":{:.1},\"max\":{:.1},\"mean\":{:.1}}}}}",
        args.rate,
        args.size,
        total,
        send_s,
        late_sends,
        send_errors,
        received,
        lost,
        lost as f64 / total.max(1) as f64,
        runs.len(),
        mean_run,
        reordered,
        duplicates,
        quantile(&delays, 0.0),
        quantile(&delays, 0.5),
        quantile(&delays, 0.9),
        quantile(&delays, 0.99),
        quantile(&delays, 1.0),
        mean_us,
    );
    Ok(())
}
