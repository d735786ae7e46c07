//! The public API on real files: puts, gets, deletes, batches, ranges,
//! reopen, errors.

mod common;

use flexdb::{Db, Error, Options, WriteBatch, WriteOptions};

fn open(dir: &std::path::Path) -> Db {
    common::open_sized(dir, 16 << 10, 64 << 10)
}

#[test]
fn put_get_delete_across_commits_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for i in 0..5000u32 {
        db.put(format!("key{:06}", i * 7 % 5000), format!("value-{i}"))
            .unwrap();
    }
    for i in (0..5000u32).step_by(3) {
        db.delete(format!("key{i:06}")).unwrap();
    }
    db.flush().unwrap();
    let check = |db: &Db| {
        for i in 0..5000u32 {
            let got = db.get(format!("key{i:06}")).unwrap();
            if i % 3 == 0 {
                assert_eq!(got, None, "key {i}");
            } else {
                let j = (0..5000u32).find(|j| j * 7 % 5000 == i).unwrap();
                assert_eq!(got, Some(format!("value-{j}").into_bytes()), "key {i}");
            }
        }
        let n = db.iter().count();
        assert_eq!(n, 5000 - 1667);
    };
    check(&db);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.pairs, 5000 - 1667);
    assert_eq!(db.stats().pairs, 5000 - 1667);
    db.close().unwrap();
    let db = open(dir.path());
    check(&db);
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
    // Read with `pread` instead of through the mapping: the same content,
    // and the data file was never extended to the space's capacity.
    let opts = Options::new().cache_bytes(64 << 10).mmap_reads(false);
    assert!(Options::new().mmap_reads, "mapped reads are the default");
    let db = Db::open(dir.path(), opts).unwrap();
    check(&db);
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
    let data = std::fs::metadata(dir.path().join("data")).unwrap().len();
    assert!(data < 1 << 30, "data file of {data} bytes");
}

#[test]
fn batches_ranges_and_reverse() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut b = WriteBatch::new();
    for i in 0..300u32 {
        b.put(format!("{i:04}").as_bytes(), b"x").unwrap();
    }
    db.write_opt(b, &WriteOptions { sync: true }).unwrap();
    fn keys(it: impl Iterator<Item = flexdb::Result<flexdb::KeyValue>>) -> Vec<String> {
        it.map(|kv| String::from_utf8(kv.unwrap().0).unwrap())
            .collect()
    }
    assert_eq!(keys(db.range("0100".."0103")), ["0100", "0101", "0102"]);
    assert_eq!(
        keys(db.range("0100"..="0102").rev()),
        ["0102", "0101", "0100"]
    );
    assert_eq!(keys(db.range::<&str, _>(.."0002")), ["0000", "0001"]);
    assert_eq!(keys(db.range::<&str, _>("0298"..)), ["0298", "0299"]);
    assert_eq!(keys(db.prefix("015")).len(), 10);
    db.flush().unwrap();
    let mut it = db.iter();
    it.seek("0250");
    assert_eq!(it.next().unwrap().unwrap().0, b"0250");
    it.seek_back("0252");
    assert_eq!(it.next_back().unwrap().unwrap().0, b"0252");
    assert_eq!(it.next().unwrap().unwrap().0, b"0251");
    assert!(it.next().is_none());
    assert!(it.next_back().is_none());
    // Both ends meet in the middle without repeating a key.
    let mut it = db.iter();
    let mut seen = Vec::new();
    loop {
        match (it.next(), it.next_back()) {
            (None, None) => break,
            (a, b) => {
                seen.extend(a.map(|kv| kv.unwrap().0));
                seen.extend(b.map(|kv| kv.unwrap().0));
            }
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 300);
}

