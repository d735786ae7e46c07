//! Counters of a store, as returned by `Db::stats`.
//!
//! Invariant: a `Stats` is a snapshot; its fields are read one after another
//! without stopping the store, so they may differ by the writes that landed
//! in between.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The store's memory by part: the in-memory figures of [`Stats`], read
/// without measuring the disk, for a sampler that asks often
/// (`Db::memory_stats`). Each field means what the [`Stats`] field of the
/// same name means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes held by the active MemTable.
    pub memtable_bytes: u64,
    /// Bytes held by the frozen MemTables.
    pub backlog_bytes: u64,
    /// Memory kept for MemTables to come.
    pub memtable_pool_bytes: u64,
    /// Bytes the interval cache holds.
    pub cache_bytes: u64,
    /// Bytes the row cache holds.
    pub row_cache_bytes: u64,
    /// Bytes of memory held by the sparse index.
    pub sparse_index_bytes: u64,
    /// Bytes of memory held by the extent index.
    pub extent_index_bytes: u64,
    /// Memory that only live snapshots and transactions hold.
    pub snapshot_held_bytes: u64,
}

/// A snapshot of a store's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Pairs committed to the space (writes still in a MemTable are not
    /// counted until the committer merges them; `Db::flush` first for an
    /// exact figure). Every keyspace's pairs, and the catalog's: one per
    /// named keyspace and one more once there is any; and the expiry
    /// queue's, one per put with a time to live not yet removed.
    pub pairs: u64,
    /// Bytes of encoded pairs in the space.
    pub space_bytes: u64,
    /// Bytes held by the active MemTable.
    pub memtable_bytes: u64,
    /// Frozen MemTables waiting for the committer (the committer backlog).
    pub committer_backlog: usize,
    /// Bytes held by the frozen MemTables.
    pub backlog_bytes: u64,
    /// Intervals in the sparse index.
    pub intervals: u64,
    /// Bytes of memory held by the sparse index: the committer's, and what
    /// the copies published for readers hold beyond it (they share the
    /// leaves the committer has not changed since).
    pub sparse_index_bytes: u64,
    /// Bytes of memory held by the space's extent index, and what the views
    /// published for readers hold beyond it (they share its node blocks
    /// the space has not rewritten since).
    pub extent_index_bytes: u64,
    /// The space's data file in use over the bytes it maps (1.0 is none
    /// wasted; garbage collection keeps it bounded).
    pub space_amplification: f64,
    /// Extents in the space's extent index.
    pub extents: u64,
    /// Capacity of the interval cache in bytes.
    pub cache_capacity: u64,
    /// Bytes the interval cache holds.
    pub cache_bytes: u64,
    /// Interval-cache hits over lookups since open (0 when none).
    pub cache_hit_ratio: f64,
    /// Interval-cache hits since open.
    pub cache_hits: u64,
    /// Interval-cache lookups since open (hits and misses), so that a
    /// caller can tell the hit ratio of a stretch of time from two
    /// snapshots.
    pub cache_lookups: u64,
    /// Bytes the row cache holds (rows of hot keys: `cache_bytes` of the
    /// options less the interval cache's capacity bounds it).
    pub row_cache_bytes: u64,
    /// Gets the row cache served since open.
    pub row_cache_hits: u64,
    /// Gets that looked in the row cache since open (those no MemTable
    /// answered).
    pub row_cache_lookups: u64,
    /// Bytes written to the write-ahead log since open.
    pub wal_bytes_written: u64,
    /// Bytes written to the space's data file since open.
    pub data_bytes_written: u64,
    /// Bytes written to the space's tree file since open.
    pub tree_bytes_written: u64,
    /// Bytes written to the space's logical log since open.
    pub log_bytes_written: u64,
    /// Bytes relocated by the space's garbage collection since open.
    pub gc_relocated_bytes: u64,
    /// Intervals defragmented since open.
    pub defragmented_intervals: u64,
    /// Range deletes committed into the space since open.
    pub range_deletes_committed: u64,
    /// Intervals range deletes dropped whole from the space since open
    /// (one collapse per run of them; the intervals they covered in part
    /// had their keys deleted one by one).
    pub range_intervals_dropped: u64,
    /// Commits of frozen MemTables into the space since open. A committer
    /// that fell behind the writers commits every MemTable waiting as one,
    /// so this may be lower than `memtables_committed`.
    pub commits: u64,
    /// Frozen MemTables committed into the space since open.
    pub memtables_committed: u64,
    /// Write-ahead logs since open that took over the file of a committed
    /// one instead of a new file (its pages are in memory already).
    pub logs_reused: u64,
    /// Rotations since open that took a log prepared ahead of them
    /// (`wal::next_log`) instead of making one under the writer lock.
    pub logs_prepared: u64,
    /// Memory kept for MemTables to come: the chunks of committed ones,
    /// reused by the next (up to three MemTables' worth), and the hash
    /// table of the last one committed.
    pub memtable_pool_bytes: u64,
    /// Memory kept for MemTables to come that the store let go of when it
    /// went idle, lazily: the kernel takes it back when it needs memory,
    /// and until then the next MemTables reuse it without faulting fresh
    /// pages in (on Linux; elsewhere such memory is freed).
    pub memtable_pool_lazy_bytes: u64,
    /// The longest time a reader waited for a lock since open. Gets take
    /// none; a scan may wait for a MemTable's locks (another scan sorting
    /// that table's newest writes, or a writer).
    pub max_reader_wait: Duration,
    /// Live [`crate::Snapshot`]s and [`crate::Transaction`]s (iterators,
    /// which hold an implicit snapshot while they live, are not counted).
    pub snapshots_live: usize,
    /// How long ago the oldest live snapshot or transaction was taken
    /// (zero when there is none).
    pub snapshot_oldest_age: Duration,
    /// Memory that only live snapshots and transactions hold: MemTables
    /// already committed (their old versions) and the copies of the
    /// extent index of views since replaced (approximate, each counted
    /// once; iterators' holds are not counted).
    pub snapshot_held_bytes: u64,
    /// Versions (writes) in the committed MemTables that only live
    /// snapshots and transactions hold.
    pub snapshot_held_versions: u64,
    /// Bytes of the space's data file freed but not yet reusable: waiting
    /// for the space's next commit, or for readers. A live snapshot or
    /// iterator holds every segment freed after it was taken, so this
    /// grows with what is written while one lives, and the data file grows
    /// by as much instead of reusing them; it falls once they are dropped.
    pub space_held_bytes: u64,
    /// Disk bytes (allocated blocks, not file lengths, here and below) of
    /// the pairs the space maps: its live bytes.
    pub disk_live_bytes: u64,
    /// The space's data file's allocation beyond the live bytes: garbage
    /// in segments holding data, emptied segments not yet reusable, free
    /// segments not yet given back, the open segment's unused tail.
    pub disk_garbage_bytes: u64,
    /// Of `disk_garbage_bytes`, at most this much is free segments not yet
    /// given back (punched): room the space reuses before it grows, and
    /// gives back to the file system a few segments per commit and all of
    /// them when idle or compacted.
    pub disk_garbage_free_bytes: u64,
    /// Every write-ahead log: the active one (preallocated), frozen ones
    /// and spares kept for reuse.
    pub disk_wal_bytes: u64,
    /// Checkpoints: the space's tree file and the sparse index saved at
    /// the last clean close.
    pub disk_checkpoint_bytes: u64,
    /// The space's logical log (cut at each checkpoint).
    pub disk_log_bytes: u64,
    /// Every other file (manifest, lock).
    pub disk_other_bytes: u64,
    /// Every file of the store: the sum of the six fields above.
    pub disk_total_bytes: u64,
}

