//! The run loop: the only place that reads the clock. It binds the queue, then repeats
//!
//! 1. send the verdicts that are due (one `sendto` carries many),
//! 2. sleep in `ppoll` until the next verdict is due, a packet arrives or a signal comes,
//! 3. read what arrived, ask the model about each packet, and send drops and unimpaired
//!    packets' verdicts at once, hold the others in a min-heap by release time.
//!
//! One thread, no busy-waiting, no per-packet timers. The heap and buffers are sized up front;
//! the only allocation in the loop is the heap growing past `HELD_CAPACITY`.

use crate::impair::{Decision, DropReason, Impairer};
use crate::nfq::{self, Message, Verdict};
use crate::stats::{Stats, Stop};
use crate::sys::{self, NetlinkSocket, SignalFd};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Bytes of each packet the kernel copies to us: enough to make it send the full length
/// alongside (we need only the id and the length).
const COPY_RANGE: u32 = 64;
/// Packets the kernel lets wait for our verdicts before it drops new ones.
pub const KERNEL_QUEUE_MAXLEN: u32 = 8192;
/// Receive buffer asked for: bursts of thousands of queued packets must not overflow it.
pub const RCVBUF_BYTES: usize = 16 << 20;
/// Held packets the heap has room for without growing.
const HELD_CAPACITY: usize = KERNEL_QUEUE_MAXLEN as usize;
/// Verdicts per `sendto`.
const BATCH: usize = 256;
/// Datagrams read per wake-up before due verdicts get their turn.
const READS_PER_WAKE: usize = 64;
/// How long binding may take.
const BIND_TIMEOUT: Duration = Duration::from_secs(5);

/// Nanoseconds since the run began.
struct Clock(Instant);

impl Clock {
    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Verdicts waiting to be sent together, with their due times for the lateness figures.
struct Batch {
    buf: Vec<u8>,
    due: Vec<Option<u64>>,
    queue: u16,
}

impl Batch {
    fn new(queue: u16) -> Self {
        Self {
            buf: Vec::with_capacity(BATCH * nfq::VERDICT_LEN),
            due: Vec::with_capacity(BATCH),
            queue,
        }
    }

    /// Adds a verdict; `due: None` keeps it out of the lateness figures (released at exit).
    fn push(
        &mut self,
        sock: &NetlinkSocket,
        clock: &Clock,
        stats: &mut Stats,
        id: u32,
        v: Verdict,
        due: Option<u64>,
    ) -> io::Result<()> {
        if self.due.len() == BATCH {
            self.flush(sock, clock, stats)?;
        }
        let at = self.buf.len();
        self.buf.resize(at + nfq::VERDICT_LEN, 0);
        nfq::write_verdict(&mut self.buf[at..], self.queue, id, v);
        self.due.push(due);
        Ok(())
    }

    fn flush(&mut self, sock: &NetlinkSocket, clock: &Clock, stats: &mut Stats) -> io::Result<()> {
        if self.due.is_empty() {
            return Ok(());
        }
        let now = clock.now();
        for due in self.due.iter().flatten() {
            stats.lateness.record(now.saturating_sub(*due));
        }
        let sent = sock.send(&self.buf);
        self.buf.clear();
        self.due.clear();
        sent
    }
}

/// Opens the socket and binds `queue`. Packets that arrive before the kernel's acknowledgement
/// pass unimpaired.
pub fn bind(queue: u16) -> io::Result<(NetlinkSocket, usize)> {
    let (sock, rcvbuf) = NetlinkSocket::open(RCVBUF_BYTES)?;
    const SEQ: u32 = 1;
    sock.send(&nfq::config_request(
        queue,
        COPY_RANGE,
        KERNEL_QUEUE_MAXLEN,
        SEQ,
    ))?;
    let started = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    let mut early = Vec::new();
    loop {
        let left = BIND_TIMEOUT.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer from the kernel",
            ));
        }
        let ready = sys::wait(sock.as_raw_fd(), sock.as_raw_fd(), left.as_nanos() as u64)?;
        if !ready.netlink {
            continue;
        }
        while let Some(n) = sock.recv(&mut buf)? {
            for m in nfq::messages(&buf[..n]) {
                match m {
                    Message::Ack { seq: SEQ } => {
                        for id in early.drain(..) {
                            let mut v = [0u8; nfq::VERDICT_LEN];
                            nfq::write_verdict(&mut v, queue, id, Verdict::Accept);
                            sock.send(&v)?;
                        }
                        return Ok((sock, rcvbuf));
                    }
                    Message::Error { seq: SEQ, errno } => {
                        return Err(io::Error::from_raw_os_error(errno))
                    }
                    Message::Packet { id, .. } => early.push(id),
                    _ => {}
                }
            }
        }
    }
}

