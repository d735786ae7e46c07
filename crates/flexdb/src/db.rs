//! `Db`: the public face of the store.
//!
//! Invariants: a writable `Db` owns exactly one committer thread, started
//! by `open` and stopped by `close` or drop (a read-only one none: its
//! store is swapped whole by `catch_up`, and every write method refuses
//! with `Error::ReadOnly`); after `close` returns `Ok`, every write
//! made before it is in the space and the space is checkpointed, so the
//! next open replays nothing.

use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use flexspace::Storage;

use crate::batch::WriteBatch;
use crate::error::space_err;
use crate::error::{Error, Result};
use crate::keyspace::encoding::{encode_range, encode_read, KsId};
use crate::keyspace::{Keyspace, DEFAULT_KEYSPACE};
use crate::options::{Options, WriteOptions};
use crate::read::iter::Iter;
use crate::read::snapshot::{own_range, prefix_range, ReadPoint, Snapshot};
use crate::recovery::check::CheckReport;
use crate::stats::{MemoryStats, Stats};
use crate::store::Store;
use crate::txn::{Isolation, Transaction};

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
    /// The store; swapped whole by [`Db::catch_up`] (read-only stores).
    shared: ArcSwap<Store>,
    /// The store's directory (the same in every state).
    dir: std::path::PathBuf,
    /// The store as opened (the unit tests' handle on a writable store,
    /// whose store is never swapped).
    #[cfg(test)]
    first: Arc<Store>,
    committer: Option<JoinHandle<()>>,
    /// The thread that removes expired pairs (`expiry`).
    expirer: Option<JoinHandle<()>>,
    /// Held by [`Db::catch_up`]: two at once could install the older of
    /// their states last.
    catching_up: parking_lot::Mutex<()>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.store().dir)
            .field("read_only", &self.store().opts.read_only)
            .finish()
    }
}

impl Db {
    /// The shared state (for the crate's unit tests).
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<Store> {
        &self.first
    }

    /// The store as of now (swapped by [`Db::catch_up`]).
    pub(crate) fn store(&self) -> arc_swap::Guard<Arc<Store>> {
        self.shared.load()
    }

