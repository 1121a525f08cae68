//! Mesh peers toward one real browser page: `peers` emulated members join a room of the real
//! server and each links to the page directly, as another browser would in a mesh, so the page
//! carries one peer connection, one audio stream in and one out per emulated peer. What it
//! measures is the page (its engine worklet and packet pump, over real data channels); the
//! browser bench (bench/mesh-page.mjs) reads the page's underruns and CPU while these run.
//!
//! Each peer speaks the app's mesh protocol (app/src/net/mesh.ts, protocol.ts):
//! - it joins over the signaling WebSocket with a peer id above the page's, so the page offers
//!   (the smaller id offers) and the peer answers, with the offer's epoch;
//! - the two channels are negotiated, as the app makes them: `audio` (id 0) and `tutti-ctl`
//!   (id 1), both unordered and never retransmitted;
//! - it sends one PCM16 mono packet of its own tone per block on `audio` (the tone's block is
//!   computed once and encoded at each send with its sequence number and time stamp: a few
//!   dozen peers at most, where the hub clients share encoded loops) and answers the page's
//!   clock pings on `tutti-ctl` (clock.ts's wire format), so the page's link looks like any other;
//! - its ICE candidate is a host candidate on 127.0.0.1, the one address a page joined with
//!   `?ice=loopback` accepts; its signaling comes from an address of its own (127.3.x.y), so the
//!   server's per-address limits meet one member each.
//!
//! A signal from anyone but the page, of an old epoch, or malformed, is counted and dropped; a
//! renewed offer (a restart) replaces the link. Everything runs on one thread with one poll: a
//! few dozen peers cost little beside the page they load.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use serde_json::{json, Value};
use str0m::change::SdpOffer;
use str0m::channel::{ChannelConfig, ChannelId, Reliability};
use str0m::{Candidate, Event, Input, Output, Rtc};
use tungstenite::Message;
use tutti_core::packet::{self, Header, SampleFormat, SampleRate, MAX_PACKET_LEN};

use tutti_server::hub::priority::{promote_current, Scheduling};

use crate::client::loopback_ip;
use crate::hublink::feed;
use crate::signal::{self, Ws};

/// The app's negotiated channels (mesh.ts).
const AUDIO_ID: u16 = 0;
const CONTROL_ID: u16 = 1;
/// Clock messages (clock.ts): a ping is 16 bytes of type 1, a pong 32 of type 2.
const CTL_PING: u8 = 1;
const CTL_PONG: u8 = 2;
/// How often the signaling sockets are read.
const SIGNAL_EVERY: Duration = Duration::from_millis(10);
/// The peers' thread's `SCHED_FIFO` priority (JACK's default).
const PRIORITY: u8 = 10;
/// Our peer ids begin with this, above any id a page picks but 1 in 4 billion.
const ID_PREFIX: &str = "ffffffff";

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The server's HTTP address (loopback).
    pub server: SocketAddr,
    pub room: String,
    pub peers: usize,
    /// Frames per packet (32 to 256).
    pub frames: u16,
    /// How long to play once every peer is linked, s.
    pub seconds: f64,
    /// How long the links may take to come up, s.
    pub link_timeout: f64,
}

/// What the peers did, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub peers: usize,
    /// Peers whose audio channel was open at the end.
    pub linked: usize,
    /// Packets sent on the audio channels while playing, and refused by a full channel.
    pub sent: u64,
    pub refused: u64,
    /// Blocks no peer sent because the thread woke more than 4 blocks late.
    pub skipped: u64,
    /// Packets received from the page on the audio channels while playing.
    pub received: u64,
    pub pongs: u64,
    /// Links made anew on a renewed offer.
    pub renegotiated: u64,
    /// Signals or channel messages counted and dropped.
    pub dropped: u64,
}

struct Link {
    rtc: Rtc,
    epoch: i64,
    audio: ChannelId,
    control: ChannelId,
    open: bool,
}

struct Peer {
    id: String,
    ws: Ws,
    socket: UdpSocket,
    local: SocketAddr,
    /// The page's peer id, once it offered.
    page: Option<String>,
    link: Option<Link>,
}

/// A peer id or token: 32 lowercase hex digits, ours beginning with [`ID_PREFIX`].
fn hex_id(kind: u32, i: usize) -> String {
    format!("{ID_PREFIX}{:08x}{kind:08x}{:08x}", std::process::id(), i)
}

