//! In-memory FlexTree nodes and their packed extent encoding.
//!
//! Invariants (the *normal form* every operation restores before it returns):
//! - A leaf's entries are contiguous. The partial offset of entry `i` is the
//!   sum of the lengths before it; it is not stored but computed by the
//!   search scan (docs/DESIGN.md explains why: a 16-byte entry and no
//!   per-insert rewrite of the later entries' offsets).
//! - An internal node's `shift[0] == 0` and `shift[i]` is the start of child
//!   `i` relative to the node's start, strictly increasing. The unused slots
//!   `shift[count..]` hold `u64::MAX` (above any offset), so the child
//!   search is a fixed-step binary search over the whole array. The shift value of
//!   a child pointer doubles as the pivot that separates it from its left
//!   sibling, so an internal node stores one array, not two.
//! - The effective offset of any entry is the sum of the shift values on its
//!   search path plus its partial offset (§3.1 of the paper).
//! - `disk.dirty` is set on every node modified since the last checkpoint and
//!   on all of its ancestors, so a clean node roots a clean subtree.
//! - `disk.page` is the tree-file node id (page and slot, see `leaf_pack`)
//!   of the node's last committed image (0 when it has none); `disk.pending` is the page a running (or
//!   failed) checkpoint wrote the node to, meaningful only between that
//!   checkpoint's node writes and its commit.
//! - The `disk` fields are atomics so that a checkpoint can run through
//!   `&FlexTree` while readers search the same nodes. Only a checkpoint
//!   (serialized by the tree's persist mutex) writes them through `&self`;
//!   mutators write them through `&mut self` (`get_mut`, plain stores).
//!   Relaxed ordering suffices: the caller's lock that separates mutators
//!   from a checkpoint orders their accesses.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Entries per leaf node.
pub(crate) const LEAF_CAP: usize = 64;
/// Children per internal node (a power of two: see `child_index`).
pub(crate) const INTERNAL_CAP: usize = 128;
const _: () = assert!(INTERNAL_CAP.is_power_of_two());

/// A node's relation to the tree file (see the module invariants).
pub(crate) struct DiskState {
    dirty: AtomicBool,
    page: AtomicU32,
    pending: AtomicU32,
}

impl DiskState {
    /// A node never written: dirty, no page.
    pub fn new() -> Self {
        DiskState {
            dirty: AtomicBool::new(true),
            page: AtomicU32::new(0),
            pending: AtomicU32::new(0),
        }
    }

    /// A node loaded from `page`: clean.
    pub fn loaded(page: u32) -> Self {
        DiskState {
            dirty: AtomicBool::new(false),
            page: AtomicU32::new(page),
            pending: AtomicU32::new(0),
        }
    }

    /// Marks the node modified since the last checkpoint.
    #[inline(always)]
    pub fn mark_dirty(&mut self) {
        *self.dirty.get_mut() = true;
    }

    /// Marks the node to be written by the running checkpoint (which holds
    /// the persist mutex: the only writer through `&self`), for nodes it
    /// moves out of sparse pages; the caller marks the ancestors too.
    pub fn force_write(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Whether the node changed since the last checkpoint.
    #[inline]
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Relaxed)
    }

    /// Whether a checkpoint must write the node: it changed, or it was
    /// never written.
    #[inline]
    pub fn needs_write(&self) -> bool {
        self.is_dirty() || self.page() == 0
    }

    /// The page of the node's last committed image (0: none).
    #[inline]
    pub fn page(&self) -> u32 {
        self.page.load(Ordering::Relaxed)
    }

    /// Forgets the node's page (the node is being freed) and returns it.
    pub fn take_page(&mut self) -> u32 {
        std::mem::take(self.page.get_mut())
    }

    /// Records the page a running checkpoint wrote the node to.
    pub fn set_pending(&self, page: u32) {
        self.pending.store(page, Ordering::Relaxed);
    }

    /// Adopts the pending page once its checkpoint is durable: the node is
    /// clean. Returns the page of the previous image (0: none).
    pub fn commit(&self) -> u32 {
        self.dirty.store(false, Ordering::Relaxed);
        self.page
            .swap(self.pending.load(Ordering::Relaxed), Ordering::Relaxed)
    }
}