    /// Opens (or with `create_if_missing`, creates) the store in directory
    /// `path`, recovering every durable write after a crash.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        if options.read_only {
            let shared = crate::recovery::read_only::open_dir(path.as_ref(), options)?;
            return Self::start_read_only(shared);
        }
        let shared = crate::recovery::open::open_dir(path.as_ref(), options)?;
        Self::start(shared)
    }

    /// Opens the store on a storage backend (for example
    /// `flexspace::FaultStorage` in crash tests); `name` stands for the
    /// directory in error messages.
    pub fn open_with_storage(
        storage: Arc<dyn Storage>,
        name: impl AsRef<Path>,
        options: Options,
    ) -> Result<Db> {
        if options.read_only {
            let shared = crate::recovery::read_only::open_storage(storage, name.as_ref(), options)?;
            return Self::start_read_only(shared);
        }
        let shared = crate::recovery::open::open_storage(storage, name.as_ref(), options)?;
        Self::start(shared)
    }

    /// A read-only store: no committer (`recovery::read_only`).
    fn start_read_only(shared: Store) -> Result<Db> {
        let shared = Arc::new(shared);
        shared.keyspaces.load(&shared)?;
        Ok(Db {
            dir: shared.dir.clone(),
            #[cfg(test)]
            first: shared.clone(),
            shared: ArcSwap::new(shared),
            committer: None,
            expirer: None,
            catching_up: Default::default(),
        })
    }

    /// Whether the store was opened read-only ([`Options::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.store().opts.read_only
    }

    /// Moves a read-only store forward to the store's state now (the
    /// writer's logs included), loaded and validated as an open is; new
    /// reads, iterators and snapshots see it. Iterators, snapshots and
    /// [`Keyspace`] handles made before keep the state they were made
    /// in (and the data-file segments it needs stay pinned) for as long
    /// as they live: take keyspace handles again after a catch-up. On a
    /// writable store there is nothing to catch up with: `Ok`. A failure
    /// leaves the state as it was.
    pub fn catch_up(&self) -> Result<()> {
        let _one_at_a_time = self.catching_up.lock();
        let old = self.store().clone();
        if !old.opts.read_only {
            return Ok(());
        }
        let new = crate::recovery::read_only::open_storage(
            old.storage.clone(),
            &old.dir,
            old.opts.clone(),
        )?;
        let new = Arc::new(new);
        new.keyspaces.load(&new)?;
        self.shared.store(new);
        Ok(())
    }

    fn start(shared: Store) -> Result<Db> {
        let shared = Arc::new(shared);
        let s = shared.clone();
        let name = shared.dir.clone();
        let committer = std::thread::Builder::new()
            .name("flexdb-committer".into())
            .spawn(move || crate::commit::run(s))
            .map_err(|e| Error::Io {
                file: name,
                source: e,
            })?;
        let mut db = Db {
            dir: shared.dir.clone(),
            #[cfg(test)]
            first: shared.clone(),
            shared: ArcSwap::new(shared),
            committer: Some(committer),
            expirer: None,
            catching_up: Default::default(),
        };
        db.open_keyspaces()?;
        db.expirer = Some(crate::expiry::start(&db.store())?);
        Ok(db)
    }

    /// Reads the catalog of keyspaces again (after pairs were written to
    /// it below the public methods: a repair).
    pub(crate) fn reload_keyspaces(&self) -> Result<()> {
        self.store().keyspaces.load(&self.store())
    }

    /// Brings a store of format 1 to format 2 (`keyspace::upgrade`), reads
    /// the catalog of keyspaces and deletes pairs no keyspace owns.
    fn open_keyspaces(&self) -> Result<()> {
        let store = &self.store();
        if store.format_version == 1 {
            crate::keyspace::upgrade::to_format_2(store)?;
        } else if store.format_version < crate::recovery::manifest::FORMAT_VERSION {
            // Format 3 (pairs with deadlines) reads format 2 as it is.
            crate::recovery::manifest::write_manifest(store.storage.as_ref())?;
        }
        store.keyspaces.load(store)?;
        store.keyspaces.sweep_orphans(store)?;
        Ok(())
    }

    /// Runs `f` with the writes it makes on this thread not delayed by
    /// backpressure, then books their bytes at the store's delayed write
    /// rate; returns `f`'s result and how long the caller should wait before
    /// it writes again: zero unless the committer has fallen behind
    /// (docs/DESIGN.md, "Rotation and backpressure"), at most what the
    /// store would have slept for them (10 ms a write).
    ///
    /// For callers that must not block a thread, such as an async server:
    /// outside it, a slowed write sleeps up to 10 ms in the store. The
    /// writes still wait for room when the last MemTable is full. Writes to
    /// other stores made in `f` are booked on this one.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let opts = flexdb::Options::new().create_if_missing(true);
    /// let db = flexdb::Db::open(dir.path(), opts).unwrap();
    /// let (written, wait) = db.with_pace_deferred(|| db.put(b"key", [7u8; 100]));
    /// written.unwrap();
    /// assert!(wait.is_zero(), "an idle store does not slow writes");
    /// // (an async caller would await `wait` before its next writes)
    /// ```
    pub fn with_pace_deferred<R>(&self, f: impl FnOnce() -> R) -> (R, Duration) {
        let (r, done) = crate::write::deferring_pace(f);
        if done.writes == 0 {
            return (r, Duration::ZERO);
        }
        // At most what the writes would have slept in the store.
        let cap = crate::write::MAX_SLEEP.saturating_mul(done.writes.min(u32::MAX as usize) as u32);
        let store = self.store();
        (
            r,
            store
                .writes
                .book(done.bytes, store.opts.memtable_bytes, cap),
        )
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Sets `key` to `value` (with the store's default sync setting).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let opts = WriteOptions {
            sync: self.store().opts.sync_writes,
        };
        self.put_opt(key, value, &opts)
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        crate::keyspace::put(
            &self.store(),
            KsId::DEFAULT,
            key.as_ref(),
            Some(value.as_ref()),
            opts.sync,
        )
    }

    /// Removes `key` (removing a missing key is not an error).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let opts = WriteOptions {
            sync: self.store().opts.sync_writes,
        };
        self.delete_opt(key, &opts)
    }

    /// Removes `key` with explicit write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        crate::keyspace::put(&self.store(), KsId::DEFAULT, key.as_ref(), None, opts.sync)
    }

    /// Removes every key in `range` atomically (`a..b`, `a..=b`, `a..`,
    /// `..`): readers see all of them or none gone, also across a crash.
    /// The call costs one logged record whatever the range holds; the
    /// committer then drops whole intervals of the range from the space
    /// with one collapse of their bytes each run (docs/DESIGN.md, "Range
    /// deletes"), so a million adjacent pairs cost about what a few
    /// intervals do, and leave nothing behind for reads to skip.
    ///
    /// A start past the end is refused (`Error::InvalidArgument`), as are
    /// bounds longer than [`crate::MAX_KEY_LEN`]; an empty range writes
    /// nothing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// for i in 0..100 {
    ///     db.put(format!("log:{i:03}"), "entry").unwrap();
    /// }
    /// db.delete_range("log:010".."log:090").unwrap();
    /// assert_eq!(db.prefix("log:").count(), 20);
    /// assert!(db.delete_range("b".."a").is_err());
    /// ```
    pub fn delete_range<K, R>(&self, range: R) -> Result<()>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let opts = WriteOptions {
            sync: self.store().opts.sync_writes,
        };
        self.delete_range_opt(range, &opts)
    }

    /// [`Db::delete_range`] with explicit write options.
    pub fn delete_range_opt<K, R>(&self, range: R, opts: &WriteOptions) -> Result<()>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let mut batch = WriteBatch::new();
        batch.delete_range(range)?;
        self.store().write(&batch, opts.sync)
    }

    /// Applies every operation of `batch` atomically: all or nothing, also
    /// across a crash, and readers see none or all of it.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        let opts = WriteOptions {
            sync: self.store().opts.sync_writes,
        };
        self.write_opt(batch, &opts)
    }

    /// Applies `batch` atomically with explicit write options.
    pub fn write_opt(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        batch.check_store(&self.store())?;
        self.store().write(&batch, opts.sync)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.store().get(&encode_read(KsId::DEFAULT, key.as_ref())?)
    }

    /// `read` applied to the value of `key` (`None` when absent), without
    /// copying it: the value is borrowed from the MemTable, the interval
    /// cache or the interval read for this call, for as long as `read`
    /// runs. `read` is called exactly once (it is `FnMut` only so that a
    /// cache miss can still call it). It runs while the cached interval's
    /// slot is held for reading: keep it short, and do not call into the
    /// store from it (the cache could not replace that interval meanwhile).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// db.put(b"k", b"hello").unwrap();
    /// let len = db.get_with(b"k", |v| v.map(|v| v.len())).unwrap();
    /// assert_eq!(len, Some(5));
    /// ```
    pub fn get_with<R>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnMut(Option<&[u8]>) -> R,
    ) -> Result<R> {
        self.store()
            .get_with(&encode_read(KsId::DEFAULT, key.as_ref())?, read)
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.get_with(key, |v| v.is_some())
    }

    /// Iterates over the pairs whose keys lie in `range`, in key order;
    /// `.rev()` iterates in reverse. Bounds may be unbounded. The iterator
    /// reads the store as of this call (an implicit [`Snapshot`]): every
    /// write acknowledged before it, whole batches, and nothing after.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, "v").unwrap();
    /// }
    /// let keys: Vec<Vec<u8>> = db.range("b".."d").map(|kv| kv.unwrap().0).collect();
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// let last = db.range::<&str, _>("b"..).next_back().unwrap().unwrap();
    /// assert_eq!(last.0, b"d");
    /// ```
    pub fn range<K, R>(&self, range: R) -> Iter<'static>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let (lo, hi) = own_range(range);
        self.iter_over(lo, hi)
    }

    /// Iterates over every pair in key order (as of this call, as `range`).
    pub fn iter(&self) -> Iter<'static> {
        self.iter_over(Bound::Unbounded, Bound::Unbounded)
    }

    fn iter_over(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Iter<'static> {
        let (lo, hi) = encode_range(KsId::DEFAULT, lo, hi);
        Iter::new(
            ReadPoint::take(&self.store(), false),
            KsId::DEFAULT,
            lo,
            hi,
            None,
        )
    }

    /// Iterates over the pairs whose keys start with `prefix` (as of this
    /// call, as `range`).
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'static> {
        let (lo, hi) = prefix_range(prefix.as_ref());
        self.iter_over(lo, hi)
    }

    /// A snapshot of the store: reads through it see exactly the writes
    /// acknowledged before this call (whole batches), and none after, for
    /// as long as it lives. O(1): no index is copied.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            point: ReadPoint::take(&self.store(), true),
            ks: KsId::DEFAULT,
        }
    }

    /// Begins an optimistic transaction at `isolation` (see
    /// [`Transaction`]): it reads a snapshot taken now, buffers its writes,
    /// and at commit writes them atomically or fails with
    /// [`Error::Conflict`].
    pub fn transaction(&self, isolation: Isolation) -> Transaction {
        Transaction::begin(&self.store(), isolation, KsId::DEFAULT)
    }

    /// Atomically sets `key` to `new` (`None`: removes it) if its value is
    /// `expected` (`None`: absent); returns whether it did. Retries
    /// internally on conflicts with concurrent writes. Writes with the
    /// store's default sync setting.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// assert!(db.compare_and_swap("lock", None, Some(b"me")).unwrap());
    /// assert!(!db.compare_and_swap("lock", None, Some(b"you")).unwrap());
    /// assert!(db.compare_and_swap("lock", Some(b"me"), None).unwrap());
    /// ```
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        crate::keyspace::compare_and_swap(
            || self.transaction(Isolation::Serializable),
            key.as_ref(),
            expected,
            new,
        )
    }

    /// The keyspace named `name`, created if it does not exist yet (the
    /// creation is written as any write is, with the store's default sync
    /// setting). `"default"` ([`crate::DEFAULT_KEYSPACE`]) is the default
    /// keyspace, the one `Db`'s own methods read and write. A name must
    /// not be empty, longer than [`crate::MAX_KEYSPACE_NAME_LEN`] bytes or
    /// hold a NUL (`Error::InvalidArgument`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = flexdb::Db::open(dir.path(), flexdb::Options::new().create_if_missing(true)).unwrap();
    /// let sessions = db.keyspace("sessions").unwrap();
    /// sessions.put("s1", "alice").unwrap();
    /// assert_eq!(db.keyspaces(), ["default", "sessions"]);
    /// db.drop_keyspace("sessions").unwrap();
    /// assert!(sessions.get("s1").is_err());
    /// assert_eq!(db.keyspace("sessions").unwrap().iter().count(), 0);
    /// ```
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        let entry = if name == DEFAULT_KEYSPACE {
            Arc::new(crate::keyspace::catalog::Entry::new(
                KsId::DEFAULT,
                DEFAULT_KEYSPACE.into(),
            ))
        } else {
            self.store().keyspaces.open(&self.store(), name)?
        };
        Ok(Keyspace::new(self.store().clone(), entry))
    }

    /// The names of the store's keyspaces, `"default"` first, then the
    /// others in order.
    pub fn keyspaces(&self) -> Vec<String> {
        let mut names = vec![DEFAULT_KEYSPACE.to_string()];
        names.extend(self.store().keyspaces.names());
        names
    }

    /// Whether keyspace `name` exists (without creating it).
    pub fn has_keyspace(&self, name: &str) -> bool {
        name == DEFAULT_KEYSPACE || self.store().keyspaces.find(name).is_some()
    }

    /// Keyspace `name` if it exists, without creating it (one call, so no
    /// drop can fall between a check and the open); a bad name is refused
    /// as [`Db::keyspace`] refuses it.
    pub fn existing_keyspace(&self, name: &str) -> Result<Option<Keyspace>> {
        if name == DEFAULT_KEYSPACE {
            return self.keyspace(name).map(Some);
        }
        crate::keyspace::catalog::check_name(name)?;
        let store = self.store();
        Ok(store
            .keyspaces
            .find(name)
            .map(|e| Keyspace::new(store.clone(), e)))
    }

    /// Removes keyspace `name` and every pair in it, atomically (one
    /// logged batch: its catalog entry and one range delete of all its
    /// keys), with the store's default sync setting; returns whether it
    /// existed. Its handles refuse every later call; a keyspace of the
    /// same name made later starts empty. The default keyspace cannot be
    /// dropped (`Error::InvalidArgument`; `delete_range(..)` empties it).
    pub fn drop_keyspace(&self, name: &str) -> Result<bool> {
        let opts = WriteOptions {
            sync: self.store().opts.sync_writes,
        };
        self.drop_keyspace_opt(name, &opts)
    }

    /// [`Db::drop_keyspace`] with explicit write options.
    pub fn drop_keyspace_opt(&self, name: &str, opts: &WriteOptions) -> Result<bool> {
        // Before the catalog: a failed drop still forgets the keyspace.
        if self.is_read_only() {
            return Err(Error::ReadOnly);
        }
        if name == DEFAULT_KEYSPACE {
            return Err(Error::InvalidArgument(
                "the default keyspace cannot be dropped (delete_range(..) empties it)".into(),
            ));
        }
        self.store()
            .keyspaces
            .drop_keyspace(&self.store(), name, opts.sync)
    }

    /// Commits every write so far to the space and makes it durable there
    /// (the write-ahead log it came from is then retired); returns once
    /// the data file's segments the commits freed are given back to the
    /// file system, so that the store's disk bytes are settled.
    pub fn flush(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly);
        }
        self.store().flush()?;
        if self.store().space.stats().reclaimable_segments > 0 {
            // Segments the commits emptied that the space has not committed
            // yet, or that the published view (registered before they were
            // emptied) still holds: a space commit and a fresh view let
            // them go.
            self.store().space.sync().map_err(space_err)?;
            self.store().mailbox.republish()?;
            self.store().space.release_freed();
        }
        self.store().space.wait_punched();
        Ok(())
    }

    /// Commits every write to the space, collects the garbage of every
    /// segment of the space's data file, checkpoints, and gives the freed
    /// disk space back to the file system (spare logs and the memory kept
    /// for MemTables are let go of too). Readers and writers go on
    /// meanwhile; writers wait at most one garbage-collection round at a
    /// time. Returns the store's disk bytes before and after.
    pub fn compact(&self) -> Result<crate::CompactReport> {
        self.compact_with_progress(|_| {})
    }

    /// [`Db::compact`], calling `progress` as the compaction goes (live
    /// bytes relocated so far, out of the total to relocate).
    pub fn compact_with_progress(
        &self,
        mut progress: impl FnMut(crate::CompactProgress),
    ) -> Result<crate::CompactReport> {
        crate::compact::compact(&self.store(), &mut progress)
    }

    /// Writes the store's current state, while writers go on, as a new
    /// store in `dest`: an online backup, as of a snapshot taken now
    /// ([`Snapshot::backup`]). Restoring is opening the backup.
    pub fn backup(&self, dest: impl AsRef<Path>) -> Result<crate::BackupReport> {
        self.snapshot().backup(dest)
    }

    /// [`Db::backup`], calling `progress` after every data segment and
    /// every few thousand pairs.
    pub fn backup_with_progress(
        &self,
        dest: impl AsRef<Path>,
        progress: impl FnMut(crate::BackupProgress),
    ) -> Result<crate::BackupReport> {
        self.snapshot().backup_with_progress(dest, progress)
    }

    /// [`Db::backup_with_progress`] by the given method (see
    /// [`Snapshot::backup_with`]).
    pub fn backup_with(
        &self,
        dest: impl AsRef<Path>,
        method: crate::BackupMethod,
        progress: impl FnMut(crate::BackupProgress),
    ) -> Result<crate::BackupReport> {
        self.snapshot().backup_with(dest, method, progress)
    }

    /// Makes every write so far durable (syncs the write-ahead log).
    pub fn sync(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly);
        }
        self.store().sync()
    }

    /// A snapshot of the store's counters. The `disk_*` figures read the
    /// allocation of every file of the store's directory (one `stat` each),
    /// so this is for monitoring, not for a hot loop.
    pub fn stats(&self) -> Stats {
        let s = &self.store();
        let committer_backlog = s.writes.mems().frozen.len();
        let (pairs, intervals) = {
            let st = s.index.read();
            (st.pairs, st.sparse.len())
        };
        let sp = s.space.stats();
        let wal_live = s.writes.lock().wal.written_bytes();
        let held = s.snapshots.holds(s);
        let mem = memory_of(s, &sp, held.bytes);
        let (cache_hits, cache_lookups) = s.cache.counts();
        let (row_cache_hits, row_cache_lookups) =
            s.rows.as_ref().map_or((0, 0), |r| r.hits_and_lookups());
        // If the directory cannot be measured the `disk_*` figures are zero
        // (stats never fail).
        let disk = crate::disk_usage::measure(&*s.storage, sp.live_bytes).unwrap_or_default();
        Stats {
            disk_live_bytes: disk.live,
            disk_garbage_bytes: disk.garbage,
            disk_garbage_free_bytes: (sp.unpunched_segments as u64 * flexspace::SEGMENT_SIZE)
                .min(disk.garbage),
            disk_wal_bytes: disk.wal,
            disk_checkpoint_bytes: disk.checkpoint,
            disk_log_bytes: disk.log,
            disk_other_bytes: disk.other,
            disk_total_bytes: disk.total(),
            pairs,
            space_bytes: sp.len,
            memtable_bytes: mem.memtable_bytes,
            committer_backlog,
            backlog_bytes: mem.backlog_bytes,
            intervals,
            sparse_index_bytes: mem.sparse_index_bytes,
            extent_index_bytes: mem.extent_index_bytes,
            space_amplification: sp.space_amplification,
            extents: sp.extents,
            cache_capacity: s.cache.capacity() as u64,
            cache_bytes: mem.cache_bytes,
            cache_hit_ratio: s.cache.hit_ratio(),
            cache_hits,
            cache_lookups,
            row_cache_bytes: mem.row_cache_bytes,
            row_cache_hits,
            row_cache_lookups,
            wal_bytes_written: s.counters.wal_bytes_retired.load(Ordering::Relaxed) + wal_live,
            data_bytes_written: sp.data_bytes_written,
            tree_bytes_written: sp.tree_bytes_written,
            log_bytes_written: sp.log_bytes_written,
            gc_relocated_bytes: sp.gc_relocated_bytes,
            defragmented_intervals: s.counters.defragmented.load(Ordering::Relaxed),
            range_deletes_committed: s.counters.range_deletes_committed.load(Ordering::Relaxed),
            range_intervals_dropped: s.counters.range_intervals_dropped.load(Ordering::Relaxed),
            commits: s.counters.commits.load(Ordering::Relaxed),
            memtables_committed: s.counters.memtables_committed.load(Ordering::Relaxed),
            logs_reused: s.counters.logs_reused.load(Ordering::Relaxed),
            logs_prepared: s.counters.logs_prepared.load(Ordering::Relaxed),
            memtable_pool_bytes: mem.memtable_pool_bytes,
            memtable_pool_lazy_bytes: s.chunks.lazily_freed_bytes() as u64,
            max_reader_wait: Duration::from_nanos(
                s.counters.max_reader_wait_ns.load(Ordering::Relaxed),
            ),
            snapshots_live: held.live,
            snapshot_oldest_age: held.oldest_age,
            snapshot_held_bytes: mem.snapshot_held_bytes,
            snapshot_held_versions: held.versions,
            space_held_bytes: sp.reclaimable_segments as u64 * flexspace::SEGMENT_SIZE,
        }
    }

    /// The store's memory by part, as [`Db::stats`] reports it, without
    /// measuring the disk: cheap enough for a sampler that asks often.
    pub fn memory_stats(&self) -> MemoryStats {
        let s = &self.store();
        memory_of(s, &s.space.stats(), s.snapshots.holds(s).bytes)
    }

    /// The longest time a reader waited for a lock since open or the
    /// previous call, and starts a new window (a benchmark calls it between
    /// phases; `Stats::max_reader_wait` keeps the maximum since open).
    pub fn take_max_reader_wait(&self) -> Duration {
        let c = &self.store().counters;
        Duration::from_nanos(c.window_reader_wait_ns.swap(0, Ordering::Relaxed))
    }

    /// Verifies everything: every pair readable with a valid checksum, pairs
    /// sorted, the sparse index consistent with the space, and the space's
    /// own metadata consistent. Reads the whole store.
    pub fn check(&self) -> Result<CheckReport> {
        crate::recovery::check::check(&self.store())
    }

    /// Salvages every readable pair of the (damaged) store in `dir` into
    /// a new store at `into`, or, with `into` `None`, in place: the
    /// salvaged store then takes `dir`'s name and the damaged one is kept
    /// beside it as `DIR.before-repair-SECONDS` (see its `original`). The store
    /// must not be open. Needs free space for a copy of the store (the
    /// salvaging open works on a copy, so the damaged files stay as they
    /// are) and for the new store. The report lists the key ranges lost
    /// and what else recovery gave up; `progress` sees each interval read.
    pub fn repair(
        dir: impl AsRef<Path>,
        into: Option<&Path>,
        mut progress: impl FnMut(crate::RepairProgress),
    ) -> Result<crate::RepairReport> {
        crate::recovery::repair::repair_dir(dir.as_ref(), into, &mut progress)
    }

    /// [`Db::repair`] on a storage backend (for example a
    /// `flexspace::FaultStorage` image): the store on `from` is opened
    /// salvaging, which writes to `from` (pass a copy), and what it can
    /// read is written into `into`, an open store.
    pub fn repair_storage(
        from: Arc<dyn Storage>,
        into: &Db,
        mut progress: impl FnMut(crate::RepairProgress),
    ) -> Result<crate::RepairReport> {
        crate::recovery::repair::repair_storage(from, Path::new("damaged"), into, &mut progress)
    }

    /// Flushes, checkpoints and closes the store, reporting any error.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        // The expiry thread writes: it stops first.
        if let Some(expirer) = self.expirer.take() {
            self.store().expiry.stop();
            let _ = expirer.join();
        }
        let Some(committer) = self.committer.take() else {
            return Ok(());
        };
        let flushed = self.store().flush();
        self.store().mailbox.shut_down();
        let joined = committer.join();
        flushed?;
        if joined.is_err() {
            return Err(Error::Stopped("the committer thread panicked".into()));
        }
        self.store().check_stopped()?;
        // Everything is in the space: the logs are no longer needed.
        let s = &self.store();
        let (wal, gen, empty) = {
            let w = s.writes.lock();
            (w.wal.clone(), w.gen, w.active.is_empty())
        };
        wal.sync()?;
        // A checkpoint now makes the next open load the tree without
        // replaying the space's log.
        s.space.checkpoint().map_err(space_err)?;
        // The committer has stopped: the index describes the space as of
        // this checkpoint, and the next open can load it instead of
        // sampling the space.
        crate::index::saved::save(
            s.storage.as_ref(),
            s.space.commit_id(),
            s.space.len(),
            &s.index.read().sparse,
        )?;
        // A log prepared ahead of a rotation that never came holds nothing.
        // It goes first (and durably): it follows the active log, and a log
        // left behind its removed predecessor reads as lost commits at the
        // next open (`recovery::open`).
        if let Some(p) = s.writes.next_log.take_any() {
            let name = crate::wal::log_files::wal_name(p.gen);
            drop(p);
            remove_durably(s.storage.as_ref(), &name)?;
        }
        if empty {
            // The flush left the active log without a record: removing it
            // spares the next open reading a preallocated file of zeros.
            let name = crate::wal::log_files::wal_name(gen);
            remove_durably(s.storage.as_ref(), &name)?;
        }
        // Last, so that a spare that cannot be removed (it holds nothing
        // anyone needs, and the next open removes it) costs nothing above.
        s.spare_logs.remove_all(&*s.storage)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; every synced write is safe.
        let _ = self.shutdown();
    }
}

