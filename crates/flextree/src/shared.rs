//! Read-only copies of a tree that share its nodes (copy on write).
//!
//! [`FlexTree::share`] returns a tree with the same extents whose arenas
//! hold the source's node blocks by reference (`Arena::share`): O(blocks),
//! about one reference a 2 MiB block, instead of a copy of every node.
//!
//! Invariants:
//! - A shared copy's nodes never change: the source's later mutations copy
//!   a block before their first write into it while a copy shares it
//!   (`Arena`'s copy on write), so node ids freed and reused by the source
//!   land in its own copy of the block, never in the one a copy reads.
//! - A shared copy is read only in spirit: it has empty free lists and
//!   empty tree-file page lists (it never checkpoints over the source's
//!   file, and taking it never waits for a running checkpoint). Mutating
//!   it is allowed and copies the blocks it writes, as for the source.
//! - Memory: a block is held until its last holder drops it, so the memory
//!   a copy adds to the source's is the blocks the source rewrote since
//!   the copy was taken ([`FlexTree::node_memory_not_shared_with`]).

use crate::file_pages::FilePages;
use crate::tree::FlexTree;

impl FlexTree {
    /// A read-only copy of the tree that shares its nodes (see the module
    /// docs); O(blocks). Takes `&self`: any number of readers may share the
    /// tree meanwhile.
    pub fn share(&self) -> FlexTree {
        self.with_nodes(
            self.leaves.share(),
            self.internals.share(),
            (Vec::new(), Vec::new()),
            FilePages::default(),
        )
    }

    /// Bytes of node memory `self` holds that `other` does not share with
    /// it: what `self` costs on top of `other` (all of
    /// [`FlexTree::node_memory_usage`] when they share nothing).
    pub fn node_memory_not_shared_with(&self, other: &FlexTree) -> usize {
        self.leaves.memory_not_shared_with(&other.leaves)
            + self.internals.memory_not_shared_with(&other.internals)
            + (self.free_leaves.capacity() + self.free_internals.capacity()) * 4
    }

    /// Node blocks (leaf and internal) this tree shares with another tree.
    pub fn shared_node_blocks(&self) -> usize {
        self.leaves.shared_blocks() + self.internals.shared_blocks()
    }
}

#[cfg(test)]
mod tests {
    use crate::{Extent, FlexTree};

    fn contents(t: &FlexTree) -> Vec<Extent> {
        t.extents_from(0).unwrap().collect()
    }

    /// A tree big enough for huge blocks of both kinds of nodes.
    fn big_tree(extents: u64) -> FlexTree {
        let mut t = FlexTree::new();
        for i in 0..extents {
            // Alternate addresses so nothing merges.
            t.append(10, (i % 2) * (1 << 30) + i * 10).unwrap();
        }
        t
    }

    #[test]
    #[cfg_attr(miri, ignore = "hundreds of thousands of extents")]
    fn a_shared_copy_keeps_its_contents_while_the_source_changes() {
        let mut t = big_tree(400_000);
        let held = t.node_memory_usage();
        let view = t.share();
        let before = contents(&view);
        assert_eq!(before, contents(&t));
        assert!(view.shared_node_blocks() > 0);
        // Sharing added only tables, no node block.
        assert!(view.node_memory_not_shared_with(&t) < held / 100);
        // Edits all over the source: inserts, collapses (merges free node
        // ids, later splits reuse them), remaps.
        for i in 0..20_000u64 {
            let at = (i * 7919 * 10) % t.len();
            match i % 3 {
                0 => t.insert(at, 5, (1 << 40) + i * 5).unwrap(),
                1 => t.collapse(at, 10.min(t.len() - at)).unwrap(),
                _ => t.remap(at, 3.min(t.len() - at), (1 << 41) + i * 3).unwrap(),
            }
        }
        t.check_invariants();
        view.check_invariants();
        assert_eq!(contents(&view), before, "the view changed");
        assert_ne!(contents(&t), before);
        // The source copied the blocks it wrote; the view holds the old ones.
        let extra = view.node_memory_not_shared_with(&t);
        assert!(extra > held / 2, "{extra} of {held}");
        drop(view);
        assert_eq!(t.shared_node_blocks(), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "hundreds of thousands of extents")]
    fn writes_after_the_views_are_gone_copy_nothing() {
        let mut t = big_tree(200_000);
        drop(t.share());
        let blocks: Vec<usize> = (0..t.leaves.slots())
            .step_by(1 << 12)
            .map(|id| std::ptr::from_ref(&t.leaves[id]) as usize)
            .collect();
        for i in 0..1000u64 {
            t.insert((i * 104_729) % t.len(), 1, 1 << 42).unwrap();
        }
        let after: Vec<usize> = (0..t.leaves.slots())
            .step_by(1 << 12)
            .map(|id| std::ptr::from_ref(&t.leaves[id]) as usize)
            .collect();
        assert_eq!(blocks, after, "a block no one shares was copied");
    }
}
