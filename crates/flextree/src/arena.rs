//! The arena that owns the tree's nodes and hands out `u32` ids.
//!
//! Invariants:
//! - Ids are dense (`0..len`). Every slot of every block is an initialized
//!   `T` (a new block is filled with clones of the node that opened it), so
//!   `runs[id >> RUN_BITS]` points at `RUN` initialized nodes for every
//!   `id < runs.len() * RUN`, and only those ids are accepted.
//! - A node never moves once allocated, except when its block is copied on
//!   write (below): the arena grows by whole blocks instead of reallocating
//!   one vector, so growth never copies the tree (no latency spike on the
//!   insert that crosses a power of two) and never holds twice the memory.
//! - The first `SMALL_IDS` ids live in blocks of `RUN` nodes from the global
//!   allocator, so a small tree stays small. Later blocks hold at least a
//!   huge page (2 MiB) of nodes, start on a huge-page boundary and are
//!   advised `MADV_HUGEPAGE`: a random descent into a big tree then misses
//!   one TLB entry per 2 MiB of nodes instead of one per 4 KiB, which is
//!   much of the cost of a random insert (measured in
//!   docs/experiments/2026-11-23-flextree-insert-path.md). On Linux they are fresh anonymous mappings of
//!   their own (`mapped`): memory recycled by an allocator may already be
//!   backed by small pages, which the advice does not change. Block `b`
//!   holds the ids `first_id(b)..first_id(b) + nodes`, so the block of an id
//!   is computed, not looked up.
//! - Blocks are reference counted (`Arc<Block>`) and may be shared with
//!   read-only arenas made by [`Arena::share`] (a snapshot's): sharing costs
//!   one reference a block, not a copy. A block's nodes are written only
//!   through an arena whose `Arc` is the block's only reference
//!   (`Arc::get_mut` succeeded): a write to a shared block first copies it
//!   into a new block of this arena (copy on write) and points this
//!   arena's runs at the copy, so the nodes another arena reads never
//!   change. `owned[b]` caches "this arena's `Arc` of block `b` is the only
//!   one": it is set only when that was checked (or the block was created
//!   here) through `&mut self`, and cleared by `share` for every block it
//!   hands out, which is the only place an arena's `Arc`s are cloned.
//!   Since `share` runs through `&self` and a write through `&mut self`,
//!   whatever lets the writer have `&mut` (a lock, a join) orders the
//!   clearing before the write's check.
//! - Every block is freed (its nodes dropped, its memory returned the way it
//!   was obtained) exactly once, when its last `Arc` goes; `runs` only
//!   borrows into the blocks this arena holds.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ops::{Index, IndexMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flexsys::huge_pages::HUGE_PAGE;

const RUN_BITS: u32 = 8;
/// Ids per run: the granularity of the id-to-address table.
const RUN: usize = 1 << RUN_BITS;
/// Ids held in blocks of one run before the arena switches to huge blocks.
const SMALL_IDS: usize = 16 * RUN;

/// One allocation of `nodes` initialized nodes.
struct Block<T> {
    ptr: NonNull<T>,
    nodes: usize,
    /// The id of its first node.
    first: usize,
    /// The nodes' layout (`bytes` held when not `mapped`).
    layout: Layout,
    /// Whether the memory is a mapping of its own (`huge_pages::map`) instead of
    /// a global-allocator allocation.
    mapped: bool,
}

// SAFETY: a block owns its nodes as a `Box<[T]>` does; shared through an
// `Arc`, it hands out `&T` to every holder and `&mut T` only to a holder
// whose `Arc` is the only one (module invariants). So it may be sent when
// `T` may be sent and shared (the last holder, on any thread, drops the
// nodes; other holders may read them meanwhile), and shared when `T` may.
unsafe impl<T: Send + Sync> Send for Block<T> {}
// SAFETY: as for `Send`: shared access to a block is shared access to `T`.
unsafe impl<T: Sync> Sync for Block<T> {}

/// Nodes of one kind, addressed by id.
pub(crate) struct Arena<T> {
    /// The first node of each run of `RUN` ids, pointing into `blocks`.
    runs: Vec<NonNull<[T; RUN]>>,
    /// The allocations, in id order, possibly shared with other arenas.
    blocks: Vec<Arc<Block<T>>>,
    /// Per block: this arena's `Arc` is known to be the only one.
    owned: Vec<AtomicBool>,
    len: usize,
}

