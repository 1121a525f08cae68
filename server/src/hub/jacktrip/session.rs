//! One JackTrip client on the hub's UDP side, without I/O: whose datagrams are its own, what
//! audio format it speaks, and when it has gone.
//!
//! The worker creates a [`Session`] when the client is admitted (it knows the client's IP from
//! the TCP hello) and hands it every datagram that may be the client's, with the time:
//!
//! - The first acceptable datagram from the client's IP fixes its real source address, port
//!   included (a NAT may have changed the port from the one in the hello). Datagrams from any
//!   other address are counted and dropped.
//! - That datagram's header also fixes the format (JackTrip's header, see `tutti_core::packet`):
//!   48 kHz only, 16 or 24 bit, 32 to 256 frames (a power of two), 1 or 2 channels each way
//!   (byte 14: what it receives; byte 15: what it sends, 0 = as byte 14). A client whose first
//!   whole packet is in another format is refused ([`Verdict::Refused`]) and the session ends;
//!   bytes that are not a whole packet are only dropped, and so are later packets that differ
//!   from the fixed format. A datagram carrying several packets (JackTrip's
//!   redundancy, `-r`, newest first) yields its first, newest packet.
//! - JackTrip's exit packet (63 bytes of 0xFF) ends the session, and so do [`TIMEOUT_US`] without
//!   a datagram from the client ([`Session::poll_timeout`]).
//!
//! Nothing here allocates or logs: [`Session::on_datagram`] returns a borrowed slice or a small
//! enum, and the worker logs the reasons it is given.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use tutti_core::packet::{self, SampleRate, CHANNELS_NONE, CONTROL_PACKET_LEN, HEADER_LEN};

/// A session without any datagram from its client for this long ends (µs).
pub const TIMEOUT_US: u64 = 10_000_000;
/// The only sample rate the hub mixes at.
pub const RATE_HZ: u32 = 48_000;

/// A JackTrip client's audio format, fixed by its first packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JackTripFormat {
    /// Frames per packet: 32, 64, 128 or 256.
    pub frames: u16,
    /// 16 or 24.
    pub bits: u8,
    /// Channels it wants to receive (header byte 14): 1 or 2.
    pub channels: u8,
}

impl JackTripFormat {
    /// Whether the hub can serve this format.
    pub fn is_valid(&self) -> bool {
        packet::BLOCK_SIZES.contains(&self.frames)
            && matches!(self.bits, 16 | 24)
            && matches!(self.channels, 1 | 2)
    }
}

/// Why a client's format is refused (the session ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    /// A sample rate other than 48 kHz (in Hz), or an undefined rate code (0).
    Rate(u32),
    /// A bit depth other than 16 or 24.
    Bits(u8),
    /// Frames per packet not a power of two in 32..=256.
    Frames(u16),
    /// Channels to receive (byte 14) not 1 or 2.
    ChannelsIn(u8),
    /// Channels sent (byte 15 by JackTrip's rule) not 1 or 2; 255 = it sends no audio.
    ChannelsOut(u8),
}

impl FormatError {
    /// A short stable name for logs and counters.
    pub const fn name(&self) -> &'static str {
        match self {
            FormatError::Rate(_) => "rate",
            FormatError::Bits(_) => "bits",
            FormatError::Frames(_) => "frames",
            FormatError::ChannelsIn(_) => "channels-in",
            FormatError::ChannelsOut(_) => "channels-out",
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FormatError::Rate(0) => {
                f.write_str("an undefined sample rate; the hub runs at 48000 Hz")
            }
            FormatError::Rate(hz) => write!(
                f,
                "a sample rate of {hz} Hz; the hub runs at {RATE_HZ} Hz only (start jackd \
                 with -r {RATE_HZ})"
            ),
            FormatError::Bits(b) => write!(f, "{b}-bit samples; the hub takes 16 or 24 (-b)"),
            FormatError::Frames(n) => write!(
                f,
                "{n} frames per packet; the hub takes 32, 64, 128 or 256 (jackd -p)"
            ),
            FormatError::ChannelsIn(c) => {
                write!(f, "{c} channels to receive; the hub sends 1 or 2 (-n)")
            }
            FormatError::ChannelsOut(CHANNELS_NONE) => {
                f.write_str("no channels to send; the hub takes 1 or 2 (-n)")
            }
            FormatError::ChannelsOut(c) => {
                write!(f, "{c} channels to send; the hub takes 1 or 2 (-n)")
            }
        }
    }
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// From another address than the client's.
    WrongAddress,
    /// Not a JackTrip packet the hub reads (truncated, bad lengths, bad header values).
    Malformed,
    /// A valid packet in another format than the one the client started with.
    WrongFormat,
    /// The session has already ended.
    Ended,
}

