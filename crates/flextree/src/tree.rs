//! The FlexTree: operations on the in-memory tree.
//!
//! Invariants (besides the node normal form documented in `node`):
//! - Every byte of `0..total` belongs to exactly one leaf entry; the leaf
//!   level is contiguous (holes are explicit entries).
//! - All leaves are at depth `height`; only the root may be empty, and only
//!   when `total == 0`.
//! - `extents` counts the leaf entries.
//! - Mutating operations validate their arguments first and then cannot
//!   fail, so an error leaves the tree unchanged. An insertion relies on it:
//!   it adds its length to the shift values after its path on the way down
//!   (`descend_insert`), before the leaf is reached.
//! - A merge of a new extent into its predecessor respects the merge limit
//!   and never produces a mapped extent whose physical range contains a
//!   multiple of the merge boundary strictly inside it.

use crate::arena::Arena;
use crate::error::{Error, Result};
use crate::extent::{Extent, Piece, MAX_ADDR, MAX_SPACE};
use crate::file_pages::FilePages;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::node::{addr_of, pack, tag_of, with_tag, Internal, Leaf, INTERNAL_CAP, LEAF_CAP};

/// The deepest tree supported. A tree of this height would need more extents
/// than memory can hold, so the limit is never reached in practice.
pub(crate) const MAX_HEIGHT: usize = 24;

/// The room (in entries) a sibling must have for a full leaf to share its
/// entries with it instead of splitting (`share_with_sibling`): enough that
/// both leaves keep room for the two entries an edit may add.
const SHARE_MIN_ROOM: usize = 8;

/// The most entries a leaf under half full may end up with when it merges
/// with a sibling after a removal (`rebalance`): 3/4 full.
const LEAF_SHARED_MAX: usize = LEAF_CAP * 3 / 4;

/// A root-to-leaf path: the internal nodes visited and the child index taken.
pub(crate) struct Path {
    pub steps: [(u32, usize); MAX_HEIGHT],
    pub depth: usize,
}

impl Path {
    pub fn new() -> Self {
        Path {
            steps: [(0, 0); MAX_HEIGHT],
            depth: 0,
        }
    }

    fn push(&mut self, node: u32, idx: usize) {
        self.steps[self.depth] = (node, idx);
        self.depth += 1;
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = &(u32, usize)> {
        self.steps[..self.depth].iter()
    }
}

/// An extent index with O(log N) insert-range and collapse-range.
///
/// See the crate documentation for the model. Every method that takes an
/// offset validates it and returns [`Error::OutOfRange`] rather than panic.
///
/// `FlexTree` is `Send + Sync`: any number of threads may call the `&self`
/// methods at once, including one [`FlexTree::checkpoint`] (see the
/// `checkpoint` module for what runs concurrently with it).
pub struct FlexTree {
    pub(crate) leaves: Arena<Leaf>,
    pub(crate) internals: Arena<Internal>,
    pub(crate) free_leaves: Vec<u32>,
    pub(crate) free_internals: Vec<u32>,
    pub(crate) root: u32,
    /// Number of internal levels above the leaves (0: the root is a leaf).
    pub(crate) height: usize,
    pub(crate) total: u64,
    pub(crate) extents: u64,
    pub(crate) merge_limit: u64,
    pub(crate) merge_boundary: u64,
    /// The last committed checkpoint version; written only by a checkpoint
    /// holding `persist` (or by `load`), readable without the lock.
    pub(crate) version: AtomicU64,
    /// Free and released pages of the tree file. A checkpoint holds this lock
    /// from start to end, which serializes checkpoints.
    pub(crate) persist: Mutex<FilePages>,
}

impl FlexTree {
    /// A tree with `self`'s shape (root, height, totals, merge settings,
    /// version) over the given nodes, free lists and page lists: what a
    /// clone and a shared view have in common.
    pub(crate) fn with_nodes(
        &self,
        leaves: Arena<Leaf>,
        internals: Arena<Internal>,
        (free_leaves, free_internals): (Vec<u32>, Vec<u32>),
        persist: FilePages,
    ) -> FlexTree {
        FlexTree {
            leaves,
            internals,
            free_leaves,
            free_internals,
            root: self.root,
            height: self.height,
            total: self.total,
            extents: self.extents,
            merge_limit: self.merge_limit,
            merge_boundary: self.merge_boundary,
            version: AtomicU64::new(self.version.load(Ordering::Relaxed)),
            persist: Mutex::new(persist),
        }
    }
}

impl Clone for FlexTree {
    /// Clones the tree. Waits for a running checkpoint to finish, so the
    /// clone's pages and versions are those of one committed state.
    fn clone(&self) -> Self {
        let persist = self.persist.lock();
        self.with_nodes(
            self.leaves.clone(),
            self.internals.clone(),
            (self.free_leaves.clone(), self.free_internals.clone()),
            persist.clone(),
        )
    }

