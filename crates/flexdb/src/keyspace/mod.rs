//! Keyspaces: named, independent orders of keys inside one store, sharing
//! its write-ahead log, its space and its caches.
//!
//! A [`Keyspace`] handle has the read, write, iterator, snapshot and
//! transaction API of [`crate::Db`], which is itself the default keyspace.
//! Batches and transactions may span keyspaces (`WriteBatch::put_in`,
//! `Transaction::keyspace`) and stay atomic: every keyspace's pairs live
//! in the one sorted space, each keyspace a contiguous range of it
//! (`encoding`), so a write to several keyspaces is one logged batch, and
//! dropping a keyspace is one range delete.
//!
//! Invariants: every key that enters the store through a public method is
//! encoded into its keyspace (`encoding::encode`), and every key that
//! leaves it is decoded; an iterator of a keyspace never leaves its
//! keyspace's range; the catalog (`catalog`) names every keyspace that
//! holds pairs, after `sweep_orphans` at open.

pub(crate) mod catalog;
pub(crate) mod encoding;
pub(crate) mod upgrade;

use std::ops::RangeBounds;
use std::sync::Arc;

use crate::batch::{key_range, WriteBatch};
use crate::error::Result;
use crate::options::WriteOptions;
use crate::read::iter::Iter;
use crate::read::snapshot::{own_range, prefix_range, ReadPoint, Snapshot};
use crate::store::Store;
use crate::txn::{Isolation, Transaction};

pub use catalog::{DEFAULT_KEYSPACE, MAX_KEYSPACE_NAME_LEN};
pub(crate) use encoding::KsId;
use encoding::{encode, encode_delete_range, encode_range};

/// A named keyspace of a store, from [`crate::Db::keyspace`]: its own
/// order of keys, with the read, write, iterator, snapshot and
/// transaction methods of [`crate::Db`]. Cheap to clone; `Send + Sync`.
/// Once its keyspace is dropped ([`crate::Db::drop_keyspace`]) every
/// method refuses with [`crate::Error::InvalidArgument`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
/// let users = db.keyspace("users").unwrap();
/// users.put("alice", "1").unwrap();
/// db.put("alice", "default").unwrap();
/// assert_eq!(users.get("alice").unwrap().as_deref(), Some(&b"1"[..]));
/// assert_eq!(db.get("alice").unwrap().as_deref(), Some(&b"default"[..]));
/// assert_eq!(users.iter().count(), 1);
/// ```
#[derive(Clone)]
pub struct Keyspace {
    pub(crate) store: Arc<Store>,
    entry: Arc<catalog::Entry>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.entry.name)
            .finish()
    }
}

impl Keyspace {
    pub(crate) fn new(store: Arc<Store>, entry: Arc<catalog::Entry>) -> Keyspace {
        Keyspace { store, entry }
    }

    /// Refuses a dropped keyspace, or one of another store.
    pub(crate) fn check(&self, store: &Arc<Store>) -> Result<KsId> {
        self.entry.check_live()?;
        if !Arc::ptr_eq(&self.store, store) {
            return Err(crate::Error::InvalidArgument(format!(
                "keyspace {:?} belongs to another store",
                self.entry.name
            )));
        }
        Ok(self.entry.id)
    }

    pub(crate) fn live(&self) -> Result<KsId> {
        self.entry.check_live()?;
        Ok(self.entry.id)
    }

    fn sync_default(&self) -> WriteOptions {
        WriteOptions {
            sync: self.store.opts.sync_writes,
        }
    }

    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// Sets `key` to `value` (with the store's default sync setting).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &self.sync_default())
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        put(
            &self.store,
            self.live()?,
            key.as_ref(),
            Some(value.as_ref()),
            opts.sync,
        )
    }

    /// Removes `key` (removing a missing key is not an error).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &self.sync_default())
    }

    /// Removes `key` with explicit write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        put(&self.store, self.live()?, key.as_ref(), None, opts.sync)
    }

    /// Removes every key of this keyspace in `range` atomically (as
    /// [`crate::Db::delete_range`]); `..` empties the keyspace and keeps
    /// it.
    pub fn delete_range<K, R>(&self, range: R) -> Result<()>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        self.delete_range_opt(range, &self.sync_default())
    }

    /// [`Keyspace::delete_range`] with explicit write options.
    pub fn delete_range_opt<K, R>(&self, range: R, opts: &WriteOptions) -> Result<()>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let id = self.live()?;
        let mut batch = WriteBatch::new();
        batch.delete_range_in_id(id, range)?;
        self.store.write(&batch, opts.sync)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
    }

    /// `read` applied to the value of `key`, borrowed without a copy (see
    /// [`crate::Db::get_with`]).
    pub fn get_with<R>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnMut(Option<&[u8]>) -> R,
    ) -> Result<R> {
        let id = self.live()?;
        self.store
            .get_with(&encoding::encode_read(id, key.as_ref())?, read)
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.get_with(key, |v| v.is_some())
    }

    /// The pairs whose keys lie in `range`, in key order (as
    /// [`crate::Db::range`]). A dropped keyspace's iterator yields its
    /// error once.
    pub fn range<K, R>(&self, range: R) -> Iter<'static>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let (lo, hi) = own_range(range);
        self.iter_over(lo, hi)
    }

    /// Every pair of the keyspace, in key order.
    pub fn iter(&self) -> Iter<'static> {
        self.iter_over(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
    }

    /// The pairs whose keys start with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'static> {
        let (lo, hi) = prefix_range(prefix.as_ref());
        self.iter_over(lo, hi)
    }

    fn iter_over(
        &self,
        lo: std::ops::Bound<Vec<u8>>,
        hi: std::ops::Bound<Vec<u8>>,
    ) -> Iter<'static> {
        let point = ReadPoint::take(&self.store, false);
        match self.live() {
            Ok(id) => {
                let (lo, hi) = encode_range(id, lo, hi);
                Iter::new(point, id, lo, hi, None)
            }
            Err(e) => Iter::failed(point, e),
        }
    }

    /// A snapshot of the store whose methods read this keyspace (see
    /// [`crate::Db::snapshot`]; [`Snapshot::keyspace`] reads another).
    /// Refused once the keyspace is dropped.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let ks = self.live()?;
        Ok(Snapshot {
            point: ReadPoint::take(&self.store, true),
            ks,
        })
    }

    /// Begins a transaction whose methods act on this keyspace (see
    /// [`crate::Db::transaction`]; [`Transaction::keyspace`] reaches
    /// another keyspace within the same transaction). Refused once the
    /// keyspace is dropped; a drop while it runs is a write of every key
    /// of the keyspace, so a commit that wrote there fails with
    /// [`crate::Error::Conflict`].
    pub fn transaction(&self, isolation: Isolation) -> Result<Transaction> {
        let ks = self.live()?;
        Ok(Transaction::begin(&self.store, isolation, ks))
    }

    /// Atomically sets `key` to `new` (`None`: removes it) if its value is
    /// `expected` (`None`: absent); returns whether it did (as
    /// [`crate::Db::compare_and_swap`]).
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let id = self.live()?;
        compare_and_swap(
            || Transaction::begin(&self.store, Isolation::Serializable, id),
            key.as_ref(),
            expected,
            new,
        )
    }
}

