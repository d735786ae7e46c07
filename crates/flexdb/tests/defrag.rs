//! Defragmentation (§5.2): an interval whose pairs were rewritten one by one
//! lies in many extents of the space; the committer rewrites it whole when
//! it next updates it, whether or not the interval ever left the cache.

mod common;

use flexdb::{Db, Options};

const KEYS: u32 = 4000;

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("{round:02}-{i:06}-{}", "v".repeat(90)).into_bytes()
}

/// Writes every key in order, then rewrites every third key in six rounds
/// (each key twice), committing after each round; the cache holds every
/// interval throughout. Returns the store and the round each key was last
/// written.
fn fragment(dir: &std::path::Path) -> (Db, Vec<u32>) {
    let db = open_cached(dir);
    let mut last = vec![0u32; KEYS as usize];
    for i in 0..KEYS {
        db.put(format!("key{i:06}"), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    for round in 1..=6u32 {
        for i in (round % 3..KEYS).step_by(3) {
            db.put(format!("key{i:06}"), value(i, round)).unwrap();
            last[i as usize] = round;
        }
        db.flush().unwrap();
    }
    (db, last)
}

/// A store with 1 MiB MemTables whose cache holds every interval the
/// tests make.
fn open_cached(dir: &std::path::Path) -> Db {
    common::open_sized(dir, 1 << 20, 4 << 20)
}

#[test]
fn intervals_rewritten_pair_by_pair_are_defragmented() {
    let dir = tempfile::tempdir().unwrap();
    let (db, last) = fragment(dir.path());
    for i in 0..KEYS {
        let got = db.get(format!("key{i:06}")).unwrap();
        assert_eq!(got, Some(value(i, last[i as usize])), "key {i}");
    }
    let s = db.stats();
    assert_eq!(s.pairs, u64::from(KEYS));
    assert!(
        s.defragmented_intervals > 0,
        "no interval was defragmented: {s:?}"
    );
    // Every key was rewritten on its own twice, which leaves one extent a
    // pair without defragmentation; a rewritten interval is one extent and
    // gains at most two an edit until its next rewrite.
    assert!(
        s.extents * 4 < s.pairs * 3,
        "{} extents for {} pairs: intervals stay fragmented",
        s.extents,
        s.pairs
    );
    db.close().unwrap();
    // The rewritten intervals read back the same after a reopen.
    let db = Db::open(dir.path(), Options::new()).unwrap();
    for i in (0..KEYS).step_by(7) {
        let got = db.get(format!("key{i:06}")).unwrap();
        assert_eq!(
            got,
            Some(value(i, last[i as usize])),
            "key {i} after reopen"
        );
    }
}

/// A hot pair rewritten again and again sits on an extent of its own after
/// its first rewrite, so its interval gains no more extents: the committer
/// counts them (rather than adding two an edit to a bound) and never
/// rewrites the interval's other pairs for it.
#[test]
fn a_pair_rewritten_in_place_does_not_defragment_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_cached(dir.path());
    for i in 0..12 {
        db.put(format!("key{i:06}"), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    for round in 1..=20 {
        db.put(format!("key{:06}", 5), value(5, round)).unwrap();
        db.flush().unwrap();
    }
    let s = db.stats();
    assert_eq!(s.defragmented_intervals, 0, "{s:?}");
    assert!(s.extents <= 4, "{} extents", s.extents);
    for i in 0..12 {
        let round = if i == 5 { 20 } else { 0 };
        assert_eq!(db.get(format!("key{i:06}")).unwrap(), Some(value(i, round)));
    }
}
