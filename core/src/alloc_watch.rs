//! A counting global allocator, for the tests that show a real-time path allocates nothing
//! (the engine's render path, the hub's media, JackTrip sessions).
//!
//! A test binary installs it with `#[global_allocator] static A: Counting = Counting;` and runs
//! the watched code in [`watched`]. Only the calling thread is watched: the test harness's own
//! threads allocate as they please. Every call goes to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The allocator: the system's, counting allocations, frees and reallocations while watched.
pub struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
}
static CALLS: AtomicU64 = AtomicU64::new(0);

fn count() {
    if WATCHING.with(Cell::get) {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator with the caller's own arguments; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count();
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new)
    }
}

/// Runs `f` with this thread's allocator calls counted.
pub fn watched<T>(f: impl FnOnce() -> T) -> T {
    WATCHING.with(|w| w.set(true));
    let out = f();
    WATCHING.with(|w| w.set(false));
    out
}

/// Allocator calls counted so far in [`watched`] code (by every test of the binary).
pub fn calls() -> u64 {
    CALLS.load(Ordering::SeqCst)
}
