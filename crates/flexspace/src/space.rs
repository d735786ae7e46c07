//! FlexSpace: the persistent flexible address space (§4), its public API and
//! its locking.
//!
//! Locks, in the order they are taken (never the other way round):
//! 1. `maint` (mutex): serializes commits, checkpoints and garbage
//!    collection; held across their I/O. Holds the log's position.
//! 2. `gate` (mutex): taken by every mutation, and by the long steps that
//!    must exclude mutations but not readers (a GC round's scan and copies,
//!    a checkpoint's tree write, `check`, `defrag`). Mutations queue here,
//!    never on the reader-writer lock, so readers are never queued behind a
//!    writer that waits for a long step.
//! 3. `state` (reader-writer lock): the tree and the segment accounting.
//!    Readers hold it only to translate a range; writers hold it for one
//!    mutation's in-memory work, or a commit's snapshot and publication, or
//!    one GC batch's remaps: microseconds, no I/O ever.
//!
//! Invariants:
//! - Commits take whole mutations (a mutation is one hold of the write
//!   lock), so recovery yields the state after some mutation.
//! - `sync()` is a commit: its state survives any later crash.
//! - Space freed by collapses, overwrites or relocations is reused only
//!   after the commit that recorded the change is durable and every read
//!   that could see the old mapping has finished (see `segments`, `grace`).
//! - After an I/O error during a commit or a background write the space is
//!   poisoned: mutations fail with `Poisoned`, reads keep working, and
//!   reopening recovers the last commit.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{io, Error, Result};
use crate::grace::GraceReaders;
use crate::log::LogOp;
use crate::maintenance::background::{self, BackgroundMaintainer, Maintained};
pub use crate::maintenance::compact::CompactReport;
use crate::open::{self, SpaceFiles, DATA, LOG, TREE};
use crate::options::{Options, SEGMENT_SIZE};
use crate::read::{self, ReadPlan};
use crate::segments::segbuf::SegBufPool;
use crate::segments::writers::SegmentWriters;
use crate::segments::ReaderPin;
use crate::state::SpaceState;
use crate::storage::{FileStorage, Mapping, Storage, StorageFile};
use crate::timed_rwlock::TimedRwLock;

/// Counters of a FlexSpace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Size of the address space.
    pub len: u64,
    /// Bytes written to the data file.
    pub data_bytes_written: u64,
    /// Bytes written to the tree file.
    pub tree_bytes_written: u64,
    /// Bytes written to the log file.
    pub log_bytes_written: u64,
    /// Segments in the data file.
    pub segments: usize,
    /// Free segments.
    pub free_segments: usize,
    /// Valid bytes over the capacity of the non-free segments.
    pub segment_utilization: f64,
    /// Garbage-collection rounds.
    pub gc_runs: u64,
    /// Bytes relocated by garbage collection.
    pub gc_relocated_bytes: u64,
    /// Log commits.
    pub commits: u64,
    /// Bytes of the data file the file system holds (`st_blocks` × 512 on
    /// real files): live bytes, garbage and free segments not yet punched.
    pub data_allocated_bytes: u64,
    /// `data_allocated_bytes` minus `live_bytes`.
    pub garbage_bytes: u64,
    /// Bytes of the tree file (checkpoints) the file system holds.
    pub tree_allocated_bytes: u64,
    /// Bytes of the log file the file system holds.
    pub log_allocated_bytes: u64,
    /// Free segments that may still hold blocks (waiting for a punch).
    pub unpunched_segments: usize,
    /// Bytes given back to the file system by punching free segments.
    pub punched_bytes: u64,
    /// Tree checkpoints.
    pub checkpoints: u64,
    /// Extents in the index.
    pub extents: u64,
    /// Whether there are changes not yet committed.
    pub uncommitted: bool,
    /// Bytes the index maps to the data file (holes excluded).
    pub live_bytes: u64,
    /// Bytes of the data file in use: every segment that is not free.
    pub data_file_bytes: u64,
    /// `data_file_bytes` over `live_bytes` (0 when nothing is live).
    pub space_amplification: f64,
    /// Garbage in the segments that hold live data, over their capacity.
    pub garbage_ratio: f64,
    /// Emptied segments waiting for a commit or for readers.
    pub reclaimable_segments: usize,
    /// Of those, the segments held for readers of other processes (the
    /// reader registry: read-only opens), which may hold them for as long
    /// as they live.
    pub reader_held_segments: usize,
    /// Sealed segments whose background write has not finished.
    pub inflight_segments: usize,
    /// Bytes in the log file (header included).
    pub log_file_bytes: u64,
    /// The longest hold of the space's exclusive lock so far, in
    /// microseconds (readers wait at most this long for the lock).
    pub write_lock_max_us: f64,
    /// Holds of the exclusive lock that lasted over 100 µs.
    pub write_lock_holds_over_100us: u64,
    /// Bytes of memory held by the extent index's nodes.
    pub index_bytes: u64,
}

