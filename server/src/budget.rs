//! Byte budgets for outbound queues.
//!
//! Messages wait in a connection's queue until its writer has put them on the socket. A client
//! that stops reading would let its queue grow without end, so each queue may hold at most
//! `--outbound-bytes-per-connection` bytes, and all queues together at most
//! `--outbound-bytes-total`: a message that does not fit closes its receiver (1013) instead of
//! being queued. Each queue's first [`UNSHARED_BYTES`] are not counted against the total, so a
//! receiver that keeps up (its queue nearly empty) is never the one dropped when slow ones have
//! used up the total; the memory bound is therefore the total plus `UNSHARED_BYTES` per
//! connection.
//!
//! Accounting is lock-free (atomics), so the rooms can queue messages under their lock without
//! ever waiting.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::rooms::Outbound;

/// Bytes charged for a message besides its text: the queue slot and allocation headers.
pub const MESSAGE_OVERHEAD: usize = 64;
/// Bytes of each queue not counted against the shared total.
pub const UNSHARED_BYTES: usize = 16 * 1024;

/// What queuing `msg` costs. Close frames cost nothing: they must always get through, and a
/// connection queues at most a couple of them.
pub fn cost(msg: &Outbound) -> usize {
    match msg {
        Outbound::Text(t) => t.len() + MESSAGE_OVERHEAD,
        Outbound::Ping => MESSAGE_OVERHEAD,
        Outbound::Close(..) => 0,
    }
}

/// The budget all queues share.
#[derive(Debug)]
pub struct SharedBudget {
    limit: i64,
    /// Signed: a queue's two counters are updated one after the other, so while a release
    /// on one thread overtakes a reserve on another this may dip below zero for a moment.
    used: AtomicI64,
}

impl SharedBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
            used: AtomicI64::new(0),
        })
    }

    /// Bytes counted against the total now.
    pub fn used(&self) -> usize {
        usize::try_from(self.used.load(Ordering::Acquire)).unwrap_or(0)
    }
}

/// One connection's queue budget; shared by its outbox clones and its writer. When the last
/// reference goes, whatever it still counted is returned to the shared budget.
#[derive(Debug)]
pub struct QueueBudget {
    limit: usize,
    queued: AtomicUsize,
    shared: Arc<SharedBudget>,
}

/// The part of a queue of `queued` bytes counted against the shared total.
fn shared_part(queued: usize) -> i64 {
    i64::try_from(queued.saturating_sub(UNSHARED_BYTES)).unwrap_or(i64::MAX)
}

impl QueueBudget {
    pub fn new(limit: usize, shared: Arc<SharedBudget>) -> Self {
        Self {
            limit,
            queued: AtomicUsize::new(0),
            shared,
        }
    }

    /// No limit at all (for tests of the rooms).
    pub fn unlimited() -> Self {
        Self::new(usize::MAX, SharedBudget::new(usize::MAX))
    }

    /// Bytes in this queue now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// Counts `bytes` more in the queue if they fit both budgets; `false` (and nothing
    /// counted) if they do not.
    pub fn reserve(&self, bytes: usize) -> bool {
        let old = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                q.checked_add(bytes).filter(|n| *n <= self.limit)
            });
        let Ok(old) = old else {
            return false;
        };
        let delta = shared_part(old + bytes) - shared_part(old);
        if delta > 0 {
            let before = self.shared.used.fetch_add(delta, Ordering::AcqRel);
            if before.saturating_add(delta) > self.shared.limit {
                self.release(bytes);
                return false;
            }
        }
        true
    }

    /// Returns `bytes` that [`QueueBudget::reserve`] counted (the message left the queue).
    pub fn release(&self, bytes: usize) {
        let old = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                Some(q.saturating_sub(bytes))
            })
            .unwrap_or_else(|q| q);
        debug_assert!(old >= bytes, "released more than reserved");
        let delta = shared_part(old) - shared_part(old.saturating_sub(bytes));
        if delta > 0 {
            self.shared.used.fetch_sub(delta, Ordering::AcqRel);
        }
    }
}