fn wall_us() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// One block of tone `k`, the samples each of its packets carries (PCM16 mono at 48 kHz,
/// `frames` frames, encoded at each send). Tones are multiples of 375 Hz, whole
/// cycles in 128 frames (and in 32, 64 and 256 at the multiples the `k` gives).
pub fn tone_block(k: usize, frames: u16) -> Result<Vec<f32>, String> {
    if !matches!(frames, 32 | 64 | 128 | 256) {
        return Err(format!("frames {frames}: must be 32, 64, 128 or 256"));
    }
    let step = 48_000.0 / f64::from(frames);
    let hz = step * (1 + k % 12) as f64;
    Ok((0..frames)
        .map(|n| (0.1 * (std::f64::consts::TAU * hz * f64::from(n) / 48_000.0).sin()) as f32)
        .collect())
}

/// The answer to a clock ping (clock.ts): t1 back, and our clock at arrival and at sending.
/// None when `msg` is no well-formed ping.
pub fn pong(msg: &[u8], now_us: f64) -> Option<[u8; 32]> {
    if msg.len() != 16 || msg[0] != CTL_PING || msg[1..8].iter().any(|&b| b != 0) {
        return None;
    }
    let t1 = f64::from_le_bytes(msg[8..16].try_into().ok()?);
    if !(t1.is_finite() && t1 > 0.0) {
        return None;
    }
    let mut out = [0u8; 32];
    out[0] = CTL_PONG;
    out[8..16].copy_from_slice(&t1.to_le_bytes());
    out[16..24].copy_from_slice(&now_us.to_le_bytes());
    out[24..32].copy_from_slice(&now_us.to_le_bytes());
    Some(out)
}

