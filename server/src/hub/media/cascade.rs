//! A room's share on a hub that is not the room's home: the partial mixes it exchanges with the
//! home hub over one JackTrip link (see `hub::cascade` for who links to whom).
//!
//! At each tick the room sends the home hub the raw sum of its own players' voices (every live
//! source at unit gain, not panned, not limited: [`MixMinus::room_sum`]) as one JackTrip packet
//! in [`LINK_FORMAT`]. The home hub mixes that link as one more JackTrip client, through its
//! centred default strip like any voice, and sends back its mix minus the link: every voice of
//! the room that is not here, already at the room's default level. That mix goes through a
//! jitter buffer of its own ([`Peer`], as any source) and is added at unit gain to every local
//! listener's mix before its master ([`MixMinus::render_plus`]), so a voice on another hub
//! reaches a listener here at the level of a local one.
//!
//! The partial mixes are 16-bit PCM on the wire, like any JackTrip client's: the sum sent is
//! clamped at full scale (a hub's players together louder than 0 dBFS clip on the link, where a
//! listener's limiter would have caught them), and each hop adds 16-bit rounding (about
//! −101 dBFS of noise per channel).
//!
//! [`MixMinus::room_sum`]: tutti_core::mix::MixMinus::room_sum
//! [`MixMinus::render_plus`]: tutti_core::mix::MixMinus::render_plus
//!
//! Nothing here allocates after [`Cascade::new`].

use tutti_core::engine::{EngineConfig, Peer, QUANTUM};
use tutti_core::packet::{encode, Header, SampleFormat, SampleRate, MAX_PACKET_LEN};

use super::ingest::Ingest;
use super::{ClientCounters, ClientId, ClientKind, JackTripFormat, Received};

/// The link's JackTrip format both ways: one 128-frame stereo 16-bit packet per tick.
pub const LINK_FORMAT: JackTripFormat = JackTripFormat {
    frames: QUANTUM as u16,
    bits: 16,
    channels: 2,
};

/// The target [`super::MediaRoom::poll`] sends the link's packets to (no client has it).
pub const CASCADE: ClientId = ClientId(u32::MAX);

/// The room's link to its home hub. See the module docs.
pub struct Cascade {
    ingest: Ingest,
    peer: Box<Peer>,
    heard: bool,
    block: [[f32; QUANTUM]; 2],
    seq: u16,
    sent: u64,
    packet: Box<[u8]>,
}

impl Cascade {
    /// A link with an empty jitter buffer. Allocates.
    pub fn new(now_us: u64) -> Cascade {
        Cascade {
            ingest: Ingest::new(1, ClientKind::JackTrip(LINK_FORMAT), now_us),
            peer: Peer::new(&EngineConfig::default()),
            heard: false,
            block: [[0.0; QUANTUM]; 2],
            seq: 0,
            sent: 0,
            packet: vec![0; MAX_PACKET_LEN].into_boxed_slice(),
        }
    }

    /// One packet of the home hub's mix; `frame` is the jitter buffers' clock, `None` when the
    /// room's ticks are not running.
    pub fn receive(&mut self, bytes: &[u8], now_us: u64, frame: Option<u64>) -> Received {
        let pkt = match self.ingest.check(bytes, now_us) {
            Ok(pkt) => pkt,
            Err(outcome) => return outcome,
        };
        if let Some(frame) = frame {
            self.peer.push(&pkt, frame);
            self.heard = true;
        }
        Received::Accepted
    }

    /// This tick's block of the home hub's mix, once it has sent any.
    pub fn pull(&mut self, frame: u64) -> Option<(&[f32; QUANTUM], &[f32; QUANTUM])> {
        if !self.heard {
            return None;
        }
        let [l, r] = &mut self.block;
        self.peer.pull(frame, l, r);
        let [l, r] = &self.block;
        Some((l, r))
    }

    /// The block's raw sum as one JackTrip packet for the home hub, stamped `now_us`.
    pub fn encode_sum(&mut self, l: &[f32; QUANTUM], r: &[f32; QUANTUM], now_us: u64) -> &[u8] {
        let header = Header {
            timestamp: now_us,
            seq: self.seq,
            frames: LINK_FORMAT.frames,
            rate: SampleRate::Hz48000,
            format: SampleFormat::Pcm16,
            channels_in: LINK_FORMAT.channels,
            channels_out: 0,
        };
        let planar: [&[f32]; 2] = [l, r];
        match encode(&header, None, &planar, &mut self.packet) {
            Ok(n) => {
                self.seq = self.seq.wrapping_add(1);
                self.sent += 1;
                &self.packet[..n]
            }
            Err(_) => &[],
        }
    }

    /// What came from the home hub (by outcome) and how many packets went to it.
    pub fn counters(&self) -> (ClientCounters, u64) {
        let mut c = self.ingest.counters;
        let jitter = self.peer.jitter_counters();
        c.late = jitter.late;
        c.concealed = jitter.concealed;
        (c, self.sent)
    }
}
