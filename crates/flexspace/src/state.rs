//! The in-memory state of a space (behind its reader-writer lock) and the
//! primitive mutations on it.
//!
//! Invariants:
//! - Data is log-structured: every byte appended goes to the end of the
//!   open segment's buffer ([`SpaceState::append`]); an allocation never crosses
//!   a segment boundary, and the tree never merges extents across one
//!   (merge boundary = `SEGMENT_SIZE`), so every extent lies in one segment.
//! - `resident[s]` is the buffer of segment `s` while reads must be served
//!   from memory: the open segment, and sealed segments until their
//!   background write finished ([`SpaceState::reap`]).
//! - Every change to the tree is also appended to `log_buf` (and sets
//!   `dirty`), in the order applied; a mutation runs entirely under the
//!   write lock, so a commit that takes `log_buf` takes whole mutations.
//! - A mutation checks its arguments and the room it needs before it
//!   changes anything, so an error leaves the state unchanged (I/O errors
//!   cannot happen here: the only I/O is in commits and background writes).

use std::sync::Arc;

use flextree::{FlexTree, Piece};

use crate::error::{Error, Result};
use crate::grace::GraceReaders;
use crate::log::LogBuf;
use crate::log::{self, LogOp};
use crate::options::{MAX_EXTENT, SEGMENT_SIZE};
use crate::segments::segbuf::{Filler, SegBuf, SegBufPool};
use crate::segments::writers::SegmentWriters;
use crate::segments::{for_each_part, SegmentTable};

/// Everything the space's lock protects.
pub struct SpaceState {
    pub tree: FlexTree,
    pub seg: SegmentTable,
    filler: Option<Filler>,
    resident: Vec<Option<Arc<SegBuf>>>,
    pool: Arc<SegBufPool>,
    pub log_buf: LogBuf,
    /// Operations logged since the last commit took `log_buf`.
    pub dirty: bool,
    /// Words of the layer above, committed with the space.
    pub user_meta: [u64; 3],
    /// Segments sealed so far (sequence numbers for the writers).
    pub seal_seq: u64,
    pub poisoned: bool,
    pub closed: bool,
    /// (checkpoint version, commit sequence) of the last durable commit.
    pub commit_id: (u64, u64),
    /// Garbage collection started by the garbage threshold and not yet
    /// below the low mark.
    pub gc_active: bool,
    /// Live bytes when garbage collection last found nothing it could
    /// relocate to make room (it is not tried again before they change).
    pub gc_stuck_at: Option<u64>,
    /// The pieces a [`SpaceState::replace`] unmapped (kept for its allocation).
    replaced: Vec<Piece>,
    writer: Arc<SegmentWriters>,
    readers: Arc<GraceReaders>,
}

impl SpaceState {
    /// The state over `tree` with the given per-segment valid bytes.
    pub fn new(
        tree: FlexTree,
        valid: Vec<u64>,
        writer: Arc<SegmentWriters>,
        readers: Arc<GraceReaders>,
        pool: Arc<SegBufPool>,
    ) -> Self {
        let n = valid.len();
        SpaceState {
            tree,
            seg: SegmentTable::new(valid),
            filler: None,
            resident: vec![None; n],
            pool,
            log_buf: LogBuf::default(),
            dirty: false,
            user_meta: [0; 3],
            seal_seq: 0,
            poisoned: false,
            closed: false,
            commit_id: (0, 0),
            gc_active: false,
            gc_stuck_at: None,
            replaced: Vec::new(),
            writer,
            readers,
        }
    }

    /// The buffer reads of segment `s` are served from, if any.
    pub fn resident(&self, s: u64) -> Option<&Arc<SegBuf>> {
        self.resident.get(s as usize).and_then(Option::as_ref)
    }

    /// The buffers of every segment, by segment (`None`: read the file).
    pub fn resident_table(&self) -> &[Option<Arc<SegBuf>>] {
        &self.resident
    }

    /// The open segment, its buffer and the bytes appended to it.
    pub fn open_buffer(&self) -> Option<(u32, Arc<SegBuf>, usize)> {
        let s = self.seg.open()?;
        let f = self.filler.as_ref()?;
        Some((s, f.shared().clone(), f.filled()))
    }

