//! Tests of the shared ring: seeded push/pop sequences against a queue model, counter wrap,
//! full and corrupt rings, two threads, the TypeScript mirror's constants, and the golden image
//! that `app/src/audio/ring.ts`'s tests read.

use super::*;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::testing::Rng;

/// Payload sizes: mostly small, some packet-sized, some up to and at the maximum.
fn payload_len(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=5 => rng.below(65) as usize,
        6..=8 => rng.below(2101) as usize,
        _ if rng.below(4) == 0 => MAX_PAYLOAD,
        _ => rng.below(MAX_PAYLOAD as u64 + 1) as usize,
    }
}

/// Payload byte `k` of a record with fill seed `seed` (the golden JSON states the same rule).
fn fill_byte(seed: u32, k: usize) -> u8 {
    (seed as usize + 7 * k) as u8
}

fn payload(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|k| fill_byte(seed, k)).collect()
}

type Entry = (u16, u32, Vec<u8>);

/// The oracle: a queue of records, and byte accounting with u64 counters that never wrap,
/// following the layout's rules in their plainest form.
struct Oracle {
    capacity: u64,
    write: u64,
    read: u64,
    queue: VecDeque<(Entry, u64)>,
    wraps: u32,
}

impl Oracle {
    fn new(capacity: usize, start: u32) -> Self {
        let start = start as u64;
        let capacity = capacity as u64;
        Oracle {
            capacity,
            write: start,
            read: start,
            queue: VecDeque::new(),
            wraps: 0,
        }
    }

    fn push(&mut self, entry: Entry) -> bool {
        let size = 8 + (entry.2.len() as u64).div_ceil(4) * 4;
        let to_end = self.capacity - self.write % self.capacity;
        let need = if size > to_end { to_end + size } else { size };
        if self.write - self.read + need > self.capacity {
            return false;
        }
        self.wraps += u32::from(need > size);
        self.write += need;
        self.queue.push_back((entry, need));
        true
    }

    fn pop(&mut self) -> Option<Entry> {
        let (entry, need) = self.queue.pop_front()?;
        self.read += need;
        Some(entry)
    }
}

fn owned(record: Record<'_>) -> Entry {
    (record.tag, record.time, record.payload.to_vec())
}

/// Seeded random interleavings of pushes and pops, run in lockstep on the pure functions over
/// a plain buffer and on a `SharedRing`, both against the oracle. Exact: every result, record
/// and counter must match; at the end both data areas must be byte-identical.
#[test]
fn random_sequences_match_oracle() {
    let starts = [
        0,
        0u32.wrapping_sub(4),
        0u32.wrapping_sub(20_000),
        0x8000_0004,
    ];
    for (seed, &start) in (1u64..).zip(starts.iter()) {
        let mut rng = Rng::spread(seed);
        let mut oracle = Oracle::new(MIN_CAPACITY, start);
        let mut data = vec![0u8; MIN_CAPACITY];
        let (mut write, mut read) = (start, start);
        let mut ring = SharedRing::with_start(MIN_CAPACITY, start).expect("valid ring");
        let (mut refused, mut popped, mut empties, mut wrapped_counter) = (0u32, 0u32, 0, false);
        for step in 0..30_000u32 {
            // Alternate push-heavy and pop-heavy phases so the ring fills and drains.
            let push_percent = if (step / 700) % 2 == 0 { 75 } else { 35 };
            let (mut producer, mut consumer) = ring.split();
            if rng.below(100) < push_percent {
                let entry = (rng.next_u64() as u16, rng.next_u64() as u32, {
                    let len = payload_len(&mut rng);
                    payload(rng.next_u64() as u32, len)
                });
                let pure = write_record(&mut data, write, read, entry.0, entry.1, &entry.2);
                let shared = producer.push(entry.0, entry.1, &entry.2);
                let expected = oracle.push(entry);
                assert_eq!(pure.is_ok(), expected, "seed {seed} step {step}");
                match pure {
                    Ok(next) => {
                        wrapped_counter |= next < write;
                        write = next;
                        assert_eq!(shared, Ok(()));
                    }
                    Err(e) => {
                        assert_eq!(e, RingError::Full);
                        assert_eq!(shared, Err(RingError::Full));
                        refused += 1;
                    }
                }
                assert_eq!(write, oracle.write as u32);
            } else {
                let expected = oracle.pop();
                let pure = read_record(&data, read, write).expect("valid ring");
                let shared = consumer.pop(owned).expect("valid ring");
                assert_eq!(
                    pure.map(|(r, _)| owned(r)),
                    expected,
                    "seed {seed} step {step}"
                );
                assert_eq!(shared, expected);
                match pure {
                    Some((_, next)) => {
                        read = next;
                        popped += 1;
                    }
                    None => empties += 1,
                }
                assert_eq!(read, oracle.read as u32);
            }
            let c = ring.counters();
            assert_eq!((c.write, c.read), (write, read));
            assert_eq!(
                (c.dropped_records, c.records_read, c.resyncs),
                (refused, popped, 0)
            );
        }
        assert_eq!(&ring.image()[DATA_OFFSET..], &data[..]);
        // The sequence must have exercised every path.
        assert!(
            refused > 100 && empties > 100 && oracle.wraps > 100,
            "seed {seed}"
        );
        if start > 0xFFFF_0000 {
            assert!(wrapped_counter, "seed {seed}: counter never wrapped");
        }
    }
}

