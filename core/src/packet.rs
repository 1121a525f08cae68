//! Wire format: JackTrip's 16-byte default header, planar samples, and Tutti's versioned extension.
//!
//! A packet carries one block of audio from one sender. Its first 16 bytes are exactly JackTrip's
//! default header and its samples are laid out exactly as JackTrip puts them on the network, so a
//! bridge to native JackTrip forwards audio without touching it. What Tutti needs beyond that
//! (a stream id through the hub, a codec id) rides in an optional 8-byte trailer after the audio,
//! so the header stays JackTrip's. Codec 0 is PCM as the header says; codec 1 is Opus (see
//! "Opus packets" below), whose packets always carry the trailer.
//!
//! # Byte layout
//!
//! All multi-byte fields are little-endian. `N` = frames per block, `C` = payload channels,
//! `B` = bytes per sample (2, 3 or 4), `A = N × C × B`.
//!
//! ```text
//! offset  size  field                      value
//! ------  ----  -------------------------  ------------------------------------------------------
//!      0     8  timestamp                  u64 LE (JackTrip writes microseconds since 1970-01-01)
//!      8     2  sequence number            u16 LE, +1 per block, wraps at 65536
//!     10     2  frames per block (N)       u16 LE; PCM: 32, 64, 128, 256; Opus: 120, 240
//!     12     1  sample-rate code           0=22050 1=32000 2=44100 3=48000 4=88200 5=96000
//!                                          6=192000 Hz (7 = JackTrip's "undefined": rejected)
//!     13     1  bit resolution             16 = int16, 24 = 24-bit int, 32 = float32
//!     14     1  channels in                channels the SENDER plays from the network
//!     15     1  channels out               channels the SENDER transmits = payload width, except
//!                                          0 = "same as byte 14" and 255 = "sends no audio"
//!     16     A  audio, planar              channel 0: samples 0..N, then channel 1: samples 0..N;
//!                                          sample (frame n, channel c) at 16 + (c·N + n)·B
//!   16+A     8  trailer (optional, v1):
//!                +0  1  magic 'T'          0x54
//!                +1  1  magic 'U'          0x55
//!                +2  1  version            1
//!                +3  1  codec              0 = PCM exactly as the header says; 1 = Opus;
//!                                          others reserved
//!                +4  2  stream id          u16 LE (hub stream; 0 when unused)
//!                +6  2  reserved           u16, must be 0 (Opus: the redundant bytes, below)
//! ```
//!
//! A PCM packet is exactly `16 + A` bytes (no trailer) or `16 + A + 8` bytes (trailer); anything
//! else is an error. The trailer is always the final 8 bytes, so a codec with a variable payload
//! (Opus) still finds it at `len - 8`.
//!
//! # Opus packets
//!
//! Codec 1 carries one Opus packet (low-delay mode) of one frame of 2.5 ms or 5 ms at 48 kHz:
//!
//! ```text
//! offset  size  field                      value
//! ------  ----  -------------------------  ------------------------------------------------------
//!      0    16  JackTrip header            as above, with: frames N = 120 or 240 (samples per
//!                                          channel of the Opus frame); rate code 3 (48000 Hz);
//!                                          bit resolution 16; channels by the byte-15 rule, 1-2
//!     16     P  Opus bytes                 one Opus packet, 1 ≤ P ≤ N × C × 2
//!   16+P     R  redundant Opus bytes       the previous frame's Opus packet (sequence number
//!                                          one less), 0 ≤ R ≤ N × C × 2; R = 0: none
//! 16+P+R     8  trailer (mandatory)        'T' 'U' 1, codec 1, stream id, R (u16 LE, in the
//!                                          reserved field)
//! ```
//!
//! `P = len - 16 - R - 8`. The redundant copy is the sender's own loss protection: libopus's
//! in-band FEC exists only in its SILK modes, and the low-delay frames of 2.5 and 5 ms are CELT
//! only. A receiver that lost frame `n` and gets frame `n + 1` in time plays the copy: the very
//! bytes of frame `n`, decoded in order, so nothing is concealed. It costs the Opus bytes once
//! more, not the per-message overhead. Nothing reads the bit resolution of an Opus packet; it is fixed at 16 so
//! the header stays a valid JackTrip header. The bound on `P` is the PCM16 block of the same
//! frames, so Opus never costs more than PCM16: libopus's highest rate, 510 kbit/s, is 160 bytes
//! per 2.5 ms and 319 per 5 ms, under the mono bounds of 240 and 480 (an encoder given the bound
//! as its output size stays within it). The frames field tells the two kinds apart before the
//! trailer is read: 120 and 240 are never PCM block sizes and 32/64/128/256 never Opus frame
//! sizes, so a PCM packet is never taken for Opus nor the reverse. A trailer with codec 0 on 120 or 240 frames
//! is a PCM packet with a block size PCM does not have ([`PacketError::BadFrames`]); codec 1 on
//! a PCM block size is [`PacketError::UnsupportedCodec`].
//!
//! # Facts taken from JackTrip's source (and what Tutti decides)
//!
//! - Header: `DefaultHeaderStruct` in `PacketHeader.h` is the struct above, copied into the packet
//!   with `memcpy` in host byte order (little-endian on every platform JackTrip ships for); its
//!   fields pack to 16 bytes with no padding.
//! - Rate codes: `AudioInterface::samplingRateT` (`SR22 .. SR192`, then `UNDEF` = 7).
//! - Bit resolution: the header byte is `audioBitResolutionT × 8` (`JackTrip.h`), i.e. 8/16/24/32
//!   bits. Tutti rejects 8-bit.
//! - Channels: `DefaultHeader::fillHeaderCommonFromAudio` (`PacketHeader.cpp`) writes the sender's
//!   output-channel count to byte 14, and to byte 15 writes 0 when its input and output counts are
//!   equal, 255 when it has no inputs, else its input count. Receivers size the payload by
//!   `JackTrip::getPeerNumOutgoingChannels` (`JackTrip.h`): byte 15, or byte 14 when byte 15 is 0.
//!   Tutti applies the same rule ([`Header::payload_channels`]) and accepts 1 or 2 channels;
//!   255 (no audio) is [`PacketError::BadChannels`].
//! - Layout: JackTrip keeps audio interleaved internally but converts to non-interleaved before
//!   sending and back after receiving (`UdpDataProtocol.cpp`, `webrtc/WebRtcDataProtocol.cpp`), so
//!   the wire payload is planar, channel after channel.
//! - 16-bit: `round(x · 32767)` clamped to ±32767 on send, `/ 32768` on receive
//!   (`AudioInterface::fromSampleToBitConversion` / `fromBitToSampleConversion`). Tutti does the
//!   same, with NaN encoded as 0.
//! - 24-bit: JackTrip stores `floor(x · 32768)` as an int16 in the first two bytes and the
//!   remaining fraction `· 256` as an unsigned byte in the third. Seen as one 24-bit integer `v`
//!   at full scale 2^23, the bytes are `[(v >> 8) & 0xFF, (v >> 16) & 0xFF, v & 0xFF]` — not the
//!   usual low-byte-first packing. Receive is `v / 8388608`, exactly JackTrip's
//!   `(int16 + byte / 256) / 32768`. Tutti encodes `v = round(x · 8388607)` after clamping to
//!   [-1, 1] (the same symmetric convention as 16-bit; JackTrip floors and does not clamp).
//! - Float32: JackTrip copies the float's bytes unchanged. Tutti encodes NaN as 0 and clamps to
//!   [-1, 1]; on decode NaN and ±Inf become 0 and finite values are clamped to [-1, 1], so no
//!   packet can put a non-finite or out-of-range value into the mix.
//! - Exit: a JackTrip sender that stops sends a 63-byte datagram of 0xFF (twice); receivers treat
//!   any 63-byte datagram as control (`mControlPacketSize`). [`parse`] reports the all-0xFF one as
//!   [`PacketError::ExitSignal`]; no audio packet can be 63 bytes long.
//! - Not supported: JackTrip's UDP redundancy (several packets back to back in one datagram) is
//!   rejected as [`PacketError::TrailingBytes`]; block sizes other than 32/64/128/256 (and
//!   120/240 for Opus) are rejected. JackTrip itself sends no Opus: Opus packets are Tutti's.
//!
//! # Real-time safety
//!
//! [`parse`], [`encode`], [`encode_opus`] and [`Packet::decode_stereo`] never allocate, lock or
//! panic; they are meant for the render and capture paths. [`parse`] borrows the payload from the
//! input bytes. Everything else here is `const` data or plain accessors.
//!
//! # The TypeScript side
//!
//! `app/src/audio/packet.ts` implements the same rules (same check order, same rounding, same
//! error codes as [`PacketError::code`]). The golden vectors in `tests/vectors/packets.json`
//! (whole packets as hex, their header fields, encoder input and decoded samples, and malformed
//! packets with the error each must give) are checked by the tests in `packet/tests.rs` and
//! by `tests/unit/packet.test.ts`. `core/fuzz` holds the cargo-fuzz target for [`parse`].