    /// Makes `self` a copy of `source`, reusing `self`'s memory where it
    /// can (see `Arena::clone_from`): copying into a tree kept from an
    /// earlier copy costs a fraction of a fresh clone.
    fn clone_from(&mut self, source: &Self) {
        let persist = source.persist.lock();
        self.leaves.clone_from(&source.leaves);
        self.internals.clone_from(&source.internals);
        self.free_leaves.clone_from(&source.free_leaves);
        self.free_internals.clone_from(&source.free_internals);
        self.root = source.root;
        self.height = source.height;
        self.total = source.total;
        self.extents = source.extents;
        self.merge_limit = source.merge_limit;
        self.merge_boundary = source.merge_boundary;
        *self.version.get_mut() = source.version.load(Ordering::Relaxed);
        self.persist.get_mut().clone_from(&persist);
    }
}

impl Default for FlexTree {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FlexTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlexTree")
            .field("len", &self.total)
            .field("extents", &self.extents)
            .field("height", &self.height)
            .field("version", &self.version.load(Ordering::Relaxed))
            .finish()
    }
}

fn out_of_range(offset: u64, len: u64, size: u64) -> Error {
    Error::OutOfRange { offset, len, size }
}

impl FlexTree {
    /// An empty tree (length 0).
    pub fn new() -> Self {
        let mut leaves = Arena::new();
        leaves.push(Leaf::new());
        FlexTree {
            leaves,
            internals: Arena::new(),
            free_leaves: Vec::new(),
            free_internals: Vec::new(),
            root: 0,
            height: 0,
            total: 0,
            extents: 0,
            merge_limit: 0,
            merge_boundary: 0,
            version: AtomicU64::new(0),
            persist: Mutex::new(FilePages::default()),
        }
    }

    /// The size of the logical address space in bytes.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether the address space is empty.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The number of leaf entries (extents and holes).
    pub fn extent_count(&self) -> u64 {
        self.extents
    }

    /// The number of levels (1 for a tree whose root is a leaf).
    pub fn height(&self) -> usize {
        self.height + 1
    }

    /// Bytes of memory held by the tree's nodes (waits for a running
    /// checkpoint, whose page lists it counts).
    pub fn memory_usage(&self) -> usize {
        self.leaves.memory_usage()
            + self.internals.memory_usage()
            + (self.free_leaves.capacity() + self.free_internals.capacity()) * 4
            + self.persist.lock().memory_usage()
    }

    /// Bytes of memory held by the tree's nodes alone (never waits: a
    /// running checkpoint's page lists are not counted).
    pub fn node_memory_usage(&self) -> usize {
        self.leaves.memory_usage()
            + self.internals.memory_usage()
            + (self.free_leaves.capacity() + self.free_internals.capacity()) * 4
    }

    /// Sets the largest extent that insert and append may produce by merging
    /// a new extent into the physically contiguous extent that ends where it
    /// starts (two holes are contiguous). 0 (the default) disables merging.
    pub fn set_merge_limit(&mut self, max_len: u64) {
        self.merge_limit = max_len;
    }

    /// Forbids merges that would make a mapped extent cross a multiple of
    /// `boundary` in physical address space: the merged range `a..a + len`
    /// may not contain a multiple of `boundary` strictly inside it (it may
    /// start at one, and end at one). 0 (the default) sets no boundary.
    ///
    /// flexspace sets its segment size here, so that an extent written
    /// inside one segment stays inside it. The boundary governs merging
    /// only: an extent inserted or remapped as one piece that itself crosses
    /// a boundary is kept as it is. Holes have no physical range and merge
    /// under the limit alone.
    pub fn set_merge_boundary(&mut self, boundary: u64) {
        self.merge_boundary = boundary;
    }

    // ---------------------------------------------------------------- checks

