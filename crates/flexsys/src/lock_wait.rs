//! How threads wait for the store's reader-writer locks when the committer
//! shares them with readers.
//!
//! The committer holds the sparse index (`state`) exclusively for one group
//! of updates at a time, a few microseconds, and takes it again a few
//! microseconds later. Two ways of waiting for such a lock turned out to
//! cost readers milliseconds (measured in
//! docs/experiments/2026-11-24-reader-waits-and-lock-polling.md):
//!
//! - A reader that parks sleeps in the kernel; when the committer lets go,
//!   the reader is runnable but, on a machine whose cores are all busy,
//!   waits for the scheduler's next slice, one to five milliseconds.
//! - A writer that blocks in `write()` marks the lock as wanted, and every
//!   new reader then queues behind it while it waits for the readers inside
//!   to leave; one of them preempted inside turns a microsecond hold into a
//!   convoy of every reader.
//!
//! So the committer polls with `try_write`, which never blocks readers while
//! it waits, and the prefetcher, which shares `state` with it, polls for its
//! read hold too. Readers take none of these locks any more: they load the
//! published view and the MemTable list (`ArcSwap`s) with no lock, and only
//! try the interval cache's locks (`IntervalCache::get_nowait`,
//! `try_insert`).
//!
//! Writers take the store's writer mutex with [`lock_spinning`]: its holds
//! are shorter than a park and a wake.
//!
//! Invariants: the waiting functions return a guard of the lock asked for;
//! neither holds any other lock while it waits; the committer polls for at
//! most [`WRITE_POLL`] and then blocks in `write()`, so readers whose holds
//! always overlap (many threads, or readers preempted inside) cannot starve
//! it: writes then wait at most that long more than they would have.

use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Rounds of `spin_loop` before a waiter starts yielding its core.
const SPINS_BEFORE_YIELD: u32 = 32;

/// How long a polling thread yields between polls before it sleeps between
/// them instead (the holder was preempted, or holds for long).
const POLL_YIELD: Duration = Duration::from_micros(200);

/// Sleep between polls once `POLL_YIELD` has passed.
const POLL_SLEEP: Duration = Duration::from_micros(20);

/// How long the committer polls before it blocks (and new readers queue
/// behind it).
pub const WRITE_POLL: Duration = Duration::from_millis(2);

/// One waiter's pauses between polls of a lock.
struct Backoff {
    start: Instant,
    rounds: u32,
}

impl Backoff {
    fn start() -> Self {
        Backoff {
            start: Instant::now(),
            rounds: 0,
        }
    }

    fn waited(&self) -> Duration {
        self.start.elapsed()
    }

    /// Whether the rounds of spinning are over.
    fn spun(&self) -> bool {
        self.rounds >= SPINS_BEFORE_YIELD
    }

    /// Pauses before the next poll: `spin_loop` for the first rounds, then
    /// `yield_now`, and, once `sleep_after` (if any) has passed, a sleep of
    /// `POLL_SLEEP`.
    fn pause(&mut self, sleep_after: Option<Duration>) {
        if !self.spun() {
            std::hint::spin_loop();
        } else if sleep_after.is_some_and(|d| self.waited() >= d) {
            std::thread::sleep(POLL_SLEEP);
        } else {
            std::thread::yield_now();
        }
        self.rounds = self.rounds.saturating_add(1);
    }
}

/// Takes `lock` shared without ever parking on it, for a background thread
/// that can wait (the prefetcher): it polls, yielding and then sleeping
/// between polls. A parked reader must be woken by the writer's unlock, a
/// system call inside the committer's loop (5% of its time in a 10 M load,
/// measured in docs/experiments/2026-11-24-reader-waits-and-lock-polling.md);
/// a polling one costs the writer nothing.
pub fn read_polling<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    if let Some(g) = lock.try_read() {
        return g;
    }
    let mut b = Backoff::start();
    loop {
        b.pause(Some(POLL_YIELD));
        if let Some(g) = lock.try_read() {
            return g;
        }
    }
}

/// Takes `lock` exclusively, for [`WRITE_POLL`] without marking it as
/// wanted (readers keep entering while this waits, and none of them queues
/// behind it), then blocking.
pub fn write_polling<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    write_polling_for(lock, WRITE_POLL)
}

/// [`write_polling`] with the polling time as a parameter.
fn write_polling_for<T>(lock: &RwLock<T>, poll: Duration) -> RwLockWriteGuard<'_, T> {
    if let Some(g) = lock.try_write() {
        return g;
    }
    let mut b = Backoff::start();
    loop {
        if b.spun() && b.waited() >= poll {
            return lock.write();
        }
        b.pause(Some(POLL_YIELD));
        if let Some(g) = lock.try_write() {
            return g;
        }
    }
}

/// How long a writer spins for the store's writer mutex before it parks.
const WRITER_SPIN: Duration = Duration::from_micros(4);