/// Removes the file `name` if it is there, and syncs the directory.
fn remove_durably(storage: &dyn Storage, name: &str) -> Result<()> {
    match storage.remove_file(name) {
        Ok(()) => storage.sync_dir().map_err(crate::error::io_err(name)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(crate::error::io_err(name)(e)),
    }
}

/// The smallest key above every key starting with `prefix`, if any.
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// The memory figures of store `s`, given its space's stats and the bytes
/// its snapshots hold (which [`Db::stats`] reads once for more figures).
fn memory_of(s: &Store, sp: &flexspace::Stats, snapshot_held_bytes: u64) -> MemoryStats {
    let (memtable_bytes, backlog_bytes) = {
        let m = s.writes.mems();
        let frozen = m.frozen.iter().map(|f| f.mem.approximate_bytes() as u64);
        (m.active.approximate_bytes() as u64, frozen.sum())
    };
    let (sparse_index_bytes, view_extents) = s.views.index_memory(&s.index);
    MemoryStats {
        memtable_bytes,
        backlog_bytes,
        memtable_pool_bytes: s.chunks.kept_bytes() as u64,
        cache_bytes: s.cache.used() as u64,
        row_cache_bytes: s.rows.as_ref().map_or(0, |r| r.held_bytes() as u64),
        sparse_index_bytes,
        extent_index_bytes: sp.index_bytes + view_extents,
        snapshot_held_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_successors() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
    }
}
