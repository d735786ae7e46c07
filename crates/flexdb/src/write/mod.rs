//! The write path: writes land in the active MemTable (after their log
//! record), which rotation freezes for the committer.

pub(crate) mod arena;
pub(crate) mod chunk_pool;
pub(crate) mod memtable;
pub(crate) mod write_order;