impl Peer {
    /// Joins `room` as peer `i` and returns once welcomed, its socket non-blocking.
    fn join(opts: &Options, i: usize, poll: &Poll) -> Result<Peer, String> {
        let mut ws = signal::connect(opts.server, loopback_ip(3, i))
            .map_err(|e| format!("peer {i}: {e}"))?;
        let id = hex_id(1, i);
        let welcome = signal::welcome(&mut ws, &opts.room, &format!("mesh peer {i}"), &id)
            .map_err(|e| format!("peer {i}: {e}"))?;
        if let Some(peers) = welcome["peers"].as_array() {
            for p in peers.iter().filter_map(|p| p["peer"].as_str()) {
                if !p.starts_with(ID_PREFIX) && p.as_bytes() >= id.as_bytes() {
                    return Err(format!(
                        "member {p} has an id above ours: it would wait for our offer"
                    ));
                }
            }
        }
        ws.get_ref()
            .set_nonblocking(true)
            .map_err(|e| format!("non-blocking: {e}"))?;
        let std_socket = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("binding UDP: {e}"))?;
        std_socket
            .set_nonblocking(true)
            .map_err(|e| format!("non-blocking: {e}"))?;
        let local = std_socket
            .local_addr()
            .map_err(|e| format!("UDP address: {e}"))?;
        let mut socket = UdpSocket::from_std(std_socket);
        poll.registry()
            .register(&mut socket, Token(i), Interest::READABLE)
            .map_err(|e| format!("registering UDP: {e}"))?;
        Ok(Peer {
            id,
            ws,
            socket,
            local,
            page: None,
            link: None,
        })
    }

    fn signal(&mut self, to: &str, data: Value) -> Result<(), String> {
        signal::send(
            &mut self.ws,
            json!({"type": "signal", "to": to, "data": data}),
        )
    }

    /// Reads every waiting signaling message; an error ends the run (the server closed).
    fn read_signals(&mut self, now: Instant, sum: &mut Summary) -> Result<(), String> {
        loop {
            let text = match self.ws.read() {
                Ok(Message::Text(t)) => t,
                Ok(_) => continue,
                Err(e) if signal::waited(&e) => break,
                Err(e) => return Err(format!("peer {}: signaling read: {e}", self.id)),
            };
            let Ok(v) = serde_json::from_str::<Value>(text.as_str()) else {
                sum.dropped += 1;
                continue;
            };
            match v["type"].as_str() {
                Some("signal") => self.on_signal(&v, now, sum)?,
                Some("peer-left") if v["peer"].as_str() == self.page.as_deref() => {
                    self.link = None;
                    self.page = None;
                }
                Some("error") => return Err(format!("peer {}: the server said {v}", self.id)),
                _ => {}
            }
        }
        match self.ws.flush() {
            Err(e) if !signal::waited(&e) => Err(format!("peer {}: signaling flush: {e}", self.id)),
            _ => Ok(()),
        }
    }

    fn on_signal(&mut self, v: &Value, now: Instant, sum: &mut Summary) -> Result<(), String> {
        let (Some(from), data) = (v["from"].as_str(), &v["data"]) else {
            sum.dropped += 1;
            return Ok(());
        };
        let Some(epoch) = data["epoch"].as_i64() else {
            sum.dropped += 1;
            return Ok(());
        };
        // Only the page: other emulated peers never offer to us (their ids are ours' kind).
        if from.starts_with(ID_PREFIX) {
            sum.dropped += 1;
            return Ok(());
        }
        match data["kind"].as_str() {
            Some("offer") => {
                let Some(sdp) = data["sdp"].as_str() else {
                    sum.dropped += 1;
                    return Ok(());
                };
                let offer = match SdpOffer::from_sdp_string(sdp) {
                    Ok(o) => o,
                    Err(_) => {
                        sum.dropped += 1;
                        return Ok(());
                    }
                };
                if self.link.is_some() {
                    sum.renegotiated += 1;
                }
                let (link, answer) = Link::answer(offer, epoch, self.local, now)?;
                self.link = Some(link);
                self.page = Some(from.to_owned());
                self.signal(
                    from,
                    json!({"kind": "answer", "sdp": answer, "epoch": epoch}),
                )?;
            }
            Some("candidate") => {
                let live = self.page.as_deref() == Some(from);
                match (&mut self.link, data["candidate"]["candidate"].as_str()) {
                    (Some(link), Some(c)) if live && link.epoch == epoch => {
                        // An empty candidate is the end of the page's gathering.
                        if c.is_empty() {
                            return Ok(());
                        }
                        match Candidate::from_sdp_string(c) {
                            Ok(c) => link.rtc.add_remote_candidate(c),
                            Err(_) => sum.dropped += 1,
                        }
                    }
                    _ => sum.dropped += 1,
                }
            }
            // The answerer's side of a restart is the page's next offer.
            _ => sum.dropped += 1,
        }
        Ok(())
    }

    /// Feeds one datagram to the link (dropped when there is none).
    fn receive(&mut self, buf: &[u8], source: SocketAddr, now: Instant, sum: &mut Summary) {
        let Some(link) = &mut self.link else {
            sum.dropped += 1;
            return;
        };
        if !feed(&mut link.rtc, buf, source, self.local, now) {
            sum.dropped += 1;
        }
    }

    /// Runs the link's output until it next wants the time; returns that time.
    fn drive(&mut self, now: Instant, playing: bool, sum: &mut Summary) -> Option<Instant> {
        let link = self.link.as_mut()?;
        if link.rtc.handle_input(Input::Timeout(now)).is_err() {
            self.link = None;
            return None;
        }
        loop {
            match link.rtc.poll_output() {
                Ok(Output::Timeout(t)) => return Some(t),
                Ok(Output::Transmit(t)) => {
                    let _ = self.socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(Event::ChannelOpen(id, _))) if id == link.audio => {
                    link.open = true;
                }
                Ok(Output::Event(Event::ChannelData(d))) if d.id == link.audio => {
                    if playing {
                        sum.received += 1;
                    }
                }
                Ok(Output::Event(Event::ChannelData(d))) if d.id == link.control => {
                    match pong(&d.data, wall_us()) {
                        Some(p) => {
                            if let Some(mut ch) = link.rtc.channel(link.control) {
                                if ch.write(true, &p).unwrap_or(false) {
                                    sum.pongs += 1;
                                }
                            }
                        }
                        None => sum.dropped += 1,
                    }
                }
                Ok(Output::Event(_)) => {}
                Err(_) => {
                    self.link = None;
                    return None;
                }
            }
        }
    }

    fn is_open(&self) -> bool {
        self.link.as_ref().is_some_and(|l| l.open)
    }

    /// Sends one audio packet; false when the channel refused it.
    fn send_audio(&mut self, bytes: &[u8]) -> bool {
        let Some(link) = &mut self.link else {
            return false;
        };
        match link.rtc.channel(link.audio) {
            Some(mut ch) => ch.write(true, bytes).unwrap_or(false),
            None => false,
        }
    }
}

