//! The shared state of an open store and its read and write paths.
//!
//! Locks, in the order they may be taken: `writer` (serializes writers and
//! MemTable rotation), `state` (the committer's sparse index, which must
//! agree with the live space). Readers take neither: the list of MemTables
//! (`mems`) and the state the committer publishes for them (`view`) are
//! `ArcSwap`s, loaded with no lock and without writing to a line another
//! reader reads. The list is replaced whole (it is a few `Arc`s) by rotation,
//! under `writer`, and by the committer when it retires a MemTable. The
//! committer takes `state` exclusively to apply one group of changes at a
//! time, and only it and its prefetcher read it.
//!
//! Invariants:
//! - Every write with a sequence number `<= visible` is in a MemTable or in
//!   the space; a reader at snapshot `visible` sees whole batches.
//! - A frozen MemTable's write-ahead log is durable before the committer
//!   writes any of it to the space, and is removed only after the space has
//!   synced its content.
//! - The sparse index and the space change together under `state`'s write
//!   lock, so the prefetcher holding `state` shared reads consistent
//!   offsets; readers read a published view (`PublishedView`), which is consistent by
//!   construction.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flexspace::{FlexSpace, Storage};
use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard};

use crate::batch::{encode_single, BatchOp, WriteBatch};
use crate::codec::check_sizes;
use crate::error::{Error, Result};
use crate::index::interval::IntervalData;
use crate::index::interval_cache::{CacheRef, IntervalCache};
use crate::index::sparse::{IntervalPos, SparseIndex};
use crate::options::Options;
use crate::read::view::{Install, PublishedView};
use crate::recovery::manifest::{wal_name, wal_tmp_name};
use crate::wal::{Wal, MAX_RECORD};
use crate::write::memtable::MemTable;

/// An interval found in the cache, or planned for a read.
// Returned once per lookup and never stored: boxing the plan would cost an
// allocation per cache miss to save a move.
#[allow(clippy::large_enum_variant)]
enum Fetch<'s> {
    Cached(Arc<IntervalData>),
    Planned(Planned<'s>),
}

/// A read of an interval planned under `state` (see
/// [`Store::cached_or_plan`]).
struct Planned<'s> {
    plan: flexspace::ReadPlan<'s>,
    offset: u64,
    size: usize,
    /// The interval's cache word when planned.
    word: u64,
}

fn corrupt_interval(offset: u64, detail: String) -> Error {
    Error::Corrupt {
        file: "data".into(),
        detail: format!("interval at offset {offset}: {detail}"),
    }
}

/// The pairs read for the interval at `f` must lie in its key range.
fn check_key_range(sparse: &SparseIndex, f: &IntervalPos, data: &IntervalData) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let below = data.key(0) < sparse.anchor(f).as_slice();
    let above = sparse
        .next_anchor(f)
        .is_some_and(|n| data.key(data.len() - 1) >= n.as_slice());
    if below || above {
        return Err(corrupt_interval(
            f.offset,
            "its keys lie outside the range the sparse index gives it".into(),
        ));
    }
    Ok(())
}

/// What the space's three user metadata words record at each commit point
/// (`FlexSpace::set_user_meta`), in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommitPoint {
    /// Pairs in the space.
    pub pairs: u64,
    /// The last generation whose every write is in the space.
    pub committed_gen: u64,
    /// The highest sequence number used so far.
    pub max_seq: u64,
}

impl CommitPoint {
    /// The commit point the space's metadata words record.
    pub fn read(space: &FlexSpace) -> CommitPoint {
        let [pairs, committed_gen, max_seq] = space.user_meta();
        CommitPoint {
            pairs,
            committed_gen,
            max_seq,
        }
    }

    /// Records this commit point in the space's metadata words (durable
    /// with the space's next sync).
    pub fn write(self, space: &FlexSpace) -> Result<()> {
        space
            .set_user_meta([self.pairs, self.committed_gen, self.max_seq])
            .map_err(space_err)
    }
}

/// Frozen MemTables allowed to wait for the committer before writers stall.
pub(crate) const MAX_FROZEN: usize = 3;
/// The tag flexdb puts on extents that start with a pair.
pub(crate) const PAIR_TAG: u16 = 1;

