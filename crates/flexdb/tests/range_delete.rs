//! Range deletes (`Db::delete_range`, `WriteBatch::delete_range`,
//! `Transaction::delete_range`): what readers see before and after the
//! committer applies them, that whole intervals leave the space in runs,
//! snapshots, transactions' conflicts, order within a batch, reopen, and
//! bad input. (Random sequences with range deletes run in `model.rs`,
//! crashes in `crash.rs`.)

use std::collections::BTreeMap;
use std::ops::Bound;

use flexdb::{Db, Error, Isolation, Options, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value of {i} ").into_bytes();
    v.resize(100, b'.');
    v
}

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(256 << 10)
}

/// A store holding keys `0..n`, committed to the space.
fn filled(dir: &std::path::Path, n: u32) -> (Db, Model) {
    let db = Db::open(dir, opts()).unwrap();
    let mut model = Model::new();
    for i in 0..n {
        db.put(key(i), value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    db.flush().unwrap();
    (db, model)
}

fn content(db: &Db) -> Model {
    db.iter().map(|kv| kv.unwrap()).collect()
}

fn content_back(db: &Db) -> Model {
    db.iter().rev().map(|kv| kv.unwrap()).collect()
}

/// Every read agrees with `model`: a scan both ways, and gets of every key
/// it held or holds.
fn agrees(db: &Db, model: &Model, keys: impl Iterator<Item = u32>) {
    assert_eq!(&content(db), model);
    assert_eq!(&content_back(db), model);
    for i in keys {
        assert_eq!(
            db.get(key(i)).unwrap(),
            model.get(&key(i)).cloned(),
            "key {i}"
        );
    }
}

#[test]
fn a_range_over_many_intervals_is_dropped_in_runs_and_reads_agree_throughout() {
    let dir = tempfile::tempdir().unwrap();
    let n = 50_000;
    let (db, mut model) = filled(dir.path(), n);
    let before = db.stats();
    db.delete_range(key(10_000)..key(40_000)).unwrap();
    model.retain(|k, _| *k < key(10_000) || *k >= key(40_000));
    // Before the committer applies it: the MemTable's tombstone hides the
    // space's pairs.
    agrees(&db, &model, (9_990..10_010).chain(39_990..40_010));
    db.flush().unwrap();
    let after = db.stats();
    agrees(&db, &model, (0..n).step_by(7));
    assert_eq!(after.pairs, 20_000);
    assert_eq!(
        after.range_deletes_committed - before.range_deletes_committed,
        1
    );
    // 30,000 pairs of about 115 bytes fill at least 30,000 / 16 intervals:
    // almost all of them leave whole, not pair by pair.
    let dropped = after.range_intervals_dropped - before.range_intervals_dropped;
    assert!(dropped >= 1_800, "only {dropped} intervals dropped whole");
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    agrees(&db, &model, (0..n).step_by(13));
    assert_eq!(db.stats().pairs, 20_000);
}

#[test]
fn open_ended_and_whole_store_ranges_remove_everything_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = filled(dir.path(), 5_000);
    db.delete_range(key(4_000)..).unwrap();
    model.retain(|k, _| *k < key(4_000));
    db.delete_range(..key(100)).unwrap();
    model.retain(|k, _| *k >= key(100));
    db.delete_range(key(200)..=key(300)).unwrap();
    model.retain(|k, _| *k < key(200) || *k > key(300));
    db.delete_range::<[u8], _>((
        Bound::Excluded(&key(500)[..]),
        Bound::Excluded(&key(600)[..]),
    ))
    .unwrap();
    model.retain(|k, _| *k <= key(500) || *k >= key(600));
    agrees(&db, &model, 0..5_000);
    db.flush().unwrap();
    agrees(&db, &model, 0..5_000);
    assert_eq!(db.stats().pairs, model.len() as u64);
    db.delete_range::<[u8], _>(..).unwrap();
    assert_eq!(db.iter().count(), 0);
    db.flush().unwrap();
    assert_eq!(db.iter().count(), 0);
    assert_eq!(db.stats().pairs, 0);
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    // The emptied store takes writes again.
    db.put("after", "all").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"all"[..]));
}

