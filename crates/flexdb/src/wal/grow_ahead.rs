//! Growing a mapped log ahead of its writers.
//!
//! A mapped log grows by preallocating and mapping one more step
//! (`mapped::STEP`, 64 MiB) at the end of its file. Done by the append
//! that finds no room, that costs the writer holding the writer lock a
//! `fallocate` and an `mmap` (up to 20 ms on the helper thread on a loaded
//! machine, docs/experiments/2026-11-27-memtable-backlog.md), and every
//! writer waits behind it. Instead, once less than half a step is left, the
//! writer that noticed hands the growth to a thread of its own (after the
//! writer lock), which prepares the step without any lock the writers
//! take and installs it under the log's lock, a few pointer writes.
//!
//! Invariants:
//! - At most one growth ahead runs per log at a time (`claim`).
//! - A log grows ahead only up to the size its creator expected (about its
//!   MemTable's bytes): past it, growing ahead would preallocate a step
//!   the log likely never uses (each file of the WAL would carry it).
//! - A growth ahead that fails (a full disk) changes nothing and is not
//!   retried at the same capacity: the append that needs the room grows
//!   the log itself and gets the error, with the contract of any failed
//!   growth (`mapped`): everything appended before can still be synced.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::mapped::MappedLog;

/// What a mapped log knows about its growth ahead.
pub(crate) struct GrowAhead {
    /// The log's capacity, mirrored here for a check without its lock
    /// (updated under it).
    cap: AtomicU64,
    /// Bytes one growth adds.
    step: u64,
    /// The capacity past which the log does not grow ahead.
    expected: u64,
    /// A growth ahead is claimed and not finished.
    claimed: AtomicBool,
    /// The capacity at which a growth ahead last failed (`u64::MAX`: none).
    failed_at: AtomicU64,
}

impl GrowAhead {
    /// For `log`, expected to need about `expected` bytes.
    pub fn new(log: &MappedLog, expected: u64) -> Self {
        GrowAhead {
            cap: AtomicU64::new(log.capacity()),
            step: log.step(),
            expected,
            claimed: AtomicBool::new(false),
            failed_at: AtomicU64::new(u64::MAX),
        }
    }

    /// Records the capacity of `log` after an append (under its lock),
    /// which may have grown it.
    pub fn note(&self, log: &MappedLog) {
        self.cap.store(log.capacity(), Ordering::Relaxed);
    }

    /// Whether the log, written up to `end`, should grow ahead now, and if
    /// so claims the growth: the caller must then run [`GrowAhead::run`]
    /// (on any thread). A few relaxed loads when not due.
    pub fn claim(&self, end: u64) -> bool {
        let cap = self.cap.load(Ordering::Relaxed);
        cap < self.expected
            && end.saturating_add(self.step / 2) >= cap
            && self.failed_at.load(Ordering::Relaxed) != cap
            && !self.claimed.load(Ordering::Relaxed)
            && !self.claimed.swap(true, Ordering::Acquire)
    }

    /// Takes the claim without growing, for a trim of the file past the
    /// mapping: false when a growth ahead is under way (its step must
    /// stay). The holder calls [`GrowAhead::release`].
    pub fn hold(&self) -> bool {
        !self.claimed.swap(true, Ordering::Acquire)
    }

    /// Lets go of a claim taken by [`GrowAhead::hold`].
    pub fn release(&self) {
        self.claimed.store(false, Ordering::Release);
    }

    /// Grows `log` by one step, preparing it without the log's lock, and
    /// releases the claim. Returns whether a step was installed.
    pub fn run(&self, log: &Mutex<MappedLog>) -> bool {
        let growth = log.lock().plan_growth();
        let installed = match growth.prepare() {
            Ok(stretch) => {
                let mut log = log.lock();
                let installed = log.install(stretch);
                self.note(&log);
                installed
            }
            Err(_) => {
                // The append that needs the room grows the log itself and
                // reports the error; no retry at this capacity meanwhile.
                self.failed_at
                    .store(self.cap.load(Ordering::Relaxed), Ordering::Relaxed);
                false
            }
        };
        self.claimed.store(false, Ordering::Release);
        installed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapped log of 1 MiB steps with `first` bytes mapped at first.
    fn log(dir: &tempfile::TempDir, first: u64) -> MappedLog {
        let path = dir.path().join("log");
        std::fs::write(&path, b"HEAD").unwrap();
        MappedLog::open_with_step(crate::wal::mapped::tests::real(&path), 4, first, 1 << 20)
            .unwrap()
    }

    /// A trim's hold and a growth's claim exclude each other.
    #[test]
    fn a_hold_and_a_growth_exclude_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let log = Mutex::new(log(&dir, 1 << 20));
        let ahead = GrowAhead::new(&log.lock(), 8 << 20);
        let near_end = (1 << 20) - 4096;
        assert!(ahead.hold());
        assert!(!ahead.claim(near_end), "no growth while a trim holds");
        ahead.release();
        assert!(ahead.claim(near_end));
        assert!(!ahead.hold(), "no trim of the step while it grows");
        assert!(ahead.run(&log));
        assert!(ahead.hold());
        ahead.release();
    }