/// A MemTable that takes no more writes, waiting for the committer.
#[derive(Clone)]
pub(crate) struct FrozenMemTable {
    pub mem: Arc<MemTable>,
    pub wal: Arc<Wal>,
    pub gen: u64,
}

/// The MemTables readers consult, newest first.
#[derive(Clone)]
pub(crate) struct MemTables {
    pub active: Arc<MemTable>,
    /// Oldest first.
    pub frozen: VecDeque<FrozenMemTable>,
}

/// What only writers touch.
pub(crate) struct WriteHead {
    pub next_seq: u64,
    pub active: Arc<MemTable>,
    pub wal: Arc<Wal>,
    pub gen: u64,
}

/// What the sparse index guards.
pub(crate) struct CommitterIndex {
    pub sparse: SparseIndex,
    /// Pairs in the space.
    pub pairs: u64,
    /// Bumped by every change under the write lock, so that a reader that
    /// let go of the lock can tell whether what it found is still valid.
    pub version: u64,
}

/// The committer's mailbox.
#[derive(Default)]
pub(crate) struct CommitterMailbox {
    pub shutdown: bool,
    /// Generations up to this one are durable in the space.
    pub committed_gen: u64,
    /// Why the store stopped taking writes, if it did.
    pub stopped: Option<String>,
}

/// Counters (see `Stats`).
#[derive(Default)]
pub(crate) struct Counters {
    pub max_reader_wait_ns: AtomicU64,
    /// The same maximum since the last `Db::take_max_reader_wait`.
    pub window_reader_wait_ns: AtomicU64,
    /// The same maximum since the last `FLEXDB_TRACE` report.
    pub trace_reader_wait_ns: AtomicU64,
    /// Reader waits longer than 100 µs and longer than 1 ms since the last
    /// `FLEXDB_TRACE` report (counted only when tracing).
    pub trace_slow_waits: [AtomicU64; 2],
    /// The longest exclusive hold of `state` by the committer since the
    /// last `FLEXDB_TRACE` report.
    pub max_commit_hold_ns: AtomicU64,
    pub wal_bytes_retired: AtomicU64,
    pub defragmented: AtomicU64,
    /// Commits the committer finished, and the MemTables they held (a
    /// committer that fell behind commits every waiting MemTable at once).
    pub commits: AtomicU64,
    pub memtables_committed: AtomicU64,
    pub logs_reused: AtomicU64,
    /// Intervals the committer (or `check`) read from the space itself,
    /// not found cached, since the last `FLEXDB_TRACE` report.
    pub trace_committer_reads: AtomicU64,
}

/// Everything an open store shares between threads.
pub(crate) struct Store {
    pub dir: PathBuf,
    /// The directory on a real file system (logs are then mapped), `None`
    /// for other storage backends.
    pub real_dir: Option<PathBuf>,
    pub opts: Options,
    pub storage: Arc<dyn Storage>,
    pub space: FlexSpace,
    pub cache: IntervalCache,
    pub writer: Mutex<WriteHead>,
    pub mems: arc_swap::ArcSwap<MemTables>,
    pub state: RwLock<CommitterIndex>,
    /// What readers read (see `view`); replaced only by the committer.
    pub view: arc_swap::ArcSwap<PublishedView>,
    /// Views the committer replaced, until their last reader lets go.
    pub retired: Mutex<Vec<Arc<PublishedView>>>,
    /// The extent index of a dropped view, for the next view to copy into.
    pub spare_index: Mutex<Option<flexspace::SpareIndex>>,
    /// Intervals readers cached in a view, for the committer to carry into
    /// its index (see `view`).
    pub installs: Mutex<Vec<Install>>,
    pub visible: AtomicU64,
    pub work: Mutex<CommitterMailbox>,
    /// Wakes the committer.
    pub work_cv: Condvar,
    /// Wakes writers stalled on a full backlog (waited on under `writer`).
    pub stall_cv: Condvar,
    /// Wakes `flush` waiters (waited on under `work`). A condition variable
    /// serves one mutex only, hence two.
    pub flushed_cv: Condvar,
    pub counters: Counters,
    /// Memory of committed MemTables, kept for the next ones (`chunk`).
    pub chunks: Arc<crate::write::chunk_pool::ChunkPool>,
    /// Files of committed logs, kept for the next logs (`spare_logs`).
    pub spare_logs: crate::wal::spare_logs::SpareLogs,
    /// `FLEXDB_TRACE` is set: the committer times its holds and reports
    /// each commit on stderr.
    pub trace: bool,
}