impl Stats {
    /// Its memory figures, as [`crate::Db::memory_stats`] reads them.
    pub fn memory(&self) -> MemoryStats {
        MemoryStats {
            memtable_bytes: self.memtable_bytes,
            backlog_bytes: self.backlog_bytes,
            memtable_pool_bytes: self.memtable_pool_bytes,
            cache_bytes: self.cache_bytes,
            row_cache_bytes: self.row_cache_bytes,
            sparse_index_bytes: self.sparse_index_bytes,
            extent_index_bytes: self.extent_index_bytes,
            snapshot_held_bytes: self.snapshot_held_bytes,
        }
    }
}

/// Counters (see `Stats`).
#[derive(Default)]
pub(crate) struct Counters {
    pub max_reader_wait_ns: AtomicU64,
    /// The same maximum since the last `Db::take_max_reader_wait`.
    pub window_reader_wait_ns: AtomicU64,
    /// The same maximum since the last trace report (`commit::TRACE_TARGET`).
    pub trace_reader_wait_ns: AtomicU64,
    /// Reader waits longer than 100 µs and longer than 1 ms since the last
    /// trace report (`commit::TRACE_TARGET`) (counted only when tracing).
    pub trace_slow_waits: [AtomicU64; 2],
    /// The longest exclusive hold of `index` by the committer since the
    /// last trace report (`commit::TRACE_TARGET`).
    pub max_commit_hold_ns: AtomicU64,
    pub wal_bytes_retired: AtomicU64,
    pub defragmented: AtomicU64,
    pub range_deletes_committed: AtomicU64,
    pub range_intervals_dropped: AtomicU64,
    /// Commits the committer finished, and the MemTables they held (a
    /// committer that fell behind commits every waiting MemTable at once).
    pub commits: AtomicU64,
    pub memtables_committed: AtomicU64,
    pub logs_reused: AtomicU64,
    pub logs_prepared: AtomicU64,
    /// Intervals the committer (or `check`) read from the space itself,
    /// not found cached, since the last trace report (`commit::TRACE_TARGET`).
    pub trace_committer_reads: AtomicU64,
}

impl Counters {
    /// Notes a reader's wait for a lock the committer may hold; with
    /// `trace`, also counts the slow waits.
    pub fn record_reader_wait(&self, waited: Duration, trace: bool) {
        let waited = waited.as_nanos() as u64;
        self.max_reader_wait_ns.fetch_max(waited, Ordering::Relaxed);
        self.window_reader_wait_ns
            .fetch_max(waited, Ordering::Relaxed);
        self.trace_reader_wait_ns
            .fetch_max(waited, Ordering::Relaxed);
        if trace {
            for (limit, n) in [100_000, 1_000_000].iter().zip(&self.trace_slow_waits) {
                if waited > *limit {
                    n.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}