#[test]
fn record_bytes_known_answer() {
    let mut data = vec![0x55u8; MIN_CAPACITY];
    let next = write_record(&mut data, 0, 0, 0x0102, 0x0304_0506, &[0xAA, 0xBB, 0xCC]);
    assert_eq!(next, Ok(12));
    let expected = [
        0x03, 0x00, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0xAA, 0xBB, 0xCC, 0x00,
    ];
    assert_eq!(&data[..12], &expected);
    assert_eq!(data[12], 0x55, "bytes past the record untouched");
    let (record, read) = read_record(&data, 0, 12)
        .expect("valid")
        .expect("one record");
    assert_eq!(
        record,
        Record {
            tag: 0x0102,
            time: 0x0304_0506,
            payload: &[0xAA, 0xBB, 0xCC]
        }
    );
    assert_eq!(read, 12);
    // Sizes: header + payload rounded up to 4.
    let sizes = [
        (0, 8),
        (1, 12),
        (4, 12),
        (5, 16),
        (MAX_PAYLOAD, MAX_RECORD_LEN),
    ];
    for (len, size) in sizes {
        assert_eq!(record_len(len), size);
    }
}

/// Counters crossing 2^32: positions and unread counts stay right. The counters start 8 bytes
/// before the end of the data area, so the first record leaves a wrap marker there.
#[test]
fn counters_wrap_past_2_pow_32() {
    let start = 0u32.wrapping_sub(8);
    let mut ring = SharedRing::with_start(MIN_CAPACITY, start).expect("valid ring");
    let (mut producer, mut consumer) = ring.split();
    for i in 0..3u32 {
        producer.push(i as u16, i, &payload(i, 100)).expect("room");
    }
    assert_eq!(
        producer.used(),
        8 + 3 * 108,
        "skipped tail + three 108-byte records"
    );
    for i in 0..3u32 {
        let got = consumer.pop(owned).expect("valid").expect("a record");
        assert_eq!(got, (i as u16, i, payload(i, 100)));
    }
    assert!(consumer.is_empty());
    let c = ring.counters();
    assert_eq!((c.write, c.read), (324, 324), "start + 332 wraps to 324");
    assert_eq!(
        &ring.image()[DATA_OFFSET + MIN_CAPACITY - 8..][..4],
        &MARKER_BYTES
    );
    assert_eq!(
        &ring.image()[DATA_OFFSET..][..4],
        &[100, 0, 0, 0],
        "first record at 0"
    );
}

