//! The MemTables of an open store: the active one and its log, which only
//! writers touch (`WriteHead`), and the list readers consult (`MemTables`),
//! the frozen ones waiting for the committer oldest first.
//!
//! Invariants: at most `max_frozen` MemTables
//! (`Options::max_frozen_memtables`) are frozen at once (writers stall
//! beyond; an open that replays more logs than that freezes them all, and
//! writers then stall until the committer is back within the bound); frozen generations are consecutive, oldest first, and
//! below the active one's; a frozen MemTable's log takes no more appends.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::wal::next_log::NextLog;
use crate::wal::Wal;
use crate::write::backpressure::Backpressure;
use crate::write::memtable::MemTable;

/// A MemTable that takes no more writes, waiting for the committer.
#[derive(Clone)]
pub(crate) struct FrozenMemTable {
    pub mem: Arc<MemTable>,
    pub wal: Arc<Wal>,
    pub gen: u64,
}

/// The MemTables readers consult, newest first.
#[derive(Clone)]
pub(crate) struct MemTables {
    pub active: Arc<MemTable>,
    /// The active table's generation (snapshots compare it with a view's,
    /// see `read::snapshot`).
    pub active_gen: u64,
    /// Oldest first.
    pub frozen: VecDeque<FrozenMemTable>,
}

/// What only writers touch.
pub(crate) struct WriteHead {
    pub next_seq: u64,
    pub active: Arc<MemTable>,
    pub wal: Arc<Wal>,
    pub gen: u64,
}

/// The write side of an open store: the writer lock and what it guards,
/// the list of MemTables readers consult, the newest visible sequence
/// number, and the wakeup of writers stalled on a full backlog.
pub(crate) struct WriteSide {
    writer: Mutex<WriteHead>,
    mems: ArcSwap<MemTables>,
    visible: AtomicU64,
    /// Wakes writers stalled on a full backlog (waited on under `writer`).
    stall_cv: Condvar,
    /// Slows writers as the backlog nears the stall.
    pub backpressure: Backpressure,
    /// Bytes of the frozen MemTables the running commit has merged already
    /// (its share of their distinct keys; see `backlog_bytes`), 0 between
    /// commits.
    committed: AtomicUsize,
    /// The newest generation whose log a thread was sent to sync ahead of
    /// its rotation (see `Store::append`).
    presynced_gen: AtomicU64,
    /// Frozen MemTables allowed to wait for the committer before writers
    /// stall (`Options::max_frozen_memtables`, at least 1).
    pub max_frozen: usize,
    /// The next log, prepared ahead of its rotation (`wal::next_log`).
    pub next_log: Arc<NextLog>,
}

impl WriteSide {
    /// The write side of a store whose writer is `head`, with `frozen`
    /// waiting for the committer and writes up to `visible` visible, which
    /// lets at most `max_frozen` MemTables wait for the committer.
    pub fn new(
        head: WriteHead,
        frozen: VecDeque<FrozenMemTable>,
        visible: u64,
        max_frozen: usize,
    ) -> WriteSide {
        let max_frozen = max_frozen.max(1);
        WriteSide {
            mems: ArcSwap::from_pointee(MemTables {
                active: head.active.clone(),
                active_gen: head.gen,
                frozen,
            }),
            writer: Mutex::new(head),
            visible: AtomicU64::new(visible),
            stall_cv: Condvar::new(),
            backpressure: Backpressure::new(max_frozen),
            committed: AtomicUsize::new(0),
            presynced_gen: AtomicU64::new(0),
            max_frozen,
            next_log: Arc::new(NextLog::default()),
        }
    }

    /// Bytes of `m`'s frozen MemTables the running commit has not merged.
    fn frozen_left(&self, m: &MemTables) -> usize {
        m.frozen
            .iter()
            .map(|f| f.mem.approximate_bytes())
            .sum::<usize>()
            .saturating_sub(self.committed.load(Ordering::Relaxed))
    }

