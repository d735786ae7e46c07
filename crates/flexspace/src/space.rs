//! FlexSpace: the persistent flexible address space (§4).
//!
//! Write path: data goes to the open segment's in-memory buffer (log-
//! structured allocation: every write lands at the end of the open segment);
//! the extent index (FlexTree) is updated in memory and the operation is
//! appended to the log buffer. A *commit* writes the buffered data and syncs
//! the data file, then appends the log entries with a commit entry and syncs
//! the log (the barriers of Figure 9). A *checkpoint* commits, writes the
//! tree copy-on-write, then restarts the log under the tree's new version.
//!
//! Invariants:
//! - Commits happen only between operations, so every committed state is
//!   the result of whole operations; recovery (load checkpoint, replay the
//!   committed batches of its version) yields exactly one committed state.
//! - `sync()` is a commit: its state survives any later crash.
//! - Space freed by collapses, overwrites or relocations is reused only
//!   after the commit that recorded the change (see `segments`).
//! - Garbage collection runs at the start of an operation, never inside one,
//!   and commits before the operation changes anything.
//! - After an I/O error during a commit the space is poisoned: mutations
//!   fail with `Poisoned`, and reopening recovers the last commit.

use std::path::Path;
use std::sync::Arc;

use flextree::{FlexTree, DIRECT_ALIGN};
use parking_lot::RwLock;

use crate::aligned::AlignedBuf;
use crate::counting::CountingFile;
use crate::error::{io, Error, Result};
use crate::log::{self, LogOp};
use crate::options::{Options, MAX_EXTENT, SEGMENT_SIZE};
use crate::segments::{for_each_part, Segments};
use crate::storage::{FileStorage, Storage, StorageFile};

const DATA: &str = "data";
const TREE: &str = "tree";
const LOG: &str = "log";
/// Checkpoint metadata: format magic, segment size, user metadata words.
const META_MAGIC: &[u8; 8] = b"FLEXSPC2";
/// Room (in segments) kept free for garbage collection's relocations.
const RESERVE_SEGMENTS: usize = 1;

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
    /// Tree checkpoints.
    pub checkpoints: u64,
    /// Extents in the index.
    pub extents: u64,
    /// Whether there are changes not yet committed.
    pub uncommitted: bool,
}

struct Files {
    data: Arc<CountingFile>,
    tree: Arc<CountingFile>,
    log: Arc<CountingFile>,
}

struct Inner {
    tree: FlexTree,
    files: Files,
    opts: Options,
    seg: Segments,
    /// Contents of the open segment from its start (aligned for O_DIRECT).
    buf: AlignedBuf,
    /// Bytes of the open segment in use / already written to the file.
    fill: u64,
    flushed: u64,
    log_buf: Vec<u8>,
    log_end: u64,
    commit_seq: u64,
    /// Words of the layer above, committed with the space.
    user_meta: [u64; 3],
    dirty: bool,
    poisoned: bool,
    closed: bool,
    stats: Stats,
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
    inner: RwLock<Inner>,
    _storage: Arc<dyn Storage>,
}

fn meta(user: &[u64; 3]) -> Vec<u8> {
    let mut m = META_MAGIC.to_vec();
    m.extend_from_slice(&SEGMENT_SIZE.to_le_bytes());
    for w in user {
        m.extend_from_slice(&w.to_le_bytes());
    }
    m
}

/// The user metadata words of a checkpoint's metadata, `None` when the
/// metadata is not a flexspace's.
fn parse_meta(m: &[u8]) -> Option<[u64; 3]> {
    if m.len() != 40 || &m[..8] != META_MAGIC || m[8..16] != SEGMENT_SIZE.to_le_bytes() {
        return None;
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&m[16 + 8 * i..24 + 8 * i]);
        u64::from_le_bytes(b)
    };
    Some([word(0), word(1), word(2)])
}

fn corrupt(file: &str, detail: impl Into<String>) -> Error {
    Error::Corrupt {
        file: file.to_string(),
        detail: detail.into(),
    }
}