use core::fmt;

/// Bytes in JackTrip's default header.
pub const HEADER_LEN: usize = 16;
/// Largest block, in frames, Tutti accepts.
pub const MAX_FRAMES: usize = 256;
/// Largest channel count Tutti accepts.
pub const MAX_CHANNELS: usize = 2;
/// Bytes in Tutti's extension trailer (version 1).
pub const EXT_LEN: usize = 8;
/// Largest packet Tutti builds or accepts: header + 256 frames x 2 channels x 4 bytes + extension.
pub const MAX_PACKET_LEN: usize = HEADER_LEN + MAX_FRAMES * MAX_CHANNELS * 4 + EXT_LEN;
/// Block sizes Tutti sends and accepts.
pub const BLOCK_SIZES: [u16; 4] = [32, 64, 128, 256];
/// Length of JackTrip's control datagram; all bytes 0xFF means "the sender stopped".
pub const CONTROL_PACKET_LEN: usize = 63;
/// First two bytes of the trailer: `'T' 'U'`.
pub const EXT_MAGIC: [u8; 2] = *b"TU";
/// The trailer version this module writes and reads.
pub const EXT_VERSION: u8 = 1;
/// Codec id: PCM exactly as the header's bit resolution says.
pub const CODEC_PCM: u8 = 0;
/// Codec id: one Opus packet (see "Opus packets" in the module docs).
pub const CODEC_OPUS: u8 = 1;
/// Samples per channel of one Opus frame at 48 kHz (2.5 ms and 5 ms): an Opus packet's frames.
pub const OPUS_FRAMES: [u16; 2] = [120, 240];
/// Shortest Opus packet: header, one Opus byte, trailer.
const OPUS_MIN_LEN: usize = HEADER_LEN + 1 + EXT_LEN;
/// JackTrip's byte-15 value for "this sender transmits no audio".
pub const CHANNELS_NONE: u8 = 0xFF;

