//! The MemTables of an open store: the active one and its log, which only
//! writers touch (`WriteHead`), and the list readers consult (`MemTables`),
//! the frozen ones waiting for the committer oldest first.
//!
//! Invariants: at most `MAX_FROZEN` MemTables are frozen at once (writers
//! stall beyond); frozen generations are consecutive, oldest first, and
//! below the active one's; a frozen MemTable's log takes no more appends.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::wal::Wal;
use crate::write::memtable::MemTable;

/// Frozen MemTables allowed to wait for the committer before writers stall.
pub(crate) const MAX_FROZEN: usize = 3;
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
