//! Known-answer tests of the wire format: bytes built by hand, the golden vectors in
//! `tests/vectors/packets.json`, round trips of every format, every header byte and length, and
//! seeded mutations checked against a reference parser.

use super::*;

// ---------------------------------------------------------------------------------------
// Helpers: a header builder, and a small JSON reader for the vectors.
// ---------------------------------------------------------------------------------------

use crate::testing::Rng;
use crate::vectors::{assert_refused, unhex, Json, JsonReader};

fn header(frames: u16, format: SampleFormat, channels: u8) -> Header {
    Header {
        timestamp: 0x0102_0304_0506_0708,
        seq: 0xA55A,
        frames,
        rate: SampleRate::Hz48000,
        format,
        channels_in: channels,
        channels_out: 0,
    }
}

const FORMATS: [SampleFormat; 3] = [
    SampleFormat::Pcm16,
    SampleFormat::Pcm24,
    SampleFormat::Float32,
];

/// Largest |decoded - input| for an input in [-1, 1], per format.
/// PCM16: decode(encode(x)) = round(fl(x·32767)) / 32768, so the error is at most
/// (|x| + 0.5 + 32767·2^-24) / 32768 ≤ 1.51 / 32768 ≈ 4.6e-5.
/// PCM24: the product is exact in f64, so (|x| + 0.5) / 2^23 ≤ 1.5 / 2^23 ≈ 1.8e-7 (the decoded
/// value v / 2^23 is exact in f32). Float32: exact.
fn bound(format: SampleFormat) -> f32 {
    match format {
        SampleFormat::Pcm16 => 1.51 / 32768.0,
        SampleFormat::Pcm24 => 1.5 / 8_388_608.0,
        SampleFormat::Float32 => 0.0,
    }
}

fn vectors() -> Json {
    JsonReader::parse(include_str!("../../../tests/vectors/packets.json"))
}

fn vector_header(v: &Json) -> Header {
    let h = v.get("header");
    Header {
        timestamp: h.get("timestamp").str().parse().expect("u64 timestamp"),
        seq: h.get("seq").num() as u16,
        frames: h.get("frames").num() as u16,
        rate: SampleRate::from_code(h.get("rate_code").num() as u8).expect("valid rate"),
        format: SampleFormat::from_bits(h.get("bits").num() as u8).expect("valid bits"),
        channels_in: h.get("channels_in").num() as u8,
        channels_out: h.get("channels_out").num() as u8,
    }
}

fn vector_ext(v: &Json) -> Option<Extension> {
    match v.get("ext") {
        Json::Null => None,
        e => Some(Extension {
            stream_id: e.get("stream_id").num() as u16,
            codec: e.get("codec").num() as u8,
        }),
    }
}

fn planar_f32(a: &Json) -> Vec<Vec<f32>> {
    a.arr()
        .iter()
        .map(|ch| ch.arr().iter().map(|x| x.num() as f32).collect())
        .collect()
}

fn decode_both(p: &Packet<'_>) -> (Vec<f32>, Vec<f32>) {
    let mut l = vec![f32::NAN; p.frames()];
    let mut r = vec![f32::NAN; p.frames()];
    p.decode_stereo(&mut l, &mut r);
    (l, r)
}

fn sine(frames: usize, cycles: f64, amp: f64, phase: f64) -> Vec<f32> {
    (0..frames)
        .map(|k| {
            let t = 2.0 * core::f64::consts::PI * cycles * k as f64 / frames as f64;
            (amp * (t + phase).sin()) as f32
        })
        .collect()
}

/// Amplitude of the DFT bin `cycles` of a block (2/N |X_k|).
fn bin_amplitude(x: &[f32], cycles: f64) -> f64 {
    let n = x.len() as f64;
    let (mut re, mut im) = (0.0, 0.0);
    for (k, &s) in x.iter().enumerate() {
        let t = 2.0 * core::f64::consts::PI * cycles * k as f64 / n;
        re += f64::from(s) * t.cos();
        im -= f64::from(s) * t.sin();
    }
    2.0 * (re * re + im * im).sqrt() / n
}

// ---------------------------------------------------------------------------------------
// Golden bytes
// ---------------------------------------------------------------------------------------

/// One packet written out byte by byte from the layout in the module docs.
#[test]
fn golden_bytes_by_hand_pcm16_mono_32() {
    let codes: Vec<i16> = (0..32).map(|k| (k - 16) * 2000 + 7).collect();
    let mut bytes = vec![
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // timestamp 0x0102030405060708 LE
        0x5A, 0xA5, // seq 0xA55A
        0x20, 0x00, // 32 frames
        0x03, // 48 kHz
        0x10, // 16 bits
        0x01, // channels in: 1
        0x00, // channels out: same as in
    ];
    for c in &codes {
        bytes.extend_from_slice(&[*c as u8, (*c >> 8) as u8]);
    }
    let p = parse(&bytes).expect("hand-written packet parses");
    assert_eq!(p.header, header(32, SampleFormat::Pcm16, 1));
    assert_eq!((p.channels, p.ext, p.payload.len()), (1, None, 64));
    let (l, r) = decode_both(&p);
    for (k, c) in codes.iter().enumerate() {
        assert_eq!(l[k], f32::from(*c) / 32768.0, "sample {k} exact");
        assert_eq!(r[k], l[k], "mono copied to the right channel");
    }
    // Inputs c/32767 round back to exactly c.
    let input: Vec<f32> = codes.iter().map(|&c| f32::from(c) / 32767.0).collect();
    let mut out = [0u8; MAX_PACKET_LEN];
    let n = encode(&p.header, None, &[&input], &mut out).expect("encodes");
    assert_eq!(&out[..n], &bytes[..]);
}

/// The same with a trailer, stereo PCM24, byte by byte: 'T' 'U' 1 0 id.lo id.hi 0 0.
#[test]
fn golden_bytes_by_hand_pcm24_stereo_with_trailer() {
    let h = Header {
        timestamp: 5,
        seq: 1,
        frames: 32,
        rate: SampleRate::Hz44100,
        format: SampleFormat::Pcm24,
        channels_in: 0,
        channels_out: 2,
    };
    let mut bytes = vec![5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 32, 0, 2, 24, 0, 2];
    // left: v = 0x123456 every frame; right: v = -2 every frame.
    for _ in 0..32 {
        bytes.extend_from_slice(&[0x34, 0x12, 0x56]);
    }
    for _ in 0..32 {
        bytes.extend_from_slice(&[0xFF, 0xFF, 0xFE]);
    }
    bytes.extend_from_slice(&[0x54, 0x55, 0x01, 0x00, 0xEF, 0xBE, 0x00, 0x00]);
    let p = parse(&bytes).expect("parses");
    assert_eq!(p.header, h);
    assert_eq!(p.channels, 2);
    let ext = Extension {
        stream_id: 0xBEEF,
        codec: CODEC_PCM,
    };
    assert_eq!(p.ext, Some(ext));
    let (l, r) = decode_both(&p);
    assert!(l.iter().all(|&x| x == 0x12_3456 as f32 / 8_388_608.0));
    assert!(r.iter().all(|&x| x == -2.0 / 8_388_608.0));
    // Encoding v / 8388607 gives back v exactly.
    let li = vec![0x12_3456 as f32 / 8_388_607.0; 32];
    let ri = vec![-2.0 / 8_388_607.0; 32];
    let mut out = [0u8; MAX_PACKET_LEN];
    let n = encode(&h, Some(&ext), &[&li, &ri], &mut out).expect("encodes");
    assert_eq!(&out[..n], &bytes[..]);
}

