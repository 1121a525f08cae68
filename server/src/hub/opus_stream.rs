//! The hub's libopus ([`super::opus`]) as the core takes a codec ([`tutti_core::codec`]): a
//! decoder per received stream for a [`tutti_core::engine::Peer`]'s jitter buffer, and an
//! encoder per sent stream. Both allocate their scratch once; a frame allocates nothing.

use opusic_sys as sys;
use tutti_core::codec::{self, CodecError};

use super::opus::{packet_frames, Decoder, Encoder, Input, OpusError};

/// The longest frame a stream uses here (5 ms), stereo interleaved: the adapters' scratch.
const STREAM_SCRATCH: usize = 240 * 2;

/// One received stream's decoder, as the core's jitter buffer takes it
/// ([`tutti_core::codec::Decoder`]): stereo output (a mono stream decodes to both channels),
/// and a frame must be exactly the length asked for. Decoding allocates nothing.
pub struct StreamDecoder {
    dec: Decoder,
    pcm: Box<[f32; STREAM_SCRATCH]>,
}

impl StreamDecoder {
    pub fn new() -> Result<StreamDecoder, OpusError> {
        Ok(StreamDecoder {
            dec: Decoder::new(2)?,
            pcm: Box::new([0.0; STREAM_SCRATCH]),
        })
    }
}

impl codec::Decoder for StreamDecoder {
    fn decode(
        &mut self,
        packet: Option<&[u8]>,
        left: &mut [f32],
        right: &mut [f32],
    ) -> Result<(), CodecError> {
        let dec = &mut self.dec;
        codec::decode_through(&mut self.pcm[..], left, right, |pcm| {
            if let Some(p) = packet {
                // A frame of another length than the stream's is refused before it touches
                // the decoder's state.
                if packet_frames(p).map_err(|e| CodecError(e.code))? != pcm.len() / 2 {
                    return Err(CodecError(sys::OPUS_INVALID_PACKET));
                }
            }
            let input = packet.map_or(Input::Lost, Input::Packet);
            dec.decode(input, pcm).map_err(|e| CodecError(e.code))
        })
    }

    fn reset(&mut self) {
        self.dec.reset();
    }
}

/// What a [`Watched`] decoder was asked.
pub enum Call<'a> {
    /// A frame decoded (`packet`) or concealed (`None`), what the decoder answered, and the
    /// left channel it put out.
    Decode {
        packet: Option<&'a [u8]>,
        result: Result<(), CodecError>,
        left: &'a [f32],
    },
    /// The stream started anew.
    Reset,
}

/// A [`StreamDecoder`] whose every call is shown to `watch` (tests follow what a jitter buffer
/// asks of its decoder with it). Whatever `watch` does is on the caller's thread and path.
pub struct Watched<W: FnMut(Call<'_>) + Send> {
    pub dec: StreamDecoder,
    pub watch: W,
}

impl<W: FnMut(Call<'_>) + Send> codec::Decoder for Watched<W> {
    fn decode(
        &mut self,
        packet: Option<&[u8]>,
        left: &mut [f32],
        right: &mut [f32],
    ) -> Result<(), CodecError> {
        let result = self.dec.decode(packet, left, right);
        (self.watch)(Call::Decode {
            packet,
            result,
            left,
        });
        result
    }

    fn reset(&mut self) {
        (self.watch)(Call::Reset);
        self.dec.reset();
    }
}

/// One sent stream's encoder, as the core's capture takes it ([`tutti_core::codec::Encoder`]).
/// Encoding allocates nothing.
pub struct StreamEncoder {
    enc: Encoder,
    channels: u8,
    pcm: Box<[f32; STREAM_SCRATCH]>,
}

impl StreamEncoder {
    /// An encoder of `channels` at `bitrate` bit/s.
    pub fn new(channels: u8, bitrate: i32) -> Result<StreamEncoder, OpusError> {
        Ok(StreamEncoder {
            enc: Encoder::new(channels, bitrate, 0)?,
            channels,
            pcm: Box::new([0.0; STREAM_SCRATCH]),
        })
    }