/// What the commit path keeps between commits (behind `maint`).
pub(crate) struct LogPosition {
    /// End of the valid log.
    pub log_end: u64,
    /// Sequence number of the last commit in the log (0: none since the
    /// checkpoint).
    pub seq: u64,
    /// The checkpoint version the log belongs to.
    pub version: u64,
    /// Batches of commits a full device failed, oldest first: the next
    /// commit writes each as a commit of its own, at `log_end`, before its
    /// own batch (see `maintenance/commit.rs`).
    pub unwritten: Vec<crate::log::buffer::TakenLog>,
    /// A checkpoint's log restart a full device refused: the next commit
    /// restarts the log under `version` first.
    pub restart_pending: bool,
}

#[derive(Default)]
pub(crate) struct SpaceCounters {
    pub commits: AtomicU64,
    pub checkpoints: AtomicU64,
    pub gc_runs: AtomicU64,
    pub gc_relocated: AtomicU64,
    /// Bytes given back by punches.
    pub punched: AtomicU64,
    /// Mirror of `LogPosition::log_end`, readable without the mutex.
    pub log_end: AtomicU64,
}

/// A persistent, crash-safe flexible address space.
///
/// ```
/// use flexspace::{FaultStorage, FlexSpace, Options};
/// use std::sync::Arc;
/// let storage = Arc::new(FaultStorage::new());
/// let space = FlexSpace::open_with_storage(storage, Options::new().create(true)).unwrap();
/// space.insert(0, b"world").unwrap();
/// space.insert(0, b"hello ").unwrap();
/// let mut buf = [0u8; 11];
/// space.read(0, &mut buf).unwrap();
/// assert_eq!(&buf, b"hello world");
/// space.sync().unwrap();
/// ```
pub struct FlexSpace {
    pub(crate) s: Arc<SpaceInner>,
}

/// Everything a space is made of; shared with its background maintainer.
pub(crate) struct SpaceInner {
    pub(crate) state: TimedRwLock<SpaceState>,
    pub(crate) gate: Mutex<()>,
    pub(crate) maint: Mutex<LogPosition>,
    pub(crate) readers: Arc<GraceReaders>,
    pub(crate) writer: Arc<SegmentWriters>,
    /// Spare segment buffers (shared with the state).
    pub(crate) pool: Arc<SegBufPool>,
    pub(crate) files: SpaceFiles,
    /// The data file mapped for reads (`Options::mmap_reads`).
    pub(crate) map: Option<Mapping>,
    pub(crate) opts: Options,
    pub(crate) counters: SpaceCounters,
    pub(crate) bg: Arc<BackgroundMaintainer>,
    /// An error of background maintenance, for the next caller.
    pub(crate) bg_error: Mutex<Option<Error>>,
    /// The thread giving the last checkpoint's free tree pages back
    /// (`maintenance/commit.rs`), joined before the next one starts and
    /// at close.
    pub(crate) give_back: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The thread punching free segments out of the data file
    /// (`maintenance/compact.rs`), joined at close and drop.
    pub(crate) punch_thread: Mutex<crate::maintenance::compact::PunchThread>,
    /// This space, for the threads it starts.
    pub(crate) this: std::sync::Weak<SpaceInner>,
    /// What a salvaging open gave up (`Options::salvage`).
    pub(crate) salvaged: Vec<String>,
    /// The reader registry this writer keeps segments for (`None`:
    /// read-only, or storage not shared with other processes).
    pub(crate) registry: Option<std::path::PathBuf>,
    /// A read-only space's entry in the reader registry, held (locked) as
    /// long as anything reads this state.
    pub(crate) registration: Option<crate::registry::Registration>,
    /// When the registry was last scanned outside a commit.
    pub(crate) pin_scanned: Mutex<Option<std::time::Instant>>,
    pub(crate) _storage: Arc<dyn Storage>,
}

/// With automatic maintenance, a mutation commits inline when the log
/// buffer holds this many times `commit_log_bytes` (the background
/// maintainer is behind).
const LOG_BEHIND: usize = 4;

/// Most segments in flight before mutations wait for the writers.
pub(crate) fn max_inflight(opts: &Options) -> usize {
    opts.segment_writers.max(1) * 2
}