/// Takes the writers' mutex, spinning on it for up to [`WRITER_SPIN`]
/// before parking. Its holds are a log append and a MemTable insert, well
/// under a microsecond, so a writer that finds it held nearly always gets
/// it by spinning; parking instead (as `lock` does after a few rounds)
/// costs both writers a system call and a context switch each time, about
/// a quarter of the writers' time with two of them (docs/experiments/
/// 2026-11-26-writers-path.md). After the spin
/// it parks as usual, so a holder that was preempted costs the waiter no
/// more than that.
pub fn lock_spinning<T>(lock: &Mutex<T>) -> MutexGuard<'_, T> {
    if let Some(g) = lock.try_lock() {
        return g;
    }
    let start = Instant::now();
    loop {
        for _ in 0..16 {
            std::hint::spin_loop();
        }
        // Read-only checks until it looks free, so that spinning does not
        // take the lock's cache line from the holder.
        if !lock.is_locked() {
            if let Some(g) = lock.try_lock() {
                return g;
            }
        }
        if start.elapsed() >= WRITER_SPIN {
            return lock.lock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn spinning_writers_exclude_each_other_and_get_in_after_a_long_hold() {
        let lock = Arc::new(Mutex::new(0u64));
        // A hold far longer than the spin: the waiter parks and still gets
        // in once it ends.
        let g = lock.lock();
        let waiter = {
            let lock = lock.clone();
            std::thread::spawn(move || *lock_spinning(&lock) += 1)
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(g);
        waiter.join().unwrap();
        // Short holds from several threads: no increment is lost.
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = lock_spinning(&lock);
                        let v = *g;
                        std::hint::spin_loop();
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), 80_001);
    }

    #[test]
    fn a_polling_reader_gets_in_after_a_hold() {
        let lock = Arc::new(RwLock::new(0u32));
        let g = lock.write();
        let reader = {
            let lock = lock.clone();
            std::thread::spawn(move || *read_polling(&lock))
        };
        std::thread::sleep(Duration::from_millis(5));
        drop(g);
        assert_eq!(reader.join().unwrap(), 0);
    }

    #[test]
    fn a_free_lock_is_taken_without_a_wait() {
        let lock = RwLock::new(5);
        let g = read_polling(&lock);
        assert_eq!(*g, 5);
        drop(g);
        *write_polling(&lock) += 1;
        assert_eq!(*lock.read(), 6);
    }

    #[test]
    fn a_reader_waits_out_a_short_hold_and_a_long_one() {
        for hold in [Duration::from_micros(50), Duration::from_millis(20)] {
            let lock = Arc::new(RwLock::new(0u32));
            let held = Arc::new(AtomicBool::new(false));
            let writer = {
                let (lock, held) = (lock.clone(), held.clone());
                std::thread::spawn(move || {
                    let mut g = write_polling(&lock);
                    held.store(true, Ordering::SeqCst);
                    std::thread::sleep(hold);
                    *g = 7;
                })
            };
            while !held.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // The writer set the value before it let go: a reader that got
            // in early would see 0. (Whether this reader had to wait at all
            // depends on the scheduler.)
            let g = read_polling(&lock);
            assert_eq!(*g, 7);
            drop(g);
            writer.join().unwrap();
        }
    }

    #[test]
    fn readers_whose_holds_always_overlap_do_not_starve_the_writer() {
        let lock = Arc::new(RwLock::new(0u32));
        let stop = Arc::new(AtomicBool::new(false));
        // Two readers hand the lock to each other: each enters while the
        // other is inside, and the other leaves only then, or once a writer
        // blocks in `write()` (which marks the lock at once, and keeps the
        // next reader out). Until then the lock is never free.
        let turn = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..2)
            .map(|me| {
                let (lock, stop, turn) = (lock.clone(), stop.clone(), turn.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        if turn.load(Ordering::SeqCst) % 2 != me {
                            std::thread::yield_now();
                            continue;
                        }
                        let g = lock.read();
                        let mine = turn.fetch_add(1, Ordering::SeqCst) + 1;
                        while turn.load(Ordering::SeqCst) == mine
                            && !lock.is_locked_exclusive()
                            && !stop.load(Ordering::SeqCst)
                        {
                            std::thread::yield_now();
                        }
                        drop(g);
                    }
                })
            })
            .collect();
        while turn.load(Ordering::SeqCst) < 4 {
            std::thread::yield_now();
        }
        let (done, finished) = std::sync::mpsc::channel();
        let writer = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                *write_polling(&lock) = 1;
                let _ = done.send(start.elapsed());
            })
        };
        let waited = finished.recv_timeout(Duration::from_secs(20));
        stop.store(true, Ordering::SeqCst);
        let waited = waited.expect("the writer starved");
        writer.join().unwrap();
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(*lock.read(), 1);
        // It got in only by blocking: polling alone never found it free.
        assert!(waited >= WRITE_POLL, "the lock was free after {waited:?}");
    }

    #[test]
    fn a_polling_writer_does_not_block_new_readers() {
        let lock = Arc::new(RwLock::new(0u32));
        let first = lock.read();
        let writer = {
            let lock = lock.clone();
            // Polling for longer than the test takes.
            std::thread::spawn(move || *write_polling_for(&lock, Duration::from_secs(60)) = 1)
        };
        // Give the writer time to start waiting behind `first`; then other
        // readers still enter at once (after a blocking `write()` had
        // started, `try_read` would fail here).
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..1000 {
            let g = lock
                .try_read()
                .expect("a reader got in while the writer waited");
            assert_eq!(*g, 0);
        }
        drop(first);
        writer.join().unwrap();
        assert_eq!(*lock.read(), 1);
    }
}