    pub fn set_bitrate(&mut self, bitrate: i32) -> Result<(), OpusError> {
        self.enc.set_bitrate(bitrate)
    }
}

impl codec::Encoder for StreamEncoder {
    fn encode(
        &mut self,
        left: &[f32],
        right: Option<&[f32]>,
        out: &mut [u8],
    ) -> Result<usize, CodecError> {
        let frames = left.len();
        let code = |e: OpusError| CodecError(e.code);
        match (self.channels, right) {
            (1, None) => self.enc.encode(left, out).map_err(code),
            (2, Some(right)) if right.len() >= frames => {
                let pcm = self
                    .pcm
                    .get_mut(..frames * 2)
                    .ok_or(CodecError(sys::OPUS_BAD_ARG))?;
                codec::interleave(left, right, pcm);
                self.enc.encode(pcm, out).map_err(code)
            }
            _ => Err(CodecError(sys::OPUS_BAD_ARG)),
        }
    }

    /// See [`Encoder::reset`].
    fn reset(&mut self) {
        self.enc.reset();
    }

    /// See [`Encoder::set_mono`].
    fn set_mono(&mut self, mono: bool) -> Result<(), CodecError> {
        self.enc.set_mono(mono).map_err(|e| CodecError(e.code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tutti_core::engine::{EngineConfig, Peer, QUANTUM};
    use tutti_core::packet::{
        encode_opus, encode_opus_redundant, parse, Header, SampleFormat, SampleRate, HEADER_LEN,
    };

    const RATE: f64 = 48_000.0;

    /// Amplitude of `freq` in `x`, Hann-windowed single-bin DFT.
    fn amplitude_at(x: &[f32], freq: f64) -> f64 {
        let (mut re, mut im, mut w) = (0.0, 0.0, 0.0);
        for (i, &v) in x.iter().enumerate() {
            let h = 0.5 - 0.5 * (std::f64::consts::TAU * i as f64 / x.len() as f64).cos();
            let ph = std::f64::consts::TAU * freq * i as f64 / RATE;
            re += h * f64::from(v) * ph.cos();
            im -= h * f64::from(v) * ph.sin();
            w += h;
        }
        2.0 * re.hypot(im) / w
    }

    /// Frame `k` of a mono 440 Hz sine at 0.4 as an Opus packet of `frames` samples.
    fn opus_packet(enc: &mut StreamEncoder, k: u64, frames: usize, out: &mut [u8]) -> usize {
        let pcm: Vec<f32> = (0..frames)
            .map(|i| {
                let t = (k as usize * frames + i) as f64 / RATE;
                (0.4 * (std::f64::consts::TAU * 440.0 * t).sin()) as f32
            })
            .collect();
        let n = codec::Encoder::encode(enc, &pcm, None, &mut out[HEADER_LEN..]).unwrap();
        let header = Header {
            timestamp: 0,
            seq: k as u16,
            frames: frames as u16,
            rate: SampleRate::Hz48000,
            format: SampleFormat::Pcm16,
            channels_in: 1,
            channels_out: 0,
        };
        encode_opus(&header, 0, n, out).unwrap()
    }

    /// Plays a peer's Opus stream of `seconds` in real time (a packet is pushed when its last
    /// sample would have been captured), dropping the frames `lose` picks; returns the output's
    /// left channel and the peer.
    fn play(frames: usize, seconds: f64, lose: impl Fn(u64) -> bool) -> (Vec<f32>, Box<Peer>) {
        let decoder = Box::new(StreamDecoder::new().unwrap());
        play_as(frames, seconds, false, decoder, lose)
    }

    /// [`play`] with `decoder`, each packet carrying the previous frame's copy when `copies`.
    fn play_as(
        frames: usize,
        seconds: f64,
        copies: bool,
        decoder: Box<dyn codec::Decoder>,
        lose: impl Fn(u64) -> bool,
    ) -> (Vec<f32>, Box<Peer>) {
        let mut enc = StreamEncoder::new(1, 128_000).unwrap();
        let mut peer = Peer::new(&EngineConfig::default());
        peer.set_decoder(decoder);
        let quanta = (seconds * RATE) as usize / QUANTUM;
        let mut out = Vec::with_capacity(quanta * QUANTUM);
        let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
        let mut buf = [0u8; 1500];
        let mut k = 0u64;
        let mut prev: Vec<u8> = Vec::new();
        for q in 0..quanta {
            let now = (q * QUANTUM) as u64;
            while (k + 1) * frames as u64 <= now {
                let mut n = opus_packet(&mut enc, k, frames, &mut buf);
                if copies {
                    // The frame's Opus bytes, then the previous frame's, then the trailer.
                    let header = parse(&buf[..n]).unwrap().header;
                    let frame = buf[HEADER_LEN..n - 8].to_vec();
                    buf[HEADER_LEN + frame.len()..][..prev.len()].copy_from_slice(&prev);
                    n = encode_opus_redundant(&header, 0, frame.len(), prev.len(), &mut buf)
                        .unwrap();
                    prev = frame;
                }
                if !lose(k) {
                    let pkt = parse(&buf[..n]).unwrap();
                    assert!(pkt.is_opus());
                    peer.push(&pkt, now);
                }
                k += 1;
            }
            peer.pull(now, &mut l, &mut r);
            out.extend_from_slice(&l);
        }
        (out, peer)
    }

    #[test]
    fn an_opus_stream_plays_through_a_peer_at_its_frequency_and_level() {
        for frames in [120usize, 240] {
            let (out, peer) = play(frames, 3.0, |_| false);
            let steady = &out[out.len() - 48_000..];
            let db = 20.0 * (amplitude_at(steady, 440.0) / 0.4).log10();
            let stray = amplitude_at(steady, 660.0).max(amplitude_at(steady, 880.0));
            let c = peer.jitter_counters();
            println!("{frames}-sample frames: 440 Hz at {db:+.2} dB, stray {stray:.1e}, {c:?}");
            assert!(db.abs() < 0.5, "{frames}: level {db:.2} dB");
            assert!(stray < 1e-3, "{frames}: stray {stray}");
            assert_eq!((c.lost, c.concealed, c.undecodable), (0, 0, 0));
            assert!(c.received > (2.9 * RATE) as u64 / frames as u64);
        }
    }

    #[test]
    fn lost_opus_frames_are_concealed_by_the_decoder_and_counted() {
        // One frame in 25 lost (4 %), never two in a row.
        let (out, peer) = play(240, 4.0, |k| k % 25 == 7);
        let c = peer.jitter_counters();
        let steady = &out[out.len() - 96_000..];
        let db = 20.0 * (amplitude_at(steady, 440.0) / 0.4).log10();
        println!("4 % loss: 440 Hz at {db:+.2} dB, {c:?}");
        assert!(c.lost > 25, "{c:?}");
        assert_eq!(c.concealed, c.lost + c.late, "{c:?}");
        assert_eq!(c.undecodable, 0);
        // Opus's concealment of a 5 ms frame keeps the tone: within 1 dB over the last 2 s.
        assert!(db.abs() < 1.0, "level {db:.2} dB");
        // And never a click: no step between samples beyond a sine's own at this level
        // (0.4 × 2π × 440 / 48000 = 0.023) with a margin for the codec.
        let worst = steady
            .windows(2)
            .map(|w| (w[1] - w[0]).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 0.06, "largest step {worst}");
    }

    #[test]
    fn a_lost_frame_plays_from_the_copy_the_next_packet_carries() {
        // libopus's in-band FEC does nothing for the low-delay frames (see `super::super::opus`'s
        // test of it); each packet carries the previous frame's bytes instead. One frame in 25
        // lost, never two in a row: each is played from the next packet's copy, so the decoder
        // gets the very frames of the lossless stream, in order, and puts out the same samples
        // bit for bit; without the copies the same losses are concealed, and its output
        // differs for those frames.
        for frames in [120usize, 240] {
            let run = |copies: bool, lose: fn(u64) -> bool| {
                // Every frame the decoder puts out (left channel), in order.
                let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
                let frames_out = out.clone();
                let decoder = Box::new(Watched {
                    dec: StreamDecoder::new().unwrap(),
                    watch: move |call: Call<'_>| {
                        if let Call::Decode { left, .. } = call {
                            frames_out.lock().unwrap().extend_from_slice(left);
                        }
                    },
                });
                let (_, peer) = play_as(frames, 3.0, copies, decoder, lose);
                let decoded = out.lock().unwrap().clone();
                (decoded, peer.jitter_counters())
            };
            let (clean, _) = run(true, |_| false);
            let (copied, c) = run(true, |k| k % 25 == 7);
            let (concealed, p) = run(false, |k| k % 25 == 7);
            // Frames (of `frames` samples) whose samples differ from the lossless decode.
            let differ = |x: &[f32]| {
                x.chunks(frames)
                    .zip(clean.chunks(frames))
                    .filter(|(a, b)| a.iter().zip(*b).any(|(u, v)| u.to_bits() != v.to_bits()))
                    .count()
            };
            let decoded = copied.len().min(clean.len()) / frames;
            println!(
                "{frames}-sample frames: {} lost; with copies {} recovered, {} concealed, {} of {decoded} \
                 decoded frames differ from the lossless decode; without, {} concealed, {} differ",
                c.lost,
                c.recovered,
                c.concealed,
                differ(&copied),
                p.concealed,
                differ(&concealed)
            );
            assert!(c.lost > 10, "{c:?}");
            assert_eq!((c.recovered, c.concealed), (c.lost, 0), "{c:?}");
            assert!(decoded * frames > 2 * 48_000);
            assert_eq!(differ(&copied), 0);
            assert_eq!(p.concealed, p.lost);
            assert!(differ(&concealed) as u64 >= p.concealed);
        }
    }

    #[test]
    fn a_garbage_opus_frame_is_counted_and_concealed_and_a_peer_without_decoder_refuses_opus() {
        let mut enc = StreamEncoder::new(1, 128_000).unwrap();
        let mut buf = [0u8; 1500];
        let n = opus_packet(&mut enc, 0, 240, &mut buf);
        // Without a decoder: refused, counted.
        let mut plain = Peer::new(&EngineConfig::default());
        let pkt = parse(&buf[..n]).unwrap();
        assert_eq!(
            plain.push(&pkt, 0),
            tutti_core::jitter::PushOutcome::Rejected
        );
        assert_eq!(plain.jitter_counters().received, 0);

        // With one: a frame whose bytes are garbage (framing valid) plays as concealment.
        let mut peer = Peer::new(&EngineConfig::default());
        peer.set_decoder(Box::new(StreamDecoder::new().unwrap()));
        let (mut l, mut r) = ([0.0f32; QUANTUM], [0.0f32; QUANTUM]);
        for k in 0..400u64 {
            let n = opus_packet(&mut enc, k, 240, &mut buf);
            if k == 200 {
                // A 120-sample frame's table of contents in a 240-sample stream, then noise.
                buf[HEADER_LEN] = 0x00;
                for b in &mut buf[HEADER_LEN + 1..n - 8] {
                    *b = 0xA5;
                }
            }
            let pkt = parse(&buf[..n]).unwrap();
            peer.push(&pkt, k * 240);
            peer.pull(k * 240, &mut l, &mut r);
            peer.pull(k * 240 + 128, &mut l, &mut r);
            assert!(l.iter().chain(&r).all(|x| x.is_finite() && x.abs() <= 1.0));
        }
        let c = peer.jitter_counters();
        assert_eq!(c.undecodable, 1, "{c:?}");
    }
}
