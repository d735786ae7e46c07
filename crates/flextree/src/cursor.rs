//! Forward iteration over the extents of a FlexTree.
//!
//! Invariant: the cursor keeps the path from the root to its current leaf with
//! the absolute start of every node on it, so moving to the next leaf costs
//! amortized O(1) and never needs sibling pointers in the nodes.

use crate::error::Result;
use crate::extent::Extent;
use crate::node::{addr_of, tag_of, Leaf};
use crate::tree::{FlexTree, MAX_HEIGHT};

/// An iterator over extents in logical order, from
/// [`FlexTree::extents_from`].
pub struct Extents<'a> {
    tree: &'a FlexTree,
    /// (internal node, child index taken) from the root down. Node starts
    /// are not needed: leaves are contiguous, so `pos` carries over.
    stack: [(u32, u32); MAX_HEIGHT],
    leaf: &'a Leaf,
    /// Absolute offset of the current entry.
    pos: u64,
    idx: usize,
    done: bool,
}

impl FlexTree {
    /// Iterates over extents starting with the one that contains `offset`
    /// (`offset == len()` yields nothing).
    pub fn extents_from(&self, offset: u64) -> Result<Extents<'_>> {
        if offset > self.total {
            return Err(crate::Error::OutOfRange {
                offset,
                len: 0,
                size: self.total,
            });
        }
        let mut it = Extents {
            tree: self,
            stack: [(0, 0); MAX_HEIGHT],
            leaf: &self.leaves[self.root as usize],
            pos: 0,
            idx: 0,
            done: offset == self.total,
        };
        if it.done {
            return Ok(it);
        }
        let mut node = self.root;
        let mut rel = offset;
        for level in 0..self.height {
            let n = &self.internals[node as usize];
            let i = n.child_index(rel);
            it.stack[level] = (node, i as u32);
            rel -= n.shift[i];
            node = n.child[i];
            self.prefetch_node(node, level + 1 == self.height);
        }
        let start = offset - rel;
        let (idx, entry_start) = self.leaves[node as usize].locate(rel);
        it.leaf = &self.leaves[node as usize];
        it.pos = start + entry_start;
        it.idx = idx;
        Ok(it)
    }
}

impl<'a> Extents<'a> {
    /// Moves to the first entry of the next leaf, or ends the iteration.
    #[cold]
    fn next_leaf(&mut self) {
        let t = self.tree;
        let mut level = t.height;
        while level > 0 {
            let (node, i) = self.stack[level - 1];
            let i = i as usize;
            let n = &t.internals[node as usize];
            if i + 1 < n.count {
                self.stack[level - 1].1 = (i + 1) as u32;
                let mut child = n.child[i + 1];
                for l in level..t.height {
                    self.stack[l] = (child, 0);
                    child = t.internals[child as usize].child[0];
                }
                self.leaf = &t.leaves[child as usize];
                self.idx = 0;
                return;
            }
            level -= 1;
        }
        self.done = true;
    }
}

impl Iterator for Extents<'_> {
    type Item = Extent;

    #[inline]
    fn next(&mut self) -> Option<Extent> {
        if self.done {
            return None;
        }
        let l = self.leaf;
        let i = self.idx;
        let ext = Extent {
            offset: self.pos,
            len: l.len[i],
            addr: addr_of(l.word[i]),
            tag: tag_of(l.word[i]),
        };
        self.pos += ext.len;
        self.idx += 1;
        if self.idx >= l.count {
            self.next_leaf();
        }
        Some(ext)
    }
}
