//! Ingest: the gate every message from a client passes before the room uses it.
//!
//! One message is one packet of `tutti_core::packet`. It is refused, counted by reason in the
//! client's [`ClientCounters`] and dropped when it is:
//! - JackTrip's exit datagram (63 × 0xFF): not audio but "this client stopped"; reported as
//!   [`Received::Exit`] so the worker ends the client;
//! - over the client's rate ([`DropReason::Flood`]): a token bucket in packets refills at twice the
//!   packet rate of the client's block size (JackTrip: its format's; a browser: its last accepted
//!   packet's, 128 frames until then) and holds [`BURST_PACKETS`]. Every other message costs a
//!   token, so a flood of garbage is cut off as a flood too;
//! - not a packet ([`DropReason::Malformed`]: truncated, trailing bytes, oversized, a bad trailer,
//!   an undefined rate code);
//! - a sample rate other than 48 kHz ([`DropReason::WrongRate`]);
//! - a format the room cannot take ([`DropReason::WrongFormat`]: bit depth, channels, block size or
//!   codec not accepted by the parser; for a JackTrip client, a block size or bit depth other than
//!   the one its handshake announced);
//! - carrying a trailer that names another stream ([`DropReason::Spoofed`]): the room stamps the
//!   sender's own stream id on what it forwards, so a trailer may hold 0 or the sender's own id;
//!   anything else is a client pretending to be another one.
//!
//! Nothing here allocates or panics; the checks read the bytes in place.

use tutti_core::packet::{self, Packet, PacketError, SampleRate, CONTROL_PACKET_LEN};

use super::{ClientKind, JackTripFormat};

/// Packets a client may send back to back beyond its rate before the bucket is empty.
pub const BURST_PACKETS: u64 = 32;
/// Block size a browser is assumed to send until its first accepted packet says otherwise.
const DEFAULT_FRAMES: u16 = 128;
/// Bucket units per µs: a packet of `frames` costs `frames × COST_PER_FRAME` units, and at
/// `UNITS_PER_US` per µs the bucket refills twice as fast as 48 kHz audio plays
/// (`frames / 96000` s = `frames × 125 / 12` µs).
const UNITS_PER_US: u64 = 12;
const COST_PER_FRAME: u64 = 125;

/// What [`MediaRoom::receive`](super::MediaRoom::receive) made of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// A packet the room took.
    Accepted,
    /// Counted and dropped.
    Dropped(DropReason),
    /// JackTrip's exit datagram: the client stopped; the worker should end it.
    Exit,
}

/// Why a message was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Not a packet.
    Malformed,
    /// A sample rate other than 48 kHz.
    WrongRate,
    /// A format the room does not take from this client.
    WrongFormat,
    /// Over the client's packet rate.
    Flood,
    /// A trailer naming a stream other than the sender's own.
    Spoofed,
    /// The client id is not (or no longer) in the room.
    UnknownClient,
}

/// One client's counters. Everything it sent is in `received`; each message is in exactly one
/// of `accepted`, `exits` and the drop reasons.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientCounters {
    /// Messages from the client.
    pub received: u64,
    /// Packets taken by the room.
    pub accepted: u64,
    /// Exit datagrams.
    pub exits: u64,
    /// Dropped: not a packet.
    pub malformed: u64,
    /// Dropped: not 48 kHz.
    pub wrong_rate: u64,
    /// Dropped: a format the room does not take from this client.
    pub wrong_format: u64,
    /// Dropped: over the client's rate.
    pub flood: u64,
    /// Dropped: a trailer naming another stream.
    pub spoofed: u64,
    /// This client's packets placed in other listeners' bundles (forward mode).
    pub forwarded: u64,
    /// Packets meant for this listener dropped because its pending bundles were full.
    pub overflow: u64,
    /// Messages sent to this client.
    pub sent: u64,
    /// Others' packets sent to this client inside those messages (forward mode): with `sent`,
    /// how well its bundles gather them.
    pub sent_entries: u64,
    /// Bytes sent to this client.
    pub sent_bytes: u64,
    /// This client's packets that reached the mix's jitter buffer after their slot (mix mode).
    pub late: u64,
    /// Blocks of this client the mix concealed (mix mode).
    pub concealed: u64,
}

