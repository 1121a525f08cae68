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
//! Set-up ([`ImportedDecoder::new`]) allocates libopus's state in the codec module; decoding a
//! frame allocates nothing on either side.

use tutti_core::codec::{decode_through, CodecError, Decoder, BAD_ARG};

#[link(wasm_import_module = "tutti_opus")]
extern "C" {
    /// A stereo decoder at 48 kHz: its handle, or a negative error.
    fn decoder_new() -> i32;
    /// Decodes `len` bytes at `packet` (`len` 0: a lost frame, concealed) into `frames`
    /// interleaved stereo samples at `pcm`: `frames`, or a negative error.
    fn decode(handle: i32, packet: *const u8, len: i32, pcm: *mut f32, frames: i32) -> i32;
    /// Forgets a decoder's history.
    fn decoder_reset(handle: i32);
    /// Frees a decoder.
    fn free(handle: i32);
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
