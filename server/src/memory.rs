//! How the server's memory comes back after players leave.
//!
//! A hub client's state is about 156 kB in 19 allocations (heap profile of the load
//! generator's churn scenario): a 75 kB jitter-buffer store, a 16 kB and three 8 kB buffers,
//! and small ones. glibc serves allocations under its mmap threshold (128 kB, raised further
//! at run time) from the allocating thread's arena and keeps what is freed there for that
//! arena's next allocations. When a player leaves, the small, longer-lived allocations made
//! around the next join (a name, a log line, a map entry) settle into the freed blocks, so the
//! next player's large buffers no longer fit and the arena grows. Measured: the churn scenario
//! (100 leaves and joins among 80 JackTrip clients in 50 s) left the RSS 8-9 % above its start
//! and 15 % after 500, with 62 kB of live heap leaked in all (none by the hub); the growth was
//! in the two hub workers' arenas. `malloc_trim` gave nothing back: the free space was in
//! pieces, not pages.
//!
//! So at start the server fixes the mmap threshold at [`MMAP_THRESHOLD`]: a client's large
//! buffers get pages of their own, given back whole when the client leaves, and nothing small
//! can settle into them. Measured with the same scenario, the RSS then ends 2.6-3.5 % above its
//! start (a 16 kB threshold, which leaves the 8 kB buffers in the arenas: 5.8 %). The cost is
//! an mmap and a munmap per such buffer when a client joins or leaves (six per client, a few µs
//! each, on the worker that adds the client, never while it mixes), and a page's rounding on
//! each (an 8 kB buffer takes three pages); nothing on the media path allocates at all.
//!
//! Elsewhere than glibc there is nothing to set and [`tune`] does nothing.

/// Allocations of this size and larger get pages of their own, bytes.
pub const MMAP_THRESHOLD: usize = 8 * 1024;

/// Sets the allocator up as above; true when it took the setting. Call it first thing.
pub fn tune() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt changes a parameter of the allocator under its own lock; it takes
        // plain integers and is safe to call at any time from any thread.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
