//! Optimistic transactions: a snapshot to read, a buffer of writes, and for
//! serializable ones a record of what was read; validated and written at
//! commit, both under the writer lock, so no other write falls between.
//!
//! Validation asks whether a write committed after the transaction's point
//! (a sequence number above its `seq`) touched a key it wrote (both
//! levels: first committer wins) or a key or range it read (serializable;
//! a range read also catches keys inserted into it, phantoms). Every write
//! after the point lies in a MemTable of the point's active generation or
//! a later one, each version with its sequence number: the point holds its
//! active table, and the store's list holds the later ones until they are
//! committed into the space (which keeps no sequence numbers). When a
//! generation after the point's was committed and retired already, the
//! history needed is gone and the commit fails with `Error::Conflict`
//! whatever it touched (as RocksDB's optimistic transactions do when their
//! MemTable history is too short): with MemTables of the default 512 MiB,
//! a transaction must outlive two MemTables' worth of writes for that.
//!
//! Invariants: a transaction's reads are those of its point, with its own
//! writes merged in; validation and the write of the buffer happen under
//! one hold of the writer lock; a commit that fails writes nothing. A put
//! with a time to live is a buffered put plus its TTL (`ttls`), which
//! every later write of the key in the transaction drops; the commit's
//! write makes it a deadline (`expiry::resolve`), with its expiry-queue
//! entry in the same batch.

use std::collections::HashMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::batch::{key_range, WriteBatch};
use crate::codec::check_sizes;
use crate::error::{Error, Result};
use crate::keyspace::encoding::{self, encode, encode_delete_range, encode_range, KsId};
use crate::options::WriteOptions;
use crate::read::iter::{Iter, WriteSet};
use crate::read::snapshot::{own_range, prefix_range, ReadPoint};
use crate::store::Store;
use crate::write::memtable::MemTable;
use crate::write::range_tombstones::RangeTombstone;

/// The isolation level of a [`Transaction`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Snapshot isolation: reads see the state when the transaction began;
    /// a commit fails if another transaction committed meanwhile wrote a
    /// key this one writes (first committer wins). Write skew is allowed.
    Snapshot,
    /// Serializable: as `Snapshot`, and a commit also fails if anything
    /// the transaction read (keys read with `get`/`contains`, and every
    /// range it opened an iterator over, keys inserted into it included)
    /// was changed by a write committed after it began. Committed
    /// transactions are then equivalent to running one at a time in
    /// commit order.
    Serializable,
}

type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// What a serializable transaction read from its snapshot.
#[derive(Default)]
struct ReadSet {
    keys: Vec<Vec<u8>>,
    ranges: Vec<Range>,
}

/// An optimistic transaction ([`crate::Db::transaction`]): reads see the
/// store as of its start (a snapshot) with its own writes merged in (also
/// in iterators, both ways); writes are buffered until `commit`, which
/// writes them atomically (one batch: all or nothing, also across a
/// crash, and as durable as the `WriteOptions` say) if no conflicting
/// write committed meanwhile, and otherwise fails with
/// [`Error::Conflict`] having written nothing. Dropping it (or
/// `rollback`) discards the writes.
///
/// ```
/// use flexdb::{Db, Error, Isolation, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::new().create_if_missing(true)).unwrap();
/// db.put("a", "10").unwrap();
/// loop {
///     let mut t = db.transaction(Isolation::Serializable);
///     let a: u32 = String::from_utf8(t.get("a").unwrap().unwrap()).unwrap().parse().unwrap();
///     t.put("a", (a - 3).to_string()).unwrap();
///     t.put("b", "3").unwrap();
///     match t.commit() {
///         Ok(()) => break,
///         Err(Error::Conflict) => continue, // someone else changed "a": retry
///         Err(e) => panic!("{e}"),
///     }
/// }
/// assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"7"[..]));
/// ```
pub struct Transaction {
    point: Arc<ReadPoint>,
    isolation: Isolation,
    writes: Arc<WriteSet>,
    reads: Mutex<ReadSet>,
    /// The times to live of the puts in `writes` made with one (stored
    /// key → TTL), made deadlines by the commit.
    ttls: HashMap<Vec<u8>, Duration>,
    /// The keyspace its methods act on.
    ks: KsId,
}

