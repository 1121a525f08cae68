//! libopus for the hub: an encoder and a decoder of 48 kHz float blocks, in Opus's low-delay
//! mode (CELT only, `OPUS_APPLICATION_RESTRICTED_LOWDELAY`), with Opus's own concealment for a
//! lost frame. The in-band FEC flag is set but gives nothing in this mode (it is SILK's; see the
//! tests): redundancy for these frames has to be the project's own.
//!
//! The C library is libopus itself (the `opusic-sys` crate vendors its source and builds it);
//! the browser gets the same source built with emscripten, so both ends run one codec. Only
//! this module touches the C API: every call is checked, a negative return is an [`OpusError`]
//! naming the step and libopus's own words for it, and nothing here panics.
//!
//! Set-up allocates (libopus's state, once per encoder or decoder); encoding and decoding a
//! frame allocate nothing: the caller's buffers are written in place.
//!
//! Frames: Opus codes 2.5, 5, 10 or 20 ms (120, 240, 480, 960 samples at 48 kHz); a frame of any
//! other length is an error before libopus is called.

use std::ffi::{c_int, CStr};
use std::fmt;
use std::ptr::NonNull;

use opusic_sys as sys;

/// The one sample rate the hub codes at.
pub const RATE: i32 = 48_000;
/// Frame lengths Opus codes at 48 kHz, samples per channel.
pub const FRAMES: [usize; 4] = [120, 240, 480, 960];
/// The bit rates the layers use (issue: 64 to 256 kbit/s).
pub const MIN_BITRATE: i32 = 64_000;
pub const MAX_BITRATE: i32 = 256_000;

/// A libopus call that failed: the step, and libopus's code and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpusError {
    pub step: &'static str,
    pub code: i32,
}

impl fmt::Display for OpusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: opus_strerror returns a static, NUL-terminated string for any code.
        let text = unsafe { CStr::from_ptr(sys::opus_strerror(self.code)) };
        write!(
            f,
            "opus {}: {} ({})",
            self.step,
            text.to_string_lossy(),
            self.code
        )
    }
}

impl std::error::Error for OpusError {}

fn check(step: &'static str, code: c_int) -> Result<i32, OpusError> {
    if code < 0 {
        Err(OpusError { step, code })
    } else {
        Ok(code)
    }
}

fn frame_ok(step: &'static str, samples: usize, channels: usize) -> Result<usize, OpusError> {
    if channels == 0 || samples % channels != 0 || !FRAMES.contains(&(samples / channels)) {
        return Err(OpusError {
            step,
            code: sys::OPUS_BAD_ARG,
        });
    }
    Ok(samples / channels)
}

fn channels_ok(channels: u8) -> Result<c_int, OpusError> {
    match channels {
        1 | 2 => Ok(c_int::from(channels)),
        _ => Err(OpusError {
            step: "channels",
            code: sys::OPUS_BAD_ARG,
        }),
    }
}

/// An Opus encoder in low-delay mode with in-band FEC.
pub struct Encoder {
    raw: NonNull<sys::OpusEncoder>,
    channels: usize,
}

// SAFETY: the encoder's state is plain memory owned by this value; libopus keeps no
// thread-local or shared state for it.
unsafe impl Send for Encoder {}

impl Encoder {
    /// An encoder of `channels` (1 or 2) at `bitrate` bit/s, its in-band FEC tuned for
    /// `loss_pct` % loss (0 to 100).
    pub fn new(channels: u8, bitrate: i32, loss_pct: i32) -> Result<Encoder, OpusError> {
        let ch = channels_ok(channels)?;
        let mut err: c_int = 0;
        // SAFETY: valid arguments; the result is checked for null and `err`.
        let raw = unsafe {
            sys::opus_encoder_create(
                RATE,
                ch,
                sys::OPUS_APPLICATION_RESTRICTED_LOWDELAY,
                &mut err,
            )
        };
        check("encoder create", err)?;
        let raw = NonNull::new(raw).ok_or(OpusError {
            step: "encoder create",
            code: sys::OPUS_ALLOC_FAIL,
        })?;
        let mut enc = Encoder {
            raw,
            channels: usize::from(channels),
        };
        enc.set_bitrate(bitrate)?;
        enc.ctl("in-band FEC", sys::OPUS_SET_INBAND_FEC_REQUEST, 1)?;
        enc.set_loss_pct(loss_pct)?;
        Ok(enc)
    }

    fn ctl(&mut self, step: &'static str, request: c_int, value: c_int) -> Result<(), OpusError> {
        // SAFETY: `raw` is a live encoder; these requests take one int argument.
        check(step, unsafe {
            sys::opus_encoder_ctl(self.raw.as_ptr(), request, value)
        })
        .map(|_| ())
    }

