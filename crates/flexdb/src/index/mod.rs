//! Where pairs are in the space: the sparse index over its intervals, the
//! decoded intervals and their cache, and the index saved at a clean close.

pub(crate) mod interval;
pub(crate) mod interval_cache;
pub(crate) mod key_list;
pub(crate) mod saved;
pub(crate) mod sparse;

use sparse::SparseIndex;

/// The tag flexdb puts on extents that start with a pair.
pub(crate) const PAIR_TAG: u16 = 1;

/// What the sparse index guards.
pub(crate) struct CommitterIndex {
    pub sparse: SparseIndex,
    /// Pairs in the space.
    pub pairs: u64,
    /// Bumped by every change under the write lock, so that a reader that
    /// let go of the lock can tell whether what it found is still valid.
    pub version: u64,
}