impl FlexSpace {
    /// Opens the space in directory `dir` (real files, locked).
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<FlexSpace> {
        let dir = dir.as_ref();
        options.validate()?;
        if options.read_only {
            let storage = FileStorage::open_read_only(dir)?;
            return Self::open_with_storage(Arc::new(storage), options).map_err(|e| match e {
                Error::NotAFlexSpace(_) => Error::NotAFlexSpace(dir.to_path_buf()),
                e => e,
            });
        }
        let storage = FileStorage::open(dir, options.create)?;
        let has_tree = storage.exists(TREE).map_err(io(TREE))?;
        if !has_tree && !options.create {
            return Err(Error::NotAFlexSpace(dir.to_path_buf()));
        }
        Self::open_with_storage(Arc::new(storage), options).map_err(|e| match e {
            Error::NotAFlexSpace(_) => Error::NotAFlexSpace(dir.to_path_buf()),
            e => e,
        })
    }

    /// Opens the space on any storage backend. The space's files are named
    /// `data`, `tree` and `log` (and [`FileStorage`] adds `lock`); the layer
    /// above may keep other files in the same storage.
    pub fn open_with_storage(storage: Arc<dyn Storage>, options: Options) -> Result<FlexSpace> {
        options.validate()?;
        if options.read_only {
            return crate::read_only::open(storage, options);
        }
        let found = open::exists(storage.as_ref())?;
        let has = |n| storage.exists(n).map_err(io(n));
        let o = if !found {
            if !options.create {
                return Err(Error::NotAFlexSpace(Default::default()));
            }
            open::create(storage.as_ref(), &options)?
        } else if has(DATA)? && has(LOG)? {
            open::recover(storage.as_ref(), &options)?
        } else {
            return Err(Error::NotAFlexSpace(Default::default()));
        };
        let space = Self::assemble(storage, options, o, None)?;
        // Punching a segment that is a hole already costs one system call.
        space.s.punch_free_segments(usize::MAX)?;
        Ok(space)
    }

    /// The space over what `open` found (`registration`: a read-only
    /// space's entry in the reader registry).
    pub(crate) fn assemble(
        storage: Arc<dyn Storage>,
        options: Options,
        o: open::Opened,
        registration: Option<crate::registry::Registration>,
    ) -> Result<FlexSpace> {
        let map = match options.mmap_reads {
            true => storage
                .map_file(DATA, o.valid.len() as u64 * SEGMENT_SIZE)
                .map_err(io(DATA))?,
            false => None,
        };
        let readers = Arc::new(GraceReaders::default());
        let writer = Arc::new(SegmentWriters::new(
            o.files.data.clone(),
            if options.read_only {
                0
            } else {
                options.segment_writers
            },
        ));
        let pool = Arc::new(SegBufPool::new(max_inflight(&options) + 2));
        let mut st = SpaceState::new(
            o.tree,
            o.valid,
            writer.clone(),
            readers.clone(),
            pool.clone(),
        );
        st.user_meta = o.user_meta;
        st.commit_id = (o.version, o.seq);
        // Free segments the data file may still hold blocks of (a crash
        // or an older build left them): punched below.
        let data_len = o.files.data.len().map_err(io(DATA))?;
        let on_file = data_len.div_ceil(SEGMENT_SIZE).min(u64::from(u32::MAX)) as u32;
        let registry = match options.read_only {
            true => None,
            false => storage.registry_dir(),
        };
        if let Some(dir) = &registry {
            // Readers of other processes may hold states older than this
            // one, in which segments now free still held data: those wait
            // until the readers move on (`segments::table`).
            let at = st.commit_id;
            let pin = match crate::registry::scan(dir) {
                Ok(scan) => ReaderPin::Scanned {
                    at,
                    oldest: scan.oldest,
                },
                Err(_) => ReaderPin::Scanned {
                    at: (0, 0),
                    oldest: Some((0, 0)),
                },
            };
            if !pin.allows(at) {
                st.seg.hold_free_below(on_file, at);
            }
            st.seg.set_pin(pin);
        }
        st.seg.mark_unpunched_below(on_file);

        let counters = SpaceCounters::default();
        counters.log_end.store(o.log_end, Ordering::Relaxed);
        Ok(FlexSpace {
            s: Arc::new_cyclic(|this| SpaceInner {
                state: TimedRwLock::new(st),
                gate: Mutex::new(()),
                maint: Mutex::new(LogPosition {
                    log_end: o.log_end,
                    seq: o.seq,
                    version: o.version,
                    unwritten: Vec::new(),
                    restart_pending: false,
                }),
                readers,
                writer,
                pool,
                files: o.files,
                map,
                opts: options,
                counters,
                bg: Arc::new(BackgroundMaintainer::default()),
                bg_error: Mutex::new(None),
                give_back: Mutex::new(None),
                punch_thread: Mutex::default(),
                this: this.clone(),
                salvaged: o.salvaged,
                registry,
                registration,
                pin_scanned: Mutex::new(None),
                _storage: storage,
            }),
        })
    }