impl DropReason {
    /// A short stable name for logs and counters.
    pub const fn name(&self) -> &'static str {
        match self {
            DropReason::WrongAddress => "wrong-address",
            DropReason::Malformed => "malformed",
            DropReason::WrongFormat => "wrong-format",
            DropReason::Ended => "ended",
        }
    }
}

/// What to do with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// One JackTrip packet (header and audio, no trailer) for the media room.
    Audio(&'a [u8]),
    /// The client said goodbye; the session has ended.
    Exit,
    /// The client's format is not one the hub takes; the session has ended. Log the reason.
    Refused(FormatError),
    /// Counted and dropped.
    Dropped(DropReason),
}

/// Datagrams seen by one session, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Datagrams handed to [`Session::on_datagram`].
    pub received: u64,
    /// Packets returned as [`Verdict::Audio`].
    pub audio: u64,
    pub wrong_address: u64,
    pub malformed: u64,
    pub wrong_format: u64,
    /// Datagrams after the end.
    pub after_end: u64,
}

/// The UDP side of one admitted JackTrip client. See the module docs.
#[derive(Debug, Clone)]
pub struct Session {
    client_ip: IpAddr,
    peer: Option<SocketAddr>,
    wire: Option<WireFormat>,
    last_us: u64,
    ended: bool,
    counters: SessionCounters,
}

impl Session {
    /// A session for the client admitted from `client_ip`, at `now_us`. Allocates nothing.
    pub fn new(client_ip: IpAddr, now_us: u64) -> Self {
        Self {
            client_ip: client_ip.to_canonical(),
            peer: None,
            wire: None,
            last_us: now_us,
            ended: false,
            counters: SessionCounters::default(),
        }
    }

    /// The client's source address, once its first packet came.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// The client's format, once its first packet came.
    pub fn format(&self) -> Option<JackTripFormat> {
        self.wire.map(|w| w.format)
    }

    /// When the session times out unless a datagram comes first (µs).
    pub fn deadline(&self) -> u64 {
        self.last_us.saturating_add(TIMEOUT_US)
    }

    /// Whether the session has ended (exit packet, refused format or timeout).
    pub fn ended(&self) -> bool {
        self.ended
    }

    pub fn counters(&self) -> SessionCounters {
        self.counters
    }

    /// Ends the session if its deadline has passed at `now_us`; says whether it has ended.
    pub fn poll_timeout(&mut self, now_us: u64) -> bool {
        if now_us >= self.deadline() {
            self.ended = true;
        }
        self.ended
    }

    /// One datagram that arrived from `from` at `now_us`. Real-time safe: no allocation.
    pub fn on_datagram<'a>(
        &mut self,
        from: SocketAddr,
        bytes: &'a [u8],
        now_us: u64,
    ) -> Verdict<'a> {
        self.counters.received += 1;
        if self.ended {
            self.counters.after_end += 1;
            return Verdict::Dropped(DropReason::Ended);
        }
        let from = SocketAddr::new(from.ip().to_canonical(), from.port());
        let ours = match self.peer {
            Some(peer) => peer == from,
            None => from.ip() == self.client_ip,
        };
        if !ours {
            self.counters.wrong_address += 1;
            return Verdict::Dropped(DropReason::WrongAddress);
        }
        if bytes.len() == CONTROL_PACKET_LEN && bytes.iter().all(|&b| b == 0xFF) {
            self.last_us = now_us;
            self.peer = Some(from);
            self.ended = true;
            return Verdict::Exit;
        }
        let Some(header) = bytes.first_chunk::<HEADER_LEN>() else {
            return self.malformed();
        };
        let wire = match WireFormat::read(header) {
            Ok(wire) => wire,
            // Only a well-formed packet refuses the client: garbage is merely dropped.
            Err(e) if self.wire.is_none() && is_whole_packet(header, bytes.len()) => {
                self.ended = true;
                return Verdict::Refused(e);
            }
            Err(_) if self.wire.is_none() => return self.malformed(),
            Err(_) => {
                self.counters.wrong_format += 1;
                return Verdict::Dropped(DropReason::WrongFormat);
            }
        };
        if self.wire.is_some_and(|fixed| fixed != wire) {
            self.counters.wrong_format += 1;
            return Verdict::Dropped(DropReason::WrongFormat);
        }
        // One packet, or several of the same length (redundancy): the first is the newest.
        let one = wire.packet_len();
        if bytes.len() < one || bytes.len() % one != 0 {
            return self.malformed();
        }
        let first = &bytes[..one];
        match packet::parse(first) {
            Ok(p) if p.ext.is_none() => {}
            _ => return self.malformed(),
        }
        if self.wire.is_none() {
            self.wire = Some(wire);
            self.peer = Some(from);
        }
        self.last_us = now_us;
        self.counters.audio += 1;
        Verdict::Audio(first)
    }

    fn malformed(&mut self) -> Verdict<'static> {
        self.counters.malformed += 1;
        Verdict::Dropped(DropReason::Malformed)
    }
}