#[test]
fn full_ring_refuses_and_counts() {
    let mut ring = SharedRing::new(MIN_CAPACITY).expect("valid ring");
    let big = payload(9, 1000); // 1008-byte records: 16 fit, 256 bytes remain
    {
        let (mut producer, _) = ring.split();
        for i in 0..16u16 {
            producer.push(i, 0, &big).expect("room");
        }
        assert_eq!(producer.push(16, 0, &big), Err(RingError::Full));
    }
    let before = ring.image().to_vec();
    {
        let (mut producer, _) = ring.split();
        assert_eq!(producer.push(16, 0, &big), Err(RingError::Full));
    }
    let c = ring.counters();
    assert_eq!((c.dropped_records, c.dropped_bytes), (2, 2000));
    // A refused push changes nothing but the drop counters.
    let after = ring.image();
    assert_eq!(after[12..], before[12..]);
    {
        let (mut producer, mut consumer) = ring.split();
        producer.push(100, 0, &[]).expect("8 bytes fit in 256");
        assert_eq!(producer.push(17, 0, &big), Err(RingError::Full));
        // Freeing 1008 bytes leaves 248 + 1008: exactly the marker tail plus the record.
        assert_eq!(consumer.pop(|r| r.tag).expect("valid"), Some(0));
        producer.push(17, 0, &big).expect("fits exactly");
        assert_eq!(producer.used(), MIN_CAPACITY);
        assert_eq!(producer.push(18, 0, &[]), Err(RingError::Full));
        let mut tags = Vec::new();
        while let Some(tag) = consumer.pop(|r| r.tag).expect("valid") {
            tags.push(tag);
        }
        let expected: Vec<u16> = (1..16).chain([100, 17]).collect();
        assert_eq!(tags, expected);
    }
    let c = ring.counters();
    assert_eq!(
        (c.dropped_records, c.dropped_bytes, c.records_read),
        (4, 3000, 18)
    );
    assert_eq!(&ring.image()[DATA_OFFSET + 16_136..][..4], &MARKER_BYTES);
}

#[test]
fn too_large_and_bad_shapes_are_errors() {
    let mut data = vec![0u8; MIN_CAPACITY];
    let big = vec![1u8; MAX_PAYLOAD + 1];
    assert_eq!(
        write_record(&mut data, 0, 0, 0, 0, &big),
        Err(RingError::TooLarge)
    );
    let mut ring = SharedRing::new(MIN_CAPACITY).expect("valid ring");
    {
        let (mut producer, _) = ring.split();
        assert_eq!(producer.push(0, 0, &big), Err(RingError::TooLarge));
    }
    let c = ring.counters();
    assert_eq!((c.write, c.dropped_records, c.dropped_bytes), (0, 1, 4097));
    for len in [0, 8192, MIN_CAPACITY + 4, 3 * MIN_CAPACITY] {
        let mut odd = vec![0u8; len];
        assert_eq!(
            write_record(&mut odd, 0, 0, 0, 0, &[]),
            Err(RingError::BadCapacity)
        );
        assert_eq!(read_record(&odd, 0, 0), Err(RingError::BadCapacity));
        assert!(SharedRing::new(len).is_err());
    }
    assert!(SharedRing::with_start(MIN_CAPACITY, 2).is_err());
    for (read, write) in [(2, 2), (0, 6), (0, MIN_CAPACITY as u32 + 4), (8, 4)] {
        assert_eq!(read_record(&data, read, write), Err(RingError::BadIndices));
        assert_eq!(
            write_record(&mut data, write, read, 0, 0, &[]),
            Err(RingError::BadIndices)
        );
    }
}

/// The capacity rule: an empty ring takes the largest record wherever its counters stand.
#[test]
fn empty_ring_accepts_largest_record_anywhere() {
    let mut data = vec![0u8; MIN_CAPACITY];
    let big = payload(3, MAX_PAYLOAD);
    for pos in (0..MIN_CAPACITY as u32).step_by(RECORD_ALIGN) {
        let start = pos.wrapping_add(0xFFFF_0000);
        let write = write_record(&mut data, start, start, 7, pos, &big).expect("empty ring");
        let (record, read) = read_record(&data, start, write)
            .expect("valid")
            .expect("record");
        assert_eq!(
            (record.tag, record.time, record.payload),
            (7, pos, &big[..])
        );
        assert_eq!(read, write);
    }
}

