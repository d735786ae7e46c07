//! The shared state of an open store and its read and write paths.
//!
//! Locks, in the order they may be taken: `writer` (serializes writers and
//! MemTable rotation), `index` (the committer's sparse index, which must
//! agree with the live space). Readers take neither: the list of MemTables
//! (`mems`) and the state the committer publishes for them (`views`) are
//! `ArcSwap`s, loaded with no lock and without writing to a line another
//! reader reads. The list is replaced whole (it is a few `Arc`s) by rotation,
//! under `writer`, and by the committer when it retires a MemTable. The
//! committer takes `index` exclusively to apply one group of changes at a
//! time, and only it and its prefetcher read it.
//!
//! Invariants:
//! - Every write with a sequence number `<= visible` is in a MemTable or in
//!   the space; a reader at snapshot `visible` sees whole batches.
//! - A frozen MemTable's write-ahead log is durable before the committer
//!   writes any of it to the space, and is removed only after the space has
//!   synced its content.
//! - The sparse index and the space change together under `index`'s write
//!   lock, so the prefetcher holding `index` shared reads consistent
//!   offsets; readers read a published view (`PublishedView`), which is consistent by
//!   construction.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use flexspace::{FlexSpace, Storage};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{space_err, Error, Result};
use crate::index::interval_cache::IntervalCache;
use crate::index::CommitterIndex;
use crate::options::Options;
use crate::read::view::ViewPublisher;
use crate::stats::Counters;
use crate::write::memtable_list::{MemTables, WriteHead};

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

/// The committer's mailbox.
#[derive(Default)]
pub(crate) struct CommitterMailbox {
    pub shutdown: bool,
    /// Generations up to this one are durable in the space.
    pub committed_gen: u64,
    /// Why the store stopped taking writes, if it did.
    pub stopped: Option<String>,
}

/// Everything an open store shares between threads.
pub(crate) struct Store {
    pub dir: PathBuf,
    /// The directory on a real file system (logs are then mapped), `None`
    /// for other storage backends.
    pub real_dir: Option<PathBuf>,
    pub opts: Options,
    pub storage: Arc<dyn Storage>,
    pub space: FlexSpace,
    pub cache: IntervalCache,
    pub writer: Mutex<WriteHead>,
    pub mems: arc_swap::ArcSwap<MemTables>,
    /// The committer's index (see `index::CommitterIndex`).
    pub index: RwLock<CommitterIndex>,
    /// What readers read, and the protocol that publishes it (`read::view`).
    pub views: ViewPublisher,
    pub visible: AtomicU64,
    pub work: Mutex<CommitterMailbox>,
    /// Wakes the committer.
    pub work_cv: Condvar,
    /// Wakes writers stalled on a full backlog (waited on under `writer`).
    pub stall_cv: Condvar,
    /// Wakes `flush` waiters (waited on under `work`). A condition variable
    /// serves one mutex only, hence two.
    pub flushed_cv: Condvar,
    pub counters: Counters,
    /// Memory of committed MemTables, kept for the next ones (`chunk`).
    pub chunks: Arc<crate::write::chunk_pool::ChunkPool>,
    /// Files of committed logs, kept for the next logs (`spare_logs`).
    pub spare_logs: crate::wal::spare_logs::SpareLogs,
    /// Debug events of `commit::TRACE_TARGET` are enabled (decided once at
    /// open): the committer times its holds and reports each commit.
    pub trace: bool,
}

impl Store {
    /// Refuses writes once the store stopped.
    pub fn check_stopped(&self) -> Result<()> {
        match &self.work.lock().stopped {
            Some(why) => Err(Error::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    /// Records why the store stopped and wakes everyone waiting.
    pub fn stop(&self, why: String) {
        let mut w = self.work.lock();
        if w.stopped.is_none() {
            w.stopped = Some(why);
        }
        drop(w);
        self.work_cv.notify_all();
        self.flushed_cv.notify_all();
        self.stall_cv.notify_all();
    }
}