#[test]
fn golden_vectors_parse_decode_and_encode() {
    let doc = vectors();
    let valid = doc.get("valid").arr();
    assert!(valid.len() >= 10, "vector file lists the valid vectors");
    let mut opus_count = 0;
    for v in valid {
        let name = v.get("name").str();
        let bytes = unhex(v.get("hex").str());
        assert_eq!(bytes.len(), v.get("len").num() as usize, "{name}: len");
        let p = parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let h = vector_header(v);
        assert_eq!(p.header, h, "{name}: header");
        assert_eq!(
            p.channels as f64,
            v.get("channels").num(),
            "{name}: channels"
        );
        assert_eq!(p.ext, vector_ext(v), "{name}: ext");
        if let Some(opus) = v.opt("opus_payload") {
            let redundant = v
                .opt("opus_redundant")
                .map_or(Vec::new(), |r| unhex(r.str()));
            check_opus_vector(name, &bytes, &p, &unhex(opus.str()), &redundant);
            opus_count += 1;
            continue;
        }
        assert!(!p.is_opus(), "{name}: PCM");
        let expected = planar_f32(v.get("samples"));
        assert_eq!(
            expected.len(),
            p.channels as usize,
            "{name}: sample channels"
        );
        let (l, r) = decode_both(&p);
        let right = expected.get(1).unwrap_or(&expected[0]);
        for k in 0..p.frames() {
            assert_eq!(l[k].to_bits(), expected[0][k].to_bits(), "{name}: L[{k}]");
            assert_eq!(r[k].to_bits(), right[k].to_bits(), "{name}: R[{k}]");
        }
        if let Json::Arr(_) = v.get("input") {
            let input = planar_f32(v.get("input"));
            let planar: Vec<&[f32]> = input.iter().map(|c| c.as_slice()).collect();
            let mut out = [0u8; MAX_PACKET_LEN];
            let n = encode(&h, vector_ext(v).as_ref(), &planar, &mut out)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&out[..n], &bytes[..], "{name}: encoded bytes");
        }
    }
    assert!(opus_count >= 3, "vector file lists Opus vectors");
}

/// An Opus golden vector: its payload is exactly the Opus bytes, PCM decode writes nothing, and
/// framing the Opus bytes written in place gives the packet back.
fn check_opus_vector(name: &str, bytes: &[u8], p: &Packet<'_>, opus: &[u8], redundant: &[u8]) {
    assert!(p.is_opus(), "{name}: is_opus");
    assert_eq!(p.payload, opus, "{name}: Opus bytes");
    assert_eq!(p.redundant, redundant, "{name}: redundant bytes");
    assert_eq!(p.header.format, SampleFormat::Pcm16, "{name}: format");
    assert_eq!(
        p.ext.map(|e| e.codec),
        Some(CODEC_OPUS),
        "{name}: trailer codec"
    );
    let mut l = [f32::NAN; MAX_FRAMES];
    let mut r = [f32::NAN; MAX_FRAMES];
    assert_eq!(p.decode_stereo(&mut l, &mut r), 0, "{name}: PCM decode");
    assert!(
        l.iter().chain(&r).all(|x| x.is_nan()),
        "{name}: nothing written"
    );
    let mut out = [0xEEu8; MAX_PACKET_LEN];
    out[HEADER_LEN..HEADER_LEN + opus.len()].copy_from_slice(opus);
    out[HEADER_LEN + opus.len()..][..redundant.len()].copy_from_slice(redundant);
    let stream = p.ext.map_or(0, |e| e.stream_id);
    let n = encode_opus_redundant(&p.header, stream, opus.len(), redundant.len(), &mut out)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(&out[..n], bytes, "{name}: framed bytes");
    assert!(out[n..].iter().all(|&b| b == 0xEE), "{name}: nothing past");
}

#[test]
fn golden_invalid_vectors() {
    let doc = vectors();
    let invalid = doc.get("invalid").arr();
    assert!(invalid.len() >= 25);
    assert_refused(invalid, |bytes| parse(bytes).err().map(|e| e.name()));
}

// ---------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------

/// Grid: block size × format × channels × rate. A sine with a whole number of cycles per block
/// must come back sample by sample within `bound(format)`, and its DFT bin must hold the
/// amplitude within 2·bound (the bin is an average of per-sample errors).
#[test]
fn round_trip_grid_sine() {
    let mut out = [0u8; MAX_PACKET_LEN];
    for &frames in &BLOCK_SIZES {
        for format in FORMATS {
            for channels in 1..=2u8 {
                for rate in [SampleRate::Hz48000, SampleRate::Hz44100] {
                    let n = usize::from(frames);
                    // 1500 Hz-ish at 48 kHz for 32 frames; more cycles in longer blocks.
                    let cycles = (n / 32) as f64;
                    let left = sine(n, cycles, 0.8, 0.3);
                    let right = sine(n, 2.0 * cycles, -0.45, 1.1);
                    let mut h = header(frames, format, channels);
                    h.rate = rate;
                    let planar_all = [left.as_slice(), right.as_slice()];
                    let planar = &planar_all[..usize::from(channels)];
                    let len = encode(&h, None, planar, &mut out).expect("encodes");
                    let expect_len = HEADER_LEN + n * usize::from(channels) * format.bytes();
                    assert_eq!(len, expect_len);
                    let p = parse(&out[..len]).expect("parses");
                    assert_eq!((p.header, p.channels, p.ext), (h, channels, None));
                    let (l, r) = decode_both(&p);
                    let want_r = if channels == 2 { &right } else { &left };
                    let tol = bound(format);
                    for k in 0..n {
                        assert!((l[k] - left[k]).abs() <= tol, "{format:?} {frames} L[{k}]");
                        assert!(
                            (r[k] - want_r[k]).abs() <= tol,
                            "{format:?} {frames} R[{k}]"
                        );
                    }
                    let amp = bin_amplitude(&l, cycles);
                    assert!(
                        (amp - 0.8).abs() <= 2.0 * f64::from(tol) + 1e-6,
                        "amp {amp}"
                    );
                    if channels == 2 {
                        let amp_r = bin_amplitude(&r, 2.0 * cycles);
                        assert!((amp_r - 0.45).abs() <= 2.0 * f64::from(tol) + 1e-6);
                        // The left tone does not leak into the right channel.
                        assert!(bin_amplitude(&r, cycles) < 1e-4);
                    }
                }
            }
        }
    }
}

