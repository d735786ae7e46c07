//! The report of a full consistency check (`Db::check`).
//!
//! Invariant: `problems` is empty exactly when every check passed.

/// What `Db::check` verified and what it found wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Pairs read and verified in the space.
    pub pairs: u64,
    /// Intervals of the sparse index checked against the space.
    pub intervals: u64,
    /// Bytes of the space read.
    pub bytes: u64,
    /// Pairs still in MemTables (not yet committed; checked for order only).
    pub memtable_pairs: u64,
    /// Every problem found, one sentence each naming the file or structure.
    pub problems: Vec<String>,
}

impl CheckReport {
    /// Whether every check passed.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}
