//! Concurrency stress: writer threads doing mixed puts, deletes, batches,
//! gets and scans over their own keys, reader threads scanning the whole
//! store forward and backward, and a thread flushing, all at once on a
//! store with a tiny MemTable and cache (so commits, interval splits and
//! merges and cache evictions run all the time under the readers).
//!
//! Each writer owns its keys, so it knows exactly what it must read back
//! (read-your-writes); readers of the whole store check what holds for any
//! state: keys strictly ordered, every value belonging to its key, and no
//! key of a writer's namespace appearing that the writer never wrote. A
//! watchdog fails the test instead of hanging if anything deadlocks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flexdb::{Db, Options, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const WRITERS: u64 = 3;
const KEYS_PER_WRITER: u64 = 400;

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(16 << 10)
        .cache_bytes(64 << 10)
}

fn key(writer: u64, k: u64) -> Vec<u8> {
    format!("w{writer}/{k:05}").into_bytes()
}

/// A value names its key and a version, and varies in length so that
/// updates resize pairs in place.
fn value(writer: u64, k: u64, version: u64) -> Vec<u8> {
    let mut v = format!("w{writer}/{k:05}={version}:").into_bytes();
    v.resize(v.len() + (version % 97) as usize, b'.');
    v
}

/// Whether `v` is a value `value` could have made for `key`.
fn belongs(key: &[u8], v: &[u8]) -> bool {
    let mut prefix = key.to_vec();
    prefix.push(b'=');
    v.starts_with(&prefix)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn writer(db: &Db, id: u64, ops: usize) -> Model {
    let mut rng = StdRng::seed_from_u64(1000 + id);
    let mut model = Model::new();
    let mut version = 0u64;
    let prefix = format!("w{id}/").into_bytes();
    for _ in 0..ops {
        version += 1;
        let k = rng.gen_range(0..KEYS_PER_WRITER);
        match rng.gen_range(0..100) {
            0..=44 => {
                let v = value(id, k, version);
                db.put(key(id, k), &v).unwrap();
                model.insert(key(id, k), v);
            }
            45..=59 => {
                db.delete(key(id, k)).unwrap();
                model.remove(&key(id, k));
            }
            60..=69 => {
                let mut batch = WriteBatch::new();
                for j in 0..rng.gen_range(1..8u64) {
                    let kk = (k + j * 7) % KEYS_PER_WRITER;
                    if rng.gen_bool(0.8) {
                        let v = value(id, kk, version);
                        batch.put(&key(id, kk), &v).unwrap();
                        model.insert(key(id, kk), v);
                    } else {
                        batch.delete(&key(id, kk)).unwrap();
                        model.remove(&key(id, kk));
                    }
                }
                db.write(batch).unwrap();
            }
            70..=89 => {
                let got = db.get(key(id, k)).unwrap();
                assert_eq!(got.as_ref(), model.get(&key(id, k)), "writer {id} key {k}");
            }
            90..=95 => {
                let from = key(id, k);
                let want: Vec<_> = model
                    .range(from.clone()..)
                    .take(20)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got: Vec<_> = db
                    .range(from..)
                    .map(|kv| kv.unwrap())
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .take(20)
                    .collect();
                assert_eq!(got, want, "writer {id} forward scan from key {k}");
            }
            _ => {
                let to = key(id, k);
                let want: Vec<_> = model
                    .range(..=to.clone())
                    .rev()
                    .take(20)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got: Vec<_> = db
                    .range(..=to)
                    .rev()
                    .map(|kv| kv.unwrap())
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .take(20)
                    .collect();
                assert_eq!(got, want, "writer {id} reverse scan to key {k}");
            }
        }
    }
    model
}

/// Scans the whole store and checks what holds in every state.
fn check_any_state(db: &Db, reverse: bool) -> usize {
    let pairs: Vec<_> = if reverse {
        let mut v: Vec<_> = db.iter().rev().map(|kv| kv.unwrap()).collect();
        v.reverse();
        v
    } else {
        db.iter().map(|kv| kv.unwrap()).collect()
    };
    for w in pairs.windows(2) {
        assert!(
            w[0].0 < w[1].0,
            "keys out of order: {:?} {:?}",
            w[0].0,
            w[1].0
        );
    }
    for (k, v) in &pairs {
        assert!(belongs(k, v), "value {v:?} does not belong to key {k:?}");
    }
    pairs.len()
}

#[test]
fn mixed_threads_see_their_writes_and_consistent_scans() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), opts()).unwrap());
    let ops = if cfg!(debug_assertions) { 3000 } else { 20000 };
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel::<()>();

    let mut writers = Vec::new();
    for id in 0..WRITERS {
        let (db, tx) = (db.clone(), done_tx.clone());
        writers.push(std::thread::spawn(move || {
            let m = writer(&db, id, ops);
            let _ = tx.send(());
            m
        }));
    }
    let mut others = Vec::new();
    for r in 0..2 {
        let (db, stop) = (db.clone(), stop.clone());
        others.push(std::thread::spawn(move || {
            let mut scans = 0usize;
            while !stop.load(Ordering::Relaxed) {
                check_any_state(&db, r == 1);
                scans += 1;
            }
            scans
        }));
    }
    {
        let (db, stop) = (db.clone(), stop.clone());
        others.push(std::thread::spawn(move || {
            let mut flushes = 0usize;
            while !stop.load(Ordering::Relaxed) {
                db.flush().unwrap();
                flushes += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            flushes
        }));
    }
    drop(done_tx);

    // The watchdog: every writer must finish in time.
    let deadline = Instant::now() + Duration::from_secs(300);
    for _ in 0..WRITERS {
        let left = deadline.saturating_duration_since(Instant::now());
        done_rx
            .recv_timeout(left)
            .expect("a writer did not finish in 300 s: deadlock or livelock");
    }
    let mut model = Model::new();
    for w in writers {
        model.extend(w.join().expect("a writer panicked"));
    }
    stop.store(true, Ordering::Relaxed);
    for (i, t) in others.into_iter().enumerate() {
        let n = t.join().expect("a reader or the flusher panicked");
        assert!(n > 0, "thread {i} never completed a round");
    }

    let got: Model = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(got, model);
    assert!(db.check().unwrap().problems.is_empty());
    let stats = db.stats();
    assert!(stats.intervals > 1, "the store never split an interval");
    let Ok(db) = Arc::try_unwrap(db) else {
        panic!("a thread still holds the store after every thread joined");
    };
    db.close().unwrap();

    let db = Db::open(dir.path(), opts()).unwrap();
    let got: Model = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(got, model);
}

