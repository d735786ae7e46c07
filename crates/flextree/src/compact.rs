//! What the tree's memory holds, and a dense read-only copy of a tree.
//!
//! [`FlexTree::node_memory`] splits the node memory into the nodes in the
//! tree, the nodes on the free lists, and the slots of the arenas' blocks
//! never handed out, and gives the leaves' fill; it reads counters only
//! (O(1), no walk).
//!
//! [`FlexTree::copy_compacted_from`] makes `self` a copy of a tree with the
//! same extents (offsets, lengths, addresses, tags, in order) packed into
//! full nodes: every leaf but the last of the leaf level holds `LEAF_CAP`
//! entries, every internal node but the last of its level `INTERNAL_CAP`
//! children, and nothing is on a free list. A mutable tree keeps its nodes
//! about 3/4 full to absorb inserts; a copy that is only read (a snapshot's)
//! needs no room, so it costs `1 / fill` less.
//!
//! Invariants of the copy:
//! - It satisfies every invariant `check_invariants` checks (the last node
//!   of a level may be as small as one entry or child; a root internal node
//!   has at least two children because a level of one node is the root).
//! - Its nodes are dirty with no page and its tree-file page lists are
//!   empty: it is a tree of its own, never checkpointed over the source's
//!   file. So the copy never takes the source's `persist` lock and never
//!   waits for a running checkpoint (a full clone does).
//! - It reuses the memory of `self`'s arenas (no block is freed or
//!   allocated while the copy fits in them): memory touched before costs
//!   far less to write than fresh memory.

use std::sync::atomic::Ordering;

use crate::file_pages::FilePages;
use crate::node::{Internal, Leaf, INTERNAL_CAP, LEAF_CAP};
use crate::tree::FlexTree;

/// Where a tree's node memory goes (from [`FlexTree::node_memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeMemory {
    /// Bytes held by the arenas and their tables (as
    /// [`FlexTree::node_memory_usage`] counts them).
    pub held_bytes: u64,
    /// Leaves in the tree.
    pub leaves: u64,
    /// Leaves on the free list (held, reused by later splits).
    pub free_leaves: u64,
    /// Internal nodes in the tree.
    pub internals: u64,
    /// Internal nodes on the free list.
    pub free_internals: u64,
    /// Bytes of the arena slots never handed out (the rest of the last
    /// blocks).
    pub unused_slot_bytes: u64,
    /// Leaf entries (extents and holes).
    pub extents: u64,
    /// Bytes of one leaf node.
    pub leaf_bytes: u64,
    /// Bytes of one internal node.
    pub internal_bytes: u64,
}

impl NodeMemory {
    /// Entries per leaf in the tree over the leaf capacity (0 for no leaf).
    pub fn leaf_fill(&self) -> f64 {
        if self.leaves == 0 {
            0.0
        } else {
            self.extents as f64 / (self.leaves as f64 * LEAF_CAP as f64)
        }
    }

    /// Bytes of the nodes in the tree.
    pub fn tree_bytes(&self) -> u64 {
        self.leaves * self.leaf_bytes + self.internals * self.internal_bytes
    }

    /// Bytes of the nodes on the free lists.
    pub fn free_bytes(&self) -> u64 {
        self.free_leaves * self.leaf_bytes + self.free_internals * self.internal_bytes
    }
}

impl FlexTree {
    /// Where the node memory goes (see [`NodeMemory`]); O(1).
    pub fn node_memory(&self) -> NodeMemory {
        let (leaf_bytes, internal_bytes) = (size_of::<Leaf>() as u64, size_of::<Internal>() as u64);
        let leaf_slots = self.leaves.slots() as u64;
        let internal_slots = self.internals.slots() as u64;
        let (leaf_ids, internal_ids) = (self.leaves.len() as u64, self.internals.len() as u64);
        let free_leaves = self.free_leaves.len() as u64;
        let free_internals = self.free_internals.len() as u64;
        NodeMemory {
            held_bytes: self.node_memory_usage() as u64,
            leaves: leaf_ids - free_leaves,
            free_leaves,
            internals: internal_ids - free_internals,
            free_internals,
            unused_slot_bytes: (leaf_slots - leaf_ids) * leaf_bytes
                + (internal_slots - internal_ids) * internal_bytes,
            extents: self.extents,
            leaf_bytes,
            internal_bytes,
        }
    }

