//! Property tests: random sequences of every operation against the naive
//! model in `common`, comparing every query.

mod common;

use common::{assert_same, coalesce, Model};
use flextree::{Error, FlexTree, Piece, MAX_ADDR, MAX_SPACE};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert {
        at: u64,
        len: u64,
        addr: u64,
    },
    Hole {
        at: u64,
        len: u64,
    },
    Append {
        len: u64,
        addr: u64,
    },
    Collapse {
        at: u64,
        len: u64,
    },
    Remap {
        at: u64,
        len: u64,
        addr: u64,
    },
    RemapMerged {
        at: u64,
        len: u64,
        addr: u64,
    },
    SetTag {
        at: u64,
        tag: u16,
    },
    Replace {
        at: u64,
        len: u64,
        addr: u64,
        tag: u16,
    },
    Query {
        at: u64,
        len: u64,
    },
}

/// Offsets and lengths are drawn as fractions so they fit any space size.
fn op(max_len: u64) -> impl Strategy<Value = Op> {
    let frac = any::<u64>();
    let len = 1..=max_len;
    prop_oneof![
        4 => (frac, len.clone(), 0u64..1 << 40).prop_map(|(at, len, addr)| Op::Insert { at, len, addr }),
        1 => (frac, len.clone()).prop_map(|(at, len)| Op::Hole { at, len }),
        2 => (len.clone(), 0u64..1 << 40).prop_map(|(len, addr)| Op::Append { len, addr }),
        3 => (frac, len.clone()).prop_map(|(at, len)| Op::Collapse { at, len }),
        1 => (frac, len.clone(), 0u64..1 << 40).prop_map(|(at, len, addr)| Op::Remap { at, len, addr }),
        1 => (frac, len.clone(), 0u64..1 << 40).prop_map(|(at, len, addr)| Op::RemapMerged { at, len, addr }),
        2 => (frac, 0u16..5).prop_map(|(at, tag)| Op::SetTag { at, tag }),
        2 => (frac, len.clone(), 0u64..1 << 40, 0u16..3).prop_map(|(at, len, addr, tag)| Op::Replace { at, len, addr, tag }),
        2 => (frac, len).prop_map(|(at, len)| Op::Query { at, len }),
    ]
}

fn pick(frac: u64, below: u64) -> u64 {
    if below == 0 {
        0
    } else {
        ((u128::from(frac) * u128::from(below)) >> 64) as u64
    }
}

fn addr_ok(addr: u64, len: u64) -> bool {
    addr.checked_add(len - 1)
        .is_some_and(|last| last <= MAX_ADDR)
}