/// JackTrip's sample-rate codes (`samplingRateT`): the header's byte is the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SampleRate {
    Hz22050 = 0,
    Hz32000 = 1,
    Hz44100 = 2,
    Hz48000 = 3,
    Hz88200 = 4,
    Hz96000 = 5,
    Hz192000 = 6,
}

impl SampleRate {
    /// The rate in Hz.
    pub const fn hz(self) -> u32 {
        match self {
            SampleRate::Hz22050 => 22_050,
            SampleRate::Hz32000 => 32_000,
            SampleRate::Hz44100 => 44_100,
            SampleRate::Hz48000 => 48_000,
            SampleRate::Hz88200 => 88_200,
            SampleRate::Hz96000 => 96_000,
            SampleRate::Hz192000 => 192_000,
        }
    }

    /// The header byte for this rate.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The rate for a header byte; `None` for 7 (JackTrip's "undefined") and above.
    pub const fn from_code(code: u8) -> Option<SampleRate> {
        match code {
            0 => Some(SampleRate::Hz22050),
            1 => Some(SampleRate::Hz32000),
            2 => Some(SampleRate::Hz44100),
            3 => Some(SampleRate::Hz48000),
            4 => Some(SampleRate::Hz88200),
            5 => Some(SampleRate::Hz96000),
            6 => Some(SampleRate::Hz192000),
            _ => None,
        }
    }
}

/// Sample encoding; the header's bit-resolution byte is `bits()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleFormat {
    /// int16 little-endian; encode `round(x * 32767)` clamped, decode `/ 32768`.
    Pcm16,
    /// 24-bit integer as JackTrip lays it out (see the module docs); encode
    /// `round(x * 8388607)` clamped, decode `/ 8388608`.
    Pcm24,
    /// IEEE float32 little-endian; NaN/Inf decode to 0, values are clamped to [-1, 1].
    Float32,
}

impl SampleFormat {
    /// The header's bit-resolution byte.
    pub const fn bits(self) -> u8 {
        match self {
            SampleFormat::Pcm16 => 16,
            SampleFormat::Pcm24 => 24,
            SampleFormat::Float32 => 32,
        }
    }
    /// Bytes one sample takes on the wire.
    pub const fn bytes(self) -> usize {
        match self {
            SampleFormat::Pcm16 => 2,
            SampleFormat::Pcm24 => 3,
            SampleFormat::Float32 => 4,
        }
    }
    /// The format for a bit-resolution byte; `None` for anything but 16, 24 and 32.
    pub const fn from_bits(bits: u8) -> Option<SampleFormat> {
        match bits {
            16 => Some(SampleFormat::Pcm16),
            24 => Some(SampleFormat::Pcm24),
            32 => Some(SampleFormat::Float32),
            _ => None,
        }
    }
}

/// JackTrip's default header, field for field (byte 14 and 15 raw, as on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Sender's time stamp (JackTrip: microseconds since the Unix epoch); opaque to the core.
    pub timestamp: u64,
    /// Sequence number, +1 per block, wrapping.
    pub seq: u16,
    /// Frames per block.
    pub frames: u16,
    /// Sender's sample rate.
    pub rate: SampleRate,
    /// Sample encoding.
    pub format: SampleFormat,
    /// Byte 14: channels the sender plays from the network.
    pub channels_in: u8,
    /// Byte 15: channels the sender transmits; 0 = same as `channels_in`, 255 = none.
    pub channels_out: u8,
}

impl Header {
    /// Channel count of the payload by JackTrip's rule: byte 15, or byte 14 when byte 15 is 0.
    /// Not validated: may be 0, 255 or anything else the bytes say.
    pub const fn payload_channels(&self) -> u8 {
        if self.channels_out == 0 {
            self.channels_in
        } else {
            self.channels_out
        }
    }
}

/// Tutti's version-1 trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extension {
    /// Stream id (through the hub); 0 when unused.
    pub stream_id: u16,
    /// Codec id: [`CODEC_PCM`] or [`CODEC_OPUS`].
    pub codec: u8,
}

/// A parsed packet borrowing its payload from the received bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The JackTrip header.
    pub header: Header,
    /// Payload channel count (1 or 2), from [`Header::payload_channels`].
    pub channels: u8,
    /// The trailer, when present (always, with codec [`CODEC_OPUS`], for an Opus packet).
    pub ext: Option<Extension>,
    /// Audio bytes only (no header, no trailer): PCM, `frames × channels × format.bytes()`;
    /// Opus, the Opus packet (1 to `frames × channels × 2` bytes).
    pub payload: &'a [u8],
    /// Opus only: the previous frame's Opus packet, carried again (empty when none; always
    /// empty for PCM).
    pub redundant: &'a [u8],
}