impl Link {
    /// Accepts the page's offer with a host candidate at `local` and the app's two negotiated
    /// channels; returns the link and the answer's SDP.
    fn answer(
        offer: SdpOffer,
        epoch: i64,
        local: SocketAddr,
        now: Instant,
    ) -> Result<(Link, String), String> {
        let mut rtc = Rtc::builder().build(now);
        let host = Candidate::host(local, "udp").map_err(|e| format!("host candidate: {e}"))?;
        rtc.add_local_candidate(host);
        let answer = rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| format!("the page's offer: {e}"))?;
        let channel = |label: &str, id: u16| ChannelConfig {
            label: label.into(),
            ordered: false,
            reliability: Reliability::MaxRetransmits { retransmits: 0 },
            negotiated: Some(id),
            protocol: String::new(),
        };
        let audio = rtc
            .direct_api()
            .create_data_channel(channel("audio", AUDIO_ID));
        let control = rtc
            .direct_api()
            .create_data_channel(channel("tutti-ctl", CONTROL_ID));
        let link = Link {
            rtc,
            epoch,
            audio,
            control,
            open: false,
        };
        Ok((link, answer.to_sdp_string()))
    }
}

/// Joins the peers, waits until every one is linked to the page, plays for `seconds` and
/// returns what they did. `progress` gets a line each second.
pub fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Summary, String> {
    if opts.peers == 0 || opts.peers > 256 {
        return Err(format!("peers {}: must be 1 to 256", opts.peers));
    }
    if !(opts.seconds > 0.0 && opts.seconds <= 3600.0) {
        return Err(format!("seconds {}: must be in (0, 3600]", opts.seconds));
    }
    if !opts.server.ip().is_loopback() {
        return Err(format!("server {}: loopback only", opts.server));
    }
    let block_us = f64::from(opts.frames) * 1e6 / 48_000.0;
    // The peers stand in for other machines: their thread runs at a real-time priority, as an
    // audio thread would, so that the page's load does not delay their blocks and count against
    // the page. Refused (no privilege), it runs at normal priority and says so.
    if let Scheduling::Refused(_, why) = promote_current(PRIORITY) {
        progress(&format!("normal scheduling: {why}"));
    }
    let mut poll = Poll::new().map_err(|e| format!("poll: {e}"))?;
    let mut peers = Vec::with_capacity(opts.peers);
    for i in 0..opts.peers {
        peers.push(Peer::join(opts, i, &poll)?);
    }
    let tones: Vec<Vec<f32>> = (0..opts.peers)
        .map(|k| tone_block(k, opts.frames))
        .collect::<Result<_, _>>()?;
    let mut packet_buf = vec![0u8; MAX_PACKET_LEN];
    let mut datagram = vec![0u8; 2048];
    let mut events = Events::with_capacity(256);
    let mut sum = Summary {
        peers: opts.peers,
        ..Summary::default()
    };
    let started = Instant::now();
    let link_deadline = started + Duration::from_secs_f64(opts.link_timeout);
    let mut play_from: Option<Instant> = None;
    let mut seq: u16 = 0;
    let mut next_block = started;
    let mut next_signal = started;
    let mut next_progress = started + Duration::from_secs(1);
    loop {
        let now = Instant::now();
        let linked = peers.iter().filter(|p| p.is_open()).count();
        match play_from {
            None if linked == peers.len() => {
                play_from = Some(now);
                progress(&format!("linked {linked}/{}: playing", peers.len()));
            }
            None if now > link_deadline => {
                return Err(format!(
                    "only {linked} of {} peers linked to the page within {} s",
                    peers.len(),
                    opts.link_timeout
                ));
            }
            Some(t) if now.duration_since(t).as_secs_f64() >= opts.seconds => break,
            _ => {}
        }
        let playing = play_from.is_some();
        if now >= next_signal {
            for p in &mut peers {
                p.read_signals(now, &mut sum)?;
            }
            next_signal = now + SIGNAL_EVERY;
        }
        if now >= next_block {
            // Every peer sends the block that is due (late wakes send what is due, at most 4).
            let mut due = 0;
            while next_block <= now && due < 4 {
                for (k, p) in peers.iter_mut().enumerate() {
                    if !p.is_open() {
                        continue;
                    }
                    let header = Header {
                        timestamp: wall_us() as u64,
                        seq,
                        frames: opts.frames,
                        rate: SampleRate::Hz48000,
                        format: SampleFormat::Pcm16,
                        channels_in: 1,
                        channels_out: 0,
                    };
                    let n = packet::encode(&header, None, &[&tones[k]], &mut packet_buf)
                        .map_err(|e| format!("encoding a block: {e:?}"))?;
                    let ok = p.send_audio(&packet_buf[..n]);
                    if playing {
                        if ok {
                            sum.sent += 1;
                        } else {
                            sum.refused += 1;
                        }
                    }
                }
                seq = seq.wrapping_add(1);
                next_block += Duration::from_secs_f64(block_us / 1e6);
                due += 1;
            }
            // A stall longer than that skips the rest, counted.
            while next_block <= now {
                if playing {
                    sum.skipped += 1;
                }
                seq = seq.wrapping_add(1);
                next_block += Duration::from_secs_f64(block_us / 1e6);
            }
        }
        if now >= next_progress {
            progress(&format!(
                "linked {linked}/{} sent {} received {} refused {} pongs {}",
                peers.len(),
                sum.sent,
                sum.received,
                sum.refused,
                sum.pongs
            ));
            next_progress += Duration::from_secs(1);
        }
        let mut wake = next_block.min(next_signal);
        for p in &mut peers {
            if let Some(t) = p.drive(now, playing, &mut sum) {
                wake = wake.min(t);
            }
        }
        // epoll waits whole milliseconds, rounded up: the last stretch before a block is due is
        // slept precisely instead, so blocks leave on time as a real sender's would.
        let wait = wake
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(5));
        let coarse = wait.saturating_sub(Duration::from_millis(1));
        let polled = if coarse >= Duration::from_millis(1) {
            poll.poll(&mut events, Some(coarse))
        } else {
            std::thread::sleep(wait);
            poll.poll(&mut events, Some(Duration::ZERO))
        };
        match polled {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        let now = Instant::now();
        for ev in events.iter() {
            let Some(p) = peers.get_mut(ev.token().0) else {
                continue;
            };
            loop {
                match p.socket.recv_from(&mut datagram) {
                    Ok((n, source)) => p.receive(&datagram[..n], source, now, &mut sum),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        sum.dropped += 1;
                        break;
                    }
                }
            }
        }
    }
    sum.linked = peers.iter().filter(|p| p.is_open()).count();
    for p in &mut peers {
        let _ = signal::send(&mut p.ws, json!({"type": "leave"}));
        let _ = p.ws.flush();
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping_is_answered_with_its_time_and_ours() {
        let mut ping = [0u8; 16];
        ping[0] = CTL_PING;
        ping[8..16].copy_from_slice(&1.7e15f64.to_le_bytes());
        let p = pong(&ping, 1.8e15).expect("a pong");
        assert_eq!(p[0], CTL_PONG);
        assert!(p[1..8].iter().all(|&b| b == 0));
        let f = |i: usize| f64::from_le_bytes(p[i..i + 8].try_into().unwrap());
        assert_eq!((f(8), f(16), f(24)), (1.7e15, 1.8e15, 1.8e15));
    }

    #[test]
    fn malformed_pings_get_no_answer() {
        let mut ping = [0u8; 16];
        ping[0] = CTL_PING;
        ping[8..16].copy_from_slice(&1.0e15f64.to_le_bytes());
        let mut reserved = ping;
        reserved[3] = 1;
        let mut nan = ping;
        nan[8..16].copy_from_slice(&f64::NAN.to_le_bytes());
        let mut pong_type = ping;
        pong_type[0] = CTL_PONG;
        for bad in [
            &reserved[..],
            &nan[..],
            &pong_type[..],
            &ping[..15],
            &[][..],
        ] {
            assert_eq!(pong(bad, 1.0), None);
        }
    }

    #[test]
    fn tones_hold_whole_cycles_at_their_frequency() {
        for frames in [32u16, 64, 128, 256] {
            let b = tone_block(3, frames).unwrap();
            assert_eq!(b.len(), usize::from(frames));
            // 4 whole cycles of 4 × 48000/frames Hz: zero crossings upward 4 times.
            let ups = b.windows(2).filter(|w| w[0] < 0.0 && w[1] >= 0.0).count();
            assert_eq!(
                ups, 3,
                "frames {frames}: 4 cycles start at 0, so 3 upward crossings inside"
            );
        }
        assert!(tone_block(0, 100).is_err());
    }

    #[test]
    fn our_ids_are_hex_and_above_a_pages() {
        let id = hex_id(1, 7);
        assert_eq!(id.len(), 32);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert!(id.as_str() > "fffffffe000000000000000000000000");
        assert_ne!(hex_id(1, 7), hex_id(2, 7));
    }
}
