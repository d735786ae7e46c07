//! The sparse index (§5.1, Figure 10): a B+-tree over the intervals of the
//! space, keyed by anchor keys, with offsets kept as shift values so that
//! resizing one interval shifts every later one in O(log n).
//!
//! An interval covers the pairs whose keys lie in `[anchor, next anchor)`;
//! the first interval's anchor is the empty key, which every key is at or
//! after. An anchor need not be a key of the store: any key above the
//! previous interval's last key and at or below the interval's first key
//! will do, so splits use the shortest such separator.
//!
//! Memory: a node keeps its anchors (pivots) as one longest common prefix
//! and the suffixes after it (`key_list::KeyList`); neighbouring anchors share long
//! prefixes, so an anchor costs a few bytes. A search compares the key with
//! a node's prefix once and then binary-searches the short suffixes. Anchors
//! are therefore not contiguous in memory: [`SparseIndex::anchor`] and its
//! neighbours return copies. `next` steps along the leaf level without a
//! search. A leaf keeps its intervals' bookkeeping in columns (cache
//! reference, size, count with the fragmentation mark in its top bit: 14
//! bytes an interval, no padding), and its columns and anchors inline: a
//! leaf is one block of memory (1.5 KiB), so a lookup that knows the leaf
//! asks at once for the lines it will search (its sizes and anchors) and
//! then for the found interval's cache word and count, without first
//! waiting for a struct that says where they lie: a binary search's
//! probes depend on one another, and a leaf is usually cold. Long anchors
//! (and a leaf over its capacity, until it splits) spill into allocations
//! of their own.
//!
//! Clones share leaves: an index and its clones (the views published for
//! readers, `read::view`) hold each leaf through an `Arc` until one of them
//! changes it, which copies it first (`leaf_mut`). A clone so costs the
//! internal nodes and a pointer a leaf, and a leaf the committer has not
//! touched since is held once. Cache words live in the leaves, so a word
//! installed in a shared leaf is installed in every index sharing it; that
//! is sound because every change of an interval (its size, count, mark,
//! anchors or neighbours) goes through `leaf_mut`, so a shared leaf
//! describes the same intervals, with the same content, in all of them.
//!
//! Invariants (restored by every method before it returns):
//! - Leaves hold intervals in key order; the leaf level is contiguous in the
//!   space: interval `i + 1` starts where interval `i` ends.
//! - The offset of an interval is the sum of the shift values on its search
//!   path plus the sizes of the intervals before it in its leaf (partial
//!   offsets are implicit, as in the FlexTree leaves).
//! - An internal node's `shift[0] == 0` and `shift[i]` is the start of child
//!   `i` relative to the node's start; `pivot[i]` (for `i > 0`) is the
//!   anchor of the first interval under child `i`.
//! - A leaf's columns (`keys`, `cache`, `size`, `count`) hold one entry
//!   per interval, at the same index.
//! - Only the root may be underfull; no node is empty except an empty root
//!   leaf, which never happens: the index always holds at least the first
//!   interval.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use smallvec::SmallVec;

use crate::index::key_list::{KeyList, SEARCHED_INLINE};

/// Intervals per leaf.
const LEAF_CAP: usize = 64;
/// Children per internal node.
const INNER_CAP: usize = 64;
/// The deepest tree: eight levels of half-full nodes hold 2^45 intervals,
/// far more than memory does. (Small, as an `IntervalPos` carries a path
/// this long and a walk copies one per interval it steps to.)
const MAX_HEIGHT: usize = 8;
const NIL: u32 = u32::MAX;
/// `count` of an interval whose pairs were not counted (after recovery).
pub const UNKNOWN_COUNT: u16 = u16::MAX;

/// The bookkeeping of one interval, as handed to the index (which keeps
/// it in per-leaf columns; [`SparseIndex::meta`] gives a [`IntervalMetaRef`]).
#[derive(Debug, Default)]
pub struct IntervalMeta {
    /// Packed cache reference (`CacheRef::pack`), 0 when not cached. Atomic
    /// so that readers can install a freshly loaded interval.
    pub cache: AtomicU64,
    /// Bytes of the interval in the space.
    pub size: u32,
    /// Pairs in the interval (`UNKNOWN_COUNT` when not known).
    pub count: u16,
    /// The interval was fragmented (more extents than half its pairs) when
    /// it was last read.
    pub fragmented: bool,
}

impl Clone for IntervalMeta {
    fn clone(&self) -> Self {
        IntervalMeta {
            cache: AtomicU64::new(self.cache.load(Ordering::Relaxed)),
            size: self.size,
            count: self.count,
            fragmented: self.fragmented,
        }
    }
}

/// One interval's bookkeeping as the index holds it: a copy of its size,
/// count and mark, and its cache reference in place (readers holding the
/// index shared install freshly loaded intervals through it).
#[derive(Clone, Copy, Debug)]
pub struct IntervalMetaRef<'a> {
    /// Packed cache reference (`CacheRef::pack`), 0 when not cached.
    pub cache: &'a AtomicU64,
    /// Bytes of the interval in the space.
    pub size: u32,
    /// Pairs in the interval (`UNKNOWN_COUNT` when not known).
    pub count: u16,
    /// The interval's fragmentation mark.
    pub fragmented: bool,
}

/// An interval to add to the index.
#[derive(Clone, Debug)]
pub struct NewInterval {
    /// Its anchor.
    pub anchor: Vec<u8>,
    /// Its bookkeeping.
    pub meta: IntervalMeta,
}

/// The fragmentation mark's bit in a leaf's `count` column.
const FRAGMENTED: u16 = 1 << 15;
/// The count bits of the `count` column; all set for an unknown count.
const COUNT_BITS: u16 = FRAGMENTED - 1;

/// A count and mark as the `count` column holds them. A count too large
/// for 15 bits (intervals split far below it) is kept as unknown, which
/// every reader of counts already handles.
fn pack_count(count: u16, fragmented: bool) -> u16 {
    count.min(COUNT_BITS) | if fragmented { FRAGMENTED } else { 0 }
}

fn unpack_count(word: u16) -> u16 {
    match word & COUNT_BITS {
        COUNT_BITS => UNKNOWN_COUNT,
        c => c,
    }
}

/// A column of a leaf: inline up to a full leaf (see `Leaf`).
type Column<T> = SmallVec<[T; LEAF_CAP]>;

/// Moves `v[from..]` into a new vector, both of exactly their size.
fn split_exact<T>(v: &mut Vec<T>, from: usize) -> Vec<T> {
    let tail = v.split_off(from);
    v.shrink_to_fit();
    tail
}

/// Bytes a column holds outside its node (when it spilled).
fn heap<T>(c: &Column<T>) -> usize {
    if c.spilled() {
        c.capacity() * size_of::<T>()
    } else {
        0
    }
}

/// Moves `v[from..]` into a new column; a column that was over a leaf's
/// capacity (a leaf about to split) goes back inline when it fits.
fn split_column<T>(v: &mut Column<T>, from: usize) -> Column<T> {
    let tail: Column<T> = v.drain(from..).collect();
    v.shrink_to_fit();
    tail
}

/// Appends a node to a node array and returns its id. The array grows by
/// an eighth at a time rather than doubling: nodes are many, and a doubled
/// array would sit up to half unused.
fn push_node<T>(nodes: &mut Vec<T>, node: T) -> u32 {
    if nodes.len() == nodes.capacity() {
        nodes.reserve_exact(nodes.len() / 8 + 4);
    }
    nodes.push(node);
    (nodes.len() - 1) as u32
}

