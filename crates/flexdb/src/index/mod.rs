//! Where pairs are in the space: the sparse index over its intervals, the
//! decoded intervals and their cache, and the index saved at a clean close.

pub(crate) mod interval;
pub(crate) mod interval_cache;
pub(crate) mod key_list;
pub(crate) mod saved;
pub(crate) mod sparse;