    /// Commits, checkpoints (unless nothing changed since the last
    /// checkpoint) and closes the space.
    pub fn close(self) -> Result<()> {
        self.s.close_inner()
    }

    /// Size of the space in bytes.
    pub fn len(&self) -> u64 {
        self.s.state.read().tree.len()
    }

    /// Whether the space is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Plans a read of up to `len` bytes at `offset` (fewer at the end of
    /// the space; `offset` past the end is `OutOfRange`). Planning only
    /// translates offsets, in memory, under the space's read lock; the
    /// returned plan then copies the bytes with [`ReadPlan::read`] without
    /// any lock, so a layer above may plan under its own lock, release it
    /// and read. The plan sees the space as of its creation: physical space
    /// it refers to is not reused until it is dropped. Drop plans promptly
    /// (a mutation that finds no other free space waits for them), and do
    /// not hold one across a mutation of the same space on the same thread.
    pub fn plan_read(&self, offset: u64, len: u64) -> Result<ReadPlan<'_>> {
        let st = self.s.state.read();
        let guard = self.s.readers.enter(st.seg.epoch());
        read::plan(&st, offset, len, self.s.source(), guard)
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns the bytes read
    /// (fewer at the end of the space; holes read as zeros).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let plan = self.plan_read(offset, buf.len() as u64)?;
        Ok(plan.read(buf)?.0)
    }

    /// Like [`FlexSpace::read`], also returning how many extents the bytes
    /// read came from (the layer above uses it to spot fragmentation).
    pub fn read_counted(&self, offset: u64, buf: &mut [u8]) -> Result<(usize, usize)> {
        let plan = self.plan_read(offset, buf.len() as u64)?;
        plan.read(buf)
    }

    /// How many extents the `len` bytes at `offset` span (fewer at the end
    /// of the space; `offset` past the end is `OutOfRange`): what
    /// [`FlexSpace::read_counted`] would count, without reading. Walks the
    /// index under the read lock, O(log N + extents).
    pub fn extents_in(&self, offset: u64, len: u64) -> Result<usize> {
        let st = self.s.state.read();
        read::count_extents(&st.tree, offset, len)
    }

    /// Reads from the start of the extent containing `offset`: returns the
    /// extent's start and the bytes read (at most the extent's length).
    pub fn read_extent(&self, offset: u64, buf: &mut [u8]) -> Result<(u64, usize)> {
        let plan = {
            let st = self.s.state.read();
            let e = st.tree.extent_at(offset).map_err(|_| Error::OutOfRange {
                offset,
                len: 1,
                size: st.tree.len(),
            })?;
            let n = (buf.len() as u64).min(e.len);
            let guard = self.s.readers.enter(st.seg.epoch());
            (
                e.offset,
                read::plan(&st, e.offset, n, self.s.source(), guard)?,
            )
        };
        let (n, _) = plan.1.read(buf)?;
        Ok((plan.0, n))
    }

    /// Overwrites `data.len()` bytes at `offset` (extending the space; a
    /// gap past the end becomes a hole).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.s.mutate(data.len() as u64, |g| g.write(offset, data))
    }

    /// Inserts `data` at `offset`, shifting later bytes up.
    pub fn insert(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.s.mutate(data.len() as u64, |g| {
            g.check_point(offset)?;
            g.insert(offset, data, 0)
        })
    }

    /// Inserts `data` at `offset` and tags the extent that starts with it
    /// (`tag` 0: no tag). The layer above uses tags to mark offsets it can
    /// parse from (flexdb: pair boundaries); a tag survives every later
    /// shift of its extent, and an extent split off another's middle gets 0.
    pub fn insert_tagged(&self, offset: u64, data: &[u8], tag: u16) -> Result<()> {
        self.s.mutate(data.len() as u64, |g| {
            g.check_point(offset)?;
            g.insert(offset, data, tag)
        })
    }

    /// Removes `len` bytes at `offset`, shifting later bytes down.
    pub fn collapse(&self, offset: u64, len: u64) -> Result<()> {
        self.s.mutate(0, |g| {
            g.check_range(offset, len)?;
            g.collapse(offset, len)
        })
    }

    /// Replaces the `old_len` bytes at `offset` with `data`.
    pub fn update(&self, offset: u64, data: &[u8], old_len: u64) -> Result<()> {
        self.update_tagged(offset, data, old_len, 0)
    }

    /// Replaces the `old_len` bytes at `offset` with `data`, tagging the
    /// extent that starts with the new data (see [`FlexSpace::insert_tagged`]).
    pub fn update_tagged(&self, offset: u64, data: &[u8], old_len: u64, tag: u16) -> Result<()> {
        self.s.mutate(data.len() as u64, |g| {
            g.check_range(offset, old_len)?;
            if old_len > 0 && old_len == data.len() as u64 {
                return g.replace(offset, data, tag);
            }
            if old_len > 0 {
                g.collapse(offset, old_len)?;
            }
            if data.is_empty() {
                return Ok(());
            }
            g.insert(offset, data, tag)
        })
    }

    /// Tags the extent starting at `offset` (splitting an extent there).
    pub fn set_tag(&self, offset: u64, tag: u16) -> Result<()> {
        self.s.mutate(0, |g| {
            g.tree.set_tag(offset, tag).map_err(|_| Error::OutOfRange {
                offset,
                len: 1,
                size: g.tree.len(),
            })?;
            g.log(LogOp::Tag { loff: offset, tag });
            Ok(())
        })
    }

    /// The tag of the extent starting at `offset` (0 inside an extent).
    pub fn get_tag(&self, offset: u64) -> Result<u16> {
        let st = self.s.state.read();
        st.tree.get_tag(offset).map_err(|_| Error::OutOfRange {
            offset,
            len: 1,
            size: st.tree.len(),
        })
    }

    /// The first extent that starts in `from..limit` with a nonzero tag:
    /// its offset and tag.
    pub fn next_tagged(&self, from: u64, limit: u64) -> Result<Option<(u64, u16)>> {
        // A long scan holds the read lock: keep mutations off the lock.
        let _gate = self.s.gate.lock();
        let st = self.s.state.read();
        let size = st.tree.len();
        if from >= size || from >= limit {
            return Ok(None);
        }
        for e in st.tree.extents_from(from)? {
            if e.offset >= limit {
                break;
            }
            if e.offset >= from && e.tag != 0 {
                return Ok(Some((e.offset, e.tag)));
            }
        }
        Ok(None)
    }

    /// Records the layer above's three metadata words; they are committed
    /// with the operations before them and recovered by
    /// [`FlexSpace::user_meta`] from the commit point a crash recovers.
    pub fn set_user_meta(&self, words: [u64; 3]) -> Result<()> {
        self.s.mutate(0, |g| {
            g.user_meta = words;
            g.log(LogOp::Meta { words });
            Ok(())
        })
    }

    /// The metadata words last set (or recovered).
    pub fn user_meta(&self) -> [u64; 3] {
        self.s.state.read().user_meta
    }

    /// Sets the size of the space (cutting or appending a hole).
    pub fn truncate(&self, len: u64) -> Result<()> {
        self.s.mutate(0, |g| {
            let size = g.tree.len();
            if len < size {
                g.collapse(len, size - len)
            } else if len > size {
                g.hole(size, len - size)
            } else {
                Ok(())
            }
        })
    }

    /// The identity of the last durable commit point: (checkpoint version,
    /// commit sequence number in that checkpoint's log). It changes with
    /// every commit and checkpoint; after a clean close and reopen it is
    /// the value it had when `close` returned (close writes a checkpoint
    /// only when something changed). A layer above can tag state derived
    /// from the space with it (read it right after [`FlexSpace::sync`] or
    /// [`FlexSpace::checkpoint`], with no mutation in between).
    pub fn commit_id(&self) -> (u64, u64) {
        self.s.state.read().commit_id
    }

    /// Makes everything done so far durable (a commit; with automatic
    /// maintenance also a checkpoint when the log file is big).
    pub fn sync(&self) -> Result<()> {
        self.s.sync()
    }

    /// Commits, then writes a checkpoint of the tree and restarts the log,
    /// unless nothing changed since the last checkpoint. Mutations wait
    /// while the tree is written; readers do not. Returns once the tree
    /// file's pages the new checkpoint left free are given back (cut and
    /// punched; the checkpoints maintenance runs leave that to a thread).
    pub fn checkpoint(&self) -> Result<()> {
        self.s.checkpoint()
    }

    /// Whether [`FlexSpace::maintain`] has work to do: a commit (the log
    /// buffer reached `commit_log_bytes`), garbage collection (free room is
    /// low, or garbage is above `gc_garbage_high`) or a checkpoint (the log
    /// file is past `checkpoint_log_bytes`).
    pub fn maintenance_due(&self) -> bool {
        self.s.maintenance_due()
    }

    /// Does the maintenance that is due (see
    /// [`FlexSpace::maintenance_due`]), holding the space's write lock only
    /// in short steps; mutations wait during garbage-collection rounds and
    /// the tree write of a checkpoint, readers never do. With
    /// `auto_maintenance` off the layer above calls this (e.g. from its own
    /// committer thread); with it on, a background thread does.
    pub fn maintain(&self) -> Result<()> {
        self.s.maintain()
    }

    /// Makes sure that mutations adding up to `bytes` of data will not need
    /// garbage collection inline nor wait for a segment write: commits,
    /// waits for quarantined segments and collects garbage now as needed,
    /// and waits until the background segment writers have room for the
    /// segments those bytes may seal. Fails with `NoSpace` when the data file
    /// cannot hold `bytes` more. Call it outside any lock of your own.
    pub fn reserve(&self, bytes: u64) -> Result<()> {
        self.s.reserve(bytes)
    }

    /// Rewrites `offset..offset + len` into freshly appended, contiguous
    /// extents: each run of mapped bytes becomes extents of up to
    /// `MAX_EXTENT` bytes (split where a segment ends). Tags inside the
    /// range may be dropped, except the one at its start.
    pub fn defrag(&self, offset: u64, len: u64) -> Result<()> {
        self.s.defrag(offset, len)
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let st = self.s.state.read();
        let used = st.seg.in_use();
        let live = st.seg.live();
        let data_file_bytes = used as u64 * SEGMENT_SIZE;
        let data_allocated_bytes = self.s.files.data.allocated_bytes().unwrap_or(0);
        Stats {
            data_allocated_bytes,
            garbage_bytes: data_allocated_bytes.saturating_sub(live),
            tree_allocated_bytes: self.s.files.tree.allocated_bytes().unwrap_or(0),
            log_allocated_bytes: self.s.files.log.allocated_bytes().unwrap_or(0),
            unpunched_segments: st.seg.unpunched_count(),
            punched_bytes: self.s.counters.punched.load(Ordering::Relaxed),
            len: st.tree.len(),
            data_bytes_written: self.s.files.data.written(),
            tree_bytes_written: self.s.files.tree.written(),
            log_bytes_written: self.s.files.log.written(),
            segments: st.seg.count(),
            free_segments: st.seg.free_count(),
            segment_utilization: if used == 0 {
                0.0
            } else {
                live as f64 / data_file_bytes as f64
            },
            gc_runs: self.s.counters.gc_runs.load(Ordering::Relaxed),
            gc_relocated_bytes: self.s.counters.gc_relocated.load(Ordering::Relaxed),
            commits: self.s.counters.commits.load(Ordering::Relaxed),
            checkpoints: self.s.counters.checkpoints.load(Ordering::Relaxed),
            extents: st.tree.extent_count(),
            uncommitted: st.dirty,
            live_bytes: live,
            data_file_bytes,
            space_amplification: if live == 0 {
                0.0
            } else {
                data_file_bytes as f64 / live as f64
            },
            garbage_ratio: st.seg.garbage_ratio(),
            reclaimable_segments: st.seg.pending_count() + st.seg.quarantined(),
            reader_held_segments: st.seg.held_count(),
            inflight_segments: self.s.writer.inflight(),
            log_file_bytes: self.s.counters.log_end.load(Ordering::Relaxed),
            write_lock_max_us: self.s.state.hold_stats().0 as f64 / 1000.0,
            write_lock_holds_over_100us: self.s.state.hold_stats().1,
            index_bytes: st.tree.node_memory_usage() as u64,
        }
    }

    /// Collects the garbage of every segment holding data that is not full
    /// (least utilized first, in rounds like [`FlexSpace::maintain`]'s, so
    /// mutations and commits go on between them), checkpoints (the log is
    /// cut), waits briefly for readers of emptied segments, and gives every
    /// free segment back to the file system. `progress(done, total)`
    /// reports live bytes relocated out of those to relocate. The file
    /// system's refusal to punch holes is not an error (nothing is given
    /// back).
    pub fn compact(&self, mut progress: impl FnMut(u64, u64)) -> Result<CompactReport> {
        self.s.compact(
            &mut progress,
            crate::maintenance::compact::ReaderWait::Brief,
        )
    }

    /// [`FlexSpace::compact`] without waiting for readers of the emptied
    /// segments: for a layer above whose own snapshot holds them until it
    /// replaces it (which it can only do once this returns), then calls
    /// [`FlexSpace::punch_free_segments`]. Waiting here would always wait
    /// out the whole grace wait (2 s) for that snapshot.
    pub fn compact_without_reader_wait(
        &self,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<CompactReport> {
        self.s
            .compact(&mut progress, crate::maintenance::compact::ReaderWait::None)
    }

    /// One round of [`FlexSpace::compact`] (relocating the least utilized
    /// segments that are not full, up to four segments' worth of live
    /// bytes, then a commit): the live bytes relocated, `None` when no
    /// segment is left to relocate (or no room to relocate into). For a
    /// layer above that compacts in steps between its own work; follow the
    /// last step with [`FlexSpace::checkpoint`] and
    /// [`FlexSpace::punch_free_segments`].
    pub fn compact_step(&self) -> Result<Option<u64>> {
        self.s.compact_step()
    }

    /// Frees the emptied segments whose readers have all finished (see
    /// `grace.rs`) and returns how many. Commits and maintenance do this
    /// on their own; a layer above that keeps long-lived readers (views
    /// registered with [`FlexSpace::snapshot`]) calls it right after it
    /// drops one, so the segments that reader held are reused from the
    /// next write on instead of after the next commit. O(segments waiting);
    /// takes the write lock briefly.
    pub fn release_freed(&self) -> usize {
        // The committer calls this on every pass of its loop: nothing
        // waiting costs a read lock, not a write lock. (Segments held for
        // readers of other processes move with a registry scan: at
        // commits, and here at most every 50 ms.)
        self.s.refresh_reader_pin(false);
        if self.s.state.read().seg.in_grace() == 0 {
            return 0;
        }
        let released = {
            let mut st = self.s.state.write();
            let before = st.seg.quarantined();
            st.release();
            before - st.seg.quarantined()
        };
        if released > 0 {
            self.s.punch_soon();
        }
        released
    }

    /// Gives free segments that may still hold blocks back to the file
    /// system (after readers released what a commit emptied, e.g. once the
    /// layer above dropped an old snapshot); returns the bytes freed.
    pub fn punch_free_segments(&self) -> Result<u64> {
        self.s.check_usable()?;
        self.s.settle_freed(std::time::Duration::ZERO)?;
        // One punch runs at a time: the thread's would stop this one short.
        self.s.join_punch_thread();
        self.s.punch_free_segments(usize::MAX)
    }

    /// Waits until the free segments that commits and released readers
    /// left are given back to the file system (they are punched on a
    /// thread of the space's own, see [`FlexSpace::punch_free_segments`]):
    /// for a layer above that settles the store's disk footprint, e.g. at
    /// the end of a flush.
    pub fn wait_punched(&self) {
        self.s.join_punch_thread();
    }

    /// What a salvaging open (`Options::salvage`) gave up to open the
    /// space, one sentence each naming the file; empty when nothing was.
    pub fn salvaged(&self) -> &[String] {
        &self.s.salvaged
    }

    /// Verifies the space's metadata: every extent maps into the data file,
    /// no two extents overlap physically or cross a segment boundary, and
    /// the per-segment valid-byte counts match the extents. Returns one
    /// sentence per problem found.
    pub fn check(&self) -> Result<Vec<String>> {
        let _gate = self.s.gate.lock();
        let st = self.s.state.read();
        st.problems()
    }

    /// Test aid: checks every invariant of the space's in-memory state (the
    /// index's normal form, the segment accounting against the index, the
    /// free, pending and quarantined segments, the segment buffers and the
    /// log buffer; see `SpaceState::check_invariants`) and panics with a
    /// description of the first one broken. Waits for running maintenance
    /// and walks the whole index: meant for tests, between operations.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        let _m = self.s.maint.lock();
        let _gate = self.s.gate.lock();
        let st = self.s.state.read();
        st.check_invariants();
    }

    /// Drops the space's files from the page cache (for cold-read
    /// benchmarks).
    pub fn drop_caches(&self) -> Result<()> {
        self.s.files.data.drop_cache().map_err(io(DATA))?;
        self.s.files.tree.drop_cache().map_err(io(TREE))?;
        self.s.files.log.drop_cache().map_err(io(LOG))
    }
}