/// Whether `len` bytes are one or more whole packets of the size `h` announces, whatever its
/// values (bit depths 8 to 32, any frames and channels).
fn is_whole_packet(h: &[u8; HEADER_LEN], len: usize) -> bool {
    let frames = usize::from(u16::from_le_bytes([h[10], h[11]]));
    let channels = usize::from(if h[15] == 0 { h[14] } else { h[15] });
    let bytes = match h[13] {
        8 | 16 | 24 | 32 => usize::from(h[13] / 8),
        _ => return false,
    };
    let one = HEADER_LEN + frames * channels * bytes;
    len % one == 0
}

/// The format fields of one header, checked against what the hub takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WireFormat {
    format: JackTripFormat,
    /// Channels in the payload (byte 15 by JackTrip's rule).
    channels_out: u8,
}

impl WireFormat {
    fn read(h: &[u8; HEADER_LEN]) -> Result<Self, FormatError> {
        match SampleRate::from_code(h[12]) {
            Some(SampleRate::Hz48000) => {}
            Some(other) => return Err(FormatError::Rate(other.hz())),
            None => return Err(FormatError::Rate(0)),
        }
        let bits = h[13];
        if bits != 16 && bits != 24 {
            return Err(FormatError::Bits(bits));
        }
        let frames = u16::from_le_bytes([h[10], h[11]]);
        if !(frames.is_power_of_two() && (32..=256).contains(&frames)) {
            return Err(FormatError::Frames(frames));
        }
        let channels = h[14];
        if !(1..=2).contains(&channels) {
            return Err(FormatError::ChannelsIn(channels));
        }
        let channels_out = if h[15] == 0 { channels } else { h[15] };
        if !(1..=2).contains(&channels_out) {
            return Err(FormatError::ChannelsOut(channels_out));
        }
        Ok(Self {
            format: JackTripFormat {
                frames,
                bits,
                channels,
            },
            channels_out,
        })
    }

