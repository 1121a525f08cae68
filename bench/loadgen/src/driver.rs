//! The emulator's threads: each drives a share of the clients, sending one packet per client per
//! block and reading what the hub sends back, with one `mio` poll for all of its sockets.
//!
//! The block clock is a metronome thread that sleeps to each block's due time (the schedule is
//! computed from the start, so it does not drift) and wakes every driver through its poll's
//! waker: `epoll` alone times out in whole milliseconds, which would send a 2.67 ms stream in
//! steps of 2 and 3 ms. A driver that wakes late sends every block that is due (at most
//! [`MAX_BLOCKS_PER_WAKE`]; older ones are skipped and counted), as a real client's audio
//! callback would. Arrivals are stamped when the poll returns them.
//!
//! A forward-mode client's WebRTC link (hublink.rs) is driven on the same poll: the datagrams
//! its socket reads go into its peer, every wake gives each peer the time it asked for, and its
//! block goes out on its data channel; a thread of its own per peer would cost hundreds of
//! threads where two cores serve.
//!
//! The controller talks to a driver over a channel, read at every wake: add a client, start a
//! measuring window, report, let clients leave, stop. Nothing here allocates per packet.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};
use tutti_core::packet::MAX_PACKET_LEN;

use crate::client::Client;
use crate::forward::RoomTotals;
use crate::hublink::{HubLink, Scratch};
use crate::reception::Gaps;
use crate::tones::ToneLoop;

const WAKER: Token = Token(usize::MAX);
/// Most blocks one wake sends per client; a longer stall skips the rest.
pub const MAX_BLOCKS_PER_WAKE: u64 = 4;

/// What the controller asks of a driver.
pub enum Command {
    Add(Box<Client>),
    /// Forget the counts so far: the measuring window starts.
    Window,
    Report(Sender<Report>),
    /// Up to `n` clients of room `room` leave (exit datagrams); answers with their indices.
    Leave {
        room: usize,
        n: usize,
        done: Sender<Vec<usize>>,
    },
    /// Every client leaves and the thread ends, answering with the clients' final state.
    Stop(Sender<Vec<Box<Client>>>),
}

/// A driver's figures since the window began.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub clients: usize,
    pub delivered: u64,
    pub lost: u64,
    pub late: u64,
    pub duplicates: u64,
    pub malformed: u64,
    pub exits: u64,
    pub sent: u64,
    pub send_errors: u64,
    /// Blocks skipped because the driver woke too late to send them.
    pub skipped_blocks: u64,
    /// Clients that received nothing in the window, though they have been in it for
    /// [`SILENT_AFTER`]; and those that joined since and wait for their first packet.
    pub silent: usize,
    pub waiting: usize,
    /// The longest a client that joined in the window waited for its first packet, ms.
    pub join_wait_max_ms: f64,
    /// Blocks the hub should have sent the clients since the window began (or since each one
    /// joined), at one per block of time; and of those, how many arrived (each client's distinct
    /// packets, at most its expected count).
    pub expected: f64,
    pub delivered_capped: f64,
    pub gaps: Gaps,
    /// Forward mode: per room, what its members sent and received (the delivery figure).
    pub rooms: RoomTotals,
    /// Forward mode: senders each listener heard (summed), packets of a listener's own stream
    /// or of streams beyond its room's size, and links that failed.
    pub senders_heard: u64,
    pub echoes: u64,
    pub unknown_streams: u64,
    pub failed_links: u64,
    /// Forward mode: the smallest share of one sender's blocks that one listener received, %,
    /// of the blocks the time since the window began allows (0 when a sender was never heard).
    pub worst_sender_pct: Option<f64>,
    /// Forward mode: blocks the clients should have sent by the time since the window began
    /// (less one each), against which `sent` is the load the emulator offered.
    pub blocks_due: f64,
}

impl Report {
    /// Blocks delivered of those expected, % (100 when none were expected yet). Each client's
    /// count is capped at its expected one, so only the sum's rounding could pass 100: clamped.
    /// In forward mode, packets received of those the others sent ([`RoomTotals`]).
    pub fn delivery_pct(&self) -> f64 {
        if let Some(pct) = self.rooms.delivery_pct() {
            pct
        } else if self.expected > 0.0 {
            (100.0 * self.delivered_capped / self.expected).min(100.0)
        } else {
            100.0
        }
    }

