//! With the server's allocator setting (`tutti_server::memory::tune`), large buffers freed by
//! the thread that made them go back to the system at once, though small allocations made in
//! between stay: the pattern of hub clients that leave while others join. Without it, the
//! same pattern keeps the freed memory. In a process of its own: the resident size it reads
//! would move with other tests' allocations.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

use tutti_server::memory::{tune, MMAP_THRESHOLD};

// The buffers below are over the threshold.
const _: () = assert!(MMAP_THRESHOLD <= 20_000);

const MB: u64 = 1 << 20;

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

/// On a thread of its own: 3,000 buffers of 20 kB, each followed by a small allocation that
/// outlives it; the buffers are freed, the small ones kept. Returns the resident growth, bytes.
fn churn() -> u64 {
    std::thread::spawn(|| {
        let before = rss();
        let mut big = Vec::with_capacity(3000);
        let mut small = Vec::with_capacity(3000);
        for i in 0..3000usize {
            big.push(vec![i as u8; 20_000]);
            small.push(vec![i as u8; 48]);
        }
        drop(big);
        let after = rss();
        assert_eq!(small[2999][0], (2999 % 256) as u8);
        after.saturating_sub(before)
    })
    .join()
    .expect("the thread")
}

#[test]
fn large_buffers_freed_among_small_ones_go_back_only_with_the_setting() {
    let kept = churn();
    assert!(
        kept > 40 * MB,
        "without the setting the freed buffers should stay resident: {} MB",
        kept / MB
    );
    assert!(tune());
    let kept = churn();
    assert!(
        kept < 4 * MB,
        "with the setting they should be gone: {} MB still resident",
        kept / MB
    );
}