    /// Header plus audio, in bytes.
    fn packet_len(&self) -> usize {
        HEADER_LEN
            + usize::from(self.format.frames)
                * usize::from(self.channels_out)
                * usize::from(self.format.bits / 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    /// A JackTrip packet: header fields as given, then `payload_channels × frames` samples of
    /// `bits / 8` bytes, each byte 0x11.
    fn pkt(seq: u16, frames: u16, rate: u8, bits: u8, ch_in: u8, ch_out: u8) -> Vec<u8> {
        let mut b = 1_700_000_000_000_000u64.to_le_bytes().to_vec();
        b.extend_from_slice(&seq.to_le_bytes());
        b.extend_from_slice(&frames.to_le_bytes());
        b.extend_from_slice(&[rate, bits, ch_in, ch_out]);
        let sent = if ch_out == 0 { ch_in } else { ch_out };
        let audio = usize::from(frames) * usize::from(sent) * usize::from(bits / 8);
        b.resize(HEADER_LEN + audio, 0x11);
        b
    }

    fn stereo16(seq: u16) -> Vec<u8> {
        pkt(seq, 128, 3, 16, 2, 0)
    }

    #[test]
    fn first_packet_fixes_address_and_format() {
        let mut s = Session::new("192.0.2.7".parse().unwrap(), 5 * S);
        assert_eq!((s.peer_addr(), s.format()), (None, None));
        assert_eq!(s.deadline(), 15 * S);
        let p = stereo16(0);
        assert_eq!(p.len(), 528);
        // The NAT gave it another port than the hello said: any port from its IP will do.
        assert_eq!(
            s.on_datagram(addr("192.0.2.7:40001"), &p, 6 * S),
            Verdict::Audio(&p)
        );
        assert_eq!(s.peer_addr(), Some(addr("192.0.2.7:40001")));
        assert_eq!(
            s.format(),
            Some(JackTripFormat {
                frames: 128,
                bits: 16,
                channels: 2
            })
        );
        assert_eq!(s.deadline(), 16 * S);
        // Now the port is fixed too; another port or IP is dropped and does not extend the life.
        let q = stereo16(1);
        for other in ["192.0.2.7:40002", "192.0.2.8:40001"] {
            let v = s.on_datagram(addr(other), &q, 7 * S);
            assert_eq!(v, Verdict::Dropped(DropReason::WrongAddress), "{other}");
        }
        assert_eq!(s.deadline(), 16 * S);
        assert_eq!(
            s.on_datagram(addr("192.0.2.7:40001"), &q, 8 * S),
            Verdict::Audio(&q)
        );
        let c = s.counters();
        assert_eq!((c.received, c.audio, c.wrong_address), (4, 2, 2));
    }

    #[test]
    fn datagrams_from_other_ips_before_the_first_are_dropped() {
        let mut s = Session::new("::ffff:10.0.0.1".parse().unwrap(), 0);
        let p = stereo16(0);
        let v = s.on_datagram(addr("10.0.0.2:4464"), &p, 1);
        assert_eq!(v, Verdict::Dropped(DropReason::WrongAddress));
        assert_eq!(s.peer_addr(), None);
        // An IPv4-mapped address is the same client.
        assert_eq!(
            s.on_datagram(addr("[::ffff:10.0.0.1]:4464"), &p, 2),
            Verdict::Audio(&p)
        );
        assert_eq!(s.peer_addr(), Some(addr("10.0.0.1:4464")));
    }

    #[test]
    fn formats_the_hub_takes() {
        let grid = [
            (32, 16, 1, 0, 1),
            (64, 24, 2, 0, 2),
            (256, 16, 1, 2, 1),
            (128, 24, 2, 1, 2),
        ];
        for (frames, bits, ch_in, ch_out, channels) in grid {
            let mut s = Session::new("10.0.0.1".parse().unwrap(), 0);
            let p = pkt(9, frames, 3, bits, ch_in, ch_out);
            assert_eq!(
                s.on_datagram(addr("10.0.0.1:1"), &p, 1),
                Verdict::Audio(&p[..])
            );
            let want = JackTripFormat {
                frames,
                bits,
                channels,
            };
            assert_eq!(s.format(), Some(want));
        }
    }

    #[test]
    fn other_formats_are_refused_and_end_the_session() {
        let ch = |ch_in, ch_out| pkt(0, 128, 3, 16, ch_in, ch_out);
        let cases = [
            (pkt(0, 128, 2, 16, 2, 0), FormatError::Rate(44_100), "rate"),
            (pkt(0, 128, 5, 16, 2, 0), FormatError::Rate(96_000), "rate"),
            (pkt(0, 128, 7, 16, 2, 0), FormatError::Rate(0), "rate"),
            (pkt(0, 128, 3, 32, 2, 0), FormatError::Bits(32), "bits"),
            (pkt(0, 128, 3, 8, 2, 0), FormatError::Bits(8), "bits"),
            (pkt(0, 512, 3, 16, 2, 0), FormatError::Frames(512), "frames"),
            (pkt(0, 16, 3, 16, 2, 0), FormatError::Frames(16), "frames"),
            (pkt(0, 96, 3, 16, 2, 0), FormatError::Frames(96), "frames"),
            (ch(3, 0), FormatError::ChannelsIn(3), "channels-in"),
            (ch(0, 1), FormatError::ChannelsIn(0), "channels-in"),
            (ch(2, 255), FormatError::ChannelsOut(255), "channels-out"),
            (ch(2, 4), FormatError::ChannelsOut(4), "channels-out"),
        ];
        for (p, want, name) in cases {
            let mut s = Session::new("10.0.0.1".parse().unwrap(), 0);
            assert_eq!(
                s.on_datagram(addr("10.0.0.1:1"), &p, 1),
                Verdict::Refused(want)
            );
            assert_eq!(want.name(), name);
            assert!(!want.to_string().is_empty());
            assert!(s.ended());
            let ok = stereo16(1);
            let v = s.on_datagram(addr("10.0.0.1:1"), &ok, 2);
            assert_eq!(v, Verdict::Dropped(DropReason::Ended));
        }
        assert!(FormatError::Rate(44_100).to_string().contains("44100 Hz"));
    }

    #[test]
    fn a_started_session_drops_changes_of_format_and_malformed_packets() {
        let mut s = Session::new("10.0.0.1".parse().unwrap(), 0);
        let from = addr("10.0.0.1:9");
        let p = stereo16(0);
        assert_eq!(s.on_datagram(from, &p, 1), Verdict::Audio(&p));
        let changed = [
            pkt(1, 64, 3, 16, 2, 0),
            pkt(1, 128, 3, 24, 2, 0),
            pkt(1, 128, 3, 16, 1, 0),
            pkt(1, 128, 3, 16, 2, 1),
            pkt(1, 128, 2, 16, 2, 0),
        ];
        for c in &changed {
            let v = s.on_datagram(from, c, 2);
            assert_eq!(v, Verdict::Dropped(DropReason::WrongFormat));
        }
        let mut trailer = stereo16(2);
        trailer.extend_from_slice(&[b'T', b'U', 1, 0, 5, 0, 0, 0]);
        let malformed = [
            Vec::new(),
            vec![0; 15],
            p[..527].to_vec(),
            [p.clone(), vec![0]].concat(),
            [p.clone(), p[..100].to_vec()].concat(),
            trailer,
        ];
        for m in &malformed {
            let v = s.on_datagram(from, m, 3);
            assert_eq!(
                v,
                Verdict::Dropped(DropReason::Malformed),
                "{} bytes",
                m.len()
            );
        }
        // Almost an exit packet: a header whose fields the hub does not take.
        for m in [vec![0xFF; 62], vec![0xFF; 64]] {
            let v = s.on_datagram(from, &m, 3);
            assert_eq!(
                v,
                Verdict::Dropped(DropReason::WrongFormat),
                "{} bytes",
                m.len()
            );
        }
        let c = s.counters();
        assert_eq!((c.audio, c.wrong_format, c.malformed), (1, 7, 6));
        assert!(!s.ended());
        assert_eq!(s.deadline(), 1 + TIMEOUT_US);
    }

    #[test]
    fn garbage_before_the_first_packet_is_dropped_not_refused() {
        let mut s = Session::new("10.0.0.1".parse().unwrap(), 0);
        let from = addr("10.0.0.1:9");
        let mut short_44k = pkt(0, 128, 2, 16, 2, 0);
        short_44k.pop();
        for g in [vec![0x5a; 300], short_44k, vec![0; 16], vec![0xFF; 64]] {
            let v = s.on_datagram(from, &g, 1);
            assert_eq!(
                v,
                Verdict::Dropped(DropReason::Malformed),
                "{} bytes",
                g.len()
            );
        }
        assert!(!s.ended());
        let p = stereo16(0);
        assert_eq!(s.on_datagram(from, &p, 2), Verdict::Audio(&p));
        assert_eq!(s.counters().malformed, 4);
    }

    #[test]
    fn redundant_datagrams_yield_the_newest_packet() {
        let mut s = Session::new("10.0.0.1".parse().unwrap(), 0);
        let newest = stereo16(7);
        let both = [newest.clone(), stereo16(6)].concat();
        let v = s.on_datagram(addr("10.0.0.1:9"), &both, 1);
        assert_eq!(v, Verdict::Audio(&newest[..]));
    }

    #[test]
    fn exit_packet_ends_it() {
        let mut s = Session::new("10.0.0.1".parse().unwrap(), 0);
        let from = addr("10.0.0.1:9");
        assert_eq!(
            s.on_datagram(from, &stereo16(0), 1),
            Verdict::Audio(&stereo16(0)[..])
        );
        let exit = [0xFF; 63];
        let v = s.on_datagram(addr("10.0.0.2:9"), &exit, 2);
        assert_eq!(v, Verdict::Dropped(DropReason::WrongAddress));
        assert!(!s.ended());
        assert_eq!(s.on_datagram(from, &exit, 3), Verdict::Exit);
        assert!(s.ended());
        // JackTrip sends it twice.
        assert_eq!(
            s.on_datagram(from, &exit, 4),
            Verdict::Dropped(DropReason::Ended)
        );
        assert_eq!(s.counters().after_end, 1);
    }

    #[test]
    fn ten_silent_seconds_end_it() {
        let mut s = Session::new("10.0.0.1".parse().unwrap(), 100);
        assert!(!s.poll_timeout(100 + TIMEOUT_US - 1));
        assert!(s.poll_timeout(100 + TIMEOUT_US));
        let mut s = Session::new("10.0.0.1".parse().unwrap(), 0);
        let p = stereo16(0);
        s.on_datagram(addr("10.0.0.1:9"), &p, 4 * S);
        assert!(!s.poll_timeout(13 * S));
        assert_eq!(s.deadline(), 14 * S);
        assert!(s.poll_timeout(14 * S));
        assert_eq!(
            s.on_datagram(addr("10.0.0.1:9"), &p, 14 * S),
            Verdict::Dropped(DropReason::Ended)
        );
    }
}