#[test]
fn a_batch_applies_its_range_delete_in_order_with_its_other_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = filled(dir.path(), 1_000);
    let mut b = WriteBatch::new();
    b.put(&key(150), b"before").unwrap();
    b.delete_range(key(100)..key(200)).unwrap();
    b.put(&key(160), b"after").unwrap();
    b.put(&key(5_000), b"outside").unwrap();
    db.write(b).unwrap();
    let check = |db: &Db| {
        assert_eq!(db.get(key(150)).unwrap(), None);
        assert_eq!(db.get(key(160)).unwrap().as_deref(), Some(&b"after"[..]));
        assert_eq!(db.get(key(100)).unwrap(), None);
        assert_eq!(db.get(key(200)).unwrap(), Some(value(200)));
        let in_range: Vec<_> = db
            .range(key(100)..key(200))
            .map(|kv| kv.unwrap().0)
            .collect();
        assert_eq!(in_range, vec![key(160)]);
        assert_eq!(db.iter().count(), 1_000 - 100 + 1 + 1);
    };
    check(&db);
    db.flush().unwrap();
    check(&db);
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    check(&db);
    assert_eq!(db.stats().pairs, 902);
}

#[test]
fn writes_after_a_range_delete_in_the_same_memtable_stand() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i)).unwrap();
    }
    db.delete_range(key(0)..key(100)).unwrap();
    db.put(key(50), b"again").unwrap();
    db.delete(key(51)).unwrap();
    db.delete_range(key(60)..key(70)).unwrap();
    db.put(key(65), b"again").unwrap();
    let check = |db: &Db| {
        let all: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
        assert_eq!(
            all,
            vec![(key(50), b"again".to_vec()), (key(65), b"again".to_vec())]
        );
        assert_eq!(db.get(key(10)).unwrap(), None);
    };
    check(&db);
    db.flush().unwrap();
    check(&db);
    assert_eq!(db.stats().pairs, 2);
}

#[test]
fn snapshots_and_iterators_taken_before_a_range_delete_keep_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = filled(dir.path(), 20_000);
    let snap = db.snapshot();
    let mut it = db.range(key(5_000)..key(5_100));
    assert_eq!(it.next().unwrap().unwrap().0, key(5_000));
    db.delete_range(key(1_000)..key(19_000)).unwrap();
    // Committed, and the space compacted: the snapshot still reads it all.
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(snap.get(key(5_000)).unwrap(), Some(value(5_000)));
    let seen: Model = snap.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(seen, model);
    assert_eq!(it.count(), 99);
    assert_eq!(db.get(key(5_000)).unwrap(), None);
    assert_eq!(db.iter().count(), 2_000);
}

#[test]
fn a_range_delete_after_a_reopen_counts_pairs_it_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = filled(dir.path(), 20_000);
    // A crash-like close: the index is rebuilt from the space, without
    // pair counts.
    drop(db);
    let db = Db::open(dir.path(), opts()).unwrap();
    db.delete_range(key(3_000)..key(17_000)).unwrap();
    db.flush().unwrap();
    assert_eq!(db.stats().pairs, 6_000);
    assert_eq!(db.iter().count(), 6_000);
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

#[test]
fn transactions_conflict_with_range_deletes_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = filled(dir.path(), 1_000);
    // A serializable reader of a key a range delete removed meanwhile.
    let mut t = db.transaction(Isolation::Serializable);
    assert!(t.get(key(10)).unwrap().is_some());
    t.put("elsewhere", "x").unwrap();
    db.delete_range(key(0)..key(20)).unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    // A scan of a range a range delete touched meanwhile.
    let mut t = db.transaction(Isolation::Serializable);
    assert_eq!(t.range(key(500)..key(510)).count(), 10);
    t.put("elsewhere", "y").unwrap();
    db.delete_range(key(505)..key(600)).unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    // First committer wins: a key the transaction writes, removed by a
    // range delete meanwhile.
    let mut t = db.transaction(Isolation::Snapshot);
    t.put(key(700), "mine").unwrap();
    db.delete_range(key(650)..key(750)).unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    // A transaction's range delete against a write into its range.
    let mut t = db.transaction(Isolation::Snapshot);
    t.delete_range(key(800)..key(900)).unwrap();
    db.put(key(850), "theirs").unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    assert_eq!(db.get(key(850)).unwrap().as_deref(), Some(&b"theirs"[..]));
    // ...and no conflict with a write outside it.
    let mut t = db.transaction(Isolation::Snapshot);
    t.delete_range(key(800)..key(900)).unwrap();
    db.put(key(950), "theirs").unwrap();
    t.commit().unwrap();
    assert_eq!(db.range(key(800)..key(900)).count(), 0);
    assert_eq!(db.get(key(950)).unwrap().as_deref(), Some(&b"theirs"[..]));
}

