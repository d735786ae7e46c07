//! Randomized unit tests of the tree against a byte-per-byte model.
//!
//! The model keeps, for every logical byte, its physical address (or `None`
//! in a hole) and the tag of the extent starting there (0 elsewhere). Small
//! extents make the tree several levels deep with a few thousand bytes, so
//! splits, merges and height changes happen constantly.

use crate::FlexTree;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Default)]
struct Model {
    addr: Vec<Option<u64>>,
    tag: Vec<u16>,
}

impl Model {
    fn insert(&mut self, off: usize, len: usize, addr: Option<u64>) {
        let a: Vec<Option<u64>> = (0..len as u64).map(|i| addr.map(|x| x + i)).collect();
        self.addr.splice(off..off, a);
        self.tag.splice(off..off, std::iter::repeat_n(0, len));
    }
    fn collapse(&mut self, off: usize, len: usize) {
        self.addr.drain(off..off + len);
        self.tag.drain(off..off + len);
    }
}

fn check(tree: &FlexTree, m: &Model, rng: &mut StdRng) {
    tree.check_invariants();
    assert_eq!(tree.len(), m.addr.len() as u64);
    // Whole mapping through the iterator.
    let mut pos = 0u64;
    let mut count = 0;
    for e in tree.extents_from(0).unwrap() {
        assert_eq!(e.offset, pos);
        assert!(e.len > 0);
        assert_eq!(e.tag, m.tag[pos as usize], "tag at {pos}");
        for i in 0..e.len {
            assert_eq!(
                e.addr.map(|a| a + i),
                m.addr[(pos + i) as usize],
                "byte {}",
                pos + i
            );
            if i > 0 {
                assert_eq!(
                    m.tag[(pos + i) as usize],
                    0,
                    "tag inside extent at {}",
                    pos + i
                );
            }
        }
        pos += e.len;
        count += 1;
    }
    assert_eq!(pos, tree.len());
    assert_eq!(count, tree.extent_count());
    if m.addr.is_empty() {
        return;
    }
    for _ in 0..20 {
        let o = rng.gen_range(0..m.addr.len());
        assert_eq!(tree.lookup(o as u64).unwrap(), m.addr[o]);
        assert_eq!(tree.get_tag(o as u64).unwrap(), m.tag[o]);
        let len = rng.gen_range(1..=(m.addr.len() - o).min(300));
        let pieces = tree.query(o as u64, len as u64).unwrap();
        let mut at = o;
        for p in pieces {
            for i in 0..p.len {
                assert_eq!(p.addr.map(|a| a + i), m.addr[at + i as usize]);
            }
            at += p.len as usize;
        }
        assert_eq!(at, o + len);
        let e = tree.extent_at(o as u64).unwrap();
        assert!(e.offset <= o as u64 && (o as u64) < e.offset + e.len);
    }
}

fn run(seed: u64, ops: usize, max_size: usize, merge: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tree = FlexTree::new();
    tree.set_merge_limit(merge);
    let mut m = Model::default();
    // Start from many one-byte extents so the tree is three levels deep.
    for i in 0..20_000u64 {
        tree.append(1, i * 2).unwrap();
        m.insert(i as usize, 1, Some(i * 2));
    }
    let mut next_addr = 1u64 << 20;
    let mut max_height = 0;
    for step in 0..ops {
        max_height = max_height.max(tree.height());
        let size = m.addr.len();
        let op = rng.gen_range(0..100);
        if op < 55 || size < 50 {
            let len = rng.gen_range(1..8usize);
            if size + len > max_size {
                continue;
            }
            let off = if op < 10 {
                size
            } else {
                rng.gen_range(0..=size)
            };
            if rng.gen_bool(0.1) {
                tree.insert_hole(off as u64, len as u64).unwrap();
                m.insert(off, len, None);
            } else {
                // Sometimes physically contiguous with the previous insert.
                if rng.gen_bool(0.7) {
                    next_addr += rng.gen_range(1..100);
                }
                tree.insert(off as u64, len as u64, next_addr).unwrap();
                m.insert(off, len, Some(next_addr));
                next_addr += len as u64;
            }
        } else if op < 75 {
            let off = rng.gen_range(0..size);
            let big = if rng.gen_bool(0.003) { 3000 } else { 6 };
            let len = rng.gen_range(1..=(size - off).min(big));
            tree.collapse(off as u64, len as u64).unwrap();
            m.collapse(off, len);
        } else if op < 85 {
            let off = rng.gen_range(0..size);
            let len = rng.gen_range(1..=(size - off).min(40));
            next_addr += 1000;
            tree.remap(off as u64, len as u64, next_addr).unwrap();
            for i in 0..len {
                m.addr[off + i] = Some(next_addr + i as u64);
            }
            next_addr += len as u64;
        } else {
            let off = rng.gen_range(0..size);
            let tag = rng.gen_range(0..4u16);
            tree.set_tag(off as u64, tag).unwrap();
            if tag != 0 || m.tag[off] != 0 {
                m.tag[off] = tag;
            }
        }
        if step % 97 == 0 || step + 1 == ops {
            check(&tree, &m, &mut rng);
        }
    }
    assert!(
        max_height >= 3,
        "the test must grow the tree to three levels: {max_height} {} {}",
        tree.len(),
        tree.extent_count()
    );
}

#[test]
fn random_ops_match_byte_model() {
    for seed in 0..6 {
        run(seed, 20_000, 60_000, 0);
    }
}

#[test]
fn random_ops_with_merging_match_byte_model() {
    for seed in 10..14 {
        run(seed, 6000, 20_000, 64);
    }
}

#[test]
fn collapse_everything_and_regrow() {
    let mut tree = FlexTree::new();
    for i in 0..50_000u64 {
        tree.append(3, i * 10).unwrap();
    }
    assert!(tree.height() >= 3);
    tree.collapse(7, tree.len() - 20).unwrap();
    assert_eq!(tree.len(), 20);
    tree.collapse(0, 20).unwrap();
    assert!(tree.is_empty());
    assert_eq!(tree.height(), 1);
    tree.append(5, 1).unwrap();
    assert_eq!(tree.lookup(4).unwrap(), Some(5));
}

#[test]
fn checkpoint_round_trip_after_random_ops() {
    let file = crate::MemFile::new();
    let mut rng = StdRng::seed_from_u64(99);
    let mut tree = FlexTree::new();
    for round in 0..30u64 {
        for _ in 0..2000 {
            let off = rng.gen_range(0..=tree.len());
            tree.insert(off, rng.gen_range(1..50), rng.gen_range(0..1 << 40))
                .unwrap();
            if tree.len() > 100 && rng.gen_bool(0.3) {
                let off = rng.gen_range(0..tree.len() - 50);
                tree.collapse(off, rng.gen_range(1..50)).unwrap();
            }
        }
        let v = tree.checkpoint(&file, &round.to_le_bytes()).unwrap();
        assert_eq!(v, round + 1);
        let (loaded, cp) = FlexTree::load(&file).unwrap();
        assert_eq!(cp.version, v);
        assert_eq!(cp.meta, round.to_le_bytes());
        let a: Vec<_> = tree.extents_from(0).unwrap().collect();
        let b: Vec<_> = loaded.extents_from(0).unwrap().collect();
        assert_eq!(a, b);
        if round % 3 == 0 {
            tree = loaded;
        }
    }
}