/// Consumer resync on a corrupt length and on a corrupt counter.
#[test]
fn pop_resyncs_on_corrupt_data() {
    let mut ring = SharedRing::new(MIN_CAPACITY).expect("valid ring");
    {
        let (mut producer, _) = ring.split();
        for i in 0..3u16 {
            producer.push(i, 0, &[1, 2, 3]).expect("room");
        }
    }
    ring.image_mut()[DATA_OFFSET + 12..][..2].copy_from_slice(&0x2000u16.to_le_bytes());
    {
        let (mut producer, mut consumer) = ring.split();
        assert_eq!(consumer.pop(|r| r.tag), Ok(Some(0)));
        assert_eq!(consumer.pop(|r| r.tag), Err(RingError::BadRecord));
        assert!(consumer.is_empty());
        producer.push(9, 0, &[4]).expect("room");
        assert_eq!(consumer.pop(|r| r.tag), Ok(Some(9)));
    }
    ring.image_mut()[READ_WORD * 4] ^= 2; // misaligned read counter
    {
        let (_, mut consumer) = ring.split();
        assert_eq!(consumer.pop(|r| r.tag), Err(RingError::BadIndices));
        assert_eq!(consumer.pop(|r| r.tag), Ok(None));
    }
    let c = ring.counters();
    assert_eq!((c.resyncs, c.records_read, c.read), (2, 2, c.write));
}

/// 100 000 random data areas and counters: reading never panics, each success moves `read`
/// strictly towards `write` (so a drain ends within capacity / 8 records), and writing never
/// panics and never claims more than the free space.
#[test]
fn corrupt_data_never_panics_or_loops() {
    let mut rng = Rng::new(0x0123_4567_89AB_CDEF);
    let mut data = vec![0u8; MIN_CAPACITY];
    let capacity = MIN_CAPACITY as u64;
    let (mut records, mut empties, mut errors, mut writes) = (0u32, 0u32, 0u32, 0u32);
    for case in 0..100_000 {
        if case % 256 == 0 {
            data.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
        }
        let read = match rng.below(4) {
            0 => rng.next_u64() as u32,
            _ => rng.next_u64() as u32 & !3,
        };
        let write = match rng.below(5) {
            0 => rng.next_u64() as u32,
            1 => read.wrapping_add(rng.below(capacity + 1) as u32 & !3),
            2 => read.wrapping_add(rng.below(64) as u32 * 4),
            3 => read.wrapping_add(capacity as u32),
            _ => read,
        };
        if rng.below(2) == 0 {
            // A plausible length at the read position reaches the deeper checks.
            let pos = read as usize & (MIN_CAPACITY - 1) & !3;
            let len = match rng.below(4) {
                0 => WRAP_MARKER,
                1 => rng.below(MAX_PAYLOAD as u64 + 1) as u16,
                2 => rng.below(64) as u16,
                _ => rng.next_u64() as u16,
            };
            data[pos..pos + 2].copy_from_slice(&len.to_le_bytes());
        }
        let mut at = read;
        for steps in 0.. {
            assert!(
                steps <= MIN_CAPACITY / RECORD_HEADER_LEN,
                "case {case}: no progress"
            );
            match read_record(&data, at, write) {
                Ok(Some((record, next))) => {
                    let before = write.wrapping_sub(at) as usize;
                    let after = write.wrapping_sub(next) as usize;
                    assert!(after < before && before <= MIN_CAPACITY, "case {case}");
                    assert!(before - after >= record_len(record.payload.len()));
                    at = next;
                    records += 1;
                }
                Ok(None) => {
                    assert_eq!(at, write);
                    empties += 1;
                    break;
                }
                Err(_) => {
                    errors += 1;
                    break;
                }
            }
        }
        let len = rng.below(MAX_PAYLOAD as u64 + 2) as usize;
        let body = &payload(case, len);
        if let Ok(next) = write_record(&mut data, write, read, case as u16, case, body) {
            let free = MIN_CAPACITY - write.wrapping_sub(read) as usize;
            assert!(next.wrapping_sub(write) as usize <= free, "case {case}");
            writes += 1;
        }
    }
    // The cases reached records, empty rings, errors and accepted writes in numbers.
    assert!(records > 10_000 && empties > 10_000 && errors > 10_000 && writes > 10_000);
}