#[test]
fn errors_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert!(matches!(
        Db::open(&missing, Options::new()),
        Err(Error::NotFound(_))
    ));
    let db = open(&dir.path().join("db"));
    assert!(matches!(
        Db::open(dir.path().join("db"), Options::new()),
        Err(Error::Locked(_))
    ));
    assert!(matches!(
        db.put(vec![0u8; flexdb::MAX_KEY_LEN + 1], b""),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        db.get(vec![0u8; flexdb::MAX_KEY_LEN + 1]),
        Err(Error::KeyTooLarge { .. })
    ));
    db.put(vec![1u8; flexdb::MAX_KEY_LEN], vec![2u8; 1 << 20])
        .unwrap();
    assert_eq!(
        db.get(vec![1u8; flexdb::MAX_KEY_LEN])
            .unwrap()
            .map(|v| v.len()),
        Some(1 << 20)
    );
    db.put(b"", b"").unwrap();
    assert_eq!(db.get(b"").unwrap(), Some(Vec::new()));
    drop(db);
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"hi").unwrap();
    assert!(matches!(
        Db::open(&other, Options::new().create_if_missing(true)),
        Err(Error::NotAStore(..))
    ));
    assert!(matches!(
        Db::open(dir.path().join("db"), Options::new().error_if_exists(true)),
        Err(Error::AlreadyExists(_))
    ));
    let db = Db::open(dir.path().join("db"), Options::new()).unwrap();
    assert_eq!(db.get(b"").unwrap(), Some(Vec::new()));
    assert_eq!(
        db.get(vec![1u8; flexdb::MAX_KEY_LEN])
            .unwrap()
            .map(|v| v.len()),
        Some(1 << 20)
    );
}

#[test]
fn nonsense_options_are_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let base = || Options::new().create_if_missing(true);
    for opts in [
        base().memtable_bytes(1023),
        base().max_space_bytes(1 << 20),
        // Beyond what a segment table and the reads' mapping can address.
        base().max_space_bytes((1 << 46) + 1),
        base().max_space_bytes(u64::MAX),
        base().gc_garbage(0.5, 0.6),
        base().gc_garbage(1.5, 0.5),
        base().gc_garbage(0.5, 0.0),
        base().gc_garbage(f64::NAN, 0.5),
        // Beyond any machine's memory: the caches' tables are sized from
        // it up front, and would exhaust memory instead of failing.
        base().cache_bytes(usize::MAX),
        base().cache_bytes(1 << 62),
        base().memtable_bytes(usize::MAX),
        base().memtable_bytes(1 << 62),
    ] {
        assert!(
            matches!(
                Db::open(&path, opts.clone()),
                Err(Error::InvalidArgument(_))
            ),
            "{opts:?}"
        );
        assert!(!path.exists(), "{opts:?} created the store");
    }
    let db = Db::open(&path, base().gc_garbage(0.25, 0.2)).unwrap();
    db.put(b"k", b"v").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn lent_pairs_match_copied_pairs_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    // Pairs in the space, some overwritten or deleted in the MemTables.
    for i in 0..3000u32 {
        db.put(format!("k{i:05}"), format!("space-{i}")).unwrap();
    }
    db.flush().unwrap();
    for i in (0..3000u32).step_by(7) {
        db.put(format!("k{i:05}"), format!("mem-{i}")).unwrap();
    }
    for i in (0..3000u32).step_by(11) {
        db.delete(format!("k{i:05}")).unwrap();
    }
    db.put("k99999", "").unwrap();
    let ranges: [(&[u8], &[u8]); 3] = [
        (b"", b"\xff"),
        (b"k00500", b"k02500"),
        (b"k01000", b"k01001"),
    ];
    for (lo, hi) in ranges {
        let copied: Vec<(Vec<u8>, Vec<u8>)> = db.range(lo..hi).map(Result::unwrap).collect();
        let mut it = db.range(lo..hi);
        let mut lent = Vec::new();
        while let Some(pair) = it.next_ref() {
            let (k, v) = pair.unwrap();
            lent.push((k.to_vec(), v.to_vec()));
        }
        assert_eq!(lent, copied);
        let mut it = db.range(lo..hi);
        let mut lent_back = Vec::new();
        while let Some(pair) = it.next_back_ref() {
            let (k, v) = pair.unwrap();
            lent_back.push((k.to_vec(), v.to_vec()));
        }
        lent_back.reverse();
        assert_eq!(lent_back, copied);
        // Mixed: lend from the front, copy from the back, until they meet.
        let mut it = db.range(lo..hi);
        let (mut front, mut back) = (Vec::new(), Vec::new());
        while let Some(p) = it.next_ref() {
            let (k, v) = p.unwrap();
            front.push((k.to_vec(), v.to_vec()));
            match it.next_back() {
                Some(p) => back.push(p.unwrap()),
                None => break,
            }
        }
        back.reverse();
        front.extend(back);
        assert_eq!(front, copied);
    }
}

