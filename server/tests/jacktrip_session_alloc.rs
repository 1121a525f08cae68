//! A JackTrip session's datagram path allocates nothing: a global allocator that counts the
//! allocations made on the test's thread while it is watching, over thousands of datagrams of
//! every verdict (audio, redundancy, wrong address, malformed, wrong format, exit, after end).

use std::net::SocketAddr;

use tutti_core::alloc_watch::{calls, watched, Counting};
use tutti_server::hub::jacktrip::session::{Session, Verdict};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A 128-frame stereo 16-bit JackTrip packet at 48 kHz.
fn packet(seq: u16) -> Vec<u8> {
    let mut p = vec![0u8; 16 + 128 * 2 * 2];
    p[8..10].copy_from_slice(&seq.to_le_bytes());
    p[10..12].copy_from_slice(&128u16.to_le_bytes());
    p[12..16].copy_from_slice(&[3, 16, 2, 0]);
    p
}

#[test]
fn jacktrip_session_datagrams_allocate_nothing() {
    let client: SocketAddr = "10.0.0.1:4464".parse().expect("address");
    let stranger: SocketAddr = "10.0.0.9:4464".parse().expect("address");
    let packets: Vec<Vec<u8>> = (0..64).map(packet).collect();
    let redundant = [packet(100), packet(99)].concat();
    let mut wrong_format = packet(0);
    wrong_format[13] = 24;
    let truncated = packet(5)[..300].to_vec();
    let exit = [0xFF; 63];
    let mut session = Session::new(client.ip(), 0);
    let mut audio = 0;

    let before = calls();
    let (exit_verdict, after) = watched(|| {
        for i in 0..8_000u64 {
            let now = i * 2_667;
            let (from, bytes): (SocketAddr, &[u8]) = match i % 5 {
                0 => (stranger, &packets[0]),
                1 => (client, &truncated),
                2 => (client, &wrong_format),
                3 => (client, &redundant),
                _ => (client, &packets[(i % 64) as usize]),
            };
            if let Verdict::Audio(p) = session.on_datagram(from, bytes, now) {
                audio += p.len();
            }
            session.poll_timeout(now);
        }
        let exit_verdict = session.on_datagram(client, &exit, 21_400_000);
        let after = session.on_datagram(client, &packets[1], 21_400_001);
        (exit_verdict, after)
    });

    assert_eq!(calls() - before, 0, "allocations on the datagram path");
    assert_eq!(audio, 3_200 * 528);
    assert_eq!(exit_verdict, Verdict::Exit);
    assert!(matches!(after, Verdict::Dropped(_)));
    let c = session.counters();
    // The first 24-bit packet comes before any 16-bit one: not a whole packet of the size its
    // header announces, so malformed rather than another format.
    assert_eq!(
        (
            c.received,
            c.audio,
            c.wrong_address,
            c.malformed,
            c.wrong_format,
            c.after_end
        ),
        (8_002, 3_200, 1_600, 1_601, 1_599, 1)
    );
}
