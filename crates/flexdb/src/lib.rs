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
//! # What each read sees
//!
//! Every write (`put`, `delete`, a `WriteBatch`, a transaction's commit) is
//! atomic: a reader sees none or all of it.
//!
//! - [`Db::get`] / [`Db::contains`]: the newest value as of the call (every
//!   write acknowledged before it; a concurrent write may or may not be
//!   seen). Two gets are two different moments.
//! - [`Db::range`], [`Db::iter`], [`Db::prefix`]: one consistent state, the
//!   store as of the iterator's creation (an implicit snapshot), for the
//!   whole scan, both directions and across `seek`s; nothing written after
//!   it is seen, and every batch written before it is seen whole.
//! - [`Db::snapshot`] → [`Snapshot`]: `get`, `contains`, `range`, `iter`,
//!   `prefix` all read exactly the writes acknowledged before the snapshot
//!   was taken, for as long as it lives (its iterators too).
//! - [`Db::transaction`] → [`Transaction`]: reads are a snapshot taken at
//!   its start with its own buffered writes merged in (read your own
//!   writes, iterators included). Its commit is atomic and fails with
//!   [`Error::Conflict`] (nothing written; retry) when a write committed
//!   after its start touched a key it writes ([`Isolation::Snapshot`]:
//!   first committer wins) or anything it read, point or range, phantoms
//!   included ([`Isolation::Serializable`]).
//! - [`Db::compare_and_swap`]: atomic against every other write.
//! - [`Db::delete_range`] (also in a `WriteBatch` and a `Transaction`):
//!   every key of a range removed atomically, at the cost of one logged
//!   record; the committer drops the range's whole intervals from the
//!   space in runs of one collapse each.
//! - [`Db::keyspace`] → [`Keyspace`]: a named, independent order of keys
//!   with the same methods (`Db`'s own are the default keyspace's).
//!   Batches ([`WriteBatch::put_in`]), transactions
//!   ([`Transaction::keyspace`]) and snapshots ([`Snapshot::keyspace`])
//!   span keyspaces atomically; [`Db::drop_keyspace`] removes one whole.
//! - [`Db::put_with_ttl`] (also [`WriteBatch::put_with_ttl`] and in a
//!   keyspace): the pair expires at a wall-clock deadline; from then on
//!   every read above (snapshots included) judges it absent by the time of
//!   that read, and the store removes it by itself ([`Db::ttl`],
//!   [`Db::expire`], [`Db::persist`]; [`ManualClock`] for tests).
//!
//! ```
//! use flexdb::{Db, Isolation, Options};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::new().create_if_missing(true)).unwrap();
//! db.put("x", "1").unwrap();
//! let snap = db.snapshot();
//! let mut t = db.transaction(Isolation::Serializable);
//! t.put("y", "2").unwrap();
//! assert_eq!(t.iter().count(), 2); // its own write merged in
//! db.put("x", "3").unwrap();
//! assert_eq!(snap.get("x").unwrap().as_deref(), Some(&b"1"[..]));
//! // It scanned "x", which changed since it began: retry it.
//! assert!(matches!(t.commit(), Err(flexdb::Error::Conflict)));
//! ```
//!
//! Layout (each module opens with its invariants). The public API:
//!
//! - `db`: `Db`, the store's public face.
//! - `txn`: `Transaction`, `Isolation`: optimistic transactions.
//! - `options`, `error`, `stats`, `batch`: `Options` and `WriteOptions`,
//!   `Error`, `Stats`, `WriteBatch` (and its log payload encoding).
//! - `codec`: byte encodings shared by the space and the logs.
//! - `clock`, `expiry`: deadlines, the expiry queue and its thread.
//! - `store`: `Store`, what an open store shares between its threads.
//! - `threads`: the priority and CPU time of the store's own threads.
//!
//! The write path, `write`:
//! - `write` (mod): puts, deletes and batches; rotation; `flush`, `sync`.
//! - `write::memtable_list`: the active and frozen MemTables, `WriteSide`.
//! - `write::memtable`: the MemTable (hash table and sorted runs).
//! - `write::arena`: the MemTable's entries, version-linked.
//! - `write::chunk_pool`: huge-page memory chunks, kept for reuse.
//! - `write::write_order`: a MemTable's entries in write order.
//! - `write::range_tombstones`: a MemTable's range deletes.
//!
//! The logs, `wal`:
//! - `wal` (mod): `Wal`, appends and syncs.
//! - `wal::format`: header, durable-length slot, version-2 records.
//! - `wal::record3`: version-3 records (batches, sync marks, chain).
//! - `wal::replay`: reading a log back after a crash (versions 1, 2).
//! - `wal::replay3`: reading a version-3 log back.
//! - `wal::mapped`: appends through a shared mapping.
//! - `wal::writeback`: early write-back of a log's pages.
//! - `wal::log_files`: log file names, and creating a log file durably.
//! - `wal::spare_logs`: committed logs kept for new logs to take over.
//!
//! The commit path, `commit`:
//! - `commit` (mod): the committer thread, its loop and one commit.
//! - `commit::mailbox`: waking, stopping and awaiting the committer.
//! - `commit::newest_versions`: the newest version of each key across the
//!   frozen MemTables.
//! - `commit::group`: applying one group of updates to an interval.
//! - `commit::merge`: an interval's new content and the edits to make it.
//! - `commit::prefetch`: loading intervals ahead of the committer.
//! - `commit::range_delete`: range deletes applied to the space, whole
//!   intervals dropped in runs.
//!
//! The read path, `read`:
//! - `read` (mod): point reads.
//! - `read::fetch`: an interval's content, cached or read and cached.
//! - `read::iter`: `Iter`, range scans in both directions.
//! - `read::walk_ahead`: prefetching the intervals a scan will visit.
//! - `read::view`: `ViewPublisher`, the view readers read.
//! - `read::snapshot`: `ReadPoint` (the consistent point iterators,
//!   snapshots and transactions read), `Snapshot`, the live snapshots.
//!
//! Where pairs are, `index`:
//! - `index` (mod): `CommitterIndex`, `PAIR_TAG`.
//! - `index::sparse`: the sparse index over the space's intervals.
//! - `index::key_list`: a node's keys as a prefix and suffixes.
//! - `index::interval`: an interval's decoded pairs.
//! - `index::interval_cache`: the CLOCK cache of decoded intervals.
//! - `index::saved`: the sparse index saved at a clean close.
//!
//! Opening, `recovery`:
//! - `recovery::open`: creation, and recovery after a close or a crash.
//! - `recovery::rebuild`: the sparse index rebuilt by sampling the space.
//! - `recovery::replay`: the logs a crash left, replayed in parallel.
//! - `recovery::manifest`: the manifest; what a store directory holds.
//! - `recovery::check`: the full consistency check, `CheckReport`.
//! - `recovery::repair`: salvaging a damaged store, `RepairReport`.
//!
//! - `diagnostics` (feature `diagnostics`): measurements of internal
//!   structures (the sparse index, a MemTable's walk) for flexbench.
//!
//! Tracing (the library never prints): debug events under the targets
//! `flexdb::recovery`, `flexdb::commit` and `flexdb::view`; whether each is
//! enabled is decided once, when a store opens.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod backup;
mod batch;
mod clock;
mod codec;
mod commit;
mod compact;
mod db;
/// Measurements of internal structures, for `flexbench internals`.
#[cfg(any(test, feature = "diagnostics"))]
pub mod diagnostics;
mod disk_usage;
mod error;
mod expiry;
mod index;
mod keyspace;
mod options;
mod read;
mod recovery;
mod stats;
mod store;
mod threads;
mod txn;
mod wal;
mod write;

pub use backup::{BackupMethod, BackupProgress, BackupReport};
pub use batch::{BatchOp, OpRef, WriteBatch};
pub use clock::ManualClock;
pub use codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use compact::{CompactProgress, CompactReport};
pub use db::Db;
pub use error::{Error, Result};
pub use expiry::ValueAndTtl;
pub use keyspace::{Keyspace, DEFAULT_KEYSPACE, MAX_KEYSPACE_NAME_LEN};
pub use options::{Options, WriteOptions};
pub use read::iter::{Iter, KeyValue};
pub use read::snapshot::Snapshot;
pub use recovery::check::{CheckReport, DamagedRange};
pub use recovery::repair::{RepairProgress, RepairReport};
pub use stats::{MemoryStats, Stats};
pub use txn::{Isolation, Transaction, TransactionIn};
