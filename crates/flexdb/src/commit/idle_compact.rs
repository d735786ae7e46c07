//! Idle compaction: when the store has taken no writes and few reads
//! (`BUSY_READS` a second) for `IDLE_WAITS` of the committer's `POOL_IDLE`
//! waits in a row and the space's data file holds garbage worth it (a
//! compaction takes a core: in a read-only phase at two threads on two
//! cores it took 31 % of the samples the readers wanted, issue 41), the
//! committer compacts the
//! space one garbage-collection round at a time (`FlexSpace::compact_step`),
//! looking for work between rounds, publishing a fresh view every
//! `REPUBLISH_EVERY` rounds (the old one holds the emptied segments) and
//! punching the freed segments once the old view is dropped; at the end it
//! checkpoints and does the same once more.
//!
//! Invariants: a round runs only on the committer's thread with no
//! MemTable waiting; compaction stops at once when a MemTable is frozen (a
//! commit runs) or the active one grew since it started, and between
//! rounds when reads came back (over `BUSY_READS` a second since the last
//! round), to start again once the store is idle again; it is armed again
//! only by a commit, so a store left idle compacts once, not in a loop.

use crate::error::{space_err, Result};
use crate::store::Store;

/// Idle waits in a row (of `POOL_IDLE` each) before compacting.
pub(crate) const IDLE_WAITS: u32 = 3;

/// Reads a second (lookups of the row and interval caches) above which
/// the store is busy serving them, and not compacted: a few thousand
/// reads a second leave a core free, a read-heavy phase does not.
pub(crate) const BUSY_READS: u64 = 10_000;
/// The shortest window the read rate is measured over.
const READ_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

/// Garbage (data file allocation beyond the live bytes) worth compacting:
/// over this fraction of the live bytes...
const WORTH_FRACTION: u64 = 8;
/// ...and over this many segments.
const WORTH_SEGMENTS: u64 = 2;

/// Fresh views published after an idle compaction, at most.
const REPUBLISH_ROUNDS: u8 = 3;

/// Rounds between fresh views while compacting: the current view holds
/// every segment the rounds empty (grace periods), so without one the
/// disk comes back only at the end (at 10 M pairs, after more than the
/// 30 s of an idle phase); each costs a copy of the extent index.
const REPUBLISH_EVERY: u32 = 16;

/// The committer's idle-compaction state.
#[derive(Default)]
pub(crate) struct IdleCompaction {
    /// A commit ran since the last compaction (or open).
    armed: bool,
    idle_waits: u32,
    /// Compacting, and the active MemTable's bytes when it started.
    running: Option<usize>,
    /// Fresh views still to publish, each followed by a punch once the
    /// view before it is dropped (see `after_reap`).
    punch_after_reap: u8,
    /// Rounds run since the last fresh view.
    rounds: u32,
    /// The read count and the time it was taken (`Store::reads`) at the
    /// start of the current rate window, and the last window's verdict.
    reads_at: Option<(u64, std::time::Instant)>,
    reads_busy: bool,
}

impl IdleCompaction {
    /// Whether the committer should keep timing idle waits for it.
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// Whether a round is due (the committer has nothing to commit).
    pub fn running(&self) -> bool {
        self.running.is_some()
    }

    /// A commit ran: writes came back.
    pub fn committed(&mut self) {
        self.armed = true;
        self.idle_waits = 0;
        self.running = None;
    }

    /// Whether reads came at over `BUSY_READS` a second in the last window
    /// of at least `READ_WINDOW` (false before the first): a shorter one
    /// (the first round right after a wait) would take a short scan for a
    /// busy store.
    fn reads_busy(&mut self, shared: &Store) -> bool {
        let now = (shared.reads(), std::time::Instant::now());
        match self.reads_at {
            None => self.reads_at = Some(now),
            Some((n, t)) => {
                let secs = now.1.duration_since(t).as_secs_f64();
                if secs >= READ_WINDOW.as_secs_f64() {
                    self.reads_busy = now.0.saturating_sub(n) as f64 > BUSY_READS as f64 * secs;
                    self.reads_at = Some(now);
                }
            }
        }
        self.reads_busy
    }

    /// After a `POOL_IDLE` wait that found the store without writes
    /// (`idle`) or not.
    pub fn after_wait(&mut self, shared: &Store, idle: bool) {
        let busy_reading = self.reads_busy(shared);
        if !idle || busy_reading {
            self.idle_waits = 0;
            return;
        }
        self.idle_waits += 1;
        if !self.armed || self.running.is_some() || self.idle_waits < IDLE_WAITS {
            return;
        }
        let s = shared.space.stats();
        let garbage = s.data_allocated_bytes.saturating_sub(s.live_bytes);
        if garbage > s.live_bytes / WORTH_FRACTION
            && garbage > WORTH_SEGMENTS * flexspace::SEGMENT_SIZE
        {
            self.running = Some(shared.writes.mems().active.approximate_bytes());
        } else {
            self.armed = false;
        }
    }

    /// One round; at the end, checkpoint and publish a fresh view.
    pub fn step(&mut self, shared: &Store) -> Result<()> {
        let Some(start) = self.running else {
            return Ok(());
        };
        if shared.writes.mems().active.approximate_bytes() != start || self.reads_busy(shared) {
            // Writes or reads came back: stop, and try again once idle
            // again; a fresh view lets go of what the rounds so far emptied
            // (punched once the old one is gone).
            self.running = None;
            self.idle_waits = 0;
            if std::mem::take(&mut self.rounds) > 0 {
                super::republish(shared)?;
                self.punch_after_reap = self.punch_after_reap.max(1);
            }
            return Ok(());
        }
        if shared.space.compact_step().map_err(space_err)?.is_some() {
            self.rounds += 1;
            if self.rounds >= REPUBLISH_EVERY {
                // Give back what the rounds so far emptied (punched in
                // `after_reap` once the old view is gone).
                self.rounds = 0;
                super::republish(shared)?;
                self.punch_after_reap = self.punch_after_reap.max(1);
            }
            return Ok(());
        }
        self.rounds = 0;
        self.running = None;
        self.armed = false;
        shared.space.checkpoint().map_err(space_err)?;
        super::republish(shared)?;
        self.punch_after_reap = REPUBLISH_ROUNDS;
        Ok(())
    }

    /// After the committer reaped replaced views: punch what the old view
    /// held once it is gone (`views_left`: some are still read).
    pub fn after_reap(&mut self, shared: &Store, views_left: bool) {
        if self.punch_after_reap == 0 || views_left {
            return;
        }
        self.punch_after_reap -= 1;
        // A failed punch only leaves blocks allocated.
        let _ = shared.space.punch_free_segments();
        // Segments a reader other than the views still held (an iterator
        // or snapshot of the old state) are let go by another fresh view
        // once that reader is gone.
        if self.punch_after_reap > 0 && shared.space.stats().reclaimable_segments > 0 {
            let _ = super::republish(shared);
        } else {
            self.punch_after_reap = 0;
        }
    }
}