impl Clone for DiskState {
    fn clone(&self) -> Self {
        DiskState {
            dirty: AtomicBool::new(self.is_dirty()),
            page: AtomicU32::new(self.page()),
            pending: AtomicU32::new(self.pending.load(Ordering::Relaxed)),
        }
    }
}

/// Bits of a packed address word that hold the physical address.
const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
/// The address value that marks a hole.
pub(crate) const HOLE_ADDR: u64 = ADDR_MASK;

/// Packs an extent's address (`None`: hole) and tag into one word.
#[inline]
pub(crate) fn pack(addr: Option<u64>, tag: u16) -> u64 {
    addr.unwrap_or(HOLE_ADDR) | (u64::from(tag) << ADDR_BITS)
}

/// The tag of a packed word.
#[inline]
pub(crate) fn tag_of(word: u64) -> u16 {
    (word >> ADDR_BITS) as u16
}

/// The word with its tag replaced.
#[inline]
pub(crate) fn with_tag(word: u64, tag: u16) -> u64 {
    (word & ADDR_MASK) | (u64::from(tag) << ADDR_BITS)
}

/// The physical address of a packed word, `None` for a hole.
#[inline]
pub(crate) fn addr_of(word: u64) -> Option<u64> {
    match word & ADDR_MASK {
        HOLE_ADDR => None,
        a => Some(a),
    }
}

/// A leaf node: up to `LEAF_CAP` extents in structure-of-arrays layout.
///
/// `repr(C)` keeps `count` in front, in the cache line of the first lengths,
/// so a visit does not fetch a line for it alone.
#[derive(Clone)]
#[repr(C)]
pub(crate) struct Leaf {
    pub count: usize,
    pub disk: DiskState,
    /// Length of each entry.
    pub len: [u64; LEAF_CAP],
    /// Packed address and tag of each entry.
    pub word: [u64; LEAF_CAP],
}

impl Leaf {
    pub fn new() -> Self {
        Leaf {
            count: 0,
            disk: DiskState::new(),
            len: [0; LEAF_CAP],
            word: [0; LEAF_CAP],
        }
    }

    /// The entry holding relative offset `rel` and its start; `(count,
    /// span)` when `rel` is at or past the end.
    ///
    /// The scan adds up four lengths per step and branches once per step,
    /// then settles the entry inside the step (measured in docs/experiments/2026-11-23-flextree-insert-path.md).
    #[inline]
    pub fn locate(&self, rel: u64) -> (usize, u64) {
        let lens = &self.len[..self.count.min(LEAF_CAP)];
        let mut start = 0u64;
        let mut chunks = lens.chunks_exact(4);
        let mut i = 0;
        for c in chunks.by_ref() {
            let e1 = start + c[0];
            let e2 = e1 + c[1];
            let e3 = e2 + c[2];
            let e4 = e3 + c[3];
            if rel < e4 {
                return if rel < e2 {
                    if rel < e1 {
                        (i, start)
                    } else {
                        (i + 1, e1)
                    }
                } else if rel < e3 {
                    (i + 2, e2)
                } else {
                    (i + 3, e3)
                };
            }
            start = e4;
            i += 4;
        }
        for &len in chunks.remainder() {
            let end = start + len;
            if rel < end {
                return (i, start);
            }
            start = end;
            i += 1;
        }
        (i, start)
    }

    /// The start of entry `i` relative to the leaf.
    #[inline]
    pub fn start_of(&self, i: usize) -> u64 {
        self.len[..i].iter().sum()
    }

    /// Sets entry `i` to `len` bytes at `addr` with `tag`.
    #[inline]
    pub fn set_entry(&mut self, i: usize, len: u64, addr: Option<u64>, tag: u16) {
        self.len[i] = len;
        self.word[i] = pack(addr, tag);
    }