#[test]
fn pairs_lent_from_a_memtable_outlive_its_commit() {
    // Iterators lend MemTable pairs straight from the table's arena: a
    // lent pair must stay readable while the table is committed, dropped
    // from the store and its memory would otherwise be reused by new
    // tables, and the rest of the scan must read the iterator's state.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options::new()
            .create_if_missing(true)
            .memtable_bytes(1 << 20)
            .cache_bytes(64 << 10),
    )
    .unwrap();
    let value = |i: u32, round: u32| format!("{round}-{i}-").repeat(20).into_bytes();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), value(i, 0)).unwrap();
    }
    let mut forward = db.iter();
    let mut backward = db.iter();
    let (k, v) = forward.next_ref().unwrap().unwrap();
    let (kb, vb) = backward.next_back_ref().unwrap().unwrap();
    // Commit that table, then overwrite everything twice over in new ones
    // (each filling and committing), while the lent slices are held.
    db.flush().unwrap();
    for round in 1..3 {
        for i in 0..2000u32 {
            db.put(format!("k{i:05}"), value(i, round)).unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!((k, v), (&b"k00000"[..], &value(0, 0)[..]));
    assert_eq!((kb, vb), (&b"k01999"[..], &value(1999, 0)[..]));
    let mut seen = 1;
    while let Some(p) = forward.next_ref() {
        let (k, v) = p.unwrap();
        assert_eq!(k, format!("k{seen:05}").as_bytes());
        assert_eq!(v, &value(seen, 0)[..]);
        seen += 1;
    }
    assert_eq!(seen, 2000);
    assert_eq!(backward.count(), 1999);
    assert_eq!(db.get(b"k00007").unwrap(), Some(value(7, 2)));
}

#[test]
fn single_puts_of_any_size_and_from_a_thread_local_destructor() {
    use std::cell::RefCell;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    // A value large enough that the thread's reused buffer is let go,
    // then small ones through the same thread.
    let big = vec![7u8; 3 << 20];
    db.put(b"big", &big).unwrap();
    db.put(b"small", b"s").unwrap();
    db.delete(b"gone").unwrap();
    assert_eq!(db.get(b"big").unwrap().as_deref(), Some(&big[..]));
    assert_eq!(db.get(b"small").unwrap().as_deref(), Some(&b"s"[..]));

    // A put from a thread-local destructor, after the thread's other
    // thread-locals may be gone, is still written.
    struct PutOnDrop(Arc<Db>);
    impl Drop for PutOnDrop {
        fn drop(&mut self) {
            self.0.put(b"from-drop", b"v").unwrap();
        }
    }
    thread_local! {
        static LAST: RefCell<Option<PutOnDrop>> = const { RefCell::new(None) };
    }
    let d = db.clone();
    std::thread::spawn(move || {
        // Registered before the store's own thread-local, so (destructors
        // running in reverse order) dropped after it is gone.
        LAST.with(|l| *l.borrow_mut() = Some(PutOnDrop(d.clone())));
        d.put(b"from-thread", b"t").unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(db.get(b"from-thread").unwrap().as_deref(), Some(&b"t"[..]));
    assert_eq!(db.get(b"from-drop").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn memory_stats_are_the_memory_figures_of_stats() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for i in 0..2000u32 {
        db.put(format!("key{i:05}"), vec![b'v'; 100]).unwrap();
    }
    // Some pairs committed (the cache and the indexes hold something),
    // some still in the active MemTable.
    db.flush().unwrap();
    for i in 0..50u32 {
        db.put(format!("new{i:05}"), vec![b'w'; 100]).unwrap();
    }
    let _ = db.get("key00010").unwrap();
    // The committer's helpers may still hand the committed MemTables'
    // memory to the pool: compare once two reads around `stats` agree.
    let m = loop {
        let before = db.memory_stats();
        let s = db.stats().memory();
        if db.memory_stats() == before {
            assert_eq!(before, s, "a quiet store reads the same twice");
            break before;
        }
    };
    assert!(m.memtable_bytes > 0, "the active MemTable holds 50 pairs");
    assert!(m.cache_bytes > 0 && m.sparse_index_bytes > 0 && m.extent_index_bytes > 0);
}