    fn check_within(&self, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Err(Error::ZeroLength);
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.total => Ok(()),
            _ => Err(out_of_range(offset, len, self.total)),
        }
    }

    fn check_point(&self, offset: u64) -> Result<()> {
        if offset < self.total {
            Ok(())
        } else {
            Err(out_of_range(offset, 1, self.total))
        }
    }

    fn check_growth(&self, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Err(Error::ZeroLength);
        }
        if offset > self.total {
            return Err(out_of_range(offset, len, self.total));
        }
        match self.total.checked_add(len) {
            Some(t) if t <= MAX_SPACE => Ok(()),
            _ => Err(Error::SpaceOverflow),
        }
    }

    fn check_addr(addr: u64, len: u64) -> Result<()> {
        match addr.checked_add(len - 1) {
            Some(last) if last <= MAX_ADDR => Ok(()),
            _ => Err(Error::AddressTooLarge(addr)),
        }
    }

    // ----------------------------------------------------------- public ops

    /// Inserts `len` bytes mapped to physical `addr..addr + len` at logical
    /// `offset` (`offset <= len()`), shifting every later byte up by `len`.
    pub fn insert(&mut self, offset: u64, len: u64, addr: u64) -> Result<()> {
        self.check_growth(offset, len)?;
        Self::check_addr(addr, len)?;
        self.check_height_room()?;
        self.insert_entry(offset, len, Some(addr));
        Ok(())
    }

    /// Inserts a hole (an unmapped range) of `len` bytes at `offset`.
    pub fn insert_hole(&mut self, offset: u64, len: u64) -> Result<()> {
        self.check_growth(offset, len)?;
        self.check_height_room()?;
        self.insert_entry(offset, len, None);
        Ok(())
    }

    /// Appends `len` bytes mapped to `addr..addr + len` at the end.
    pub fn append(&mut self, len: u64, addr: u64) -> Result<()> {
        self.insert(self.total, len, addr)
    }

    /// Removes `offset..offset + len`, shifting every later byte down.
    pub fn collapse(&mut self, offset: u64, len: u64) -> Result<()> {
        self.check_within(offset, len)?;
        self.check_height_room()?;
        let mut remaining = len;
        while remaining > 0 {
            let mut path = Path::new();
            let (leaf_id, rel) = self.descend_mut(offset, &mut path);
            let (removed, delta) = self.leaves[leaf_id as usize].cut(rel, remaining);
            self.extents = self.extents.wrapping_add(delta as u64);
            for &(node, idx) in path.iter() {
                self.internals[node as usize].shift_after(idx, removed.wrapping_neg());
            }
            self.total -= removed;
            remaining -= removed;
            self.rebalance(&path);
        }
        Ok(())
    }

    /// Maps `offset..offset + len` to the physical range `addr..addr + len`
    /// (holes inside become mapped). Tags of extents that start inside the
    /// range are kept. Used by garbage collection and defragmentation.
    pub fn remap(&mut self, offset: u64, len: u64, addr: u64) -> Result<()> {
        self.check_within(offset, len)?;
        Self::check_addr(addr, len)?;
        self.check_height_room()?;
        let end = offset + len;
        let tags: Vec<(u64, u16)> = self
            .extents_from(offset)?
            .take_while(|e| e.offset < end)
            .filter(|e| e.offset >= offset && e.tag != 0)
            .map(|e| (e.offset, e.tag))
            .collect();
        self.collapse(offset, len)?;
        self.insert(offset, len, addr)?;
        for (off, tag) in tags {
            self.set_tag(off, tag)?;
        }
        Ok(())
    }

    /// Like [`FlexTree::remap`], but `offset..offset + len` becomes a single
    /// extent: it keeps the tag of the extent that starts at `offset` (0
    /// when `offset` lies inside an extent) and the tags of the extents that
    /// started later inside the range are dropped. As with any insert, the
    /// new extent may merge into the extent before it under the merge limit
    /// and boundary when it has no tag. Used by garbage collection to
    /// relocate whole extents.
    pub fn remap_merged(&mut self, offset: u64, len: u64, addr: u64) -> Result<()> {
        self.check_within(offset, len)?;
        Self::check_addr(addr, len)?;
        self.check_height_room()?;
        let tag = self.get_tag(offset)?;
        self.collapse(offset, len)?;
        self.insert(offset, len, addr)?;
        if tag != 0 {
            self.set_tag(offset, tag)?;
        }
        Ok(())
    }

    /// Replaces `offset..offset + len` with one new extent of the same
    /// length at `addr..addr + len`, tagged `tag`: the extents this gives
    /// are those of [`FlexTree::collapse`], then [`FlexTree::insert`], then
    /// (for a nonzero `tag`) [`FlexTree::set_tag`] at `offset`, and the
    /// pieces the range mapped before (one per extent, as
    /// [`FlexTree::query_into`] gives them) are put in `old`.
    ///
    /// No byte moves, so when the range lies in one leaf and `tag` is
    /// nonzero (a tagged extent never merges into its predecessor), one
    /// descent edits that leaf and no shift value changes; otherwise it
    /// runs the three operations.
    pub fn replace(
        &mut self,
        offset: u64,
        len: u64,
        addr: u64,
        tag: u16,
        old: &mut Vec<Piece>,
    ) -> Result<()> {
        self.check_within(offset, len)?;
        Self::check_addr(addr, len)?;
        self.check_height_room()?;
        if tag != 0 && self.replace_in_leaf(offset, len, pack(Some(addr), tag), old) {
            return Ok(());
        }
        self.query_into(offset, len, old)?;
        self.collapse(offset, len)?;
        self.insert(offset, len, addr)?;
        if tag != 0 {
            self.set_tag(offset, tag)?;
        }
        Ok(())
    }

    /// [`FlexTree::replace`] within the leaf holding `offset`, the new
    /// extent's address and tag packed in `word`; false (and nothing
    /// changed but the path's node splits and dirty marks, which leave the
    /// extents alone) when the range runs past that leaf.
    fn replace_in_leaf(&mut self, offset: u64, len: u64, word: u64, old: &mut Vec<Piece>) -> bool {
        let mut path = Path::new();
        let (leaf_id, rel) = self.descend_mut(offset, &mut path);
        let l = &mut self.leaves[leaf_id as usize];
        let (first, first_start) = l.locate(rel);
        let end = rel + len;
        // The last entry the range touches.
        let (mut last, mut last_start) = (first, first_start);
        while last < l.count && last_start + l.len[last] < end {
            last_start += l.len[last];
            last += 1;
        }
        if last >= l.count {
            return false;
        }
        old.clear();
        let mut start = first_start;
        for i in first..=last {
            let from = start.max(rel);
            let to = (start + l.len[i]).min(end);
            old.push(Piece {
                addr: addr_of(l.word[i]).map(|a| a + (from - start)),
                len: to - from,
            });
            start += l.len[i];
        }
        // What stays of the first and last entries around the range; the
        // tail, like any piece split off an extent's middle, has no tag.
        let head = (rel > first_start).then(|| (rel - first_start, l.word[first]));
        let last_end = last_start + l.len[last];
        let tail = (end < last_end).then(|| {
            let a = addr_of(l.word[last]).map(|a| a + (end - last_start));
            (last_end - end, a)
        });
        let replaced = last + 1 - first;
        let entries = 1 + usize::from(head.is_some()) + usize::from(tail.is_some());
        if entries > replaced {
            // At most two more: `descend_mut` left room for them.
            l.open_gap(last + 1, entries - replaced);
        } else if entries < replaced {
            l.close_gap(first + entries, replaced - entries);
        }
        let mut at = first;
        if let Some((hlen, word)) = head {
            l.len[at] = hlen;
            l.word[at] = word;
            at += 1;
        }
        l.len[at] = len;
        l.word[at] = word;
        if let Some((tlen, taddr)) = tail {
            l.set_entry(at + 1, tlen, taddr, 0);
        }
        self.extents = self
            .extents
            .wrapping_add(entries as u64)
            .wrapping_sub(replaced as u64);
        if entries < replaced {
            self.rebalance(&path);
        }
        true
    }

    /// The physical address of the byte at `offset`, `None` inside a hole.
    pub fn lookup(&self, offset: u64) -> Result<Option<u64>> {
        self.check_point(offset)?;
        let (leaf, rel, _) = self.find(offset);
        let l = &self.leaves[leaf as usize];
        let (e, start) = l.locate(rel);
        Ok(addr_of(l.word[e]).map(|a| a + (rel - start)))
    }

    /// The physical pieces of `offset..offset + len` in logical order.
    pub fn query(&self, offset: u64, len: u64) -> Result<Vec<Piece>> {
        let mut out = Vec::new();
        self.query_into(offset, len, &mut out)?;
        Ok(out)
    }

    /// Like [`FlexTree::query`], appending to `out` (which is cleared first).
    pub fn query_into(&self, offset: u64, len: u64, out: &mut Vec<Piece>) -> Result<()> {
        self.check_within(offset, len)?;
        out.clear();
        let end = offset + len;
        for ext in self.extents_from(offset)? {
            let from = ext.offset.max(offset);
            let to = (ext.offset + ext.len).min(end);
            out.push(Piece {
                addr: ext.addr.map(|a| a + (from - ext.offset)),
                len: to - from,
            });
            if to == end {
                break;
            }
        }
        Ok(())
    }

    /// The whole extent that contains `offset`.
    pub fn extent_at(&self, offset: u64) -> Result<Extent> {
        self.check_point(offset)?;
        let (leaf, rel, leaf_start) = self.find(offset);
        let l = &self.leaves[leaf as usize];
        let (e, start) = l.locate(rel);
        Ok(Extent {
            offset: leaf_start + start,
            len: l.len[e],
            addr: addr_of(l.word[e]),
            tag: tag_of(l.word[e]),
        })
    }

    /// Sets the tag of the extent starting at `offset`, splitting the extent
    /// that contains `offset` first when it starts earlier. Setting tag 0
    /// inside an extent changes nothing.
    pub fn set_tag(&mut self, offset: u64, tag: u16) -> Result<()> {
        self.check_point(offset)?;
        if tag == 0 {
            let (leaf, rel, _) = self.find(offset);
            if self.leaves[leaf as usize].locate(rel).1 != rel {
                return Ok(());
            }
        }
        self.check_height_room()?;
        let mut path = Path::new();
        let (leaf_id, rel) = self.descend_mut(offset, &mut path);
        let l = &mut self.leaves[leaf_id as usize];
        let (e, start) = l.locate(rel);
        let at = if start == rel {
            e
        } else {
            l.split_entry(e, rel - start);
            self.extents += 1;
            e + 1
        };
        let l = &mut self.leaves[leaf_id as usize];
        l.word[at] = with_tag(l.word[at], tag);
        Ok(())
    }

    /// The tag of the extent starting exactly at `offset` (0 when `offset`
    /// lies inside an extent).
    pub fn get_tag(&self, offset: u64) -> Result<u16> {
        self.check_point(offset)?;
        let (leaf, rel, _) = self.find(offset);
        let l = &self.leaves[leaf as usize];
        let (e, start) = l.locate(rel);
        Ok(if start == rel { tag_of(l.word[e]) } else { 0 })
    }

    // ------------------------------------------------------------- internals

    fn check_height_room(&self) -> Result<()> {
        if self.height + 2 >= MAX_HEIGHT {
            Err(Error::SpaceOverflow)
        } else {
            Ok(())
        }
    }

    /// Read-only descent: the leaf holding `offset` (the last leaf for
    /// `offset == total`), the offset relative to it, and the leaf's start.
    pub(crate) fn find(&self, offset: u64) -> (u32, u64, u64) {
        let mut node = self.root;
        let mut rel = offset;
        for level in 0..self.height {
            let n = &self.internals[node as usize];
            let i = n.child_index(rel);
            rel -= n.shift[i];
            node = n.child[i];
            self.prefetch_node(node, level + 1 == self.height);
        }
        (node, rel, offset - rel)
    }

    /// Starts loading the search array of node `id` into the cache.
    #[inline(always)]
    pub(crate) fn prefetch_node(&self, id: u32, is_leaf: bool) {
        if is_leaf {
            self.leaves[id as usize].prefetch_search();
        } else {
            self.internals[id as usize].prefetch_search();
        }
    }

    fn alloc_leaf(&mut self, leaf: Leaf) -> u32 {
        match self.free_leaves.pop() {
            Some(id) => {
                self.leaves[id as usize] = leaf;
                id
            }
            None => self.leaves.push(leaf),
        }
    }

    fn alloc_internal(&mut self, node: Internal) -> u32 {
        match self.free_internals.pop() {
            Some(id) => {
                self.internals[id as usize] = node;
                id
            }
            None => self.internals.push(node),
        }
    }

    fn free_leaf(&mut self, id: u32) {
        let l = &mut self.leaves[id as usize];
        self.persist.get_mut().release(l.disk.take_page());
        l.count = 0;
        self.free_leaves.push(id);
    }

    fn free_internal(&mut self, id: u32) {
        let n = &mut self.internals[id as usize];
        self.persist.get_mut().release(n.disk.take_page());
        n.count = 0;
        self.free_internals.push(id);
    }

    fn node_full(&self, id: u32, is_leaf: bool) -> bool {
        if is_leaf {
            self.leaves[id as usize].count + 2 > LEAF_CAP
        } else {
            self.internals[id as usize].count >= INTERNAL_CAP
        }
    }

    /// Descends to the leaf holding `offset`, splitting full nodes on the way
    /// so that the leaf has room for two more entries and every internal node
    /// on the path for one more child. Marks the path dirty.
    pub(crate) fn descend_mut(&mut self, offset: u64, path: &mut Path) -> (u32, u64) {
        self.grow_root_if_full();
        let mut node = self.root;
        let mut rel = offset;
        let mut span = self.total;
        for level in 0..self.height {
            let idx = self.child_for_mut(node, rel, span, level + 1 == self.height);
            let n = &mut self.internals[node as usize];
            n.disk.mark_dirty();
            path.push(node, idx);
            span = n.child_span(idx, span);
            rel -= n.shift[idx];
            node = n.child[idx];
        }
        self.leaves[node as usize].disk.mark_dirty();
        (node, rel)
    }

    /// Like [`FlexTree::descend_mut`] for an insertion of `len` bytes at
    /// `offset`: adds `len` to the shift values after the path on the way
    /// down (the insertion cannot fail once it has started), so no path is
    /// kept and no second walk is needed.
    fn descend_insert(&mut self, offset: u64, len: u64) -> (u32, u64) {
        self.grow_root_if_full();
        let mut node = self.root;
        let mut rel = offset;
        let mut span = self.total;
        for level in 0..self.height {
            let idx = self.child_for_mut(node, rel, span, level + 1 == self.height);
            let n = &mut self.internals[node as usize];
            n.disk.mark_dirty();
            span = n.child_span(idx, span);
            rel -= n.shift[idx];
            n.shift_after(idx, len);
            node = n.child[idx];
        }
        self.leaves[node as usize].disk.mark_dirty();
        (node, rel)
    }

    /// Gives a full root a new parent, so that the descent can split it.
    #[inline]
    fn grow_root_if_full(&mut self) {
        if self.node_full(self.root, self.height == 0) {
            let mut r = Internal::new();
            r.count = 1;
            r.child[0] = self.root;
            self.root = self.alloc_internal(r);
            self.height += 1;
        }
    }

    /// One step of a mutating descent at internal node `node` (spanning
    /// `span` bytes): the index of the child holding `rel`, after splitting
    /// that child if it lacks room. Starts loading the child into the cache.
    #[inline(always)]
    fn child_for_mut(&mut self, node: u32, rel: u64, span: u64, child_is_leaf: bool) -> usize {
        let n = &self.internals[node as usize];
        let idx = n.child_index(rel);
        let child = n.child[idx];
        let full = if child_is_leaf {
            // Inserts and cuts touch lengths and words too.
            let l = &self.leaves[child as usize];
            l.prefetch_all();
            l.count + 2 > LEAF_CAP
        } else {
            let c = &self.internals[child as usize];
            c.prefetch_search();
            c.count >= INTERNAL_CAP
        };
        if full {
            self.split_for(node, idx, rel, span, child_is_leaf)
        } else {
            idx
        }
    }

    /// Splits child `idx` of `node` and returns the index of the half that
    /// holds `rel`.
    #[cold]
    #[inline(never)]
    fn split_for(
        &mut self,
        node: u32,
        idx: usize,
        rel: u64,
        span: u64,
        child_is_leaf: bool,
    ) -> usize {
        let n = &self.internals[node as usize];
        let at_end = rel - n.shift[idx] == n.child_span(idx, span);
        if child_is_leaf && !at_end {
            if let Some(idx) = self.share_with_sibling(node, idx, rel) {
                return idx;
            }
        }
        self.split_child(node, idx, child_is_leaf, at_end);
        let n = &self.internals[node as usize];
        if idx + 1 < n.count && rel >= n.shift[idx + 1] {
            idx + 1
        } else {
            idx
        }
    }

    /// Makes room in the full leaf `idx` of `parent` by moving entries to
    /// the emptier of its siblings when that one has room
    /// (`SHARE_MIN_ROOM` entries at least), so that the two end up equally
    /// full; returns the index of the child that then holds `rel`, `None`
    /// (nothing changed) when no sibling has room. Random inserts then
    /// split a leaf only when its neighbours are full too, which keeps
    /// leaves about 3/4 full instead of about 1/2 (a split halves).
    /// Offsets stay as they are: the parent's shift of the right one of the
    /// two leaves moves by the bytes that changed sides.
    fn share_with_sibling(&mut self, parent: u32, idx: usize, rel: u64) -> Option<usize> {
        let p = &self.internals[parent as usize];
        let count_of = |i: usize| self.leaves[p.child[i] as usize].count;
        let left = (idx > 0).then(|| (idx - 1, count_of(idx - 1)));
        let right = (idx + 1 < p.count).then(|| (idx + 1, count_of(idx + 1)));
        let (sib, sib_count) = match (left, right) {
            (Some(l), Some(r)) => {
                if r.1 < l.1 {
                    r
                } else {
                    l
                }
            }
            (Some(s), None) | (None, Some(s)) => s,
            (None, None) => return None,
        };
        if sib_count + SHARE_MIN_ROOM > LEAF_CAP {
            return None;
        }
        let (full, other) = (p.child[idx], p.child[sib]);
        let c = self.leaves[full as usize].count;
        let k = (c - sib_count) / 2;
        let (from, to) = (full as usize, other as usize);
        let mut moved = Leaf::new();
        if sib > idx {
            // The last `k` entries go to the front of the right sibling.
            let src = &mut self.leaves[from];
            moved.len[..k].copy_from_slice(&src.len[c - k..c]);
            moved.word[..k].copy_from_slice(&src.word[c - k..c]);
            src.count = c - k;
            src.disk.mark_dirty();
            let dst = &mut self.leaves[to];
            dst.open_gap(0, k);
            dst.len[..k].copy_from_slice(&moved.len[..k]);
            dst.word[..k].copy_from_slice(&moved.word[..k]);
            dst.disk.mark_dirty();
            let bytes: u64 = moved.len[..k].iter().sum();
            let p = &mut self.internals[parent as usize];
            p.shift[sib] -= bytes;
            p.disk.mark_dirty();
        } else {
            // The first `k` entries go to the end of the left sibling.
            let src = &mut self.leaves[from];
            moved.len[..k].copy_from_slice(&src.len[..k]);
            moved.word[..k].copy_from_slice(&src.word[..k]);
            src.close_gap(0, k);
            src.disk.mark_dirty();
            let dst = &mut self.leaves[to];
            let d = dst.count;
            dst.len[d..d + k].copy_from_slice(&moved.len[..k]);
            dst.word[d..d + k].copy_from_slice(&moved.word[..k]);
            dst.count = d + k;
            dst.disk.mark_dirty();
            let bytes: u64 = moved.len[..k].iter().sum();
            let p = &mut self.internals[parent as usize];
            p.shift[idx] += bytes;
            p.disk.mark_dirty();
        }
        let p = &self.internals[parent as usize];
        let (lo, hi) = (idx.min(sib), idx.max(sib));
        Some(if rel >= p.shift[hi] { hi } else { lo })
    }

    /// Splits child `idx` of `parent` in two. An `at_end` split (the coming
    /// insertion lands at the child's end) keeps three quarters on the left,
    /// so sequential appends leave nodes 3/4 full: dense (about 23 bytes an
    /// extent) yet with room for later random inserts before they split
    /// again (measured in docs/experiments/2026-11-23-flextree-append-splits.md).
    fn split_child(&mut self, parent: u32, idx: usize, child_is_leaf: bool, at_end: bool) {
        let child = self.internals[parent as usize].child[idx];
        let (base, new_id) = if child_is_leaf {
            let old = &mut self.leaves[child as usize];
            let c = old.count;
            let h = if at_end { c * 3 / 4 } else { c / 2 };
            let base = old.start_of(h);
            let mut new = Leaf::new();
            let n = c - h;
            new.len[..n].copy_from_slice(&old.len[h..c]);
            new.word[..n].copy_from_slice(&old.word[h..c]);
            new.count = n;
            old.count = h;
            old.disk.mark_dirty();
            (base, self.alloc_leaf(new))
        } else {
            let old = &mut self.internals[child as usize];
            let c = old.count;
            let h = if at_end { c * 3 / 4 } else { c / 2 };
            let base = old.shift[h];
            let mut new = Internal::new();
            let n = c - h;
            for j in 0..n {
                new.shift[j] = old.shift[h + j] - base;
            }
            new.child[..n].copy_from_slice(&old.child[h..c]);
            new.count = n;
            old.clear_from(h, c);
            old.count = h;
            old.disk.mark_dirty();
            (base, self.alloc_internal(new))
        };
        let p = &mut self.internals[parent as usize];
        let shift = p.shift[idx] + base;
        p.insert_child(idx + 1, shift, new_id);
        p.disk.mark_dirty();
    }

    /// Inserts one leaf entry; arguments are validated by the caller.
    fn insert_entry(&mut self, offset: u64, len: u64, addr: Option<u64>) {
        let (leaf_id, rel) = self.descend_insert(offset, len);
        self.total += len;
        let (merge_limit, boundary) = (self.merge_limit, self.merge_boundary);
        let l = &mut self.leaves[leaf_id as usize];
        let (e, start) = l.locate(rel);
        let pos = if e < l.count && rel > start {
            // Inside extent e: split it around the new entry with one move of
            // the entries after it.
            let w = l.word[e];
            let d = rel - start;
            let a = addr_of(w);
            let elen = l.len[e];
            l.open_gap(e + 1, 2);
            l.set_entry(e, d, a, tag_of(w));
            l.set_entry(e + 1, len, addr, 0);
            l.set_entry(e + 2, elen - d, a.map(|x| x + d), 0);
            self.extents += 2;
            return;
        } else {
            e
        };
        if pos == 0 || !l.try_merge_into(pos - 1, len, addr, merge_limit, boundary) {
            l.open_gap(pos, 1);
            l.set_entry(pos, len, addr, 0);
            self.extents += 1;
        }
    }

    /// Restores fill and height after a removal along `path`: empty nodes are
    /// dropped, underfull ones merged into a sibling when both fit in one,
    /// and a root with a single child is replaced by that child.
    fn rebalance(&mut self, path: &Path) {
        for k in (0..path.depth).rev() {
            let (parent, idx) = path.steps[k];
            let child_is_leaf = k + 1 == self.height;
            let child = self.internals[parent as usize].child[idx];
            let count = if child_is_leaf {
                self.leaves[child as usize].count
            } else {
                self.internals[child as usize].count
            };
            let cap = if child_is_leaf {
                LEAF_CAP
            } else {
                INTERNAL_CAP
            };
            if count == 0 {
                self.internals[parent as usize].remove_child(idx);
                if child_is_leaf {
                    self.free_leaf(child);
                } else {
                    self.free_internal(child);
                }
                if idx == 0 && self.internals[parent as usize].count > 0 {
                    // The new first child started where the empty one did.
                    self.internals[parent as usize].shift[0] = 0;
                }
            } else if count < cap / 4 || (child_is_leaf && count < cap / 2) {
                // An underfull node merges when both fit; a leaf under half
                // full merges when the two fill at most 3/4 of one (which
                // leaves room for inserts), so leaves that collapses and
                // in-place rewrites thinned do not stay half empty.
                let max = if count < cap / 4 {
                    cap - 2
                } else {
                    LEAF_SHARED_MAX
                };
                let pc = self.internals[parent as usize].count;
                let left = if idx > 0 {
                    Some(idx - 1)
                } else if idx + 1 < pc {
                    Some(idx)
                } else {
                    None
                };
                if let Some(left) = left {
                    self.try_merge_children(parent, left, child_is_leaf, max);
                }
            }
        }
        while self.height > 0 && self.internals[self.root as usize].count <= 1 {
            let old = self.root;
            if self.internals[old as usize].count == 1 {
                self.root = self.internals[old as usize].child[0];
            } else {
                self.root = self.alloc_leaf(Leaf::new());
                self.height = 1;
            }
            self.free_internal(old);
            self.height -= 1;
        }
    }

    /// Merges child `i + 1` of `parent` into child `i` when they fit in one
    /// (leaves: when they hold at most `max_entries` together).
    fn try_merge_children(&mut self, parent: u32, i: usize, is_leaf: bool, max_entries: usize) {
        let p = &self.internals[parent as usize];
        let (a, b) = (p.child[i], p.child[i + 1]);
        let delta = p.shift[i + 1] - p.shift[i];
        if is_leaf {
            let (ca, cb) = (self.leaves[a as usize].count, self.leaves[b as usize].count);
            if ca + cb > max_entries.min(LEAF_CAP - 2) {
                return;
            }
            let right = self.leaves[b as usize].clone();
            let left = &mut self.leaves[a as usize];
            left.len[ca..ca + cb].copy_from_slice(&right.len[..cb]);
            left.word[ca..ca + cb].copy_from_slice(&right.word[..cb]);
            left.count = ca + cb;
            left.disk.mark_dirty();
            self.free_leaf(b);
        } else {
            let (ca, cb) = (
                self.internals[a as usize].count,
                self.internals[b as usize].count,
            );
            if ca + cb + 1 > INTERNAL_CAP {
                return;
            }
            let (rs, rc) = {
                let r = &self.internals[b as usize];
                (r.shift, r.child)
            };
            let left = &mut self.internals[a as usize];
            for j in 0..cb {
                left.shift[ca + j] = rs[j] + delta;
                left.child[ca + j] = rc[j];
            }
            left.count = ca + cb;
            left.disk.mark_dirty();
            self.free_internal(b);
        }
        let p = &mut self.internals[parent as usize];
        p.remove_child(i + 1);
        p.disk.mark_dirty();
    }
}

