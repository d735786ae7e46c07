//! The tree's invariants as code: [`FlexTree::check_invariants`] walks the
//! whole tree and panics, naming the node, at the first violation of the
//! node normal form (`node`) or of the tree's invariants (`tree`).
//!
//! It is a test aid (the property tests call it after every operation); it
//! costs a walk of every node, so nothing calls it on a hot path.
//!
//! Invariants checked:
//! - The root is at depth 0 and every leaf at depth `height`; `height` is
//!   below `MAX_HEIGHT`.
//! - An internal node has `1..=INTERNAL_CAP` children (the root at least 2:
//!   a root with one child is replaced by it), `shift[0] == 0`, shifts
//!   strictly increasing and below the node's span (so no child is empty and
//!   effective offsets increase), and `u64::MAX` in every unused slot.
//! - A leaf has `0..=LEAF_CAP` entries, none empty, and only the root leaf
//!   of an empty tree has none; the lengths of its entries add up to the
//!   span its parent gives it, so the leaf level is contiguous and the
//!   spans add up to `len()`.
//! - A mapped entry's physical range lies within `0..=MAX_ADDR`.
//! - `extent_count()` is the number of leaf entries.
//! - Every node is reached once, by one parent, and is not on a free list;
//!   a clean node (`disk.dirty` unset) has only clean children.

use std::collections::HashSet;

use crate::extent::MAX_ADDR;
use crate::node::{addr_of, INTERNAL_CAP, LEAF_CAP};
use crate::tree::{FlexTree, MAX_HEIGHT};

impl FlexTree {
    /// Test aid: checks every structural invariant of the tree (see the
    /// `invariants` module) and panics with a description of the first one
    /// broken. Walks every node: meant for tests, after each operation.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        assert!(
            self.height < MAX_HEIGHT,
            "tree: height {} not below {MAX_HEIGHT}",
            self.height
        );
        let mut walk = Walk {
            tree: self,
            seen_leaves: HashSet::new(),
            seen_internals: HashSet::new(),
            entries: 0,
        };
        walk.node(self.root, 0, self.total, true);
        assert_eq!(
            walk.entries, self.extents,
            "tree: extent_count() is {} but the leaves hold {} entries",
            self.extents, walk.entries
        );
        for &id in &self.free_leaves {
            assert!(
                !walk.seen_leaves.contains(&id),
                "tree: leaf {id} is both in the tree and on the free list"
            );
        }
        for &id in &self.free_internals {
            assert!(
                !walk.seen_internals.contains(&id),
                "tree: internal node {id} is both in the tree and on the free list"
            );
        }
    }
}

struct Walk<'a> {
    tree: &'a FlexTree,
    seen_leaves: HashSet<u32>,
    seen_internals: HashSet<u32>,
    entries: u64,
}

