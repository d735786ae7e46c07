//! Keyspaces (`Db::keyspace`, `Keyspace`, `WriteBatch::put_in`,
//! `Transaction::keyspace`, `Snapshot::keyspace`, `Db::drop_keyspace`):
//! keyspaces never see each other's keys, in gets, scans both ways,
//! prefixes, range deletes, snapshots and transactions; batches and
//! transactions spanning keyspaces are atomic; a drop removes every pair
//! at once and its handles refuse; the catalog survives reopen and
//! backup; bad names are refused. (Random sequences over several
//! keyspaces run in `model.rs`, crashes in `crash.rs`.)

use std::collections::BTreeMap;

use flexdb::{Db, Error, Isolation, Options, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(256 << 10)
}

/// Keys that probe the encoding: empty, `0xFF`-leading, and ordinary.
fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0xFF],
        vec![0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
        vec![0xFF, 0, 0, 0, 1],
        vec![0xFE, 0xFF],
    ];
    keys.extend((0..300).map(|i| format!("key{i:04}").into_bytes()));
    keys
}

fn scan(it: flexdb::Iter<'static>) -> Model {
    it.map(|kv| kv.unwrap()).collect()
}

#[test]
fn keyspaces_hold_their_own_keys_in_every_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    let (mut md, mut ma, mut mb) = (Model::new(), Model::new(), Model::new());
    for (i, k) in keys().into_iter().enumerate() {
        let v = |who: &str| format!("{who}{i}").into_bytes();
        db.put(&k, v("d")).unwrap();
        md.insert(k.clone(), v("d"));
        if i % 2 == 0 {
            a.put(&k, v("a")).unwrap();
            ma.insert(k.clone(), v("a"));
        }
        if i % 3 == 0 {
            b.put(&k, v("b")).unwrap();
            mb.insert(k.clone(), v("b"));
        }
    }
    let check = |db: &Db, a: &flexdb::Keyspace, b: &flexdb::Keyspace| {
        assert_eq!(scan(db.iter()), md);
        assert_eq!(scan(a.iter()), ma);
        assert_eq!(scan(b.iter()), mb);
        let back: Vec<_> = a.iter().rev().map(|kv| kv.unwrap().0).collect();
        assert_eq!(back, ma.keys().rev().cloned().collect::<Vec<_>>());
        let back: Vec<_> = db.iter().rev().map(|kv| kv.unwrap().0).collect();
        assert_eq!(back, md.keys().rev().cloned().collect::<Vec<_>>());
        for k in keys() {
            assert_eq!(db.get(&k).unwrap(), md.get(&k).cloned(), "{k:?}");
            assert_eq!(a.get(&k).unwrap(), ma.get(&k).cloned(), "{k:?}");
            assert_eq!(b.get(&k).unwrap(), mb.get(&k).cloned(), "{k:?}");
        }
        // Ranges and prefixes, both ways, and seeks, in keyspace keys.
        let want: Vec<_> = ma
            .range(b"key0100".to_vec()..b"key0200".to_vec())
            .map(|(k, _)| k.clone())
            .collect();
        let got: Vec<_> = a
            .range("key0100".."key0200")
            .map(|kv| kv.unwrap().0)
            .collect();
        assert_eq!(got, want);
        assert_eq!(a.prefix("key01").count(), 50);
        assert_eq!(b.prefix([0xFF]).count(), 1, "{mb:?}");
        assert_eq!(db.prefix([0xFF]).count(), 3);
        let mut it = b.iter();
        it.seek("key0150");
        assert_eq!(it.next().unwrap().unwrap().0, b"key0150".to_vec());
        let mut it = b.iter();
        it.seek_back("key0010");
        assert_eq!(it.next_back().unwrap().unwrap().0, b"key0009".to_vec());
        let mut it = a.iter();
        let (k, _) = it.next_ref().unwrap().unwrap();
        assert_eq!(k, b"");
    };
    check(&db, &a, &b);
    db.flush().unwrap();
    check(&db, &a, &b);
    assert_eq!(
        db.stats().pairs as usize,
        md.len() + ma.len() + mb.len() + 3
    );
    drop((a, b));
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.keyspaces(), ["default", "a", "b"]);
    let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    check(&db, &a, &b);
}

