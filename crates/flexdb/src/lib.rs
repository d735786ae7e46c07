//! FlexDB: an ordered key-value store that keeps every pair sorted in one
//! flexible address space (§5 of the FlexSpace paper).
//!
//! ```
//! use flexdb::{Db, Options, WriteBatch, WriteOptions};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::new().create_if_missing(true)).unwrap();
//! db.put("fruit:apple", "red").unwrap();
//! let mut batch = WriteBatch::new();
//! batch.put(b"fruit:pear", b"green").unwrap();
//! batch.delete(b"fruit:apple").unwrap();
//! db.write_opt(batch, &WriteOptions { sync: true }).unwrap(); // all or nothing, durable
//! let fruits: Vec<_> = db.prefix("fruit:").map(|kv| kv.unwrap()).collect();
//! assert_eq!(fruits, [(b"fruit:pear".to_vec(), b"green".to_vec())]);
//! db.close().unwrap();
//! ```
//!
//! Layout: `store` (shared state, read and write paths), `view` (the
//! state published for readers), `committer` (the background merge into
//! the space), `merge` (an interval's new content),
//! `sparse` (the sparse index), `interval` and `cache` (decoded intervals
//! and their CLOCK cache), `memtable`, `wal`, `batch`, `codec` (encodings),
//! `open` (creation and recovery), `iter`, `check`, `files`, `lock_wait`
//! (how readers and the committer wait for shared locks), `counter`
//! (statistics counted on every read without a shared cache line).

mod arena;
mod batch;
pub mod cache;
mod check;
mod chunk;
pub mod codec;
mod committer;
mod db;
mod error;
mod files;
mod index_file;
pub mod interval;
mod iter;
mod keys;
pub mod memtable;
mod merge;
mod newest_of;
mod open;
mod options;
mod spare_logs;
pub mod sparse;
mod stats;
mod store;
mod view;
pub mod wal;
mod wal_map;
mod walk_ahead;
mod write_order;
mod writeback;

pub use batch::{BatchOp, WriteBatch};
pub use check::CheckReport;
pub use codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use db::Db;
pub use error::{Error, Result};
pub use iter::{Iter, KeyValue};
pub use options::{Options, WriteOptions};
pub use stats::Stats;
