//! Fuzzes `packet::parse` with arbitrary bytes. When a PCM packet is accepted, it must decode to
//! finite samples in [-1, 1], re-encode to the same length with the same header and trailer,
//! and the re-encoded packet must parse and decode to within one step of the format. An
//! accepted Opus packet must decode to nothing as PCM and be framed back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tutti_core::packet::{
    encode, encode_opus_redundant, parse, SampleFormat, EXT_LEN, HEADER_LEN, MAX_FRAMES,
    MAX_PACKET_LEN,
};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = parse(data) else { return };
    assert!(p.channels == 1 || p.channels == 2);
    assert!(data.len() <= MAX_PACKET_LEN);

    let n = p.frames();
    let mut left = [0f32; MAX_FRAMES];
    let mut right = [0f32; MAX_FRAMES];
    if p.is_opus() {
        assert_eq!(p.decode_stereo(&mut left, &mut right), 0);
        let mut out = [0u8; MAX_PACKET_LEN];
        let (frame, copy) = (p.payload.len(), p.redundant.len());
        out[HEADER_LEN..][..frame].copy_from_slice(p.payload);
        out[HEADER_LEN + frame..data.len() - EXT_LEN].copy_from_slice(p.redundant);
        let ext = p.ext.expect("an Opus packet has a trailer");
        let len = encode_opus_redundant(&p.header, ext.stream_id, frame, copy, &mut out)
            .expect("accepted Opus packets re-frame");
        assert_eq!(&out[..len], data);
        return;
    }
    assert_eq!(p.decode_stereo(&mut left, &mut right), n);
    for x in left[..n].iter().chain(&right[..n]) {
        assert!(x.is_finite() && x.abs() <= 1.0, "decoded {x}");
    }

    let planar_all = [&left[..n], &right[..n]];
    let planar = &planar_all[..usize::from(p.channels)];
    let mut out = [0u8; MAX_PACKET_LEN];
    let len =
        encode(&p.header, p.ext.as_ref(), planar, &mut out).expect("accepted packets re-encode");
    assert_eq!(len, data.len());
    let q = parse(&out[..len]).expect("re-encoded packet parses");
    assert_eq!((q.header, q.channels, q.ext), (p.header, p.channels, p.ext));
    // Floats already in [-1, 1] survive exactly; integers move by at most one rounding step.
    let step = match p.header.format {
        SampleFormat::Pcm16 => 1.51 / 32768.0,
        SampleFormat::Pcm24 => 1.5 / 8_388_608.0,
        SampleFormat::Float32 => 0.0,
    };
    let mut l2 = [0f32; MAX_FRAMES];
    let mut r2 = [0f32; MAX_FRAMES];
    q.decode_stereo(&mut l2, &mut r2);
    for k in 0..n {
        assert!((l2[k] - left[k]).abs() <= step, "left {k}");
        assert!((r2[k] - right[k]).abs() <= step, "right {k}");
    }
});
