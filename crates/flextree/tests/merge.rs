//! Merging of physically contiguous extents under a length limit and a
//! physical boundary, and `remap_merged`, against the naive model.
//!
//! Writes take physical space from a cursor the way flexspace allocates
//! from segments: a write that would cross a multiple of `BLOCK` starts at
//! the next multiple instead, so no written extent crosses one, and every
//! extent that does cross one in the tree was made by a merge.

mod common;

use common::{assert_same, Model};
use flextree::FlexTree;
use proptest::prelude::*;

const BLOCK: u64 = 64;

#[derive(Clone, Debug)]
enum Op {
    /// Insert at a random offset.
    Insert {
        at: u64,
        len: u64,
    },
    /// Insert right after the previous write (a sequential writer).
    Continue {
        len: u64,
    },
    Append {
        len: u64,
    },
    Hole {
        at: u64,
        len: u64,
    },
    Collapse {
        at: u64,
        len: u64,
    },
    RemapMerged {
        at: u64,
        len: u64,
    },
    SetTag {
        at: u64,
        tag: u16,
    },
    /// Same-length replacement (a pair rewritten in place).
    Replace {
        at: u64,
        len: u64,
        tag: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let frac = any::<u64>();
    let len = 1..=40u64;
    prop_oneof![
        2 => (frac, len.clone()).prop_map(|(at, len)| Op::Insert { at, len }),
        4 => len.clone().prop_map(|len| Op::Continue { len }),
        2 => len.clone().prop_map(|len| Op::Append { len }),
        1 => (frac, len.clone()).prop_map(|(at, len)| Op::Hole { at, len }),
        1 => (frac, len.clone()).prop_map(|(at, len)| Op::Collapse { at, len }),
        1 => (frac, len.clone()).prop_map(|(at, len)| Op::RemapMerged { at, len }),
        1 => (frac, 0u16..3).prop_map(|(at, tag)| Op::SetTag { at, tag }),
        2 => (frac, len, 0u16..3).prop_map(|(at, len, tag)| Op::Replace { at, len, tag }),
    ]
}

fn pick(frac: u64, below: u64) -> u64 {
    ((u128::from(frac) * u128::from(below)) >> 64) as u64
}

struct World {
    tree: FlexTree,
    model: Model,
    cursor: u64,
    /// End offset of the last write.
    last_end: u64,
}

impl World {
    /// Physical space for `len` bytes that does not cross a multiple of
    /// `BLOCK`.
    fn alloc(&mut self, len: u64) -> u64 {
        if self.cursor / BLOCK != (self.cursor + len - 1) / BLOCK {
            self.cursor = self.cursor.next_multiple_of(BLOCK);
        }
        let a = self.cursor;
        self.cursor += len;
        a
    }

    fn insert(&mut self, at: u64, len: u64) {
        let addr = self.alloc(len);
        self.tree.insert(at, len, addr).unwrap();
        self.model.insert(at, len, Some(addr));
        self.last_end = at + len;
    }

