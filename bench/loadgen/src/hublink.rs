//! One emulated app client's WebRTC link to the hub: a str0m peer with the one data channel the
//! hub expects, made by the server's own [`HubOffer`] so that it connects exactly as the app
//! does, and driven by a driver thread like the JackTrip clients' sockets (driver.rs): the
//! driver hands it each datagram its socket reads, the time when the peer asks for it, and one
//! packet per block to send. What the hub sends back, one bundle per block of the other
//! members' packets, is counted per sender ([`Sources`]).
//!
//! The driver owns the socket and passes it in, so a link is plain state: the peer, the channel
//! and the counts. Nothing here panics on what the hub sends: a datagram the peer refuses, a
//! message that is no bundle, a packet in a bundle that does not parse or has no sender's
//! stream id, are counted and dropped; a peer whose output fails is marked failed and no longer
//! driven. This code allocates nothing per packet; str0m itself copies each message it sends
//! and hands each one it receives over in a buffer of its own.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use str0m::change::SdpPendingOffer;
use str0m::channel::ChannelId;
use str0m::net::{Protocol, Receive};
use str0m::{Event, Input, Output, Rtc};

use tutti_core::{bundle, packet};
use tutti_server::hub::client::{accept_answer, HubOffer};

use crate::sources::Sources;

/// Hands `rtc` one UDP datagram from `source` to `destination`; false when the peer refused it
/// (not a datagram it takes, or one it could not handle). The hub links and the mesh peers
/// both feed their peers with it.
pub fn feed(
    rtc: &mut Rtc,
    bytes: &[u8],
    source: SocketAddr,
    destination: SocketAddr,
    now: Instant,
) -> bool {
    let Ok(contents) = bytes.try_into() else {
        return false;
    };
    let input = Input::Receive(
        now,
        Receive {
            proto: Protocol::Udp,
            source,
            destination,
            contents,
        },
    );
    rtc.handle_input(input).is_ok()
}

pub struct HubLink {
    rtc: Rtc,
    channel: ChannelId,
    local: SocketAddr,
    pending: Option<SdpPendingOffer>,
    /// The data channel opened (blocks are sent from then on).
    pub open: bool,
    /// When the peer next wants the time.
    next: Instant,
    pub sources: Sources,
    /// Messages that were no bundle, and packets in bundles that did not parse or named no
    /// sender.
    pub malformed: u64,
    /// Datagrams the peer refused.
    pub refused: u64,
    /// The peer's output failed: the link is dead and no longer driven.
    pub failed: bool,
    /// On the driver's clock, µs: the first packet from another member.
    pub first_packet_us: Option<u64>,
}

/// Decoding room for one block: two channels of [`packet::MAX_FRAMES`].
pub struct Scratch<'a> {
    pub left: &'a mut [f32],
    pub right: &'a mut [f32],
}

impl HubLink {
    /// A link from a fresh socket at `ip` (returned, blocking) and the offer's SDP; `own` is the
    /// member's stream id, `others` the room's other members, `record_frames` (above 0) how much
    /// of each sender a spot-checked listener records.
    pub fn offer(
        ip: IpAddr,
        own: u16,
        others: usize,
        record_frames: usize,
    ) -> Result<(HubLink, std::net::UdpSocket, String), String> {
        let socket =
            std::net::UdpSocket::bind((ip, 0)).map_err(|e| format!("binding UDP on {ip}: {e}"))?;
        let local = socket
            .local_addr()
            .map_err(|e| format!("UDP address: {e}"))?;
        let now = Instant::now();
        let offer = HubOffer::new(local, now)?;
        let link = HubLink {
            rtc: offer.rtc,
            channel: offer.channel,
            local,
            pending: Some(offer.pending),
            open: false,
            next: now,
            sources: Sources::new(own, others, record_frames),
            malformed: 0,
            refused: 0,
            failed: false,
            first_packet_us: None,
        };
        Ok((link, socket, offer.sdp))
    }