#[test]
fn batches_and_transactions_span_keyspaces_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let (from, to) = (db.keyspace("from").unwrap(), db.keyspace("to").unwrap());
    let mut batch = WriteBatch::new();
    for i in 0..100u32 {
        batch.put_in(&from, &i.to_be_bytes(), b"100").unwrap();
    }
    batch.put(b"total", b"10000").unwrap();
    db.write(batch).unwrap();
    // Transfers between keyspaces in transactions, from two threads, with
    // a reader checking the sum through snapshots of both keyspaces.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..2u32 {
            let (db, from, to) = (&db, &from, &to);
            s.spawn(move || {
                for i in 0..200u32 {
                    let k = ((i * 7 + t * 13) % 100).to_be_bytes();
                    loop {
                        let mut tx = db.transaction(Isolation::Serializable);
                        let a: u32 = parse(tx.keyspace(from).unwrap().get(k).unwrap());
                        let b: u32 = parse(tx.keyspace(to).unwrap().get(k).unwrap());
                        if a == 0 {
                            break;
                        }
                        tx.keyspace(from)
                            .unwrap()
                            .put(k, (a - 1).to_string())
                            .unwrap();
                        tx.keyspace(to)
                            .unwrap()
                            .put(k, (b + 1).to_string())
                            .unwrap();
                        match tx.commit() {
                            Ok(()) => break,
                            Err(Error::Conflict) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let snap = db.snapshot();
                let sum: u32 = [&from, &to]
                    .iter()
                    .flat_map(|ks| snap.keyspace(ks).unwrap().iter())
                    .map(|kv| parse(Some(kv.unwrap().1)))
                    .sum();
                assert_eq!(sum, 10_000);
                assert_eq!(snap.get("total").unwrap().as_deref(), Some(&b"10000"[..]));
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let sum: u32 = from
        .iter()
        .chain(to.iter())
        .map(|kv| parse(Some(kv.unwrap().1)))
        .sum();
    assert_eq!(sum, 10_000);
    assert_eq!(
        to.iter().map(|kv| parse(Some(kv.unwrap().1))).sum::<u32>(),
        400
    );
    // A transaction begun in a keyspace acts there; a write conflict in
    // one keyspace does not touch the same key in another.
    let mut t1 = to.transaction(Isolation::Snapshot).unwrap();
    t1.put([0u8; 4], "x").unwrap();
    db.put([0u8, 0, 0, 0], "default").unwrap();
    t1.commit().unwrap();
    let mut t2 = to.transaction(Isolation::Snapshot).unwrap();
    t2.put([0u8; 4], "y").unwrap();
    to.put([0u8; 4], "z").unwrap();
    assert!(matches!(t2.commit(), Err(Error::Conflict)));
    assert!(to
        .compare_and_swap([0u8; 4], Some(b"z"), Some(b"w"))
        .unwrap());
    assert_eq!(db.get([0u8; 4]).unwrap().as_deref(), Some(&b"default"[..]));
}

fn parse(v: Option<Vec<u8>>) -> u32 {
    v.map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap())
}

#[test]
fn range_deletes_stay_in_their_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    for k in keys() {
        db.put(&k, "d").unwrap();
        a.put(&k, "a").unwrap();
        b.put(&k, "b").unwrap();
    }
    let n = keys().len();
    db.flush().unwrap();
    a.delete_range("key0050".."key0250").unwrap();
    assert_eq!(a.iter().count(), n - 200);
    // Emptying the default keyspace keeps the named ones and the catalog.
    db.delete_range::<[u8], _>(..).unwrap();
    assert_eq!(db.iter().count(), 0);
    b.delete_range(&[0xFFu8][..]..).unwrap();
    assert_eq!(b.iter().count(), n - 3);
    // In a batch, and in a transaction.
    let mut batch = WriteBatch::new();
    batch.delete_range_in(&b, "key0000".."key0100").unwrap();
    batch.delete_in(&a, b"key0000").unwrap();
    db.write(batch).unwrap();
    assert_eq!(b.iter().count(), n - 103);
    let mut t = db.transaction(Isolation::Serializable);
    t.keyspace(&a).unwrap().delete_range::<[u8], _>(..).unwrap();
    assert_eq!(t.keyspace(&a).unwrap().iter().count(), 0);
    assert_eq!(t.keyspace(&b).unwrap().iter().count(), n - 103);
    t.commit().unwrap();
    db.flush().unwrap();
    assert_eq!(a.iter().count(), 0);
    assert_eq!(b.iter().count(), n - 103);
    drop((a, b));
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.keyspaces(), ["default", "a", "b"]);
    assert_eq!(db.keyspace("b").unwrap().iter().count(), n - 103);
}

#[test]
fn a_dropped_keyspace_is_gone_at_once_and_its_handles_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let gone = db.keyspace("gone").unwrap();
    let kept = db.keyspace("kept").unwrap();
    for i in 0..3000u32 {
        gone.put(format!("k{i:05}"), [7u8; 100]).unwrap();
        kept.put(format!("k{i:05}"), "kept").unwrap();
    }
    db.flush().unwrap();
    let snap = gone.snapshot().unwrap();
    assert!(db.drop_keyspace("gone").unwrap());
    assert!(!db.drop_keyspace("gone").unwrap());
    assert!(!db.has_keyspace("gone"));
    assert_eq!(db.keyspaces(), ["default", "kept"]);
    // The handle refuses; a snapshot from before still reads.
    assert!(matches!(gone.get("k00001"), Err(Error::InvalidArgument(_))));
    assert!(matches!(gone.put("k", "v"), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        gone.iter().next(),
        Some(Err(Error::InvalidArgument(_)))
    ));
    assert!(WriteBatch::new().put_in(&gone, b"k", b"v").is_err());
    assert!(db.transaction(Isolation::Snapshot).keyspace(&gone).is_err());
    assert_eq!(snap.iter().count(), 3000);
    drop(snap);
    // A new keyspace of the same name starts empty; the other is whole.
    let again = db.keyspace("gone").unwrap();
    assert_eq!(again.iter().count(), 0);
    assert_eq!(again.get("k00001").unwrap(), None);
    assert_eq!(kept.iter().count(), 3000);
    db.flush().unwrap();
    assert_eq!(db.stats().pairs, 3000 + 3);
    drop((gone, again, kept));
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.keyspaces(), ["default", "gone", "kept"]);
    assert_eq!(db.keyspace("gone").unwrap().iter().count(), 0);
    assert_eq!(db.keyspace("kept").unwrap().iter().count(), 3000);
    assert!(matches!(
        db.drop_keyspace("default"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn bad_names_and_foreign_handles_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    for name in [
        String::new(),
        "x".repeat(flexdb::MAX_KEYSPACE_NAME_LEN + 1),
        "a\0b".into(),
    ] {
        assert!(
            matches!(db.keyspace(&name), Err(Error::InvalidArgument(_))),
            "{name:?}"
        );
    }
    assert!(matches!(
        db.existing_keyspace(""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(db.existing_keyspace("later").unwrap().is_none());
    assert!(!db.has_keyspace("later"));
    db.keyspace(&"x".repeat(flexdb::MAX_KEYSPACE_NAME_LEN))
        .unwrap();
    db.keyspace("é名前").unwrap();
    assert_eq!(db.keyspaces().len(), 3);
    assert_eq!(
        db.existing_keyspace("é名前").unwrap().unwrap().name(),
        "é名前"
    );
    // "default" is the default keyspace.
    db.keyspace("default").unwrap().put("k", "v").unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    // A handle of another store.
    let dir2 = tempfile::tempdir().unwrap();
    let other = Db::open(dir2.path(), opts()).unwrap();
    let foreign = other.keyspace("a").unwrap();
    assert!(db.snapshot().keyspace(&foreign).is_err());
    assert!(db
        .transaction(Isolation::Snapshot)
        .keyspace(&foreign)
        .is_err());
    // Oversized keys, in a keyspace too.
    let big = vec![1u8; flexdb::MAX_KEY_LEN + 1];
    let ks = db.keyspace("a").unwrap();
    assert!(matches!(ks.put(&big, "v"), Err(Error::KeyTooLarge { .. })));
    let max = vec![0xFFu8; flexdb::MAX_KEY_LEN];
    ks.put(&max, "v").unwrap();
    db.put(&max, "d").unwrap();
    ks.delete_range(&max[..]..=&max[..]).unwrap();
    assert_eq!(ks.get(&max).unwrap(), None);
    assert_eq!(db.get(&max).unwrap().as_deref(), Some(&b"d"[..]));
}

#[test]
fn a_backup_keeps_every_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let a = db.keyspace("a").unwrap();
    for k in keys() {
        db.put(&k, "d").unwrap();
        a.put(&k, "a").unwrap();
    }
    let dest = dir.path().with_extension("backup");
    db.backup(&dest).unwrap();
    let copy = Db::open(&dest, Options::new()).unwrap();
    assert_eq!(copy.keyspaces(), ["default", "a"]);
    assert_eq!(scan(copy.iter()), scan(db.iter()));
    assert_eq!(scan(copy.keyspace("a").unwrap().iter()), scan(a.iter()));
    // The backup's catalog goes on from the source's.
    let b = copy.keyspace("b").unwrap();
    b.put("k", "b").unwrap();
    assert_eq!(copy.keyspace("a").unwrap().get("k").unwrap(), None);
    drop(copy);
    std::fs::remove_dir_all(&dest).unwrap();
}

#[test]
fn handles_of_a_dropped_keyspace_or_another_store_reach_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    db.put("d1", "default").unwrap();
    b.put("secret", "b's").unwrap();
    db.drop_keyspace("a").unwrap();
    // Its iterators yield the error, and no seek opens them.
    for back in [false, true] {
        let mut it = a.iter();
        if back {
            it.seek_back(b"\xff\xff");
        } else {
            it.seek(b"");
        }
        assert!(matches!(it.next(), Some(Err(Error::InvalidArgument(_)))));
        assert!(it.next().is_none() && it.next_back().is_none());
    }
    // No transaction or snapshot begins through it.
    assert!(matches!(
        a.transaction(Isolation::Snapshot),
        Err(Error::InvalidArgument(_))
    ));
    assert!(a.snapshot().is_err());
    assert!(a.compare_and_swap("k", None, Some(b"v")).is_err());
    // A batch may not mix stores' keyspaces, nor go to another store.
    let dir2 = tempfile::tempdir().unwrap();
    let other = Db::open(dir2.path(), opts()).unwrap();
    let foreign = other.keyspace("b").unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&b, b"k", b"v").unwrap();
    assert!(matches!(
        batch.put_in(&foreign, b"k", b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        other.write(batch.clone()),
        Err(Error::InvalidArgument(_))
    ));
    db.write(batch).unwrap();
    assert_eq!(foreign.get("k").unwrap(), None);
    assert_eq!(b.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_repair_keeps_every_keyspace_and_tagged_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    {
        let db = Db::open(&src, opts()).unwrap();
        let ks = db.keyspace("users").unwrap();
        for i in 0..2000u32 {
            ks.put(format!("u{i:05}"), "user").unwrap();
            db.put(format!("d{i:05}"), "default").unwrap();
        }
        db.flush().unwrap();
        // Some in the space, some only in the log.
        ks.put("alice", "1").unwrap();
        ks.delete_range("u00100".."u00200").unwrap();
        db.put(b"\xffff", "tagged").unwrap();
        db.put(vec![0xFFu8; flexdb::MAX_KEY_LEN], "longest")
            .unwrap();
        ks.put(vec![7u8; flexdb::MAX_KEY_LEN], "longest").unwrap();
        drop(ks);
        db.close().unwrap();
    }
    Db::repair(&src, Some(&dst), |_| {}).unwrap();
    let db = Db::open(&dst, Options::new()).unwrap();
    assert_eq!(db.keyspaces(), ["default", "users"]);
    assert_eq!(db.get(b"\xffff").unwrap().as_deref(), Some(&b"tagged"[..]));
    assert_eq!(db.iter().count(), 2002);
    let ks = db.keyspace("users").unwrap();
    assert_eq!(ks.iter().count(), 2000 - 100 + 2);
    assert_eq!(ks.get("alice").unwrap().as_deref(), Some(&b"1"[..]));
    // The catalog went on: a new keyspace gets a new number.
    let fresh = db.keyspace("fresh").unwrap();
    assert_eq!(fresh.iter().count(), 0);
    fresh.put("k", "v").unwrap();
    assert_eq!(ks.get("k").unwrap(), None);
}

/// The last interval damaged (where the catalog's range begins): the
/// store still opens, the default keyspace serves every other key, and
/// named keyspaces are refused as corrupt rather than made anew.
#[test]
fn a_damaged_interval_where_the_catalog_lies_does_not_fail_the_open() {
    use flexspace::FaultStorage;
    use std::sync::Arc;
    let st = FaultStorage::new();
    let o = || {
        Options::new()
            .memtable_bytes(16 << 10)
            .cache_bytes(64 << 10)
            .mmap_reads(false)
    };
    {
        let db =
            Db::open_with_storage(Arc::new(st.clone()), "s", o().create_if_missing(true)).unwrap();
        for i in 0..2000u32 {
            db.put(format!("key{i:05}"), format!("<MARK{i:05}>-value"))
                .unwrap();
        }
        db.close().unwrap();
    }
    let mut bytes = st.file_bytes("data").unwrap();
    let (from, to) = (b"<MARK01999>", b"<MQRK01999>");
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the last pair in the data file");
    bytes[at..at + to.len()].copy_from_slice(to);
    st.set_file_bytes("data", bytes);
    let db = Db::open_with_storage(Arc::new(st), "s", o()).unwrap();
    assert_eq!(
        db.get("key00000").unwrap().as_deref(),
        Some(&b"<MARK00000>-value"[..])
    );
    assert!(matches!(db.get("key01999"), Err(Error::Corrupt { .. })));
    assert!(matches!(db.keyspace("new"), Err(Error::Corrupt { .. })));
    assert_eq!(db.keyspaces(), ["default"]);
}
