//! Meters messages against the golden vectors in `tests/vectors/meters.json` (parse, and the
//! writer giving the same bytes), the level codes, the writer's refusals, every cut of a valid
//! message, and the TypeScript reader's constants.

use super::*;
use crate::testing::{assert_every_cut_refused, assert_ts_exports};
use crate::vectors::{assert_refused, unhex, Json, JsonReader};

fn vectors() -> Json {
    JsonReader::parse(include_str!("../../../tests/vectors/meters.json"))
}

/// An entry's four levels in dBFS, `None` for silence.
fn dbfs_of(e: &Json) -> Vec<Option<f64>> {
    e.get("dbfs")
        .arr()
        .iter()
        .map(|d| (*d != Json::Null).then(|| d.num()))
        .collect()
}

#[test]
fn golden_messages_parse_to_their_levels_and_write_to_their_bytes() {
    let doc = vectors();
    assert_eq!(doc.get("version").num(), f64::from(METERS_VERSION));
    for v in doc.get("valid").arr() {
        let name = v.get("name").str();
        let bytes = unhex(v.get("hex").str());
        let want = v.get("entries").arr();
        let meters = parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(meters.len(), want.len(), "{name}");
        for (got, w) in meters.entries().zip(want) {
            assert_eq!(f64::from(got.stream), w.get("stream").num(), "{name}");
            for (code, db) in got.levels.iter().zip(dbfs_of(w)) {
                match (code_dbfs(*code), db) {
                    (Some(a), Some(b)) => assert!((f64::from(a) - b).abs() < 0.005, "{name}"),
                    (a, b) => assert_eq!(a.is_none(), b.is_none(), "{name}"),
                }
            }
        }

        let mut buf = vec![0u8; MAX_METERS_LEN];
        let mut w = MetersWriter::new(&mut buf).unwrap();
        for e in want {
            let linear = dbfs_of(e)
                .iter()
                .map(|d| d.map_or(0.0, |db| 10f64.powf(db / 20.0) as f32))
                .collect::<Vec<_>>();
            let stream = e.get("stream").num() as u16;
            w.push(stream, [linear[0], linear[1], linear[2], linear[3]])
                .unwrap();
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
fn golden_bad_messages_give_their_errors() {
    assert_refused(vectors().get("invalid").arr(), |bytes| {
        parse(bytes).err().map(|e| e.name())
    });
}

#[test]
fn every_cut_of_a_message_is_refused() {
    let bytes = unhex(vectors().get("valid").arr()[1].get("hex").str());
    assert_every_cut_refused(&bytes, |b| parse(b).is_ok());
}

#[test]
fn level_codes_are_hundredths_of_a_db_below_full_scale() {
    assert_eq!(level_code(1.0), 0);
    assert_eq!(
        level_code(2.0),
        0,
        "louder than full scale reads full scale"
    );
    assert_eq!(level_code(0.1), 2000);
    assert_eq!(level_code(0.5), 602);
    assert_eq!(level_code(1e-7), 14_000);
    for silent in [0.0, -0.5, f32::NAN, f32::INFINITY, 1e-30] {
        let code = level_code(silent);
        assert!(
            code == SILENT_CODE || code_dbfs(code).is_some_and(|db| db < -290.0),
            "{silent}: {code}"
        );
    }
    assert_eq!(level_code(0.0), SILENT_CODE);
    assert_eq!(code_dbfs(SILENT_CODE), None);
    assert_eq!(code_dbfs(2301), Some(-23.01));
}

#[test]
fn the_writer_refuses_what_does_not_fit() {
    let mut small = [0u8; METERS_HEADER_LEN + METER_ENTRY_LEN];
    let mut w = MetersWriter::new(&mut small).unwrap();
    w.push(1, [0.5; 4]).unwrap();
    assert_eq!(w.push(2, [0.5; 4]), Err(MetersError::Full));
    assert_eq!(w.count(), 1);
    assert_eq!(w.finish(), Ok(small.len()));
    assert_eq!(
        MetersWriter::new(&mut [0u8; 4]).err(),
        Some(MetersError::Full)
    );
    let mut buf = [0u8; 16];
    assert_eq!(
        MetersWriter::new(&mut buf).unwrap().finish(),
        Err(MetersError::Empty)
    );

    let mut big = vec![0u8; MAX_METERS_LEN + 100];
    let mut w = MetersWriter::new(&mut big).unwrap();
    for k in 0..MAX_METER_ENTRIES {
        w.push(k as u16, [0.25; 4]).unwrap();
    }
    assert_eq!(w.push(9, [0.25; 4]), Err(MetersError::Full));
    let len = w.finish().unwrap();
    assert_eq!(len, MAX_METERS_LEN);
    assert_eq!(parse(&big[..len]).unwrap().len(), MAX_METER_ENTRIES);
}

#[test]
fn the_typescript_reader_has_the_same_constants() {
    let ts = include_str!("../../../app/src/net/meters.ts");
    assert!(ts.contains("METERS_MAGIC: readonly [number, number] = [0x54, 0x4d];"));
    assert_ts_exports(
        ts,
        "meters.ts",
        &[
            ("METERS_VERSION", f64::from(METERS_VERSION)),
            ("METERS_HEADER_LEN", METERS_HEADER_LEN as f64),
            ("METER_ENTRY_LEN", METER_ENTRY_LEN as f64),
            ("MAX_METER_ENTRIES", MAX_METER_ENTRIES as f64),
            ("SILENT_CODE", f64::from(SILENT_CODE)),
        ],
    );
}