// SAFETY: the raw pointers in `runs` point into blocks the arena holds an
// `Arc` of; `&self` hands out `&T` only and `&mut self` hands out `&mut T`
// only into blocks no one else holds, so an arena may cross threads when its
// blocks may.
unsafe impl<T: Send + Sync> Send for Arena<T> {}
// SAFETY: as for `Send`: shared access to the arena is shared access to `T`
// (`owned` is atomic).
unsafe impl<T: Sync> Sync for Arena<T> {}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Arena {
            runs: Vec::new(),
            blocks: Vec::new(),
            owned: Vec::new(),
            len: 0,
        }
    }
}

/// The block holding `id` (see the module invariants: blocks of one run
/// up to `SMALL_IDS`, then blocks of `block_nodes(SMALL_IDS)`).
#[inline(always)]
fn block_of<T>(id: usize) -> usize {
    if id < SMALL_IDS {
        id >> RUN_BITS
    } else {
        SMALL_IDS / RUN + (id - SMALL_IDS) / block_nodes::<T>(SMALL_IDS)
    }
}

/// Nodes in the next block of an arena that holds `len` ids.
fn block_nodes<T>(len: usize) -> usize {
    if len < SMALL_IDS {
        RUN
    } else {
        // At least one huge page of nodes, in whole runs.
        HUGE_PAGE
            .div_ceil(size_of::<T>().max(1))
            .next_multiple_of(RUN)
    }
}

impl<T: Clone> Block<T> {
    /// A block of `nodes` nodes, node `k` being `node(k)` (`nodes` a
    /// positive multiple of `RUN`). A block of at least a huge page starts
    /// on a huge-page boundary and is advised to use huge pages.
    fn filled_with(first: usize, nodes: usize, mut node: impl FnMut(usize) -> T) -> Self {
        debug_assert!(nodes > 0 && nodes.is_multiple_of(RUN));
        let size = size_of::<T>().max(1) * nodes;
        let huge = size >= HUGE_PAGE;
        let align = if huge { HUGE_PAGE } else { align_of::<T>() };
        let layout = Layout::from_size_align(size, align).expect("node block layout");
        let mapped = if huge {
            flexsys::huge_pages::map(size)
        } else {
            None
        };
        let ptr = match mapped {
            Some(ptr) => ptr.cast::<T>(),
            None => {
                // SAFETY: `layout` has a non-zero size (`nodes > 0`, size at
                // least 1 per node).
                let raw = unsafe { alloc(layout) }.cast::<T>();
                let Some(ptr) = NonNull::new(raw) else {
                    handle_alloc_error(layout)
                };
                if huge {
                    flexsys::huge_pages::advise(raw.cast(), size);
                }
                ptr
            }
        };
        let raw = ptr.as_ptr();
        for k in 0..nodes {
            // SAFETY: `k < nodes`, so the slot lies inside the allocation,
            // which is aligned for `T`; each slot is written once, before
            // any read. (A panicking clone leaks the block, never exposes
            // an uninitialized slot: the block is not registered yet.)
            unsafe { raw.add(k).write(node(k)) };
        }
        Block {
            ptr,
            nodes,
            first,
            layout,
            mapped: mapped.is_some(),
        }
    }
}

impl<T> Drop for Block<T> {
    fn drop(&mut self) {
        // SAFETY: the block's `nodes` slots were initialized by `filled` and
        // are dropped here once.
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.nodes,
            ));
        }
        if self.mapped {
            // SAFETY: a mapped block's memory came from
            // `huge_pages::map(self.layout.size())`, and the block drops
            // once, its nodes dropped above.
            unsafe { flexsys::huge_pages::unmap(self.ptr.cast(), self.layout.size()) };
        } else {
            // SAFETY: the memory was allocated by `filled` with `layout`.
            unsafe { dealloc(self.ptr.as_ptr().cast(), self.layout) };
        }
    }
}

