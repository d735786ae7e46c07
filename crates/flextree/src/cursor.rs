//! Forward iteration over the extents of a FlexTree.
//!
//! Invariant: the cursor keeps the path from the root to its current leaf with
//! the absolute start of every node on it, so moving to the next leaf costs
//! amortized O(1) and never needs sibling pointers in the nodes.

use crate::error::Result;
use crate::extent::Extent;
use crate::node::{addr_of, tag_of};
use crate::tree::{FlexTree, MAX_HEIGHT};

/// An iterator over extents in logical order, from
/// [`FlexTree::extents_from`].
pub struct Extents<'a> {
    tree: &'a FlexTree,
    /// (internal node, child index taken, absolute start of the node).
    stack: [(u32, usize, u64); MAX_HEIGHT],
    leaf: u32,
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
            stack: [(0, 0, 0); MAX_HEIGHT],
            leaf: self.root,
            pos: 0,
            idx: 0,
            done: offset == self.total,
        };
        if it.done {
            return Ok(it);
        }
        let mut node = self.root;
        let mut start = 0u64;
        let mut rel = offset;
        for level in 0..self.height {
            let n = &self.internals[node as usize];
            let i = n.child_index(rel);
            it.stack[level] = (node, i, start);
            start += n.shift[i];
            rel -= n.shift[i];
            node = n.child[i];
        }
        let (idx, entry_start) = self.leaves[node as usize].locate(rel);
        it.leaf = node;
        it.pos = start + entry_start;
        it.idx = idx;
        Ok(it)
    }
}

impl Extents<'_> {
    /// Moves to the first entry of the next leaf, or ends the iteration.
    fn next_leaf(&mut self) {
        let t = self.tree;
        let mut level = t.height;
        while level > 0 {
            let (node, i, start) = self.stack[level - 1];
            let n = &t.internals[node as usize];
            if i + 1 < n.count {
                self.stack[level - 1].1 = i + 1;
                let mut child = n.child[i + 1];
                let mut cstart = start + n.shift[i + 1];
                for l in level..t.height {
                    self.stack[l] = (child, 0, cstart);
                    let c = &t.internals[child as usize];
                    cstart += c.shift[0];
                    child = c.child[0];
                }
                // Leaves are contiguous: `pos` already is this leaf's start.
                debug_assert_eq!(cstart, self.pos);
                self.leaf = child;
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

    fn next(&mut self) -> Option<Extent> {
        if self.done {
            return None;
        }
        let l = &self.tree.leaves[self.leaf as usize];
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