/// The gate of one client: its rate bucket and its counters.
#[derive(Clone, Debug)]
pub struct Ingest {
    stream: u16,
    format: Option<JackTripFormat>,
    frames: u16,
    credit: u64,
    last_us: u64,
    pub counters: ClientCounters,
}

impl Ingest {
    /// The gate of a client with stream id `stream`, its bucket full at `now_us`.
    pub fn new(stream: u16, kind: ClientKind, now_us: u64) -> Ingest {
        let (format, frames) = match kind {
            ClientKind::Browser => (None, DEFAULT_FRAMES),
            ClientKind::JackTrip(f) => (Some(f), f.frames),
        };
        Ingest {
            stream,
            format,
            frames,
            credit: BURST_PACKETS * cost(frames),
            last_us: now_us,
            counters: ClientCounters::default(),
        }
    }

    /// Checks one message. `Ok` holds the parsed packet, which the caller then uses; every other
    /// outcome is already counted.
    pub fn check<'a>(&mut self, bytes: &'a [u8], now_us: u64) -> Result<Packet<'a>, Received> {
        self.counters.received += 1;
        if bytes.len() == CONTROL_PACKET_LEN && bytes.iter().all(|&b| b == 0xFF) {
            self.counters.exits += 1;
            return Err(Received::Exit);
        }
        if !self.take_token(now_us) {
            return Err(self.drop(DropReason::Flood));
        }
        let pkt = match packet::parse(bytes) {
            Ok(pkt) => pkt,
            Err(e) => return Err(self.drop(reason_of(e))),
        };
        if pkt.header.rate != SampleRate::Hz48000 {
            return Err(self.drop(DropReason::WrongRate));
        }
        if let Some(f) = self.format {
            if pkt.header.frames != f.frames || pkt.header.format.bits() != f.bits {
                return Err(self.drop(DropReason::WrongFormat));
            }
        }
        if let Some(ext) = pkt.ext {
            if ext.stream_id != 0 && ext.stream_id != self.stream {
                return Err(self.drop(DropReason::Spoofed));
            }
        }
        self.frames = pkt.header.frames;
        self.counters.accepted += 1;
        Ok(pkt)
    }

    /// Counts a drop and returns it as the outcome.
    fn drop(&mut self, reason: DropReason) -> Received {
        let c = &mut self.counters;
        match reason {
            DropReason::Malformed => c.malformed += 1,
            DropReason::WrongRate => c.wrong_rate += 1,
            DropReason::WrongFormat => c.wrong_format += 1,
            DropReason::Flood => c.flood += 1,
            DropReason::Spoofed => c.spoofed += 1,
            DropReason::UnknownClient => {}
        }
        Received::Dropped(reason)
    }

    /// Refills the bucket up to `now_us` and takes one packet's worth from it, if it holds one.
    fn take_token(&mut self, now_us: u64) -> bool {
        let cost = cost(self.frames);
        let elapsed = now_us.saturating_sub(self.last_us);
        self.last_us = self.last_us.max(now_us);
        self.credit = self
            .credit
            .saturating_add(elapsed.saturating_mul(UNITS_PER_US))
            .min(BURST_PACKETS * cost);
        if self.credit < cost {
            return false;
        }
        self.credit -= cost;
        true
    }
}

/// Bucket units one packet of `frames` costs.
const fn cost(frames: u16) -> u64 {
    frames as u64 * COST_PER_FRAME
}

/// The drop reason of a parser error.
fn reason_of(e: PacketError) -> DropReason {
    match e {
        PacketError::BadBits(_)
        | PacketError::BadChannels(_)
        | PacketError::BadFrames(_)
        | PacketError::UnsupportedCodec(_)
        | PacketError::UnsupportedVersion(_) => DropReason::WrongFormat,
        _ => DropReason::Malformed,
    }
}
