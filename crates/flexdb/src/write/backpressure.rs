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
//! The last buffer is also paced by the running commit: from a measure of
//! how fast commits merge the backlog (`drain`, bytes a second, taken from
//! the commit's reports of its share), writes get the rate at which the
//! last buffer's room lasts until `STALL_AIM` before the commit has merged
//! what it has left, `room / (left / drain - STALL_AIM)`, whenever that is
//! slower and the commit has more than `SHORT_COMMIT` of merging left (so
//! a write waits at most about that long for room). Without it
//! a commit slower than one buffer's filling (a 64 MiB table merged into
//! 10 M random keys takes 1.5 s; the writers filled the room in a fraction
//! of it) ended in a stall as long as the rest of the commit: 1.6 s for
//! the server's MSETs (docs/experiments/2026-12-07-last-buffer-paced-by-the-commit.md).
//!
//! Why the share: counted whole until its commit ended, a frozen table put
//! the backlog past the soft limit of one frozen table with the first
//! write after every rotation, and the committer then idled (a fifth of its
//! time) while writers, no longer slowed, filled the rest of the next table
//! (docs/experiments/2026-12-06-writers-paced-by-the-commit.md).
//!
//! Invariants: no write is delayed while the backlog is below the soft
//! limit and the last buffer is under three quarters full; a writer never
//! sleeps here holding the writer lock; one sleep is at most `MAX_SLEEP`
//! (writes made in `Db::with_pace_deferred` are not delayed: their caller
//! is handed the wait for their bytes, at most `MAX_SLEEP` a write, to
//! wait without blocking a thread);
//! the rate only falls as the backlog or the last buffer grows; debt booked
//! while slowed is dropped once neither slows writes (a commit), so it
//! never delays later writes.

use std::cell::Cell;
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
/// How long before the running commit ends the last buffer is paced to
/// fill, so that the committer finds the next table full when it ends
/// (paced to fill after it, the committer waited for the rotation).
const STALL_AIM: Duration = Duration::from_millis(25);
/// The shortest stretch of a commit a measure of its pace is taken over
/// (shorter ones are mostly its start: sorting, the first reads).
const MIN_DRAIN_SPAN: Duration = Duration::from_millis(20);
/// A commit expected to merge what it has left within this is not paced
/// for: writers that fill the last buffer meanwhile stall for at most
/// about this long (issue 36's bound on one write), and the committer then
/// finds the next table full the moment it ends (pacing to the very end
/// left it waiting for the rotation). Tables small enough to commit this
/// fast are not slowed at all.
const SHORT_COMMIT: Duration = Duration::from_millis(50);
thread_local! {
    /// While a caller defers its writes' pace ([`deferring_pace`]): the
    /// writes made so far and the bytes they logged.
    static DEFERRED: Cell<Option<Deferred>> = const { Cell::new(None) };
}

/// Writes whose pace was deferred to their caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Deferred {
    /// Writes made.
    pub writes: usize,
    /// Bytes they logged.
    pub bytes: usize,
}

/// Whether the calling thread's writes defer their pace to their caller
/// ([`deferring_pace`]); if so, counts a write of `bytes` towards it.
pub(crate) fn defer_pace(bytes: usize) -> bool {
    DEFERRED.with(|d| match d.get() {
        Some(n) => {
            d.set(Some(Deferred {
                writes: n.writes + 1,
                bytes: n.bytes.saturating_add(bytes),
            }));
            true
        }
        None => false,
    })
}

/// Runs `f` with the calling thread's writes not delayed, and returns its
/// result and those writes, for the caller to book. The previous state (an
/// enclosing call's count) is restored afterwards, also when `f` panics.
pub(crate) fn deferring_pace<R>(f: impl FnOnce() -> R) -> (R, Deferred) {
    struct Restore(Option<Deferred>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEFERRED.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DEFERRED.with(|d| d.replace(Some(Deferred::default()))));
    let r = f();
    let done = DEFERRED.with(Cell::get).unwrap_or_default();
    (r, done)
}