/// Why bytes are not a packet Tutti accepts, or why a packet could not be encoded.
///
/// [`PacketError::code`] gives a stable small number per kind, shared with the TypeScript side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketError {
    /// Shorter than the header, or than the header plus the audio it announces.
    Truncated { len: usize, needed: usize },
    /// Longer than header + audio, but not by exactly one trailer.
    TrailingBytes { len: usize, expected: usize },
    /// Longer than [`MAX_PACKET_LEN`].
    Oversized { len: usize },
    /// Sample-rate code 7 (undefined) or above.
    BadRate(u8),
    /// Bit resolution other than 16, 24, 32.
    BadBits(u8),
    /// Payload channel count (after JackTrip's byte-15 rule) not 1 or 2.
    BadChannels(u8),
    /// Frames per block not one of [`BLOCK_SIZES`].
    BadFrames(u16),
    /// Trailer present but its magic is not `'T' 'U'` or its reserved field is not 0.
    BadExtension,
    /// Trailer version this module does not read.
    UnsupportedVersion(u8),
    /// Trailer codec id this module does not read: 2 and above, or [`CODEC_OPUS`] on a PCM
    /// block size (and, for [`encode`], any but [`CODEC_PCM`]).
    UnsupportedCodec(u8),
    /// JackTrip's 63-byte all-0xFF "sender stopped" datagram; not audio.
    ExitSignal,
    /// [`encode`]: the output buffer cannot hold the packet.
    BufferTooSmall { needed: usize, available: usize },
    /// [`encode`]: the number of planar slices differs from the header's payload channels.
    ChannelMismatch { header: u8, planar: usize },
    /// [`encode`]: a planar slice holds fewer samples than the header's frames.
    ShortInput {
        channel: usize,
        len: usize,
        frames: usize,
    },
    /// Opus payload longer than `frames × channels × 2` bytes ([`parse`], [`encode_opus`]), or
    /// empty ([`encode_opus`]; [`parse`] reports an empty payload as
    /// [`PacketError::Truncated`]).
    BadOpusPayload { len: usize },
}

impl PacketError {
    /// Stable number for this kind of error (1..=15), the same as in `app/src/audio/packet.ts`.
    pub const fn code(&self) -> u8 {
        match self {
            PacketError::Truncated { .. } => 1,
            PacketError::TrailingBytes { .. } => 2,
            PacketError::Oversized { .. } => 3,
            PacketError::BadRate(_) => 4,
            PacketError::BadBits(_) => 5,
            PacketError::BadChannels(_) => 6,
            PacketError::BadFrames(_) => 7,
            PacketError::BadExtension => 8,
            PacketError::UnsupportedVersion(_) => 9,
            PacketError::UnsupportedCodec(_) => 10,
            PacketError::ExitSignal => 11,
            PacketError::BufferTooSmall { .. } => 12,
            PacketError::ChannelMismatch { .. } => 13,
            PacketError::ShortInput { .. } => 14,
            PacketError::BadOpusPayload { .. } => 15,
        }
    }

    /// The variant's name, as the golden vectors spell it.
    pub const fn name(&self) -> &'static str {
        match self {
            PacketError::Truncated { .. } => "Truncated",
            PacketError::TrailingBytes { .. } => "TrailingBytes",
            PacketError::Oversized { .. } => "Oversized",
            PacketError::BadRate(_) => "BadRate",
            PacketError::BadBits(_) => "BadBits",
            PacketError::BadChannels(_) => "BadChannels",
            PacketError::BadFrames(_) => "BadFrames",
            PacketError::BadExtension => "BadExtension",
            PacketError::UnsupportedVersion(_) => "UnsupportedVersion",
            PacketError::UnsupportedCodec(_) => "UnsupportedCodec",
            PacketError::ExitSignal => "ExitSignal",
            PacketError::BufferTooSmall { .. } => "BufferTooSmall",
            PacketError::ChannelMismatch { .. } => "ChannelMismatch",
            PacketError::ShortInput { .. } => "ShortInput",
            PacketError::BadOpusPayload { .. } => "BadOpusPayload",
        }
    }
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PacketError::Truncated { len, needed } => {
                write!(f, "packet truncated: {len} bytes, needs {needed}")
            }
            PacketError::TrailingBytes { len, expected } => write!(
                f,
                "packet has trailing bytes: {len} bytes, expected {expected} or {}",
                expected + EXT_LEN
            ),
            PacketError::Oversized { len } => {
                write!(f, "packet too large: {len} bytes, at most {MAX_PACKET_LEN}")
            }
            PacketError::BadRate(code) => write!(f, "unknown sample-rate code {code}"),
            PacketError::BadBits(bits) => write!(f, "unsupported bit resolution {bits}"),
            PacketError::BadChannels(n) => write!(f, "unsupported payload channel count {n}"),
            PacketError::BadFrames(n) => write!(f, "unsupported block size {n} frames"),
            PacketError::BadExtension => write!(f, "malformed Tutti trailer"),
            PacketError::UnsupportedVersion(v) => write!(f, "unsupported trailer version {v}"),
            PacketError::UnsupportedCodec(c) => write!(f, "unsupported codec id {c}"),
            PacketError::ExitSignal => write!(f, "JackTrip exit signal (sender stopped)"),
            PacketError::BufferTooSmall { needed, available } => {
                write!(
                    f,
                    "output buffer too small: {available} bytes, needs {needed}"
                )
            }
            PacketError::ChannelMismatch { header, planar } => write!(
                f,
                "header announces {header} channels but {planar} planar slices were given"
            ),
            PacketError::ShortInput {
                channel,
                len,
                frames,
            } => write!(
                f,
                "input channel {channel} has {len} samples, the block needs {frames}"
            ),
            PacketError::BadOpusPayload { len } => write!(
                f,
                "Opus payload of {len} bytes: must be 1 to frames × channels × 2"
            ),
        }
    }
}

impl std::error::Error for PacketError {}