fn stress_len(i: u32) -> usize {
    let h = i.wrapping_mul(2_654_435_761) >> 7;
    if h % 64 == 0 {
        MAX_PAYLOAD - (h % 3) as usize
    } else {
        (h % 600) as usize
    }
}

fn stress_byte(i: u32, k: usize) -> u8 {
    (i.wrapping_mul(13) as usize + 7 * k) as u8
}

/// A producer and a consumer thread move 200 000 records through a small ring; every record
/// arrives once, in order, with its content. Bounded by a 120 s deadline.
#[test]
fn two_threads_keep_order_and_content() {
    const RECORDS: u32 = 200_000;
    let deadline = Instant::now() + Duration::from_secs(120);
    let start = 0u32.wrapping_sub(100_000);
    let mut ring = SharedRing::with_start(MIN_CAPACITY, start).expect("valid ring");
    let (mut producer, mut consumer) = ring.split();
    let full = std::thread::scope(|s| {
        let feeder = s.spawn(move || {
            let mut buf = [0u8; MAX_PAYLOAD];
            let mut full = 0u32;
            for i in 0..RECORDS {
                let body = &mut buf[..stress_len(i)];
                for (k, b) in body.iter_mut().enumerate() {
                    *b = stress_byte(i, k);
                }
                loop {
                    match producer.push(i as u16, i, body) {
                        Ok(()) => break,
                        Err(RingError::Full) => {
                            full += 1;
                            assert!(Instant::now() < deadline, "producer stuck");
                            std::thread::yield_now();
                        }
                        Err(e) => panic!("push {i}: {e}"),
                    }
                }
            }
            full
        });
        let mut next = 0u32;
        while next < RECORDS {
            let check = |r: Record<'_>| {
                r.tag == next as u16
                    && r.time == next
                    && r.payload.len() == stress_len(next)
                    && r.payload
                        .iter()
                        .enumerate()
                        .all(|(k, &b)| b == stress_byte(next, k))
            };
            match consumer.pop(check) {
                Ok(Some(good)) => {
                    assert!(good, "record {next} wrong");
                    next += 1;
                }
                Ok(None) => {
                    assert!(Instant::now() < deadline, "consumer stuck at {next}");
                    std::thread::yield_now();
                }
                Err(e) => panic!("pop {next}: {e}"),
            }
        }
        feeder.join().expect("producer thread")
    });
    let c = ring.counters();
    assert_eq!(
        (c.records_read, c.dropped_records, c.resyncs),
        (RECORDS, full, 0)
    );
    assert_eq!(c.read, c.write);
}