#[test]
fn a_transaction_reads_its_own_range_delete() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = filled(dir.path(), 1_000);
    let mut t = db.transaction(Isolation::Serializable);
    t.put(key(105), "written before").unwrap();
    t.delete_range(key(100)..key(200)).unwrap();
    t.put(key(150), "written after").unwrap();
    assert_eq!(t.get(key(105)).unwrap(), None);
    assert_eq!(t.get(key(120)).unwrap(), None);
    assert_eq!(
        t.get(key(150)).unwrap().as_deref(),
        Some(&b"written after"[..])
    );
    assert_eq!(t.get(key(200)).unwrap(), Some(value(200)));
    let seen: Vec<_> = t.range(key(90)..key(210)).map(|kv| kv.unwrap().0).collect();
    let want: Vec<_> = (90..100).chain([150]).chain(200..210).map(key).collect();
    assert_eq!(seen, want);
    let back: Vec<_> = t
        .range(key(90)..key(210))
        .rev()
        .map(|kv| kv.unwrap().0)
        .collect();
    assert_eq!(back, want.iter().rev().cloned().collect::<Vec<_>>());
    // Nobody else sees it before the commit.
    assert_eq!(db.get(key(120)).unwrap(), Some(value(120)));
    t.commit().unwrap();
    assert_eq!(db.get(key(120)).unwrap(), None);
    assert_eq!(db.get(key(105)).unwrap(), None);
    assert_eq!(
        db.get(key(150)).unwrap().as_deref(),
        Some(&b"written after"[..])
    );
    db.flush().unwrap();
    assert_eq!(db.iter().count(), 901);
}

#[test]
fn bad_ranges_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = filled(dir.path(), 300);
    assert!(matches!(
        db.delete_range(key(200)..key(100)),
        Err(Error::InvalidArgument(_))
    ));
    let huge = vec![b'k'; flexdb::MAX_KEY_LEN + 1];
    assert!(matches!(
        db.delete_range(&huge[..]..),
        Err(Error::KeyTooLarge { .. })
    ));
    // An empty range is no error, and removes nothing.
    db.delete_range(key(100)..key(100)).unwrap();
    let mut t = db.transaction(Isolation::Snapshot);
    assert!(matches!(
        t.delete_range(key(2)..key(1)),
        Err(Error::InvalidArgument(_))
    ));
    t.commit().unwrap();
    db.flush().unwrap();
    assert_eq!(content(&db), model);
}

/// Scans and snapshot reads racing a range delete and its commit (which
/// drops runs of intervals between the committer's groups) see all of the
/// range or none of it, never a part.
#[test]
fn readers_racing_a_range_delete_see_all_of_it_or_none() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = filled(dir.path(), 30_000);
    let db = std::sync::Arc::new(db);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let scanner = s.spawn(|| {
            let (mut whole, mut gone) = (0, 0);
            while !done.load(Ordering::Acquire) {
                let n = db.range(key(5_000)..key(25_000)).count();
                assert!(n == 20_000 || n == 0, "a scan saw {n} of 20,000 pairs");
                if n == 0 {
                    gone += 1;
                } else {
                    whole += 1;
                }
                let snap = db.snapshot();
                let (a, b) = (
                    snap.get(key(5_000)).unwrap(),
                    snap.get(key(24_999)).unwrap(),
                );
                assert_eq!(
                    a.is_some(),
                    b.is_some(),
                    "a snapshot saw half a range delete"
                );
            }
            (whole, gone)
        });
        // Other writes go on around it, outside the range.
        for round in 0..3u32 {
            for i in 0..2_000 {
                db.put(key(30_000 + round * 2_000 + i), value(i)).unwrap();
            }
            if round == 1 {
                db.delete_range(key(5_000)..key(25_000)).unwrap();
            }
            db.flush().unwrap();
        }
        // Scans after the commit too.
        std::thread::sleep(std::time::Duration::from_millis(50));
        done.store(true, Ordering::Release);
        let (whole, gone) = scanner.join().unwrap();
        assert!(gone > 0, "no scan ran after the delete ({whole} before)");
    });
    assert_eq!(db.iter().count(), 30_000 - 20_000 + 6_000);
}

/// A range ending at the longest key, inclusive (stored as a bound one
/// byte longer than any key), commits through a transaction too.
#[test]
fn the_longest_bounds_commit_through_a_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let k = vec![b'k'; flexdb::MAX_KEY_LEN];
    db.put(&k, "v").unwrap();
    db.put("a", "v").unwrap();
    let mut t = db.transaction(Isolation::Snapshot);
    t.delete_range(&k[..]..=&k[..]).unwrap();
    assert_eq!(t.get(&k).unwrap(), None);
    t.commit().unwrap();
    assert_eq!(db.get(&k).unwrap(), None);
    db.flush().unwrap();
    let left: Vec<_> = db.iter().map(|kv| kv.unwrap().0).collect();
    assert_eq!(left, vec![b"a".to_vec()]);
}