/// A leaf: its intervals' anchors and bookkeeping, in columns (no padding
/// between fields of different sizes), all inline: a leaf is one block of
/// memory (its `Arc`'s), so a lookup asks for the lines it searches as
/// soon as it knows the leaf, instead of first loading where they lie
/// (`experiments/2026-12-08-sparse-leaf-inline.md`). A leaf over its
/// capacity (only between an insert and its split) or with long anchors
/// keeps the excess in allocations of its own.
#[repr(C)]
struct Leaf {
    /// Sizes in bytes (summed for the offset right after the search).
    size: Column<u32>,
    /// Anchors.
    keys: KeyList,
    /// Packed cache references.
    cache: Column<AtomicU64>,
    /// Pair counts and fragmentation marks (`pack_count`).
    count: Column<u16>,
    next: u32,
    prev: u32,
}

/// Bytes from a leaf's start that a lookup reads when all is inline: its
/// sizes, then its anchors.
const LEAF_SEARCHED: usize = std::mem::offset_of!(Leaf, keys) + SEARCHED_INLINE;
/// The last bytes of the anchors' and of the cache words' fields: where
/// `smallvec` 1.x (with `union`) keeps the length that says whether a
/// vector spilled, read before its first element. A layout the crate does
/// not promise, so only prefetched, never relied on; the test
/// `smallvec_keeps_its_length_after_its_elements` says when it changes.
const KEYS_TAIL: usize = std::mem::offset_of!(Leaf, cache) - 8;
const CACHE_TAIL: usize = std::mem::offset_of!(Leaf, count) - 8;

impl Clone for Leaf {
    fn clone(&self) -> Self {
        Leaf {
            keys: self.keys.clone(),
            cache: self
                .cache
                .iter()
                .map(|w| AtomicU64::new(w.load(Ordering::Relaxed)))
                .collect(),
            size: self.size.clone(),
            count: self.count.clone(),
            next: self.next,
            prev: self.prev,
        }
    }
}

impl Leaf {
    fn new() -> Self {
        Leaf {
            keys: KeyList::new(),
            cache: Column::new(),
            size: Column::new(),
            count: Column::new(),
            next: NIL,
            prev: NIL,
        }
    }

    fn len(&self) -> usize {
        self.size.len()
    }

    fn anchor(&self, i: usize) -> Vec<u8> {
        self.keys.get(i)
    }

    fn meta(&self, i: usize) -> IntervalMetaRef<'_> {
        IntervalMetaRef {
            cache: &self.cache[i],
            size: self.size[i],
            count: unpack_count(self.count[i]),
            fragmented: self.count[i] & FRAGMENTED != 0,
        }
    }

    fn set_meta(&mut self, i: usize, m: IntervalMeta) {
        self.cache[i] = m.cache;
        self.size[i] = m.size;
        self.count[i] = pack_count(m.count, m.fragmented);
    }

    /// Index of the last anchor `<= key` (0 when none is).
    #[inline]
    fn locate(&self, key: &[u8]) -> usize {
        // The search's probes depend on one another: ask for every line
        // they may touch, and for the sizes summed next, at once. Inline,
        // they lie in the leaf's first bytes, whose address needs no load.
        let at = (self as *const Leaf).cast::<u8>();
        flexsys::prefetch::at(at, LEAF_SEARCHED);
        flexsys::prefetch::at(at.wrapping_add(KEYS_TAIL), 8);
        flexsys::prefetch::at(at.wrapping_add(CACHE_TAIL), 8);
        if !self.keys_inline() {
            self.keys.prefetch();
            flexsys::prefetch::at(self.size.as_ptr().cast(), self.size.len() * 4);
        }
        self.keys.upper_bound(0, key).saturating_sub(1)
    }

    #[inline]
    fn start_of(&self, i: usize) -> u64 {
        self.size[..i].iter().map(|&s| u64::from(s)).sum()
    }

    /// Whether the anchors and sizes are all inline (`LEAF_SEARCHED`).
    #[inline]
    fn keys_inline(&self) -> bool {
        self.keys.is_inline() && !self.size.spilled()
    }

    fn span(&self) -> u64 {
        self.start_of(self.len())
    }

    /// Inserts intervals at `at`.
    fn insert(&mut self, at: usize, items: Vec<NewInterval>) {
        self.keys
            .insert_many(at, items.iter().map(|n| n.anchor.as_slice()));
        self.size.insert_many(at, items.iter().map(|n| n.meta.size));
        self.count.insert_many(
            at,
            items
                .iter()
                .map(|n| pack_count(n.meta.count, n.meta.fragmented)),
        );
        self.cache
            .insert_many(at, items.into_iter().map(|n| n.meta.cache));
        debug_assert_eq!(self.keys.len(), self.len());
    }

    /// Removes intervals `range`.
    fn remove_range(&mut self, range: std::ops::Range<usize>) {
        self.keys.remove_range(range.clone());
        self.cache.drain(range.clone());
        self.size.drain(range.clone());
        self.count.drain(range);
    }

    /// Moves intervals `from..` into a new leaf.
    fn split_off(&mut self, from: usize) -> Leaf {
        Leaf {
            keys: self.keys.split_off(from),
            cache: split_column(&mut self.cache, from),
            size: split_column(&mut self.size, from),
            count: split_column(&mut self.count, from),
            next: NIL,
            prev: NIL,
        }
    }

    /// Bytes held outside the leaf (what spilled out of it).
    fn memory(&self) -> usize {
        self.keys.memory() + heap(&self.cache) + heap(&self.size) + heap(&self.count)
    }
}

#[derive(Clone)]
struct Inner {
    /// Anchor of the first interval under each child. Pivot 0 does not
    /// route; it keeps the first anchor the node had (or is empty), which
    /// shares the other pivots' prefix and so keeps their suffixes short.
    pivot: KeyList,
    /// Start of each child relative to this node's start.
    shift: Vec<u64>,
    child: Vec<u32>,
}

impl Inner {
    #[inline]
    fn child_index(&self, key: &[u8]) -> usize {
        // The last child whose pivot is <= key; child 0 otherwise.
        self.pivot.upper_bound(1, key) - 1
    }

    /// Heap bytes held (the struct itself is counted with the node array).
    fn memory(&self) -> usize {
        self.pivot.memory() + self.shift.capacity() * 8 + self.child.capacity() * 4
    }
}

/// Where an interval is: its leaf and index, the path to it, its offset.
/// Valid until the index changes shape (splits, merges).
#[derive(Clone, Copy, Debug)]
pub struct IntervalPos {
    path: [(u32, u16); MAX_HEIGHT],
    depth: usize,
    leaf: u32,
    idx: usize,
    /// Offset of the interval in the space.
    pub offset: u64,
}

/// The sparse index. A clone copies the internal nodes and shares the
/// leaves until either side changes one (readers' views are clones; see
/// `read::view` and the module docs).
#[derive(Clone)]
pub struct SparseIndex {
    /// Shared with the copies made by `clone` until either changes them
    /// (`leaf_mut`).
    leaves: Vec<Arc<Leaf>>,
    inners: Vec<Inner>,
    free_leaves: Vec<u32>,
    free_inners: Vec<u32>,
    root: u32,
    /// Internal levels above the leaves (0: the root is a leaf).
    height: usize,
    total: u64,
    intervals: u64,
}

