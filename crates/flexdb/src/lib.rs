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
//! Layout (one line a module; each opens with its invariants):
//!
//! - `db`, `options`, `error`, `stats`, `batch`: the public API.
//! - `codec`: byte encodings shared by the space and the logs.
//! - `store`: the state an open store shares between its threads.
//! - `threads`: the priority and CPU time of the store's own threads.
//! - `write`: the write path (MemTable and its memory, rotation).
//! - `wal`: the write-ahead logs (format, replay, mapped appends, spares).
//! - `commit`: the committer (merging frozen MemTables into the space).
//! - `read`: the read path (point reads, iterators, the published view).
//! - `index`: the sparse index, its intervals and their cache.
//! - `recovery`: opening a store (creation, recovery, manifest, check).
//! - `diagnostics` (feature `diagnostics`): measurements of internal
//!   structures (the sparse index, a MemTable's walk) for flexbench.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod batch;
mod codec;
mod commit;
mod db;
/// Measurements of internal structures, for `flexbench internals`.
#[cfg(any(test, feature = "diagnostics"))]
pub mod diagnostics;
mod error;
mod index;
mod options;
mod read;
mod recovery;
mod stats;
mod store;
mod threads;
mod wal;
mod write;

pub use batch::{BatchOp, WriteBatch};
pub use codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use db::Db;
pub use error::{Error, Result};
pub use options::{Options, WriteOptions};
pub use read::iter::{Iter, KeyValue};
pub use recovery::check::CheckReport;
pub use stats::Stats;
