//! The read path: point reads, iterators, and the view the committer
//! publishes for them.

pub(crate) mod iter;
pub(crate) mod view;
pub(crate) mod walk_ahead;