/// Creates the write-ahead log of generation `gen` durably, its records
/// numbered from `first` on: under a temporary name until its header is
/// synced, then renamed and the directory synced, so that a file named as a
/// log always has a whole header (see `files`). With `spare` (see
/// `spare_logs`), the log takes that file over instead of a new one: the
/// spare's name is such a temporary name already.
pub(crate) fn new_wal(
    storage: &Arc<dyn Storage>,
    real_dir: Option<&std::path::Path>,
    opts: &Options,
    gen: u64,
    first: u64,
    spare: Option<String>,
) -> Result<Arc<Wal>> {
    let name = wal_name(gen);
    let reused = spare.is_some();
    let tmp = spare.unwrap_or_else(|| wal_tmp_name(gen));
    let file = storage.open_file(&tmp, !reused).map_err(io_err(&tmp))?;
    // The mapping and the handle that syncs it are opened by this path and
    // follow the file through the rename.
    let path = real_dir.map(|d| d.join(&tmp));
    // Room for a MemTable's worth of records, up to `wal_map::FIRST_MAX`;
    // the log grows by steps past it if need be.
    let capacity = opts.memtable_bytes as u64 + (1 << 20);
    let real = path.as_deref().map(|p| (p, capacity));
    let wal = if reused {
        Wal::reuse(file, &name, real, first)?
    } else {
        Wal::create(file, &name, real, first)?
    };
    storage.rename(&tmp, &name).map_err(io_err(&name))?;
    storage.sync_dir().map_err(io_err(&name))?;
    Ok(Arc::new(wal))
}

pub(crate) fn io_err(file: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        file: file.into(),
        source,
    }
}

/// Maps a flexspace error onto the store's error type.
pub(crate) fn space_err(e: flexspace::Error) -> Error {
    match e {
        // Reading past the end of a space file means it was truncated.
        flexspace::Error::Io { file, source }
            if source.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            Error::Corrupt {
                file: file.into(),
                detail: format!("truncated ({source})"),
            }
        }
        flexspace::Error::Io { file, source } => Error::Io {
            file: file.into(),
            source,
        },
        flexspace::Error::Corrupt { file, detail } => Error::Corrupt {
            file: file.into(),
            detail,
        },
        flexspace::Error::NoSpace(s) => Error::NoSpace(s),
        flexspace::Error::Locked(p) => Error::Locked(p),
        flexspace::Error::Poisoned => Error::Stopped("an earlier I/O error on the space".into()),
        e => Error::Corrupt {
            file: "space".into(),
            detail: e.to_string(),
        },
    }
}

/// MemTables with fewer entries than this are left for the committer to
/// sort: it takes it well under a millisecond.
const SORT_AHEAD_ENTRIES: usize = 1 << 16;

/// Sorts a MemTable just frozen behind another on a thread of its own, at
/// the lowest priority, while the committer works on the older one: the
/// committer then walks it without sorting it (7% of the committer's time
/// in a profile of 100% puts at 10 M pairs). Best effort: without the
/// thread, or when it is late, the committer sorts the table itself.
fn sort_ahead(mem: &Arc<MemTable>) {
    if mem.len() < SORT_AHEAD_ENTRIES {
        return;
    }
    let mem = mem.clone();
    let _ = std::thread::Builder::new()
        .name("flexdb-sort".into())
        .spawn(move || {
            crate::commit::lowest_priority();
            mem.prepare_newest();
        });
}