impl Leaf {
    /// Splits entry `e` at `d` bytes from its start (strictly inside it);
    /// the right part gets tag 0. Needs room for one more entry.
    pub(crate) fn split_entry(&mut self, e: usize, d: u64) {
        let total = self.len[e];
        let w = self.word[e];
        let a = addr_of(w);
        self.open_gap(e + 1, 1);
        self.set_entry(e, d, a, tag_of(w));
        self.set_entry(e + 1, total - d, a.map(|x| x + d), 0);
    }

    /// Extends entry `j` by a new extent of `len` bytes at `addr` when it is
    /// physically contiguous, the result stays within `limit` and (for a
    /// mapped extent) does not cross a multiple of `boundary` (0: none).
    fn try_merge_into(
        &mut self,
        j: usize,
        len: u64,
        addr: Option<u64>,
        limit: u64,
        boundary: u64,
    ) -> bool {
        let cur = self.len[j];
        if limit == 0 || cur + len > limit {
            return false;
        }
        let contiguous = match (addr_of(self.word[j]), addr) {
            // `a + cur` and `b + len - 1` do not overflow: addresses are
            // below 2^48, lengths at most 2^63, and `b + len - 1` was
            // checked against MAX_ADDR.
            (Some(a), Some(b)) => {
                a + cur == b && (boundary == 0 || a / boundary == (b + len - 1) / boundary)
            }
            (None, None) => true,
            _ => false,
        };
        if contiguous {
            self.len[j] = cur + len;
        }
        contiguous
    }

