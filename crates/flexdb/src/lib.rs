//! FlexDB: an ordered key-value store that keeps every pair sorted in one
//! flexible address space (§5 of the FlexSpace paper).
//!
//! This crate is being built up; today it holds its building blocks: record
//! encodings, the write-ahead log, the MemTable, write batches and the
//! interval cache; the `Db` that ties them to a flexspace comes next.

mod batch;
pub mod cache;
pub mod codec;
mod error;
pub mod memtable;
pub mod wal;

pub use batch::{BatchOp, WriteBatch};
pub use codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use error::{Error, Result};