/// A [`Transaction`]'s reads and writes in another keyspace, from
/// [`Transaction::keyspace`]: the same methods, the same snapshot, the
/// same commit.
pub struct TransactionIn<'t> {
    txn: &'t mut Transaction,
    id: KsId,
}

impl TransactionIn<'_> {
    /// As [`Transaction::get`].
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
    }

    /// As [`Transaction::get_with`].
    pub fn get_with<R>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnMut(Option<&[u8]>) -> R,
    ) -> Result<R> {
        self.txn.get_with_in(self.id, key.as_ref(), read)
    }

    /// As [`Transaction::contains`].
    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.get_with(key, |v| v.is_some())
    }

    /// As [`Transaction::range`].
    pub fn range<K, R>(&self, range: R) -> Iter<'static>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let (lo, hi) = own_range(range);
        self.txn.iter_over(self.id, lo, hi)
    }

    /// As [`Transaction::iter`].
    pub fn iter(&self) -> Iter<'static> {
        self.txn
            .iter_over(self.id, Bound::Unbounded, Bound::Unbounded)
    }

    /// As [`Transaction::prefix`].
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'static> {
        let (lo, hi) = prefix_range(prefix.as_ref());
        self.txn.iter_over(self.id, lo, hi)
    }

    /// As [`Transaction::put`].
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.txn
            .write_in(self.id, key.as_ref(), Some(value.as_ref()))?;
        Ok(())
    }

    /// As [`Transaction::put_with_ttl`].
    pub fn put_with_ttl(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        self.txn
            .put_with_ttl_in(self.id, key.as_ref(), value.as_ref(), ttl)
    }

    /// As [`Transaction::delete`].
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.txn.write_in(self.id, key.as_ref(), None)?;
        Ok(())
    }

    /// As [`Transaction::delete_range`].
    pub fn delete_range<K, R>(&mut self, range: R) -> Result<()>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        self.txn.delete_range_in(self.id, range)
    }
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("isolation", &self.isolation)
            .field("seq", &self.point.seq)
            .field("writes", &self.writes.len())
            .finish()
    }
}

impl Transaction {
    pub(crate) fn begin(store: &Arc<Store>, isolation: Isolation, ks: KsId) -> Transaction {
        Transaction {
            point: ReadPoint::take(store, true),
            isolation,
            writes: Arc::new(WriteSet::default()),
            reads: Mutex::new(ReadSet::default()),
            ttls: HashMap::new(),
            ks,
        }
    }