    fn apply(&mut self, op: &Op) {
        let total = self.model.len();
        match *op {
            Op::Insert { at, len } => self.insert(pick(at, total + 1), len),
            Op::Continue { len } => self.insert(self.last_end.min(total), len),
            Op::Append { len } => self.insert(total, len),
            Op::Hole { at, len } => {
                let at = pick(at, total + 1);
                self.tree.insert_hole(at, len).unwrap();
                self.model.insert(at, len, None);
            }
            Op::Collapse { at, len } if total > 0 => {
                let at = pick(at, total);
                let len = len.min(total - at);
                self.tree.collapse(at, len).unwrap();
                self.model.collapse(at, len);
                self.last_end = self.last_end.min(self.model.len());
            }
            Op::RemapMerged { at, len } if total > 0 => {
                let at = pick(at, total);
                let len = len.min(total - at);
                let addr = self.alloc(len);
                self.tree.remap_merged(at, len, addr).unwrap();
                self.model.remap_merged(at, len, addr);
                self.last_end = at + len;
            }
            Op::SetTag { at, tag } if total > 0 => {
                let at = pick(at, total);
                self.tree.set_tag(at, tag).unwrap();
                self.model.set_tag(at, tag);
            }
            Op::Replace { at, len, tag } if total > 0 => {
                let at = pick(at, total);
                let len = len.min(total - at);
                let addr = self.alloc(len);
                // The same edit as three operations, on a copy: the extents
                // (boundaries, addresses, tags) must come out the same.
                let mut twin = self.tree.clone();
                twin.collapse(at, len).unwrap();
                twin.insert(at, len, addr).unwrap();
                if tag != 0 {
                    twin.set_tag(at, tag).unwrap();
                }
                twin.check_invariants();
                let before = self.tree.query(at, len).unwrap();
                let mut old = Vec::new();
                self.tree.replace(at, len, addr, tag, &mut old).unwrap();
                assert_eq!(old, before);
                let extents = |t: &FlexTree| t.extents_from(0).unwrap().collect::<Vec<_>>();
                assert_eq!(extents(&self.tree), extents(&twin));
                assert_eq!(self.tree.extent_count(), twin.extent_count());
                self.model.collapse(at, len);
                self.model.insert(at, len, Some(addr));
                if tag != 0 {
                    self.model.set_tag(at, tag);
                }
                self.last_end = at + len;
            }
            _ => {}
        }
        // After every operation the tree is in normal form.
        self.tree.check_invariants();
    }

