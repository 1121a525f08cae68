//! One browser's WebRTC link to the hub: a str0m [`Rtc`] in ICE-lite mode on its worker's UDP
//! socket, the `hub` data channel it opens, and what the worker needs from it.
//!
//! str0m is sans-IO: it never reads a socket or a clock itself. The worker hands it datagrams and
//! the time, and takes back datagrams to send, timeouts and events. That is why the hub uses it
//! rather than a WebRTC stack with threads of its own: one worker thread carries hundreds of
//! links on one socket, and nothing here waits.
//!
//! The hub is ICE-lite: it has one host candidate (the worker's socket at the advertised
//! address) and only answers the browser's connectivity checks. The browser creates the data
//! channel (`ordered: false`, `maxRetransmits: 0`) before its offer, so the SCTP stream's
//! reliability is the browser's choice and the hub never retransmits audio.

use std::net::SocketAddr;
use std::time::Instant;

use super::drain::SendBound;

use str0m::change::SdpOffer;
use str0m::channel::ChannelId;
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc};

/// The label of the one data channel a browser opens to the hub.
pub const CHANNEL_LABEL: &str = "hub";

/// Why a link could not be made from an offer.
#[derive(Debug)]
pub enum LinkError {
    /// The offer's SDP did not parse.
    BadOffer(String),
    /// str0m refused the offer or the candidate.
    Refused(String),
}

impl LinkError {
    pub fn message(&self) -> String {
        match self {
            LinkError::BadOffer(e) => format!("The hub could not read the offer: {e}"),
            LinkError::Refused(e) => format!("The hub refused the offer: {e}"),
        }
    }
}