    /// The isolation level it was begun with.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// This transaction's reads and writes in keyspace `ks` (a handle of
    /// the same store), instead of the keyspace it was begun in; one
    /// commit writes every keyspace's writes atomically.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// let (from, to) = (db.keyspace("from").unwrap(), db.keyspace("to").unwrap());
    /// from.put("job", "data").unwrap();
    /// let mut t = db.transaction(flexdb::Isolation::Serializable);
    /// let v = t.keyspace(&from).unwrap().get("job").unwrap().unwrap();
    /// t.keyspace(&to).unwrap().put("job", v).unwrap();
    /// t.keyspace(&from).unwrap().delete("job").unwrap();
    /// t.commit().unwrap();
    /// assert!(from.get("job").unwrap().is_none() && to.get("job").unwrap().is_some());
    /// ```
    pub fn keyspace(&mut self, ks: &crate::Keyspace) -> Result<TransactionIn<'_>> {
        let id = ks.check(&self.point.store)?;
        Ok(TransactionIn { txn: self, id })
    }

    /// The value of `key`: this transaction's own write if it made one,
    /// else as of its start.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.map(<[u8]>::to_vec))
    }

    /// `read` applied to the value of `key` as `get` sees it, borrowed
    /// without a copy (see [`crate::Db::get_with`]); recorded as a read
    /// like `get`.
    pub fn get_with<R>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnMut(Option<&[u8]>) -> R,
    ) -> Result<R> {
        self.get_with_in(self.ks, key.as_ref(), read)
    }

    fn get_with_in<R>(
        &self,
        id: KsId,
        key: &[u8],
        mut read: impl FnMut(Option<&[u8]>) -> R,
    ) -> Result<R> {
        let key = encoding::encode_read(id, key)?;
        if let Some(w) = self.writes.get(&key) {
            return Ok(read(w));
        }
        let out = self.point.get_with(&key, read)?;
        if self.isolation == Isolation::Serializable {
            self.reads.lock().keys.push(key.into_owned());
        }
        Ok(out)
    }

    /// Whether `key` is present (as `get` sees it).
    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.get_with(key, |v| v.is_some())
    }

    /// The pairs whose keys lie in `range`, in key order (`.rev()` for
    /// reverse): the store as of the transaction's start with its writes
    /// so far merged in (later writes of the transaction are not seen by
    /// this iterator). A serializable transaction records the whole range
    /// as read.
    pub fn range<K, R>(&self, range: R) -> Iter<'static>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let (lo, hi) = own_range(range);
        self.iter_over(self.ks, lo, hi)
    }

    /// Every pair, as `range` sees them.
    pub fn iter(&self) -> Iter<'static> {
        self.iter_over(self.ks, Bound::Unbounded, Bound::Unbounded)
    }

    /// The pairs whose keys start with `prefix`, as `range` sees them.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'static> {
        let (lo, hi) = prefix_range(prefix.as_ref());
        self.iter_over(self.ks, lo, hi)
    }

    fn iter_over(&self, id: KsId, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Iter<'static> {
        let (lo, hi) = encode_range(id, lo, hi);
        if self.isolation == Isolation::Serializable {
            self.reads.lock().ranges.push((lo.clone(), hi.clone()));
        }
        let overlay = (!self.writes.is_empty()).then(|| self.writes.clone());
        Iter::new(self.point.clone(), id, lo, hi, overlay)
    }

    /// Sets `key` to `value` when the transaction commits.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.write_in(self.ks, key.as_ref(), Some(value.as_ref()))?;
        Ok(())
    }

    /// Sets `key` to `value` when the transaction commits, expiring `ttl`
    /// after the commit (as [`crate::Db::put_with_ttl`]: the deadline is
    /// the commit's time plus `ttl`, by the store's clock). The
    /// transaction's own reads see the pair; a later `put`, `delete` or
    /// `delete_range` of the key in the transaction replaces it, deadline
    /// and all. A TTL of zero or past the last deadline is refused
    /// (`InvalidArgument`), nothing buffered.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// use std::time::Duration;
    /// let mut t = db.transaction(flexdb::Isolation::Snapshot);
    /// t.put_with_ttl("session", "alice", Duration::from_secs(60)).unwrap();
    /// t.commit().unwrap();
    /// assert!(db.ttl("session").unwrap().unwrap().unwrap() <= Duration::from_secs(60));
    /// ```
    pub fn put_with_ttl(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        self.put_with_ttl_in(self.ks, key.as_ref(), value.as_ref(), ttl)
    }

    /// Removes `key` when the transaction commits.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.write_in(self.ks, key.as_ref(), None)?;
        Ok(())
    }

    fn put_with_ttl_in(&mut self, id: KsId, key: &[u8], value: &[u8], ttl: Duration) -> Result<()> {
        crate::batch::check_ttl(ttl)?;
        // Refused now, as documented, when no deadline can hold it (the
        // commit makes the deadline by the same clock, later).
        self.point.store.clock.deadline(ttl)?;
        let stored = self.write_in(id, key, Some(value))?;
        self.ttls.insert(stored, ttl);
        Ok(())
    }

    /// Buffers the write and returns the key as stored.
    fn write_in(&mut self, id: KsId, key: &[u8], value: Option<&[u8]>) -> Result<Vec<u8>> {
        check_sizes(key, value)?;
        let key = encode(id, key).into_owned();
        self.ttls.remove(&key);
        // Copied only if an iterator still holds the writes so far.
        Arc::make_mut(&mut self.writes)
            .pairs
            .insert(key.clone(), value.map(<[u8]>::to_vec));
        Ok(key)
    }

    /// Removes every key in `range` when the transaction commits (as
    /// [`crate::Db::delete_range`]): from then on the transaction's own
    /// reads see none of them, except those it writes again after this
    /// call. At commit, a write committed meanwhile to a key in the range
    /// is a conflict (it writes every key of the range). A start past the
    /// end is refused (`Error::InvalidArgument`).
    pub fn delete_range<K, R>(&mut self, range: R) -> Result<()>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        self.delete_range_in(self.ks, range)
    }

    fn delete_range_in<K, R>(&mut self, id: KsId, range: R) -> Result<()>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let Some((start, end)) = key_range(range)? else {
            return Ok(());
        };
        let (start, end) = encode_delete_range(id, start, end);
        let writes = Arc::make_mut(&mut self.writes);
        let r = RangeTombstone {
            start: start.into(),
            end: end.map(Vec::into_boxed_slice),
            seq: 0,
        };
        // Its own earlier writes in the range go with it.
        writes.pairs.retain(|k, _| !r.covers(k));
        self.ttls.retain(|k, _| !r.covers(k));
        writes.ranges.push(r);
        Ok(())
    }

    /// Commits with the store's default sync setting (see `commit_opt`).
    pub fn commit(self) -> Result<()> {
        let opts = WriteOptions {
            sync: self.point.store.opts.sync_writes,
        };
        self.commit_opt(&opts)
    }

    /// Validates the transaction and writes its writes as one batch, or
    /// fails with [`Error::Conflict`] having written nothing. A read-only
    /// transaction always commits (it read one consistent state).
    pub fn commit_opt(self, opts: &WriteOptions) -> Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        // Range deletes first: every point write left is newer.
        for r in &self.writes.ranges {
            batch.push_range(&r.start, r.end.as_deref())?;
        }
        for (k, v) in self.writes.pairs.iter() {
            match (v, self.ttls.get(k)) {
                (Some(v), Some(&ttl)) => batch.put_with_ttl_stored(k.clone(), v.clone(), ttl)?,
                (Some(v), None) => batch.put_stored(k.clone(), v.clone())?,
                (None, _) => batch.delete_stored(k.clone())?,
            };
        }
        let mut reads = std::mem::take(&mut *self.reads.lock());
        // A range it deletes conflicts as a write of each of its keys.
        reads.ranges.extend(self.writes.ranges.iter().map(|r| {
            let end = r
                .end
                .clone()
                .map_or(Bound::Unbounded, |e| Bound::Excluded(e.into_vec()));
            (Bound::Included(r.start.to_vec()), end)
        }));
        let store = &self.point.store;
        store.write_checked(&batch, opts.sync, || {
            let keys = self.writes.pairs.keys().chain(&reads.keys);
            store.validate(&self.point, keys, &reads.ranges)
        })
    }

    /// Discards the transaction's writes (as dropping it does).
    pub fn rollback(self) {}
}