/// The slowest rate writes are booked at (a floor for the arithmetic:
/// sleeps are capped at `MAX_SLEEP` anyway).
const MIN_RATE: f64 = 64.0 * 1024.0;

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
    /// When (nanoseconds after `epoch`, at least 1) the running commit
    /// began merging; 0 before the first.
    commit_began: AtomicU64,
    /// How fast the newest commit merged the backlog, in bytes a second
    /// (an `f64`'s bits; 0: not measured yet).
    drain: AtomicU64,
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
            commit_began: AtomicU64::new(0),
            drain: AtomicU64::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A commit begins merging the backlog (the committer, once a commit).
    pub fn commit_began(&self) {
        self.commit_began
            .store(self.now_ns().max(1), Ordering::Relaxed);
    }

    /// The running commit has merged `bytes` of the backlog since it began
    /// (the committer, as it reports its share).
    pub fn commit_merged(&self, bytes: usize) {
        let began = self.commit_began.load(Ordering::Relaxed);
        if began == 0 || bytes == 0 {
            return;
        }
        let span = Duration::from_nanos(self.now_ns().saturating_sub(began));
        self.note_drain(bytes, span);
    }

    /// Takes `bytes` merged over `span` as the commits' pace (spans under
    /// `MIN_DRAIN_SPAN` say little and are passed over).
    fn note_drain(&self, bytes: usize, span: Duration) {
        if span >= MIN_DRAIN_SPAN {
            let drain = bytes as f64 / span.as_secs_f64();
            self.drain.store(drain.to_bits(), Ordering::Relaxed);
        }
    }

    /// The rate at which `room` bytes of the last buffer run out
    /// `STALL_AIM` before the running commit has merged the `left` bytes
    /// it has left, at the commits' measured pace; `None` before any
    /// measure, or with less left to merge than `SHORT_COMMIT` takes.
    fn commit_paced(&self, room: usize, left: usize) -> Option<f64> {
        let drain = f64::from_bits(self.drain.load(Ordering::Relaxed));
        let secs = left as f64 / drain;
        let long = drain > 0.0 && secs >= SHORT_COMMIT.as_secs_f64();
        long.then(|| room as f64 / (secs - STALL_AIM.as_secs_f64()))
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
    /// How long writes of `bytes` must wait before they take the writer
    /// lock, `backlog` bytes waiting in MemTables of `table` bytes (`last`:
    /// the active table's bytes when it is the last buffer, `left` of them
    /// being the frozen bytes the running commit has not merged); books
    /// their stretch at the slower of the backlog's rate and the commit's
    /// pace and returns how far ahead of now it starts (zero under
    /// `MIN_SLEEP`), at most `cap`: `MAX_SLEEP` for a write the store
    /// delays, `MAX_SLEEP` a write for a caller that waits without blocking
    /// a thread for writes it made (`deferring_pace`).
    pub fn book(
        &self,
        bytes: usize,
        backlog: usize,
        last: Option<usize>,
        left: usize,
        table: usize,
        cap: Duration,
    ) -> Duration {
        let by_backlog = rate(backlog, table, self.soft_tables, last);
        let by_commit =
            last.and_then(|active| self.commit_paced(table.saturating_sub(active), left));
        let slower = match (by_backlog, by_commit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(rate) = slower.map(|r| r.max(MIN_RATE)) else {
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
            ahead.min(cap)
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
                assert_eq!(
                    bp.book(1 << 20, backlog, None, 0, TABLE, MAX_SLEEP),
                    Duration::ZERO
                );
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
            .map(|_| bp.book(1 << 20, backlog, None, 0, TABLE, MAX_SLEEP))
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
            bp.book(1 << 20, full, None, 0, TABLE, MAX_SLEEP);
        }
        assert_eq!(bp.book(1 << 20, full, None, 0, TABLE, MAX_SLEEP), MAX_SLEEP);
        // The backlog falls below the soft limit: the debt goes.
        assert_eq!(
            bp.book(100, TABLE, None, 0, TABLE, MAX_SLEEP),
            Duration::ZERO
        );
        let just_past = 3 * TABLE + 1;
        assert_eq!(
            bp.book(100, just_past, None, 0, TABLE, MAX_SLEEP),
            Duration::ZERO
        );
    }

    #[test]
    fn the_limits_scale_with_the_frozen_bound() {
        for max_frozen in 1..=4usize {
            let bp = Backpressure::new(max_frozen);
            let soft = max_frozen * TABLE;
            assert_eq!(
                bp.book(1 << 20, soft, None, 0, TABLE, MAX_SLEEP),
                Duration::ZERO
            );
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

    /// Books `writes` writes of 1 MiB and returns the nanoseconds booked.
    fn booked(bp: &Backpressure, writes: usize, backlog: usize, last: usize, left: usize) -> u64 {
        for _ in 0..writes {
            assert!(bp.book(1 << 20, backlog, Some(last), left, TABLE, MAX_SLEEP) <= MAX_SLEEP);
        }
        bp.next.load(Ordering::Relaxed)
    }

    #[test]
    fn the_last_buffer_is_paced_to_last_until_the_commit_has_merged() {
        // Half the last buffer is left, the whole frozen table is left to
        // merge, and commits merge 64 MiB a second: the room must last
        // until `STALL_AIM` before the second is out, so writes go at a
        // little over 32 MiB a second, slower than the backlog alone asks
        // (about 45 MiB a second here).
        let bp = Backpressure::new(1);
        bp.note_drain(TABLE, Duration::from_secs(1));
        let (active, left) = (TABLE / 2, TABLE);
        let backlog = left + active;
        let by_backlog = rate(backlog, TABLE, 1.0, Some(active)).unwrap();
        let paced = bp.commit_paced(TABLE - active, left).unwrap();
        let want = (TABLE / 2) as f64 / (1.0 - STALL_AIM.as_secs_f64());
        assert!((paced - want).abs() < 1.0, "{paced} against {want}");
        assert!(paced < by_backlog, "{paced} against {by_backlog}");
        let writes = 20;
        let booked = booked(&bp, writes, backlog, active, left) as f64;
        let due = writes as f64 * (1 << 20) as f64 / paced * 1e9;
        assert!(
            booked >= due * 0.99 && booked <= due * 1.01 + 1e6,
            "{booked} against {due}"
        );
        // The less room, the slower; the less left to merge, the faster.
        let tight = bp.commit_paced(TABLE / 8, left).unwrap();
        let nearly_done = bp.commit_paced(TABLE / 2, TABLE / 8).unwrap();
        assert!(tight < paced && nearly_done > paced);
    }

    #[test]
    fn no_pace_without_a_measure_or_anything_left_to_merge() {
        let bp = Backpressure::new(1);
        assert_eq!(bp.commit_paced(TABLE / 2, TABLE), None, "no measure yet");
        // A commit that has not begun, or a span too short to say much,
        // measures nothing.
        bp.commit_merged(TABLE);
        assert_eq!(bp.commit_paced(TABLE / 2, TABLE), None);
        bp.note_drain(TABLE, MIN_DRAIN_SPAN / 2);
        assert_eq!(bp.commit_paced(TABLE / 2, TABLE), None);
        bp.note_drain(TABLE, Duration::from_secs(1));
        assert_eq!(bp.commit_paced(TABLE / 2, 0), None, "nothing left");
        // Little left: the commit ends within `SHORT_COMMIT`, so writes go
        // on and stall briefly if they must.
        let soon = (TABLE as f64 * SHORT_COMMIT.as_secs_f64() * 0.9) as usize;
        assert_eq!(bp.commit_paced(TABLE / 2, soon), None, "ends soon");
        assert!(bp.commit_paced(TABLE / 2, soon * 2).is_some());
        // A tiny table measured as slow to commit is still short.
        let tiny = Backpressure::new(1);
        tiny.note_drain(1024, Duration::from_millis(40));
        assert_eq!(tiny.commit_paced(512, 1024), None);
        // Without the commit's pace, the last buffer's delay is the
        // backlog's alone: none below three quarters of a table.
        let fresh = Backpressure::new(1);
        assert_eq!(
            fresh.book(1 << 20, TABLE, Some(TABLE / 2), TABLE / 2, TABLE, MAX_SLEEP),
            Duration::ZERO
        );
        // Outside the last buffer the commit's pace does not apply.
        assert_eq!(
            bp.book(1 << 20, TABLE / 2, None, TABLE / 2, TABLE, MAX_SLEEP),
            Duration::ZERO
        );
    }

    #[test]
    fn deferred_writes_are_counted_and_the_state_comes_back() {
        assert!(!defer_pace(10), "not deferring");
        let ((), outer) = deferring_pace(|| {
            assert!(defer_pace(100) && defer_pace(23));
            let ((), inner) = deferring_pace(|| assert!(defer_pace(7)));
            assert_eq!(
                inner,
                Deferred {
                    writes: 1,
                    bytes: 7
                }
            );
            assert!(defer_pace(1));
        });
        let want = Deferred {
            writes: 3,
            bytes: 124,
        };
        assert_eq!(outer, want, "the inner call's writes are its own");
        assert!(!defer_pace(10));
        let panicked = std::panic::catch_unwind(|| deferring_pace(|| panic!("in f")));
        assert!(panicked.is_err());
        assert!(!defer_pace(10), "restored after a panic");
    }

    /// Writes deferred to their caller: the wait of their booking is handed
    /// back up to the cap the caller gives (`MAX_SLEEP` a write), where a
    /// write the store delays sleeps at most `MAX_SLEEP` of it.
    #[test]
    fn a_caller_that_waits_itself_is_handed_the_wait_up_to_its_cap() {
        let full = 4 * TABLE;
        let cap = MAX_SLEEP * 100;
        let bp = Backpressure::new(3);
        assert_eq!(bp.book(1 << 20, full, None, 0, TABLE, cap), Duration::ZERO);
        // 1 MiB at the slow rate (4 MiB/s) is 250 ms.
        let second = bp.book(1 << 20, full, None, 0, TABLE, cap);
        assert!(second > MAX_SLEEP * 10, "{second:?}");
        assert!(second <= Duration::from_millis(250), "{second:?}");
        assert_eq!(bp.book(1 << 20, full, None, 0, TABLE, MAX_SLEEP), MAX_SLEEP);
        for _ in 0..10 {
            bp.book(1 << 20, full, None, 0, TABLE, cap);
        }
        assert_eq!(bp.book(1 << 20, full, None, 0, TABLE, cap), cap);
        // Not slowed any more: the debt goes, for both kinds of caller.
        assert_eq!(bp.book(100, TABLE, None, 0, TABLE, cap), Duration::ZERO);
        assert_eq!(bp.book(100, full, None, 0, TABLE, cap), Duration::ZERO);
    }

    #[test]
    fn a_full_last_buffer_books_at_the_floor_and_sleeps_at_most_the_cap() {
        let bp = Backpressure::new(1);
        bp.note_drain(TABLE, Duration::from_secs(1));
        for _ in 0..1000 {
            let d = bp.book(1 << 20, 2 * TABLE, Some(TABLE), TABLE, TABLE, MAX_SLEEP);
            assert!(d <= MAX_SLEEP, "{d:?}");
        }
        // A thousand writes of 1 MiB at the floor: booked, not overflowed.
        let booked = bp.next.load(Ordering::Relaxed) as f64;
        let due = 1000.0 * (1 << 20) as f64 / MIN_RATE * 1e9;
        assert!(booked >= due * 0.99, "{booked} against {due}");
    }

    #[test]
    fn a_sleep_is_capped() {
        let bp = Backpressure::new(3);
        for _ in 0..1000 {
            assert!(bp.book(1 << 20, 4 * TABLE, None, 0, TABLE, MAX_SLEEP) <= MAX_SLEEP);
        }
    }
}