/// Runs until `duration_ns` has passed or a signal arrives, then releases every held packet.
/// Fills `stats`; an error is returned after the held packets were released where possible.
pub fn run(
    sock: &NetlinkSocket,
    signals: &SignalFd,
    queue: u16,
    model: &mut Impairer,
    duration_ns: u64,
    stats: &mut Stats,
) -> io::Result<Stop> {
    let clock = Clock(Instant::now());
    let mut held: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::with_capacity(HELD_CAPACITY);
    let mut order = 0u64; // ties in release time go out in arrival order
    let mut batch = Batch::new(queue);
    let mut rx = vec![0u8; 256 * 1024];

    let result = (|| -> io::Result<Stop> {
        loop {
            let now = clock.now();
            while let Some(&Reverse((at, _, id))) = held.peek() {
                if at > now {
                    break;
                }
                held.pop();
                stats.accepted += 1;
                batch.push(sock, &clock, stats, id, Verdict::Accept, Some(at))?;
            }
            batch.flush(sock, &clock, stats)?;
            if now >= duration_ns {
                return Ok(Stop::Duration);
            }
            let next = held.peek().map_or(duration_ns, |r| r.0 .0).min(duration_ns);
            let ready = sys::wait(
                sock.as_raw_fd(),
                signals.as_raw_fd(),
                next.saturating_sub(clock.now()),
            )?;
            if ready.signal {
                if let Some(sig) = signals.take() {
                    return Ok(Stop::Signal(sig));
                }
            }
            if !ready.netlink {
                continue;
            }
            for _ in 0..READS_PER_WAKE {
                let Some(n) = sock.recv(&mut rx)? else { break };
                let now = clock.now();
                for m in nfq::messages(&rx[..n]) {
                    match m {
                        Message::Packet { id, len } => {
                            stats.seen += 1;
                            match model.on_packet(now, len as usize) {
                                Decision::Release { at_ns } if at_ns <= now => {
                                    stats.accepted += 1;
                                    batch.push(
                                        sock,
                                        &clock,
                                        stats,
                                        id,
                                        Verdict::Accept,
                                        Some(now),
                                    )?;
                                }
                                Decision::Release { at_ns } => {
                                    held.push(Reverse((at_ns, order, id)));
                                    order += 1;
                                    stats.max_held = stats.max_held.max(held.len());
                                }
                                Decision::Drop(why) => {
                                    match why {
                                        DropReason::Loss => stats.dropped_loss += 1,
                                        DropReason::QueueFull => stats.dropped_queue += 1,
                                    }
                                    batch.push(
                                        sock,
                                        &clock,
                                        stats,
                                        id,
                                        Verdict::Drop,
                                        Some(now),
                                    )?;
                                }
                            }
                        }
                        Message::Error { errno, .. } => {
                            if stats.verdict_errors == 0 {
                                eprintln!(
                                    "tutti-impair: the kernel refused a verdict: {}",
                                    io::Error::from_raw_os_error(errno)
                                );
                            }
                            stats.verdict_errors += 1;
                        }
                        Message::Malformed => stats.malformed += 1,
                        Message::Ack { .. } | Message::Other => {}
                    }
                }
                batch.flush(sock, &clock, stats)?;
            }
        }
    })();

    // Whatever ended the run, held packets go out now rather than being dropped with the queue.
    let mut released = Ok(());
    while let Some(Reverse((_, _, id))) = held.pop() {
        stats.released_at_exit += 1;
        stats.accepted += 1;
        if released.is_ok() {
            released = batch.push(sock, &clock, stats, id, Verdict::Accept, None);
        }
    }
    if released.is_ok() {
        released = batch.flush(sock, &clock, stats);
    }
    stats.elapsed_s = clock.now() as f64 / 1e9;
    let stop = result?;
    released?;
    Ok(stop)
}
