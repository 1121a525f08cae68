//! Bundles against the golden vectors in `tests/vectors/bundles.json` (parse, and the writer
//! giving the same bytes), the writer's refusals, every cut of a valid bundle, and the TypeScript
//! reader's constants.

use super::*;
use crate::packet;
use crate::testing::{assert_every_cut_refused, assert_ts_exports};
use crate::vectors::{assert_refused, unhex, Json, JsonReader};

fn vectors() -> Json {
    JsonReader::parse(include_str!("../../../tests/vectors/bundles.json"))
}

fn packets_of(v: &Json) -> Vec<Vec<u8>> {
    v.get("packets")
        .arr()
        .iter()
        .map(|p| unhex(p.str()))
        .collect()
}

#[test]
fn golden_bundles_parse_to_their_packets_and_write_to_their_bytes() {
    let doc = vectors();
    assert_eq!(doc.get("version").num(), f64::from(BUNDLE_VERSION));
    for v in doc.get("valid").arr() {
        let name = v.get("name").str();
        let bytes = unhex(v.get("hex").str());
        let want = packets_of(v);
        let bundle = parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(bundle.len(), want.len(), "{name}");
        let got: Vec<&[u8]> = bundle.packets().collect();
        assert_eq!(
            got,
            want.iter().map(Vec::as_slice).collect::<Vec<_>>(),
            "{name}"
        );

        let mut buf = vec![0u8; MAX_BUNDLE_LEN];
        let mut w = BundleWriter::new(&mut buf).unwrap();
        for p in &want {
            w.push(p).unwrap();
        }
        let len = w.finish().unwrap();
        assert_eq!(
            &buf[..len],
            bytes.as_slice(),
            "{name}: the writer gives the golden bytes"
        );
    }
}

#[test]
fn golden_bad_bundles_give_their_errors() {
    let doc = vectors();
    assert_refused(doc.get("invalid").arr(), |bytes| {
        parse(bytes).err().map(|e| e.name())
    });
}

#[test]
fn packets_in_a_bundle_are_packets_with_their_stream_ids() {
    // The three-formats vector's first and last packets carry trailers; the middle one has none.
    let doc = vectors();
    let v = &doc.get("valid").arr()[1];
    let bytes = unhex(v.get("hex").str());
    let streams: Vec<Option<u16>> = parse(&bytes)
        .unwrap()
        .packets()
        .map(|p| packet::parse(p).unwrap().ext.map(|e| e.stream_id))
        .collect();
    assert_eq!(streams.len(), 3);
    assert!(streams[0].is_some() && streams[1].is_none() && streams[2].is_some());
}

#[test]
fn every_cut_of_a_bundle_is_refused() {
    let doc = vectors();
    let bytes = unhex(doc.get("valid").arr()[1].get("hex").str());
    assert_every_cut_refused(&bytes, |b| parse(b).is_ok());
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        parse(&longer).err().map(|e| e.name()),
        Some("TrailingBytes")
    );
}

#[test]
fn the_writer_refuses_what_does_not_fit_and_keeps_what_it_has() {
    let p = [7u8; 100];
    // Room for the header and exactly two entries.
    let mut buf = vec![0u8; BUNDLE_HEADER_LEN + 2 * (ENTRY_LEN_BYTES + p.len())];
    let mut w = BundleWriter::new(&mut buf).unwrap();
    assert_eq!(
        w.push(&p[..HEADER_LEN - 1]),
        Err(BundleError::BadEntryLength(15))
    );
    let huge = vec![0u8; packet::MAX_PACKET_LEN + 1];
    assert_eq!(w.push(&huge), Err(BundleError::BadEntryLength(huge.len())));
    w.push(&p).unwrap();
    w.push(&p).unwrap();
    assert_eq!(w.push(&p), Err(BundleError::Full));
    assert_eq!(w.count(), 2);
    let len = w.finish().unwrap();
    assert_eq!(parse(&buf[..len]).unwrap().packets().count(), 2);

    assert_eq!(
        BundleWriter::new(&mut [0u8; 3]).err(),
        Some(BundleError::Full)
    );
    let mut buf = [0u8; 8];
    assert_eq!(
        BundleWriter::new(&mut buf).unwrap().finish(),
        Err(BundleError::Empty)
    );

    // The count is bounded whatever the buffer.
    let mut buf = vec![0u8; MAX_BUNDLE_LEN];
    let mut w = BundleWriter::new(&mut buf).unwrap();
    for _ in 0..MAX_BUNDLE_PACKETS {
        w.push(&p[..HEADER_LEN]).unwrap();
    }
    assert_eq!(w.push(&p[..HEADER_LEN]), Err(BundleError::Full));
    let len = w.finish().unwrap();
    assert_eq!(parse(&buf[..len]).unwrap().len(), MAX_BUNDLE_PACKETS);
}

#[test]
fn the_typescript_reader_uses_the_same_constants() {
    let ts = include_str!("../../../app/src/net/bundle.ts");
    // The magic is a pair there as here; the bad-magic vector holds both readers to it.
    assert!(ts.contains("BUNDLE_MAGIC: readonly [number, number] = [0x54, 0x42];"));
    assert_ts_exports(
        ts,
        "bundle.ts",
        &[
            ("BUNDLE_VERSION", f64::from(BUNDLE_VERSION)),
            ("BUNDLE_HEADER_LEN", BUNDLE_HEADER_LEN as f64),
            ("ENTRY_LEN_BYTES", ENTRY_LEN_BYTES as f64),
            ("MAX_BUNDLE_PACKETS", MAX_BUNDLE_PACKETS as f64),
        ],
    );
}
