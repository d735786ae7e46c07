//! Smooth backpressure: writers are slowed a little at a time as the
//! committer's backlog nears the point where they would stall, so that
//! they rarely reach it and no one write waits long.
//!
//! The backlog is the bytes of the frozen MemTables the running commit has
//! not merged yet (its share of their distinct keys comes off as it goes)
//! and the active one's. The limits scale with `max_frozen`
//! (`Options::max_frozen_memtables`): below `max_frozen` MemTables' worth
//! (the soft limit: the committer is a whole backlog behind), writes are
//! not delayed. Above it, writes share a rate (bytes of log records per
//! second) that falls exponentially with the backlog, from `FAST_RATE` to
//! `SLOW_RATE` one table later. Once every frozen table the bound allows
//! waits, the active one is the last buffer before writers stall until a
//! commit: over its last quarter the rate falls the same way with its fill
//! (the commit's share says how much is left, not when it ends), so the
//! last buffer fills ever more slowly. The rate is a token bucket: each
//! write books the next stretch of time its bytes take at the rate; a
//! writer whose stretch starts `MIN_SLEEP` or more ahead of now sleeps
//! until then (at most `MAX_SLEEP`), before it takes the writer lock. This
//! is RocksDB's delayed write rate, driven by the backlog.
//!
//! Why the share: counted whole until its commit ended, a frozen table put
//! the backlog past the soft limit of one frozen table with the first
//! write after every rotation, and the committer then idled (a fifth of its
//! time) while writers, no longer slowed, filled the rest of the next table
//! (docs/experiments/2026-12-06-writers-paced-by-the-commit.md).
//!
//! Invariants: no write is delayed while the backlog is below the soft
//! limit and the last buffer is under three quarters full; a writer never
//! sleeps here holding the writer lock; one sleep is at most `MAX_SLEEP`;
//! the rate only falls as the backlog or the last buffer grows; debt booked
//! while slowed is dropped once neither slows writes (a commit), so it
//! never delays later writes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    /// Backlog, in MemTables, past which writes are slowed.
    soft_tables: f64,
    epoch: Instant,
    /// When (nanoseconds after `epoch`) the next booked stretch starts.
    next: AtomicU64,
    /// Whether writes were slowed since the backlog was last below the
    /// soft limit.
    slowed: AtomicBool,
}

impl Backpressure {
    /// The delayed write rate of a store that lets `max_frozen` MemTables
    /// wait for the committer (at least 1).
    pub fn new(max_frozen: usize) -> Self {
        Backpressure {
            soft_tables: max_frozen.max(1) as f64,
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            slowed: AtomicBool::new(false),
        }
    }
}

/// The last part of the last buffer (the active MemTable when every frozen
/// one the bound allows is waiting) over which writes slow to the slow
/// rate as it fills, whatever the backlog says: the backlog counts only
/// what the running commit has left, which may end later than the active
/// table fills.
const LAST_PART: f64 = 0.25;

/// The rate writes may go at with `backlog` bytes waiting in MemTables of
/// `table` bytes, slowed past `soft_tables` tables and down to the slow
/// rate one table later; `None`: as fast as they come.
pub(crate) fn rate(
    backlog: usize,
    table: usize,
    soft_tables: f64,
    last: Option<usize>,
) -> Option<f64> {
    let table = table.max(1) as f64;
    let past_soft = backlog as f64 / table - soft_tables;
    let filling = last.map_or(0.0, |a| (a as f64 / table - (1.0 - LAST_PART)) / LAST_PART);
    let p = past_soft.max(filling);
    if p <= 0.0 {
        return None;
    }
    Some(FAST_RATE * (SLOW_RATE / FAST_RATE).powf(p.min(1.0)))
}