    /// Applies the hub's answer.
    pub fn accept(&mut self, sdp: &str) -> Result<(), String> {
        let pending = self.pending.take().ok_or("an answer came twice")?;
        accept_answer(&mut self.rtc, pending, sdp)
    }

    /// Takes datagram `bytes` from `from`, read on `socket` at `now`.
    pub fn receive(
        &mut self,
        bytes: &[u8],
        from: SocketAddr,
        now: Instant,
        now_us: u64,
        socket: &mio::net::UdpSocket,
        scratch: &mut Scratch,
    ) {
        if self.failed {
            return;
        }
        if !feed(&mut self.rtc, bytes, from, self.local, now) {
            self.refused += 1;
        }
        self.drain(socket, now_us, scratch);
    }

    /// Gives the peer the time when it asked for it (the driver calls this every wake).
    pub fn tick(
        &mut self,
        now: Instant,
        now_us: u64,
        socket: &mio::net::UdpSocket,
        scratch: &mut Scratch,
    ) {
        if self.failed || now < self.next {
            return;
        }
        if self.rtc.handle_input(Input::Timeout(now)).is_err() {
            self.failed = true;
            return;
        }
        self.drain(socket, now_us, scratch);
    }

    /// Sends one packet on the hub channel; false when the channel is not open or would not
    /// take it.
    pub fn send(
        &mut self,
        bytes: &[u8],
        now_us: u64,
        socket: &mio::net::UdpSocket,
        scratch: &mut Scratch,
    ) -> bool {
        if self.failed || !self.open {
            return false;
        }
        let sent = match self.rtc.channel(self.channel) {
            Some(mut ch) => ch.write(true, bytes).unwrap_or(false),
            None => false,
        };
        self.drain(socket, now_us, scratch);
        sent
    }

    /// Ends the link (the peer closes its association).
    pub fn close(&mut self, socket: &mio::net::UdpSocket) {
        if !self.failed {
            self.rtc.disconnect();
            let mut scratch = Scratch {
                left: &mut [],
                right: &mut [],
            };
            self.drain(socket, 0, &mut scratch);
        }
    }

    /// Starts a new measuring window.
    pub fn reset(&mut self) {
        self.sources.reset();
        self.malformed = 0;
        self.refused = 0;
    }

    /// Handles the peer's output until it asks for the time again.
    fn drain(&mut self, socket: &mio::net::UdpSocket, now_us: u64, scratch: &mut Scratch) {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.next = t;
                    return;
                }
                // A send the kernel refused is a lost datagram, as on a network.
                Ok(Output::Transmit(t)) => {
                    let _ = socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(Event::ChannelOpen(id, _))) if id == self.channel => {
                    self.open = true;
                }
                Ok(Output::Event(Event::ChannelData(d))) if d.id == self.channel => {
                    self.on_message(&d.data, now_us, scratch);
                }
                Ok(Output::Event(_)) => {}
                Err(_) => {
                    self.failed = true;
                    return;
                }
            }
        }
    }

    /// One message from the hub: a bundle of the other members' packets.
    fn on_message(&mut self, data: &[u8], now_us: u64, scratch: &mut Scratch) {
        let Ok(b) = bundle::parse(data) else {
            self.malformed += 1;
            return;
        };
        for bytes in b.packets() {
            let Ok(p) = packet::parse(bytes) else {
                self.malformed += 1;
                continue;
            };
            let Some(ext) = p.ext else {
                self.malformed += 1;
                continue;
            };
            self.first_packet_us.get_or_insert(now_us);
            let Some(src) = self.sources.slot(ext.stream_id) else {
                continue;
            };
            src.reception.on_packet(p.header.seq, now_us);
            if let Some(rec) = src.recording.as_mut() {
                let frames = p.frames();
                if frames <= scratch.left.len().min(scratch.right.len())
                    && rec.admit(p.header.seq, frames)
                {
                    p.decode_stereo(&mut scratch.left[..frames], &mut scratch.right[..frames]);
                    rec.push(&scratch.left[..frames]);
                }
            }
        }
    }
}