fn apply(tree: &mut FlexTree, model: &mut Model, op: &Op) {
    let total = model.len();
    match *op {
        Op::Insert { at, len, addr } => {
            let at = pick(at, total + 1);
            if !model.fits(len) {
                assert!(matches!(
                    tree.insert(at, len, addr),
                    Err(Error::SpaceOverflow)
                ));
            } else if !addr_ok(addr, len) {
                assert!(matches!(
                    tree.insert(at, len, addr),
                    Err(Error::AddressTooLarge(_))
                ));
            } else {
                tree.insert(at, len, addr).unwrap();
                model.insert(at, len, Some(addr));
            }
        }
        Op::Hole { at, len } => {
            let at = pick(at, total + 1);
            if model.fits(len) {
                tree.insert_hole(at, len).unwrap();
                model.insert(at, len, None);
            } else {
                assert!(matches!(
                    tree.insert_hole(at, len),
                    Err(Error::SpaceOverflow)
                ));
            }
        }
        Op::Append { len, addr } if model.fits(len) && addr_ok(addr, len) => {
            tree.append(len, addr).unwrap();
            model.insert(total, len, Some(addr));
        }
        Op::Collapse { at, len } if total > 0 => {
            let at = pick(at, total);
            let len = len.min(total - at);
            tree.collapse(at, len).unwrap();
            model.collapse(at, len);
        }
        Op::Remap { at, len, addr } if total > 0 => {
            let at = pick(at, total);
            let len = len.min(total - at);
            if addr_ok(addr, len) {
                tree.remap(at, len, addr).unwrap();
                model.remap(at, len, addr);
            } else {
                assert!(matches!(
                    tree.remap(at, len, addr),
                    Err(Error::AddressTooLarge(_))
                ));
            }
        }
        Op::RemapMerged { at, len, addr } if total > 0 => {
            let at = pick(at, total);
            let len = len.min(total - at);
            if addr_ok(addr, len) {
                let before = tree.extent_count();
                tree.remap_merged(at, len, addr).unwrap();
                model.remap_merged(at, len, addr);
                // One extent covers the range (merging is off here).
                let e = tree.extent_at(at).unwrap();
                assert_eq!((e.offset, e.len, e.addr), (at, len, Some(addr)));
                assert!(tree.extent_count() <= before + 2);
            } else {
                assert!(matches!(
                    tree.remap_merged(at, len, addr),
                    Err(Error::AddressTooLarge(_))
                ));
            }
        }
        Op::SetTag { at, tag } if total > 0 => {
            let at = pick(at, total);
            tree.set_tag(at, tag).unwrap();
            model.set_tag(at, tag);
            assert_eq!(tree.get_tag(at).unwrap(), model.get_tag(at));
        }
        Op::Replace { at, len, addr, tag } if total > 0 => {
            let at = pick(at, total);
            let len = len.min(total - at);
            let mut old = vec![Piece { addr: None, len: 0 }];
            if addr_ok(addr, len) {
                let before = model.pieces(at, len);
                tree.replace(at, len, addr, tag, &mut old).unwrap();
                assert_eq!(coalesce(old), before);
                model.collapse(at, len);
                model.insert(at, len, Some(addr));
                if tag != 0 {
                    model.set_tag(at, tag);
                }
                assert_eq!(tree.get_tag(at).unwrap(), model.get_tag(at));
            } else {
                assert!(matches!(
                    tree.replace(at, len, addr, tag, &mut old),
                    Err(Error::AddressTooLarge(_))
                ));
            }
        }
        Op::Query { at, len } if total > 0 => {
            let at = pick(at, total);
            let len = len.min(total - at);
            assert_eq!(
                coalesce(tree.query(at, len).unwrap()),
                model.pieces(at, len)
            );
            assert_eq!(tree.lookup(at).unwrap(), model.lookup(at));
            let e = tree.extent_at(at).unwrap();
            assert!(e.offset <= at && at < e.offset + e.len);
            assert_eq!(e.addr.map(|a| a + (at - e.offset)), model.lookup(at));
            assert_eq!(tree.get_tag(at).unwrap(), model.get_tag(at));
        }
        _ => {}
    }
    // Whatever the operation did (or refused), the tree is in normal form.
    tree.check_invariants();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Small lengths: many extents, splits and merges.
    #[test]
    fn small_extents_match_the_model(ops in proptest::collection::vec(op(40), 1..600)) {
        let mut tree = FlexTree::new();
        let mut model = Model::default();
        for (i, o) in ops.iter().enumerate() {
            apply(&mut tree, &mut model, o);
            if i % 50 == 0 {
                assert_same(&tree, &model);
            }
        }
        assert_same(&tree, &model);
    }

    /// Huge lengths: offsets near 2^63 and the space limit.
    #[test]
    fn huge_extents_match_the_model(ops in proptest::collection::vec(op(1 << 61), 1..200)) {
        let mut tree = FlexTree::new();
        let mut model = Model::default();
        for o in &ops {
            apply(&mut tree, &mut model, o);
        }
        assert_same(&tree, &model);
    }

    /// `clone_from` into a tree that held something else gives a working
    /// copy: it matches the source, takes further operations like it, and
    /// leaves the source alone.
    #[test]
    fn clone_from_gives_a_working_copy(
        first in proptest::collection::vec(op(30), 1..400),
        other in proptest::collection::vec(op(30), 1..400),
        after in proptest::collection::vec(op(30), 1..200),
    ) {
        let (mut source, mut model) = (FlexTree::new(), Model::default());
        for o in &first {
            apply(&mut source, &mut model, o);
        }
        let (mut copy, mut scratch) = (FlexTree::new(), Model::default());
        for o in &other {
            apply(&mut copy, &mut scratch, o);
        }
        copy.clone_from(&source);
        copy.check_invariants();
        assert_same(&copy, &model);
        let mut copy_model = model.clone();
        for o in &after {
            apply(&mut copy, &mut copy_model, o);
        }
        assert_same(&copy, &copy_model);
        assert_same(&source, &model);
    }

    /// A deep tree (thousands of extents) taken apart by random ops.
    #[test]
    fn deep_tree_matches_the_model(seed_ops in proptest::collection::vec(op(30), 200..400)) {
        let mut tree = FlexTree::new();
        let mut model = Model::default();
        for i in 0..12_000u64 {
            tree.append(3, i * 10).unwrap();
        }
        tree.check_invariants();
        model.ext = (0..12_000u64)
            .map(|i| common::MExt { len: 3, addr: Some(i * 10), tag: 0 })
            .collect();
        prop_assert!(tree.height() >= 3);
        for o in &seed_ops {
            apply(&mut tree, &mut model, o);
        }
        assert_same(&tree, &model);
        // Collapse most of it so nodes merge and the tree shrinks.
        let keep = 500.min(model.len());
        let len = model.len() - keep;
        tree.collapse(keep / 2, len).unwrap();
        model.collapse(keep / 2, len);
        tree.check_invariants();
        assert_same(&tree, &model);
        prop_assert!(tree.height() <= 2);
    }
}

#[test]
fn space_reaches_exactly_the_limit() {
    let mut tree = FlexTree::new();
    tree.insert_hole(0, MAX_SPACE - 10).unwrap();
    tree.append(10, 7).unwrap();
    assert_eq!(tree.len(), MAX_SPACE);
    assert_eq!(tree.lookup(MAX_SPACE - 1).unwrap(), Some(16));
    assert_eq!(tree.lookup(MAX_SPACE - 11).unwrap(), None);
    assert!(matches!(tree.append(1, 0), Err(Error::SpaceOverflow)));
    tree.collapse(5, MAX_SPACE - 20).unwrap();
    assert_eq!(tree.len(), 20);
    assert_eq!(tree.lookup(15).unwrap(), Some(12));
}