    /// Opens a gap of `n` entries at `at`, moving the entries after it.
    pub fn open_gap(&mut self, at: usize, n: usize) {
        let c = self.count;
        self.len.copy_within(at..c, at + n);
        self.word.copy_within(at..c, at + n);
        self.count = c + n;
    }

    /// Removes entries `at..at + n`.
    pub fn close_gap(&mut self, at: usize, n: usize) {
        let c = self.count;
        self.len.copy_within(at + n..c, at);
        self.word.copy_within(at + n..c, at);
        self.count = c - n;
    }
}

/// An internal node: up to `INTERNAL_CAP` children with shift values.
///
/// `repr(C)` keeps `count` in front, in the cache line of the first shifts.
#[derive(Clone)]
#[repr(C)]
pub(crate) struct Internal {
    pub count: usize,
    pub disk: DiskState,
    /// Start of each child relative to this node's start.
    pub shift: [u64; INTERNAL_CAP],
    /// Arena ids of the children (leaves or internals by level).
    pub child: [u32; INTERNAL_CAP],
}

impl Internal {
    pub fn new() -> Self {
        let mut shift = [u64::MAX; INTERNAL_CAP];
        shift[0] = 0;
        Internal {
            count: 0,
            disk: DiskState::new(),
            shift,
            child: [0; INTERNAL_CAP],
        }
    }

    /// Index of the child covering relative offset `rel` (the last child
    /// for `rel` at or past the end).
    ///
    /// A binary search with a fixed number of steps over the whole array:
    /// `shift[0] == 0 <= rel` and the unused slots hold `u64::MAX`, so no
    /// step depends on `count`, each is a compare and a conditional move,
    /// and the steps unroll (measured in docs/experiments/2026-11-23-flextree-insert-path.md).
    #[inline]
    pub fn child_index(&self, rel: u64) -> usize {
        let mut base = 0usize;
        let mut half = INTERNAL_CAP / 2;
        while half > 0 {
            // `base + half < INTERNAL_CAP` always; the mask only lets the
            // compiler see it.
            if self.shift[(base + half) & (INTERNAL_CAP - 1)] <= rel {
                base += half;
            }
            half /= 2;
        }
        base
    }

    /// Marks slots `from..to` unused.
    #[inline]
    pub fn clear_from(&mut self, from: usize, to: usize) {
        self.shift[from..to].fill(u64::MAX);
    }

    /// Inserts a child at `at`.
    pub fn insert_child(&mut self, at: usize, shift: u64, child: u32) {
        let c = self.count;
        self.shift.copy_within(at..c, at + 1);
        self.child.copy_within(at..c, at + 1);
        self.shift[at] = shift;
        self.child[at] = child;
        self.count = c + 1;
    }

    /// Removes the child at `at`.
    pub fn remove_child(&mut self, at: usize) {
        let c = self.count;
        self.shift.copy_within(at + 1..c, at);
        self.child.copy_within(at + 1..c, at);
        self.shift[c - 1] = u64::MAX;
        self.count = c - 1;
    }

    /// Span of child `i` given this node's span.
    #[inline]
    pub fn child_span(&self, i: usize, span: u64) -> u64 {
        let end = if i + 1 < self.count {
            self.shift[i + 1]
        } else {
            span
        };
        end - self.shift[i]
    }

    /// Adds `delta` (wrapping, for negative deltas) to shifts after child `i`.
    #[inline]
    pub fn shift_after(&mut self, i: usize, delta: u64) {
        for s in &mut self.shift[i + 1..self.count] {
            *s = s.wrapping_add(delta);
        }
    }
}