impl Drop for QueueBudget {
    fn drop(&mut self) {
        let left = shared_part(*self.queued.get_mut());
        if left > 0 {
            self.shared.used.fetch_sub(left, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs() {
        assert_eq!(cost(&Outbound::Text("abc".into())), 3 + MESSAGE_OVERHEAD);
        assert_eq!(cost(&Outbound::Ping), MESSAGE_OVERHEAD);
        assert_eq!(cost(&Outbound::Close(1000, "x")), 0);
    }

    #[test]
    fn per_queue_limit() {
        let shared = SharedBudget::new(1 << 30);
        let q = QueueBudget::new(100_000, shared.clone());
        assert!(q.reserve(60_000));
        assert!(!q.reserve(50_000), "over the queue's limit");
        assert_eq!(q.queued(), 60_000, "a refusal counts nothing");
        assert!(q.reserve(40_000));
        assert_eq!(shared.used(), 100_000 - UNSHARED_BYTES);
        q.release(60_000);
        assert!(q.reserve(50_000));
        q.release(90_000);
        assert_eq!((q.queued(), shared.used()), (0, 0));
    }

    #[test]
    fn shared_limit_spares_queues_that_keep_up() {
        let shared = SharedBudget::new(100_000);
        let slow: Vec<QueueBudget> = (0..3)
            .map(|_| QueueBudget::new(1 << 20, shared.clone()))
            .collect();
        // Each slow queue may use its unshared part plus what is left of the total.
        let mut queued = 0;
        for q in &slow {
            while q.reserve(1000) {
                queued += 1000;
            }
        }
        assert!(shared.used() <= 100_000);
        let most = 100_000 + 3 * UNSHARED_BYTES;
        assert!(queued <= most && queued > most - 3 * 1000, "{queued}");
        // A queue that keeps up still gets its messages through, the total being used up.
        let fast = QueueBudget::new(1 << 20, shared.clone());
        for _ in 0..100 {
            assert!(fast.reserve(5000));
            fast.release(5000);
        }
        // Dropping a slow queue returns what it counted.
        drop(slow);
        assert_eq!(shared.used(), 0);
        assert!(fast.reserve(50_000));
    }

    #[test]
    fn an_outbox_over_its_budget_kills_its_connection_but_still_queues_the_close() {
        use crate::rooms::Outbox;
        use std::future::Future;
        use tokio::sync::{mpsc, Notify};

        let shared = SharedBudget::new(1 << 30);
        let queue = Arc::new(QueueBudget::new(10_000, shared.clone()));
        let (tx, mut rx) = mpsc::channel(1000);
        let kill = Arc::new(Notify::new());
        let outbox = Outbox::new(1, tx, kill.clone()).with_budget(queue.clone());
        let text = "x".repeat(1000);
        for _ in 0..9 {
            outbox.send_text(text.clone()); // 9 × 1064 bytes fit in 10 000
        }
        let notified = kill.notified();
        tokio::pin!(notified);
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(
            notified.as_mut().poll(&mut cx).is_pending(),
            "not killed yet"
        );
        outbox.send_text(text.clone());
        assert!(
            notified.as_mut().poll(&mut cx).is_ready(),
            "the tenth is too many"
        );
        assert_eq!(queue.queued(), 9 * (1000 + MESSAGE_OVERHEAD));
        outbox.send(Outbound::Close(1013, "too slow"));
        let mut got = Vec::new();
        while let Ok(m) = rx.try_recv() {
            queue.release(cost(&m));
            got.push(m);
        }
        assert_eq!(got.len(), 10);
        assert!(matches!(got[9], Outbound::Close(1013, _)));
        assert_eq!((queue.queued(), shared.used()), (0, 0));
    }

    #[test]
    fn concurrent_reserve_and_release_balance() {
        let shared = SharedBudget::new(200_000);
        let queues: Vec<Arc<QueueBudget>> = (0..4)
            .map(|_| Arc::new(QueueBudget::new(100_000, shared.clone())))
            .collect();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let q = queues[t % 4].clone();
                let shared = shared.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        let n = 1 + (i * 7919 + t * 104_729) % 30_000;
                        if q.reserve(n) {
                            // Other threads may be between their two counters: a reserve that
                            // will be undone, a release not yet subtracted, 30 000 each at most.
                            assert!(shared.used() <= 200_000 + 2 * 8 * 30_000);
                            q.release(n);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(shared.used(), 0);
        assert!(queues.iter().all(|q| q.queued() == 0));
    }

    #[test]
    fn no_refusals_while_far_below_the_limits() {
        // Writers releasing while rooms reserve, on the same queues: the counters may be
        // updated in any order, and no reserve may fail while the totals are far from full.
        let shared = SharedBudget::new(1 << 30);
        let queues: Vec<Arc<QueueBudget>> = (0..2)
            .map(|_| Arc::new(QueueBudget::new(1 << 30, shared.clone())))
            .collect();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let q = queues[t % 2].clone();
                std::thread::spawn(move || {
                    let mut refused = 0;
                    for i in 0..50_000 {
                        let n = 1 + (i * 7919 + t * 104_729) % 30_000;
                        if q.reserve(n) {
                            q.release(n);
                        } else {
                            refused += 1;
                        }
                    }
                    refused
                })
            })
            .collect();
        let refused: u32 = threads.into_iter().map(|t| t.join().expect("thread")).sum();
        assert_eq!(refused, 0);
        assert_eq!(shared.used(), 0);
    }
}