    /// How long a write of `bytes` waits before the writer lock, MemTables
    /// being of `table` bytes (`Backpressure::delay`): by the backlog, and
    /// by the active table's fill once it is the last buffer before a stall
    /// (every frozen table the bound allows is waiting), and then by the
    /// running commit's pace.
    pub fn pace(&self, bytes: usize, table: usize) -> Duration {
        self.book(bytes, table, super::backpressure::MAX_SLEEP)
    }

    /// Like [`WriteSide::pace`], for a caller that waits without blocking a
    /// thread for writes of `bytes` it made: the wait is at most `cap`.
    pub fn book(&self, bytes: usize, table: usize, cap: Duration) -> Duration {
        let m = self.mems.load();
        let active = m.active.approximate_bytes();
        let last = self.frozen_full(&m).then_some(active);
        let left = self.frozen_left(&m);
        self.backpressure
            .book(bytes, left + active, last, left, table, cap)
    }

    /// Whether every frozen MemTable the bound allows is waiting in `m`:
    /// the active one is then the last buffer, and a full one stalls its
    /// writers until a commit instead of rotating.
    pub fn frozen_full(&self, m: &MemTables) -> bool {
        m.frozen.len() >= self.max_frozen
    }

    /// Records that the running commit has merged `bytes` of the frozen
    /// MemTables' bytes (0: no commit runs, or its tables left the list).
    pub fn set_committed(&self, bytes: usize) {
        self.committed.store(bytes, Ordering::Relaxed);
        self.backpressure.commit_merged(bytes);
    }

    /// Starts a commit's share of the backlog at 0 and clears it again when
    /// the returned guard drops, also when the commit fails: a stale share
    /// would hide bytes of the next commit's tables from backpressure.
    pub fn share_committed(&self) -> CommittedShare<'_> {
        self.set_committed(0);
        self.backpressure.commit_began();
        CommittedShare(self)
    }

    /// Whether the caller is the first to claim the early sync of
    /// generation `gen`'s log.
    pub fn claim_presync(&self, gen: u64) -> bool {
        self.presynced_gen.fetch_max(gen, Ordering::Relaxed) < gen
    }

    /// The writer lock.
    pub fn lock(&self) -> MutexGuard<'_, WriteHead> {
        self.writer.lock()
    }

    /// The writer lock, spinning briefly before it parks (the put path).
    #[inline]
    pub fn lock_spinning(&self) -> MutexGuard<'_, WriteHead> {
        flexsys::lock_wait::lock_spinning(&self.writer)
    }

    /// The MemTables, for one read (never waits).
    #[inline]
    pub fn mems(&self) -> Guard<Arc<MemTables>> {
        self.mems.load()
    }

    /// The MemTables, kept (for a snapshot).
    #[inline]
    pub fn mems_full(&self) -> Arc<MemTables> {
        self.mems.load_full()
    }

    /// Replaces the list of MemTables by `change` of it; returns the list
    /// it replaced. Readers load the old list or the new one, never wait.
    pub fn replace_mems(&self, change: impl Fn(&MemTables) -> MemTables) -> Arc<MemTables> {
        self.mems.rcu(|m| change(m))
    }

    /// The newest sequence number readers may see (`Acquire`).
    #[inline]
    pub fn visible(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }

    /// Makes writes up to `seq` visible (under the writer lock).
    #[inline]
    pub fn set_visible(&self, seq: u64) {
        self.visible.store(seq, Ordering::Release);
    }

    /// Stalls a writer holding `w` until woken or `timeout` passes.
    pub fn stall(&self, w: &mut MutexGuard<'_, WriteHead>, timeout: Duration) {
        self.stall_cv.wait_for(w, timeout);
    }

    /// Wakes stalled writers; with `under_lock`, under the writer lock, so
    /// that the wakeup cannot fall between a writer's check and its wait.
    pub fn wake_stalled(&self, under_lock: bool) {
        let _w = under_lock.then(|| self.writer.lock());
        self.stall_cv.notify_all();
    }
}

/// Clears a commit's share of the backlog when dropped
/// (`WriteSide::share_committed`).
pub(crate) struct CommittedShare<'a>(&'a WriteSide);

impl Drop for CommittedShare<'_> {
    fn drop(&mut self) {
        self.0.set_committed(0);
    }
}