/// Hints the CPU to start loading every cache line that overlaps the first
/// `bytes` bytes of `obj` (at most its size).
///
/// Descending the tree is a chain of dependent cache misses: the search in
/// a node cannot start before the node arrives. Prefetching all the lines
/// the next node's visit will touch as soon as its id is known turns their
/// misses into parallel ones (measured in docs/experiments/2026-11-23-flextree-insert-path.md). Lines are
/// counted from the aligned line that holds the first byte, so a node that
/// does not start on a line boundary is still covered to its last byte.
#[inline(always)]
fn prefetch_lines<T>(obj: &T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let start = obj as *const T as *const i8;
        let line = start.wrapping_sub(start as usize % 64);
        // A constant count (one more line than `bytes` needs when aligned)
        // lets the loop unroll into plain prefetch instructions.
        for k in 0..bytes / 64 + 1 {
            // SAFETY: a prefetch is only a hint: it never faults and has no
            // architectural effect, whatever the address. The address is
            // formed with wrapping arithmetic, so forming it is defined too.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.wrapping_add(k * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (obj, bytes);
}

impl Leaf {
    /// Starts loading what a search reads: the header and the lengths.
    #[inline(always)]
    pub fn prefetch_search(&self) {
        prefetch_lines(self, std::mem::offset_of!(Leaf, word));
    }

    /// Starts loading the whole leaf (an update moves words too).
    #[inline(always)]
    pub fn prefetch_all(&self) {
        prefetch_lines(self, size_of::<Leaf>());
    }
}

impl Internal {
    /// Starts loading what a search reads: the header and the shifts.
    #[inline(always)]
    pub fn prefetch_search(&self) {
        prefetch_lines(self, std::mem::offset_of!(Internal, child));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_index_matches_a_linear_count() {
        for count in 1..=INTERNAL_CAP {
            let mut n = Internal::new();
            for i in 0..count {
                n.insert_child(i, i as u64 * 3, i as u32);
            }
            for rel in 0..count as u64 * 3 + 3 {
                let want = n.shift[1..count].iter().filter(|&&x| x <= rel).count();
                assert_eq!(n.child_index(rel), want, "count={count} rel={rel}");
            }
            // Removing children keeps the padding.
            while n.count > 1 {
                n.remove_child(n.count / 2);
                let c = n.count;
                assert!(n.shift[c..].iter().all(|&s| s == u64::MAX));
                assert_eq!(n.child_index(u64::MAX - 1), c - 1);
            }
        }
    }

    #[test]
    fn locate_matches_a_linear_scan() {
        let mut l = Leaf::new();
        for count in 0..=LEAF_CAP {
            l.count = count;
            for i in 0..count {
                l.len[i] = 1 + (i as u64 * 7) % 5;
            }
            let span: u64 = l.len[..count].iter().sum();
            for rel in 0..=span + 1 {
                let mut start = 0;
                let mut want = (count, span);
                for i in 0..count {
                    if rel < start + l.len[i] {
                        want = (i, start);
                        break;
                    }
                    start += l.len[i];
                }
                assert_eq!(l.locate(rel), want, "count={count} rel={rel}");
            }
        }
    }

    #[test]
    fn packing_round_trips() {
        let w = pack(Some(crate::MAX_ADDR), 0xBEEF);
        assert_eq!(addr_of(w), Some(crate::MAX_ADDR));
        assert_eq!(tag_of(w), 0xBEEF);
        let h = pack(None, 7);
        assert_eq!(addr_of(h), None);
        assert_eq!(tag_of(h), 7);
        assert_eq!(tag_of(with_tag(h, 9)), 9);
        assert_eq!(addr_of(with_tag(h, 9)), None);
    }

    #[test]
    fn locate_finds_the_entry_and_its_start() {
        let mut l = Leaf::new();
        for (i, len) in [3u64, 1, 5].into_iter().enumerate() {
            l.set_entry(i, len, Some(100), 0);
        }
        l.count = 3;
        assert_eq!(l.locate(0), (0, 0));
        assert_eq!(l.locate(2), (0, 0));
        assert_eq!(l.locate(3), (1, 3));
        assert_eq!(l.locate(4), (2, 4));
        assert_eq!(l.locate(8), (2, 4));
        assert_eq!(l.locate(9), (3, 9));
        assert_eq!(l.start_of(2), 4);
    }
}