/// Seeded random inputs in [-1, 1] (and some beyond): encode → parse → decode within bound;
/// out-of-range inputs come back clamped.
#[test]
fn round_trip_random_within_tolerance() {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut out = [0u8; MAX_PACKET_LEN];
    for _ in 0..2000 {
        let frames = BLOCK_SIZES[rng.below(4) as usize];
        let format = FORMATS[rng.below(3) as usize];
        let channels = 1 + rng.below(2) as u8;
        let n = usize::from(frames);
        let input: Vec<Vec<f32>> = (0..channels)
            .map(|_| {
                (0..n)
                    .map(|_| (rng.below(2_400_001) as f32 - 1_200_000.0) / 1_000_000.0)
                    .collect()
            })
            .collect();
        let planar: Vec<&[f32]> = input.iter().map(|c| c.as_slice()).collect();
        let h = header(frames, format, channels);
        let ext = Extension {
            stream_id: rng.next_u64() as u16,
            codec: CODEC_PCM,
        };
        let use_ext = rng.below(2) == 0;
        let len = encode(&h, use_ext.then_some(&ext), &planar, &mut out).expect("encodes");
        let p = parse(&out[..len]).expect("parses");
        assert_eq!(p.ext, use_ext.then_some(ext));
        let (l, r) = decode_both(&p);
        let tol = bound(format);
        for k in 0..n {
            let want_l = input[0][k].clamp(-1.0, 1.0);
            let want_r = input[usize::from(channels) - 1][k].clamp(-1.0, 1.0);
            assert!((l[k] - want_l).abs() <= tol, "{format:?} L[{k}]");
            assert!((r[k] - want_r).abs() <= tol, "{format:?} R[{k}]");
        }
    }
}