    /// Forward mode: the blocks the clients sent of those the time allowed, % (capped at 100;
    /// 100 when none were due yet, and in mix mode).
    pub fn offered_pct(&self) -> f64 {
        if self.blocks_due > 0.0 {
            (100.0 * self.sent as f64 / self.blocks_due).min(100.0)
        } else {
            100.0
        }
    }

    pub fn merge(&mut self, o: &Report) {
        self.clients += o.clients;
        self.delivered += o.delivered;
        self.lost += o.lost;
        self.late += o.late;
        self.duplicates += o.duplicates;
        self.malformed += o.malformed;
        self.exits += o.exits;
        self.sent += o.sent;
        self.send_errors += o.send_errors;
        self.skipped_blocks += o.skipped_blocks;
        self.silent += o.silent;
        self.waiting += o.waiting;
        self.join_wait_max_ms = self.join_wait_max_ms.max(o.join_wait_max_ms);
        self.expected += o.expected;
        self.delivered_capped += o.delivered_capped;
        self.gaps.merge(&o.gaps);
        self.rooms.merge(&o.rooms);
        self.senders_heard += o.senders_heard;
        self.echoes += o.echoes;
        self.unknown_streams += o.unknown_streams;
        self.failed_links += o.failed_links;
        self.blocks_due += o.blocks_due;
        self.worst_sender_pct = match (self.worst_sender_pct, o.worst_sender_pct) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// A client that has received nothing after this long in the window is silent; before, it is
/// still waiting for the hub to start its stream.
pub const SILENT_AFTER: Duration = Duration::from_secs(1);

/// The emulator: driver threads and their metronome.
pub struct Drivers {
    commands: Vec<Sender<Command>>,
    wakers: Vec<Arc<Waker>>,
    threads: Vec<JoinHandle<()>>,
    metronome: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    next: usize,
}

impl Drivers {
    /// `n` driver threads sending blocks of `block` (one per `block` of time), the streams from
    /// `tones` (shared).
    pub fn start(n: usize, block: Duration, tones: Arc<Vec<ToneLoop>>) -> Result<Drivers, String> {
        let start = Instant::now() + Duration::from_millis(20);
        let mut d = Drivers {
            commands: Vec::new(),
            wakers: Vec::new(),
            threads: Vec::new(),
            metronome: None,
            stop: Arc::new(AtomicBool::new(false)),
            next: 0,
        };
        for i in 0..n.max(1) {
            let poll = Poll::new().map_err(|e| format!("poll: {e}"))?;
            let waker =
                Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| format!("waker: {e}"))?);
            let (tx, rx) = mpsc::channel();
            let tones = Arc::clone(&tones);
            let handle = thread::Builder::new()
                .name(format!("loadgen-{i}"))
                .spawn(move || Driver::new(poll, rx, tones, start, block).run())
                .map_err(|e| format!("driver thread: {e}"))?;
            d.commands.push(tx);
            d.wakers.push(waker);
            d.threads.push(handle);
        }
        let wakers = d.wakers.clone();
        let stop = Arc::clone(&d.stop);
        d.metronome = Some(
            thread::Builder::new()
                .name("loadgen-clock".into())
                .spawn(move || {
                    let mut k: u32 = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let due = start + block * k;
                        let now = Instant::now();
                        if due > now {
                            thread::sleep(due - now);
                        }
                        for w in &wakers {
                            let _ = w.wake();
                        }
                        k = k.wrapping_add(1);
                    }
                })
                .map_err(|e| format!("metronome thread: {e}"))?,
        );
        Ok(d)
    }

    /// Hands `client` to the next driver (round robin).
    pub fn add(&mut self, client: Client) -> Result<(), String> {
        let i = self.next % self.commands.len();
        self.next += 1;
        self.commands[i]
            .send(Command::Add(Box::new(client)))
            .map_err(|_| "a driver thread ended".to_owned())
    }

    pub fn window(&self) {
        for c in &self.commands {
            let _ = c.send(Command::Window);
        }
    }

    /// Every driver's figures, merged.
    pub fn report(&self) -> Report {
        let mut total = Report::default();
        let (tx, rx) = mpsc::channel();
        for c in &self.commands {
            let _ = c.send(Command::Report(tx.clone()));
        }
        drop(tx);
        for r in rx.iter().take(self.commands.len()) {
            total.merge(&r);
        }
        total
    }

    /// Up to `n` clients of room `room` leave; returns the indices (in the room) of those who did.
    pub fn leave(&self, room: usize, n: usize) -> Vec<usize> {
        let mut left = Vec::new();
        for c in &self.commands {
            if left.len() >= n {
                break;
            }
            let (tx, rx) = mpsc::channel();
            if c.send(Command::Leave {
                room,
                n: n - left.len(),
                done: tx,
            })
            .is_ok()
            {
                left.extend(rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default());
            }
        }
        left
    }

    /// Stops every thread; returns all clients as they ended.
    pub fn stop(mut self) -> Vec<Box<Client>> {
        let mut all = Vec::new();
        let (tx, rx) = mpsc::channel();
        for c in &self.commands {
            let _ = c.send(Command::Stop(tx.clone()));
        }
        drop(tx);
        for clients in rx.iter().take(self.commands.len()) {
            all.extend(clients);
        }
        self.shutdown();
        all
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(m) = self.metronome.take() {
            let _ = m.join();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Drivers {
    fn drop(&mut self) {
        for c in &self.commands {
            let (tx, _rx) = mpsc::channel();
            let _ = c.send(Command::Stop(tx));
        }
        self.shutdown();
    }
}

struct Driver {
    poll: Poll,
    commands: Receiver<Command>,
    tones: Arc<Vec<ToneLoop>>,
    clients: Vec<Option<Box<Client>>>,
    start: Instant,
    block: Duration,
    /// The next block to send (blocks since `start`).
    next_block: u64,
    skipped: u64,
    /// When the window began, µs on this driver's clock.
    window_us: u64,
    out: Vec<u8>,
    input: Vec<u8>,
    left: Vec<f32>,
    right: Vec<f32>,
}

impl Driver {
    fn new(
        poll: Poll,
        commands: Receiver<Command>,
        tones: Arc<Vec<ToneLoop>>,
        start: Instant,
        block: Duration,
    ) -> Driver {
        Driver {
            poll,
            commands,
            tones,
            clients: Vec::new(),
            start,
            block,
            next_block: 0,
            skipped: 0,
            window_us: 0,
            out: vec![0; MAX_PACKET_LEN],
            input: vec![0; 65_536],
            left: vec![0.0; 1024],
            right: vec![0.0; 1024],
        }
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            // The metronome wakes us each block; the timeout only bounds a lost wake.
            if let Err(e) = self.poll.poll(&mut events, Some(Duration::from_millis(50))) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    eprintln!("loadgen driver: poll failed: {e}");
                    return;
                }
            }
            let now = Instant::now();
            let now_us = now.saturating_duration_since(self.start).as_micros() as u64;
            for event in events.iter() {
                if event.token() != WAKER {
                    self.read(event.token().0, now, now_us);
                }
            }
            self.tick_links(now, now_us);
            self.send_due(now, now_us);
            if !self.commands_done() {
                return;
            }
        }
    }

    /// Now on this driver's clock, µs.
    fn now_us(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.start)
            .as_micros() as u64
    }

    /// Reads every datagram waiting on client `i`'s socket.
    fn read(&mut self, i: usize, now: Instant, now_us: u64) {
        let Some(Some(c)) = self.clients.get_mut(i) else {
            return;
        };
        let mut scratch = Scratch {
            left: &mut self.left,
            right: &mut self.right,
        };
        loop {
            match c.socket.recv_from(&mut self.input) {
                Ok((n, from)) => {
                    if let Some(link) = c.link.as_mut() {
                        let bytes = &self.input[..n];
                        link.receive(bytes, from, now, now_us, &c.socket, &mut scratch);
                    } else if from == c.hub {
                        c.on_datagram(&self.input[..n], now_us, scratch.left, scratch.right);
                    } else {
                        c.malformed += 1;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // ICMP port unreachable and the like: the hub is not (yet, or any more) there.
                Err(_) => {
                    c.send_errors += 1;
                    return;
                }
            }
        }
    }

    /// Gives every WebRTC link the time, when it asked for it by now.
    fn tick_links(&mut self, now: Instant, now_us: u64) {
        let mut scratch = Scratch {
            left: &mut self.left,
            right: &mut self.right,
        };
        for c in self.clients.iter_mut().flatten() {
            if let Some(link) = c.link.as_mut() {
                link.tick(now, now_us, &c.socket, &mut scratch);
            }
        }
    }

    /// Sends every block due by `now` for every client.
    fn send_due(&mut self, now: Instant, now_us: u64) {
        let elapsed = now.saturating_duration_since(self.start);
        let due = (elapsed.as_nanos() / self.block.as_nanos().max(1)) as u64 + 1;
        if due <= self.next_block {
            return;
        }
        let behind = due - self.next_block;
        if behind > MAX_BLOCKS_PER_WAKE {
            self.skipped += behind - MAX_BLOCKS_PER_WAKE;
            self.next_block = due - MAX_BLOCKS_PER_WAKE;
        }
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut scratch = Scratch {
            left: &mut self.left,
            right: &mut self.right,
        };
        while self.next_block < due {
            for c in self.clients.iter_mut().flatten() {
                let n = self.tones[c.tone].packet_into(c.seq, stamp, &mut self.out);
                let sent = match c.link.as_mut() {
                    Some(link) => link.send(&self.out[..n], now_us, &c.socket, &mut scratch),
                    None => c.socket.send_to(&self.out[..n], c.hub).is_ok(),
                };
                if sent {
                    c.sent += 1;
                } else {
                    c.send_errors += 1;
                }
                c.seq = c.seq.wrapping_add(1);
            }
            self.next_block += 1;
        }
    }

    /// Serves the controller's commands; false when told to stop.
    fn commands_done(&mut self) -> bool {
        while let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                Command::Add(mut c) => {
                    // Its handshake's end (`since`, until a window begins).
                    c.added_us = c.since.saturating_duration_since(self.start).as_micros() as u64;
                    let slot = self
                        .clients
                        .iter()
                        .position(Option::is_none)
                        .unwrap_or(self.clients.len());
                    if self
                        .poll
                        .registry()
                        .register(&mut c.socket, Token(slot), Interest::READABLE)
                        .is_err()
                    {
                        c.send_errors += 1;
                    }
                    if slot == self.clients.len() {
                        self.clients.push(Some(c));
                    } else {
                        self.clients[slot] = Some(c);
                    }
                }
                Command::Window => {
                    self.skipped = 0;
                    self.window_us = self.now_us();
                    for c in self.clients.iter_mut().flatten() {
                        c.reset();
                        c.sent = 0;
                        c.send_errors = 0;
                        c.exits = 0;
                    }
                }
                Command::Report(to) => {
                    let _ = to.send(self.report());
                }
                Command::Leave { room, n, done } => {
                    let mut left = Vec::new();
                    // The longest here leave first; those who stay (spot-checked listeners
                    // among them) are the churn's check.
                    while left.len() < n {
                        let oldest = self
                            .clients
                            .iter()
                            .enumerate()
                            .filter_map(|(i, c)| Some((i, c.as_ref()?)))
                            .filter(|(_, c)| c.room == room && !c.stays)
                            .min_by_key(|(_, c)| c.added_us)
                            .map(|(i, _)| i);
                        let Some(mut c) = oldest.and_then(|i| self.clients[i].take()) else {
                            break;
                        };
                        let _ = self.poll.registry().deregister(&mut c.socket);
                        c.leave();
                        left.push(c.index);
                    }
                    let _ = done.send(left);
                }
                Command::Stop(to) => {
                    let mut all = Vec::new();
                    for mut c in self.clients.drain(..).flatten() {
                        c.leave();
                        all.push(c);
                    }
                    let _ = to.send(all);
                    return false;
                }
            }
        }
        true
    }

    fn report(&self) -> Report {
        let now = Instant::now();
        let mut r = Report {
            skipped_blocks: self.skipped,
            ..Report::default()
        };
        for c in self.clients.iter().flatten() {
            r.clients += 1;
            if let Some(link) = c.link.as_deref() {
                r.add_link(c, link, now, self.window_us, self.block);
                continue;
            }
            r.delivered += c.reception.delivered;
            r.lost += c.reception.lost();
            r.late += c.reception.late;
            r.duplicates += c.reception.duplicates;
            r.malformed += c.malformed;
            r.exits += c.exits;
            r.sent += c.sent;
            r.send_errors += c.send_errors;
            if c.reception.delivered == 0 {
                if now.saturating_duration_since(c.since) < SILENT_AFTER {
                    r.waiting += 1;
                } else {
                    r.silent += 1;
                }
            }
            if let Some(first) = c.first_packet_us.filter(|_| c.added_us >= self.window_us) {
                let ms = first.saturating_sub(c.added_us) as f64 / 1000.0;
                r.join_wait_max_ms = r.join_wait_max_ms.max(ms);
            }
            // One block less than the time allows: the hub's blocks and this window are not
            // aligned, and the block due last may still be on its way.
            let blocks =
                now.saturating_duration_since(c.since).as_secs_f64() / self.block.as_secs_f64();
            let expected = (blocks - 1.0).max(0.0);
            r.expected += expected;
            r.delivered_capped += (c.reception.delivered as f64).min(expected);
            r.gaps.merge(&c.reception.gaps);
        }
        r
    }
}

