//! The WAL's disk footprint once the committer has caught up.
//!
//! While frozen MemTables wait, committed logs are kept as spares for the
//! next logs to take over (`spare_logs`): their pages are in the page
//! cache, which spares the writers a page fault per page. Once a commit
//! leaves no frozen MemTable waiting and the active one less than
//! `CAUGHT_UP_EIGHTHS` eighths full (after a flush, or when writes come
//! slower than commits: the next rotation is most of a MemTable away), or
//! the store is idle, the WAL is given back down to
//! the active log: every spare is removed, and the active log's blocks past
//! its records and its mapping are punched (`Wal::trim_tail`; a log that
//! took over a spare holds the older log's records there; the step a
//! growth ahead is preparing stays). The next log is then made afresh, ahead of its rotation
//! (`next_log`), off the writers' path.
//!
//! Invariants: nothing here touches a log in use beyond its trimmed tail,
//! or a prepared log (neither is a spare); what fails here is only disk
//! space not given back (a spare left is removed by the next open), never
//! a write lost, so the callers treat it as best effort.

use crate::error::Result;
use crate::store::Store;
use crate::write::MemTables;

/// See the module's documentation.
const CAUGHT_UP_EIGHTHS: usize = 1;

/// Whether the committer has caught up with the writers (`mems` after a
/// commit): nothing frozen waits, and the active MemTable holds less than
/// `CAUGHT_UP_EIGHTHS` eighths of `memtable_bytes`.
pub(crate) fn caught_up(mems: &MemTables, memtable_bytes: usize) -> bool {
    mems.frozen.is_empty()
        && mems.active.approximate_bytes() < memtable_bytes / 8 * CAUGHT_UP_EIGHTHS
}

impl Store {
    /// Removes every spare log and trims the active log's tail; returns the
    /// first failure (after trying both).
    pub(crate) fn shrink_wal(&self) -> Result<()> {
        let removed = self.spare_logs.remove_all(&*self.storage);
        let wal = self.writes.lock().wal.clone();
        let trimmed = wal.trim_tail().map(|_| ());
        removed.and(trimmed)
    }
}
