//! Copy-on-write checkpoints of a FlexTree into a tree file.
//!
//! File layout (byte by byte in docs/FORMAT.md): the file is an array of
//! `PAGE_SIZE`-byte pages. Pages 0 and 1 are the two header slots; version
//! `v` is committed by writing slot `v % 2`. Every other page holds one
//! internal node or up to 32 leaves packed as variable-length records
//! (format 2, `leaf_pack`); nodes are addressed by node id (page, slot).
//! Format 1 files (one node per page) still load; their first checkpoint
//! rewrites every node in format 2.
//!
//! - A checkpoint packs the leaves it writes into fresh pages. A page stays
//!   in use while the committed version references any leaf in it; a clean
//!   leaf whose page would keep fewer than 3/4 of its records is rewritten
//!   too (with its ancestors), so pages in use stay mostly live and the
//!   file stays close to one tree.
//!
//! Invariants:
//! - A checkpoint writes dirty nodes only into pages that the last committed
//!   version does not reference, syncs, then writes its header slot and syncs
//!   again. A crash at any point leaves the previous version loadable.
//! - Pages the committed version references but the in-memory tree no longer
//!   does (`released`) become free only after the next header is durable.
//! - Every page carries a CRC32C and the version that wrote it; a load accepts
//!   only pages written at or before the header's version, visits each page
//!   once, and checks that every span and count adds up, so a corrupt file is
//!   an error, never a silently different tree.
//! - Node pages are streamed in writes of at most `CHECKPOINT_BATCH_BYTES`
//!   (runs of consecutive pages), so a checkpoint holds one batch of page
//!   images, never the whole dirty tree. Nodes record the page they were
//!   written to as *pending*; only after the header is durable do they adopt
//!   it and become clean, and only then are the free-page lists updated. A
//!   failed checkpoint therefore changes nothing the next one depends on.
//! - The header's page count is one past the highest page its version
//!   references. Only after the header is durable is the file cut to that
//!   length and are the whole 4 KiB blocks of free pages punched
//!   (`free_page_map`; the caller may defer it, the next checkpoint does it
//!   before taking a free page): the committed version never references a punched
//!   page, and a page that reads as zeros fails its checksum, so a load
//!   never takes one for a node. A crash before the cut or a punch leaves
//!   the blocks allocated, nothing else.
//!
//! Concurrency: `checkpoint` takes `&self`. While it runs, other threads may
//! call the tree's read methods (`lookup`, `query`, `query_into`,
//! `extents_from`, `extent_at`, `get_tag`, `len`, ...) on the same tree; it
//! touches only the nodes' atomic disk state, which readers never look at.
//! Mutations need `&mut self` and so cannot overlap a checkpoint. Two
//! checkpoints never run at once: each holds the tree's persist mutex from
//! start to end, so a second one waits for the first (as do `clone` and
//! `memory_usage`, which read the page lists).

use crate::error::{Error, Result};
use crate::extent::{MAX_ADDR, MAX_SPACE};
use crate::free_page_map::FreePageMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub use crate::free_page_map::{FreePages, GiveBack};

use crate::leaf_pack::{
    decode_record, encode_record, node_id, page_of, record_in, slot_of, LeafPage, SLOTS,
};
use crate::node::{addr_of, DiskState, Internal, Leaf, INTERNAL_CAP, LEAF_CAP};
use crate::storage::StorageFile;
use crate::tree::{FlexTree, MAX_HEIGHT};

/// Size of one page of the tree file.
pub(crate) const PAGE_SIZE: usize = 2048;
/// The largest metadata blob a checkpoint header can carry.
pub const MAX_META: usize = 1024;
/// The largest single write of a checkpoint, and the most page-image memory
/// a checkpoint holds at once (runs of consecutive pages are coalesced up
/// to this size).
pub const CHECKPOINT_BATCH_BYTES: usize = 1 << 20;

const MAGIC: &[u8; 8] = b"FLEXTREE";
/// The format this build writes.
const FORMAT_VERSION: u32 = 2;
/// The oldest format this build loads (one node per page).
const FORMAT_V1: u32 = 1;
/// Pages a file may hold: node ids keep 5 bits for the slot.
const MAX_PAGES: u32 = 1 << (32 - crate::leaf_pack::SLOT_BITS);
const FIRST_NODE_PAGE: u32 = 2;
/// The largest checkpoint version a header may carry.
const MAX_VERSION: u64 = 1 << 63;
const HEADER_FIXED: usize = 56;
const NODE_HEADER: usize = 16;
const LEAF_ENTRY: usize = 16;
const INTERNAL_ENTRY: usize = 12;
const KIND_LEAF: u8 = 1;
const KIND_INTERNAL: u8 = 2;
const KIND_LEAVES: u8 = 3;