impl Store {
    /// Whether any of `keys` or `ranges` was written after `point` (call
    /// under the writer lock): `Error::Conflict` if so, or if the history
    /// needed to tell is gone (see the module docs).
    pub(crate) fn validate<'k>(
        &self,
        point: &ReadPoint,
        keys: impl Iterator<Item = &'k Vec<u8>>,
        ranges: &[Range],
    ) -> Result<()> {
        let list = self.writes.mems();
        let oldest = list.frozen.front().map_or(list.active_gen, |f| f.gen);
        // The tables that may hold writes after the point: its active
        // generation and every later one.
        let mut tables: Vec<&MemTable> = Vec::with_capacity(2 + list.frozen.len());
        if oldest > point.active_gen + 1 {
            return Err(Error::Conflict);
        }
        if oldest == point.active_gen + 1 {
            // Committed since; the point still holds it (frozen, whole).
            tables.push(&point.mems[0]);
        }
        tables.extend(
            list.frozen
                .iter()
                .filter(|f| f.gen >= point.active_gen)
                .map(|f| &*f.mem),
        );
        tables.push(&list.active);
        let after = point.seq;
        for k in keys {
            if tables
                .iter()
                .any(|t| t.newest_seq(k).is_some_and(|s| s > after))
            {
                return Err(Error::Conflict);
            }
        }
        for (lo, hi) in ranges {
            let (lo, hi) = (as_ref(lo), as_ref(hi));
            if tables.iter().any(|t| t.changed_in_range(lo, hi, after)) {
                return Err(Error::Conflict);
            }
        }
        Ok(())
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}