impl<T: Clone> Arena<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of ids handed out.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends `node` and returns its id.
    pub fn push(&mut self, node: T) -> u32 {
        let id = self.len;
        if id == self.runs.len() * RUN {
            self.add_block(&node, block_nodes::<T>(id));
        }
        self[id] = node;
        self.len += 1;
        id as u32
    }

    /// Registers a new block of `nodes` clones of `node` after the last.
    fn add_block(&mut self, node: &T, nodes: usize) {
        self.add_block_with(nodes, |_| node.clone());
    }

    /// Registers a new block of `nodes` nodes after the last, node `k` of
    /// the block being `node(k)`.
    fn add_block_with(&mut self, nodes: usize, node: impl FnMut(usize) -> T) {
        let first = self.runs.len() * RUN;
        debug_assert_eq!(block_of::<T>(first), self.blocks.len());
        debug_assert_eq!(nodes, block_nodes::<T>(first));
        let block = Block::filled_with(first, nodes, node);
        for r in 0..nodes / RUN {
            self.runs.push(block.run(r));
        }
        self.blocks.push(Arc::new(block));
        self.owned.push(AtomicBool::new(true));
    }

    /// Makes block `b` this arena's alone: when another arena shares it,
    /// copies its nodes into a new block and points the runs at the copy
    /// (the other arenas keep the old block, unchanged).
    #[cold]
    #[inline(never)]
    fn own_block(&mut self, b: usize) {
        if Arc::get_mut(&mut self.blocks[b]).is_none() {
            let old = &self.blocks[b];
            // SAFETY: `old` holds `nodes` initialized nodes and the arena's
            // `Arc` keeps it alive; no one writes a shared block.
            let copy = Block::filled_with(old.first, old.nodes, |k| unsafe {
                (*old.ptr.as_ptr().add(k)).clone()
            });
            let first_run = copy.first / RUN;
            for r in 0..copy.nodes / RUN {
                self.runs[first_run + r] = copy.run(r);
            }
            self.blocks[b] = Arc::new(copy);
        }
        *self.owned[b].get_mut() = true;
    }

    /// A read-only arena holding the same nodes, sharing every block with
    /// `self` (one reference a block, no node copied). A later write
    /// through `self` to a shared block copies the block first, so the
    /// returned arena's nodes never change. O(blocks).
    pub fn share(&self) -> Arena<T> {
        for o in &self.owned {
            // Relaxed: a write through `&mut self` comes after this call
            // returns by whatever gave the writer `&mut` (module invariants).
            o.store(false, Ordering::Relaxed);
        }
        Arena {
            runs: self.runs.clone(),
            blocks: self.blocks.clone(),
            owned: self.blocks.iter().map(|_| AtomicBool::new(false)).collect(),
            len: self.len,
        }
    }

    /// Bytes of the blocks `self` holds that `other` does not share (the
    /// memory `self` adds to `other`'s), and of `self`'s tables.
    pub fn memory_not_shared_with(&self, other: &Arena<T>) -> usize {
        self.blocks
            .iter()
            .enumerate()
            .filter(|(b, block)| other.blocks.get(*b).is_none_or(|o| !Arc::ptr_eq(o, block)))
            .map(|(_, block)| block.layout.size())
            .sum::<usize>()
            + self.table_bytes()
    }

    /// Blocks shared with another arena (diagnostics and tests).
    pub fn shared_blocks(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| Arc::strong_count(b) > 1)
            .count()
    }

    /// Slots held (handed out or not): the ids the blocks could hold.
    pub fn slots(&self) -> usize {
        self.runs.len() * RUN
    }

    /// Forgets every id but keeps the blocks (and the nodes in them, which
    /// later pushes overwrite): the next ids are handed out from 0 again in
    /// memory already touched.
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// Drops every node (blocks shared with other arenas stay theirs).
    pub fn clear(&mut self) {
        self.runs.clear();
        self.blocks.clear();
        self.owned.clear();
        self.len = 0;
    }

    /// Bytes of node memory held (whole blocks, shared or not) and of the
    /// tables.
    pub fn memory_usage(&self) -> usize {
        self.blocks.iter().map(|b| b.layout.size()).sum::<usize>() + self.table_bytes()
    }

    /// Bytes of the id-to-address tables.
    fn table_bytes(&self) -> usize {
        self.runs.capacity() * size_of::<NonNull<[T; RUN]>>()
            + self.blocks.capacity() * (size_of::<Arc<Block<T>>>() + size_of::<Block<T>>())
            + self.owned.capacity()
    }
}

