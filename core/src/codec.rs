//! Compressed formats as the core sees them: a decoder per received stream and an encoder per
//! sent format, both supplied by the host. The core is sans-IO and has no dependencies, so it
//! names only what it needs of a codec; the worklet's host links libopus built with emscripten
//! (`wasm/opus`), the hub's links the same libopus natively, and the tests link it natively too.
//!
//! Packets name their codec in the trailer ([`crate::packet::CODEC_OPUS`]); Opus frames are 120
//! or 240 samples at 48 kHz (2.5 or 5 ms, the low-delay mode), so a stream of them plays through
//! the jitter buffer in blocks of that length. A codec's calls are made on the render path: they
//! must not allocate, lock or block (the host allocates its state when it makes the codec).

use std::fmt;

/// A codec call that failed: the codec's own error code (libopus's are negative).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodecError(pub i32);

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "codec error {}", self.0)
    }
}

impl std::error::Error for CodecError {}

/// Decodes one stream's frames, in order. Made for one stream at a time; [`Decoder::reset`]
/// starts another.
pub trait Decoder: Send {
    /// Decodes `packet` into `left` and `right` (their whole length, one frame: 120 or 240
    /// samples; a mono stream gives the same samples on both), or with `None` conceals a frame
    /// that was lost, continuing the decoder's state. A packet that is not a frame of exactly
    /// that length is an error and leaves the outputs unspecified (the caller conceals).
    fn decode(
        &mut self,
        packet: Option<&[u8]>,
        left: &mut [f32],
        right: &mut [f32],
    ) -> Result<(), CodecError>;

    /// Forgets the stream's history: the next frame starts a new stream.
    fn reset(&mut self);
}

/// Encodes one sent stream's frames.
pub trait Encoder: Send {
    /// Encodes one frame of `left` (and `right` for a stereo stream: `None` is mono) into `out`:
    /// its length in bytes.
    fn encode(
        &mut self,
        left: &[f32],
        right: Option<&[f32]>,
        out: &mut [u8],
    ) -> Result<usize, CodecError>;

    /// Forgets the stream's history, keeping its settings: the next frame starts a new stream.
    fn reset(&mut self);

    /// Codes a stereo encoder's input as one channel (`true`: the two are downmixed and the
    /// frames say mono, so every bit goes to the one signal) or as it comes (`false`). A field
    /// of the codec's state: no allocation.
    fn set_mono(&mut self, mono: bool) -> Result<(), CodecError>;
}

/// libopus's code for a bad argument, and for a packet that is not what was asked for.
pub const BAD_ARG: i32 = -1;
pub const INVALID_PACKET: i32 = -4;

/// A [`Decoder::decode`] for a host whose codec decodes to interleaved stereo: `decode` fills
/// `pcm` (the first `left.len()` × 2 samples of `scratch`) and returns the frames it decoded;
/// anything but a whole frame of `left.len()` is an error. Then the samples are split into
/// `left` and `right`. No allocation.
pub fn decode_through(
    scratch: &mut [f32],
    left: &mut [f32],
    right: &mut [f32],
    decode: impl FnOnce(&mut [f32]) -> Result<usize, CodecError>,
) -> Result<(), CodecError> {
    let frames = left.len().min(right.len());
    let pcm = scratch.get_mut(..frames * 2).ok_or(CodecError(BAD_ARG))?;
    if decode(pcm)? != frames {
        return Err(CodecError(INVALID_PACKET));
    }
    deinterleave(pcm, left, right);
    Ok(())
}

/// Splits interleaved stereo `src` into `left` and `right` (as many frames as the shortest).
/// For a host whose codec speaks interleaved samples.
pub fn deinterleave(src: &[f32], left: &mut [f32], right: &mut [f32]) {
    for ((pair, l), r) in src
        .chunks_exact(2)
        .zip(left.iter_mut())
        .zip(right.iter_mut())
    {
        *l = pair[0];
        *r = pair[1];
    }
}

/// Interleaves `left` and `right` into `dst` (as many frames as fit).
pub fn interleave(left: &[f32], right: &[f32], dst: &mut [f32]) {
    for ((pair, &l), &r) in dst.chunks_exact_mut(2).zip(left).zip(right) {
        pair[0] = l;
        pair[1] = r;
    }
}