    /// Forgets the stream's history, keeping its settings: the next frame is coded as the
    /// first of a new stream. No allocation.
    pub fn reset(&mut self) {
        // SAFETY: `raw` is a live encoder; the request takes no argument and cannot fail for
        // a valid encoder.
        unsafe {
            sys::opus_encoder_ctl(self.raw.as_ptr(), sys::OPUS_RESET_STATE);
        }
    }

    /// Sets the bit rate, [`MIN_BITRATE`] to [`MAX_BITRATE`] bit/s.
    pub fn set_bitrate(&mut self, bitrate: i32) -> Result<(), OpusError> {
        if !(MIN_BITRATE..=MAX_BITRATE).contains(&bitrate) {
            return Err(OpusError {
                step: "bitrate",
                code: sys::OPUS_BAD_ARG,
            });
        }
        self.ctl("bitrate", sys::OPUS_SET_BITRATE_REQUEST, bitrate)
    }

    /// Tunes the in-band FEC for `pct` % expected loss (0 to 100).
    pub fn set_loss_pct(&mut self, pct: i32) -> Result<(), OpusError> {
        if !(0..=100).contains(&pct) {
            return Err(OpusError {
                step: "loss percentage",
                code: sys::OPUS_BAD_ARG,
            });
        }
        self.ctl(
            "loss percentage",
            sys::OPUS_SET_PACKET_LOSS_PERC_REQUEST,
            pct,
        )
    }

    /// Codes the input as one channel (`true`: a stereo encoder's two channels are downmixed,
    /// and the packets say mono, so every bit goes to the one signal) or as it comes (`false`).
    /// Sets a field of libopus's state: no allocation, safe on the media path.
    pub fn set_mono(&mut self, mono: bool) -> Result<(), OpusError> {
        let value = if mono { 1 } else { sys::OPUS_AUTO };
        self.ctl(
            "force channels",
            sys::OPUS_SET_FORCE_CHANNELS_REQUEST,
            value,
        )
    }

    /// Samples per channel the encoder looks ahead: its share of the codec's delay.
    pub fn lookahead(&mut self) -> Result<usize, OpusError> {
        let mut v: i32 = 0;
        // SAFETY: `raw` is a live encoder; the request writes one int to `v`.
        check("lookahead", unsafe {
            sys::opus_encoder_ctl(
                self.raw.as_ptr(),
                sys::OPUS_GET_LOOKAHEAD_REQUEST,
                &mut v as *mut i32,
            )
        })?;
        Ok(usize::try_from(v).unwrap_or(0))
    }

    /// Encodes one frame of interleaved `pcm` (a length of [`FRAMES`] × channels) into `out`;
    /// returns the packet's length.
    pub fn encode(&mut self, pcm: &[f32], out: &mut [u8]) -> Result<usize, OpusError> {
        let frames = frame_ok("encode frame", pcm.len(), self.channels)?;
        let max = i32::try_from(out.len()).unwrap_or(i32::MAX);
        // SAFETY: `pcm` holds `frames` × channels samples and `out` `max` bytes.
        let n = check("encode", unsafe {
            sys::opus_encode_float(
                self.raw.as_ptr(),
                pcm.as_ptr(),
                frames as c_int,
                out.as_mut_ptr(),
                max,
            )
        })?;
        Ok(n as usize)
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: created by opus_encoder_create and destroyed once.
        unsafe { sys::opus_encoder_destroy(self.raw.as_ptr()) }
    }
}

/// An Opus decoder.
pub struct Decoder {
    raw: NonNull<sys::OpusDecoder>,
    channels: usize,
}

// SAFETY: as for the encoder.
unsafe impl Send for Decoder {}