#[test]
fn encode_maps_nan_and_infinity() {
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 2.0, -2.0, -0.0];
    // Expected decoded value per input for each format.
    let full16 = 32767.0 / 32768.0;
    let full24 = 8_388_607.0 / 8_388_608.0;
    let expect = |format: SampleFormat| -> [f32; 6] {
        match format {
            SampleFormat::Pcm16 => [0.0, full16, -full16, full16, -full16, 0.0],
            SampleFormat::Pcm24 => [0.0, full24, -full24, full24, -full24, 0.0],
            SampleFormat::Float32 => [0.0, 1.0, -1.0, 1.0, -1.0, -0.0],
        }
    };
    for format in FORMATS {
        let input: Vec<f32> = (0..32).map(|k| specials[k % 6]).collect();
        let mut out = [0u8; MAX_PACKET_LEN];
        let len = encode(&header(32, format, 1), None, &[&input], &mut out).expect("encodes");
        let (l, _) = decode_both(&parse(&out[..len]).expect("parses"));
        for k in 0..32 {
            assert_eq!(
                l[k],
                expect(format)[k % 6],
                "{format:?} input {}",
                specials[k % 6]
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sample codecs against their definitions
// ---------------------------------------------------------------------------------------

/// Decodes seeded bytes (`width` per sample) with `decode` at every length 0..=300 (the
/// 8-sample chunks and the remainder) and checks each sample against `definition` of its bytes,
/// and that nothing is written past the length.
fn check_decode_at_every_length(
    seed: u64,
    width: usize,
    decode: fn(&[u8], &mut [f32]),
    definition: impl Fn(&[u8]) -> f32,
) {
    let mut rng = Rng::new(seed);
    let src: Vec<u8> = (0..300 * width).map(|_| rng.byte()).collect();
    for n in 0..=300usize {
        let mut dst = vec![f32::NAN; n + 3];
        decode(&src[..width * n], &mut dst[..n]);
        for k in 0..n {
            let want = definition(&src[width * k..width * (k + 1)]);
            assert_eq!(dst[k], want, "n={n} k={k}");
        }
        assert!(
            dst[n..].iter().all(|x| x.is_nan()),
            "nothing written past n"
        );
    }
}

/// Every 16-bit code decodes to code / 32768 exactly, through the vectorized path, at every
/// length 0..=300 (exercises the 8-sample chunks and the remainder).
#[test]
fn pcm16_decode_matches_definition_at_every_length() {
    check_decode_at_every_length(77, 2, decode_pcm16, |b| {
        f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0
    });
    let all: Vec<u8> = (i16::MIN..=i16::MAX)
        .flat_map(|c| c.to_le_bytes())
        .collect();
    let mut dst = vec![0.0f32; 65536];
    decode_pcm16(&all, &mut dst);
    for (k, y) in dst.iter().enumerate() {
        assert_eq!(*y, (k as f32 - 32768.0) / 32768.0);
    }
}

/// 24-bit decode equals v / 2^23 (v from the definition) at every length 0..=300.
#[test]
fn pcm24_decode_matches_definition_at_every_length() {
    check_decode_at_every_length(78, 3, decode_pcm24, |b| {
        let v = i32::from(i16::from_le_bytes([b[0], b[1]])) * 256 + i32::from(b[2]);
        v as f32 / 8_388_608.0
    });
}

/// For every 24-bit value v: our bytes are JackTrip's (int16 of floor(x·32768), then
/// floor(fraction·256)) for x = v / 2^23, and our decode equals JackTrip's formula exactly.
#[test]
fn pcm24_layout_is_jacktrips_for_every_value() {
    for v in -8_388_608i32..8_388_608 {
        let ours = [(v >> 8) as u8, (v >> 16) as u8, v as u8];
        let x = f64::from(v) / 8_388_608.0;
        let hi = (x * 32768.0).floor();
        let lo = ((x * 32768.0 - hi) * 256.0).floor();
        let jt = (hi as i16).to_le_bytes();
        assert_eq!(ours, [jt[0], jt[1], lo as u8], "v={v}");
        let mut y = [0.0f32];
        decode_pcm24(&ours, &mut y);
        let jt_decoded = (f64::from(hi as i16) + lo / 256.0) / 32768.0;
        assert_eq!(f64::from(y[0]), jt_decoded, "v={v}");
    }
}

/// Seeded float bit patterns (all classes: NaN, Inf, subnormal, huge) decode finite in [-1, 1].
#[test]
fn float_decode_is_always_finite_and_bounded() {
    let mut rng = Rng::new(12345);
    let mut src = [0u8; 4 * 256];
    let mut dst = [0f32; 256];
    for round in 0..400 {
        for (i, c) in src.chunks_exact_mut(4).enumerate() {
            let bits = match (round + i) % 5 {
                0 => 0x7F80_0000 | (rng.next_u64() as u32 & 0x807F_FFFF), // NaN/Inf
                1 => rng.next_u64() as u32 & 0x807F_FFFF,                 // subnormal
                _ => rng.next_u64() as u32,
            };
            c.copy_from_slice(&bits.to_le_bytes());
        }
        decode_f32(&src, &mut dst);
        for (i, y) in dst.iter().enumerate() {
            let x = f32::from_le_bytes(src[4 * i..4 * i + 4].try_into().expect("4 bytes"));
            assert!(y.is_finite() && y.abs() <= 1.0);
            if x.is_finite() {
                assert_eq!(*y, x.clamp(-1.0, 1.0));
            } else {
                assert_eq!(*y, 0.0);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Malformed input: every class returns its error
// ---------------------------------------------------------------------------------------

fn valid_packet(frames: u16, format: SampleFormat, channels: u8, ext: bool) -> Vec<u8> {
    let n = usize::from(frames);
    let tone = sine(n, 1.0, 0.5, 0.0);
    let planar_all = [tone.as_slice(), tone.as_slice()];
    let mut out = [0u8; MAX_PACKET_LEN];
    let e = Extension {
        stream_id: 9,
        codec: CODEC_PCM,
    };
    let h = header(frames, format, channels);
    let len = encode(
        &h,
        ext.then_some(&e),
        &planar_all[..usize::from(channels)],
        &mut out,
    )
    .expect("valid");
    out[..len].to_vec()
}

#[test]
fn every_prefix_is_truncated() {
    for &frames in &BLOCK_SIZES {
        for format in FORMATS {
            for channels in 1..=2 {
                for ext in [false, true] {
                    let bytes = valid_packet(frames, format, channels, ext);
                    let end =
                        HEADER_LEN + usize::from(frames) * usize::from(channels) * format.bytes();
                    for cut in 0..end {
                        let needed = if cut < HEADER_LEN { HEADER_LEN } else { end };
                        assert_eq!(
                            parse(&bytes[..cut]),
                            Err(PacketError::Truncated { len: cut, needed }),
                            "{format:?} {frames} {channels} cut {cut}"
                        );
                    }
                    // Cutting into the trailer leaves 1..=7 extra bytes.
                    for cut in end + 1..bytes.len() {
                        assert_eq!(
                            parse(&bytes[..cut]),
                            Err(PacketError::TrailingBytes {
                                len: cut,
                                expected: end
                            })
                        );
                    }
                    assert!(parse(&bytes).is_ok());
                    assert_eq!(parse(&bytes[..end]).map(|p| p.ext), Ok(None));
                }
            }
        }
    }
}

#[test]
fn trailing_bytes_and_oversized() {
    let base = valid_packet(256, SampleFormat::Pcm16, 1, false);
    let end = base.len();
    for extra in 1..=(MAX_PACKET_LEN + 10 - end) {
        let mut b = base.clone();
        b.resize(end + extra, 0);
        let got = parse(&b);
        if end + extra > MAX_PACKET_LEN {
            assert_eq!(got, Err(PacketError::Oversized { len: end + extra }));
        } else if extra == EXT_LEN {
            assert_eq!(
                got,
                Err(PacketError::BadExtension),
                "zero trailer has no magic"
            );
        } else {
            assert_eq!(
                got,
                Err(PacketError::TrailingBytes {
                    len: end + extra,
                    expected: end
                })
            );
        }
    }
    // The largest valid packet is exactly MAX_PACKET_LEN.
    let max = valid_packet(256, SampleFormat::Float32, 2, true);
    assert_eq!(max.len(), MAX_PACKET_LEN);
    assert!(parse(&max).is_ok());
    assert_eq!(
        parse(&vec![0u8; 70_000]),
        Err(PacketError::Oversized { len: 70_000 })
    );
}

#[test]
fn every_rate_and_bits_byte() {
    let base = valid_packet(32, SampleFormat::Pcm16, 1, false);
    for code in 0..=255u8 {
        let mut b = base.clone();
        b[12] = code;
        match SampleRate::from_code(code) {
            Some(rate) => {
                assert!(code <= 6);
                assert_eq!(rate.code(), code);
                assert_eq!(parse(&b).map(|p| p.header.rate), Ok(rate));
            }
            None => assert_eq!(parse(&b), Err(PacketError::BadRate(code))),
        }
    }
    assert_eq!(SampleRate::Hz48000.code(), 3);
    assert_eq!(SampleRate::Hz44100.code(), 2);
    for bits in 0..=255u8 {
        let mut b = base.clone();
        b[13] = bits;
        let got = parse(&b);
        match bits {
            16 => assert!(got.is_ok()),
            // The payload length changes with the sample size.
            24 | 32 => assert!(matches!(got, Err(PacketError::Truncated { .. }))),
            _ => assert_eq!(got, Err(PacketError::BadBits(bits))),
        }
    }
}

/// All 65536 (byte 14, byte 15) pairs against JackTrip's rule.
#[test]
fn every_channel_byte_pair() {
    let stereo = valid_packet(32, SampleFormat::Pcm16, 2, false);
    let mono = valid_packet(32, SampleFormat::Pcm16, 1, false);
    for cin in 0..=255u8 {
        for cout in 0..=255u8 {
            let payload_channels = if cout == 0 { cin } else { cout };
            for (base, len_channels) in [(&mono, 1u8), (&stereo, 2u8)] {
                let mut b = base.clone();
                b[14] = cin;
                b[15] = cout;
                let got = parse(&b);
                if payload_channels == 0 || payload_channels > 2 {
                    assert_eq!(got, Err(PacketError::BadChannels(payload_channels)));
                } else if payload_channels == len_channels {
                    let p = got.expect("valid channel bytes");
                    assert_eq!((p.channels, p.header.channels_in), (len_channels, cin));
                    assert_eq!(p.header.channels_out, cout);
                } else if payload_channels > len_channels {
                    assert!(matches!(got, Err(PacketError::Truncated { .. })));
                } else {
                    assert!(matches!(got, Err(PacketError::TrailingBytes { .. })));
                }
            }
        }
    }
    let mut b = mono.clone();
    b[15] = CHANNELS_NONE;
    assert_eq!(parse(&b), Err(PacketError::BadChannels(255)));
}

#[test]
fn every_frames_value() {
    let base = valid_packet(32, SampleFormat::Pcm16, 1, false);
    for frames in 0..=u16::MAX {
        let mut b = base.clone();
        b[10..12].copy_from_slice(&frames.to_le_bytes());
        let got = parse(&b);
        match frames {
            32 => assert!(got.is_ok()),
            64 | 128 | 256 => assert!(matches!(got, Err(PacketError::Truncated { .. }))),
            // Read as Opus: the last 8 bytes are samples, not a trailer.
            120 | 240 => assert_eq!(got, Err(PacketError::BadExtension), "{frames}"),
            _ => assert_eq!(got, Err(PacketError::BadFrames(frames)), "{frames}"),
        }
    }
}

#[test]
fn every_trailer_byte() {
    let base = valid_packet(64, SampleFormat::Pcm24, 2, true);
    let t = base.len() - EXT_LEN;
    for pos in 0..EXT_LEN {
        for val in 0..=255u8 {
            let mut b = base.clone();
            b[t + pos] = val;
            let got = parse(&b);
            let original = base[t + pos];
            let want = match pos {
                _ if val == original => Ok(()),
                0 | 1 => Err(PacketError::BadExtension),
                2 => Err(PacketError::UnsupportedVersion(val)),
                3 => Err(PacketError::UnsupportedCodec(val)),
                4 | 5 => Ok(()),
                _ => Err(PacketError::BadExtension),
            };
            assert_eq!(got.map(|_| ()), want, "trailer byte {pos} = {val}");
        }
    }
    let mut b = base.clone();
    b[t + 4] = 0x34;
    b[t + 5] = 0x12;
    assert_eq!(
        parse(&b).map(|p| p.ext.map(|e| e.stream_id)),
        Ok(Some(0x1234))
    );
}

#[test]
fn jacktrip_exit_signal() {
    assert_eq!(parse(&[0xFF; 63]), Err(PacketError::ExitSignal));
    for i in 0..63 {
        let mut b = [0xFFu8; 63];
        b[i] = 0xFE;
        assert_ne!(parse(&b), Err(PacketError::ExitSignal));
        assert!(parse(&b).is_err(), "63 bytes are never audio");
    }
    assert_eq!(parse(&[0xFF; 62]), Err(PacketError::BadRate(0xFF)));
    assert_eq!(parse(&[0xFF; 64]), Err(PacketError::BadRate(0xFF)));
}

/// A straightforward reading of the byte layout, used as the oracle below.
fn oracle(b: &[u8]) -> Result<(), &'static str> {
    if b.len() == 63 && b.iter().all(|&x| x == 255) {
        return Err("ExitSignal");
    }
    if b.len() > 2072 {
        return Err("Oversized");
    }
    if b.len() < 16 {
        return Err("Truncated");
    }
    if b[12] > 6 {
        return Err("BadRate");
    }
    let size = match b[13] {
        16 => 2,
        24 => 3,
        32 => 4,
        _ => return Err("BadBits"),
    };
    let ch = if b[15] == 0 { b[14] } else { b[15] } as usize;
    if ch != 1 && ch != 2 {
        return Err("BadChannels");
    }
    let frames = b[10] as usize + 256 * b[11] as usize;
    if frames == 120 || frames == 240 {
        return opus_oracle(b, frames, ch);
    }
    if ![32, 64, 128, 256].contains(&frames) {
        return Err("BadFrames");
    }
    let end = 16 + frames * ch * size;
    if b.len() < end {
        Err("Truncated")
    } else if b.len() == end {
        Ok(())
    } else if b.len() != end + 8 {
        Err("TrailingBytes")
    } else if &b[end..end + 2] != b"TU" {
        Err("BadExtension")
    } else if b[end + 2] != 1 {
        Err("UnsupportedVersion")
    } else if b[end + 3] != 0 {
        Err("UnsupportedCodec")
    } else if b[end + 6] != 0 || b[end + 7] != 0 {
        Err("BadExtension")
    } else {
        Ok(())
    }
}

/// The oracle's reading of a packet with Opus frames, from the Opus section of the module docs.
fn opus_oracle(b: &[u8], frames: usize, ch: usize) -> Result<(), &'static str> {
    let n = b.len();
    if n < 25 {
        return Err("Truncated");
    }
    let t = &b[n - 8..];
    if &t[..2] != b"TU" {
        Err("BadExtension")
    } else if t[2] != 1 {
        Err("UnsupportedVersion")
    } else if t[3] == 0 {
        Err("BadFrames")
    } else if t[3] != 1 {
        Err("UnsupportedCodec")
    } else if b[12] != 3 {
        Err("BadRate")
    } else if b[13] != 16 {
        Err("BadBits")
    } else {
        // The reserved field is the redundant copy's length: it leaves at least one byte of the
        // frame, and both parts are within the PCM16 bound.
        let redundant = usize::from(u16::from_le_bytes([t[6], t[7]]));
        let max = frames * ch * 2;
        if redundant > max || redundant >= n - 24 || n - 24 - redundant > max {
            Err("BadOpusPayload")
        } else {
            Ok(())
        }
    }
}

/// Seeded mutations of valid packets (byte flips, cuts, appends) against the oracle.
#[test]
fn mutated_packets_match_oracle() {
    let mut rng = Rng::new(0xDEAD_BEEF_CAFE_F00D);
    let mut oks = 0;
    for _ in 0..20_000 {
        let frames = BLOCK_SIZES[rng.below(4) as usize];
        let format = FORMATS[rng.below(3) as usize];
        let mut b = if rng.below(4) == 0 {
            let frames = OPUS_FRAMES[rng.below(2) as usize];
            let channels = 1 + rng.below(2) as u8;
            let most = usize::from(frames) * usize::from(channels) * 2;
            valid_opus(frames, channels, 1 + rng.below(most as u64) as usize)
        } else {
            valid_packet(frames, format, 1 + rng.below(2) as u8, rng.below(2) == 0)
        };
        for _ in 0..rng.below(3) {
            match rng.below(4) {
                0 if b.len() >= HEADER_LEN => {
                    let i = rng.below(HEADER_LEN as u64) as usize;
                    b[i] = rng.byte();
                }
                1 if !b.is_empty() => {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] = rng.byte();
                }
                2 => b.truncate(rng.below(b.len() as u64 + 1) as usize),
                _ => b.extend((0..rng.below(12)).map(|_| rng.byte())),
            }
        }
        let got = parse(&b);
        assert_eq!(
            got.map(|_| ()).map_err(|e| e.name()),
            oracle(&b),
            "{b:02x?}"
        );
        oks += usize::from(got.is_ok());
    }
    assert!(
        oks > 2000,
        "the mutations leave enough valid packets ({oks})"
    );
}

/// 100k seeded random byte strings: parse never panics; accepted ones decode to finite
/// samples in [-1, 1] and survive re-encoding. Lengths are drawn so that some land on valid
/// sizes, and some cases start from a valid header with random bytes after it.
#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(0x0123_4567_89AB_CDEF);
    let mut buf = vec![0u8; MAX_PACKET_LEN + 64];
    let mut left = [0f32; MAX_FRAMES];
    let mut right = [0f32; MAX_FRAMES];
    let mut out = [0u8; MAX_PACKET_LEN];
    let mut accepted = 0;
    for case in 0..100_000u32 {
        let frames = BLOCK_SIZES[rng.below(4) as usize];
        let format = FORMATS[rng.below(3) as usize];
        let ch = 1 + rng.below(2) as u8;
        let with_ext = rng.below(2) == 0;
        let len = match case % 4 {
            0 => rng.below(buf.len() as u64 + 1) as usize,
            1 => rng.below(80) as usize,
            _ => {
                HEADER_LEN
                    + usize::from(frames) * usize::from(ch) * format.bytes()
                    + if with_ext { EXT_LEN } else { 0 }
            }
        };
        for x in buf[..len].iter_mut() {
            *x = rng.byte();
        }
        if case % 4 == 2 {
            // A header that matches the length (mostly), random samples and time stamp.
            buf[10..12].copy_from_slice(&frames.to_le_bytes());
            buf[12] = rng.below(8) as u8;
            buf[13] = format.bits();
            buf[14] = ch;
            buf[15] = if rng.below(2) == 0 { 0 } else { ch };
            if with_ext && rng.below(4) != 0 {
                let id = rng.byte();
                buf[len - 8..len].copy_from_slice(&[0x54, 0x55, 1, 0, id, 7, 0, 0]);
            }
        }
        let Ok(p) = parse(&buf[..len]) else { continue };
        accepted += 1;
        assert_eq!(oracle(&buf[..len]), Ok(()));
        if p.is_opus() {
            assert_eq!(p.decode_stereo(&mut left, &mut right), 0);
            let (frame, copy) = (p.payload.len(), p.redundant.len());
            out[HEADER_LEN..][..frame].copy_from_slice(p.payload);
            out[HEADER_LEN + frame..len - EXT_LEN].copy_from_slice(p.redundant);
            let ext = p.ext.expect("an Opus packet has a trailer");
            let n = encode_opus_redundant(&p.header, ext.stream_id, frame, copy, &mut out);
            assert_eq!(n.map(|n| &out[..n]), Ok(&buf[..len]));
            continue;
        }
        assert_eq!(p.decode_stereo(&mut left, &mut right), p.frames());
        let n = p.frames();
        assert!(left[..n]
            .iter()
            .chain(&right[..n])
            .all(|x| x.is_finite() && x.abs() <= 1.0));
        let planar_all = [&left[..n], &right[..n]];
        let planar = &planar_all[..usize::from(p.channels)];
        let len2 = encode(&p.header, p.ext.as_ref(), planar, &mut out).expect("re-encodes");
        assert_eq!(len2, len);
        let q = parse(&out[..len2]).expect("re-encoded packet parses");
        assert_eq!((q.header, q.channels, q.ext), (p.header, p.channels, p.ext));
        let (l2, r2) = decode_both(&q);
        let tol = bound(p.header.format);
        for k in 0..n {
            assert!((l2[k] - left[k]).abs() <= tol && (r2[k] - right[k]).abs() <= tol);
        }
    }
    assert!(
        accepted > 10_000,
        "enough random cases were valid packets ({accepted})"
    );
}

// ---------------------------------------------------------------------------------------
// encode errors, short outputs, messages
// ---------------------------------------------------------------------------------------

#[test]
fn encode_rejects_inconsistent_input() {
    let tone = [0.25f32; 256];
    let mut out = [0xEEu8; MAX_PACKET_LEN];
    let h = header(128, SampleFormat::Pcm16, 2);
    for frames in [0u16, 16, 100, 512] {
        let mut bad = h;
        bad.frames = frames;
        let got = encode(&bad, None, &[&tone, &tone], &mut out);
        assert_eq!(got, Err(PacketError::BadFrames(frames)));
    }
    for (cin, cout, ch) in [(0, 0, 0), (3, 0, 3), (1, 255, 255), (2, 7, 7)] {
        let mut bad = h;
        bad.channels_in = cin;
        bad.channels_out = cout;
        let got = encode(&bad, None, &[&tone, &tone], &mut out);
        assert_eq!(got, Err(PacketError::BadChannels(ch)));
    }
    assert_eq!(
        encode(&h, None, &[&tone], &mut out),
        Err(PacketError::ChannelMismatch {
            header: 2,
            planar: 1
        })
    );
    assert_eq!(
        encode(&h, None, &[&tone, &tone[..127]], &mut out),
        Err(PacketError::ShortInput {
            channel: 1,
            len: 127,
            frames: 128
        })
    );
    let opus = Extension {
        stream_id: 1,
        codec: 1,
    };
    assert_eq!(
        encode(&h, Some(&opus), &[&tone, &tone], &mut out),
        Err(PacketError::UnsupportedCodec(1))
    );
    let ext = Extension {
        stream_id: 1,
        codec: CODEC_PCM,
    };
    let needed = HEADER_LEN + 128 * 2 * 2 + EXT_LEN;
    for size in 0..needed {
        assert_eq!(
            encode(&h, Some(&ext), &[&tone, &tone], &mut out[..size]),
            Err(PacketError::BufferTooSmall {
                needed,
                available: size
            })
        );
    }
    assert!(
        out.iter().all(|&b| b == 0xEE),
        "errors leave the buffer untouched"
    );
    // Longer input slices are fine: only the first `frames` samples are used.
    assert_eq!(
        encode(&h, Some(&ext), &[&tone, &tone], &mut out),
        Ok(needed)
    );
}

#[test]
fn decode_into_short_outputs_writes_what_fits() {
    let bytes = valid_packet(128, SampleFormat::Pcm16, 2, false);
    let p = parse(&bytes).expect("valid");
    let (full_l, full_r) = decode_both(&p);
    let mut l = [f32::NAN; 50];
    let mut r = [f32::NAN; 70];
    p.decode_stereo(&mut l, &mut r);
    assert_eq!(&l[..], &full_l[..50]);
    assert_eq!(&r[..50], &full_r[..50]);
    assert!(r[50..].iter().all(|x| x.is_nan()));
    p.decode_stereo(&mut [], &mut []);
}

#[test]
fn error_codes_names_and_messages() {
    let all = [
        PacketError::Truncated { len: 3, needed: 16 },
        PacketError::TrailingBytes {
            len: 81,
            expected: 80,
        },
        PacketError::Oversized { len: 9999 },
        PacketError::BadRate(7),
        PacketError::BadBits(8),
        PacketError::BadChannels(3),
        PacketError::BadFrames(100),
        PacketError::BadExtension,
        PacketError::UnsupportedVersion(2),
        PacketError::UnsupportedCodec(5),
        PacketError::ExitSignal,
        PacketError::BufferTooSmall {
            needed: 80,
            available: 10,
        },
        PacketError::ChannelMismatch {
            header: 2,
            planar: 1,
        },
        PacketError::ShortInput {
            channel: 1,
            len: 3,
            frames: 32,
        },
        PacketError::BadOpusPayload { len: 241 },
    ];
    for (i, e) in all.iter().enumerate() {
        assert_eq!(usize::from(e.code()), i + 1, "codes are 1..=15 in order");
        let msg = e.to_string();
        assert!(!msg.is_empty() && !e.name().is_empty());
        let boxed: Box<dyn std::error::Error> = Box::new(*e);
        assert_eq!(boxed.to_string(), msg);
    }
    assert!(all[0].to_string().contains("3 bytes, needs 16"));
    assert!(all[6].to_string().contains("100"));
    assert!(all[14].to_string().contains("241 bytes"));
    assert_eq!(all[14].name(), "BadOpusPayload");
}

#[test]
fn rounding_is_half_away_from_zero_at_every_half_and_its_neighbours() {
    let mut cases: Vec<f32> = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        f32::NAN,
        32_767.0,
        -32_767.0,
    ];
    for k in -32_768i32..=32_767 {
        for base in [k as f32, k as f32 + 0.5] {
            // The floats beside it, one toward zero and one away.
            let bits = base.to_bits();
            cases.push(base);
            if base != 0.0 {
                cases.extend([f32::from_bits(bits + 1), f32::from_bits(bits - 1)]);
            }
        }
    }
    let mut x: u32 = 0x1234_5678;
    for _ in 0..100_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        cases.push((x as f32 / u32::MAX as f32 - 0.5) * 65_534.0);
    }
    for p in cases {
        assert_eq!(super::round_half_away_f32(p), p.round() as i32, "{p:e}");
        let q = f64::from(p) * 256.0;
        assert_eq!(super::round_half_away_f64(q), q.round() as i32, "{q:e}");
        let h = q + 0.5;
        assert_eq!(super::round_half_away_f64(h), h.round() as i32, "{h:e}");
    }
}

// ---------------------------------------------------------------------------------------
// Opus packets (codec 1)
// ---------------------------------------------------------------------------------------

/// Stand-in Opus bytes: a CELT-only TOC byte then seeded bytes. The packet layer never reads
/// them.
fn opus_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    (0..len)
        .map(|i| if i == 0 { 0xE8 } else { rng.byte() })
        .collect()
}

