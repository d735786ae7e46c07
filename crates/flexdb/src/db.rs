//! `Db`: the public face of the store.
//!
//! (Skeleton: the bodies land in the following commits.)

use std::ops::RangeBounds;
use std::path::Path;

use crate::batch::WriteBatch;
use crate::check::CheckReport;
use crate::error::Result;
use crate::iter::Iter;
use crate::options::{Options, WriteOptions};
use crate::stats::Stats;

/// An open FlexDB store. `Send + Sync`: share it between threads with an
/// `Arc`. Dropping it closes the store (errors on that path are ignored;
/// call [`Db::close`] to see them).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
/// db.put(b"apple", b"red").unwrap();
/// assert_eq!(db.get(b"apple").unwrap().as_deref(), Some(&b"red"[..]));
/// db.delete(b"apple").unwrap();
/// assert!(!db.contains(b"apple").unwrap());
/// ```
pub struct Db {
    _private: (),
}

impl Db {
    /// Opens (or with `create_if_missing`, creates) the store in directory
    /// `path`, recovering every durable write after a crash.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let _ = (path, options);
        todo!()
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        todo!()
    }

    /// Sets `key` to `value` (with the store's default sync setting).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let _ = (key, value);
        todo!()
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let _ = (key, value, opts);
        todo!()
    }

    /// Removes `key` (removing a missing key is not an error).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let _ = key;
        todo!()
    }

    /// Removes `key` with explicit write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        let _ = (key, opts);
        todo!()
    }

    /// Applies every operation of `batch` atomically: all or nothing, also
    /// across a crash, and readers see none or all of it.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        let _ = batch;
        todo!()
    }

    /// Applies `batch` atomically with explicit write options.
    pub fn write_opt(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        let _ = (batch, opts);
        todo!()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let _ = key;
        todo!()
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let _ = key;
        todo!()
    }

    /// Iterates over the pairs whose keys lie in `range`, in key order;
    /// `.rev()` iterates in reverse. Bounds may be unbounded.
    pub fn range<K, R>(&self, range: R) -> Iter<'_>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let _ = range;
        todo!()
    }

    /// Iterates over every pair in key order.
    pub fn iter(&self) -> Iter<'_> {
        todo!()
    }

    /// Iterates over the pairs whose keys start with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'_> {
        let _ = prefix;
        todo!()
    }

    /// Commits every write so far to the space and makes it durable there
    /// (the write-ahead log it came from is then retired).
    pub fn flush(&self) -> Result<()> {
        todo!()
    }

    /// Makes every write so far durable (syncs the write-ahead log).
    pub fn sync(&self) -> Result<()> {
        todo!()
    }

    /// A snapshot of the store's counters.
    pub fn stats(&self) -> Stats {
        todo!()
    }

    /// Verifies everything: every pair readable with a valid checksum, pairs
    /// sorted, the sparse index consistent with the space, and the space's
    /// own metadata consistent. Reads the whole store.
    pub fn check(&self) -> Result<CheckReport> {
        todo!()
    }

    /// Flushes, checkpoints and closes the store, reporting any error.
    pub fn close(self) -> Result<()> {
        todo!()
    }
}
