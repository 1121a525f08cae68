//! A native hub client: a real WebRTC peer (str0m, full ICE) on its own UDP socket, with one data
//! channel labelled `hub` (unordered, no retransmits) exactly as the browser makes it. The tests
//! and the hub's load benchmark use it to stand in for browsers; the caller carries the offer
//! and the answer over the signaling.
//!
//! It is a test and benchmark tool, not part of the server's own path: it panics on what a test
//! should not see (a refused answer, a socket error). [`HubOffer`] and [`accept_answer`], the
//! offer and answer steps alone, return errors instead: the load generator's emulated clients
//! make their links with them, so that they connect exactly as this client (and the app) does.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::channel::{ChannelConfig, ChannelId, Reliability};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};

use tutti_core::packet::{self, Extension, Header, SampleFormat, SampleRate, CODEC_PCM};

use super::rtc::CHANNEL_LABEL;

/// A 48 kHz PCM16 stereo packet of `samples` (the same on both channels; 32 to 256 frames) with
/// sequence number `seq`, as a browser sends it (with a trailer of stream 0).
pub fn pcm16_packet(seq: u16, samples: &[f32]) -> Vec<u8> {
    let header = Header {
        timestamp: u64::from(seq),
        seq,
        frames: samples.len() as u16,
        rate: SampleRate::Hz48000,
        format: SampleFormat::Pcm16,
        channels_in: 2,
        channels_out: 0,
    };
    let ext = Extension {
        stream_id: 0,
        codec: CODEC_PCM,
    };
    let mut out = vec![0u8; packet::MAX_PACKET_LEN];
    let n =
        packet::encode(&header, Some(&ext), &[samples, samples], &mut out).expect("a valid block");
    out.truncate(n);
    out
}

/// A hub link's offer as a browser makes it: a peer with one host candidate at `local` and the
/// one data channel the hub expects ([`CHANNEL_LABEL`], unordered, no retransmits). Shared by
/// [`HubClient`] and the load generator's emulated clients, so both connect as the app does.
pub struct HubOffer {
    pub rtc: Rtc,
    pub channel: ChannelId,
    pub pending: SdpPendingOffer,
    /// The offer's SDP (the `sdp` of `hub-offer`).
    pub sdp: String,
}

impl HubOffer {
    /// An offer from a peer on `local` (its UDP socket's address), created at `now`.
    pub fn new(local: SocketAddr, now: Instant) -> Result<HubOffer, String> {
        let mut rtc = Rtc::builder().build(now);
        let candidate =
            Candidate::host(local, "udp").map_err(|e| format!("host candidate {local}: {e}"))?;
        rtc.add_local_candidate(candidate);
        let mut api = rtc.sdp_api();
        let channel = api.add_channel_with_config(ChannelConfig {
            label: CHANNEL_LABEL.into(),
            ordered: false,
            reliability: Reliability::MaxRetransmits { retransmits: 0 },
            ..ChannelConfig::default()
        });
        let (offer, pending) = api.apply().ok_or("str0m made no offer")?;
        Ok(HubOffer {
            rtc,
            channel,
            pending,
            sdp: offer.to_sdp_string(),
        })
    }
}

/// Applies the hub's answer (the `sdp` of `hub-answer`) to the offer `pending` of `rtc`.
pub fn accept_answer(rtc: &mut Rtc, pending: SdpPendingOffer, sdp: &str) -> Result<(), String> {
    let answer = SdpAnswer::from_sdp_string(sdp).map_err(|e| format!("the answer: {e}"))?;
    rtc.sdp_api()
        .accept_answer(pending, answer)
        .map_err(|e| format!("the answer refused: {e}"))
}

pub struct HubClient {
    rtc: Rtc,
    pending: Option<SdpPendingOffer>,
    socket: UdpSocket,
    local: SocketAddr,
    channel: ChannelId,
    open: bool,
    /// Messages received on the hub channel, in order.
    pub received: Vec<Vec<u8>>,
    /// Messages the channel would not take.
    pub refused: u64,
}

impl HubClient {
    /// A client on a fresh socket at `ip` and its offer's SDP (to send as `hub-offer`).
    pub fn offer(ip: std::net::IpAddr) -> (HubClient, String) {
        let socket = UdpSocket::bind((ip, 0)).expect("hub client: bind UDP");
        let local = socket.local_addr().expect("test client: local address");
        let offer = HubOffer::new(local, Instant::now()).expect("an offer");
        let client = HubClient {
            rtc: offer.rtc,
            pending: Some(offer.pending),
            socket,
            local,
            channel: offer.channel,
            open: false,
            received: Vec::new(),
            refused: 0,
        };
        (client, offer.sdp)
    }

    /// Applies the hub's answer (the `sdp` of `hub-answer`).
    pub fn accept(&mut self, answer: &str) {
        let pending = self.pending.take().expect("one answer per offer");
        accept_answer(&mut self.rtc, pending, answer).expect("the answer is accepted");
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Runs the link until `until` (bounded by the caller), waiting for datagrams.
    pub fn run_until(&mut self, until: Instant) {
        loop {
            let timeout = self.drain();
            let now = Instant::now();
            if now >= until {
                return;
            }
            let wait = timeout.min(until).saturating_duration_since(now);
            let wait = wait.clamp(Duration::from_micros(100), Duration::from_millis(2));
            self.socket.set_read_timeout(Some(wait)).expect("timeout");
            if !self.read_one() {
                self.tick();
            }
        }
    }

    /// Handles every datagram already waiting and the time, without waiting.
    pub fn pump(&mut self) {
        self.socket.set_nonblocking(true).expect("non-blocking");
        while self.read_one() {
            self.drain();
        }
        self.socket.set_nonblocking(false).expect("blocking");
        self.tick();
        self.drain();
    }

    /// Reads one datagram into the link; false when none came.
    fn read_one(&mut self) -> bool {
        let mut buf = [0u8; 2048];
        let Ok((n, source)) = self.socket.recv_from(&mut buf) else {
            return false;
        };
        let Ok(contents) = (&buf[..n]).try_into() else {
            return true;
        };
        let input = Input::Receive(
            Instant::now(),
            Receive {
                proto: Protocol::Udp,
                source,
                destination: self.local,
                contents,
            },
        );
        self.rtc
            .handle_input(input)
            .expect("the client takes the datagram");
        true
    }

    fn tick(&mut self) {
        self.rtc
            .handle_input(Input::Timeout(Instant::now()))
            .expect("the client takes the time");
    }

    /// Runs until the channel is open, at most `limit`.
    pub fn open_within(&mut self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while !self.open && Instant::now() < end {
            self.run_until((Instant::now() + Duration::from_millis(20)).min(end));
        }
        self.open
    }

    /// Sends one binary message on the hub channel.
    pub fn send(&mut self, bytes: &[u8]) {
        let sent = match self.rtc.channel(self.channel) {
            Some(mut ch) => ch.write(true, bytes).unwrap_or(false),
            None => false,
        };
        if !sent {
            self.refused += 1;
        }
        self.drain();
    }

    /// Handles the client's output; returns when it next wants the time.
    fn drain(&mut self) -> Instant {
        loop {
            match self.rtc.poll_output().expect("the client's output") {
                Output::Timeout(t) => return t,
                Output::Transmit(t) => {
                    let _ = self.socket.send_to(&t.contents, t.destination);
                }
                Output::Event(Event::ChannelOpen(id, _)) if id == self.channel => self.open = true,
                Output::Event(Event::ChannelData(d)) if d.id == self.channel => {
                    self.received.push(d.data)
                }
                Output::Event(_) => {}
            }
        }
    }
}