fn repo_file(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

fn parse_int(text: &str) -> Option<i64> {
    let text = text.trim().replace('_', "");
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Every layout constant in ring.ts equals the one here, and ring.ts has no other numeric
/// constant; its `RingStatus` codes equal `RingError::code`.
#[test]
fn typescript_layout_matches() {
    let ts = std::fs::read_to_string(repo_file("app/src/audio/ring.ts")).expect("ring.ts");
    let layout: [(&str, i64); 19] = [
        ("CACHE_LINE", CACHE_LINE as i64),
        ("DATA_OFFSET", DATA_OFFSET as i64),
        ("HEADER_WORDS", HEADER_WORDS as i64),
        ("WRITE_WORD", WRITE_WORD as i64),
        ("DROPPED_RECORDS_WORD", DROPPED_RECORDS_WORD as i64),
        ("DROPPED_BYTES_WORD", DROPPED_BYTES_WORD as i64),
        ("READ_WORD", READ_WORD as i64),
        ("RECORDS_READ_WORD", RECORDS_READ_WORD as i64),
        ("RESYNCS_WORD", RESYNCS_WORD as i64),
        ("RECORD_HEADER_LEN", RECORD_HEADER_LEN as i64),
        ("LEN_OFFSET", LEN_OFFSET as i64),
        ("TAG_OFFSET", TAG_OFFSET as i64),
        ("TIME_OFFSET", TIME_OFFSET as i64),
        ("RECORD_ALIGN", RECORD_ALIGN as i64),
        ("MAX_PAYLOAD", MAX_PAYLOAD as i64),
        ("MAX_RECORD_LEN", MAX_RECORD_LEN as i64),
        ("WRAP_MARKER", WRAP_MARKER as i64),
        ("MIN_CAPACITY", MIN_CAPACITY as i64),
        ("MAX_CAPACITY", MAX_CAPACITY as i64),
    ];
    let mut found: Vec<(String, i64)> = ts
        .lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("export const ")?;
            let (name, value) = rest.split_once('=')?;
            let value = parse_int(value.trim().strip_suffix(';')?)?;
            Some((name.trim().to_string(), value))
        })
        .collect();
    found.sort();
    let mut wanted: Vec<(String, i64)> = layout.iter().map(|&(n, v)| (n.to_string(), v)).collect();
    wanted.sort();
    assert_eq!(found, wanted);

    let status_at = ts
        .find("export const RingStatus")
        .expect("RingStatus in ring.ts");
    let block = &ts[status_at..];
    let block = &block[block.find('{').expect("{")..block.find('}').expect("}")];
    let mut codes: Vec<(String, i64)> = block
        .split([',', '{', '\n'])
        .filter_map(|item| {
            let (name, value) = item.split_once(':')?;
            Some((name.trim().to_string(), parse_int(value)?))
        })
        .collect();
    codes.sort();
    let errors = [
        RingError::Full,
        RingError::TooLarge,
        RingError::BadCapacity,
        RingError::BadIndices,
        RingError::BadRecord,
    ];
    let mut expected: Vec<(String, i64)> = errors
        .iter()
        .map(|e| (format!("{e:?}"), e.code() as i64))
        .chain([("Empty".to_string(), 0), ("Record".to_string(), 1)])
        .collect();
    expected.sort();
    assert_eq!(codes, expected);
}

enum Op {
    Push {
        tag: u16,
        time: u32,
        len: usize,
        seed: u32,
    },
    Pop,
}

const GOLDEN_START: u32 = 0u32.wrapping_sub(12_288); // data position 4096
const T: u32 = 0u32.wrapping_sub(3); // times cross 2^32 too

fn push(tag: u16, len: usize, seed: u32) -> Op {
    Op::Push {
        tag,
        time: T.wrapping_add(tag as u32),
        len,
        seed,
    }
}

/// The golden sequence: small odd sizes (padding), a packet-sized and maximum records, a wrap
/// marker, refusals, an exactly full ring, popping an empty ring, counters crossing 2^32.
fn golden_ops() -> Vec<Op> {
    use Op::Pop;
    vec![
        push(1, 0, 11),
        push(2, 1, 22),
        push(3, 2, 33),
        push(4, 3, 44),
        push(5, 5, 55),
        Pop,
        Pop,
        push(6, 2072, 66),
        push(7, MAX_PAYLOAD, 77),
        push(8, MAX_PAYLOAD, 88),
        push(9, MAX_PAYLOAD, 99),   // marker at 14444, record at 0
        push(10, MAX_PAYLOAD, 110), // refused
        push(11, 4, 121),           // fills the ring exactly
        push(12, 0, 132),           // refused
        Pop,
        Pop,
        Pop,
        Pop,
        push(13, 1000, 143),
        Pop,
        Pop,
        Pop,
        Pop,
        Pop,
        Pop, // empty
        push(14, 17, 154),
        push(15, 4093, 165),
        push(16, 6, 176),
        Pop,
    ]
}

fn record_json(entry: &Option<(Entry, u32)>) -> String {
    match entry {
        None => "null".to_string(),
        Some(((tag, time, body), seed)) => format!(
            "{{\"tag\": {tag}, \"time\": {time}, \"len\": {}, \"seed\": {seed}}}",
            body.len()
        ),
    }
}