fn opus_header(frames: u16, channels: u8) -> Header {
    header(frames, SampleFormat::Pcm16, channels)
}

/// A valid Opus packet of `payload_len` seeded Opus bytes, stream id 0x0B0A.
fn valid_opus(frames: u16, channels: u8, payload_len: usize) -> Vec<u8> {
    let mut out = vec![0u8; MAX_PACKET_LEN];
    out[HEADER_LEN..HEADER_LEN + payload_len]
        .copy_from_slice(&opus_bytes(payload_len, payload_len as u64));
    let n = encode_opus(
        &opus_header(frames, channels),
        0x0B0A,
        payload_len,
        &mut out,
    )
    .expect("valid Opus packet");
    out.truncate(n);
    out
}

/// One Opus packet written out byte by byte from the layout in the module docs.
#[test]
fn golden_bytes_by_hand_opus_stereo_240() {
    let opus = [0xEC, 0x01, 0x80, 0xFF, 0x00, 0x7F];
    let mut bytes = vec![
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // timestamp
        0x5A, 0xA5, // seq 0xA55A
        0xF0, 0x00, // 240 frames
        0x03, // 48 kHz
        0x10, // 16 (not read for Opus)
        0x02, // channels in: 2
        0x00, // channels out: same as in
    ];
    bytes.extend_from_slice(&opus);
    bytes.extend_from_slice(&[0x54, 0x55, 0x01, 0x01, 0x34, 0x12, 0x00, 0x00]);
    let p = parse(&bytes).expect("hand-written Opus packet parses");
    assert_eq!(p.header, opus_header(240, 2));
    assert_eq!(p.channels, 2);
    assert_eq!(
        p.ext,
        Some(Extension {
            stream_id: 0x1234,
            codec: CODEC_OPUS
        })
    );
    assert_eq!(p.payload, &opus[..]);
    assert!(p.is_opus());
    assert_eq!(p.frames(), 240);
    let mut out = [0u8; MAX_PACKET_LEN];
    out[HEADER_LEN..HEADER_LEN + opus.len()].copy_from_slice(&opus);
    let n = encode_opus(&p.header, 0x1234, opus.len(), &mut out).expect("frames");
    assert_eq!(&out[..n], &bytes[..]);
}