impl Walk<'_> {
    /// Checks the subtree of node `id` at `depth`, which must span `span`
    /// bytes; returns whether the node is dirty.
    fn node(&mut self, id: u32, depth: usize, span: u64, is_root: bool) -> bool {
        let t = self.tree;
        if depth == t.height {
            assert!(
                (id as usize) < t.leaves.len(),
                "tree: leaf id {id} outside the arena"
            );
            assert!(self.seen_leaves.insert(id), "tree: leaf {id} reached twice");
            let l = &t.leaves[id as usize];
            assert!(
                l.count <= LEAF_CAP,
                "tree: leaf {id} holds {} entries (cap {LEAF_CAP})",
                l.count
            );
            assert!(
                l.count > 0 || (is_root && t.total == 0),
                "tree: leaf {id} is empty but is not the root of an empty tree"
            );
            let mut sum = 0u64;
            for i in 0..l.count {
                let len = l.len[i];
                assert!(len > 0, "tree: leaf {id} entry {i} is empty");
                if let Some(a) = addr_of(l.word[i]) {
                    assert!(
                        a.checked_add(len - 1).is_some_and(|last| last <= MAX_ADDR),
                        "tree: leaf {id} entry {i} maps past MAX_ADDR"
                    );
                }
                sum = sum.checked_add(len).expect("tree: leaf span overflows");
            }
            assert_eq!(
                sum, span,
                "tree: leaf {id} holds {sum} bytes but its parent gives it {span}"
            );
            self.entries += l.count as u64;
            return l.disk.is_dirty();
        }
        assert!(
            (id as usize) < t.internals.len(),
            "tree: internal id {id} outside the arena"
        );
        assert!(
            self.seen_internals.insert(id),
            "tree: internal node {id} reached twice"
        );
        let n = &t.internals[id as usize];
        let min = if is_root { 2 } else { 1 };
        assert!(
            (min..=INTERNAL_CAP).contains(&n.count),
            "tree: internal node {id} (depth {depth}) has {} children",
            n.count
        );
        assert_eq!(n.shift[0], 0, "tree: internal node {id} has shift[0] != 0");
        for i in 1..n.count {
            assert!(
                n.shift[i] > n.shift[i - 1],
                "tree: internal node {id}: shift[{i}] = {} is not above shift[{}] = {}",
                n.shift[i],
                i - 1,
                n.shift[i - 1]
            );
        }
        assert!(
            n.shift[n.count - 1] < span,
            "tree: internal node {id}: last child starts at {} of a {span}-byte span",
            n.shift[n.count - 1]
        );
        for i in n.count..INTERNAL_CAP {
            assert_eq!(
                n.shift[i],
                u64::MAX,
                "tree: internal node {id}: unused slot {i} holds a shift"
            );
        }
        let dirty = n.disk.is_dirty();
        for i in 0..n.count {
            let child_dirty = self.node(n.child[i], depth + 1, n.child_span(i, span), false);
            assert!(
                dirty || !child_dirty,
                "tree: internal node {id} is clean but its child {i} is dirty"
            );
        }
        dirty
    }
}

#[cfg(test)]
mod tests {
    use crate::FlexTree;

    /// A tree three levels deep (internal, internal, leaf), in normal form.
    fn deep() -> FlexTree {
        let mut t = FlexTree::new();
        for i in 0..20_000u64 {
            t.append(1 + i % 3, i * 8).unwrap();
        }
        assert!(t.height() >= 3);
        t.check_invariants();
        t
    }

    #[test]
    #[should_panic(expected = "entries")]
    fn a_wrong_extent_count_is_caught() {
        let mut t = deep();
        t.extents += 1;
        t.check_invariants();
    }

    #[test]
    #[should_panic(expected = "holds")]
    fn a_leaf_whose_lengths_miss_its_span_is_caught() {
        let mut t = deep();
        let leaf = t.find(0).0;
        t.leaves[leaf as usize].len[0] += 1;
        t.check_invariants();
    }

    #[test]
    #[should_panic(expected = "is empty")]
    fn an_empty_entry_is_caught() {
        let mut t = FlexTree::new();
        t.append(10, 0).unwrap();
        let l = &mut t.leaves[t.root as usize];
        l.len[1] = 0;
        l.count = 2;
        t.extents = 2;
        t.check_invariants();
    }

    #[test]
    #[should_panic(expected = "is not above")]
    fn shifts_out_of_order_are_caught() {
        let mut t = deep();
        let root = t.root as usize;
        t.internals[root].shift[1] = 0;
        t.check_invariants();
    }

    #[test]
    #[should_panic(expected = "unused slot")]
    fn a_stale_unused_shift_is_caught() {
        let mut t = deep();
        let root = t.root as usize;
        let n = &mut t.internals[root];
        n.shift[n.count] = 5;
        t.check_invariants();
    }

    #[test]
    #[should_panic(expected = "children")]
    fn a_root_with_one_child_is_caught() {
        let mut t = deep();
        let root = t.root as usize;
        t.internals[root].clear_from(1, 2);
        t.internals[root].count = 1;
        t.check_invariants();
    }

    #[test]
    #[should_panic(expected = "is clean but its child")]
    fn a_clean_parent_of_a_dirty_child_is_caught() {
        let t = deep();
        // A clean root over dirty (never written) children.
        t.internals[t.root as usize].disk.commit();
        t.check_invariants();
    }

    #[test]
    #[should_panic(expected = "free list")]
    fn a_node_both_used_and_free_is_caught() {
        let mut t = deep();
        let leaf = t.find(0).0;
        t.free_leaves.push(leaf);
        t.check_invariants();
    }
}