/// Bytes of audio for a block; callers have validated channels (≤ 2) and frames (≤ 256).
const fn audio_len(frames: u16, channels: u8, format: SampleFormat) -> usize {
    frames as usize * channels as usize * format.bytes()
}

const fn is_block_size(frames: u16) -> bool {
    matches!(frames, 32 | 64 | 128 | 256)
}

const fn is_opus_frames(frames: u16) -> bool {
    matches!(frames, 120 | 240)
}

/// Largest Opus payload for a frame: the PCM16 block of the same frames. Callers have validated
/// channels (≤ 2) and frames (≤ 240).
const fn opus_max_payload(frames: u16, channels: u8) -> usize {
    frames as usize * channels as usize * 2
}

const fn valid_channels(channels: u8) -> bool {
    channels >= 1 && channels as usize <= MAX_CHANNELS
}

/// Parses one packet, PCM or Opus. Zero-copy: the payload borrows from `bytes`. Real-time safe.
///
/// Checks, in this order (the first failure is returned): JackTrip exit signal, length ≤
/// [`MAX_PACKET_LEN`], length ≥ 16, rate code (a known one), bit resolution (16, 24 or 32),
/// payload channels, frames. Then, for PCM frames (32/64/128/256): length ≥ header + audio, then
/// exact length (no trailer, or exactly one valid trailer: magic, version, codec 0, reserved).
/// For Opus frames (120/240): length ≥ 16 + 1 + 8 ([`PacketError::Truncated`]); the last 8 bytes
/// a valid trailer (magic, version, codec, reserved; codec 0 is [`PacketError::BadFrames`],
/// 2 and above [`PacketError::UnsupportedCodec`]); rate 48 kHz ([`PacketError::BadRate`]); bit
/// resolution 16 ([`PacketError::BadBits`]); Opus bytes at most `frames × channels × 2`
/// ([`PacketError::BadOpusPayload`]). The Opus-only rate and resolution checks come after the
/// trailer because until its codec is read the packet is not known to be Opus.
pub fn parse(bytes: &[u8]) -> Result<Packet<'_>, PacketError> {
    let len = bytes.len();
    if len == CONTROL_PACKET_LEN && bytes.iter().all(|&b| b == 0xFF) {
        return Err(PacketError::ExitSignal);
    }
    if len > MAX_PACKET_LEN {
        return Err(PacketError::Oversized { len });
    }
    let Some(h) = bytes.first_chunk::<HEADER_LEN>() else {
        return Err(PacketError::Truncated {
            len,
            needed: HEADER_LEN,
        });
    };
    let rate = SampleRate::from_code(h[12]).ok_or(PacketError::BadRate(h[12]))?;
    let format = SampleFormat::from_bits(h[13]).ok_or(PacketError::BadBits(h[13]))?;
    let header = Header {
        timestamp: u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]),
        seq: u16::from_le_bytes([h[8], h[9]]),
        frames: u16::from_le_bytes([h[10], h[11]]),
        rate,
        format,
        channels_in: h[14],
        channels_out: h[15],
    };
    let channels = header.payload_channels();
    if !valid_channels(channels) {
        return Err(PacketError::BadChannels(channels));
    }
    if is_opus_frames(header.frames) {
        return parse_opus(bytes, header, channels);
    }
    if !is_block_size(header.frames) {
        return Err(PacketError::BadFrames(header.frames));
    }
    let end = HEADER_LEN + audio_len(header.frames, channels, format);
    if len < end {
        return Err(PacketError::Truncated { len, needed: end });
    }
    let (head, tail) = bytes.split_at(end);
    let payload = &head[HEADER_LEN..];
    let ext = if tail.is_empty() {
        None
    } else if let Ok(t) = <&[u8; EXT_LEN]>::try_from(tail) {
        Some(parse_trailer(t, CODEC_PCM)?.0)
    } else {
        return Err(PacketError::TrailingBytes { len, expected: end });
    };
    Ok(Packet {
        header,
        channels,
        ext,
        payload,
        redundant: &[],
    })
}

/// The rest of [`parse`] for a packet whose frames are an Opus frame size (120 or 240); the
/// header's rate, bits and channels have passed the checks every packet gets.
fn parse_opus(bytes: &[u8], header: Header, channels: u8) -> Result<Packet<'_>, PacketError> {
    let len = bytes.len();
    if len < OPUS_MIN_LEN {
        return Err(PacketError::Truncated {
            len,
            needed: OPUS_MIN_LEN,
        });
    }
    let Some((head, t)) = bytes.split_last_chunk::<EXT_LEN>() else {
        return Err(PacketError::Truncated {
            len,
            needed: OPUS_MIN_LEN,
        }); // unreachable: len ≥ OPUS_MIN_LEN > EXT_LEN
    };
    let (ext, redundant_len) = parse_trailer(t, CODEC_OPUS).map_err(|e| match e {
        // A PCM trailer: PCM has no block of 120 or 240 frames.
        PacketError::UnsupportedCodec(CODEC_PCM) => PacketError::BadFrames(header.frames),
        e => e,
    })?;
    if header.rate != SampleRate::Hz48000 {
        return Err(PacketError::BadRate(header.rate.code()));
    }
    if header.format != SampleFormat::Pcm16 {
        return Err(PacketError::BadBits(header.format.bits()));
    }
    let opus = &head[HEADER_LEN..];
    let max = opus_max_payload(header.frames, channels);
    let redundant_len = usize::from(redundant_len);
    // The copy leaves at least one byte of the frame itself, and both are within the bound.
    if redundant_len > max || redundant_len >= opus.len() {
        return Err(PacketError::BadOpusPayload { len: redundant_len });
    }
    let (payload, redundant) = opus.split_at(opus.len() - redundant_len);
    if payload.len() > max {
        return Err(PacketError::BadOpusPayload { len: payload.len() });
    }
    Ok(Packet {
        header,
        channels,
        ext: Some(ext),
        payload,
        redundant,
    })
}