/// What one checkpoint wrote and gave back to the file system.
#[derive(Debug)]
pub struct CheckpointReport {
    /// The checkpoint's version.
    pub version: u64,
    /// Node pages written (the nodes that changed since the last one).
    pub pages_written: u64,
    /// Leaves written (packed into the pages written).
    pub leaves_written: u64,
    /// Of those, clean leaves moved out of pages that became sparse.
    pub leaves_moved: u64,
    /// Node pages the new version references (every node of the tree).
    pub node_pages: u64,
    /// Pages the file keeps (header slots, nodes and free pages).
    pub file_pages: u64,
    /// Time spent writing and syncing the nodes and the header.
    pub write_time: Duration,
    /// The pages this checkpoint freed, to give back to the file system
    /// (see [`FreePages::give_back`]; the next checkpoint does it if the
    /// caller does not).
    pub free_pages: FreePages,
}

/// What a loaded checkpoint carried besides the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The checkpoint's version (1 for the first checkpoint of a file).
    pub version: u64,
    /// The metadata blob passed to [`FlexTree::checkpoint`].
    pub meta: Vec<u8>,
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::Corrupt(msg.into())
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// A parsed, checksum-verified header slot.
struct Header {
    /// The file format (1 or 2).
    format: u32,
    version: u64,
    /// The root's node id (format 1: its page).
    root_page: u32,
    height: usize,
    total: u64,
    extents: u64,
    page_count: u32,
    meta: Vec<u8>,
}