    /// Makes `self` a copy of `source` with the same extents packed into
    /// full nodes (see the module docs), writing into the arena memory
    /// `self` already holds. Takes time in proportion to the extents; reads
    /// `source` only (any number of readers may share it meanwhile).
    pub fn copy_compacted_from(&mut self, source: &FlexTree) {
        self.leaves.reset();
        self.internals.reset();
        self.free_leaves.clear();
        self.free_internals.clear();
        // The leaf level: each leaf's id and its start in the space.
        let mut level: Vec<(u32, u64)> =
            Vec::with_capacity((source.extents as usize).div_ceil(LEAF_CAP).max(1));
        let mut out = Leaf::new();
        let mut start = 0u64;
        let mut out_span = 0u64;
        source.for_each_leaf(|l| {
            let mut i = 0;
            while i < l.count {
                let n = (LEAF_CAP - out.count).min(l.count - i);
                let c = out.count;
                out.len[c..c + n].copy_from_slice(&l.len[i..i + n]);
                out.word[c..c + n].copy_from_slice(&l.word[i..i + n]);
                out_span += l.len[i..i + n].iter().sum::<u64>();
                out.count = c + n;
                i += n;
                if out.count == LEAF_CAP {
                    level.push((self.leaves.push(out.clone()), start));
                    start += out_span;
                    out_span = 0;
                    out.count = 0;
                }
            }
        });
        if out.count > 0 || level.is_empty() {
            level.push((self.leaves.push(out.clone()), start));
        }
        // Internal levels until one node is left: the root.
        let mut height = 0;
        while level.len() > 1 {
            let mut up = Vec::with_capacity(level.len().div_ceil(INTERNAL_CAP));
            let mut node = Internal::new();
            for group in level.chunks(INTERNAL_CAP) {
                let base = group[0].1;
                node.clear_from(0, INTERNAL_CAP);
                for (j, &(child, child_start)) in group.iter().enumerate() {
                    node.shift[j] = child_start - base;
                    node.child[j] = child;
                }
                node.count = group.len();
                up.push((self.internals.push(node.clone()), base));
            }
            level = up;
            height += 1;
        }
        self.root = level[0].0;
        self.height = height;
        self.total = source.total;
        self.extents = source.extents;
        self.merge_limit = source.merge_limit;
        self.merge_boundary = source.merge_boundary;
        *self.version.get_mut() = source.version.load(Ordering::Relaxed);
        *self.persist.get_mut() = FilePages::default();
    }