/// Readers and the committer on a small set of hot keys whose values keep
/// their length, on a cache that evicts all the time: intervals are
/// rewritten in place (and forwarded to the published view) at every
/// commit, keep their sizes, and are read, evicted and read again from
/// older snapshots meanwhile. Every write must survive: the writer reads
/// each key back after each commit, and the store is checked at the end.
/// (It did not catch the lost write of b2ae298 in 12 runs: that one needs
/// a reader to miss on a forwarded word within one commit, which
/// `view::tests::an_older_read_of_a_forwarded_interval_is_not_carried`
/// replays step by step.)
#[test]
fn rewrites_in_place_under_readers_keep_every_write() {
    const KEYS: u64 = 4000;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new()
        .create_if_missing(true)
        .memtable_bytes(1 << 20)
        .cache_bytes(24 << 10);
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    let hot_key = |k: u64| format!("hot{k:05}").into_bytes();
    // Fixed length: a pair keeps its size across versions.
    let hot_value = |k: u64, version: u64| {
        let mut v = format!("{k:05}:{version:010}:").into_bytes();
        v.resize(100, b'.');
        v
    };
    for k in 0..KEYS {
        db.put(hot_key(k), hot_value(k, 0)).unwrap();
    }
    db.flush().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(r);
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.gen_range(0..KEYS);
                    let prefix = format!("{k:05}:");
                    if r == 0 {
                        let v = db.get(hot_key(k)).unwrap().expect("a hot key vanished");
                        assert!(v.starts_with(prefix.as_bytes()));
                    } else {
                        // Borrowed from the MemTable, the cache slot or the
                        // fetched interval while the committer rewrites
                        // the interval and the cache replaces it: the
                        // bytes must be whole for as long as `read` runs.
                        let mut calls = 0;
                        let ok = db
                            .get_with(hot_key(k), |v| {
                                calls += 1;
                                let v = v.expect("a hot key vanished");
                                v.len() == 100 && v.starts_with(prefix.as_bytes())
                            })
                            .unwrap();
                        assert!(
                            ok && calls == 1,
                            "key {k}: whole {ok}, called {calls} times"
                        );
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let rounds = if cfg!(debug_assertions) { 10 } else { 60 };
    let mut rng = StdRng::seed_from_u64(99);
    let mut latest = vec![0u64; KEYS as usize];
    for round in 1..=rounds {
        for _ in 0..1000 {
            let k = rng.gen_range(0..KEYS);
            latest[k as usize] = round;
            db.put(hot_key(k), hot_value(k, round)).unwrap();
        }
        db.flush().unwrap();
        for k in 0..KEYS {
            assert_eq!(
                db.get(hot_key(k)).unwrap(),
                Some(hot_value(k, latest[k as usize])),
                "round {round}: key {k} lost its last write"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("a reader panicked") > 0);
    }
    assert!(db.check().unwrap().problems.is_empty());
}