impl<T> Block<T> {
    /// The `r`-th run of the block (`r < nodes / RUN`).
    fn run(&self, r: usize) -> NonNull<[T; RUN]> {
        assert!(r < self.nodes / RUN, "run {r} past the block");
        // SAFETY: `r * RUN + RUN <= nodes`: the run lies in the block.
        let run = unsafe { self.ptr.as_ptr().add(r * RUN) };
        NonNull::new(run.cast()).expect("inside a block")
    }
}

impl<T: Clone> Clone for Arena<T> {
    /// A deep copy with the same block sizes (so the same huge-page
    /// placement).
    fn clone(&self) -> Self {
        let mut copy = Arena {
            runs: Vec::with_capacity(self.runs.len()),
            blocks: Vec::with_capacity(self.blocks.len()),
            owned: Vec::with_capacity(self.blocks.len()),
            len: self.len,
        };
        let mut id = 0;
        for b in &self.blocks {
            // Each node cloned once, straight into its slot.
            copy.add_block_with(b.nodes, |k| self[id + k].clone());
            id += b.nodes;
        }
        copy
    }

    /// Makes `self` a deep copy of `source`, writing into the blocks `self`
    /// already has where they have the sizes `source`'s have (block sizes
    /// depend only on the first id a block holds, so two arenas share a
    /// prefix of them): memory the process has touched before costs far
    /// less to write than fresh memory (a fault per page, on a virtual
    /// machine one the host serves too).
    fn clone_from(&mut self, source: &Self) {
        let reused = self
            .blocks
            .iter()
            .zip(&source.blocks)
            .take_while(|(a, b)| a.nodes == b.nodes)
            .count();
        self.blocks.truncate(reused);
        self.owned.truncate(reused);
        let runs: usize = self.blocks.iter().map(|b| b.nodes / RUN).sum();
        self.runs.truncate(runs);
        let mut id = 0;
        for b in &source.blocks[..reused] {
            for k in 0..b.nodes {
                self[id + k].clone_from(&source[id + k]);
            }
            id += b.nodes;
        }
        for b in &source.blocks[reused..] {
            self.add_block_with(b.nodes, |k| source[id + k].clone());
            id += b.nodes;
        }
        self.len = source.len;
    }
}

impl<T> Index<usize> for Arena<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, id: usize) -> &T {
        let run = self.runs[id >> RUN_BITS];
        // SAFETY: `run` points at `RUN` initialized nodes owned by `blocks`
        // (module invariants) and `&self` keeps them alive and unchanged.
        unsafe { &run.as_ref()[id % RUN] }
    }
}