/// Every Opus frame size, channel count and payload length from 1 to the bound: encode_opus
/// frames the bytes in place, parse gives them back, and PCM decode writes nothing.
#[test]
fn opus_round_trip_every_payload_length() {
    let mut out = [0u8; MAX_PACKET_LEN];
    let mut l = [f32::NAN; MAX_FRAMES];
    let mut r = [f32::NAN; MAX_FRAMES];
    for frames in OPUS_FRAMES {
        for (cin, cout) in [(1u8, 0u8), (2, 0), (2, 1), (1, 2)] {
            let h = Header {
                channels_in: cin,
                channels_out: cout,
                ..opus_header(frames, 1)
            };
            let channels = h.payload_channels();
            let most = usize::from(frames) * usize::from(channels) * 2;
            for len in 1..=most {
                let opus = opus_bytes(len, len as u64 ^ u64::from(frames));
                out[HEADER_LEN..HEADER_LEN + len].copy_from_slice(&opus);
                let stream = (len * 7) as u16;
                let n = encode_opus(&h, stream, len, &mut out).expect("in bounds");
                assert_eq!(n, HEADER_LEN + len + EXT_LEN);
                let p = parse(&out[..n]).expect("parses");
                assert_eq!((p.header, p.channels), (h, channels));
                assert_eq!(
                    p.ext,
                    Some(Extension {
                        stream_id: stream,
                        codec: CODEC_OPUS
                    })
                );
                assert_eq!(p.payload, &opus[..]);
                assert!(p.is_opus());
                assert_eq!(p.decode_stereo(&mut l, &mut r), 0);
            }
            assert!(l.iter().chain(&r).all(|x| x.is_nan()), "nothing decoded");
            // One byte over the bound.
            let n = HEADER_LEN + most + 1 + EXT_LEN;
            let mut b = valid_opus(frames, channels, most);
            b.insert(HEADER_LEN, 0);
            b[14] = cin;
            b[15] = cout;
            assert_eq!(b.len(), n);
            assert_eq!(
                parse(&b),
                Err(PacketError::BadOpusPayload { len: most + 1 })
            );
        }
    }
}

