//! A counter that many threads add to without sharing a cache line: each
//! thread adds to one of a few stripes, each on a line of its own, and a
//! read sums them. For statistics counted on every read (the interval
//! cache's hits and misses), where one shared atomic would bounce between
//! the cores on every operation.
//!
//! Invariants: `sum` is the total of every `add` that happened before it
//! (Relaxed: totals are statistics, not synchronization); a thread always
//! adds to the same stripe.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes a counter has (threads share them round-robin).
const STRIPES: usize = 8;

/// One stripe, alone on its cache lines (128 bytes: adjacent-line
/// prefetching pairs 64-byte lines on x86).
#[repr(align(128))]
#[derive(Default)]
struct Stripe(AtomicU64);

/// See the module docs.
#[derive(Default)]
pub struct StripedCounter {
    stripes: [Stripe; STRIPES],
}

/// The calling thread's stripe.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

impl StripedCounter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.stripes[stripe()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The total.
    pub fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

#[cfg(test)]
mod tests {
    use super::StripedCounter;

    #[test]
    fn sums_what_every_thread_added() {
        let c = StripedCounter::default();
        std::thread::scope(|s| {
            for t in 0..20u64 {
                let c = &c;
                s.spawn(move || {
                    for _ in 0..1000 {
                        c.add(t);
                    }
                });
            }
        });
        assert_eq!(c.sum(), 1000 * (0..20).sum::<u64>());
    }
}