    /// Removes up to `max` bytes starting at relative offset `rel` (inside the
    /// leaf), never past the leaf's end. Returns the bytes removed and the
    /// change in the number of entries. Needs room for one more entry.
    pub(crate) fn cut(&mut self, rel: u64, max: u64) -> (u64, i64) {
        let (e, start_e) = self.locate(rel);
        let target = rel + max;
        // The last entry the range touches.
        let (mut l, mut start_l) = (e, start_e);
        while start_l + self.len[l] < target && l + 1 < self.count {
            start_l += self.len[l];
            l += 1;
        }
        let l_end = start_l + self.len[l];
        let end = target.min(l_end);
        let tail = (end < l_end).then(|| {
            let a = addr_of(self.word[l]);
            (l_end - end, a.map(|x| x + (end - start_l)))
        });
        let keep_left = rel > start_e;
        if keep_left {
            self.len[e] = rel - start_e;
        }
        let from = if keep_left { e + 1 } else { e };
        let to = l + 1;
        let before = self.count as i64;
        match tail {
            Some((tlen, taddr)) => {
                if to > from {
                    self.close_gap(from + 1, to - from - 1);
                } else {
                    self.open_gap(from, 1);
                }
                self.set_entry(from, tlen, taddr, 0);
            }
            None => self.close_gap(from, to - from),
        }
        (end - rel, self.count as i64 - before)
    }
}