#[test]
fn pcm_packets_are_not_opus() {
    for ext in [false, true] {
        let b = valid_packet(128, SampleFormat::Pcm16, 2, ext);
        assert!(!parse(&b).expect("valid").is_opus());
    }
}

#[test]
fn opus_prefixes_and_lengths() {
    let b = valid_opus(240, 2, 40);
    for cut in 0..b.len() {
        let got = parse(&b[..cut]);
        if cut < HEADER_LEN {
            assert_eq!(
                got,
                Err(PacketError::Truncated {
                    len: cut,
                    needed: HEADER_LEN
                })
            );
        } else if cut < HEADER_LEN + 1 + EXT_LEN {
            assert_eq!(
                got,
                Err(PacketError::Truncated {
                    len: cut,
                    needed: HEADER_LEN + 1 + EXT_LEN
                })
            );
        } else {
            // The last 8 bytes are no longer the trailer (the seeded bytes hold no 'T' 'U').
            assert_eq!(got, Err(PacketError::BadExtension), "cut {cut}");
        }
    }
    // Header and trailer alone: an empty Opus payload.
    let mut empty = b[..HEADER_LEN].to_vec();
    empty.extend_from_slice(&b[b.len() - EXT_LEN..]);
    assert_eq!(
        parse(&empty),
        Err(PacketError::Truncated {
            len: 24,
            needed: 25
        })
    );
    // Without its trailer.
    assert_eq!(
        parse(&b[..b.len() - EXT_LEN]),
        Err(PacketError::BadExtension)
    );
    // Longest Opus packet, and an oversized buffer still reported as Oversized first.
    let max = valid_opus(240, 2, 960);
    assert_eq!(max.len(), HEADER_LEN + 960 + EXT_LEN);
    assert!(parse(&max).is_ok());
    let mut huge = max[..HEADER_LEN].to_vec();
    huge.resize(MAX_PACKET_LEN + 1, 0);
    assert_eq!(
        parse(&huge),
        Err(PacketError::Oversized {
            len: MAX_PACKET_LEN + 1
        })
    );
}

