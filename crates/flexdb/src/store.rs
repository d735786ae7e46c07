//! `Store`: everything an open store shares between its threads, each
//! subsystem behind its own type: the write side (`write::WriteSide`), the
//! committer's index (`index::CommitterIndex`) and mailbox
//! (`commit::mailbox`), the published view (`read::view::ViewPublisher`),
//! the interval cache, the counters, and the pools kept for MemTables and
//! logs to come. The paths live with their subsystems: writes in `write`,
//! reads in `read`, commits in `commit`, opening in `recovery`.
//!
//! Locks, in the order they may be taken: the writer lock (`WriteSide`:
//! serializes writers and MemTable rotation), `index` (the committer's
//! sparse index, which must agree with the live space). Readers take
//! neither: the list of MemTables and the view the committer publishes for
//! them are `ArcSwap`s, loaded with no lock and without writing to a line
//! another reader reads. The list is replaced whole (it is a few `Arc`s) by
//! rotation, under the writer lock, and by the committer when it retires a
//! MemTable. The committer takes `index` exclusively to apply one group of
//! changes at a time, and only it and its prefetcher read it.
//!
//! Invariants:
//! - Every write with a sequence number `<= visible` is in a MemTable or in
//!   the space; a reader at snapshot `visible` sees whole batches.
//! - A frozen MemTable's write-ahead log is durable before the committer
//!   writes any of it to the space, and is removed only after the space has
//!   synced its content.
//! - The sparse index and the space change together under `index`'s write
//!   lock, so the prefetcher holding `index` shared reads consistent
//!   offsets; readers read a published view (`PublishedView`), which is
//!   consistent by construction.

use std::path::PathBuf;
use std::sync::Arc;

use flexspace::{FlexSpace, Storage};
use parking_lot::RwLock;

use crate::commit::mailbox::CommitterMailbox;
use crate::error::{space_err, Error, Result};
use crate::index::interval_cache::IntervalCache;
use crate::index::CommitterIndex;
use crate::options::Options;
use crate::read::view::ViewPublisher;
use crate::stats::Counters;
use crate::write::memtable_list::WriteSide;

/// What the space's three user metadata words record at each commit point
/// (`FlexSpace::set_user_meta`), in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommitPoint {
    /// Pairs in the space.
    pub pairs: u64,
    /// The last generation whose every write is in the space.
    pub committed_gen: u64,
    /// The highest sequence number used so far.
    pub max_seq: u64,
}

impl CommitPoint {
    /// The commit point the space's metadata words record.
    pub fn read(space: &FlexSpace) -> CommitPoint {
        let [pairs, committed_gen, max_seq] = space.user_meta();
        CommitPoint {
            pairs,
            committed_gen,
            max_seq,
        }
    }

    /// Records this commit point in the space's metadata words (durable
    /// with the space's next sync).
    pub fn write(self, space: &FlexSpace) -> Result<()> {
        space
            .set_user_meta([self.pairs, self.committed_gen, self.max_seq])
            .map_err(space_err)
    }
}

/// Everything an open store shares between threads.
pub(crate) struct Store {
    pub dir: PathBuf,
    pub opts: Options,
    pub storage: Arc<dyn Storage>,
    pub space: FlexSpace,
    pub cache: IntervalCache,
    /// Rows of hot keys (`read::row_cache`; `None` when the budget is too
    /// small for one set).
    pub rows: Option<crate::read::row_cache::RowCache>,
    /// Which intervals a get that misses the cache caches: those missed
    /// twice in a window (`read::fetch`'s in-place lookup serves the rest).
    pub interval_door: crate::read::doorkeeper::Doorkeeper,
    /// How often intervals were read lately: a get caches a missed interval
    /// only if it was read more often than the entry it would evict.
    pub interval_freq: crate::read::frequency::FrequencySketch,
    /// The writer lock, the MemTables and what is visible (`write`).
    pub writes: WriteSide,
    /// The committer's index (see `index::CommitterIndex`).
    pub index: RwLock<CommitterIndex>,
    /// What readers read, and the protocol that publishes it (`read::view`).
    pub views: ViewPublisher,
    /// Shutdown, stop and commit progress (`commit::mailbox`).
    pub mailbox: CommitterMailbox,
    pub counters: Counters,
    /// Memory of committed MemTables, kept for the next ones (`write::chunk_pool`).
    pub chunks: Arc<crate::write::chunk_pool::ChunkPool>,
    /// The live snapshots and transactions, for `Stats` (`read::snapshot`).
    pub snapshots: crate::read::snapshot::SnapshotRegistry,
    /// Files of committed logs, kept for the next logs (`wal::spare_logs`).
    pub spare_logs: crate::wal::spare_logs::SpareLogs,
    /// The first generation whose log is kept because a commit held back
    /// updates into a corrupt interval (`commit`): the space's metadata
    /// never name it committed, and no log from it on is retired, so the
    /// next open replays them all.
    pub held_logs_from: parking_lot::Mutex<Option<u64>>,
    /// Debug events of `commit::TRACE_TARGET` are enabled (decided once at
    /// open): the committer times its holds and reports each commit.
    pub trace: bool,
    /// What a salvaging open (`Options::salvage`, for `Db::repair`) gave
    /// up, one sentence each naming the file.
    pub salvaged: Vec<String>,
    /// The named keyspaces (`keyspace::catalog`), read once the store is
    /// open.
    pub keyspaces: crate::keyspace::catalog::Catalog,
    /// The format its manifest named at open (`recovery::manifest`; below
    /// the current one until `keyspace::upgrade` brings it up).
    pub format_version: u32,
    /// The clock deadlines are judged by (`clock`).
    pub clock: crate::clock::Clock,
    /// The expiry thread's state (`expiry`).
    pub expiry: crate::expiry::ExpiryState,
}

impl Store {
    /// Refuses writes once the store stopped, and on a read-only store.
    pub fn check_stopped(&self) -> Result<()> {
        if self.opts.read_only {
            return Err(Error::ReadOnly);
        }
        self.mailbox.check_stopped()
    }

    /// Reads so far, as the caches count them (lookups of the row cache
    /// and of the interval cache; a get may count in both): a statistic,
    /// for telling a store serving reads from an idle one.
    pub fn reads(&self) -> u64 {
        let rows = self.rows.as_ref().map_or(0, |r| r.hits_and_lookups().1);
        rows + self.cache.counts().1
    }

    /// Records why the store stopped and wakes everyone waiting.
    pub fn stop(&self, why: String) {
        self.mailbox.stop(why);
        self.writes.wake_stalled(false);
    }

    /// Stops the store because of `e`, unless `e` only says there is no
    /// room to write: that failed one write, which logged nothing, and the
    /// next may succeed once room is made (`Error::NoSpace`).
    pub fn stop_unless_no_space(&self, e: &Error) {
        if !e.is_no_space() {
            self.stop(e.to_string());
        }
    }
}