fn open_counted(storage: &dyn Storage, name: &str, create: bool) -> Result<Arc<CountingFile>> {
    let f = storage.open_file(name, create).map_err(io(name))?;
    Ok(Arc::new(CountingFile::new(f)))
}

impl FlexSpace {
    /// Opens the space in directory `dir` (real files, locked).
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<FlexSpace> {
        let dir = dir.as_ref();
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

    /// Opens the space on any storage backend.
    pub fn open_with_storage(storage: Arc<dyn Storage>, options: Options) -> Result<FlexSpace> {
        let exists = |n| storage.exists(n).map_err(io(n));
        let (mut has_tree, has_data, has_log) = (exists(TREE)?, exists(DATA)?, exists(LOG)?);
        if has_tree {
            // The tree's first checkpoint is the last step of creation: an
            // empty tree file means creation never completed.
            // A crash during that checkpoint leaves no valid header while
            // the data file is still empty: nothing was ever stored.
            let tree = storage.open_file(TREE, false).map_err(io(TREE))?;
            let data_len = match has_data {
                true => storage
                    .open_file(DATA, false)
                    .and_then(|d| d.len())
                    .map_err(io(DATA))?,
                false => 0,
            };
            has_tree = tree.len().map_err(io(TREE))? > 0
                && (data_len > 0 || FlexTree::load(tree.as_ref()).is_ok());
        }
        let inner = if !has_tree {
            if !options.create {
                return Err(Error::NotAFlexSpace(Default::default()));
            }
            Inner::create(storage.as_ref(), options)?
        } else if has_data && has_log {
            Inner::recover(storage.as_ref(), options)?
        } else {
            return Err(Error::NotAFlexSpace(Default::default()));
        };
        Ok(FlexSpace {
            inner: RwLock::new(inner),
            _storage: storage,
        })
    }

    /// Checkpoints and closes the space.
    pub fn close(self) -> Result<()> {
        let mut g = self.inner.write();
        g.close()
    }

    /// Size of the space in bytes.
    pub fn len(&self) -> u64 {
        self.inner.read().tree.len()
    }

    /// Whether the space is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns the bytes read
    /// (fewer at the end of the space; holes read as zeros).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let g = self.inner.read();
        let size = g.tree.len();
        if offset > size {
            return Err(Error::OutOfRange {
                offset,
                len: buf.len() as u64,
                size,
            });
        }
        let n = (buf.len() as u64).min(size - offset) as usize;
        if n > 0 {
            g.read_into(offset, &mut buf[..n])?;
        }
        Ok(n)
    }