impl SpaceInner {
    /// Where planned reads of the data file go.
    pub(crate) fn source(&self) -> read::DataSource<'_> {
        read::DataSource {
            file: self.files.data.as_ref(),
            map: self.map.as_ref(),
        }
    }

    /// Fails with the error of a failed background write (poisoning the
    /// space) or `Poisoned`.
    pub(crate) fn check_usable(&self) -> Result<()> {
        if self.opts.read_only {
            return Err(Error::ReadOnly);
        }
        if !background::in_background() {
            if let Some(e) = self.bg_error.lock().take() {
                return Err(e);
            }
        }
        if let Some(e) = self.writer.failure() {
            let mut st = self.state.write();
            if !st.poisoned {
                let e = Error::Io {
                    file: DATA.into(),
                    source: e,
                };
                self.poison(&mut st, &e);
                return Err(e);
            }
        }
        if self.state.read().poisoned {
            return Err(self.poisoned_error());
        }
        Ok(())
    }

    /// Poisons the space because of `e`. On the background maintainer, `e`
    /// is also left for the next call to report, before the state lock is
    /// released: a caller that finds the space poisoned finds the cause
    /// too (`poisoned_error`).
    pub(crate) fn poison(&self, st: &mut SpaceState, e: &Error) {
        st.poisoned = true;
        if background::in_background() {
            let mut slot = self.bg_error.lock();
            if slot.is_none() {
                *slot = Some(e.duplicate());
            }
        }
    }

    /// The error for a caller that found the space poisoned: the cause if
    /// no caller was told of it yet, else `Poisoned`.
    pub(crate) fn poisoned_error(&self) -> Error {
        if background::in_background() {
            // The cause waits for a caller, not for the maintainer.
            return Error::Poisoned;
        }
        self.bg_error.lock().take().unwrap_or(Error::Poisoned)
    }

    /// Runs a mutation that may add `new_bytes` of data: first (with no lock
    /// held) waits for the segment writers to keep up and, with automatic
    /// maintenance, makes room; then applies it under the gate and the
    /// write lock; then, with automatic maintenance, wakes the background
    /// maintainer when work is due (and commits inline when the log buffer
    /// has grown far past its threshold: the maintainer is behind).
    pub(crate) fn mutate(
        self: &Arc<Self>,
        new_bytes: u64,
        f: impl FnOnce(&mut SpaceState) -> Result<()>,
    ) -> Result<()> {
        self.check_usable()?;
        self.writer.wait_below(max_inflight(&self.opts));
        if new_bytes > 0 {
            // What the mutation may need, made before taking the lock.
            self.writer.prestart();
            self.pool.fill(1 + (new_bytes / SEGMENT_SIZE) as usize);
        }
        if self.opts.auto_maintenance {
            self.make_room(new_bytes, true)?;
        }
        let mut f = Some(f);
        for attempt in 0.. {
            {
                let _gate = self.gate.lock();
                let mut st = self.state.write();
                if st.poisoned {
                    return Err(self.poisoned_error());
                }
                if new_bytes > 0 {
                    st.check_cap(new_bytes)?;
                    if st.available() < new_bytes {
                        st.release();
                    }
                }
                if new_bytes == 0 || st.available() >= new_bytes {
                    let Some(f) = f.take() else {
                        return Err(Error::Poisoned);
                    };
                    f(&mut st)?;
                    let log = st.log_buf.len();
                    let due = self.opts.auto_maintenance
                        && (log >= self.opts.commit_log_bytes || self.garbage_due(&st));
                    drop(st);
                    drop(_gate);
                    if due {
                        if log >= self.opts.commit_log_bytes.saturating_mul(LOG_BEHIND) {
                            self.commit_auto()?;
                        } else {
                            self.bg.kick(self);
                        }
                    }
                    return Ok(());
                }
            }
            // Not enough room even without the reserve: make it (also when
            // maintenance is the caller's), a few times at most.
            if attempt >= 3 {
                break;
            }
            self.make_room(new_bytes, false)?;
        }
        Err(Error::NoSpace(format!(
            "garbage collection could not make room for {new_bytes} bytes"
        )))
    }
}

impl Maintained for SpaceInner {
    fn run_maintenance(&self) {
        if let Err(e) = self.maintain() {
            // An error that poisoned the space was left when it did.
            if !matches!(e, Error::Poisoned) && !self.state.read().poisoned {
                let mut slot = self.bg_error.lock();
                if slot.is_none() {
                    *slot = Some(e);
                }
            }
        }
    }
}

impl Drop for FlexSpace {
    fn drop(&mut self) {
        let skip = {
            let st = self.s.state.read();
            st.closed || st.poisoned || self.s.opts.read_only
        };
        if !skip {
            // Errors cannot be reported from drop; the last commit is safe.
            let _ = self.s.close_inner();
        }
        // No thread of this space may touch its files once it is gone (the
        // directory may be reopened right away): the maintainer exits, and
        // sealed segments still being written finish first.
        self.s.bg.stop();
        self.s.join_punch_thread();
        self.s.writer.wait_idle();
    }
}