    pub fn check_point(&self, offset: u64) -> Result<()> {
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

    pub fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.tree.len() => Ok(()),
            _ => Err(Error::OutOfRange {
                offset,
                len,
                size: self.tree.len(),
            }),
        }
    }

    pub fn log(&mut self, op: LogOp) {
        match op {
            // Only the last words of a commit count (`log::buffer`).
            LogOp::Meta { .. } => self.log_buf.push_meta(&log::entry(&op)),
            _ => self.log_buf.push(&log::entry(&op)),
        }
        self.dirty = true;
    }

    /// Live data is capped at 30/32 of the capacity (§4.1).
    pub fn capacity_cap(&self) -> u64 {
        self.seg.count() as u64 * SEGMENT_SIZE / 32 * 30
    }

    /// Bytes that can be appended without reusing anything: the rest of
    /// the open segment and the free segments.
    pub fn available(&self) -> u64 {
        self.seg.free_count() as u64 * SEGMENT_SIZE
            + self.filler.as_ref().map_or(0, |f| f.room() as u64)
    }

    /// Fails with `NoSpace` when `bytes` more live bytes would pass the cap.
    pub fn check_cap(&self, bytes: u64) -> Result<()> {
        if self.seg.live().saturating_add(bytes) > self.capacity_cap() {
            return Err(Error::NoSpace(format!(
                "{bytes} more bytes would exceed 30/32 of the {}-byte data file",
                self.seg.count() as u64 * SEGMENT_SIZE
            )));
        }
        Ok(())
    }

    /// Frees quarantined segments whose readers are gone and stops serving
    /// written segments from memory.
    pub fn release(&mut self) {
        self.reap();
        self.seg.release(&self.readers);
    }

    /// Stops serving segments the writers finished from memory and keeps a
    /// few of their buffers for reuse.
    pub fn reap(&mut self) {
        for (s, buf) in self.writer.take_finished() {
            if let Some(slot) = self.resident.get_mut(s as usize) {
                if slot.as_ref().is_some_and(|b| Arc::ptr_eq(b, &buf)) {
                    *slot = None;
                }
            }
            if let Some(b) = SegBuf::recycle(buf) {
                self.pool.give(b);
            }
        }
    }

    /// Seals the open segment and hands it to the background writers.
    fn seal_open(&mut self) {
        if let (Some(f), Some(s)) = (self.filler.take(), self.seg.open()) {
            self.seal_seq += 1;
            self.writer.submit(s, f.seal(), self.seal_seq);
        }
        self.seg.close_open();
    }

    /// Opens the lowest free segment.
    fn open_segment(&mut self) -> Result<()> {
        self.seal_open();
        self.reap();
        self.seg.release(&self.readers);
        let s = self
            .seg
            .open_lowest_free()
            .ok_or_else(|| Error::NoSpace("no free segment".into()))?;
        let f = Filler::new(self.pool.take());
        if let Some(slot) = self.resident.get_mut(s as usize) {
            *slot = Some(f.shared().clone());
        }
        self.filler = Some(f);
        Ok(())
    }

    /// Appends as much of `data` as fits in the open segment (opening a new
    /// one when it is full); returns the physical address and the count.
    pub fn append(&mut self, data: &[u8]) -> Result<(u64, u64)> {
        if self.filler.as_ref().is_none_or(|f| f.room() == 0) {
            self.open_segment()?;
        }
        let (Some(f), Some(s)) = (self.filler.as_mut(), self.seg.open()) else {
            return Err(Error::NoSpace("no open segment".into()));
        };
        let n = data.len().min(f.room());
        let at = f
            .push(&data[..n])
            .ok_or_else(|| Error::NoSpace("segment buffer full".into()))?;
        Ok((u64::from(s) * SEGMENT_SIZE + at as u64, n as u64))
    }

    /// Inserts `data` at `offset` (checked); the extent holding its first
    /// byte gets `tag` (continuation extents of a large insert get 0).
    pub fn insert(&mut self, offset: u64, data: &[u8], tag: u16) -> Result<()> {
        let mut done = 0usize;
        while done < data.len() {
            let want = (data.len() - done).min(MAX_EXTENT as usize);
            let (addr, got) = self.append(&data[done..done + want])?;
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

    pub fn hole(&mut self, offset: u64, len: u64) -> Result<()> {
        self.tree.insert_hole(offset, len)?;
        self.log(LogOp::Hole { loff: offset, len });
        Ok(())
    }

    pub fn collapse(&mut self, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        for e in self.tree.extents_from(offset)? {
            let from = e.offset.max(offset);
            let to = (e.offset + e.len).min(offset + len);
            if let Some(a) = e.addr {
                self.seg.remove(a + (from - e.offset), to - from);
            }
            if to >= offset + len {
                break;
            }
        }
        self.tree.collapse(offset, len)?;
        self.log(LogOp::Collapse { loff: offset, len });
        Ok(())
    }

    /// Replaces the `data.len()` bytes at `offset` (checked) with `data`,
    /// tagging the extent that starts with it: the same extents and log
    /// records as [`SpaceState::collapse`] then [`SpaceState::insert`], but when the
    /// data fits the open segment and is one extent, the tree replaces the
    /// range ([`FlexTree::replace`], which maps a tagged extent in place
    /// instead of shifting every later byte down and back up: a pair
    /// rewritten with a value of the same size).
    pub fn replace(&mut self, offset: u64, data: &[u8], tag: u16) -> Result<()> {
        let len = data.len();
        let in_place = len > 0
            && len as u64 <= MAX_EXTENT
            && self.filler.as_ref().is_some_and(|f| f.room() >= len);
        if !in_place {
            self.collapse(offset, len as u64)?;
            return self.insert(offset, data, tag);
        }
        let (addr, got) = self.append(data)?;
        let mut old = std::mem::take(&mut self.replaced);
        old.clear();
        let done = self.tree.replace(offset, got, addr, tag, &mut old);
        if done.is_ok() {
            for p in &old {
                if let Some(a) = p.addr {
                    self.seg.remove(a, p.len);
                }
            }
        }
        self.replaced = old;
        done?;
        self.seg.add(addr, got);
        self.log(LogOp::Collapse {
            loff: offset,
            len: got,
        });
        self.log(LogOp::Insert {
            loff: offset,
            len: got,
            addr,
            tag,
        });
        Ok(())
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
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

    /// Maps `loff..loff + len` (one piece of one extent, or a whole range
    /// when `merged`) to `data` appended now; returns the bytes moved.
    pub fn relocate(&mut self, loff: u64, data: &[u8]) -> Result<()> {
        let mut done = 0usize;
        while done < data.len() {
            let want = (data.len() - done).min(MAX_EXTENT as usize);
            let at = loff + done as u64;
            let old: Vec<_> = self.tree.query(at, want as u64)?;
            let (addr, got) = self.append(&data[done..done + want])?;
            let mut left = got;
            for p in old {
                let n = p.len.min(left);
                if let Some(a) = p.addr {
                    self.seg.remove(a, n);
                }
                left -= n;
                if left == 0 {
                    break;
                }
            }
            self.tree.remap_merged(at, got, addr)?;
            self.seg.add(addr, got);
            self.log(LogOp::RemapMerged {
                loff: at,
                len: got,
                addr,
            });
            done += got as usize;
        }
        Ok(())
    }
}

/// The invariants of the state as code: [`SpaceState::problems`] (what
/// [`crate::FlexSpace::check`] reports) and the test aid
/// [`SpaceState::check_invariants`].
impl SpaceState {
    /// The metadata problems `FlexSpace::check` reports: every extent maps
    /// into the data file, no two extents overlap physically or cross a
    /// segment boundary, the extents cover the space, and the per-segment
    /// valid-byte counts match the extents.
    pub fn problems(&self) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        let nseg = self.seg.count() as u64;
        let mut valid = vec![0u64; self.seg.count()];
        let mut ranges = Vec::new();
        let mut covered = 0u64;
        for e in self.tree.extents_from(0)? {
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
            if a / SEGMENT_SIZE != (a + e.len - 1) / SEGMENT_SIZE {
                problems.push(format!(
                    "tree: extent at {} crosses a segment boundary",
                    e.offset
                ));
            }
            for_each_part(a, e.len, |s, n| valid[s as usize] += n);
            ranges.push((a, e.len, e.offset));
        }
        if covered != self.tree.len() {
            problems.push(format!(
                "tree: extents cover {covered} bytes of a {}-byte space",
                self.tree.len()
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
        for (s, (&have, &want)) in self.seg.valid_all().iter().zip(&valid).enumerate() {
            if have != want {
                problems.push(format!(
                    "segments: segment {s} counts {have} valid bytes, its extents hold {want}"
                ));
            }
        }
        Ok(problems)
    }

    /// Test aid: checks the invariants of the state and panics with a
    /// description of the first one broken. Call with no commit running
    /// (hold `maint`), between mutations:
    /// - the index is in normal form ([`FlexTree::check_invariants`]);
    /// - the segment table is consistent ([`SegmentTable::check_invariants`];
    ///   unless the space is poisoned, every empty segment is accounted
    ///   for) and the live bytes stay within the 30/32 cap;
    /// - the per-segment valid bytes are exactly the bytes the extents map
    ///   into each segment, and no extent crosses a segment or overlaps
    ///   another ([`SpaceState::problems`] finds nothing);
    /// - there is a buffer slot per segment; the open segment has a filler
    ///   whose buffer is the one reads of it are served from; an extent in
    ///   a segment served from memory maps only bytes already appended to
    ///   its buffer; unless poisoned, a free segment has no buffer;
    /// - the log buffer is consistent, and holds entries exactly when the
    ///   state is `dirty`.
    pub fn check_invariants(&self) {
        self.tree.check_invariants();
        let settled = !self.poisoned;
        self.seg.check_invariants(settled);
        assert!(
            self.seg.live() <= self.capacity_cap(),
            "space: {} live bytes exceed the cap of {}",
            self.seg.live(),
            self.capacity_cap()
        );
        let problems = self.problems().expect("space: the index cannot be walked");
        assert!(problems.is_empty(), "space: {}", problems.join("; "));
        assert_eq!(
            self.resident.len(),
            self.seg.count(),
            "space: {} buffer slots for {} segments",
            self.resident.len(),
            self.seg.count()
        );
        assert_eq!(
            self.filler.is_some(),
            self.seg.open().is_some(),
            "space: a filler without an open segment, or the reverse"
        );
        if let (Some(f), Some(s)) = (&self.filler, self.seg.open()) {
            assert!(
                self.resident(u64::from(s))
                    .is_some_and(|b| Arc::ptr_eq(b, f.shared())),
                "space: reads of the open segment {s} are not served from its filler's buffer"
            );
        }
        for e in self
            .tree
            .extents_from(0)
            .expect("space: the index cannot be walked")
        {
            let Some(a) = e.addr else { continue };
            if let Some(b) = self.resident(a / SEGMENT_SIZE) {
                let end = (a % SEGMENT_SIZE + e.len) as usize;
                assert!(
                    end <= b.filled(),
                    "space: extent at {} maps bytes {end} of segment {}, whose buffer holds {}",
                    e.offset,
                    a / SEGMENT_SIZE,
                    b.filled()
                );
            }
        }
        if settled {
            for s in 0..self.seg.count() as u32 {
                assert!(
                    !self.seg.is_free(s) || self.resident(u64::from(s)).is_none(),
                    "space: free segment {s} still has a buffer"
                );
            }
        }
        self.log_buf.check_invariants();
        assert_eq!(
            self.dirty,
            self.log_buf.len() > 0,
            "space: dirty is {} with {} bytes of log buffered",
            self.dirty,
            self.log_buf.len()
        );
    }
}

/// Applies one replayed log entry to the tree.
pub fn apply(tree: &mut FlexTree, op: &LogOp) -> flextree::Result<()> {
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
        LogOp::RemapMerged { loff, len, addr } => tree.remap_merged(loff, len, addr),
        LogOp::Tag { loff, tag } => tree.set_tag(loff, tag),
        LogOp::Meta { .. } => Ok(()),
    }
}