impl Report {
    /// A forward-mode client's figures: each sender's reception, its room's totals.
    fn add_link(
        &mut self,
        c: &Client,
        link: &HubLink,
        now: Instant,
        window_us: u64,
        block: Duration,
    ) {
        let mut delivered = 0;
        // As in mix mode, one block less than the time allows.
        let blocks = now.saturating_duration_since(c.since).as_secs_f64() / block.as_secs_f64();
        let expected = (blocks - 1.0).max(0.0);
        self.blocks_due += expected;
        let mut worst: f64 = if link.sources.unheard() > 0 {
            0.0
        } else {
            100.0
        };
        for src in link.sources.heard() {
            let rx = &src.reception;
            if expected > 0.0 {
                worst = worst.min((100.0 * rx.delivered as f64 / expected).min(100.0));
            }
            delivered += rx.delivered;
            self.lost += rx.lost();
            self.late += rx.late;
            self.duplicates += rx.duplicates;
            self.gaps.merge(&rx.gaps);
            self.senders_heard += 1;
        }
        self.delivered += delivered;
        self.malformed += link.malformed + link.refused;
        self.sent += c.sent;
        self.send_errors += c.send_errors;
        self.echoes += link.sources.echoes;
        self.unknown_streams += link.sources.unknown;
        self.failed_links += u64::from(link.failed);
        if delivered == 0 {
            if now.saturating_duration_since(c.since) < SILENT_AFTER {
                self.waiting += 1;
            } else {
                self.silent += 1;
            }
        }
        if let Some(first) = link.first_packet_us.filter(|_| c.added_us >= window_us) {
            let ms = first.saturating_sub(c.added_us) as f64 / 1000.0;
            self.join_wait_max_ms = self.join_wait_max_ms.max(ms);
        }
        self.rooms.add(c.room, c.sent, link.sources.delivered());
        self.worst_sender_pct = Some(self.worst_sender_pct.map_or(worst, |w| w.min(worst)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_is_a_share_of_the_expected_blocks_never_above_all_of_them() {
        let mut r = Report::default();
        assert_eq!(r.delivery_pct(), 100.0);
        // Sums whose rounding would read 100.00000000000001.
        for _ in 0..3 {
            r.merge(&Report {
                expected: 1125.1,
                delivered_capped: 1125.1,
                ..Report::default()
            });
        }
        r.merge(&Report {
            expected: 0.7,
            delivered_capped: 0.7,
            ..Report::default()
        });
        assert!(r.delivery_pct() <= 100.0);
        r.merge(&Report {
            expected: 1000.0,
            delivered_capped: 0.0,
            ..Report::default()
        });
        assert!((r.delivery_pct() - 100.0 * 3376.0 / 4376.0).abs() < 1e-9);
    }
}