#[test]
fn opus_every_trailer_byte() {
    for frames in OPUS_FRAMES {
        let base = valid_opus(frames, 1, 30);
        let t = base.len() - EXT_LEN;
        for pos in 0..EXT_LEN {
            for val in 0..=255u8 {
                let mut b = base.clone();
                b[t + pos] = val;
                let want = match pos {
                    _ if val == base[t + pos] => Ok(()),
                    0 | 1 => Err(PacketError::BadExtension),
                    2 => Err(PacketError::UnsupportedVersion(val)),
                    3 if val == CODEC_PCM => Err(PacketError::BadFrames(frames)),
                    3 => Err(PacketError::UnsupportedCodec(val)),
                    4 | 5 => Ok(()),
                    // The redundant copy's length: up to 29 of the 30 Opus bytes.
                    6 if val < 30 => Ok(()),
                    _ => Err(PacketError::BadOpusPayload {
                        len: usize::from(u16::from_le_bytes(if pos == 6 {
                            [val, 0]
                        } else {
                            [0, val]
                        })),
                    }),
                };
                assert_eq!(parse(&b).map(|_| ()), want, "trailer byte {pos} = {val}");
            }
        }
    }
    // A PCM block size with an Opus trailer.
    let mut b = valid_packet(128, SampleFormat::Pcm16, 1, true);
    let t = b.len() - EXT_LEN;
    b[t + 3] = CODEC_OPUS;
    assert_eq!(parse(&b), Err(PacketError::UnsupportedCodec(1)));
}

#[test]
fn opus_every_rate_bits_and_channel_byte() {
    let base = valid_opus(120, 1, 30);
    for code in 0..=255u8 {
        let mut b = base.clone();
        b[12] = code;
        let want = if code == 3 {
            Ok(())
        } else {
            Err(PacketError::BadRate(code))
        };
        assert_eq!(parse(&b).map(|_| ()), want, "rate code {code}");
    }
    for bits in 0..=255u8 {
        let mut b = base.clone();
        b[13] = bits;
        let want = if bits == 16 {
            Ok(())
        } else {
            Err(PacketError::BadBits(bits))
        };
        assert_eq!(parse(&b).map(|_| ()), want, "bits {bits}");
    }
    // A bad rate or resolution is reported before the trailer when PCM has no such value
    // either, and after it (only once the packet is known to be Opus) otherwise.
    let mut b = base.clone();
    b[12] = 2;
    let t = b.len() - EXT_LEN;
    b[t] = 0;
    assert_eq!(parse(&b), Err(PacketError::BadExtension));
    b[12] = 7;
    assert_eq!(parse(&b), Err(PacketError::BadRate(7)));
    for cin in 0..=255u8 {
        for cout in 0..=255u8 {
            let mut b = base.clone();
            b[14] = cin;
            b[15] = cout;
            let ch = if cout == 0 { cin } else { cout };
            let want = if ch == 1 || ch == 2 {
                Ok(ch)
            } else {
                Err(PacketError::BadChannels(ch))
            };
            assert_eq!(parse(&b).map(|p| p.channels), want, "{cin} {cout}");
        }
    }
}

#[test]
fn encode_opus_rejects_bad_input_and_leaves_out_untouched() {
    let mut out = [0xEEu8; MAX_PACKET_LEN];
    let h = opus_header(240, 2);
    for frames in [0u16, 32, 64, 119, 121, 128, 239, 241, 256, 480, 960] {
        let bad = Header { frames, ..h };
        assert_eq!(
            encode_opus(&bad, 1, 10, &mut out),
            Err(PacketError::BadFrames(frames))
        );
    }
    for rate in [
        SampleRate::Hz44100,
        SampleRate::Hz96000,
        SampleRate::Hz22050,
    ] {
        let bad = Header { rate, ..h };
        assert_eq!(
            encode_opus(&bad, 1, 10, &mut out),
            Err(PacketError::BadRate(rate.code()))
        );
    }
    for format in [SampleFormat::Pcm24, SampleFormat::Float32] {
        let bad = Header { format, ..h };
        assert_eq!(
            encode_opus(&bad, 1, 10, &mut out),
            Err(PacketError::BadBits(format.bits()))
        );
    }
    for (cin, cout, ch) in [(0, 0, 0), (3, 0, 3), (1, 255, 255), (2, 7, 7)] {
        let bad = Header {
            channels_in: cin,
            channels_out: cout,
            ..h
        };
        assert_eq!(
            encode_opus(&bad, 1, 10, &mut out),
            Err(PacketError::BadChannels(ch))
        );
    }
    for len in [0, 961, 5000, usize::MAX] {
        assert_eq!(
            encode_opus(&h, 1, len, &mut out),
            Err(PacketError::BadOpusPayload { len })
        );
    }
    let mono = opus_header(120, 1);
    assert_eq!(
        encode_opus(&mono, 1, 241, &mut out),
        Err(PacketError::BadOpusPayload { len: 241 })
    );
    // The first failing check wins: frames, then rate, then format.
    let worst = Header {
        frames: 100,
        rate: SampleRate::Hz44100,
        format: SampleFormat::Float32,
        channels_in: 9,
        ..h
    };
    assert_eq!(
        encode_opus(&worst, 1, 0, &mut out[..0]),
        Err(PacketError::BadFrames(100))
    );
    let needed = HEADER_LEN + 50 + EXT_LEN;
    for size in 0..needed {
        assert_eq!(
            encode_opus(&h, 1, 50, &mut out[..size]),
            Err(PacketError::BufferTooSmall {
                needed,
                available: size
            })
        );
    }
    assert!(
        out.iter().all(|&b| b == 0xEE),
        "errors leave the buffer untouched"
    );
    // Exactly large enough; the Opus bytes in between are not touched.
    assert_eq!(encode_opus(&h, 1, 50, &mut out[..needed]), Ok(needed));
    assert!(out[HEADER_LEN..HEADER_LEN + 50].iter().all(|&b| b == 0xEE));
    assert!(out[needed..].iter().all(|&b| b == 0xEE));
}

/// PCM encode refuses an Opus trailer: Opus goes through encode_opus.
#[test]
fn encode_refuses_the_opus_codec() {
    let tone = [0.0f32; 256];
    let mut out = [0xEEu8; MAX_PACKET_LEN];
    let ext = Extension {
        stream_id: 3,
        codec: CODEC_OPUS,
    };
    for frames in [128, 120] {
        let h = header(frames, SampleFormat::Pcm16, 1);
        let want = if frames == 120 {
            PacketError::BadFrames(120)
        } else {
            PacketError::UnsupportedCodec(1)
        };
        assert_eq!(encode(&h, Some(&ext), &[&tone], &mut out), Err(want));
    }
    assert!(out.iter().all(|&b| b == 0xEE));
}
