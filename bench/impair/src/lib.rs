//! `tutti-impair`: network impairment for Tutti's tests on a machine without `netem`.
//!
//! Inside a private network namespace, an iptables rule hands every loopback UDP packet to
//! NFQUEUE; this program is bound to that queue over netlink, holds each packet for as long as the
//! model says and then gives the kernel a verdict, ACCEPT or DROP:
//!
//! ```text
//! sender ──UDP──▶ OUTPUT (lo) ──NFQUEUE──▶ tutti-impair ──verdict at release time──▶ receiver
//! ```
//!
//! - [`impair`]: the model, sans-IO: delay, jitter (in order or reordering), independent or
//!   bursty (Gilbert) loss, a token-bucket rate limit, one seeded generator. Tested against known
//!   answers without root.
//! - [`nfq`]: the nfnetlink_queue messages, written and parsed by hand with their byte layout.
//! - [`sys`]: the system calls (netlink socket, signalfd, `ppoll`, timer slack).
//! - [`run`]: the single-threaded loop: a min-heap of held packets by release time, `ppoll` with a
//!   timeout to the next one, verdicts batched into one `sendto`.
//! - [`stats`] and [`cli`]: the JSON statistics and the flags.
//!
//! The messages are written by hand because no maintained crate fits: `nfqueue` binds the C
//! library libnetfilter_queue (and is GPL), and `nfq` gives no descriptor to `poll` with a timeout
//! and keeps each receive buffer alive while any of its packets waits for a verdict. What this
//! program needs of the protocol is three small messages; it depends on `libc` only.
//!
//! A verdict can only be as punctual as the wake-up: the loop sets the thread's timer slack to
//! 1 ns and reports how late each verdict went out (`verdict_lateness_us`).

pub mod cli;
pub mod impair;
pub mod nfq;
pub mod run;
pub mod stats;
pub mod sys;
