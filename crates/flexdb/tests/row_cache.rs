//! The row cache (`read/row_cache.rs`) never serves a value older than a
//! write the get could see: hot keys read over and over while a writer
//! overwrites and deletes them, MemTables rotate and the committer
//! publishes new views. Gets of a key never go back in time, and every get
//! sees at least the last write acknowledged before it began; snapshots
//! keep their own state.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use flexdb::{Db, Options, WriteBatch};

const KEYS: u64 = 8;

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(8 << 10)
        .cache_bytes(256 << 10)
}

fn key(k: u64) -> Vec<u8> {
    format!("hot{k:02}").into_bytes()
}

/// The version a value holds (0: absent).
fn version(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |v| {
        std::str::from_utf8(&v)
            .expect("a value the test wrote")
            .parse()
            .expect("a version")
    })
}

#[test]
fn hot_keys_read_over_and_over_never_go_back_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), opts()).unwrap());
    // Cold pairs around the hot ones, so that intervals split and move.
    for i in 0..3000u64 {
        db.put(format!("cold{i:05}").as_bytes(), [7; 60]).unwrap();
    }
    // acked[k]: the newest version of key k whose write returned.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, acked, done) = (db.clone(), acked.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = vec![0u64; KEYS as usize];
                let mut gets = 0u64;
                while !done.load(Ordering::Relaxed) {
                    for k in 0..KEYS {
                        let floor = acked[k as usize].load(Ordering::Acquire);
                        match db.get_with(key(k), |v| v.map(<[u8]>::to_vec)).unwrap() {
                            None => assert_eq!(floor, 0, "key {k}: absent after {floor}"),
                            Some(v) => {
                                let v = version(Some(v));
                                assert!(v >= floor, "key {k}: read {v} after {floor}");
                                assert!(
                                    v >= seen[k as usize],
                                    "key {k}: {v} after {}",
                                    seen[k as usize]
                                );
                                seen[k as usize] = v;
                            }
                        }
                        gets += 1;
                    }
                }
                gets
            })
        })
        .collect();
    // The writer: version n of every key but one in five, now and then a
    // batch of all keys, a flush, a snapshot.
    for n in 1..=600u64 {
        for k in 0..KEYS {
            if (n + k) % 5 == 0 {
                continue;
            }
            db.put(key(k), n.to_string().as_bytes()).unwrap();
            acked[k as usize].store(n, Ordering::Release);
        }
        if n % 50 == 0 {
            let snap = db.snapshot();
            let before: Vec<_> = (0..KEYS).map(|k| snap.get(key(k)).unwrap()).collect();
            let mut b = WriteBatch::new();
            for k in 0..KEYS {
                b.put(&key(k), (n + 1).to_string().as_bytes()).unwrap();
            }
            db.write(b).unwrap();
            for k in 0..KEYS {
                assert_eq!(
                    snap.get(key(k)).unwrap(),
                    before[k as usize],
                    "snapshot at {n}"
                );
                assert_eq!(version(db.get(key(k)).unwrap()), n + 1);
            }
            // The next round's writes are numbered above the batch's.
            for k in 0..KEYS {
                acked[k as usize].store(n + 1, Ordering::Release);
            }
        }
        if n % 7 == 0 {
            db.flush().unwrap();
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 1000);
    }
    let stats = db.stats();
    assert!(
        stats.row_cache_bytes > 0,
        "the hot keys were cached: {stats:?}"
    );
    // A delete after the rows were cached, before and after its commit.
    for k in 0..KEYS {
        for _ in 0..3 {
            assert!(db.get(key(k)).unwrap().is_some());
        }
        db.delete(key(k)).unwrap();
        assert_eq!(db.get(key(k)).unwrap(), None);
    }
    db.flush().unwrap();
    for k in 0..KEYS {
        assert_eq!(db.get(key(k)).unwrap(), None);
        assert_eq!(db.get(key(k)).unwrap(), None);
    }
}