/// A point write of `key` in keyspace `id` (`None`: a delete).
pub(crate) fn put(
    store: &Store,
    id: KsId,
    key: &[u8],
    value: Option<&[u8]>,
    sync: bool,
) -> Result<()> {
    crate::codec::check_sizes(key, value)?;
    store.write_one(&encode(id, key), value, sync)
}

/// Compare-and-swap through transactions begun by `begin`, retried on
/// conflicts.
pub(crate) fn compare_and_swap(
    begin: impl Fn() -> Transaction,
    key: &[u8],
    expected: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<bool> {
    loop {
        let mut t = begin();
        if t.get(key)?.as_deref() != expected {
            return Ok(false);
        }
        match new {
            Some(v) => t.put(key, v)?,
            None => t.delete(key)?,
        }
        match t.commit() {
            Ok(()) => return Ok(true),
            Err(crate::Error::Conflict) => continue,
            Err(e) => return Err(e),
        }
    }
}

impl WriteBatch {
    /// Adds a put to keyspace `ks` (a handle of the store the batch will
    /// be written to): a batch may span keyspaces and stays atomic.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    /// let mut batch = flexdb::WriteBatch::new();
    /// batch.put_in(&a, b"k", b"1").unwrap();
    /// batch.put_in(&b, b"k", b"2").unwrap();
    /// batch.put(b"k", b"0").unwrap();
    /// db.write(batch).unwrap();
    /// assert_eq!(b.get("k").unwrap().as_deref(), Some(&b"2"[..]));
    /// ```
    pub fn put_in(&mut self, ks: &Keyspace, key: &[u8], value: &[u8]) -> Result<&mut Self> {
        crate::codec::check_sizes(key, Some(value))?;
        let key = encode(self.bind(ks)?, key).into_owned();
        self.put_stored(key, value.to_vec())?;
        Ok(self)
    }

    /// Adds a delete in keyspace `ks`.
    pub fn delete_in(&mut self, ks: &Keyspace, key: &[u8]) -> Result<&mut Self> {
        crate::codec::check_sizes(key, None)?;
        let key = encode(self.bind(ks)?, key).into_owned();
        self.delete_stored(key)?;
        Ok(self)
    }

    /// Adds a range delete in keyspace `ks` (as
    /// [`WriteBatch::delete_range`]).
    pub fn delete_range_in<K, R>(&mut self, ks: &Keyspace, range: R) -> Result<&mut Self>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let id = self.bind(ks)?;
        self.delete_range_in_id(id, range)
    }

    /// The number of `ks`, a live keyspace of the store this batch's other
    /// keyspaces belong to (the store `Db::write` then checks).
    pub(crate) fn bind(&mut self, ks: &Keyspace) -> Result<KsId> {
        let id = ks.live()?;
        let store = Arc::as_ptr(&ks.store) as usize;
        match self.store {
            Some(s) if s != store => Err(crate::Error::InvalidArgument(format!(
                "keyspace {:?} belongs to another store than this batch's other keyspaces",
                ks.name()
            ))),
            _ => {
                self.store = Some(store);
                Ok(id)
            }
        }
    }

    /// Refuses a batch holding keyspaces of another store than `store`.
    pub(crate) fn check_store(&self, store: &Arc<Store>) -> Result<()> {
        match self.store {
            Some(s) if s != Arc::as_ptr(store) as usize => Err(crate::Error::InvalidArgument(
                "the batch holds keyspaces of another store".into(),
            )),
            _ => Ok(()),
        }
    }

    pub(crate) fn delete_range_in_id<K, R>(&mut self, id: KsId, range: R) -> Result<&mut Self>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        if let Some((start, end)) = key_range(range)? {
            let (start, end) = encode_delete_range(id, start, end);
            self.push_range(&start, end.as_deref())?;
        }
        Ok(self)
    }
}
