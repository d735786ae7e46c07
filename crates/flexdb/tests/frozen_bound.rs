//! `Options::max_frozen_memtables`: a store that lets one MemTable wait
//! for the committer, under concurrent writers with tiny MemTables (a
//! rotation every few hundred writes), loses no write and never holds more
//! MemTables or write-ahead log files than the bound allows.
//!
//! The bound: `1 + max_frozen` MemTables (the active one and the frozen
//! ones), and as many log files (logs in use and spares, `spare_logs`),
//! plus one: the next log, made ahead of its rotation (`wal::next_log`).
//! The files are sampled while the writers run; a sample holding more
//! names them. (A commit used to let rotations run between taking its
//! MemTables off the list and retiring their logs: on a loaded machine a
//! rotation and the next log's preparation fitted in between, and the
//! samples saw 4 files, the committed log or a spare kept on a stale count
//! beside the frozen, active and prepared ones; `commit::finish_commit`
//! now holds the writer lock across both.)

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flexdb::{Db, Error, Options};

const WRITERS: u64 = 4;
const WRITES_PER_WRITER: u64 = 6000;
const KEYS_PER_WRITER: u64 = 700;

fn opts(max_frozen: usize) -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(32 << 10)
        .cache_bytes(256 << 10)
        .max_frozen_memtables(max_frozen)
}

fn key(w: u64, k: u64) -> Vec<u8> {
    format!("w{w}/{k:05}").into_bytes()
}

/// The write-ahead log files in `dir` (named or being created).
fn wal_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("wal-"))
                .collect()
        })
        .unwrap_or_default()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Writes (puts, every seventh a delete) over the writer's own keys.
fn writer(db: &Db, w: u64) -> Model {
    let mut model = Model::new();
    for i in 0..WRITES_PER_WRITER {
        let k = key(w, (i * 389) % KEYS_PER_WRITER);
        if i % 7 == 3 {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let mut v = format!("w{w} write {i}:").into_bytes();
            v.resize(v.len() + (i % 50) as usize, b'.');
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    model
}

fn check_contents(db: &Db, model: &Model) {
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]), "{k:?}");
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = db.iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(all.len(), model.len());
    assert!(all
        .iter()
        .zip(model)
        .all(|(a, (k, v))| &a.0 == k && &a.1 == v));
}

#[test]
fn one_frozen_memtable_loses_nothing_and_bounds_memtables_and_logs() {
    let max_frozen = 1;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), opts(max_frozen)).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    // Samples the MemTables and the log files while the writers run.
    let watcher = {
        let (db, done, path) = (db.clone(), done.clone(), dir.path().to_path_buf());
        std::thread::spawn(move || {
            let (mut most_frozen, mut most_files, mut samples) = (0, Vec::new(), 0u64);
            while !done.load(Ordering::Relaxed) {
                let s = db.stats();
                most_frozen = most_frozen.max(s.committer_backlog);
                let files = wal_files(&path);
                if files.len() > most_files.len() {
                    most_files = files;
                }
                samples += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
            (most_frozen, most_files, samples)
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || writer(&db, w))
        })
        .collect();
    let mut model = Model::new();
    for t in writers {
        model.extend(t.join().unwrap());
    }
    done.store(true, Ordering::Relaxed);
    let (most_frozen, most_files, samples) = watcher.join().unwrap();
    assert!(samples > 10, "{samples} samples");
    let stats = db.stats();
    // Tiny MemTables: many rotations and commits ran, and committed logs
    // were still taken over by new ones within the tighter bound.
    assert!(stats.memtables_committed >= 20, "{stats:?}");
    assert!(stats.logs_reused > 0, "{stats:?}");
    assert!(most_frozen <= max_frozen, "{most_frozen} frozen MemTables");
    assert!(
        most_files.len() <= max_frozen + 2,
        "{most_files:?}: {} log files with {max_frozen} frozen MemTables at most",
        most_files.len()
    );
    check_contents(&db, &model);
    db.flush().unwrap();
    let files = wal_files(dir.path());
    assert!(files.len() <= max_frozen + 1, "{files:?} after a flush");
    check_contents(&db, &model);
    // And all of it after a reopen.
    drop(db);
    let db = Db::open(dir.path(), opts(max_frozen)).unwrap();
    check_contents(&db, &model);
}

#[test]
fn no_frozen_memtable_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    match Db::open(dir.path(), opts(0)) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("max_frozen_memtables")),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened with max_frozen_memtables 0"),
    }
}