/// The trailer's fields, checked in this order: magic, version, codec (must be `codec`),
/// reserved (0 for PCM; for Opus the redundant bytes' length, returned beside the trailer).
fn parse_trailer(t: &[u8; EXT_LEN], codec: u8) -> Result<(Extension, u16), PacketError> {
    if [t[0], t[1]] != EXT_MAGIC {
        return Err(PacketError::BadExtension);
    }
    if t[2] != EXT_VERSION {
        return Err(PacketError::UnsupportedVersion(t[2]));
    }
    if t[3] != codec {
        return Err(PacketError::UnsupportedCodec(t[3]));
    }
    let reserved = u16::from_le_bytes([t[6], t[7]]);
    if codec != CODEC_OPUS && reserved != 0 {
        return Err(PacketError::BadExtension);
    }
    let ext = Extension {
        stream_id: u16::from_le_bytes([t[4], t[5]]),
        codec: t[3],
    };
    Ok((ext, reserved))
}

/// Encodes one block into `out` and returns the packet's length. Real-time safe.
///
/// `planar` holds one slice per payload channel ([`Header::payload_channels`], 1 or 2), each
/// with at least `header.frames` samples (extra samples are ignored). Samples are clamped to
/// [-1, 1] and NaN is written as 0. `ext`, when given, must use [`CODEC_PCM`] (Opus packets are
/// built by [`encode_opus`]). Every check runs before the first byte is written, so on error
/// `out` is untouched.
pub fn encode(
    header: &Header,
    ext: Option<&Extension>,
    planar: &[&[f32]],
    out: &mut [u8],
) -> Result<usize, PacketError> {
    if !is_block_size(header.frames) {
        return Err(PacketError::BadFrames(header.frames));
    }
    let channels = header.payload_channels();
    if !valid_channels(channels) {
        return Err(PacketError::BadChannels(channels));
    }
    if planar.len() != channels as usize {
        return Err(PacketError::ChannelMismatch {
            header: channels,
            planar: planar.len(),
        });
    }
    let frames = header.frames as usize;
    for (channel, samples) in planar.iter().enumerate() {
        if samples.len() < frames {
            return Err(PacketError::ShortInput {
                channel,
                len: samples.len(),
                frames,
            });
        }
    }
    if let Some(e) = ext {
        if e.codec != CODEC_PCM {
            return Err(PacketError::UnsupportedCodec(e.codec));
        }
    }
    let audio = audio_len(header.frames, channels, header.format);
    let total = HEADER_LEN + audio + if ext.is_some() { EXT_LEN } else { 0 };
    if out.len() < total {
        return Err(PacketError::BufferTooSmall {
            needed: total,
            available: out.len(),
        });
    }
    let out = &mut out[..total];
    let (head, rest) = out.split_at_mut(HEADER_LEN);
    write_header(header, head);
    let (audio_bytes, trailer) = rest.split_at_mut(audio);
    let per_channel = frames * header.format.bytes();
    for (samples, dst) in planar.iter().zip(audio_bytes.chunks_exact_mut(per_channel)) {
        let src = &samples[..frames];
        match header.format {
            SampleFormat::Pcm16 => encode_pcm16(src, dst),
            SampleFormat::Pcm24 => encode_pcm24(src, dst),
            SampleFormat::Float32 => encode_f32(src, dst),
        }
    }
    if let Some(e) = ext {
        write_trailer(e, trailer);
    }
    Ok(total)
}

/// Frames an Opus packet whose `payload_len` Opus bytes the caller has already written at
/// `out[16..16 + payload_len]`: writes the header before them and the trailer (codec
/// [`CODEC_OPUS`], `stream_id`) after them, and returns the packet's length,
/// `16 + payload_len + 8`. Zero-copy and real-time safe.
///
/// Checks, in this order: frames 120 or 240 ([`PacketError::BadFrames`]), rate 48 kHz
/// ([`PacketError::BadRate`]), format [`SampleFormat::Pcm16`] ([`PacketError::BadBits`]),
/// payload channels 1 or 2 ([`PacketError::BadChannels`]), `payload_len` from 1 to
/// `frames × channels × 2` ([`PacketError::BadOpusPayload`]), `out` long enough
/// ([`PacketError::BufferTooSmall`]). Every check runs before the first byte is written, so on
/// error `out` is untouched.
pub fn encode_opus(
    header: &Header,
    stream_id: u16,
    payload_len: usize,
    out: &mut [u8],
) -> Result<usize, PacketError> {
    encode_opus_redundant(header, stream_id, payload_len, 0, out)
}