/// What to decode into one frame of output.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// A packet that arrived.
    Packet(&'a [u8]),
    /// The frame before `next` was lost: rebuild it from `next`'s in-band FEC.
    Fec { next: &'a [u8] },
    /// The frame was lost and nothing carries it: Opus's own concealment.
    Lost,
}

impl Decoder {
    pub fn new(channels: u8) -> Result<Decoder, OpusError> {
        let ch = channels_ok(channels)?;
        let mut err: c_int = 0;
        // SAFETY: valid arguments; the result is checked for null and `err`.
        let raw = unsafe { sys::opus_decoder_create(RATE, ch, &mut err) };
        check("decoder create", err)?;
        let raw = NonNull::new(raw).ok_or(OpusError {
            step: "decoder create",
            code: sys::OPUS_ALLOC_FAIL,
        })?;
        Ok(Decoder {
            raw,
            channels: usize::from(channels),
        })
    }

    /// Decodes one frame into interleaved `pcm` (a length of [`FRAMES`] × channels: the frame
    /// length the sender used); returns samples per channel written.
    pub fn decode(&mut self, input: Input<'_>, pcm: &mut [f32]) -> Result<usize, OpusError> {
        let frames = frame_ok("decode frame", pcm.len(), self.channels)?;
        let (data, fec) = match input {
            Input::Packet(p) => (p, 0),
            Input::Fec { next } => (next, 1),
            Input::Lost => (&[][..], 0),
        };
        let len = i32::try_from(data.len()).map_err(|_| OpusError {
            step: "decode",
            code: sys::OPUS_INVALID_PACKET,
        })?;
        let ptr = if data.is_empty() {
            std::ptr::null()
        } else {
            data.as_ptr()
        };
        // SAFETY: `data` holds `len` bytes (or is null for a loss), `pcm` `frames` × channels.
        let n = check("decode", unsafe {
            sys::opus_decode_float(
                self.raw.as_ptr(),
                ptr,
                len,
                pcm.as_mut_ptr(),
                frames as c_int,
                fec,
            )
        })?;
        Ok(n as usize)
    }
}

impl Decoder {
    /// Forgets the stream's history: the next frame starts a new stream.
    pub fn reset(&mut self) {
        // SAFETY: `raw` is a live decoder; the request takes no argument and cannot fail for
        // a valid decoder.
        unsafe {
            sys::opus_decoder_ctl(self.raw.as_ptr(), sys::OPUS_RESET_STATE);
        }
    }
}

/// Samples per channel a packet codes (its table of contents says so), or an error for a
/// packet that is not Opus.
pub fn packet_frames(packet: &[u8]) -> Result<usize, OpusError> {
    let len = i32::try_from(packet.len()).map_err(|_| OpusError {
        step: "packet frames",
        code: sys::OPUS_INVALID_PACKET,
    })?;
    // SAFETY: `packet` holds `len` bytes; libopus only reads them.
    let n = check("packet frames", unsafe {
        sys::opus_packet_get_nb_samples(packet.as_ptr(), len, RATE)
    })?;
    Ok(n as usize)
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: created by opus_decoder_create and destroyed once.
        unsafe { sys::opus_decoder_destroy(self.raw.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic noise-free test signal: two sines (440 and 1234.5 Hz) at −9 dBFS in all.
    fn signal(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let t = i as f64 / f64::from(RATE);
                (0.25 * (std::f64::consts::TAU * 440.0 * t).sin()
                    + 0.1 * (std::f64::consts::TAU * 1234.5 * t).sin()) as f32
            })
            .collect()
    }

    /// Encodes and decodes `x` frame by frame; returns the output and the packets' bytes.
    fn round_trip(x: &[f32], frame: usize, bitrate: i32) -> (Vec<f32>, usize) {
        let mut enc = Encoder::new(1, bitrate, 0).unwrap();
        let mut dec = Decoder::new(1).unwrap();
        let mut packet = [0u8; 1500];
        let mut y = vec![0.0f32; x.len()];
        let mut bytes = 0;
        for (i, chunk) in x.chunks_exact(frame).enumerate() {
            let n = enc.encode(chunk, &mut packet).unwrap();
            bytes += n;
            let out = &mut y[i * frame..(i + 1) * frame];
            assert_eq!(dec.decode(Input::Packet(&packet[..n]), out).unwrap(), frame);
        }
        (y, bytes)
    }

    /// SNR (dB) of `y` against `x` delayed by `delay`, over the second half.
    fn snr_db(x: &[f32], y: &[f32], delay: usize) -> f64 {
        let (mut s, mut e) = (0.0f64, 0.0f64);
        for i in x.len() / 2..x.len() - delay {
            let (a, b) = (f64::from(x[i]), f64::from(y[i + delay]));
            s += a * a;
            e += (b - a) * (b - a);
        }
        10.0 * (s / e).log10()
    }

    #[test]
    fn the_codec_delay_is_its_lookahead() {
        let mut enc = Encoder::new(1, 128_000, 0).unwrap();
        // Restricted low delay: 2.5 ms of look-ahead (Fs/400) and nothing more.
        assert_eq!(enc.lookahead().unwrap(), 120);
    }

    #[test]
    fn a_signal_comes_back_at_each_bit_rate_and_frame() {
        let x = signal(RATE as usize);
        let mut lines = Vec::new();
        for frame in [120usize, 240] {
            for (bitrate, min_snr) in [(256_000, 30.0), (128_000, 25.0), (64_000, 12.0)] {
                let (y, bytes) = round_trip(&x, frame, bitrate);
                let snr = snr_db(&x, &y, 120);
                let kbps = bytes as f64 * 8.0 / 1000.0;
                lines.push(format!(
                    "{frame} samples, {} kbit/s: {kbps:.0} kbit/s sent, SNR {snr:.1} dB",
                    bitrate / 1000
                ));
                assert!(snr >= min_snr, "{}", lines.last().unwrap());
                assert!(
                    (kbps - f64::from(bitrate) / 1000.0).abs() < 0.15 * f64::from(bitrate) / 1000.0
                );
            }
        }
        println!("{}", lines.join("\n"));
    }

    #[test]
    /// Opus's in-band FEC is SILK's (LBRR): in the low-delay mode, CELT alone, a packet carries
    /// none, and asking the decoder for it conceals the frame as a loss does. Redundancy for the
    /// low-delay frames must therefore be the project's own (a lower-rate copy of the previous
    /// frame beside each packet), not this flag.
    fn in_low_delay_mode_fec_gives_nothing_beyond_concealment() {
        let x = signal(RATE as usize / 2);
        let frame = 240;
        let lost = 40; // the frame index lost on the way
        let mut enc = Encoder::new(1, 128_000, 20).unwrap();
        let packets: Vec<Vec<u8>> = x
            .chunks_exact(frame)
            .map(|c| {
                let mut p = [0u8; 1500];
                let n = enc.encode(c, &mut p).unwrap();
                p[..n].to_vec()
            })
            .collect();
        let decode = |use_fec: bool| {
            let mut dec = Decoder::new(1).unwrap();
            let mut y = vec![0.0f32; x.len()];
            for (i, p) in packets.iter().enumerate() {
                let out = &mut y[i * frame..(i + 1) * frame];
                let input = if i != lost {
                    Input::Packet(p)
                } else if use_fec {
                    Input::Fec {
                        next: &packets[i + 1],
                    }
                } else {
                    Input::Lost
                };
                dec.decode(input, out).unwrap();
            }
            y
        };
        let err = |y: &[f32]| {
            let (a, b) = (lost * frame + 120, (lost + 1) * frame + 120);
            let (mut s, mut e) = (0.0f64, 0.0f64);
            for i in a..b {
                s += f64::from(x[i - 120]).powi(2);
                e += f64::from(y[i] - x[i - 120]).powi(2);
            }
            10.0 * (s / e).log10()
        };
        let (with_fec, plc) = (err(&decode(true)), err(&decode(false)));
        println!("lost frame: FEC {with_fec:.1} dB SNR, concealment {plc:.1} dB");
        assert!(
            (with_fec - plc).abs() < 0.1,
            "FEC {with_fec:.1} dB, concealment {plc:.1} dB"
        );
    }

    #[test]
    fn bad_arguments_are_errors_not_panics() {
        assert!(Encoder::new(3, 128_000, 0).is_err());
        assert!(Encoder::new(1, 32_000, 0).is_err());
        assert!(Encoder::new(1, 128_000, 101).is_err());
        let mut enc = Encoder::new(2, 128_000, 0).unwrap();
        let mut out = [0u8; 1500];
        assert!(
            enc.encode(&[0.0; 128], &mut out).is_err(),
            "128 is no Opus frame"
        );
        assert!(
            enc.encode(&[0.0; 241], &mut out).is_err(),
            "not whole stereo frames"
        );
        let mut dec = Decoder::new(1).unwrap();
        let mut pcm = [0.0f32; 240];
        for garbage in [&[0xffu8; 3][..], &[0x00, 0x00][..], &[0xfc; 1400][..]] {
            // libopus either decodes a frame of it or says the packet is invalid.
            match dec.decode(Input::Packet(garbage), &mut pcm) {
                Ok(n) => assert_eq!(n, 240),
                // A packet that says it holds a longer frame than the buffer is refused too.
                Err(e) => assert!(
                    e.step == "decode"
                        && [sys::OPUS_INVALID_PACKET, sys::OPUS_BUFFER_TOO_SMALL].contains(&e.code),
                    "{e}"
                ),
            }
        }
        assert!(
            dec.decode(Input::Packet(&[]), &mut pcm).is_ok(),
            "an empty packet is a loss"
        );
        assert!(dec
            .decode(Input::Packet(&[0u8; 1]), &mut pcm[..100])
            .is_err());
    }
}
