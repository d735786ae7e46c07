//! Where pairs are in the space: the sparse index over its intervals
//! (`sparse`, its node keys in `key_list`), the decoded intervals
//! (`interval`) and their cache (`interval_cache`), the index saved at a
//! clean close (`saved`), and the committer's copy of the index
//! (`CommitterIndex`).
//!
//! Invariants: the committer's index and the space change together, under
//! the index's write lock; every interval starts on an extent tagged
//! `PAIR_TAG`; a cached interval is immutable (replaced, never edited).

pub(crate) mod interval;
pub(crate) mod interval_cache;
mod key_list;
pub(crate) mod saved;
pub(crate) mod sparse;

use sparse::SparseIndex;

/// The tag flexdb puts on extents that start with a pair.
pub(crate) const PAIR_TAG: u16 = 1;

/// The committer's sparse index and what changes with it, under one
/// `RwLock` (`Store::index`).
pub(crate) struct CommitterIndex {
    pub sparse: SparseIndex,
    /// Pairs in the space.
    pub pairs: u64,
    /// Bumped by every change under the write lock, so that a reader that
    /// let go of the lock can tell whether what it found is still valid.
    pub version: u64,
}