impl Default for SparseIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl SparseIndex {
    /// An index of one empty interval (an empty store).
    pub fn new() -> Self {
        Self::build(vec![NewInterval {
            anchor: Vec::new(),
            meta: IntervalMeta {
                count: 0,
                ..IntervalMeta::default()
            },
        }])
    }

    /// Builds an index from intervals in key order; the first anchor must be
    /// empty (callers guarantee it).
    pub fn build(intervals: Vec<NewInterval>) -> Self {
        let mut s = SparseIndex {
            leaves: Vec::new(),
            inners: Vec::new(),
            free_leaves: Vec::new(),
            free_inners: Vec::new(),
            root: 0,
            height: 0,
            total: 0,
            intervals: intervals.len() as u64,
        };
        s.total = intervals.iter().map(|n| u64::from(n.meta.size)).sum();
        // Leaves three quarters full leave room for splits.
        let per_leaf = LEAF_CAP * 3 / 4;
        s.leaves
            .reserve_exact(intervals.len().div_ceil(per_leaf).max(1));
        let mut level: Vec<(u32, Box<[u8]>, u64)> = Vec::new();
        let mut items = intervals.into_iter().peekable();
        while items.peek().is_some() {
            let chunk: Vec<NewInterval> = items.by_ref().take(per_leaf).collect();
            let first = chunk[0].anchor.clone().into_boxed_slice();
            let mut leaf = Leaf::new();
            leaf.insert(0, chunk);
            let span = leaf.span();
            let id = s.leaves.len() as u32;
            if let Some(&(prev, _, _)) = level.last() {
                s.leaf_mut(prev).next = id;
                leaf.prev = prev;
            }
            s.leaves.push(Arc::new(leaf));
            level.push((id, first, span));
        }
        if level.is_empty() {
            s.leaves.push(Arc::new(Leaf::new()));
            level.push((0, Box::default(), 0));
        }
        let per_inner = INNER_CAP * 3 / 4;
        while level.len() > 1 {
            let mut up = Vec::new();
            for chunk in level.chunks(per_inner) {
                let mut node = Inner {
                    pivot: KeyList::from_keys(chunk.iter().map(|c| &c.1[..])),
                    shift: Vec::with_capacity(chunk.len()),
                    child: Vec::with_capacity(chunk.len()),
                };
                let mut at = 0u64;
                for (id, _, span) in chunk {
                    node.shift.push(at);
                    node.child.push(*id);
                    at += span;
                }
                let id = s.inners.len() as u32;
                s.inners.push(node);
                up.push((id, chunk[0].1.clone(), at));
            }
            level = up;
            s.height += 1;
        }
        s.root = level[0].0;
        s.inners.shrink_to_fit();
        // Linear, as the build itself is (recovery, a saved index).
        #[cfg(debug_assertions)]
        s.check_invariants();
        s
    }

    /// Checks the shape the module docs promise, panicking with what is
    /// wrong: anchors strictly increasing across the leaf level, the first
    /// one empty; every internal node's `shift[0] == 0` and each next shift
    /// the previous one plus the span of the child before, with its pivot
    /// `i > 0` the first anchor under child `i`; the leaf level linked in
    /// key order; every node within its capacity and, but for the root,
    /// not empty; a leaf's columns one entry an interval; `total` and `len`
    /// the sums over the leaves.
    #[cfg(any(test, debug_assertions))]
    pub fn check_invariants(&self) {
        /// What a subtree holds: its span, intervals, first anchor and
        /// leaves (in key order).
        struct Subtree {
            span: u64,
            intervals: u64,
            first: Option<Vec<u8>>,
            leaves: Vec<u32>,
        }
        fn walk(s: &SparseIndex, node: u32, level: usize, root: bool) -> Subtree {
            if level == 0 {
                let leaf = &s.leaves[node as usize];
                let n = leaf.len();
                assert!(
                    n <= LEAF_CAP,
                    "sparse index: leaf {node} holds {n} > {LEAF_CAP}"
                );
                assert!(root || n > 0, "sparse index: leaf {node} is empty");
                assert!(
                    leaf.keys.len() == n && leaf.cache.len() == n && leaf.count.len() == n,
                    "sparse index: leaf {node}'s columns differ in length"
                );
                for i in 1..n {
                    assert!(
                        leaf.anchor(i - 1) < leaf.anchor(i),
                        "sparse index: leaf {node}: anchor {i} is not above anchor {}",
                        i - 1
                    );
                }
                return Subtree {
                    span: leaf.span(),
                    intervals: n as u64,
                    first: (n > 0).then(|| leaf.anchor(0)),
                    leaves: vec![node],
                };
            }
            let inner = &s.inners[node as usize];
            let n = inner.child.len();
            assert!(
                n <= INNER_CAP,
                "sparse index: node {node} has {n} > {INNER_CAP} children"
            );
            assert!(n > 0, "sparse index: node {node} has no child");
            assert!(
                inner.shift.len() == n && inner.pivot.len() == n,
                "sparse index: node {node}'s pivots, shifts and children differ in number"
            );
            assert_eq!(inner.shift[0], 0, "sparse index: node {node}'s first shift");
            let mut out = Subtree {
                span: 0,
                intervals: 0,
                first: None,
                leaves: Vec::new(),
            };
            for (i, &child) in inner.child.iter().enumerate() {
                assert_eq!(
                    inner.shift[i], out.span,
                    "sparse index: node {node}'s shift {i} is not the span before child {i}"
                );
                let sub = walk(s, child, level - 1, false);
                if i > 0 {
                    assert_eq!(
                        Some(inner.pivot.get(i)),
                        sub.first,
                        "sparse index: node {node}'s pivot {i} is not its child's first anchor"
                    );
                }
                out.span += sub.span;
                out.intervals += sub.intervals;
                out.first = out.first.or(sub.first);
                out.leaves.extend(sub.leaves);
            }
            out
        }
        let all = walk(self, self.root, self.height, true);
        assert_eq!(
            all.span, self.total,
            "sparse index: total is not the sum of the sizes"
        );
        assert_eq!(
            all.intervals, self.intervals,
            "sparse index: len is not the intervals held"
        );
        assert!(self.intervals > 0, "sparse index: no interval");
        assert_eq!(
            all.first.as_deref(),
            Some(&[][..]),
            "sparse index: the first anchor is not empty"
        );
        let mut last: Option<Vec<u8>> = None;
        for (i, &id) in all.leaves.iter().enumerate() {
            let leaf = &self.leaves[id as usize];
            let prev = if i == 0 { NIL } else { all.leaves[i - 1] };
            let next = all.leaves.get(i + 1).copied().unwrap_or(NIL);
            assert!(
                leaf.prev == prev && leaf.next == next,
                "sparse index: leaf {id} is not linked to its neighbours in key order"
            );
            assert!(
                !self.free_leaves.contains(&id),
                "sparse index: leaf {id} is in use and free"
            );
            if let (Some(l), true) = (&last, leaf.len() > 0) {
                assert!(
                    *l < leaf.anchor(0),
                    "sparse index: leaf {id}'s first anchor is not above the previous leaf's last"
                );
            }
            if leaf.len() > 0 {
                last = Some(leaf.anchor(leaf.len() - 1));
            }
        }
    }