/// [`encode_opus`] for a packet that carries the previous frame again: the caller has written
/// the frame's `payload_len` Opus bytes at `out[16..]` and the previous frame's `redundant_len`
/// right after them. The packet is `16 + payload_len + redundant_len + 8` bytes. The same checks,
/// and `redundant_len` at most `frames × channels × 2` ([`PacketError::BadOpusPayload`]).
pub fn encode_opus_redundant(
    header: &Header,
    stream_id: u16,
    payload_len: usize,
    redundant_len: usize,
    out: &mut [u8],
) -> Result<usize, PacketError> {
    if !is_opus_frames(header.frames) {
        return Err(PacketError::BadFrames(header.frames));
    }
    if header.rate != SampleRate::Hz48000 {
        return Err(PacketError::BadRate(header.rate.code()));
    }
    if header.format != SampleFormat::Pcm16 {
        return Err(PacketError::BadBits(header.format.bits()));
    }
    let channels = header.payload_channels();
    if !valid_channels(channels) {
        return Err(PacketError::BadChannels(channels));
    }
    let max = opus_max_payload(header.frames, channels);
    if payload_len == 0 || payload_len > max {
        return Err(PacketError::BadOpusPayload { len: payload_len });
    }
    if redundant_len > max {
        return Err(PacketError::BadOpusPayload { len: redundant_len });
    }
    let opus_len = payload_len + redundant_len;
    let total = HEADER_LEN + opus_len + EXT_LEN;
    if out.len() < total {
        return Err(PacketError::BufferTooSmall {
            needed: total,
            available: out.len(),
        });
    }
    let out = &mut out[..total];
    let (head, rest) = out.split_at_mut(HEADER_LEN);
    write_header(header, head);
    let ext = Extension {
        stream_id,
        codec: CODEC_OPUS,
    };
    let trailer = &mut rest[opus_len..];
    write_trailer(&ext, trailer);
    trailer[6..8].copy_from_slice(&(redundant_len as u16).to_le_bytes());
    Ok(total)
}

/// Writes the 16 header bytes into `head` (exactly [`HEADER_LEN`] long).
fn write_header(header: &Header, head: &mut [u8]) {
    head[0..8].copy_from_slice(&header.timestamp.to_le_bytes());
    head[8..10].copy_from_slice(&header.seq.to_le_bytes());
    head[10..12].copy_from_slice(&header.frames.to_le_bytes());
    head[12] = header.rate.code();
    head[13] = header.format.bits();
    head[14] = header.channels_in;
    head[15] = header.channels_out;
}

/// Writes the 8 trailer bytes into `trailer` (exactly [`EXT_LEN`] long).
fn write_trailer(e: &Extension, trailer: &mut [u8]) {
    trailer[0] = EXT_MAGIC[0];
    trailer[1] = EXT_MAGIC[1];
    trailer[2] = EXT_VERSION;
    trailer[3] = e.codec;
    trailer[4..6].copy_from_slice(&e.stream_id.to_le_bytes());
    trailer[6] = 0;
    trailer[7] = 0;
}

impl Packet<'_> {
    /// Frames per block: for Opus, samples per channel of the Opus frame (120 or 240).
    pub fn frames(&self) -> usize {
        self.header.frames as usize
    }

    /// Whether this is an Opus packet (trailer codec [`CODEC_OPUS`]): `payload` is then one
    /// Opus packet for the codec to decode, not PCM.
    pub fn is_opus(&self) -> bool {
        matches!(self.ext, Some(e) if e.codec == CODEC_OPUS)
    }

    /// Decodes PCM into two planar f32 slices of at least frames() each; mono is copied to both.
    /// Returns the frames written to each slice.
    ///
    /// Output is always finite and within [-1, 1]. If a slice is shorter than `frames()`, only
    /// as many frames as both slices hold are written. An Opus packet ([`Packet::is_opus`]) is
    /// decoded by the Opus codec, not here: for it nothing is written and 0 is returned.
    /// Real-time safe; the 16-bit path is written so that it vectorizes (wasm simd128, SSE2).
    pub fn decode_stereo(&self, left: &mut [f32], right: &mut [f32]) -> usize {
        if self.is_opus() {
            return 0;
        }
        let n = self.frames().min(left.len()).min(right.len());
        let per_channel = self.frames() * self.header.format.bytes();
        let (first, second) = self.payload.split_at(per_channel.min(self.payload.len()));
        let left = &mut left[..n];
        let right = &mut right[..n];
        decode_channel(self.header.format, first, left);
        if self.channels >= 2 {
            decode_channel(self.header.format, second, right);
        } else {
            right.copy_from_slice(left);
        }
        n
    }
}

fn decode_channel(format: SampleFormat, src: &[u8], dst: &mut [f32]) {
    match format {
        SampleFormat::Pcm16 => decode_pcm16(src, dst),
        SampleFormat::Pcm24 => decode_pcm24(src, dst),
        SampleFormat::Float32 => decode_f32(src, dst),
    }
}

