//! Views that share a tree's nodes (`FlexTree::share`) never change while
//! the tree is edited: random edits, views taken and dropped at random
//! points, each view compared with the model as of its moment; and
//! checkpoints of a tree edited while views share its nodes reload equal.

mod common;

use common::{assert_same, Model};
use flextree::{Extent, FlexTree, MemFile};
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
    Collapse {
        at: u64,
        len: u64,
    },
    Remap {
        at: u64,
        len: u64,
        addr: u64,
    },
    SetTag {
        at: u64,
        tag: u16,
    },
    /// Takes a view of the tree as it is now.
    Share,
    /// Drops the live view at this fraction of the list.
    Drop {
        which: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let frac = any::<u64>();
    let len = 1u64..=64;
    prop_oneof![
        6 => (frac, len.clone(), 0u64..1 << 40).prop_map(|(at, len, addr)| Op::Insert { at, len, addr }),
        1 => (frac, len.clone()).prop_map(|(at, len)| Op::Hole { at, len }),
        3 => (frac, len.clone()).prop_map(|(at, len)| Op::Collapse { at, len }),
        2 => (frac, len, 0u64..1 << 40).prop_map(|(at, len, addr)| Op::Remap { at, len, addr }),
        1 => (frac, 0u16..5).prop_map(|(at, tag)| Op::SetTag { at, tag }),
        1 => Just(Op::Share),
        1 => frac.prop_map(|which| Op::Drop { which }),
    ]
}

fn pick(frac: u64, below: u64) -> u64 {
    ((u128::from(frac) * u128::from(below)) >> 64) as u64
}

/// A tree of `n` extents that do not merge, and its model.
fn filled(n: u64) -> (FlexTree, Model) {
    let mut t = FlexTree::new();
    let mut m = Model::default();
    for i in 0..n {
        let addr = (i % 2) * (1 << 39) + i * 100;
        t.append(10 + i % 7, addr).unwrap();
        m.insert(m.len(), 10 + i % 7, Some(addr));
    }
    (t, m)
}

fn apply(t: &mut FlexTree, m: &mut Model, views: &mut Vec<(FlexTree, Model)>, op: &Op) {
    let total = m.len();
    match *op {
        Op::Insert { at, len, addr } => {
            let at = pick(at, total + 1);
            t.insert(at, len, addr).unwrap();
            m.insert(at, len, Some(addr));
        }
        Op::Hole { at, len } => {
            let at = pick(at, total + 1);
            t.insert_hole(at, len).unwrap();
            m.insert(at, len, None);
        }
        Op::Collapse { at, len } if total > 0 => {
            let at = pick(at, total);
            let len = len.min(total - at);
            t.collapse(at, len).unwrap();
            m.collapse(at, len);
        }
        Op::Remap { at, len, addr } if total > 0 => {
            let at = pick(at, total);
            let len = len.min(total - at);
            t.remap(at, len, addr).unwrap();
            m.remap(at, len, addr);
        }
        Op::SetTag { at, tag } if total > 0 => {
            let at = pick(at, total);
            t.set_tag(at, tag).unwrap();
            m.set_tag(at, tag);
        }
        Op::Share => views.push((t.share(), m.clone())),
        Op::Drop { which } if !views.is_empty() => {
            views.remove(pick(which, views.len() as u64) as usize);
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every live view reads as the model did when it was taken, after
    /// every edit of the tree; the tree reads as its own model.
    #[test]
    fn views_never_change_while_the_tree_is_edited(
        start in 0u64..3_000,
        ops in prop::collection::vec(op(), 1..400),
    ) {
        let (mut t, mut m) = filled(start);
        let mut views = vec![(t.share(), m.clone())];
        for (i, o) in ops.iter().enumerate() {
            apply(&mut t, &mut m, &mut views, o);
            // A full comparison is O(extents): every few edits and at the end.
            if i % 50 == 49 || i + 1 == ops.len() {
                t.check_invariants();
                assert_same(&t, &m);
                for (v, vm) in &views {
                    v.check_invariants();
                    assert_same(v, vm);
                }
            }
        }
        drop(views);
        prop_assert_eq!(t.shared_node_blocks(), 0);
    }
}

fn contents(t: &FlexTree) -> Vec<Extent> {
    t.extents_from(0).unwrap().collect()
}

/// Checkpoints of a tree edited while views share its nodes (the edits
/// copied the shared blocks, dirty state and pages included) reload equal
/// to the tree; the views keep their contents; edits after the views are
/// gone checkpoint and reload equal too.
#[test]
fn checkpoints_after_copy_on_write_edits_reload_equal() {
    let file = MemFile::new();
    let (mut t, _) = filled(40_000);
    t.checkpoint(&file, b"base").unwrap();
    let mut views = Vec::new();
    for round in 0..6u64 {
        let view = t.share();
        let seen = contents(&view);
        for i in 0..1000u64 {
            let at = (i * 7919 + round * 104_729) % t.len();
            match i % 3 {
                0 => t.insert(at, 5, (1 << 40) + i).unwrap(),
                1 => t.collapse(at, 10.min(t.len() - at)).unwrap(),
                _ => t.remap(at, 3.min(t.len() - at), (1 << 41) + i).unwrap(),
            }
        }
        let meta = round.to_be_bytes();
        t.checkpoint(&file, &meta).unwrap();
        let (loaded, cp) = FlexTree::load(&file).unwrap();
        assert_eq!(cp.meta, meta);
        loaded.check_invariants();
        assert_eq!(contents(&loaded), contents(&t), "round {round}");
        assert_eq!(contents(&view), seen, "the view changed in round {round}");
        // Keep every other view alive into the next rounds.
        if round % 2 == 0 {
            views.push((view, seen));
        }
    }
    for (v, seen) in &views {
        assert_eq!(&contents(v), seen);
    }
    drop(views);
    for i in 0..1000u64 {
        t.insert((i * 31_337) % t.len(), 2, (1 << 42) + i).unwrap();
    }
    t.checkpoint(&file, b"end").unwrap();
    let (loaded, _) = FlexTree::load(&file).unwrap();
    assert_eq!(contents(&loaded), contents(&t));
}