impl Backpressure {
    /// How long a write of `bytes` must wait before it takes the writer
    /// lock, `backlog` bytes waiting in MemTables of `table` bytes; books
    /// its stretch at the rate.
    pub fn delay(
        &self,
        bytes: usize,
        backlog: usize,
        last: Option<usize>,
        table: usize,
    ) -> Duration {
        let Some(rate) = rate(backlog, table, self.soft_tables, last) else {
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
        let bp = Backpressure::new(3);
        for backlog in [0, TABLE, 3 * TABLE] {
            assert_eq!(rate(backlog, TABLE, 3.0, None), None);
            for _ in 0..10_000 {
                assert_eq!(bp.delay(1 << 20, backlog, None, TABLE), Duration::ZERO);
            }
        }
    }

    #[test]
    fn the_rate_falls_with_the_backlog_to_the_slow_rate() {
        let mut last = f64::INFINITY;
        for eighth in 1..=8 {
            let r = rate(3 * TABLE + eighth * TABLE / 8, TABLE, 3.0, None).unwrap();
            assert!(r < last, "{eighth}: {r} after {last}");
            last = r;
        }
        assert!((last - SLOW_RATE).abs() < 1.0, "{last}");
        // Past the hard limit (an active table a little over) it stays.
        assert_eq!(rate(5 * TABLE, TABLE, 3.0, None), Some(SLOW_RATE));
    }

    #[test]
    fn writes_past_the_soft_limit_are_held_to_the_rate() {
        let bp = Backpressure::new(3);
        let backlog = 3 * TABLE + TABLE / 2;
        let r = rate(backlog, TABLE, 3.0, None).unwrap();
        // 1 MiB a write: each costs 1 MiB / r seconds of booked time.
        let writes = 20;
        let booked: Duration = (0..writes)
            .map(|_| bp.delay(1 << 20, backlog, None, TABLE))
            .sum();
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
        let bp = Backpressure::new(3);
        let full = 4 * TABLE;
        for _ in 0..100 {
            bp.delay(1 << 20, full, None, TABLE);
        }
        assert_eq!(bp.delay(1 << 20, full, None, TABLE), MAX_SLEEP);
        // The backlog falls below the soft limit: the debt goes.
        assert_eq!(bp.delay(100, TABLE, None, TABLE), Duration::ZERO);
        let just_past = 3 * TABLE + 1;
        assert_eq!(bp.delay(100, just_past, None, TABLE), Duration::ZERO);
    }

    #[test]
    fn the_limits_scale_with_the_frozen_bound() {
        for max_frozen in 1..=4usize {
            let bp = Backpressure::new(max_frozen);
            let soft = max_frozen * TABLE;
            assert_eq!(bp.delay(1 << 20, soft, None, TABLE), Duration::ZERO);
            assert_eq!(rate(soft, TABLE, bp.soft_tables, None), None);
            let half = rate(soft + TABLE / 2, TABLE, bp.soft_tables, None).unwrap();
            assert!(half < FAST_RATE && half > SLOW_RATE, "{half}");
            // The hard limit: every frozen table and a full active one.
            let hard = rate(soft + TABLE, TABLE, bp.soft_tables, None).unwrap();
            assert!((hard - SLOW_RATE).abs() < 1.0, "{max_frozen}: {hard}");
        }
        // A bound of 0 (refused by `Db::open`) behaves as 1.
        assert_eq!(Backpressure::new(0).soft_tables, 1.0);
    }

    #[test]
    fn the_last_buffer_slows_writes_to_the_slow_rate_as_it_fills() {
        // Little left to commit: the backlog alone would not slow writes.
        let backlog = TABLE;
        assert_eq!(rate(backlog, TABLE, 1.0, None), None);
        assert_eq!(rate(backlog, TABLE, 1.0, Some(TABLE * 3 / 4)), None);
        let mut last = f64::INFINITY;
        for sixteenths in [13, 15] {
            let r = rate(backlog, TABLE, 1.0, Some(TABLE * sixteenths / 16)).unwrap();
            assert!(r < last && r > SLOW_RATE, "{sixteenths}/16: {r}");
            last = r;
        }
        assert_eq!(rate(backlog, TABLE, 1.0, Some(TABLE)), Some(SLOW_RATE));
        // The slower of the two wins.
        let by_backlog = rate(TABLE + TABLE / 2, TABLE, 1.0, None).unwrap();
        assert_eq!(
            rate(TABLE + TABLE / 2, TABLE, 1.0, Some(TABLE * 13 / 16)),
            Some(by_backlog)
        );
        assert_eq!(
            rate(TABLE + TABLE / 2, TABLE, 1.0, Some(TABLE)),
            Some(SLOW_RATE)
        );
    }

    #[test]
    fn a_sleep_is_capped() {
        let bp = Backpressure::new(3);
        for _ in 0..1000 {
            assert!(bp.delay(1 << 20, 4 * TABLE, None, TABLE) <= MAX_SLEEP);
        }
    }
}