/// What one step of a link gave the worker.
pub enum Step<'a> {
    /// A datagram to send.
    Transmit(SocketAddr, &'a [u8]),
    /// A binary message on the hub channel.
    Message(&'a [u8]),
    /// Nothing more until this time.
    Idle(Instant),
    /// The link is over (ICE disconnected, the channel closed or str0m failed).
    Closed,
}

/// One browser's link.
pub struct Link {
    rtc: Rtc,
    channel: Option<ChannelId>,
    /// The time of the next timeout str0m asked for.
    next: Instant,
    closed: bool,
    /// The last datagram or message, kept so [`Step`] can lend it (str0m hands over owned
    /// buffers; copying into one reused buffer keeps the worker's own side allocation-free).
    held: Vec<u8>,
    /// Messages that could not be written because the SCTP send buffer was full.
    pub(crate) send_full: u64,
    /// Bytes written so far, and offered (written or dropped at the bound).
    sent_bytes: u64,
    offered_bytes: u64,
    /// What the channel may hold before messages are dropped, from its drain rate.
    bound: SendBound,
    /// The hub's ICE username fragment for this link (browsers' checks name it first).
    ufrag: String,
    /// Text messages and messages on other channels, dropped.
    pub(crate) foreign: u64,
}

impl Link {
    /// Answers `offer` (SDP text) with a link whose only candidate is `local` (the worker's
    /// socket at the address browsers reach). Returns the link and the answer's SDP.
    pub fn accept(
        offer: &str,
        local: SocketAddr,
        now: Instant,
    ) -> Result<(Link, String), LinkError> {
        let offer =
            SdpOffer::from_sdp_string(offer).map_err(|e| LinkError::BadOffer(e.to_string()))?;
        let mut rtc = Rtc::builder().set_ice_lite(true).build(now);
        let candidate =
            Candidate::host(local, "udp").map_err(|e| LinkError::Refused(e.to_string()))?;
        rtc.add_local_candidate(candidate);
        let answer = rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| LinkError::Refused(e.to_string()))?;
        let ufrag = rtc.direct_api().local_ice_credentials().ufrag;
        let link = Link {
            ufrag,
            rtc,
            channel: None,
            next: now,
            closed: false,
            held: Vec::with_capacity(2048),
            send_full: 0,
            sent_bytes: 0,
            offered_bytes: 0,
            bound: SendBound::new(now),
            foreign: 0,
        };
        Ok((link, answer.to_sdp_string()))
    }

    /// The hub's ICE username fragment for this link.
    pub fn ufrag(&self) -> &str {
        &self.ufrag
    }

    /// Whether `bytes` from `source` belong to this link (STUN for its credentials, or DTLS and
    /// SCTP from the address ICE chose).
    pub fn accepts(
        &self,
        source: SocketAddr,
        local: SocketAddr,
        bytes: &[u8],
        now: Instant,
    ) -> bool {
        match input(source, local, bytes, now) {
            Some(input) => self.rtc.accepts(&input),
            None => false,
        }
    }

    /// Hands the link a datagram it accepts.
    pub fn receive(&mut self, source: SocketAddr, local: SocketAddr, bytes: &[u8], now: Instant) {
        if self.closed {
            return;
        }
        let Some(input) = input(source, local, bytes, now) else {
            return;
        };
        if self.rtc.handle_input(input).is_err() {
            self.close();
        }
    }

    /// Tells the link the time; call when [`Link::next`] has passed.
    pub fn tick(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        if self.rtc.handle_input(Input::Timeout(now)).is_err() {
            self.close();
        }
    }

    /// When the link next needs [`Link::tick`].
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Whether the hub channel is open (messages can be sent).
    pub fn open(&self) -> bool {
        self.channel.is_some() && !self.closed
    }

    pub fn closed(&self) -> bool {
        self.closed
    }

    /// Samples what has left the channel (written minus held) for its send bound
    /// ([`super::drain`]). Cheap when not due: the worker calls it at every wake.
    pub fn rebound(&mut self, now: Instant) {
        if !self.bound.due(now) {
            return;
        }
        let Some(mut channel) = self.channel.and_then(|id| self.rtc.channel(id)) else {
            return;
        };
        let held = channel.buffered_amount() as u64;
        self.bound.sample(
            now,
            self.sent_bytes.saturating_sub(held),
            self.offered_bytes,
        );
    }

    /// Writes one binary message on the hub channel. Returns false (and counts it) when the
    /// channel is not open or already holds its bound ([`Link::rebound`]): audio that cannot go
    /// now is not queued.
    pub fn send(&mut self, bytes: &[u8]) -> bool {
        let Some(id) = self.channel else {
            return false;
        };
        self.offered_bytes += bytes.len() as u64;
        let written = match self.rtc.channel(id) {
            Some(mut channel) => {
                if channel.buffered_amount() > self.bound.bound() {
                    Ok(false)
                } else {
                    channel.write(true, bytes)
                }
            }
            None => Ok(false),
        };
        match written {
            Ok(true) => {
                self.sent_bytes += bytes.len() as u64;
                true
            }
            Ok(false) => {
                self.send_full += 1;
                false
            }
            Err(_) => {
                self.close();
                false
            }
        }
    }

    /// The next thing the link has for the worker. Call until it gives [`Step::Idle`] or
    /// [`Step::Closed`].
    pub fn step(&mut self) -> Step<'_> {
        loop {
            if self.closed {
                return Step::Closed;
            }
            let output = match self.rtc.poll_output() {
                Ok(output) => output,
                Err(_) => {
                    self.close();
                    continue;
                }
            };
            match output {
                Output::Timeout(t) => {
                    self.next = t;
                    return Step::Idle(t);
                }
                Output::Transmit(t) => {
                    self.held.clear();
                    self.held.extend_from_slice(&t.contents);
                    return Step::Transmit(t.destination, &self.held);
                }
                Output::Event(event) => {
                    if let Some(done) = self.event(event) {
                        if done {
                            return Step::Message(&self.held);
                        }
                    }
                }
            }
        }
    }

    /// Handles one event; `Some(true)` when it left a message in `held`.
    fn event(&mut self, event: Event) -> Option<bool> {
        match event {
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                self.close();
                None
            }
            Event::ChannelOpen(id, label) => {
                if label == CHANNEL_LABEL && self.channel.is_none() {
                    self.channel = Some(id);
                }
                None
            }
            Event::ChannelClose(id) => {
                if self.channel == Some(id) {
                    self.close();
                }
                None
            }
            Event::ChannelData(data) => {
                if Some(data.id) != self.channel || !data.binary {
                    self.foreign += 1;
                    return None;
                }
                self.held.clear();
                self.held.extend_from_slice(&data.data);
                Some(true)
            }
            _ => None,
        }
    }

    /// Ends the link.
    pub fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.rtc.disconnect();
        }
    }
}

/// A datagram as str0m's input; `None` when it is no STUN, DTLS, RTP or RTCP at all.
fn input(source: SocketAddr, local: SocketAddr, bytes: &[u8], now: Instant) -> Option<Input<'_>> {
    let contents = bytes.try_into().ok()?;
    Some(Input::Receive(
        now,
        Receive {
            proto: Protocol::Udp,
            source,
            destination: local,
            contents,
        },
    ))
}
