//! The `btree` baseline: a B+-tree with FlexTree's node capacities but no
//! shift values. Leaves hold absolute offsets and internal nodes the
//! absolute start of each child, so an insert must add its length to every
//! later leaf entry and child start: O(N) per insert, O(log N) lookups.
//!
//! Invariants: leaves are linked in logical order through `next`; the
//! entries of all leaves, in that order, are contiguous from offset 0; a
//! child's start equals the offset of its first entry.

use crate::index::{clone_with_capacity, ExtentIndex};

const LEAF_CAP: usize = 64;
const INTERNAL_CAP: usize = 128;
const NONE: u32 = u32::MAX;

#[derive(Clone)]
struct Leaf {
    count: usize,
    next: u32,
    off: [u64; LEAF_CAP],
    len: [u64; LEAF_CAP],
    addr: [u64; LEAF_CAP],
}

#[derive(Clone)]
struct Internal {
    count: usize,
    start: [u64; INTERNAL_CAP],
    child: [u32; INTERNAL_CAP],
}

/// A B+-tree of extents with absolute offsets.
pub struct AbsoluteBTree {
    leaves: Vec<Leaf>,
    internals: Vec<Internal>,
    root: u32,
    height: usize,
    total: u64,
    extents: u64,
}

impl Default for AbsoluteBTree {
    fn default() -> Self {
        Self::new()
    }
}

fn empty_leaf() -> Leaf {
    Leaf {
        count: 0,
        next: NONE,
        off: [0; LEAF_CAP],
        len: [0; LEAF_CAP],
        addr: [0; LEAF_CAP],
    }
}

fn empty_internal() -> Internal {
    Internal {
        count: 0,
        start: [0; INTERNAL_CAP],
        child: [0; INTERNAL_CAP],
    }
}

impl AbsoluteBTree {
    /// An empty tree.
    pub fn new() -> Self {
        AbsoluteBTree {
            leaves: vec![empty_leaf()],
            internals: Vec::new(),
            root: 0,
            height: 0,
            total: 0,
            extents: 0,
        }
    }

    fn full(&self, id: u32, leaf: bool) -> bool {
        if leaf {
            self.leaves[id as usize].count + 2 > LEAF_CAP
        } else {
            self.internals[id as usize].count >= INTERNAL_CAP
        }
    }

    fn split_child(&mut self, parent: u32, idx: usize, leaf: bool) {
        let child = self.internals[parent as usize].child[idx];
        let (start, new_id) = if leaf {
            let new_id = self.leaves.len() as u32;
            let old = &mut self.leaves[child as usize];
            let (c, h) = (old.count, old.count / 2);
            let mut new = empty_leaf();
            new.off[..c - h].copy_from_slice(&old.off[h..c]);
            new.len[..c - h].copy_from_slice(&old.len[h..c]);
            new.addr[..c - h].copy_from_slice(&old.addr[h..c]);
            new.count = c - h;
            new.next = old.next;
            old.next = new_id;
            old.count = h;
            let start = new.off[0];
            self.leaves.push(new);
            (start, new_id)
        } else {
            let old = &mut self.internals[child as usize];
            let (c, h) = (old.count, old.count / 2);
            let mut new = empty_internal();
            new.start[..c - h].copy_from_slice(&old.start[h..c]);
            new.child[..c - h].copy_from_slice(&old.child[h..c]);
            new.count = c - h;
            old.count = h;
            let start = new.start[0];
            self.internals.push(new);
            (start, (self.internals.len() - 1) as u32)
        };
        let p = &mut self.internals[parent as usize];
        let c = p.count;
        p.start.copy_within(idx + 1..c, idx + 2);
        p.child.copy_within(idx + 1..c, idx + 2);
        p.start[idx + 1] = start;
        p.child[idx + 1] = new_id;
        p.count = c + 1;
    }

    /// Descends to the leaf for `offset`, splitting full nodes on the way.
    fn descend_mut(&mut self, offset: u64) -> u32 {
        if self.full(self.root, self.height == 0) {
            let mut r = empty_internal();
            r.count = 1;
            r.child[0] = self.root;
            self.internals.push(r);
            self.root = (self.internals.len() - 1) as u32;
            self.height += 1;
        }
        let mut node = self.root;
        for level in 0..self.height {
            let leaf = level + 1 == self.height;
            let n = &self.internals[node as usize];
            let mut idx = n.start[..n.count].partition_point(|&s| s <= offset) - 1;
            if self.full(n.child[idx], leaf) {
                self.split_child(node, idx, leaf);
                let n = &self.internals[node as usize];
                if idx + 1 < n.count && n.start[idx + 1] <= offset {
                    idx += 1;
                }
            }
            node = self.internals[node as usize].child[idx];
        }
        node
    }

    fn find_leaf(&self, offset: u64) -> u32 {
        let mut node = self.root;
        for _ in 0..self.height {
            let n = &self.internals[node as usize];
            node = n.child[n.start[..n.count].partition_point(|&s| s <= offset) - 1];
        }
        node
    }
}

