//! Opus for the engine: the calls of the codec module (libopus built with emscripten,
//! `wasm/opus/shim.c`), imported from `tutti_opus`. The worklet links them when it instantiates
//! this module (`app/src/audio/engine-core.ts`): each copies the frame between this module's
//! memory and the codec module's exchange areas and calls libopus there. Two modules, because
//! libopus is C built by emscripten and the core is Rust: each keeps its own memory, and only
//! numbers cross.
//!
//! A host without the codec module links calls that refuse (a negative code): its peers get no
//! decoder, and their Opus packets are refused as an unsupported codec.
//!
//! The engine's capture encodes too, one stream per Opus layer its peers take
//! ([`ImportedEncoder`]): the frame is interleaved here and copied over, and the codec's bytes
//! copied back.
//!
//! Set-up ([`ImportedDecoder::new`], [`ImportedEncoder::new`]) allocates libopus's state in the
//! codec module; coding a frame allocates nothing on either side.

use tutti_core::codec::{decode_through, interleave, CodecError, Decoder, Encoder, BAD_ARG};

#[link(wasm_import_module = "tutti_opus")]
extern "C" {
    /// A stereo decoder at 48 kHz: its handle, or a negative error.
    fn decoder_new() -> i32;
    /// Decodes `len` bytes at `packet` (`len` 0: a lost frame, concealed) into `frames`
    /// interleaved stereo samples at `pcm`: `frames`, or a negative error.
    fn decode(handle: i32, packet: *const u8, len: i32, pcm: *mut f32, frames: i32) -> i32;
    /// Forgets a decoder's history.
    fn decoder_reset(handle: i32);
    /// Frees a decoder or an encoder.
    fn free(handle: i32);
    /// A stereo low-delay encoder at 48 kHz and `bitrate` bit/s: its handle, or a negative
    /// error.
    fn encoder_new(bitrate: i32) -> i32;
    /// Encodes `frames` interleaved stereo samples at `pcm` into at most `cap` bytes at `out`:
    /// the bytes written, or a negative error.
    fn encode(handle: i32, pcm: *const f32, frames: i32, out: *mut u8, cap: i32) -> i32;
    /// Forgets an encoder's history.
    fn encoder_reset(handle: i32);
    /// Codes the input as one channel (1) or as it comes (0): 0, or a negative error.
    fn encoder_set_mono(handle: i32, mono: i32) -> i32;
}

/// The longest frame a stream uses (5 ms), stereo interleaved.
const SCRATCH: usize = 240 * 2;

/// A decoder in the codec module, for one peer's stream.
pub struct ImportedDecoder {
    handle: i32,
    pcm: Box<[f32; SCRATCH]>,
}

impl ImportedDecoder {
    /// A decoder, or `None` when the host has no codec module (or it refused).
    pub fn new() -> Option<ImportedDecoder> {
        // SAFETY: an imported function of numbers only.
        let handle = unsafe { decoder_new() };
        (handle > 0).then(|| ImportedDecoder {
            handle,
            pcm: Box::new([0.0; SCRATCH]),
        })
    }
}

impl Decoder for ImportedDecoder {
    fn decode(
        &mut self,
        packet: Option<&[u8]>,
        left: &mut [f32],
        right: &mut [f32],
    ) -> Result<(), CodecError> {
        let handle = self.handle;
        decode_through(&mut self.pcm[..], left, right, |pcm| {
            let frames = (pcm.len() / 2) as i32;
            let (ptr, len) = packet.map_or((std::ptr::null(), 0), |p| (p.as_ptr(), p.len()));
            let len = i32::try_from(len).map_err(|_| CodecError(BAD_ARG))?;
            // SAFETY: the host reads `len` bytes at `ptr` and writes `frames` stereo samples
            // at `pcm`, which holds that many; both stay valid for the call.
            let r = unsafe { decode(handle, ptr, len, pcm.as_mut_ptr(), frames) };
            usize::try_from(r).map_err(|_| CodecError(r))
        })
    }

    fn reset(&mut self) {
        // SAFETY: an imported function of numbers only.
        unsafe { decoder_reset(self.handle) }
    }
}

impl Drop for ImportedDecoder {
    fn drop(&mut self) {
        // SAFETY: the handle came from `decoder_new` and is freed once.
        unsafe { free(self.handle) }
    }
}

/// An encoder in the codec module, for one sent Opus stream.
pub struct ImportedEncoder {
    handle: i32,
    pcm: Box<[f32; SCRATCH]>,
}

impl ImportedEncoder {
    /// A stereo encoder at `bitrate` bit/s, or `None` when the host has no codec module (or
    /// it refused).
    pub fn new(bitrate: i32) -> Option<ImportedEncoder> {
        // SAFETY: an imported function of numbers only.
        let handle = unsafe { encoder_new(bitrate) };
        (handle > 0).then(|| ImportedEncoder {
            handle,
            pcm: Box::new([0.0; SCRATCH]),
        })
    }
}

impl Encoder for ImportedEncoder {
    fn encode(
        &mut self,
        left: &[f32],
        right: Option<&[f32]>,
        out: &mut [u8],
    ) -> Result<usize, CodecError> {
        let frames = left.len();
        let pcm = self.pcm.get_mut(..frames * 2).ok_or(CodecError(BAD_ARG))?;
        // A mono frame goes over as two equal channels; the encoder set mono codes it so.
        interleave(left, right.unwrap_or(left), pcm);
        let cap = i32::try_from(out.len()).unwrap_or(i32::MAX);
        let frames = i32::try_from(frames).map_err(|_| CodecError(BAD_ARG))?;
        // SAFETY: the host reads `frames` stereo samples at `pcm` and writes at most `cap`
        // bytes at `out`; both stay valid for the call.
        let r = unsafe { encode(self.handle, pcm.as_ptr(), frames, out.as_mut_ptr(), cap) };
        usize::try_from(r).map_err(|_| CodecError(r))
    }

    fn reset(&mut self) {
        // SAFETY: an imported function of numbers only.
        unsafe { encoder_reset(self.handle) }
    }

    fn set_mono(&mut self, mono: bool) -> Result<(), CodecError> {
        // SAFETY: an imported function of numbers only.
        let r = unsafe { encoder_set_mono(self.handle, i32::from(mono)) };
        if r < 0 {
            Err(CodecError(r))
        } else {
            Ok(())
        }
    }
}

impl Drop for ImportedEncoder {
    fn drop(&mut self) {
        // SAFETY: the handle came from `encoder_new` and is freed once.
        unsafe { free(self.handle) }
    }
}
