//! FlexDB: an ordered key-value store that keeps every pair sorted in one
//! flexible address space (§5 of the FlexSpace paper).

mod batch;
pub mod cache;
mod check;
pub mod codec;
mod db;
mod error;
mod iter;
pub mod memtable;
mod options;
mod stats;
pub mod wal;

pub use batch::{BatchOp, WriteBatch};
pub use check::CheckReport;
pub use codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use db::Db;
pub use error::{Error, Result};
pub use iter::{Iter, KeyValue};
pub use options::{Options, WriteOptions};
pub use stats::Stats;