    #[test]
    fn grows_ahead_once_half_a_step_is_left_and_appends_never_grow() {
        let dir = tempfile::tempdir().unwrap();
        let log = Mutex::new(log(&dir, 1 << 20));
        let ahead = GrowAhead::new(&log.lock(), 8 << 20);
        let rec = vec![5u8; 4096];
        let mut grown = 0;
        let mut written = 4u64;
        while written < 6 << 20 {
            let mut l = log.lock();
            let cap = l.capacity();
            l.append(&rec).unwrap();
            // The growth ahead always came first: no append grew the log.
            assert_eq!(l.capacity(), cap, "an append grew the log");
            ahead.note(&l);
            let end = l.end();
            drop(l);
            written = end;
            if ahead.claim(end) {
                // Claimed once: nobody else may run it meanwhile.
                assert!(!ahead.claim(end));
                assert!(ahead.run(&log));
                grown += 1;
            }
        }
        assert_eq!(grown, 6);
        let l = log.lock();
        assert!(l.capacity() - l.end() <= (1 << 20) + (1 << 19));
        // Not past the expected size.
        drop(l);
        while log.lock().capacity() < 8 << 20 {
            let mut l = log.lock();
            l.append(&rec).unwrap();
            ahead.note(&l);
            let end = l.end();
            drop(l);
            if ahead.claim(end) {
                ahead.run(&log);
            }
        }
        let end = log.lock().end();
        assert!(!ahead.claim(end.max(8 << 20)));
    }

    #[test]
    fn a_stretch_prepared_for_an_old_end_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = log(&dir, 1 << 20);
        let growth = l.plan_growth();
        // The log grows meanwhile (an append found no room).
        l.append(&vec![1u8; 1 << 20]).unwrap();
        let cap = l.capacity();
        assert!(!l.install(growth.prepare().unwrap()));
        assert_eq!(l.capacity(), cap);
        // A fresh plan installs.
        let growth = l.plan_growth();
        assert!(l.install(growth.prepare().unwrap()));
        assert_eq!(l.capacity(), cap + (1 << 20));
        l.append(&vec![2u8; 1 << 20]).unwrap();
        l.sync().unwrap();
        let bytes = std::fs::read(dir.path().join("log")).unwrap();
        assert!(bytes[4..4 + (1 << 20)].iter().all(|&b| b == 1));
        assert!(bytes[4 + (1 << 20)..4 + (2 << 20)].iter().all(|&b| b == 2));
    }

    #[test]
    fn a_full_disk_fails_the_growth_ahead_and_then_the_append_changing_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = Mutex::new(log(&dir, 1 << 20));
        let ahead = GrowAhead::new(&log.lock(), 64 << 20);
        let cap = log.lock().capacity();
        log.lock().fail_past(Some(cap));
        let rec = vec![7u8; 1000];
        let mut n = 0u64;
        let err = loop {
            let mut l = log.lock();
            let r = l.append(&rec);
            ahead.note(&l);
            let end = l.end();
            drop(l);
            match r {
                Ok(()) => n += 1,
                Err(e) => break e,
            }
            if ahead.claim(end) {
                assert!(!ahead.run(&log), "grew on a full disk");
                assert_eq!(log.lock().capacity(), cap);
                // Not retried at the same capacity.
                assert!(!ahead.claim(end));
            }
        };
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        let l = log.lock();
        assert_eq!(l.end(), 4 + n * 1000);
        assert_eq!(l.capacity(), cap);
        l.sync().unwrap();
        drop(l);
        let bytes = std::fs::read(dir.path().join("log")).unwrap();
        assert!(bytes[4..4 + (n * 1000) as usize].iter().all(|&b| b == 7));
        // Space again: the append grows the log itself, and growing ahead
        // resumes at the new capacity.
        let mut l = log.lock();
        l.fail_past(None);
        l.append(&rec).unwrap();
        ahead.note(&l);
        assert!(l.capacity() > cap);
        drop(l);
        let mut claimed = false;
        for _ in 0..2000 {
            let mut l = log.lock();
            l.append(&rec).unwrap();
            ahead.note(&l);
            let end = l.end();
            drop(l);
            if ahead.claim(end) {
                claimed = true;
                break;
            }
        }
        assert!(claimed, "growing ahead never resumed");
        assert!(ahead.run(&log));
    }
}