impl<T: Clone> IndexMut<usize> for Arena<T> {
    #[inline(always)]
    fn index_mut(&mut self, id: usize) -> &mut T {
        let b = block_of::<T>(id);
        if !*self.owned[b].get_mut() {
            self.own_block(b);
        }
        let mut run = self.runs[id >> RUN_BITS];
        // SAFETY: as in `index`; `&mut self` makes this the only reference
        // into the arena, runs never overlap, and `owned[b]` means no other
        // arena holds the block (module invariants), so the node is not
        // aliased.
        unsafe { &mut run.as_mut()[id % RUN] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn ids_are_dense_and_stable() {
        let mut a = Arena::new();
        for i in 0..1000u32 {
            assert_eq!(a.push(i * 3), i);
        }
        assert_eq!(a.len(), 1000);
        assert_eq!(a[999], 2997);
        a[5] = 7;
        assert_eq!(a[5], 7);
        assert!(a.memory_usage() >= 1000 * 4);
        a.clear();
        assert_eq!(a.len(), 0);
        assert_eq!(a.push(1), 0);
        assert_eq!(a[0], 1);
        // A reset keeps the blocks and hands out the ids again.
        let slots = a.slots();
        a.reset();
        assert_eq!((a.len(), a.slots()), (0, slots));
        assert_eq!(a.push(8), 0);
        assert_eq!(a[0], 8);
    }

    /// A node of a realistic size: big arenas switch to huge-page blocks.
    /// The `Rc` counts the live clones.
    #[derive(Clone)]
    struct Big([u64; 128], #[allow(dead_code)] Rc<()>);

    #[test]
    fn huge_blocks_hold_nodes_like_small_ones() {
        let token = Rc::new(());
        let mut a = Arena::new();
        let n = SMALL_IDS + 3 * block_nodes::<Big>(SMALL_IDS) + 5;
        for i in 0..n {
            let mut node = Big([0; 128], token.clone());
            node.0[i % 128] = i as u64;
            assert_eq!(a.push(node), i as u32);
        }
        // Small blocks of one run, then huge-page-aligned blocks.
        assert_eq!(a.blocks.len(), SMALL_IDS / RUN + 4);
        for b in &a.blocks[SMALL_IDS / RUN..] {
            assert_eq!(b.ptr.as_ptr() as usize % HUGE_PAGE, 0);
            assert!(b.layout.size() >= HUGE_PAGE);
            // Mappings of their own on Linux; heap blocks elsewhere and
            // under Miri (which thereby checks that path).
            assert_eq!(b.mapped, cfg!(all(target_os = "linux", not(miri))));
        }
        assert!(a.blocks[..SMALL_IDS / RUN].iter().all(|b| !b.mapped));
        for i in 0..n {
            assert_eq!(a[i].0[i % 128], i as u64, "id {i}");
        }
        let held: usize = a.blocks.iter().map(|b| b.layout.size()).sum();
        assert!(a.memory_usage() >= held && held >= n * size_of::<Big>());

        // A clone is deep and keeps the block structure.
        let mut c = a.clone();
        assert_eq!(c.len(), n);
        c[n - 1].0[0] = 99;
        assert_ne!(a[n - 1].0[0], 99);
        let c_held: usize = c.blocks.iter().map(|b| b.layout.size()).sum();
        assert_eq!(c_held, held);
        for i in 0..n {
            assert_eq!(c[i].0[i % 128], a[i].0[i % 128]);
        }

        // Every slot (pushed or filler) is dropped exactly once.
        let slots = held / size_of::<Big>();
        assert_eq!(Rc::strong_count(&token), 1 + 2 * slots);
        drop(c);
        assert_eq!(Rc::strong_count(&token), 1 + slots);
        a.clear();
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn clone_from_writes_into_the_blocks_it_has_and_is_as_deep_as_clone() {
        let token = Rc::new(());
        let filled = |n: usize, base: u64| {
            let mut a = Arena::new();
            for i in 0..n {
                let mut node = Big([0; 128], token.clone());
                node.0[i % 128] = base + i as u64;
                a.push(node);
            }
            a
        };
        let n = SMALL_IDS + 2 * block_nodes::<Big>(SMALL_IDS) + 5;
        let source = filled(n, 0);
        let slots = |a: &Arena<Big>| -> usize { a.blocks.iter().map(|b| b.nodes).sum() };
        // A smaller arena: its blocks are a prefix of the source's sizes.
        let mut d = filled(SMALL_IDS + 3, 1_000_000);
        let kept: Vec<_> = d.blocks.iter().map(|b| b.ptr).collect();
        d.clone_from(&source);
        assert_eq!(d.len(), n);
        assert_eq!(d.blocks.len(), source.blocks.len());
        for (b, p) in d.blocks.iter().zip(&kept) {
            assert_eq!(
                b.ptr, *p,
                "a block of the same size is written, not replaced"
            );
        }
        for i in 0..n {
            assert_eq!(d[i].0[i % 128], source[i].0[i % 128], "id {i}");
        }
        d[0].0[0] = 77;
        assert_ne!(source[0].0[0], 77, "the copy is deep");
        assert_eq!(Rc::strong_count(&token), 1 + slots(&source) + slots(&d));
        // A smaller source: the blocks past its own are dropped.
        let small = filled(3, 5);
        d.clone_from(&small);
        assert_eq!(d.len(), 3);
        assert_eq!(d.blocks.len(), 1);
        assert_eq!(d[2].0[2], 7);
        assert_eq!(
            Rc::strong_count(&token),
            1 + slots(&source) + slots(&small) + slots(&d)
        );
        drop((d, small, source));
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn a_write_to_a_shared_block_copies_it_and_the_last_holder_frees_it() {
        let token = Rc::new(());
        let mut a = Arena::new();
        let n = SMALL_IDS + block_nodes::<Big>(SMALL_IDS) + 3;
        for i in 0..n {
            let mut node = Big([0; 128], token.clone());
            node.0[0] = i as u64;
            a.push(node);
        }
        let slots = a.slots();
        assert_eq!(Rc::strong_count(&token), 1 + slots);
        let view = a.share();
        // Sharing copies no node.
        assert_eq!(Rc::strong_count(&token), 1 + slots);
        assert_eq!(a.shared_blocks(), a.blocks.len());
        assert!(view.memory_not_shared_with(&a) < a.memory_usage() / 100);
        // A write into a small block and one into the huge block: each
        // block is copied once, the view keeps the old nodes.
        a[5].0[0] = 1_000;
        a[6].0[0] = 1_001;
        a[n - 1].0[0] = 2_000;
        let copied = RUN + block_nodes::<Big>(SMALL_IDS);
        assert_eq!(Rc::strong_count(&token), 1 + slots + copied);
        assert_eq!(a.shared_blocks(), a.blocks.len() - 2);
        assert_eq!((view[5].0[0], view[6].0[0]), (5, 6));
        assert_eq!(view[n - 1].0[0], (n - 1) as u64);
        assert_eq!((a[5].0[0], a[6].0[0], a[n - 1].0[0]), (1_000, 1_001, 2_000));
        for i in (0..n).filter(|&i| ![5, 6, n - 1].contains(&i)) {
            assert_eq!((a[i].0[0], view[i].0[0]), (i as u64, i as u64));
        }
        let extra = view.memory_not_shared_with(&a);
        assert!(extra >= copied * size_of::<Big>(), "{extra}");
        // The view's old blocks go with it; the arena's copies stay.
        drop(view);
        assert_eq!(Rc::strong_count(&token), 1 + slots);
        assert_eq!(a.shared_blocks(), 0);
        // A write after the view is gone copies nothing.
        let before = std::ptr::from_ref(&a[7]);
        a[7].0[0] = 7_000;
        assert_eq!(std::ptr::from_ref(&a[7]), before);
        assert_eq!(Rc::strong_count(&token), 1 + slots);
        drop(a);
        assert_eq!(Rc::strong_count(&token), 1);
    }

    /// A reader thread reads a shared arena while the owner rewrites every
    /// node: the reader sees only the values as of the share (Miri checks
    /// that no write touches memory the reader reads).
    #[test]
    fn readers_of_a_shared_arena_never_see_the_owners_writes() {
        let n = if cfg!(miri) {
            3 * RUN
        } else {
            SMALL_IDS + 2 * RUN
        };
        let mut a = Arena::new();
        for i in 0..n {
            a.push(i as u64);
        }
        for round in 1..4u64 {
            let view = a.share();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..3 {
                        for i in 0..n {
                            assert_eq!(view[i], i as u64 + (round - 1) * 1_000_000);
                        }
                    }
                });
                for i in 0..n {
                    a[i] = i as u64 + round * 1_000_000;
                }
            });
            drop(view);
        }
        assert_eq!(a[n - 1], (n - 1) as u64 + 3_000_000);
    }

    #[test]
    fn index_past_the_runs_panics() {
        let mut a = Arena::new();
        a.push(1u8);
        let r = std::panic::catch_unwind(|| a[RUN]);
        assert!(r.is_err());
    }

    #[test]
    fn arenas_cross_threads() {
        let mut a = Arena::new();
        for i in 0..SMALL_IDS + 10 {
            a.push(i);
        }
        let a = std::thread::spawn(move || {
            assert_eq!(a[SMALL_IDS + 9], SMALL_IDS + 9);
            a
        })
        .join()
        .unwrap();
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(a[7], 7));
            s.spawn(|| assert_eq!(a[SMALL_IDS], SMALL_IDS));
        });
    }
}