    /// Total bytes covered (the space's length).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Number of intervals.
    pub fn len(&self) -> u64 {
        self.intervals
    }

    /// Leaf `id`, to change: copied first if a clone of the index shares
    /// it, so that the clone never sees the change.
    fn leaf_mut(&mut self, id: u32) -> &mut Leaf {
        Arc::make_mut(&mut self.leaves[id as usize])
    }

    /// Bytes of memory held.
    #[cfg(any(test, feature = "diagnostics"))]
    pub fn memory(&self) -> usize {
        self.memory_beside(&mut HashSet::new())
    }

    /// Bytes of memory held, counting only the leaves not in `seen` (leaves
    /// shared with copies of the index, see `clone`), which it adds.
    pub fn memory_beside(&self, seen: &mut HashSet<usize>) -> usize {
        // A leaf's allocation: the leaf and the two reference counts.
        let leaf_bytes = size_of::<Leaf>() + 2 * size_of::<usize>();
        self.leaves.capacity() * size_of::<Arc<Leaf>>()
            + self
                .leaves
                .iter()
                .filter(|l| seen.insert(Arc::as_ptr(l) as usize))
                .map(|l| leaf_bytes + l.memory())
                .sum::<usize>()
            + self.inners.capacity() * size_of::<Inner>()
            + self.inners.iter().map(Inner::memory).sum::<usize>()
            + (self.free_leaves.capacity() + self.free_inners.capacity()) * 4
    }

    /// The interval that holds `key`.
    pub fn find(&self, key: &[u8]) -> IntervalPos {
        self.descend(|n| n.child_index(key), |l| l.locate(key))
    }

    /// The last interval.
    pub fn last(&self) -> IntervalPos {
        self.descend(|n| n.child.len() - 1, |l| l.len() - 1)
    }

    /// Walks from the root, taking child `inner(node)` at each level and
    /// entry `leaf(node)` in the leaf, recording the path.
    fn descend(
        &self,
        inner: impl Fn(&Inner) -> usize,
        leaf: impl Fn(&Leaf) -> usize,
    ) -> IntervalPos {
        let mut f = IntervalPos {
            path: [(0, 0); MAX_HEIGHT],
            depth: 0,
            leaf: 0,
            idx: 0,
            offset: 0,
        };
        let mut node = self.root;
        let mut start = 0u64;
        for _ in 0..self.height {
            let n = &self.inners[node as usize];
            let i = inner(n);
            f.path[f.depth] = (node, i as u16);
            f.depth += 1;
            start += n.shift[i];
            node = n.child[i];
        }
        let l = &self.leaves[node as usize];
        f.leaf = node;
        f.idx = leaf(l);
        // The interval's cache word and count load while its offset is
        // summed (a get reads them next).
        if let (Some(c), Some(n)) = (l.cache.get(f.idx), l.count.get(f.idx)) {
            flexsys::prefetch::at((c as *const AtomicU64).cast(), 8);
            flexsys::prefetch::at((n as *const u16).cast(), 2);
        }
        f.offset = start + l.start_of(f.idx);
        f
    }