fn encode_header(h: &Header) -> Vec<u8> {
    let mut b = vec![0u8; PAGE_SIZE];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
    b[16..24].copy_from_slice(&h.version.to_le_bytes());
    b[24..28].copy_from_slice(&h.root_page.to_le_bytes());
    b[28..32].copy_from_slice(&(h.height as u32).to_le_bytes());
    b[32..40].copy_from_slice(&h.total.to_le_bytes());
    b[40..48].copy_from_slice(&h.extents.to_le_bytes());
    b[48..52].copy_from_slice(&h.page_count.to_le_bytes());
    b[52..56].copy_from_slice(&(h.meta.len() as u32).to_le_bytes());
    b[HEADER_FIXED..HEADER_FIXED + h.meta.len()].copy_from_slice(&h.meta);
    let crc = crc32c::crc32c(&b[..PAGE_SIZE - 4]);
    b[PAGE_SIZE - 4..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// What a header slot holds.
enum Slot {
    /// Not a valid header (torn, never written, corrupt).
    Invalid,
    /// A valid header of a format newer than this build's.
    Newer(u32),
    /// A header this build reads.
    Valid(Header),
}

/// Parses a header slot.
fn decode_slot(b: &[u8]) -> Slot {
    if &b[0..8] != MAGIC || le_u32(b, PAGE_SIZE - 4) != crc32c::crc32c(&b[..PAGE_SIZE - 4]) {
        return Slot::Invalid;
    }
    match le_u32(b, 8) {
        f if f > FORMAT_VERSION => Slot::Newer(f),
        f if f < FORMAT_V1 => Slot::Invalid,
        _ => decode_header(b).map_or(Slot::Invalid, Slot::Valid),
    }
}

/// Parses a header slot of a known format; `None` when it is not valid.
fn decode_header(b: &[u8]) -> Option<Header> {
    if le_u32(b, 12) != PAGE_SIZE as u32 {
        return None;
    }
    let meta_len = le_u32(b, 52) as usize;
    let height = le_u32(b, 28) as usize;
    if meta_len > MAX_META || height + 2 >= MAX_HEIGHT {
        return None;
    }
    Some(Header {
        format: le_u32(b, 8),
        version: le_u64(b, 16),
        root_page: le_u32(b, 24),
        height,
        total: le_u64(b, 32),
        extents: le_u64(b, 40),
        page_count: le_u32(b, 48),
        meta: b[HEADER_FIXED..HEADER_FIXED + meta_len].to_vec(),
    })
}

fn page_offset(page: u32) -> u64 {
    u64::from(page) * PAGE_SIZE as u64
}

fn seal_node_page(b: &mut [u8], kind: u8, count: usize, version: u64) {
    b[4] = kind;
    b[6..8].copy_from_slice(&(count as u16).to_le_bytes());
    b[8..16].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&b[4..]);
    b[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Packs the leaves a checkpoint writes into pages: one page is open at a
/// time and sealed when the next record does not fit.
struct LeafPacker {
    /// The open page, if any.
    open: Option<u32>,
    page: LeafPage,
    /// Scratch space for one record.
    rec: Vec<u8>,
    /// Per page: the nodes it holds, once the pages this checkpoint
    /// writes are counted in.
    records: Vec<u8>,
    leaves: u64,
}

impl LeafPacker {
    fn new(records: Vec<u8>) -> Self {
        LeafPacker {
            open: None,
            page: LeafPage::new(),
            rec: Vec::new(),
            records,
            leaves: 0,
        }
    }

    /// Notes that page `p` now holds `n` nodes.
    fn note_page(&mut self, p: u32, n: usize) {
        let p = p as usize;
        if self.records.len() <= p {
            self.records.resize(p + 1, 0);
        }
        self.records[p] = n as u8;
    }

    /// Adds leaf `l`'s record; returns the leaf's new node id.
    fn add(
        &mut self,
        l: &Leaf,
        version: u64,
        alloc: &mut PageAlloc<'_>,
        out: &mut PageWriter<'_>,
    ) -> Result<u32> {
        self.rec.clear();
        encode_record(l, &mut self.rec);
        let page = match self.open {
            Some(p) if self.page.fits(self.rec.len(), PAGE_SIZE) => p,
            _ => {
                self.seal(version, out)?;
                let p = alloc.alloc()?;
                self.open = Some(p);
                p
            }
        };
        let slot = self.page.push(&self.rec);
        self.leaves += 1;
        node_id(page, slot).ok_or_else(|| corrupt("tree file would exceed its page limit"))
    }

    /// Writes the open page, if any.
    fn seal(&mut self, version: u64, out: &mut PageWriter<'_>) -> Result<()> {
        if let Some(p) = self.open.take() {
            let b = out.page(p)?;
            let count = self.page.finish(b);
            seal_node_page(b, KIND_LEAVES, count, version);
            self.note_page(p, count);
        }
        Ok(())
    }
}

/// Takes one node of `page` off the count `live` (a node id 0 stands for
/// none); returns whether the page became free.
fn unref(live: &mut [u8], id: u32) -> Result<bool> {
    if id == 0 {
        return Ok(false);
    }
    let n = live
        .get_mut(page_of(id) as usize)
        .and_then(|n| {
            *n = n.checked_sub(1)?;
            Some(*n)
        })
        .ok_or_else(|| corrupt(format!("page accounting lost node {id}")))?;
    Ok(n == 0)
}

/// Hands out the pages of one checkpoint without consuming anything until
/// it commits. `free` is sorted in descending order and taken from its end,
/// so pages come out ascending (a post-order walk then writes long runs of
/// consecutive pages), followed by new pages past the end of the file.
struct PageAlloc<'a> {
    free: &'a [u32],
    /// Free pages handed out (from the end of `free`).
    used: usize,
    /// Pages the file holds once the nodes are written.
    page_count: u32,
    /// The committed node ids of the nodes written (their images the new
    /// version no longer references).
    superseded: Vec<u32>,
}

impl PageAlloc<'_> {
    fn alloc(&mut self) -> Result<u32> {
        if self.used < self.free.len() {
            self.used += 1;
            return Ok(self.free[self.free.len() - self.used]);
        }
        let p = self.page_count;
        if p >= MAX_PAGES {
            return Err(corrupt("tree file would exceed its page limit"));
        }
        self.page_count = p + 1;
        Ok(p)
    }

    /// Notes the committed node id of a node being written (0: none).
    fn supersede(&mut self, id: u32) {
        if id != 0 {
            self.superseded.push(id);
        }
    }
}

/// Streams page images to the file: one buffer holds a run of consecutive
/// pages and is written when the next page does not continue the run or the
/// run reaches [`CHECKPOINT_BATCH_BYTES`]. The buffer is the only page-image
/// memory a checkpoint holds.
struct PageWriter<'a> {
    file: &'a dyn StorageFile,
    buf: Vec<u8>,
    /// The page at the start of `buf`.
    start: u32,
}

impl<'a> PageWriter<'a> {
    fn new(file: &'a dyn StorageFile) -> Self {
        PageWriter {
            file,
            buf: Vec::new(),
            start: 0,
        }
    }

    /// A zeroed page image for `page`, to be filled before the next call.
    fn page(&mut self, page: u32) -> Result<&mut [u8]> {
        let run_end = u64::from(self.start) + (self.buf.len() / PAGE_SIZE) as u64;
        if !self.buf.is_empty()
            && (u64::from(page) != run_end || self.buf.len() + PAGE_SIZE > CHECKPOINT_BATCH_BYTES)
        {
            self.flush()?;
        }
        if self.buf.is_empty() {
            self.start = page;
            self.buf.reserve_exact(CHECKPOINT_BATCH_BYTES);
        }
        let at = self.buf.len();
        self.buf.resize(at + PAGE_SIZE, 0);
        Ok(&mut self.buf[at..])
    }