impl ExtentIndex for AbsoluteBTree {
    fn clone_box(&self) -> Box<dyn ExtentIndex> {
        Box::new(AbsoluteBTree {
            leaves: clone_with_capacity(&self.leaves),
            internals: clone_with_capacity(&self.internals),
            root: self.root,
            height: self.height,
            total: self.total,
            extents: self.extents,
        })
    }
    fn name(&self) -> &'static str {
        "btree"
    }
    fn len(&self) -> u64 {
        self.total
    }
    fn extent_count(&self) -> u64 {
        self.extents
    }
    fn memory_usage(&self) -> usize {
        self.leaves.capacity() * size_of::<Leaf>()
            + self.internals.capacity() * size_of::<Internal>()
    }

    fn insert(&mut self, offset: u64, len: u64, addr: u64) {
        let leaf_id = self.descend_mut(offset);
        let l = &mut self.leaves[leaf_id as usize];
        let c = l.count;
        let i = l.off[..c].partition_point(|&o| o <= offset);
        let pos = if i > 0 && offset < l.off[i - 1] + l.len[i - 1] && offset > l.off[i - 1] {
            // Split the extent holding `offset`.
            let e = i - 1;
            let d = offset - l.off[e];
            for a in [&mut l.off, &mut l.len, &mut l.addr] {
                a.copy_within(e + 1..c, e + 2);
            }
            l.off[e + 1] = offset;
            l.len[e + 1] = l.len[e] - d;
            l.addr[e + 1] = l.addr[e] + d;
            l.len[e] = d;
            l.count += 1;
            self.extents += 1;
            e + 1
        } else if i > 0 && l.off[i - 1] == offset {
            i - 1
        } else {
            i
        };
        // Shift every later extent: the rest of this leaf, then all later
        // leaves, then every child start past the offset.
        let l = &mut self.leaves[leaf_id as usize];
        for o in &mut l.off[pos..l.count] {
            *o += len;
        }
        let mut next = if offset < self.total { l.next } else { NONE };
        while next != NONE {
            let n = &mut self.leaves[next as usize];
            for o in &mut n.off[..n.count] {
                *o += len;
            }
            next = n.next;
        }
        for n in self.internals.iter_mut().filter(|_| offset < self.total) {
            for s in &mut n.start[..n.count] {
                if *s > offset {
                    *s += len;
                }
            }
        }
        let l = &mut self.leaves[leaf_id as usize];
        let c = l.count;
        for a in [&mut l.off, &mut l.len, &mut l.addr] {
            a.copy_within(pos..c, pos + 1);
        }
        l.off[pos] = offset;
        l.len[pos] = len;
        l.addr[pos] = addr;
        l.count += 1;
        self.extents += 1;
        self.total += len;
    }

    fn lookup(&self, offset: u64) -> Option<u64> {
        let l = &self.leaves[self.find_leaf(offset) as usize];
        let e = l.off[..l.count].partition_point(|&o| o <= offset) - 1;
        Some(l.addr[e] + (offset - l.off[e]))
    }

    fn range(&self, offset: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        out.clear();
        let end = offset + len;
        let mut leaf = self.find_leaf(offset);
        let l = &self.leaves[leaf as usize];
        let mut e = l.off[..l.count].partition_point(|&o| o <= offset) - 1;
        loop {
            let l = &self.leaves[leaf as usize];
            while e < l.count {
                let from = l.off[e].max(offset);
                let to = (l.off[e] + l.len[e]).min(end);
                out.push((l.addr[e] + (from - l.off[e]), to - from));
                if to == end {
                    return;
                }
                e += 1;
            }
            leaf = l.next;
            e = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::array::SortedArray;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// All three structures map every byte the same way after the same
    /// random inserts and appends.
    #[test]
    fn baselines_agree_with_flextree() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut t = flextree::FlexTree::new();
        let mut b = AbsoluteBTree::new();
        let mut a = SortedArray::new();
        let all: [&mut dyn ExtentIndex; 3] = [&mut t, &mut b, &mut a];
        let mut all = all;
        for i in 0..20_000u64 {
            let len = rng.gen_range(1..20);
            let off = if i % 3 == 0 {
                all[0].len()
            } else {
                rng.gen_range(0..=all[0].len())
            };
            for s in all.iter_mut() {
                s.insert(off, len, i * 100);
            }
        }
        let total = all[0].len();
        let (mut r0, mut r1) = (Vec::new(), Vec::new());
        for _ in 0..3000 {
            let off = rng.gen_range(0..total);
            let want = all[0].lookup(off);
            let len = rng.gen_range(1..=(total - off).min(500));
            all[0].range(off, len, &mut r0);
            for s in all.iter().skip(1) {
                assert_eq!(s.lookup(off), want, "{} at {off}", s.name());
                s.range(off, len, &mut r1);
                assert_eq!(r0, r1, "{} range at {off}", s.name());
            }
        }
        assert_eq!(all[1].extent_count(), all[0].extent_count());
        assert_eq!(all[2].extent_count(), all[0].extent_count());
    }
}