    /// Overwrites `data.len()` bytes at `offset` (extending the space; a
    /// gap past the end becomes a hole).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.mutate(data.len() as u64, |g| g.write(offset, data))
    }

    /// Inserts `data` at `offset`, shifting later bytes up.
    pub fn insert(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.mutate(data.len() as u64, |g| {
            g.check_point(offset)?;
            g.insert(offset, data, 0)
        })
    }

    /// Removes `len` bytes at `offset`, shifting later bytes down.
    pub fn collapse(&self, offset: u64, len: u64) -> Result<()> {
        self.mutate(0, |g| {
            g.check_range(offset, len)?;
            g.collapse(offset, len)
        })
    }

    /// Inserts `data` at `offset` and tags the extent that starts with it
    /// (`tag` 0: no tag). The layer above uses tags to mark offsets it can
    /// parse from (flexdb: pair boundaries); a tag survives every later
    /// shift of its extent, and an extent split off another's middle gets 0.
    pub fn insert_tagged(&self, offset: u64, data: &[u8], tag: u16) -> Result<()> {
        self.mutate(data.len() as u64, |g| {
            g.check_point(offset)?;
            g.insert(offset, data, tag)
        })
    }

    /// Replaces the `old_len` bytes at `offset` with `data`.
    pub fn update(&self, offset: u64, data: &[u8], old_len: u64) -> Result<()> {
        self.update_tagged(offset, data, old_len, 0)
    }

    /// Replaces the `old_len` bytes at `offset` with `data`, tagging the
    /// extent that starts with the new data (see [`FlexSpace::insert_tagged`]).
    pub fn update_tagged(&self, offset: u64, data: &[u8], old_len: u64, tag: u16) -> Result<()> {
        self.mutate(data.len() as u64, |g| {
            g.check_range(offset, old_len)?;
            if old_len > 0 {
                g.collapse(offset, old_len)?;
            }
            if data.is_empty() {
                return Ok(());
            }
            g.insert(offset, data, tag)
        })
    }

    /// The first extent that starts in `from..limit` with a nonzero tag:
    /// its offset and tag.
    pub fn next_tagged(&self, from: u64, limit: u64) -> Result<Option<(u64, u16)>> {
        let g = self.inner.read();
        let size = g.tree.len();
        if from >= size || from >= limit {
            return Ok(None);
        }
        for e in g.tree.extents_from(from)? {
            if e.offset >= limit {
                break;
            }
            if e.offset >= from && e.tag != 0 {
                return Ok(Some((e.offset, e.tag)));
            }
        }
        Ok(None)
    }

    /// Like [`FlexSpace::read`], also returning how many extents the bytes
    /// read came from (the layer above uses it to spot fragmentation).
    pub fn read_counted(&self, offset: u64, buf: &mut [u8]) -> Result<(usize, usize)> {
        let g = self.inner.read();
        let size = g.tree.len();
        if offset > size {
            return Err(Error::OutOfRange {
                offset,
                len: buf.len() as u64,
                size,
            });
        }
        let n = (buf.len() as u64).min(size - offset) as usize;
        if n == 0 {
            return Ok((0, 0));
        }
        let extents = g.read_into(offset, &mut buf[..n])?;
        Ok((n, extents))
    }

    /// Records the layer above's three metadata words; they are committed
    /// with the operations before them and recovered by
    /// [`FlexSpace::user_meta`] from the commit point a crash recovers.
    pub fn set_user_meta(&self, words: [u64; 3]) -> Result<()> {
        self.mutate(0, |g| {
            g.user_meta = words;
            g.log(LogOp::Meta { words });
            Ok(())
        })
    }

    /// The metadata words last set (or recovered).
    pub fn user_meta(&self) -> [u64; 3] {
        self.inner.read().user_meta
    }

    /// Verifies the space's metadata: every extent maps into the data file,
    /// no two extents overlap physically, and the per-segment valid-byte
    /// counts match the extents. Returns one sentence per problem found.
    pub fn check(&self) -> Result<Vec<String>> {
        let g = self.inner.read();
        let mut problems = Vec::new();
        let nseg = g.seg.count() as u64;
        let mut valid = vec![0u64; g.seg.count()];
        let mut ranges = Vec::new();
        let mut covered = 0u64;
        for e in g.tree.extents_from(0)? {
            if e.offset != covered {
                problems.push(format!(
                    "tree: extent at {} follows one that ended at {covered}",
                    e.offset
                ));
            }
            covered = e.offset + e.len;
            let Some(a) = e.addr else { continue };
            if a + e.len > nseg * SEGMENT_SIZE {
                problems.push(format!(
                    "tree: extent at {} maps past the data file's {nseg} segments",
                    e.offset
                ));
                continue;
            }
            for_each_part(a, e.len, |s, n| valid[s as usize] += n);
            ranges.push((a, e.len, e.offset));
        }
        if covered != g.tree.len() {
            problems.push(format!(
                "tree: extents cover {covered} bytes of a {}-byte space",
                g.tree.len()
            ));
        }
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            if w[0].0 + w[0].1 > w[1].0 {
                problems.push(format!(
                    "tree: extents at {} and {} share physical bytes",
                    w[0].2, w[1].2
                ));
            }
        }
        for (s, (&have, &want)) in g.seg.valid.iter().zip(&valid).enumerate() {
            if have != want {
                problems.push(format!(
                    "segments: segment {s} counts {have} valid bytes, its extents hold {want}"
                ));
            }
        }
        Ok(problems)
    }

    /// Reads from the start of the extent containing `offset`: returns the
    /// extent's start and the bytes read (at most the extent's length).
    pub fn read_extent(&self, offset: u64, buf: &mut [u8]) -> Result<(u64, usize)> {
        let g = self.inner.read();
        let e = g.tree.extent_at(offset).map_err(|_| Error::OutOfRange {
            offset,
            len: 1,
            size: g.tree.len(),
        })?;
        let n = (buf.len() as u64).min(e.len) as usize;
        if n > 0 {
            g.read_into(e.offset, &mut buf[..n])?;
        }
        Ok((e.offset, n))
    }

    /// Tags the extent starting at `offset` (splitting an extent there).
    pub fn set_tag(&self, offset: u64, tag: u16) -> Result<()> {
        self.mutate(0, |g| {
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
        let g = self.inner.read();
        g.tree.get_tag(offset).map_err(|_| Error::OutOfRange {
            offset,
            len: 1,
            size: g.tree.len(),
        })
    }

    /// Rewrites `offset..offset + len` into fresh, contiguous segments.
    pub fn defrag(&self, offset: u64, len: u64) -> Result<()> {
        self.mutate(len, |g| {
            g.check_range(offset, len)?;
            g.relocate(offset, len)
        })
    }

    /// Sets the size of the space (cutting or appending a hole).
    pub fn truncate(&self, len: u64) -> Result<()> {
        self.mutate(0, |g| {
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

    /// Makes everything done so far durable.
    pub fn sync(&self) -> Result<()> {
        let mut g = self.inner.write();
        g.check_usable()?;
        g.commit()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.inner.read().stats()
    }

    /// Drops the space's files from the page cache (for cold-read
    /// benchmarks).
    pub fn drop_caches(&self) -> Result<()> {
        let g = self.inner.read();
        g.files.data.drop_cache().map_err(io(DATA))?;
        g.files.tree.drop_cache().map_err(io(TREE))?;
        g.files.log.drop_cache().map_err(io(LOG))
    }

    /// Runs a mutation that may add `new_bytes` of data: makes room first
    /// (commit, GC), then applies it, then commits if the log buffer is big.
    fn mutate(&self, new_bytes: u64, f: impl FnOnce(&mut Inner) -> Result<()>) -> Result<()> {
        let mut g = self.inner.write();
        g.check_usable()?;
        g.ensure_space(new_bytes)?;
        match f(&mut g) {
            Ok(()) => {}
            Err(e @ (Error::Io { .. } | Error::Poisoned)) => {
                g.poisoned = true;
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        if g.log_buf.len() >= g.opts.commit_log_bytes {
            g.commit()?;
        }
        Ok(())
    }
}

impl Drop for FlexSpace {
    fn drop(&mut self) {
        let mut g = self.inner.write();
        if !g.closed && !g.poisoned {
            // Errors cannot be reported from drop; the last commit is safe.
            let _ = g.close();
        }
    }
}

impl Inner {
    fn create(storage: &dyn Storage, opts: Options) -> Result<Inner> {
        let files = Files {
            data: open_counted(storage, DATA, true)?,
            tree: open_counted(storage, TREE, true)?,
            log: open_counted(storage, LOG, true)?,
        };
        // The log first, the tree's first checkpoint last: a space exists
        // once its tree file holds a checkpoint.
        files.tree.set_len(0).map_err(io(TREE))?;
        files.log.set_len(0).map_err(io(LOG))?;
        files
            .log
            .write_all_at(0, &log::header(1))
            .map_err(io(LOG))?;
        files.log.sync().map_err(io(LOG))?;
        let mut tree = FlexTree::new();
        tree.set_merge_limit(MAX_EXTENT);
        tree.checkpoint(files.tree.as_ref(), &meta(&[0; 3]))?;
        let nseg = (opts.max_data_size / SEGMENT_SIZE).max(8) as usize;
        Ok(Self::assemble(tree, files, opts, vec![0; nseg], 0))
    }

    fn assemble(tree: FlexTree, files: Files, opts: Options, valid: Vec<u64>, seq: u64) -> Inner {
        Inner {
            tree,
            files,
            opts,
            seg: Segments::new(valid),
            buf: AlignedBuf::zeroed(SEGMENT_SIZE as usize),
            fill: 0,
            flushed: 0,
            log_buf: Vec::new(),
            log_end: log::HEADER as u64,
            commit_seq: seq,
            user_meta: [0; 3],
            dirty: false,
            poisoned: false,
            closed: false,
            stats: Stats::default(),
        }
    }

    /// Recovery: newest checkpoint, then the committed log batches of its
    /// version, then segment utilization from the extents.
    fn recover(storage: &dyn Storage, opts: Options) -> Result<Inner> {
        let files = Files {
            data: open_counted(storage, DATA, false)?,
            tree: open_counted(storage, TREE, false)?,
            log: open_counted(storage, LOG, false)?,
        };
        let (mut tree, cp) = FlexTree::load(files.tree.as_ref()).map_err(|e| match e {
            flextree::Error::Io(e) => Error::Io {
                file: TREE.into(),
                source: e,
            },
            e => corrupt(TREE, e.to_string()),
        })?;
        let Some(mut user_meta) = parse_meta(&cp.meta) else {
            return Err(Error::NotAFlexSpace(Default::default()));
        };
        tree.set_merge_limit(MAX_EXTENT);
        let log_len = files.log.len().map_err(io(LOG))?;
        let mut bytes = vec![0u8; log_len as usize];
        files.log.read_exact_at(0, &mut bytes).map_err(io(LOG))?;
        let mut log_end = log::HEADER as u64;
        let mut seq = 0;
        match log::parse_header(&bytes) {
            Some(v) if v == cp.version => {
                let r = log::replay(&bytes[log::HEADER..]);
                for op in r.batches.iter().flatten() {
                    if let LogOp::Meta { words } = op {
                        user_meta = *words;
                        continue;
                    }
                    apply(&mut tree, op)
                        .map_err(|e| corrupt(LOG, format!("replaying {op:?}: {e}")))?;
                }
                log_end += r.valid_len as u64;
                seq = r.last_seq;
            }
            // A checkpoint finished but the log restart did not: the tree
            // holds everything the log did.
            Some(v) if v < cp.version => {}
            Some(v) => {
                return Err(corrupt(
                    LOG,
                    format!("log version {v} is newer than tree version {}", cp.version),
                ))
            }
            // A torn header of an emptied log (crash while restarting it).
            None if log_len <= log::HEADER as u64 => {}
            None => return Err(corrupt(LOG, "invalid log header")),
        }
        if log::parse_header(&bytes).is_none_or(|v| v != cp.version) {
            files.log.set_len(0).map_err(io(LOG))?;
            files
                .log
                .write_all_at(0, &log::header(cp.version))
                .map_err(io(LOG))?;
            files.log.sync().map_err(io(LOG))?;
        } else if log_end < log_len {
            files.log.set_len(log_end).map_err(io(LOG))?;
            files.log.sync().map_err(io(LOG))?;
        }
        let mut valid = vec![0u64; (opts.max_data_size / SEGMENT_SIZE).max(8) as usize];
        for e in tree.extents_from(0)? {
            if let Some(a) = e.addr {
                for_each_part(a, e.len, |s, n| {
                    if valid.len() <= s as usize {
                        valid.resize(s as usize + 1, 0);
                    }
                    valid[s as usize] += n;
                });
            }
        }
        for (s, &v) in valid.iter().enumerate() {
            if v > SEGMENT_SIZE {
                return Err(corrupt(TREE, format!("segment {s} holds {v} valid bytes")));
            }
        }
        let mut inner = Self::assemble(tree, files, opts, valid, seq);
        inner.log_end = log_end;
        inner.user_meta = user_meta;
        Ok(inner)
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    fn check_point(&self, offset: u64) -> Result<()> {
        if offset <= self.tree.len() {
            Ok(())
        } else {
            Err(Error::OutOfRange {
                offset,
                len: 0,
                size: self.tree.len(),
            })
        }
    }

    fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.tree.len() => Ok(()),
            _ => Err(Error::OutOfRange {
                offset,
                len,
                size: self.tree.len(),
            }),
        }
    }

    fn log(&mut self, op: LogOp) {
        log::encode(&mut self.log_buf, &op);
        self.dirty = true;
    }

    /// Live data is capped at 30/32 of the capacity.
    fn capacity_cap(&self) -> u64 {
        self.seg.count() as u64 * SEGMENT_SIZE / 32 * 30
    }

    /// Bytes that can be allocated without reusing anything: the rest of
    /// the open segment and the free segments.
    fn available(&self) -> u64 {
        self.seg.free_count() as u64 * SEGMENT_SIZE
            + self.seg.open.map_or(0, |_| SEGMENT_SIZE - self.fill)
    }

    /// Makes room for `new_bytes` of data before an operation changes
    /// anything: a commit releases pending segments, then GC relocates, so
    /// that a segment's worth of room stays for the next relocation.
    fn ensure_space(&mut self, new_bytes: u64) -> Result<()> {
        if new_bytes == 0 {
            return Ok(());
        }
        if self.seg.total_valid() + new_bytes > self.capacity_cap() {
            return Err(Error::NoSpace(format!(
                "{new_bytes} more bytes would exceed 30/32 of the {}-byte data file",
                self.seg.count() as u64 * SEGMENT_SIZE
            )));
        }
        let want = new_bytes + RESERVE_SEGMENTS as u64 * SEGMENT_SIZE;
        if self.available() >= want {
            return Ok(());
        }
        if self.seg.pending_count() > 0 {
            self.commit()?;
        }
        while self.available() < want {
            let before = self.available();
            self.gc_round()?;
            if self.available() <= before {
                break;
            }
        }
        if self.available() < new_bytes {
            return Err(Error::NoSpace(format!(
                "garbage collection could not make room for {new_bytes} bytes"
            )));
        }
        Ok(())
    }

    /// One garbage-collection round: relocates the valid extents of the
    /// least utilized segments (at most 30/32 full, as many as the free
    /// room can take), then commits so they can be reused.
    fn gc_round(&mut self) -> Result<()> {
        let limit = SEGMENT_SIZE / 32 * 30;
        let room = self.available();
        let mut victims = Vec::new();
        let mut moving = 0u64;
        for s in self.seg.gc_candidates() {
            let v = self.seg.valid[s as usize];
            if v > limit || moving + v > room || victims.len() >= 16 {
                break;
            }
            victims.push(s);
            moving += v;
        }
        if victims.is_empty() {
            return Ok(());
        }
        self.stats.gc_runs += 1;
        // One scan of the index finds every piece in a victim segment.
        let mut pieces = Vec::new();
        for e in self.tree.extents_from(0)? {
            let Some(a) = e.addr else { continue };
            for &v in &victims {
                let (lo, hi) = (u64::from(v) * SEGMENT_SIZE, u64::from(v + 1) * SEGMENT_SIZE);
                let (from, to) = (a.max(lo), (a + e.len).min(hi));
                if from < to {
                    pieces.push((e.offset + (from - a), to - from));
                }
            }
        }
        for (loff, len) in pieces {
            self.relocate(loff, len)?;
            self.stats.gc_relocated_bytes += len;
        }
        self.commit()
    }

    /// Copies `loff..loff + len` to freshly allocated space and remaps it.
    fn relocate(&mut self, loff: u64, len: u64) -> Result<()> {
        let mut data = vec![0u8; len as usize];
        self.read_into(loff, &mut data)?;
        let mut done = 0u64;
        while done < len {
            let ext = self.tree.extent_at(loff + done)?;
            let run = (ext.offset + ext.len - (loff + done)).min(len - done);
            if ext.addr.is_none() {
                done += run;
                continue;
            }
            let (addr, got) = self.alloc(run.min(MAX_EXTENT))?;
            for p in self.tree.query(loff + done, got)? {
                if let Some(a) = p.addr {
                    self.seg.remove(a, p.len);
                }
            }
            self.put_data(addr, &data[done as usize..(done + got) as usize]);
            self.tree.remap(loff + done, got, addr)?;
            self.seg.add(addr, got);
            self.log(LogOp::Remap {
                loff: loff + done,
                len: got,
                addr,
            });
            done += got;
        }
        Ok(())
    }

    /// Allocates up to `max` contiguous bytes at the end of the open
    /// segment (opening a free one when it is full).
    fn alloc(&mut self, max: u64) -> Result<(u64, u64)> {
        if self.seg.open.is_none() || self.fill >= SEGMENT_SIZE {
            self.close_segment()?;
            let s = self
                .seg
                .take_free()
                .ok_or_else(|| Error::NoSpace("no free segment".into()))?;
            self.seg.open = Some(s);
            self.fill = 0;
            self.flushed = 0;
        }
        let s = self.seg.open.unwrap_or_default();
        let got = max.min(SEGMENT_SIZE - self.fill);
        let addr = u64::from(s) * SEGMENT_SIZE + self.fill;
        self.fill += got;
        Ok((addr, got))
    }

    /// Copies `data` into the open segment's buffer at `addr`.
    fn put_data(&mut self, addr: u64, data: &[u8]) {
        let at = (addr % SEGMENT_SIZE) as usize;
        self.buf.as_bytes_mut()[at..at + data.len()].copy_from_slice(data);
    }

    /// Writes the unwritten part of the open segment's buffer with aligned
    /// direct I/O: from the block holding the first unwritten byte (its
    /// written bytes are rewritten unchanged) to the end of the block
    /// holding the last (zero padded; padding is never referenced).
    fn flush_segment(&mut self) -> Result<()> {
        if let Some(s) = self.seg.open {
            if self.flushed < self.fill {
                let a = DIRECT_ALIGN as u64;
                let start = (self.flushed / a * a) as usize;
                let end = (self.fill.div_ceil(a) * a) as usize;
                let fill = self.fill as usize;
                let bytes = self.buf.as_bytes_mut();
                bytes[fill..end].fill(0);
                let at = u64::from(s) * SEGMENT_SIZE + start as u64;
                self.files
                    .data
                    .write_direct_at(at, &bytes[start..end])
                    .map_err(io(DATA))?;
                self.flushed = self.fill;
            }
        }
        Ok(())
    }

    fn close_segment(&mut self) -> Result<()> {
        self.flush_segment()?;
        self.seg.close_open();
        Ok(())
    }

    /// Inserts `data` at `offset`; the extent holding its first byte gets
    /// `tag` (continuation extents of a large insert get 0).
    fn insert(&mut self, offset: u64, data: &[u8], tag: u16) -> Result<()> {
        let mut done = 0usize;
        while done < data.len() {
            let (addr, got) = self.alloc(((data.len() - done) as u64).min(MAX_EXTENT))?;
            let chunk = &data[done..done + got as usize];
            self.put_data(addr, chunk);
            let loff = offset + done as u64;
            let tag = if done == 0 { tag } else { 0 };
            self.tree.insert(loff, got, addr)?;
            if tag != 0 {
                self.tree.set_tag(loff, tag)?;
            }
            self.seg.add(addr, got);
            self.log(LogOp::Insert {
                loff,
                len: got,
                addr,
                tag,
            });
            done += got as usize;
        }
        Ok(())
    }

    fn hole(&mut self, offset: u64, len: u64) -> Result<()> {
        self.tree.insert_hole(offset, len)?;
        self.log(LogOp::Hole { loff: offset, len });
        Ok(())
    }

    fn collapse(&mut self, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        for p in self.tree.query(offset, len)? {
            if let Some(a) = p.addr {
                self.seg.remove(a, p.len);
            }
        }
        self.tree.collapse(offset, len)?;
        self.log(LogOp::Collapse { loff: offset, len });
        Ok(())
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let size = self.tree.len();
        if offset > size {
            self.hole(size, offset - size)?;
        }
        let overlap = (data.len() as u64).min(self.tree.len() - offset);
        self.collapse(offset, overlap)?;
        self.insert(offset, data, 0)
    }

    /// Reads `buf.len()` bytes at `offset` (inside the space); returns the
    /// number of extents (pieces) they came from.
    fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let mut at = 0usize;
        let pieces = self.tree.query(offset, buf.len() as u64)?;
        for p in &pieces {
            let out = &mut buf[at..at + p.len as usize];
            match p.addr {
                None => out.fill(0),
                Some(a) if self.seg.open == Some((a / SEGMENT_SIZE) as u32) => {
                    let s = (a % SEGMENT_SIZE) as usize;
                    out.copy_from_slice(&self.buf.as_bytes()[s..s + out.len()]);
                }
                Some(a) => self.files.data.read_exact_at(a, out).map_err(io(DATA))?,
            }
            at += p.len as usize;
        }
        Ok(pieces.len())
    }

    /// Commit: data to the data file and sync, then the log batch and its
    /// commit entry and sync (Figure 9). Pending segments become free.
    fn commit(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let result = self.commit_inner();
        if result.is_err() {
            self.poisoned = true;
        }
        result?;
        if self.log_end - log::HEADER as u64 > self.opts.checkpoint_log_bytes {
            self.checkpoint()?;
        }
        Ok(())
    }

    fn commit_inner(&mut self) -> Result<()> {
        self.flush_segment()?;
        self.files.data.sync().map_err(io(DATA))?;
        self.commit_seq += 1;
        let body = std::mem::take(&mut self.log_buf);
        let mut out = body.clone();
        log::encode_commit(&mut out, self.commit_seq, &body);
        self.files
            .log
            .write_all_at(self.log_end, &out)
            .map_err(io(LOG))?;
        self.files.log.sync().map_err(io(LOG))?;
        self.log_end += out.len() as u64;
        self.seg.release_pending();
        self.dirty = false;
        self.stats.commits += 1;
        Ok(())
    }

    /// Commit, copy-on-write checkpoint of the tree, then restart the log
    /// under the new version: truncate (sync) before writing the header, so
    /// old entries are never read under the new version.
    fn checkpoint(&mut self) -> Result<()> {
        self.commit()?;
        let r: Result<()> = (|| {
            let version = self
                .tree
                .checkpoint(self.files.tree.as_ref(), &meta(&self.user_meta))?;
            self.files.log.set_len(0).map_err(io(LOG))?;
            self.files.log.sync().map_err(io(LOG))?;
            self.files
                .log
                .write_all_at(0, &log::header(version))
                .map_err(io(LOG))?;
            self.files.log.sync().map_err(io(LOG))?;
            Ok(())
        })();
        if r.is_err() {
            self.poisoned = true;
        }
        r?;
        self.log_end = log::HEADER as u64;
        self.stats.checkpoints += 1;
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.check_usable()?;
        self.dirty = true;
        self.checkpoint()?;
        self.closed = true;
        Ok(())
    }

    fn stats(&self) -> Stats {
        let used = self.seg.count() - self.seg.free_count();
        Stats {
            len: self.tree.len(),
            data_bytes_written: self.files.data.written(),
            tree_bytes_written: self.files.tree.written(),
            log_bytes_written: self.files.log.written(),
            segments: self.seg.count(),
            free_segments: self.seg.free_count(),
            segment_utilization: if used == 0 {
                0.0
            } else {
                self.seg.total_valid() as f64 / (used as u64 * SEGMENT_SIZE) as f64
            },
            gc_runs: self.stats.gc_runs,
            gc_relocated_bytes: self.stats.gc_relocated_bytes,
            commits: self.stats.commits,
            checkpoints: self.stats.checkpoints,
            extents: self.tree.extent_count(),
            uncommitted: self.dirty,
        }
    }
}

/// Applies one replayed log entry to the tree.
fn apply(tree: &mut FlexTree, op: &LogOp) -> flextree::Result<()> {
    match *op {
        LogOp::Insert {
            loff,
            len,
            addr,
            tag,
        } => {
            tree.insert(loff, len, addr)?;
            if tag != 0 {
                tree.set_tag(loff, tag)?;
            }
            Ok(())
        }
        LogOp::Hole { loff, len } => tree.insert_hole(loff, len),
        LogOp::Collapse { loff, len } => tree.collapse(loff, len),
        LogOp::Remap { loff, len, addr } => tree.remap(loff, len, addr),
        LogOp::Tag { loff, tag } => tree.set_tag(loff, tag),
        LogOp::Meta { .. } => Ok(()),
    }
}