    /// Writes the buffered run.
    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all_at(page_offset(self.start), &self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl FlexTree {
    /// The version of the last checkpoint written or loaded (0 if none).
    /// Never waits for a running checkpoint.
    pub fn checkpoint_version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Writes a copy-on-write checkpoint into `file` and returns its version.
    ///
    /// Dirty nodes go to pages the previous version does not use, streamed
    /// in writes of at most [`CHECKPOINT_BATCH_BYTES`]; the file is synced,
    /// then the header (with `meta`, at most [`MAX_META`] bytes) is written
    /// to its slot and synced. Only then does the tree adopt the new pages
    /// and mark its nodes clean, and give the pages that became free back
    /// to the file system: the file is cut after the highest page in use and
    /// the whole 4 KiB blocks of free pages are punched (a failure there
    /// only leaves blocks allocated, so it is not an error). A tree that
    /// was neither loaded from nor checkpointed into a file may only
    /// checkpoint into an empty file; later checkpoints must go to the
    /// same file. On error the tree's
    /// contents are unchanged, the next checkpoint writes everything the
    /// failed one tried to, and the file still loads as the previous version.
    ///
    /// Runs through `&self`: readers may use the tree meanwhile (see the
    /// module documentation); a second checkpoint waits for this one.
    pub fn checkpoint(&self, file: &dyn StorageFile, meta: &[u8]) -> Result<u64> {
        let report = self.checkpoint_report(file, meta)?;
        report.free_pages.give_back(file);
        Ok(report.version)
    }

    /// [`FlexTree::checkpoint`], saying what it wrote, without giving the
    /// freed pages back: the caller does that with the report's
    /// [`FreePages`] (on the same file) when it suits it, for example after
    /// releasing locks that the punching should not hold up.
    pub fn checkpoint_report(
        &self,
        file: &dyn StorageFile,
        meta: &[u8],
    ) -> Result<CheckpointReport> {
        if meta.len() > MAX_META {
            return Err(Error::MetaTooLarge(meta.len()));
        }
        let mut guard = self.persist.lock();
        let persist = &mut *guard;
        if !persist.bound {
            if file.len()? != 0 {
                return Err(Error::FileNotEmpty);
            }
            // The tree owns the file from now on, even if this checkpoint
            // fails: a retry must not trip over its own partial writes.
            persist.bound = true;
            persist.page_count = FIRST_NODE_PAGE;
            persist.free.clear();
            persist.released.clear();
            persist.unpunched.clear();
            persist.live.clear();
            persist.records.clear();
        }
        // What the last checkpoint left to give back goes before a free
        // page is taken (its failure only leaves blocks allocated).
        let _ = persist.give_back.drain(file);
        let started = Instant::now();
        let leaves_moved = self.plan_moves(persist)?;
        persist.free.sort_unstable_by(|a, b| b.cmp(a));
        let version = self.version.load(Ordering::Relaxed) + 1;
        let start_count = persist.page_count;
        let mut alloc = PageAlloc {
            free: &persist.free,
            used: 0,
            page_count: persist.page_count,
            superseded: Vec::new(),
        };
        let mut out = PageWriter::new(file);
        let mut packer = LeafPacker::new(persist.records.clone());
        let root_id = self.write_node(self.root, 0, version, &mut alloc, &mut packer, &mut out)?;
        packer.seal(version, &mut out)?;
        out.flush()?;
        drop(out);
        file.sync()?;
        // The pages the new version leaves free: free ones this checkpoint
        // did not take, and those whose every node was rewritten or released.
        let (used, written_end) = (alloc.used, alloc.page_count);
        let mut live = persist.live.clone();
        live.resize(written_end as usize, 0);
        let mut records = packer.records;
        records.resize(written_end as usize, 0);
        let mut freed = Vec::new();
        for &id in alloc.superseded.iter().chain(&persist.released) {
            if unref(&mut live, id)? {
                freed.push(page_of(id));
            }
        }
        let (untaken, taken) = persist.free.split_at(persist.free.len() - used);
        for p in taken.iter().copied().chain(start_count..written_end) {
            live[p as usize] = records[p as usize];
        }
        let mut map = FreePageMap::new(written_end);
        map.insert_all(untaken);
        map.insert_all(&freed);
        let page_count = map.used_len(FIRST_NODE_PAGE);
        let header = Header {
            format: FORMAT_VERSION,
            version,
            root_page: root_id,
            height: self.height,
            total: self.total,
            extents: self.extents,
            page_count,
            meta: meta.to_vec(),
        };
        file.write_all_at(page_offset((version % 2) as u32), &encode_header(&header))?;
        file.sync()?;
        // Committed: adopt the new pages; what the previous version alone
        // referenced becomes free; the file keeps `page_count` pages.
        if std::mem::take(&mut persist.legacy_slot) {
            // The other slot may hold a format-1 header that older builds
            // would take for the tree; the new version no longer needs it.
            // Best effort: a failure leaves a header older than this one.
            let other = page_offset(((version + 1) % 2) as u32);
            if file.write_all_at(other, &[0u8; PAGE_SIZE]).is_ok() {
                let _ = file.sync();
            }
        }
        persist.free.truncate(persist.free.len() - used);
        persist.released.clear();
        persist.free.extend_from_slice(&freed);
        persist.free.retain(|&p| p < page_count);
        self.commit_node(self.root, 0);
        persist.page_count = page_count;
        live.truncate(page_count as usize);
        records.truncate(page_count as usize);
        persist.live = live;
        persist.records = records;
        self.version.store(version, Ordering::Relaxed);
        persist.unpunched.append(&mut freed);
        let free_pages = persist.give_back.set(&map, &persist.unpunched, page_count);
        persist.unpunched.clear();
        Ok(CheckpointReport {
            version,
            pages_written: used as u64 + u64::from(written_end - start_count),
            leaves_written: packer.leaves,
            leaves_moved,
            node_pages: u64::from(page_count - FIRST_NODE_PAGE) - persist.free.len() as u64,
            file_pages: u64::from(page_count),
            write_time: started.elapsed(),
            free_pages,
        })
    }

    /// Before a checkpoint writes: counts, per page, the nodes that stay
    /// (neither rewritten nor released), and marks the clean leaves of pages
    /// that would keep fewer than 3/4 of their records to be written, with
    /// their ancestors. Returns how many leaves it marked.
    fn plan_moves(&self, persist: &crate::file_pages::FilePages) -> Result<u64> {
        let mut staying = persist.live.clone();
        self.unref_dirty(self.root, 0, &mut staying)?;
        for &id in &persist.released {
            unref(&mut staying, id)?;
        }
        let sparse: Vec<bool> = staying
            .iter()
            .zip(&persist.records)
            .map(|(&s, &r)| s > 0 && usize::from(s) * 4 < usize::from(r) * 3)
            .collect();
        if !sparse.contains(&true) {
            return Ok(0);
        }
        let mut moved = 0;
        self.mark_moves(self.root, 0, &sparse, &mut moved);
        Ok(moved)
    }

    /// Takes the nodes a checkpoint will rewrite off `staying`.
    fn unref_dirty(&self, id: u32, level: usize, staying: &mut [u8]) -> Result<()> {
        if level == self.height {
            let disk = &self.leaves[id as usize].disk;
            if disk.needs_write() {
                unref(staying, disk.page())?;
            }
            return Ok(());
        }
        let n = &self.internals[id as usize];
        if n.disk.needs_write() {
            unref(staying, n.disk.page())?;
            for &child in &n.child[..n.count] {
                self.unref_dirty(child, level + 1, staying)?;
            }
        }
        Ok(())
    }

    /// Marks the clean leaves in `sparse` pages (and their ancestors) to be
    /// written; returns whether the subtree at `id` will be written.
    fn mark_moves(&self, id: u32, level: usize, sparse: &[bool], moved: &mut u64) -> bool {
        if level == self.height {
            let disk = &self.leaves[id as usize].disk;
            let in_sparse = sparse.get(page_of(disk.page()) as usize) == Some(&true);
            if !disk.needs_write() && in_sparse {
                disk.force_write();
                *moved += 1;
            }
            return disk.needs_write();
        }
        let n = &self.internals[id as usize];
        let mut any = false;
        for &child in &n.child[..n.count] {
            any |= self.mark_moves(child, level + 1, sparse, moved);
        }
        if any && !n.disk.needs_write() {
            n.disk.force_write();
        }
        n.disk.needs_write()
    }

    /// Writes node `id` at `level` and its dirty descendants (post-order);
    /// returns the node id that holds the node in the new version.
    fn write_node(
        &self,
        id: u32,
        level: usize,
        version: u64,
        alloc: &mut PageAlloc<'_>,
        packer: &mut LeafPacker,
        out: &mut PageWriter<'_>,
    ) -> Result<u32> {
        if level == self.height {
            let l = &self.leaves[id as usize];
            if !l.disk.needs_write() {
                return Ok(l.disk.page());
            }
            let new_id = packer.add(l, version, alloc, out)?;
            l.disk.set_pending(new_id);
            alloc.supersede(l.disk.page());
            return Ok(new_id);
        }
        let n = &self.internals[id as usize];
        if !n.disk.needs_write() {
            return Ok(n.disk.page());
        }
        let mut child_ids = [0u32; INTERNAL_CAP];
        for (slot, &child) in child_ids.iter_mut().zip(&n.child[..n.count]) {
            *slot = self.write_node(child, level + 1, version, alloc, packer, out)?;
        }
        let page = alloc.alloc()?;
        let new_id =
            node_id(page, 0).ok_or_else(|| corrupt("tree file would exceed its page limit"))?;
        let b = out.page(page)?;
        for (i, (shift, child_id)) in n.shift[..n.count].iter().zip(child_ids).enumerate() {
            let at = NODE_HEADER + i * INTERNAL_ENTRY;
            b[at..at + 8].copy_from_slice(&shift.to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&child_id.to_le_bytes());
        }
        seal_node_page(b, KIND_INTERNAL, n.count, version);
        packer.note_page(page, 1);
        n.disk.set_pending(new_id);
        alloc.supersede(n.disk.page());
        Ok(new_id)
    }

    /// After a durable header: every node `write_node` wrote (the same walk)
    /// adopts its new page and becomes clean (its old page is among the
    /// walk's `superseded`).
    fn commit_node(&self, id: u32, level: usize) {
        let disk = if level == self.height {
            &self.leaves[id as usize].disk
        } else {
            let n = &self.internals[id as usize];
            if !n.disk.needs_write() {
                return;
            }
            for &child in &n.child[..n.count] {
                self.commit_node(child, level + 1);
            }
            &n.disk
        };
        if disk.needs_write() {
            disk.commit();
        }
    }

    /// The newest valid header slot of `file` (its version and metadata),
    /// without loading any node: `None` when no slot verifies. For a
    /// reader that loaded the tree while another process may checkpoint:
    /// the version it loaded is still the newest exactly when this returns
    /// it again afterwards (a checkpoint writes its header slot last).
    pub fn newest_checkpoint(file: &dyn StorageFile) -> Result<Option<Checkpoint>> {
        if file.len()? < 2 * PAGE_SIZE as u64 {
            return Ok(None);
        }
        let mut slots = vec![0u8; 2 * PAGE_SIZE];
        file.read_exact_at(0, &mut slots)?;
        let mut newest: Option<Header> = None;
        for slot in [
            decode_slot(&slots[..PAGE_SIZE]),
            decode_slot(&slots[PAGE_SIZE..]),
        ] {
            match slot {
                Slot::Invalid => {}
                Slot::Newer(found) => {
                    return Err(Error::NewerFormat {
                        found,
                        supported: FORMAT_VERSION,
                    })
                }
                Slot::Valid(h) if newest.as_ref().is_none_or(|n| n.version < h.version) => {
                    newest = Some(h)
                }
                Slot::Valid(_) => {}
            }
        }
        Ok(newest.map(|h| Checkpoint {
            version: h.version,
            meta: h.meta,
        }))
    }

    /// Loads the newest valid checkpoint from `file`.
    ///
    /// The newest header slot whose checksum verifies decides the version; a
    /// corrupt node reachable from it is an error (the older slot's pages
    /// may already be reused, so it is not consulted).
    pub fn load(file: &dyn StorageFile) -> Result<(FlexTree, Checkpoint)> {
        let file_len = file.len()?;
        if file_len == 0 {
            return Err(corrupt("empty tree file"));
        }
        if file_len < 2 * PAGE_SIZE as u64 {
            return Err(corrupt("tree file shorter than its two header slots"));
        }
        let mut slots = vec![0u8; 2 * PAGE_SIZE];
        file.read_exact_at(0, &mut slots)?;
        let mut valid = Vec::new();
        for slot in [
            decode_slot(&slots[..PAGE_SIZE]),
            decode_slot(&slots[PAGE_SIZE..]),
        ] {
            match slot {
                Slot::Invalid => {}
                Slot::Newer(found) => {
                    return Err(Error::NewerFormat {
                        found,
                        supported: FORMAT_VERSION,
                    })
                }
                Slot::Valid(h) => valid.push(h),
            }
        }
        let header = valid
            .into_iter()
            .max_by_key(|h| h.version)
            .ok_or_else(|| corrupt("no valid header slot"))?;
        if header.page_count < FIRST_NODE_PAGE
            || header.page_count > MAX_PAGES
            || page_offset(header.page_count) > file_len
            || header.total > MAX_SPACE
        {
            return Err(corrupt("header page count or length out of range"));
        }
        // Versions count checkpoints from 1; one past 2^63 is damage, and
        // the next checkpoint's version must not wrap below the other
        // slot's (which would then win the next load).
        if header.version == 0 || header.version > MAX_VERSION {
            return Err(corrupt(format!(
                "header version {} out of range",
                header.version
            )));
        }
        let v1 = header.format == FORMAT_V1;
        let root_id = if v1 {
            node_id(header.root_page, 0).ok_or_else(|| corrupt("root page out of range"))?
        } else {
            header.root_page
        };
        let pages = header.page_count as usize;
        let mut loader = Loader {
            file,
            header: &header,
            v1,
            visited: vec![0u32; pages],
            records: vec![0u8; pages],
            buf: vec![0u8; PAGE_SIZE],
            buf_page: None,
            tree: FlexTree::new(),
            extents: 0,
        };
        loader.tree.leaves.clear();
        let (root, span) = loader.load_node(root_id, 0)?;
        if span != header.total || loader.extents != header.extents {
            return Err(corrupt(format!(
                "tree holds {span} bytes in {} extents, header says {} in {}",
                loader.extents, header.total, header.extents
            )));
        }
        let visited = std::mem::take(&mut loader.visited);
        let records = std::mem::take(&mut loader.records);
        let mut tree = loader.tree;
        tree.root = root;
        tree.height = header.height;
        tree.total = header.total;
        tree.extents = header.extents;
        *tree.version.get_mut() = header.version;
        let persist = tree.persist.get_mut();
        persist.bound = true;
        persist.page_count = header.page_count;
        persist.free = (FIRST_NODE_PAGE..header.page_count)
            .filter(|&p| visited[p as usize] == 0)
            .rev()
            .collect();
        persist.live = visited.iter().map(|m| m.count_ones() as u8).collect();
        persist.records = records;
        persist.legacy_slot = v1;
        // Whether they are holes is unknown: the next checkpoint punches.
        persist.unpunched = persist.free.clone();
        Ok((
            tree,
            Checkpoint {
                version: header.version,
                meta: header.meta,
            },
        ))
    }
}

/// State of one load: reads and validates nodes depth-first.
struct Loader<'a> {
    file: &'a dyn StorageFile,
    header: &'a Header,
    /// Format 1: child references are pages, leaves have a page each, and
    /// every node is to be rewritten by the next checkpoint.
    v1: bool,
    /// Per page: the slots referenced so far.
    visited: Vec<u32>,
    /// Per page: the nodes it holds.
    records: Vec<u8>,
    buf: Vec<u8>,
    /// The page in `buf` (verified) with its kind and count.
    buf_page: Option<(u32, u8, usize)>,
    tree: FlexTree,
    extents: u64,
}

impl Loader<'_> {
    /// Marks node `id` referenced, reads its page into `buf` (unless it is
    /// there already) and checks its checksum, kind and version; returns
    /// the page's count (entries of an internal node or a format-1 leaf,
    /// records of a leaf page).
    fn read_node(&mut self, id: u32, kind: u8) -> Result<usize> {
        let (page, slot) = (page_of(id), slot_of(id));
        if page < FIRST_NODE_PAGE || page >= self.header.page_count {
            return Err(corrupt(format!("node page {page} out of range")));
        }
        let mask = 1u32 << slot;
        if self.visited[page as usize] & mask != 0 {
            return Err(corrupt(format!("node {page}.{slot} referenced twice")));
        }
        self.visited[page as usize] |= mask;
        let (found_kind, count) = match self.buf_page {
            Some((p, k, c)) if p == page => (k, c),
            _ => {
                self.buf_page = None;
                let (k, c) = self.read_page(page)?;
                self.buf_page = Some((page, k, c));
                (k, c)
            }
        };
        if found_kind != kind {
            return Err(corrupt(format!("node page {page} has the wrong kind")));
        }
        if kind != KIND_LEAVES && slot != 0 {
            return Err(corrupt(format!("node {page}.{slot}: page holds one node")));
        }
        Ok(count)
    }