/// int16 LE → f32 in [-1, 1), eight samples per step.
///
/// Written so that LLVM emits one 16-byte load per eight samples, widens to i32 lanes, converts
/// and scales (wasm simd128: `v128.load`, `i32x4.extend_*_i16x8_u`, `i32x4.shl`,
/// `f32x4.convert_i32x4_s`, `f32x4.mul`). Two details matter: each sample is read as a whole
/// `[u8; 2]` (byte-wise indexing makes the vectorizer gather and shuffle bytes), and the value is
/// placed in the top half of an i32 before converting (an i16 → f32 conversion is scalarized on
/// wasm32). `(s << 16) as f32 · 2^-31` equals `s / 32768` exactly: both are exact in f32.
/// Measured in Node 20 (V8, simd128) for a stereo 128-frame block: ~30 ns (~45 ns with parse),
/// against ~120 ns for the plain `from_le_bytes([b[0], b[1]]) as f32 / 32768` loop.
fn decode_pcm16(src: &[u8], dst: &mut [f32]) {
    const SCALE: f32 = 1.0 / 2_147_483_648.0;
    #[inline(always)]
    fn sample(c: &[u8]) -> f32 {
        let Ok(c) = <[u8; 2]>::try_from(c) else {
            return 0.0; // unreachable: `c` comes from chunks_exact(2)
        };
        ((i32::from(i16::from_le_bytes(c)) << 16) as f32) * SCALE
    }
    let n = dst.len().min(src.len() / 2);
    let (src, dst) = (&src[..n * 2], &mut dst[..n]);
    let mut out = dst.chunks_exact_mut(8);
    let mut inp = src.chunks_exact(16);
    for (o, b) in (&mut out).zip(&mut inp) {
        for (y, c) in o.iter_mut().zip(b.chunks_exact(2)) {
            *y = sample(c);
        }
    }
    for (y, c) in out
        .into_remainder()
        .iter_mut()
        .zip(inp.remainder().chunks_exact(2))
    {
        *y = sample(c);
    }
}

/// JackTrip's 24-bit layout → f32 in [-1, 1).
///
/// For sample bytes `[b0, b1, b2]` (v = b1:b0:b2, see the module docs), the little-endian i32 of
/// `[0, b2, b0, b1]` is `v << 8`; it and the scale 2^-31 are exact in f32, so the result is
/// exactly `v / 8388608`. Each sample is read as one 4-byte little-endian word `w` starting at
/// its first byte (`v << 8 = (w << 16) | ((w >> 8) & 0xFF00)`), which LLVM turns into a single
/// load; the last sample, whose word would run past the payload, is read byte by byte. Measured
/// in Node 20 (V8, simd128), parse + decode of a stereo 128-frame block: ~100 ns, against
/// ~450 ns with three byte loads per sample. (A `v128` byte shuffle would be faster still, but
/// LLVM does not form it from portable code; 24-bit is not Tutti's default format.)
fn decode_pcm24(src: &[u8], dst: &mut [f32]) {
    const SCALE: f32 = 1.0 / 2_147_483_648.0;
    let n = dst.len().min(src.len() / 3);
    let (src, dst) = (&src[..3 * n], &mut dst[..n]);
    let Some((last, head)) = dst.split_last_mut() else {
        return;
    };
    for (y, w) in head.iter_mut().zip(src.windows(4).step_by(3)) {
        let Ok(w) = <[u8; 4]>::try_from(w) else {
            return; // unreachable: `windows(4)` yields 4 bytes
        };
        let w = u32::from_le_bytes(w);
        *y = ((((w << 16) | ((w >> 8) & 0xFF00)) as i32) as f32) * SCALE;
    }
    if let [b0, b1, b2] = src[3 * (n - 1)..] {
        *last = (i32::from_le_bytes([0, b2, b0, b1]) as f32) * SCALE;
    }
}

/// float32 LE → f32; NaN/Inf → 0, clamped to [-1, 1].
fn decode_f32(src: &[u8], dst: &mut [f32]) {
    for (y, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
        let x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        *y = if x.is_finite() {
            x.clamp(-1.0, 1.0)
        } else {
            0.0
        };
    }
}

fn encode_pcm16(src: &[f32], dst: &mut [u8]) {
    for (x, d) in src.iter().zip(dst.chunks_exact_mut(2)) {
        // NaN stays NaN through clamp, and rounds to 0.
        let v = round_half_away_f32(x.clamp(-1.0, 1.0) * 32767.0) as i16;
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// `p.round() as i32` (half away from zero; NaN → 0) for |p| < 2^23, without a call: `round`
/// is no instruction on x86-64 before SSE4.1 nor in WebAssembly (whose `nearest` ties to even),
/// so it was a libm call per sample (`roundf`: 3 % of the hub's CPU, and the encoder's loop
/// could not be vectorised around it). Exact: the fraction `p - trunc(p)` is representable.
#[inline]
fn round_half_away_f32(p: f32) -> i32 {
    let t = p as i32; // toward zero; NaN → 0
    let frac = p - t as f32;
    t + i32::from(frac >= 0.5) - i32::from(frac <= -0.5)
}

/// As [`round_half_away_f32`], in f64, for |p| < 2^52.
#[inline]
fn round_half_away_f64(p: f64) -> i32 {
    let t = p as i64;
    let frac = p - t as f64;
    (t + i64::from(frac >= 0.5) - i64::from(frac <= -0.5)) as i32
}

fn encode_pcm24(src: &[f32], dst: &mut [u8]) {
    for (x, d) in src.iter().zip(dst.chunks_exact_mut(3)) {
        // In f64 the product is exact, so rounding sees the true value; NaN maps to 0.
        let v = round_half_away_f64(f64::from(x.clamp(-1.0, 1.0)) * 8_388_607.0);
        d[0] = (v >> 8) as u8;
        d[1] = (v >> 16) as u8;
        d[2] = v as u8;
    }
}

fn encode_f32(src: &[f32], dst: &mut [u8]) {
    for (x, d) in src.iter().zip(dst.chunks_exact_mut(4)) {
        let y = if x.is_nan() { 0.0 } else { x.clamp(-1.0, 1.0) };
        d.copy_from_slice(&y.to_le_bytes());
    }
}

#[cfg(test)]
mod tests;
