//! Smooth backpressure: writers are slowed a little at a time as the
//! committer's backlog nears the point where they would stall, so that
//! they rarely reach it and no one write waits long.
//!
//! The backlog is the bytes of the frozen MemTables and the active one.
//! Below `SOFT_TABLES` MemTables' worth, writes are not delayed. Above it,
//! writes share a rate (bytes of log records per second) that falls
//! exponentially with the backlog, from `FAST_RATE` to `SLOW_RATE` at
//! the hard limit (`MAX_FROZEN` frozen tables and a full active one, where
//! writers stall until a commit). The rate is a token bucket: each write
//! books the next stretch of time its bytes take at the rate; a writer
//! whose stretch starts `MIN_SLEEP` or more ahead of now sleeps until then
//! (at most `MAX_SLEEP`), before it takes the writer lock. This is
//! RocksDB's delayed write rate, driven by the backlog alone.
//!
//! Invariants: no write is delayed while the backlog is below
//! `SOFT_TABLES` tables; a writer never sleeps here holding the writer
//! lock; one sleep is at most `MAX_SLEEP`; the rate only falls as the
//! backlog grows; debt booked while slowed is dropped once the backlog
//! falls below the soft limit (a commit), so it never delays later writes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::write::memtable_list::MAX_FROZEN;

/// Backlog, in MemTables, past which writes are slowed: `MAX_FROZEN`
/// frozen ones (the committer is a whole backlog behind), so the last
/// table before the stall fills ever more slowly.
const SOFT_TABLES: f64 = MAX_FROZEN as f64;
/// Backlog, in MemTables, at which writers stall.
const HARD_TABLES: f64 = MAX_FROZEN as f64 + 1.0;
/// The rate just past the soft limit: above what two writers reach, so
/// the first slowing is slight.
const FAST_RATE: f64 = 512.0 * 1024.0 * 1024.0;
/// The rate at the hard limit (about 20,000 puts of 200 bytes a second).
const SLOW_RATE: f64 = 4.0 * 1024.0 * 1024.0;
/// Debt a writer runs up before it sleeps it off: shorter sleeps are
/// mostly the timer's slack.
const MIN_SLEEP: Duration = Duration::from_millis(1);
/// The longest one sleep.
pub(crate) const MAX_SLEEP: Duration = Duration::from_millis(10);

/// The delayed write rate of a store.
pub(crate) struct Backpressure {
    epoch: Instant,
    /// When (nanoseconds after `epoch`) the next booked stretch starts.
    next: AtomicU64,
    /// Whether writes were slowed since the backlog was last below the
    /// soft limit.
    slowed: AtomicBool,
}

impl Default for Backpressure {
    fn default() -> Self {
        Backpressure {
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            slowed: AtomicBool::new(false),
        }
    }
}

/// The rate writes may go at with `backlog` bytes waiting in MemTables of
/// `table` bytes; `None`: as fast as they come.
pub(crate) fn rate(backlog: usize, table: usize) -> Option<f64> {
    let tables = backlog as f64 / table.max(1) as f64;
    if tables <= SOFT_TABLES {
        return None;
    }
    let p = ((tables - SOFT_TABLES) / (HARD_TABLES - SOFT_TABLES)).min(1.0);
    Some(FAST_RATE * (SLOW_RATE / FAST_RATE).powf(p))
}

impl Backpressure {
    /// How long a write of `bytes` must wait before it takes the writer
    /// lock, `backlog` bytes waiting in MemTables of `table` bytes; books
    /// its stretch at the rate.
    pub fn delay(&self, bytes: usize, backlog: usize, table: usize) -> Duration {
        let Some(rate) = rate(backlog, table) else {
            if self.slowed.load(Ordering::Relaxed) {
                self.slowed.store(false, Ordering::Relaxed);
                self.next.store(0, Ordering::Relaxed);
            }
            return Duration::ZERO;
        };
        if !self.slowed.load(Ordering::Relaxed) {
            self.slowed.store(true, Ordering::Relaxed);
        }
        let cost = (bytes as f64 / rate * 1e9) as u64;
        let now = self.epoch.elapsed().as_nanos() as u64;
        let mut booked = self.next.load(Ordering::Relaxed);
        let start = loop {
            let start = booked.max(now);
            match self.next.compare_exchange_weak(
                booked,
                start + cost,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break start,
                Err(b) => booked = b,
            }
        };
        let ahead = Duration::from_nanos(start - now);
        if ahead < MIN_SLEEP {
            Duration::ZERO
        } else {
            ahead.min(MAX_SLEEP)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: usize = 64 << 20;

    #[test]
    fn no_delay_below_the_soft_limit() {
        let bp = Backpressure::default();
        for backlog in [0, TABLE, 3 * TABLE] {
            assert_eq!(rate(backlog, TABLE), None);
            for _ in 0..10_000 {
                assert_eq!(bp.delay(1 << 20, backlog, TABLE), Duration::ZERO);
            }
        }
    }

    #[test]
    fn the_rate_falls_with_the_backlog_to_the_slow_rate() {
        let mut last = f64::INFINITY;
        for eighth in 1..=8 {
            let r = rate(3 * TABLE + eighth * TABLE / 8, TABLE).unwrap();
            assert!(r < last, "{eighth}: {r} after {last}");
            last = r;
        }
        assert!((last - SLOW_RATE).abs() < 1.0, "{last}");
        // Past the hard limit (an active table a little over) it stays.
        assert_eq!(rate(5 * TABLE, TABLE), Some(SLOW_RATE));
    }

    #[test]
    fn writes_past_the_soft_limit_are_held_to_the_rate() {
        let bp = Backpressure::default();
        let backlog = 3 * TABLE + TABLE / 2;
        let r = rate(backlog, TABLE).unwrap();
        // 1 MiB a write: each costs 1 MiB / r seconds of booked time.
        let writes = 20;
        let booked: Duration = (0..writes).map(|_| bp.delay(1 << 20, backlog, TABLE)).sum();
        let due = Duration::from_secs_f64(writes as f64 * (1 << 20) as f64 / r);
        // Nobody slept: the delays handed out fall short of the booked
        // time only by the first write's stretch and the cap.
        assert!(booked > Duration::ZERO);
        assert!(booked <= MAX_SLEEP * writes, "{booked:?}");
        assert!(
            bp.next.load(Ordering::Relaxed) as f64 >= due.as_nanos() as f64 * 0.99,
            "booked up to {} ns, due {due:?}",
            bp.next.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn a_commit_drops_the_debt() {
        let bp = Backpressure::default();
        let full = 4 * TABLE;
        for _ in 0..100 {
            bp.delay(1 << 20, full, TABLE);
        }
        assert_eq!(bp.delay(1 << 20, full, TABLE), MAX_SLEEP);
        // The backlog falls below the soft limit: the debt goes.
        assert_eq!(bp.delay(100, TABLE, TABLE), Duration::ZERO);
        let just_past = 3 * TABLE + 1;
        assert_eq!(bp.delay(100, just_past, TABLE), Duration::ZERO);
    }

    #[test]
    fn a_sleep_is_capped() {
        let bp = Backpressure::default();
        for _ in 0..1000 {
            assert!(bp.delay(1 << 20, 4 * TABLE, TABLE) <= MAX_SLEEP);
        }
    }
}