    /// Every extent respects the limit (written extents are at most 40
    /// bytes, so a longer one was merged) and, with a boundary, lies inside
    /// one block of it.
    fn check_extents(&self, limit: u64, boundary: u64) -> (usize, usize) {
        let (mut crossing, mut merged) = (0, 0);
        for e in self.tree.extents_from(0).unwrap() {
            if e.len > 40 {
                merged += 1;
                assert!(e.len <= limit, "{e:?} exceeds the limit {limit}");
            }
            if let Some(a) = e.addr {
                if a / BLOCK != (a + e.len - 1) / BLOCK {
                    crossing += 1;
                    assert!(limit > 0, "{e:?} crosses a block without merging");
                }
                if let Some(first) = a.checked_div(boundary) {
                    let last = (a + e.len - 1) / boundary;
                    assert_eq!(first, last, "{e:?} crosses {boundary}");
                }
            }
        }
        (crossing, merged)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn merges_respect_the_limit_and_the_boundary(
        limit in prop_oneof![Just(0u64), Just(60), Just(200), Just(u64::MAX)],
        boundary in prop_oneof![Just(0u64), Just(BLOCK), Just(4 * BLOCK)],
        ops in proptest::collection::vec(op(), 1..500),
    ) {
        let mut w = World { tree: FlexTree::new(), model: Model::default(), cursor: 0, last_end: 0 };
        w.tree.set_merge_limit(limit);
        w.tree.set_merge_boundary(boundary);
        for (i, o) in ops.iter().enumerate() {
            w.apply(o);
            if i % 25 == 0 {
                w.check_extents(limit, boundary);
            }
        }
        w.check_extents(limit, boundary);
        assert_same(&w.tree, &w.model);
    }
}

/// Sequential writes of 16 bytes merge into whole blocks of the boundary
/// and never across them; without a boundary they merge up to the limit.
#[test]
fn sequential_writes_merge_up_to_the_boundary() {
    let mut t = FlexTree::new();
    t.set_merge_limit(u64::MAX);
    t.set_merge_boundary(64);
    for i in 0..4000u64 {
        t.append(16, i * 16).unwrap();
    }
    let ext: Vec<_> = t.extents_from(0).unwrap().collect();
    assert_eq!(ext.len(), 1000);
    for (i, e) in ext.iter().enumerate() {
        assert_eq!((e.len, e.addr), (64, Some(i as u64 * 64)));
    }
    // Unaligned start: [40, 56) cannot take [56, 72) (64 would be inside),
    // which itself crosses 64 as written; [72, 88) cannot join it either;
    // [88, 104) joins [72, 88).
    let mut t = FlexTree::new();
    t.set_merge_limit(u64::MAX);
    t.set_merge_boundary(64);
    for i in 0..4u64 {
        t.append(16, 40 + i * 16).unwrap();
    }
    let got: Vec<_> = t
        .extents_from(0)
        .unwrap()
        .map(|e| (e.addr, e.len))
        .collect();
    assert_eq!(got, vec![(Some(40), 16), (Some(56), 16), (Some(72), 32)]);
    // An extent may end exactly at a boundary and the next start there.
    let mut t = FlexTree::new();
    t.set_merge_limit(u64::MAX);
    t.set_merge_boundary(64);
    t.append(32, 32).unwrap();
    t.append(32, 64).unwrap();
    assert_eq!(t.extent_count(), 2);
    // No boundary: one extent, up to the limit.
    let mut t = FlexTree::new();
    t.set_merge_limit(100);
    for i in 0..10u64 {
        t.append(16, i * 16).unwrap();
    }
    let lens: Vec<_> = t.extents_from(0).unwrap().map(|e| e.len).collect();
    assert_eq!(lens, vec![96, 64]);
    // Holes ignore the boundary.
    let mut t = FlexTree::new();
    t.set_merge_limit(u64::MAX);
    t.set_merge_boundary(64);
    t.insert_hole(0, 50).unwrap();
    t.insert_hole(50, 50).unwrap();
    assert_eq!(t.extent_count(), 1);
}

#[test]
fn remap_merged_keeps_the_first_tag_only() {
    let mut t = FlexTree::new();
    for i in 0..10u64 {
        t.append(10, i * 100).unwrap();
        t.set_tag(i * 10, i as u16 + 1).unwrap();
    }
    // Range from an extent start: one extent, tag of the first.
    t.remap_merged(20, 35, 5000).unwrap();
    let e = t.extent_at(20).unwrap();
    assert_eq!((e.offset, e.len, e.addr, e.tag), (20, 35, Some(5000), 3));
    assert_eq!(t.get_tag(30).unwrap(), 0);
    assert_eq!(t.get_tag(40).unwrap(), 0);
    // The extent cut at the end keeps its tail without a tag.
    let e = t.extent_at(55).unwrap();
    assert_eq!((e.offset, e.len, e.addr, e.tag), (55, 5, Some(505), 0));
    assert_eq!(t.get_tag(60).unwrap(), 7);
    // Range from inside an extent: no tag; the left part keeps its own.
    t.remap_merged(63, 20, 9000).unwrap();
    let e = t.extent_at(63).unwrap();
    assert_eq!((e.offset, e.len, e.addr, e.tag), (63, 20, Some(9000), 0));
    assert_eq!(t.extent_at(60).unwrap().tag, 7);
    // Plain remap keeps every tag (and so splits).
    t.remap(0, 20, 7000).unwrap();
    assert_eq!(t.get_tag(0).unwrap(), 1);
    assert_eq!(t.get_tag(10).unwrap(), 2);
    assert_eq!(t.extent_at(0).unwrap().len, 10);
    // With merging on, an untagged relocated extent joins a contiguous
    // predecessor; a tagged one starts its own extent.
    let mut t = FlexTree::new();
    t.set_merge_limit(1 << 20);
    t.set_merge_boundary(1 << 12);
    for i in 0..4u64 {
        t.append(10, i * 100).unwrap();
    }
    t.set_tag(20, 9).unwrap();
    t.remap_merged(0, 10, 1000).unwrap();
    t.remap_merged(10, 10, 1010).unwrap();
    t.remap_merged(20, 10, 1020).unwrap();
    let got: Vec<_> = t
        .extents_from(0)
        .unwrap()
        .map(|e| (e.len, e.addr, e.tag))
        .collect();
    assert_eq!(
        got,
        vec![(20, Some(1000), 0), (10, Some(1020), 9), (10, Some(300), 0)]
    );
}