impl Store {
    /// Refuses writes once the store stopped.
    pub fn check_stopped(&self) -> Result<()> {
        match &self.work.lock().stopped {
            Some(why) => Err(Error::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    /// Records why the store stopped and wakes everyone waiting.
    pub fn stop(&self, why: String) {
        let mut w = self.work.lock();
        if w.stopped.is_none() {
            w.stopped = Some(why);
        }
        drop(w);
        self.work_cv.notify_all();
        self.flushed_cv.notify_all();
        self.stall_cv.notify_all();
    }

    // ------------------------------------------------------------ writes

    /// Applies `batch` atomically; with `sync`, returns once it is durable.
    pub fn write(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        self.check_stopped()?;
        for op in batch.ops() {
            match op {
                BatchOp::Put { key, value } => check_sizes(key, Some(value))?,
                BatchOp::Delete { key } => check_sizes(key, None)?,
            }
        }
        if batch.is_empty() {
            return if sync { self.sync() } else { Ok(()) };
        }
        self.append(&batch.encode(), batch.len(), sync, |mem, seq| {
            for (i, op) in batch.ops().iter().enumerate() {
                let s = seq + i as u64;
                match op {
                    BatchOp::Put { key, value } => mem.insert(key, s, Some(value)),
                    BatchOp::Delete { key } => mem.insert(key, s, None),
                }
            }
        })
    }

    /// Applies one put (`value` set) or delete, as a batch of one would be
    /// applied, without building the batch: the payload is encoded into a
    /// buffer the thread reuses.
    pub fn write_one(&self, key: &[u8], value: Option<&[u8]>, sync: bool) -> Result<()> {
        thread_local! {
            static PAYLOAD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        self.check_stopped()?;
        check_sizes(key, value)?;
        let encode_and_append = |buf: &mut Vec<u8>| {
            encode_single(buf, key, value);
            // The insert's cache misses, taken before the writer lock
            // rather than under it (docs/DESIGN.md, "The writers' own
            // limit, and three changes to their path").
            let h = self.mems.load().active.warm(key);
            self.append(buf, 1, sync, |mem, seq| {
                mem.insert_hashed(key, h, seq, value)
            })
        };
        // The thread's buffer, unless it is gone (a put from a thread-local
        // destructor) or in use: then a fresh one.
        let reused = PAYLOAD.try_with(|cell| {
            let mut buf = cell.try_borrow_mut().ok()?;
            let r = encode_and_append(&mut buf);
            // Do not keep a huge value's buffer around.
            if buf.capacity() > 1 << 20 {
                *buf = Vec::new();
            }
            Some(r)
        });
        match reused {
            Ok(Some(r)) => r,
            _ => encode_and_append(&mut Vec::new()),
        }
    }

    /// Logs `payload` (a batch of `ops` operations) under the next sequence
    /// numbers, lets `apply` insert them into the active MemTable (the first
    /// at the sequence number given), and makes them visible; with `sync`,
    /// returns once they are durable.
    fn append(
        &self,
        payload: &[u8],
        ops: usize,
        sync: bool,
        apply: impl FnOnce(&MemTable, u64),
    ) -> Result<()> {
        if payload.len() > MAX_RECORD {
            return Err(Error::BatchTooLarge {
                len: payload.len(),
                max: MAX_RECORD,
            });
        }
        let mut w = flexsys::lock_wait::lock_spinning(&self.writer);
        self.make_room(&mut w)?;
        let seq = w.next_seq;
        let end = match w.wal.append(seq, payload) {
            Ok(end) => end,
            Err(e) => {
                self.stop(e.to_string());
                return Err(e);
            }
        };
        apply(&w.active, seq);
        let last = seq + ops as u64 - 1;
        w.next_seq = last + 1;
        self.visible.store(last, Ordering::Release);
        // Every few MiB the log's new pages are written back early (not
        // under the writer lock), so no sync meets a log full of them.
        let write_back = w.wal.write_back_due(end);
        let wal = (sync || write_back).then(|| w.wal.clone());
        drop(w);
        if let Some(wal) = wal {
            if write_back {
                wal.write_back(end);
            }
            if sync {
                if let Err(e) = wal.sync_to(end) {
                    self.stop(e.to_string());
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Rotates a full MemTable, stalling while the committer's backlog is
    /// full.
    fn make_room(&self, w: &mut parking_lot::MutexGuard<'_, WriteHead>) -> Result<()> {
        while w.active.approximate_bytes() >= self.opts.memtable_bytes {
            if self.mems.load().frozen.len() < MAX_FROZEN {
                return self.rotate(w);
            }
            // The committer wakes us after each commit; the timeout only
            // guards against a lost wakeup.
            self.stall_cv.wait_for(w, Duration::from_millis(10));
            self.check_stopped()?;
        }
        Ok(())
    }

    /// Freezes the active MemTable and starts a new one with a new log.
    /// The old log is synced first, so logs are durable in order (a synced
    /// write in a newer log implies every write before it is durable).
    pub fn rotate(&self, w: &mut WriteHead) -> Result<()> {
        if w.active.is_empty() {
            return Ok(());
        }
        let r = (|| {
            w.wal.sync()?;
            let gen = w.gen + 1;
            let spare = self.spare_logs.take();
            let reused = spare.is_some();
            let wal = new_wal(
                &self.storage,
                self.real_dir.as_deref(),
                &self.opts,
                gen,
                w.next_seq,
                spare,
            )?;
            if reused {
                self.counters.logs_reused.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, Error>((gen, wal))
        })();
        let (gen, wal) = match r {
            Ok(x) => x,
            Err(e) => {
                self.stop(e.to_string());
                return Err(e);
            }
        };
        let active = Arc::new(MemTable::pooled(
            &w.active.shared_prefix(),
            Some(self.chunks.clone()),
        ));
        let frozen = FrozenMemTable {
            mem: w.active.clone(),
            wal: w.wal.clone(),
            gen: w.gen,
        };
        // Readers load the old list or the new one, never wait.
        let before = self.mems.rcu(|m| {
            let mut m = MemTables::clone(m);
            m.frozen.push_back(frozen.clone());
            m.active = active.clone();
            m
        });
        let committer_busy = !before.frozen.is_empty();
        if committer_busy {
            sort_ahead(&w.active);
        }
        w.active = active;
        w.wal = wal;
        w.gen = gen;
        // Notify under the mailbox lock: the committer checks for work and
        // sleeps under it, so the wakeup cannot fall between the two.
        let _work = self.work.lock();
        self.work_cv.notify_all();
        Ok(())
    }

    /// Lets go of `wal`, the log of committed generation `gen`: kept as a
    /// spare for a new log to take over (`spare_logs`) when it may be
    /// ([`Wal::reusable`]), or removed (also when enough are kept). A log
    /// that a crash leaves under either name holds nothing the next open
    /// replays (its generation is committed; a spare's name is a log's
    /// temporary one).
    pub fn retire_log(&self, gen: u64, wal: &Wal) -> Result<()> {
        let name = wal_name(gen);
        if wal.reusable() && self.spare_logs.has_room() {
            let spare = wal_tmp_name(gen);
            match self.storage.rename(&name, &spare) {
                Ok(()) if self.spare_logs.put(spare.clone()) => return Ok(()),
                Ok(()) => return self.remove_log_file(&spare),
                // Gone already (as the next open would also find).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_err(&name)(e)),
            }
        }
        self.remove_log_file(&name)
    }

    /// Removes every spare log (an idle store, a closing one); tries each
    /// and reports the first failure.
    pub fn remove_spare_logs(&self) -> Result<()> {
        let mut first_error = Ok(());
        for name in self.spare_logs.take_all() {
            let removed = self.remove_log_file(&name);
            if first_error.is_ok() {
                first_error = removed;
            }
        }
        first_error
    }

    fn remove_log_file(&self, name: &str) -> Result<()> {
        match self.storage.remove_file(name) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(name)(e)),
            _ => Ok(()),
        }
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        let wal = self.writer.lock().wal.clone();
        wal.sync().inspect_err(|e| self.stop(e.to_string()))
    }

    /// Commits every write so far to the space and waits until it is
    /// durable there.
    pub fn flush(&self) -> Result<()> {
        let target = {
            let mut w = self.writer.lock();
            self.rotate(&mut w)?;
            match self.mems.load().frozen.back() {
                Some(f) => f.gen,
                None => return Ok(()),
            }
        };
        let mut work = self.work.lock();
        loop {
            if let Some(why) = &work.stopped {
                return Err(Error::Stopped(why.clone()));
            }
            if work.committed_gen >= target {
                return Ok(());
            }
            self.flushed_cv
                .wait_for(&mut work, Duration::from_millis(100));
        }
    }

    // ------------------------------------------------------------- reads

    /// The interval at `f` in `sparse` if it is cached; otherwise a plan
    /// to read it made by `plan` (from the space `sparse` describes). The
    /// plan holds no lock of this store, so a caller holding one can let
    /// it go before the read (a read may wait for the device). `reader` as
    /// for [`Store::install`].
    fn cached_or_plan<'p>(
        &self,
        sparse: &SparseIndex,
        f: &IntervalPos,
        reader: bool,
        plan: impl FnOnce(u64, u64) -> flexspace::Result<flexspace::ReadPlan<'p>>,
    ) -> Result<Fetch<'p>> {
        let meta = sparse.meta(f);
        let word = meta.cache.load(Ordering::Acquire);
        let r = CacheRef::unpack(word);
        let cached = if reader {
            self.cache.get_nowait(r)
        } else {
            self.cache.get(r)
        };
        if let Some(d) = cached {
            return Ok(Fetch::Cached(d));
        }
        let size = meta.size as usize;
        let plan = plan(f.offset, size as u64).map_err(space_err)?;
        Ok(Fetch::Planned(Planned {
            plan,
            offset: f.offset,
            size,
            word,
        }))
    }

    /// Reads and parses a planned interval (no lock needed).
    fn read_planned(&self, p: &Planned<'_>) -> Result<IntervalData> {
        let mut buf = vec![0u8; p.size];
        let (n, extents) = p.plan.read(&mut buf).map_err(space_err)?;
        if n != p.size {
            return Err(corrupt_interval(
                p.offset,
                format!("the space ends {n} bytes into a {}-byte interval", p.size),
            ));
        }
        IntervalData::parse(buf, extents as u32).map_err(|d| corrupt_interval(p.offset, d))
    }

    /// Caches `data`, read by the plan `p` of the interval that `f` finds
    /// in `sparse`, unless that interval's cache word moved on since the
    /// plan (the committer changed it, or a racing reader installed its
    /// copy): the caller may still use `data`, a consistent state of the
    /// interval as of the plan. Checks the keys against the interval's
    /// range. `reader`: a reader's call, which never waits for the cache's
    /// lock (it reads the space instead, or leaves the data uncached), not
    /// the committer's or the prefetcher's.
    fn install(
        &self,
        sparse: &SparseIndex,
        f: &IntervalPos,
        p: &Planned<'_>,
        data: IntervalData,
        reader: bool,
    ) -> Result<Arc<IntervalData>> {
        let meta = sparse.meta(f);
        let data = Arc::new(data);
        if meta.cache.load(Ordering::Acquire) == p.word && meta.size as usize == p.size {
            check_key_range(sparse, f, &data)?;
            let r = if reader {
                match self.cache.try_insert(data.clone()) {
                    Some(r) => r,
                    // The cache is busy: not cached this time.
                    None => return Ok(data),
                }
            } else {
                self.cache.insert(None, data.clone())
            };
            // A racing reader may have installed its own copy meanwhile;
            // either is the same content.
            let installed = meta
                .cache
                .compare_exchange(p.word, r.pack(), Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            match (installed, reader) {
                // A forwarded word named newer content than what was read
                // (the view's snapshot): the install stays in the view.
                (true, true) if CacheRef::forwarded(p.word) => {}
                (true, true) => self.note_install(sparse.anchor(f), p.word, r.pack(), p.size),
                (true, false) => {}
                // Left to CLOCK if the cache is busy.
                (false, true) => self.cache.try_remove(r),
                (false, false) => self.cache.remove(r),
            }
        }
        Ok(data)
    }

    /// The MemTables, for one read (never waits).
    fn read_mems(&self) -> arc_swap::Guard<Arc<MemTables>> {
        self.mems.load()
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_sizes(key, None)?;
        let snapshot = self.visible.load(Ordering::Acquire);
        {
            let m = self.read_mems();
            if let Some(v) = m.active.get(key, snapshot) {
                return Ok(v.map(Vec::from));
            }
            for f in m.frozen.iter().rev() {
                if let Some(v) = f.mem.get(key, snapshot) {
                    return Ok(v.map(Vec::from));
                }
            }
        }
        // After the MemTables (see `view`'s invariants).
        let view = self.view();
        let f = view.sparse.find(key);
        let meta = view.sparse.meta(&f);
        if meta.size == 0 {
            return Ok(None);
        }
        // A hit copies the value out under the slot's lock, without taking
        // a reference to the interval (whose count the threads reading a
        // hot interval would all write).
        let word = meta.cache.load(Ordering::Acquire);
        let hit = self
            .cache
            .read_nowait(CacheRef::unpack(word), |d| d.get(key).map(<[u8]>::to_vec));
        if let Some(value) = hit {
            return Ok(value);
        }
        let data = self.view_interval(&view, &f)?;
        Ok(data.get(key).map(<[u8]>::to_vec))
    }

    /// The content of the interval at `f` in `view`, from the cache or read
    /// from the view's snapshot of the space (and then cached in the view).
    pub fn view_interval(
        &self,
        view: &PublishedView,
        f: &IntervalPos,
    ) -> Result<Arc<IntervalData>> {
        self.fetch(&view.sparse, f, true, |o, n| view.space.plan_read(o, n))
    }

    /// The content of the interval at `f` in `sparse`, from the cache or
    /// read by a plan that `plan` makes (and then cached); `reader` as for
    /// [`Store::install`].
    fn fetch<'p>(
        &self,
        sparse: &SparseIndex,
        f: &IntervalPos,
        reader: bool,
        plan: impl FnOnce(u64, u64) -> flexspace::Result<flexspace::ReadPlan<'p>>,
    ) -> Result<Arc<IntervalData>> {
        match self.cached_or_plan(sparse, f, reader, plan)? {
            Fetch::Cached(d) => Ok(d),
            Fetch::Planned(p) => {
                if !reader {
                    self.counters
                        .trace_committer_reads
                        .fetch_add(1, Ordering::Relaxed);
                }
                let data = self.read_planned(&p)?;
                self.install(sparse, f, &p, data, reader)
            }
        }
    }

    /// For the prefetcher: caches the interval of the committer's index
    /// holding `key` (unless it is empty), read from the space with the
    /// index released. `lock` takes the index shared; `peek` sees where
    /// the interval is under the first hold.
    pub fn interval_of<'s>(
        &'s self,
        key: &[u8],
        lock: impl Fn() -> RwLockReadGuard<'s, CommitterIndex>,
        peek: impl FnOnce(&CommitterIndex, &IntervalPos),
    ) -> Result<Option<Arc<IntervalData>>> {
        let st = lock();
        let f = st.sparse.find(key);
        peek(&st, &f);
        if st.sparse.meta(&f).size == 0 {
            return Ok(None);
        }
        let planned =
            match self.cached_or_plan(&st.sparse, &f, false, |o, n| self.space.plan_read(o, n))? {
                Fetch::Cached(data) => return Ok(Some(data)),
                Fetch::Planned(p) => p,
            };
        let version = st.version;
        drop(st);
        let data = self.read_planned(&planned)?;
        let st = lock();
        let f = if st.version == version {
            f
        } else {
            st.sparse.find(key)
        };
        self.install(&st.sparse, &f, &planned, data, false)
            .map(Some)
    }

    /// The content of the interval at `f` in the committer's index, from
    /// the cache or read from the live space (and then cached). The caller
    /// holds `state` throughout (the committer, `check`).
    pub fn interval(&self, st: &CommitterIndex, f: &IntervalPos) -> Result<Arc<IntervalData>> {
        self.fetch(&st.sparse, f, false, |o, n| self.space.plan_read(o, n))
    }

    /// Drops `r` from the cache if it is set.
    pub fn uncache(&self, packed: u64) {
        if let Some(r) = CacheRef::unpack(packed) {
            self.cache.remove(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_sorted_ahead_is_sorted_by_the_thread() {
        let mem = Arc::new(MemTable::new());
        let n = SORT_AHEAD_ENTRIES as u64 + 10;
        for i in 0..n {
            let k = format!("{:08}", (i * 7919) % n);
            mem.insert(k.as_bytes(), i + 1, Some(b"v"));
        }
        sort_ahead(&mem);
        // The thread runs at the lowest priority: give it time.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while mem.sorted_upto() < mem.len() {
            assert!(std::time::Instant::now() < deadline, "never sorted");
            std::thread::sleep(Duration::from_millis(5));
        }
        let keys: Vec<_> = mem.newest().map(|e| e.key.to_vec()).collect();
        assert_eq!(keys.len() as u64, n);
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }
}
