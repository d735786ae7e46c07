//! The space's reader-writer lock, measuring how long the write side is
//! held: the longest hold and the number of holds over 100 µs are exposed
//! in `Stats`, as evidence of how long readers can be kept waiting.
//!
//! Invariant: every exclusive hold is timed from acquisition to release;
//! the counters only grow (the maximum is monotonic).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Holds of the write lock longer than this are counted.
const LONG_NS: u64 = 100_000;

/// A reader-writer lock that times its exclusive holds.
pub struct TimedRwLock<T> {
    lock: RwLock<T>,
    max_ns: AtomicU64,
    long: AtomicU64,
}

/// An exclusive hold; records its duration when dropped.
pub struct TimedWriteGuard<'a, T> {
    guard: RwLockWriteGuard<'a, T>,
    start: Instant,
    max_ns: &'a AtomicU64,
    long: &'a AtomicU64,
}

impl<T> TimedRwLock<T> {
    pub fn new(value: T) -> Self {
        TimedRwLock {
            lock: RwLock::new(value),
            max_ns: AtomicU64::new(0),
            long: AtomicU64::new(0),
        }
    }

    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.lock.read()
    }

    pub fn write(&self) -> TimedWriteGuard<'_, T> {
        let guard = self.lock.write();
        TimedWriteGuard {
            guard,
            start: Instant::now(),
            max_ns: &self.max_ns,
            long: &self.long,
        }
    }

    /// The longest exclusive hold so far (ns) and the holds over 100 µs.
    pub fn hold_stats(&self) -> (u64, u64) {
        (
            self.max_ns.load(Ordering::Relaxed),
            self.long.load(Ordering::Relaxed),
        )
    }
}

impl<T> Deref for TimedWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for TimedWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for TimedWriteGuard<'_, T> {
    fn drop(&mut self) {
        let ns = self.start.elapsed().as_nanos() as u64;
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
        if ns > LONG_NS {
            self.long.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_holds_are_timed() {
        let l = TimedRwLock::new(5u32);
        *l.write() += 1;
        assert_eq!(*l.read(), 6);
        let (max, long) = l.hold_stats();
        assert!(max < LONG_NS && long == 0);
        {
            let _g = l.write();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let (max, long) = l.hold_stats();
        assert!(max >= 1_000_000 && long == 1);
    }
}
