//! Bad input returns a typed error and leaves the tree unchanged.

use flextree::{Error, Extent, FlexTree, MemFile, MAX_ADDR, MAX_META, MAX_SPACE};

fn sample() -> FlexTree {
    let mut t = FlexTree::new();
    for i in 0..300u64 {
        t.append(7, i * 100).unwrap();
    }
    t.set_tag(14, 3).unwrap();
    t
}

fn snapshot(t: &FlexTree) -> Vec<Extent> {
    t.extents_from(0).unwrap().collect()
}

#[test]
fn every_bad_argument_is_a_typed_error_and_changes_nothing() {
    let mut t = sample();
    let before = snapshot(&t);
    let len = t.len();
    let out_of_range = |r: Result<(), Error>| matches!(r, Err(Error::OutOfRange { .. }));

    assert!(out_of_range(t.insert(len + 1, 5, 0)));
    assert!(matches!(t.insert(0, 0, 0), Err(Error::ZeroLength)));
    assert!(matches!(t.insert_hole(3, 0), Err(Error::ZeroLength)));
    assert!(matches!(
        t.insert(0, 5, MAX_ADDR),
        Err(Error::AddressTooLarge(_))
    ));
    assert!(matches!(
        t.insert(0, 1, u64::MAX),
        Err(Error::AddressTooLarge(_))
    ));
    assert!(matches!(
        t.insert(0, MAX_SPACE, 0),
        Err(Error::SpaceOverflow)
    ));
    assert!(matches!(
        t.insert_hole(0, u64::MAX),
        Err(Error::SpaceOverflow)
    ));
    assert!(out_of_range(t.collapse(len - 3, 4)));
    assert!(out_of_range(t.collapse(u64::MAX, 2)));
    assert!(matches!(t.collapse(0, 0), Err(Error::ZeroLength)));
    assert!(out_of_range(t.remap(len, 1, 0)));
    assert!(matches!(
        t.remap(0, 10, MAX_ADDR - 5),
        Err(Error::AddressTooLarge(_))
    ));
    assert!(out_of_range(t.set_tag(len, 1)));
    assert!(matches!(t.get_tag(len), Err(Error::OutOfRange { .. })));
    assert!(matches!(t.lookup(len), Err(Error::OutOfRange { .. })));
    assert!(matches!(
        t.extent_at(u64::MAX),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(t.query(len - 1, 2), Err(Error::OutOfRange { .. })));
    assert!(matches!(t.query(0, 0), Err(Error::ZeroLength)));
    assert!(matches!(
        t.query(1, u64::MAX),
        Err(Error::OutOfRange { .. })
    ));
    assert!(t.extents_from(len + 1).is_err());
    assert_eq!(t.extents_from(len).unwrap().count(), 0);

    let file = MemFile::new();
    assert!(matches!(
        t.checkpoint(&file, &vec![0; MAX_META + 1]),
        Err(Error::MetaTooLarge(_))
    ));
    assert_eq!(snapshot(&t), before);
    assert_eq!(t.len(), len);
}

#[test]
fn empty_tree_queries_are_errors() {
    let t = FlexTree::new();
    assert!(t.lookup(0).is_err());
    assert!(t.extent_at(0).is_err());
    assert!(t.query(0, 1).is_err());
    assert_eq!(t.extents_from(0).unwrap().count(), 0);
}