/// The golden image: the sequence above on a `SharedRing` and on the pure functions gives the
/// bytes in tests/vectors/ring-golden.bin; ring-golden.json states the sequence and what each
/// step returns, for the TypeScript test to replay. Set TUTTI_BLESS=1 to rewrite both files.
#[test]
fn golden_image() {
    let mut ring = SharedRing::with_start(MIN_CAPACITY, GOLDEN_START).expect("valid ring");
    let mut data = vec![0u8; MIN_CAPACITY];
    let (mut write, mut read) = (GOLDEN_START, GOLDEN_START);
    let mut seeds = VecDeque::new();
    let mut steps = Vec::new();
    let (mut refusals, mut was_full, mut empty_pops) = (0, false, 0);
    {
        let (mut producer, mut consumer) = ring.split();
        for op in golden_ops() {
            match op {
                Op::Push {
                    tag,
                    time,
                    len,
                    seed,
                } => {
                    let body = payload(seed, len);
                    let ok = producer.push(tag, time, &body).is_ok();
                    let pure = write_record(&mut data, write, read, tag, time, &body);
                    assert_eq!(pure.is_ok(), ok);
                    if let Ok(next) = pure {
                        write = next;
                        seeds.push_back(seed);
                    }
                    refusals += u32::from(!ok);
                    was_full |= producer.used() == MIN_CAPACITY;
                    steps.push(format!(
                        "{{\"op\": \"push\", \"tag\": {tag}, \"time\": {time}, \"len\": {len}, \
                         \"seed\": {seed}, \"ok\": {ok}}}"
                    ));
                }
                Op::Pop => {
                    let got = consumer.pop(owned).expect("valid ring");
                    let pure = read_record(&data, read, write).expect("valid ring");
                    assert_eq!(got, pure.map(|(r, _)| owned(r)));
                    if let Some((_, next)) = pure {
                        read = next;
                    }
                    empty_pops += u32::from(got.is_none());
                    let got = got.map(|e| (e, seeds.pop_front().expect("pushed before")));
                    if let Some((e, seed)) = &got {
                        assert_eq!(e.2, payload(*seed, e.2.len()), "content");
                    }
                    steps.push(format!(
                        "{{\"op\": \"pop\", \"record\": {}}}",
                        record_json(&got)
                    ));
                }
            }
        }
    }
    let c = ring.counters();
    let image = ring.image().to_vec();
    assert_eq!(
        &image[DATA_OFFSET..],
        &data[..],
        "pure functions and SharedRing agree"
    );
    assert_eq!((c.write, c.read), (write, read));
    // The sequence covers what it claims to.
    assert_eq!((refusals, was_full, empty_pops), (2, true, 1));
    assert_eq!(
        &image[DATA_OFFSET + 14_444..][..4],
        &MARKER_BYTES,
        "wrap marker"
    );
    assert!(
        c.write < GOLDEN_START && c.read < GOLDEN_START,
        "counters crossed 2^32"
    );
    assert!(c.write != c.read, "records left unread");

    let json = format!(
        "{{\n  \"capacity\": {MIN_CAPACITY},\n  \"start\": {GOLDEN_START},\n  \
         \"payload\": \"byte k of a payload = (seed + 7 * k) mod 256\",\n  \
         \"image_bytes\": {},\n  \"ops\": [\n    {}\n  ],\n  \"counters\": {{\"write\": {}, \
         \"read\": {}, \"dropped_records\": {}, \"dropped_bytes\": {}, \"records_read\": {}, \
         \"resyncs\": {}}}\n}}\n",
        image.len(),
        steps.join(",\n    "),
        c.write,
        c.read,
        c.dropped_records,
        c.dropped_bytes,
        c.records_read,
        c.resyncs
    );
    let bin_path = repo_file("tests/vectors/ring-golden.bin");
    let json_path = repo_file("tests/vectors/ring-golden.json");
    if std::env::var_os("TUTTI_BLESS").is_some() {
        std::fs::write(&bin_path, &image).expect("write golden image");
        std::fs::write(&json_path, &json).expect("write golden json");
    }
    let golden = std::fs::read(&bin_path).expect("golden image (TUTTI_BLESS=1 writes it)");
    assert!(
        golden == image,
        "ring image differs from tests/vectors/ring-golden.bin"
    );
    let golden_json = std::fs::read_to_string(&json_path).expect("golden json");
    assert_eq!(golden_json, json);
}