    /// Calls `f` on every leaf, in logical order.
    fn for_each_leaf(&self, mut f: impl FnMut(&Leaf)) {
        if self.height == 0 {
            f(&self.leaves[self.root as usize]);
            return;
        }
        // (internal node, next child) from the root down.
        let mut stack: Vec<(u32, usize)> = vec![(self.root, 0)];
        while let Some(top) = stack.last_mut() {
            let (node, next) = (top.0, top.1);
            let n = &self.internals[node as usize];
            if next == n.count {
                stack.pop();
                continue;
            }
            top.1 = next + 1;
            let child = n.child[next];
            if stack.len() == self.height {
                // Children are leaves: start loading the next one too.
                if next + 1 < n.count {
                    self.leaves[n.child[next + 1] as usize].prefetch_all();
                }
                f(&self.leaves[child as usize]);
            } else {
                stack.push((child, 0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::node::LEAF_CAP;
    use crate::{Extent, FlexTree};

    fn extents(t: &FlexTree) -> Vec<Extent> {
        t.extents_from(0).unwrap().collect()
    }

    /// A tree of `n` random inserts, some tagged, some collapses and holes.
    fn shuffled(n: u64) -> FlexTree {
        let mut t = FlexTree::new();
        t.set_merge_limit(4096);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..n {
            let len = 1 + rnd() % 300;
            let at = rnd() % (t.len() + 1);
            if i % 7 == 3 {
                t.insert_hole(at, len).unwrap();
            } else {
                t.insert(at, len, (rnd() % (1 << 40)) & !0xFFF).unwrap();
            }
            if i % 5 == 0 {
                let off = rnd() % t.len();
                t.set_tag(off, (i % 60_000) as u16 + 1).unwrap();
            }
            if i % 11 == 0 && t.len() > 1000 {
                let off = rnd() % (t.len() - 500);
                t.collapse(off, 1 + rnd() % 400).unwrap();
            }
        }
        t
    }

    #[test]
    fn a_compacted_copy_has_the_same_extents_in_full_nodes() {
        for n in [0u64, 1, 63, 64, 65, 2000, 30_000] {
            let source = shuffled(n);
            source.check_invariants();
            let mut copy = FlexTree::new();
            copy.copy_compacted_from(&source);
            copy.check_invariants();
            assert_eq!(copy.len(), source.len());
            assert_eq!(copy.extent_count(), source.extent_count());
            assert_eq!(extents(&copy), extents(&source), "n = {n}");
            // Lookups descend through the copy's internal nodes.
            for off in (0..source.len()).step_by(97) {
                assert_eq!(copy.lookup(off).unwrap(), source.lookup(off).unwrap());
                assert_eq!(copy.get_tag(off).unwrap(), source.get_tag(off).unwrap());
            }
            let m = copy.node_memory();
            assert_eq!(m.free_leaves + m.free_internals, 0);
            assert_eq!(
                m.leaves,
                source.extent_count().div_ceil(LEAF_CAP as u64).max(1)
            );
            if n >= 2000 {
                let s = source.node_memory();
                assert!(
                    m.leaf_fill() > 0.99 && m.leaf_fill() > s.leaf_fill(),
                    "copy fill {} source fill {}",
                    m.leaf_fill(),
                    s.leaf_fill()
                );
                assert!(m.tree_bytes() < s.tree_bytes());
            }
        }
    }

    #[test]
    fn a_compacted_copy_reuses_its_memory_and_can_be_cloned_and_mutated() {
        let big = shuffled(30_000);
        let mut copy = FlexTree::new();
        copy.copy_compacted_from(&big);
        let held = copy.node_memory_usage();
        // A second copy of a smaller tree into the same memory.
        let small = shuffled(5_000);
        copy.copy_compacted_from(&small);
        copy.check_invariants();
        assert_eq!(extents(&copy), extents(&small));
        assert_eq!(copy.node_memory_usage(), held, "no block freed or added");
        // And back to the big one.
        copy.copy_compacted_from(&big);
        copy.check_invariants();
        assert_eq!(extents(&copy), extents(&big));
        assert_eq!(copy.node_memory_usage(), held);
        // Full nodes split as any other when the copy is changed.
        let mut c = copy.clone();
        for i in 0..3000u64 {
            c.insert((i * 7919) % c.len(), 10, 1 << 30).unwrap();
        }
        c.collapse(100, 50_000).unwrap();
        c.check_invariants();
    }

    /// A full leaf shares its entries with a sibling that has room before
    /// it splits: random inserts leave leaves about 3/4 full (halving
    /// splits alone leave them about 1/2 to 2/3 full).
    #[test]
    fn random_inserts_keep_leaves_three_quarters_full() {
        let mut t = FlexTree::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = x % (t.len() + 1);
            t.insert(at, 1 + x % 100, (i << 12) & 0xFF_FFFF_F000)
                .unwrap();
        }
        t.check_invariants();
        let fill = t.node_memory().leaf_fill();
        assert!(fill > 0.72, "leaf fill {fill}");
    }

    #[test]
    fn node_memory_accounts_for_every_node() {
        let mut t = shuffled(20_000);
        let m = t.node_memory();
        assert_eq!(m.extents, t.extent_count());
        assert!(m.leaf_fill() > 0.3 && m.leaf_fill() <= 1.0);
        assert!(m.tree_bytes() + m.free_bytes() + m.unused_slot_bytes <= m.held_bytes);
        // Collapsing most of the space frees nodes onto the free lists.
        t.collapse(0, t.len() * 9 / 10).unwrap();
        let after = t.node_memory();
        assert!(after.free_leaves > 0);
        assert!(after.held_bytes >= m.held_bytes, "arenas never shrink");
    }
}