    /// The interval's bookkeeping.
    pub fn meta(&self, f: &IntervalPos) -> IntervalMetaRef<'_> {
        self.leaves[f.leaf as usize].meta(f.idx)
    }

    /// The interval's anchor (a copy: leaves keep anchors prefix-compressed).
    pub fn anchor(&self, f: &IntervalPos) -> Vec<u8> {
        self.leaves[f.leaf as usize].anchor(f.idx)
    }

    /// Orders the anchor of the interval at `f` against `key`, comparing in
    /// place (no copy of the anchor).
    pub fn compare_anchor(&self, f: &IntervalPos, key: &[u8]) -> std::cmp::Ordering {
        self.leaves[f.leaf as usize].keys.compare(f.idx, key)
    }

    /// Whether keys `first..=last` stray outside the key range of the
    /// interval at `f`: `first` below its anchor, or `last` at or above the
    /// next interval's anchor. Compares in place.
    pub fn strays(&self, f: &IntervalPos, first: &[u8], last: &[u8]) -> bool {
        use std::cmp::Ordering::Greater;
        self.compare_anchor(f, first) == Greater
            || self.after(f).is_some_and(|(leaf, i)| {
                self.leaves[leaf as usize].keys.compare(i, last) != Greater
            })
    }

    /// The anchor of the interval after `f` (its exclusive key bound), or
    /// `None` for the last interval.
    pub fn next_anchor(&self, f: &IntervalPos) -> Option<Vec<u8>> {
        self.after(f)
            .map(|(leaf, i)| self.leaves[leaf as usize].anchor(i))
    }

    /// Whether the interval at `f` covers the same keys as the interval at
    /// `g` of `other` (the same anchor and the same next anchor).
    pub fn same_range(&self, f: &IntervalPos, other: &SparseIndex, g: &IntervalPos) -> bool {
        let same = |a: (u32, usize), b: (u32, usize)| {
            let (la, lb) = (&self.leaves[a.0 as usize], &other.leaves[b.0 as usize]);
            (Arc::ptr_eq(la, lb) && a.1 == b.1) || la.keys.same_key(a.1, &lb.keys, b.1)
        };
        same((f.leaf, f.idx), (g.leaf, g.idx))
            && match (self.after(f), other.after(g)) {
                (None, None) => true,
                (Some(a), Some(b)) => same(a, b),
                _ => false,
            }
    }

    /// The leaf and index of the interval after `f`, if any.
    fn after(&self, f: &IntervalPos) -> Option<(u32, usize)> {
        if f.idx + 1 < self.leaves[f.leaf as usize].len() {
            return Some((f.leaf, f.idx + 1));
        }
        match self.leaves[f.leaf as usize].next {
            NIL => None,
            n => Some((n, 0)),
        }
    }

    /// Sets the interval's size and count, shifting every later interval.
    pub fn resize(&mut self, f: &IntervalPos, size: u32, count: u16) {
        let leaf = self.leaf_mut(f.leaf);
        let delta = i64::from(size) - i64::from(leaf.size[f.idx]);
        leaf.size[f.idx] = size;
        let c = &mut leaf.count[f.idx];
        *c = pack_count(count, *c & FRAGMENTED != 0);
        self.shift_after(f, delta);
    }

    /// Shifts every interval after the leaf on `f`'s path by `delta` (the
    /// leaf's own span changed by it).
    fn shift_after(&mut self, f: &IntervalPos, delta: i64) {
        if delta == 0 {
            return;
        }
        for &(node, i) in &f.path[..f.depth] {
            let n = &mut self.inners[node as usize];
            for s in &mut n.shift[i as usize + 1..] {
                *s = s.wrapping_add_signed(delta);
            }
        }
        self.total = self.total.wrapping_add_signed(delta);
    }

    /// Sets the interval's fragmentation mark.
    pub fn set_fragmented(&mut self, f: &IntervalPos, fragmented: bool) {
        let c = &mut self.leaf_mut(f.leaf).count[f.idx];
        *c = pack_count(unpack_count(*c), fragmented);
    }

    /// Replaces the interval at `f` by `parts` (whose sizes add up to its
    /// size); `parts[0]` keeps the interval's anchor, whatever it says.
    pub fn split(&mut self, f: &IntervalPos, parts: Vec<NewInterval>) {
        debug_assert_eq!(
            parts.iter().map(|p| u64::from(p.meta.size)).sum::<u64>(),
            u64::from(self.meta(f).size)
        );
        let mut parts = parts.into_iter();
        let Some(first) = parts.next() else { return };
        self.leaf_mut(f.leaf).set_meta(f.idx, first.meta);
        let rest: Vec<NewInterval> = parts.collect();
        if rest.is_empty() {
            return;
        }
        self.intervals += rest.len() as u64;
        let end = f.idx + 1 + rest.len();
        self.leaf_mut(f.leaf).insert(f.idx + 1, rest);
        let appended = end == self.leaves[f.leaf as usize].len();
        self.fix_overflow(f, appended);
    }

    /// Merges the interval after `f` into it (sizes and counts add up; the
    /// caller sets the cache reference). Returns false when `f` is the last.
    pub fn merge_next(&mut self, f: &IntervalPos, count: u16, cache: u64) -> bool {
        let Some(next) = self.next_anchor(f) else {
            return false;
        };
        let g = self.find(&next);
        let next_size = self.meta(&g).size;
        // Shrink the next interval to nothing (shifting nothing overall),
        // grow this one, then drop the empty interval.
        self.resize(&g, 0, 0);
        let f = self.find(&self.anchor(f));
        let m = self.meta(&f);
        let size = m.size + next_size;
        self.resize(&f, size, count);
        self.meta(&f).cache.store(cache, Ordering::Relaxed);
        let g = self.find(&next);
        self.remove(&g);
        true
    }

    /// Removes the interval at `f` and the `n - 1` after it (fewer if the
    /// index ends first), whose bytes the space no longer holds: every
    /// later interval shifts down by their sizes. `f` must not be the
    /// first interval (which the index always keeps). Returns the cache
    /// words of the intervals removed, for the caller to drop from the
    /// cache.
    pub fn remove_run(&mut self, f: &IntervalPos, n: usize) -> Vec<u64> {
        let Some(p) = self.prev(f) else {
            debug_assert!(false, "the first interval is never removed");
            return Vec::new();
        };
        // The interval before the run stays: each removal starts from it
        // (a removal may reshape the tree, so no position is kept).
        let before = self.anchor(&p);
        let mut words = Vec::with_capacity(n);
        let mut left = n;
        // A leaf at a time: the run's entries in it leave at once.
        while left > 0 {
            let p = self.find(&before);
            let Some(g) = self.next(&p) else { break };
            let leaf = &self.leaves[g.leaf as usize];
            let k = left.min(leaf.len() - g.idx);
            let run = g.idx..g.idx + k;
            let bytes: u64 = leaf.size[run.clone()].iter().map(|&s| u64::from(s)).sum();
            words.extend(leaf.cache[run].iter().map(|w| w.load(Ordering::Relaxed)));
            self.shift_after(&g, -(bytes as i64));
            self.remove_entries(&g, k);
            left -= k;
        }
        words
    }

    /// The interval after `f`.
    pub fn next(&self, f: &IntervalPos) -> Option<IntervalPos> {
        let leaf = &self.leaves[f.leaf as usize];
        let mut g = *f;
        // Intervals are contiguous: the next starts where this one ends.
        g.offset += u64::from(leaf.size[f.idx]);
        if f.idx + 1 < leaf.len() {
            g.idx += 1;
            return Some(g);
        }
        // Climb to the lowest ancestor with a next child, then take the
        // first child on every level down to a leaf.
        let level = (0..f.depth).rev().find(|&l| {
            let (node, i) = f.path[l];
            usize::from(i) + 1 < self.inners[node as usize].child.len()
        })?;
        g.path[level].1 += 1;
        let (node, i) = g.path[level];
        let mut node = self.inners[node as usize].child[usize::from(i)];
        for step in &mut g.path[level + 1..f.depth] {
            *step = (node, 0);
            node = self.inners[node as usize].child[0];
        }
        g.leaf = node;
        g.idx = 0;
        Some(g)
    }

    /// The interval before `f` (the mirror of [`SparseIndex::next`]: no
    /// search from the root, only the climb to a common ancestor).
    pub fn prev(&self, f: &IntervalPos) -> Option<IntervalPos> {
        let mut g = *f;
        if f.idx > 0 {
            g.idx -= 1;
        } else {
            // Climb to the lowest ancestor with a previous child, then take
            // the last child on every level down to a leaf.
            let level = (0..f.depth).rev().find(|&l| f.path[l].1 > 0)?;
            g.path[level].1 -= 1;
            let (node, i) = g.path[level];
            let mut node = self.inners[node as usize].child[usize::from(i)];
            for step in &mut g.path[level + 1..f.depth] {
                let last = self.inners[node as usize].child.len() - 1;
                *step = (node, last as u16);
                node = self.inners[node as usize].child[last];
            }
            g.leaf = node;
            g.idx = self.leaves[node as usize].len() - 1;
        }
        // Intervals are contiguous: this one ends where `f` starts.
        g.offset -= u64::from(self.leaves[g.leaf as usize].size[g.idx]);
        Some(g)
    }

    /// Calls `visit(anchor, offset, meta)` for every interval in order.
    pub fn for_each(&self, mut visit: impl FnMut(&[u8], u64, IntervalMetaRef<'_>)) {
        let mut node = self.root;
        for _ in 0..self.height {
            node = self.inners[node as usize].child[0];
        }
        let mut offset = 0u64;
        let mut anchor = Vec::new();
        while node != NIL {
            let leaf = &self.leaves[node as usize];
            for i in 0..leaf.len() {
                leaf.keys.write(i, &mut anchor);
                visit(&anchor, offset, leaf.meta(i));
                offset += u64::from(leaf.size[i]);
            }
            node = leaf.next;
        }
    }

    /// Removes an empty interval that is not the first.
    fn remove(&mut self, f: &IntervalPos) {
        debug_assert_eq!(self.meta(f).size, 0);
        self.remove_entries(f, 1);
    }

    /// Removes the `k` intervals from `f` on, all in `f`'s leaf, whose
    /// bytes are no longer counted (`shift_after`); `f` is not the first.
    fn remove_entries(&mut self, f: &IntervalPos, k: usize) {
        self.intervals -= k as u64;
        let leaf_id = f.leaf;
        self.leaf_mut(leaf_id).remove_range(f.idx..f.idx + k);
        let leaf = &self.leaves[leaf_id as usize];
        if leaf.len() == 0 {
            // Unlink the leaf and drop it from its parents.
            let (prev, next) = (leaf.prev, leaf.next);
            if prev != NIL {
                self.leaf_mut(prev).next = next;
            }
            if next != NIL {
                self.leaf_mut(next).prev = prev;
            }
            // A free leaf holds no memory.
            self.leaves[leaf_id as usize] = Arc::new(Leaf::new());
            self.free_leaves.push(leaf_id);
            self.remove_child(f, f.depth);
        } else if f.idx == 0 {
            let first = leaf.anchor(0);
            self.set_pivot(f, f.depth, &first);
        }
    }

    /// Removes the path's child at `level` (a node that became empty) from
    /// its parent, recursively.
    fn remove_child(&mut self, f: &IntervalPos, level: usize) {
        if level == 0 {
            // The root emptied: impossible while the first interval lives.
            return;
        }
        let (parent, i) = f.path[level - 1];
        let i = i as usize;
        let p = &mut self.inners[parent as usize];
        p.pivot.remove(i);
        p.shift.remove(i);
        p.child.remove(i);
        if p.child.is_empty() {
            self.free_inner(parent);
            self.remove_child(f, level - 1);
            return;
        }
        if i == 0 {
            // The new first child starts where the removed one did.
            let base = p.shift[0];
            for s in &mut p.shift {
                *s -= base;
            }
            let first = p.pivot.get(0);
            if level >= 2 {
                self.set_pivot(f, level - 1, &first);
            }
        }
        self.shrink_root();
    }

    /// Sets the pivot that routes to the path's node at `level` (the lowest
    /// ancestor where it is not the first child).
    fn set_pivot(&mut self, f: &IntervalPos, level: usize, pivot: &[u8]) {
        let mut l = level;
        while l > 0 {
            let (parent, i) = f.path[l - 1];
            if i > 0 {
                self.inners[parent as usize].pivot.set(i as usize, pivot);
                return;
            }
            l -= 1;
        }
    }

    fn shrink_root(&mut self) {
        while self.height > 0 && self.inners[self.root as usize].child.len() == 1 {
            let old = self.root;
            self.root = self.inners[old as usize].child[0];
            self.free_inner(old);
            self.height -= 1;
        }
    }

    /// Puts an unused internal node on the free list (holding no memory).
    fn free_inner(&mut self, id: u32) {
        self.inners[id as usize] = Inner {
            pivot: KeyList::new(),
            shift: Vec::new(),
            child: Vec::new(),
        };
        self.free_inners.push(id);
    }

    fn alloc_leaf(&mut self, leaf: Leaf) -> u32 {
        match self.free_leaves.pop() {
            Some(id) => {
                self.leaves[id as usize] = Arc::new(leaf);
                id
            }
            None => push_node(&mut self.leaves, Arc::new(leaf)),
        }
    }

    fn alloc_inner(&mut self, node: Inner) -> u32 {
        match self.free_inners.pop() {
            Some(id) => {
                self.inners[id as usize] = node;
                id
            }
            None => push_node(&mut self.inners, node),
        }
    }

    /// Splits the path's leaf (and then its ancestors) while over capacity.
    /// (`appended`: the new intervals went to the leaf's end.)
    fn fix_overflow(&mut self, f: &IntervalPos, appended: bool) {
        let leaf_id = f.leaf;
        let n = self.leaves[leaf_id as usize].len();
        if n <= LEAF_CAP {
            return;
        }
        let mut pieces: Vec<(u32, Box<[u8]>, u64)> = Vec::new();
        let mut tails: Vec<Leaf> = cut_points(n, LEAF_CAP * 3 / 4, appended)
            .into_iter()
            .rev()
            .map(|cut| self.leaf_mut(leaf_id).split_off(cut))
            .collect();
        tails.reverse();
        let mut start = self.leaves[leaf_id as usize].span();
        let mut prev = leaf_id;
        let after = self.leaves[leaf_id as usize].next;
        for mut t in tails {
            let span = t.span();
            let first: Box<[u8]> = t.anchor(0).into();
            t.prev = prev;
            let id = self.alloc_leaf(t);
            self.leaf_mut(prev).next = id;
            pieces.push((id, first, start));
            start += span;
            prev = id;
        }
        self.leaf_mut(prev).next = after;
        if after != NIL {
            self.leaf_mut(after).prev = prev;
        }
        self.add_children(f, f.depth, pieces);
    }

    /// Adds `children` (id, pivot, start relative to the path's node at
    /// `level`) right after that node in its parent, splitting upwards.
    fn add_children(
        &mut self,
        f: &IntervalPos,
        level: usize,
        children: Vec<(u32, Box<[u8]>, u64)>,
    ) {
        if level == 0 {
            // The node at level 0 is the root.
            self.grow_root(self.root, children);
            return;
        }
        let (parent, i) = f.path[level - 1];
        let i = i as usize;
        let base = self.inners[parent as usize].shift[i];
        let p = &mut self.inners[parent as usize];
        let at = i + 1..i + 1;
        p.pivot
            .insert_many(at.start, children.iter().map(|c| &c.1[..]));
        p.shift
            .splice(at.clone(), children.iter().map(|c| base + c.2));
        p.child.splice(at, children.iter().map(|c| c.0));
        let appended = i + 1 + children.len() == p.child.len();
        self.split_inner_if_needed(parent, Some((f, level - 1)), appended);
    }

    /// Splits internal node `id` if it has too many children (`appended`:
    /// the new ones went to its end).
    fn split_inner_if_needed(
        &mut self,
        id: u32,
        at: Option<(&IntervalPos, usize)>,
        appended: bool,
    ) {
        let n = self.inners[id as usize].child.len();
        if n <= INNER_CAP {
            return;
        }
        let mut pieces = Vec::new();
        let mut tails = Vec::new();
        for cut in cut_points(n, INNER_CAP * 3 / 4, appended).into_iter().rev() {
            let node = &mut self.inners[id as usize];
            let base = node.shift[cut];
            let pivot = node.pivot.split_off(cut);
            let shift: Vec<u64> = split_exact(&mut node.shift, cut)
                .iter()
                .map(|s| s - base)
                .collect();
            let child = split_exact(&mut node.child, cut);
            tails.push((
                Inner {
                    pivot,
                    shift,
                    child,
                },
                base,
            ));
        }
        tails.reverse();
        for (t, base) in tails {
            let first: Box<[u8]> = t.pivot.get(0).into();
            let nid = self.alloc_inner(t);
            pieces.push((nid, first, base));
        }
        match at {
            Some((f, level)) => self.add_children(f, level, pieces),
            // `id` is the root.
            None => self.grow_root(id, pieces),
        }
    }

    /// Puts a new root above the old root `old`, whose new siblings are
    /// `siblings` (id, pivot, start relative to `old`'s start), splitting
    /// the new root if it is too full.
    fn grow_root(&mut self, old: u32, siblings: Vec<(u32, Box<[u8]>, u64)>) {
        let node = Inner {
            pivot: KeyList::from_keys(
                std::iter::once(&[][..]).chain(siblings.iter().map(|c| &c.1[..])),
            ),
            shift: std::iter::once(0)
                .chain(siblings.iter().map(|c| c.2))
                .collect(),
            child: std::iter::once(old)
                .chain(siblings.iter().map(|c| c.0))
                .collect(),
        };
        self.root = self.alloc_inner(node);
        self.height += 1;
        self.split_inner_if_needed(self.root, None, true);
    }
}