    /// Reads and verifies page `page`; returns its kind and count.
    fn read_page(&mut self, page: u32) -> Result<(u8, usize)> {
        self.file
            .read_exact_at(page_offset(page), &mut self.buf)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => corrupt(format!("page {page} truncated")),
                _ => Error::Io(e),
            })?;
        let b = &self.buf;
        if le_u32(b, 0) != crc32c::crc32c(&b[4..]) {
            return Err(corrupt(format!("checksum mismatch in node page {page}")));
        }
        if le_u64(b, 8) > self.header.version {
            return Err(corrupt(format!(
                "node page {page} is newer than the header"
            )));
        }
        let kind = b[4];
        let count = le_u16(b, 6) as usize;
        let (cap, nodes) = match kind {
            KIND_LEAF if self.v1 => (LEAF_CAP, 1),
            KIND_INTERNAL => (INTERNAL_CAP, 1),
            KIND_LEAVES if !self.v1 => (SLOTS, count),
            _ => return Err(corrupt(format!("node page {page} has an unknown kind"))),
        };
        if count > cap || (kind == KIND_LEAVES && count == 0) {
            return Err(corrupt(format!("node page {page} claims {count} entries")));
        }
        self.records[page as usize] = nodes as u8;
        Ok((kind, count))
    }

    /// The state of a node loaded from `id`: clean, or to be rewritten when
    /// the file is format 1.
    fn disk_state(&self, id: u32) -> DiskState {
        let disk = DiskState::loaded(id);
        if self.v1 {
            disk.force_write();
        }
        disk
    }

    /// Loads the subtree at node `id` (at `level`), returning its arena id
    /// and span.
    fn load_node(&mut self, id: u32, level: usize) -> Result<(u32, u64)> {
        if level == self.header.height {
            return self.load_leaf(id, level == 0);
        }
        let page = page_of(id);
        let count = self.read_node(id, KIND_INTERNAL)?;
        if count == 0 {
            return Err(corrupt(format!("internal node page {page} is empty")));
        }
        // The normal form: a root with one child is replaced by it.
        if level == 0 && count == 1 {
            return Err(corrupt(format!("root node page {page} has one child")));
        }
        let mut node = Internal::new();
        node.count = count;
        node.disk = self.disk_state(id);
        let mut children = [0u32; INTERNAL_CAP];
        for (i, c) in children.iter_mut().enumerate().take(count) {
            let at = NODE_HEADER + i * INTERNAL_ENTRY;
            node.shift[i] = le_u64(&self.buf, at);
            let child = le_u32(&self.buf, at + 8);
            *c = if self.v1 {
                node_id(child, 0)
                    .ok_or_else(|| corrupt(format!("node page {page}: child out of range")))?
            } else {
                child
            };
        }
        if node.shift[0] != 0 {
            return Err(corrupt(format!("internal node page {page} not normalized")));
        }
        let mut span = 0u64;
        for (i, &child_id) in children.iter().enumerate().take(count) {
            if node.shift[i] != span {
                return Err(corrupt(format!(
                    "internal node page {page}: child {i} starts at {} but its left sibling ends at {span}",
                    node.shift[i]
                )));
            }
            let (arena_id, child_span) = self.load_node(child_id, level + 1)?;
            if child_span == 0 {
                return Err(corrupt(format!("empty child under node page {page}")));
            }
            node.child[i] = arena_id;
            span = span
                .checked_add(child_span)
                .filter(|&s| s <= MAX_SPACE)
                .ok_or_else(|| corrupt("tree spans more than 2^63 bytes"))?;
        }
        Ok((self.tree.internals.push(node), span))
    }

    fn load_leaf(&mut self, id: u32, is_root: bool) -> Result<(u32, u64)> {
        let (page, slot) = (page_of(id), slot_of(id));
        let mut leaf = Leaf::new();
        leaf.disk = self.disk_state(id);
        let span = if self.v1 {
            let count = self.read_node(id, KIND_LEAF)?;
            self.decode_v1_leaf(page, count, &mut leaf)?
        } else {
            let count = self.read_node(id, KIND_LEAVES)?;
            let rec = record_in(&self.buf, count, slot)
                .ok_or_else(|| corrupt(format!("leaf {page}.{slot}: no such record")))?;
            decode_record(rec, &mut leaf, &|| format!("leaf {page}.{slot}"))?
        };
        if leaf.count == 0 && !is_root {
            return Err(corrupt(format!("leaf {page}.{slot} is empty")));
        }
        self.extents += leaf.count as u64;
        Ok((self.tree.leaves.push(leaf), span))
    }

    /// Decodes a format-1 leaf page (in `buf`) of `count` entries.
    fn decode_v1_leaf(&self, page: u32, count: usize, leaf: &mut Leaf) -> Result<u64> {
        leaf.count = count;
        let mut off = 0u64;
        for i in 0..count {
            let at = NODE_HEADER + i * LEAF_ENTRY;
            let len = le_u64(&self.buf, at);
            let word = le_u64(&self.buf, at + 8);
            if len == 0 {
                return Err(corrupt(format!("zero-length extent in leaf page {page}")));
            }
            if let Some(a) = addr_of(word) {
                if a > MAX_ADDR || MAX_ADDR - a < len - 1 {
                    return Err(corrupt(format!("address out of range in leaf page {page}")));
                }
            }
            leaf.len[i] = len;
            leaf.word[i] = word;
            off = off
                .checked_add(len)
                .filter(|&s| s <= MAX_SPACE)
                .ok_or_else(|| corrupt("leaf spans more than 2^63 bytes"))?;
        }
        Ok(off)
    }
}

// The node encodings must fit in a page.
const _: () = assert!(NODE_HEADER + LEAF_CAP * LEAF_ENTRY <= PAGE_SIZE);
const _: () = assert!(NODE_HEADER + INTERNAL_CAP * INTERNAL_ENTRY <= PAGE_SIZE);
const _: () =
    assert!(crate::leaf_pack::PAGE_HEADER + 2 * SLOTS + crate::leaf_pack::MAX_RECORD <= PAGE_SIZE);
const _: () = assert!(NODE_HEADER == crate::leaf_pack::PAGE_HEADER);