/// Where to cut a node of `n` entries into pieces of at most `per`. After
/// an append at its end (a load in key order), every piece but the last is
/// filled to `per`: nothing will be added to them. Otherwise the pieces are
/// of equal size, so none starts nearly empty (random insertions then keep
/// leaves two thirds full instead of 58%).
fn cut_points(n: usize, per: usize, appended: bool) -> Vec<usize> {
    let pieces = n.div_ceil(per);
    (1..pieces)
        .map(|k| if appended { k * per } else { k * n / pieces })
        .collect()
}

/// The shortest key `s` with `left < s <= right` (requires `left < right`):
/// the anchor of an interval whose first key is `right` after one whose last
/// key is `left`.
pub fn separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::key_list::INLINE_BYTES;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn iv(anchor: &[u8], size: u32) -> NewInterval {
        NewInterval {
            anchor: anchor.to_vec(),
            meta: IntervalMeta {
                size,
                count: 1,
                ..IntervalMeta::default()
            },
        }
    }

    /// Steps through `s` from `f` with `step`, checking each interval
    /// against the next of `want` (anchor, offset, size) and against the
    /// place a search finds (paths too: `resize` uses them), until both
    /// end.
    fn walk<'w>(
        s: &SparseIndex,
        f: IntervalPos,
        want: impl Iterator<Item = &'w (Vec<u8>, u64, u32)>,
        step: impl Fn(&SparseIndex, &IntervalPos) -> Option<IntervalPos>,
    ) {
        let mut f = Some(f);
        for (a, o, sz) in want {
            let g = f.expect("an interval per model entry");
            assert_eq!((&s.anchor(&g), g.offset, s.meta(&g).size), (a, *o, *sz));
            let h = s.find(a);
            assert_eq!(
                (g.leaf, g.idx, g.offset, g.depth),
                (h.leaf, h.idx, h.offset, h.depth)
            );
            assert_eq!(g.path[..g.depth], h.path[..h.depth]);
            f = step(s, &g);
        }
        assert!(f.is_none());
    }

    /// The model: (anchor, size) in order.
    fn check(s: &SparseIndex, model: &[(Vec<u8>, u32)]) {
        s.check_invariants();
        let mut got = Vec::new();
        s.for_each(|a, off, m| got.push((a.to_vec(), off, m.size)));
        let mut off = 0u64;
        let want: Vec<_> = model
            .iter()
            .map(|(a, sz)| {
                let o = off;
                off += u64::from(*sz);
                (a.clone(), o, *sz)
            })
            .collect();
        assert_eq!(got, want);
        // Stepping with `next` from the first interval visits the same
        // intervals, and `prev` from the last one visits them in reverse.
        walk(s, s.find(b""), want.iter(), SparseIndex::next);
        walk(s, s.last(), want.iter().rev(), SparseIndex::prev);
        assert_eq!(s.total(), off);
        assert_eq!(s.len(), model.len() as u64);
        for (a, o, _) in &want {
            let f = s.find(a);
            assert_eq!(s.anchor(&f), &a[..]);
            assert_eq!(f.offset, *o);
            // A key just above the anchor lands in the same interval
            // (anchors in these tests never extend one another).
            let mut k = a.clone();
            k.push(0);
            let g = s.find(&k);
            assert_eq!(s.anchor(&g), &a[..]);
            assert_eq!(g.offset, *o);
        }
    }

    fn key(n: u32) -> Vec<u8> {
        format!("k{n:08}").into_bytes()
    }

    #[test]
    fn separators_are_shortest_and_between() {
        assert_eq!(separator(b"abc", b"abd"), b"abd");
        assert_eq!(separator(b"ab", b"abzz"), b"abz");
        assert_eq!(separator(b"a", b"b"), b"b");
        assert_eq!(separator(b"", b"x"), b"x");
        assert_eq!(separator(b"user1234", b"user5"), b"user5");
        let s = separator(b"apple", b"banana");
        assert!(s.as_slice() > b"apple".as_slice() && s.as_slice() <= b"banana".as_slice());
    }

    /// Anchors in the test: the empty key or an 8-byte big-endian number.
    fn num(a: &[u8]) -> u64 {
        if a.is_empty() {
            0
        } else {
            u64::from_be_bytes(a.try_into().unwrap())
        }
    }

    /// One random change of `s` (a resize, a split or a merge), made to
    /// `model` (anchor, size) too.
    fn random_op(rng: &mut StdRng, s: &mut SparseIndex, model: &mut Vec<(Vec<u8>, u32)>) {
        let i = rng.gen_range(0..model.len());
        let f = s.find(&model[i].0);
        match rng.gen_range(0..11) {
            10 => {
                // A run of whole intervals leaves (never the first one);
                // sometimes a run longer than what is left. (Rarely, so
                // that the tree still grows.)
                if i == 0 || !rng.gen_ratio(1, 20) {
                    return;
                }
                let n = rng.gen_range(1..=20);
                let gone = n.min(model.len() - i);
                let words = s.remove_run(&f, n);
                assert_eq!(words.len(), gone);
                model.drain(i..i + gone);
            }
            0..=3 => {
                let size = rng.gen_range(0..5000);
                s.resize(&f, size, 1);
                model[i].1 = size;
            }
            4..=7 => {
                // Split into 2..5 parts with anchors evenly between this
                // interval's anchor and the next one.
                let parts = rng.gen_range(2..6u64);
                let lo = num(&model[i].0);
                let hi = model.get(i + 1).map_or(u64::MAX, |n| num(&n.0));
                let gap = (hi - lo) / parts;
                if gap == 0 {
                    return;
                }
                let mut new = vec![iv(&model[i].0, 0)];
                let mut added = Vec::new();
                for k in 1..parts {
                    let a = (lo + k * gap).to_be_bytes().to_vec();
                    new.push(iv(&a, 0));
                    added.push((a, 0));
                }
                let total = model[i].1;
                let cut = if total > 0 {
                    rng.gen_range(0..=total)
                } else {
                    0
                };
                new[0].meta.size = total - cut;
                new[1].meta.size = cut;
                added[0].1 = cut;
                model[i].1 = total - cut;
                s.split(&f, new);
                for (k, a) in added.into_iter().enumerate() {
                    model.insert(i + 1 + k, a);
                }
            }
            _ => {
                if i + 1 < model.len() {
                    let merged = model[i].1 + model[i + 1].1;
                    assert!(s.merge_next(&f, 2, 0));
                    model[i].1 = merged;
                    model.remove(i + 1);
                } else {
                    assert!(!s.merge_next(&f, 2, 0));
                }
            }
        }
    }

    #[test]
    fn random_operations_match_a_model() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut model: Vec<(Vec<u8>, u32)> = vec![(Vec::new(), 0)];
        let mut s = SparseIndex::new();
        // Clones taken along the way share leaves with `s` and must not see
        // its later changes.
        let mut clones = Vec::new();
        for step in 0..6000 {
            if step % 500 == 0 {
                clones.push((s.clone(), model.clone()));
            }
            random_op(&mut rng, &mut s, &mut model);
            s.check_invariants();
            if step % 97 == 0 || step > 5900 {
                check(&s, &model);
            }
        }
        check(&s, &model);
        for (c, m) in &clones {
            check(c, m);
        }
        assert!(s.height > 1, "the test must grow internal levels");
        // Leaves that split after growing past their capacity have their
        // columns back inline; their anchors too, unless too long for it.
        let mut id = s.root;
        for _ in 0..s.height {
            id = s.inners[id as usize].child[0];
        }
        while id != NIL {
            let l = &s.leaves[id as usize];
            assert!(!l.size.spilled() && !l.cache.spilled() && !l.count.spilled());
            assert!(
                l.keys.is_inline() || l.keys.memory() > INLINE_BYTES,
                "leaf {id}: anchors of {} bytes not inline",
                l.keys.memory()
            );
            id = l.next;
        }
        // Merge everything back into one interval.
        while model.len() > 1 {
            let f = s.find(b"");
            model[0].1 += model[1].1;
            model.remove(1);
            assert!(s.merge_next(&f, 0, 0));
        }
        check(&s, &model);
        assert_eq!(s.height, 0);
    }

    #[test]
    fn nodes_split_into_pieces_that_fit() {
        assert_eq!(cut_points(65, 48, false), [32]);
        assert_eq!(cut_points(65, 48, true), [48]);
        assert_eq!(cut_points(100, 48, false), [33, 66]);
        assert_eq!(cut_points(100, 48, true), [48, 96]);
        for n in 49..500 {
            for appended in [false, true] {
                let mut bounds = vec![0];
                bounds.extend(cut_points(n, 48, appended));
                bounds.push(n);
                for w in bounds.windows(2) {
                    assert!(w[0] < w[1] && w[1] - w[0] <= 48, "{n} {bounds:?}");
                }
            }
        }
    }

    #[test]
    fn meta_columns_keep_counts_and_marks() {
        for (count, want) in [
            (0, 0),
            (16, 16),
            (0x7ffe, 0x7ffe),
            // Counts past 15 bits are kept as unknown.
            (0x7fff, UNKNOWN_COUNT),
            (0x8000, UNKNOWN_COUNT),
            (UNKNOWN_COUNT, UNKNOWN_COUNT),
        ] {
            for frag in [false, true] {
                let w = pack_count(count, frag);
                assert_eq!((unpack_count(w), w & FRAGMENTED != 0), (want, frag));
            }
        }
        let mut s = SparseIndex::build(vec![iv(b"", 10), iv(b"m", 20)]);
        let f = s.find(b"m");
        s.set_fragmented(&f, true);
        s.resize(&f, 25, 7);
        let m = s.meta(&f);
        assert_eq!((m.size, m.count, m.fragmented), (25, 7, true));
        m.cache.store(99, Ordering::Relaxed);
        s.set_fragmented(&f, false);
        let m = s.meta(&f);
        assert_eq!((m.size, m.count, m.fragmented), (25, 7, false));
        assert_eq!(m.cache.load(Ordering::Relaxed), 99);
        // The first interval is untouched.
        let m = s.meta(&s.find(b""));
        assert_eq!((m.size, m.count, m.fragmented), (10, 1, false));
        assert_eq!(s.total(), 35);
    }

    #[test]
    fn build_in_bulk_and_navigate() {
        let mut items = vec![iv(b"", 10)];
        for n in 1..5000 {
            items.push(iv(&key(n), n % 17));
        }
        let s = SparseIndex::build(items.clone());
        let model: Vec<_> = items
            .iter()
            .map(|n| (n.anchor.clone(), n.meta.size))
            .collect();
        check(&s, &model);
        let f = s.find(&key(77));
        assert_eq!(s.next_anchor(&f), Some(key(78)));
        assert_eq!(s.prev(&f).map(|p| s.anchor(&p).to_vec()), Some(key(76)));
        let first = s.find(b"");
        assert!(s.prev(&first).is_none());
        let last = s.find(b"\xff");
        assert_eq!(s.next_anchor(&last), None);
        assert_eq!(s.anchor(&last), &key(4999)[..]);
        assert_eq!(s.last().offset, last.offset);
        assert_eq!(s.anchor(&s.last()), &key(4999)[..]);
        assert!(s.memory() > 0);
        // Built leaves of short anchors are one block each.
        assert!(s.leaves.iter().all(|l| l.keys_inline() && l.memory() == 0));
        // In-place comparisons against the anchors, across leaves too.
        for n in [1, 77, 1000, 4998] {
            let f = s.find(&key(n));
            let mut above = key(n);
            above.push(0);
            assert_eq!(s.compare_anchor(&f, &key(n)), std::cmp::Ordering::Equal);
            assert_eq!(s.compare_anchor(&f, &above), std::cmp::Ordering::Less);
            assert_eq!(
                s.compare_anchor(&f, &key(n - 1)),
                std::cmp::Ordering::Greater
            );
            assert!(!s.strays(&f, &key(n), &above));
            assert!(s.strays(&f, &key(n - 1), &key(n)), "below the anchor");
            assert!(s.strays(&f, &key(n), &key(n + 1)), "at the next anchor");
        }
        assert!(!s.strays(&last, &key(4999), b"\xff\xff"), "no next anchor");
    }

    #[test]
    fn clones_share_the_leaves_neither_changed() {
        let mut items = vec![iv(b"", 10)];
        for n in 1..5000 {
            items.push(iv(&key(n), 10));
        }
        let mut s = SparseIndex::build(items);
        let c = s.clone();
        let extra = |s: &SparseIndex, c: &SparseIndex| {
            let mut seen = HashSet::new();
            s.memory_beside(&mut seen);
            c.memory_beside(&mut seen)
        };
        let shared = extra(&s, &c);
        assert!(shared * 4 < s.memory(), "{shared} of {}", s.memory());
        // A cache word installed in a shared leaf is in both.
        s.meta(&s.find(&key(10))).cache.store(7, Ordering::Relaxed);
        assert_eq!(c.meta(&c.find(&key(10))).cache.load(Ordering::Relaxed), 7);
        // A change copies the leaf: the clone keeps the old size and word.
        let f = s.find(&key(10));
        s.resize(&f, 99, 1);
        s.meta(&f).cache.store(8, Ordering::Relaxed);
        let g = c.find(&key(10));
        assert_eq!(c.meta(&g).size, 10);
        assert_eq!(c.meta(&g).cache.load(Ordering::Relaxed), 7);
        assert_eq!(c.find(&key(11)).offset, s.find(&key(11)).offset - 89);
        assert!(extra(&s, &c) > shared, "the copied leaf is counted");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any sequence of resizes, splits and merges keeps the index's
        /// shape (checked after every operation) and its content equal to
        /// the model's.
        #[test]
        fn any_operations_keep_the_shape(seed in 0u64..u64::MAX, steps in 1usize..400) {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut model: Vec<(Vec<u8>, u32)> = vec![(Vec::new(), 0)];
            let mut s = SparseIndex::new();
            for _ in 0..steps {
                random_op(&mut rng, &mut s, &mut model);
                s.check_invariants();
            }
            check(&s, &model);
        }
    }

    #[test]
    fn smallvec_keeps_its_length_after_its_elements() {
        // The prefetches of `Leaf::locate` (`LEAF_SEARCHED`, `KEYS_TAIL`,
        // `CACHE_TAIL`) assume it; if it fails, move them (nothing else
        // depends on it).
        fn elements_first<T>(v: &Column<T>) -> bool {
            std::ptr::eq(
                v.as_ptr().cast::<u8>(),
                (v as *const Column<T>).cast::<u8>(),
            ) && size_of::<Column<T>>() == LEAF_CAP * size_of::<T>() + 8
        }
        let leaf = Leaf::new();
        assert!(elements_first(&leaf.size));
        assert!(elements_first(&leaf.cache));
        let bytes: SmallVec<[u8; INLINE_BYTES]> = SmallVec::new();
        let start = (&bytes as *const SmallVec<[u8; INLINE_BYTES]>).cast::<u8>();
        assert!(std::ptr::eq(bytes.as_ptr(), start));
    }

    /// A broken shape is reported, not passed over.
    #[test]
    #[should_panic(expected = "sparse index: total is not the sum of the sizes")]
    fn a_wrong_total_fails_the_check() {
        let mut s = SparseIndex::new();
        s.total += 1;
        s.check_invariants();
    }
}
