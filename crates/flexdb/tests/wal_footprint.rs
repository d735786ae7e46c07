//! The next write-ahead log prepared ahead of its rotation
//! (`wal::next_log`) and the WAL's disk footprint once the committer has
//! caught up (`wal::footprint`), on a real directory (mapped logs).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flexdb::{Db, Options};

/// Bytes allocated to write-ahead log files in `dir` (named or spares).
fn wal_blocks(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("wal-"))
        .map(|e| e.metadata().map_or(0, |m| m.blocks() * 512))
        .sum()
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", (i * 7919) % 1_000_003).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8; 80 + (i % 40) as usize]
}

/// Writes that rotate through many logs, each prepared ahead, are all
/// there after a reopen (a clean close), and the rotations took the
/// prepared logs.
#[test]
fn records_in_prepared_logs_survive_a_reopen() {
    const N: u64 = 120_000;
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        Options::new()
            .create_if_missing(true)
            .memtable_bytes(2 << 20)
    };
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..N {
        db.put(key(i), value(i)).unwrap();
    }
    let s = db.stats();
    assert!(s.memtables_committed >= 3, "{s:?}");
    // Every rotation but the ones racing their preparation took a log made
    // ahead (the preparation starts at 7/8 of a table).
    assert!(
        s.logs_prepared * 2 >= s.memtables_committed,
        "{} of {} rotations took a prepared log",
        s.logs_prepared,
        s.memtables_committed
    );
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..N {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.close().unwrap();
}

/// Spare logs accumulate while the committer is behind (slow commits,
/// three MemTables may wait) and are given back once it catches up: after
/// a flush the WAL holds the active log alone, trimmed, and every pair
/// reads back.
#[test]
fn spares_are_given_back_once_the_backlog_is_empty() {
    const MEMTABLE: usize = 8 << 20;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new()
        .create_if_missing(true)
        .memtable_bytes(MEMTABLE)
        .max_frozen_memtables(3);
    let db = Arc::new(Db::open(dir.path(), opts.clone()).unwrap());
    // The most WAL bytes seen while writing, and whether spares were kept.
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (db, done) = (db.clone(), done.clone());
        let dir = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let (mut most, mut spares) = (0u64, false);
            while !done.load(Ordering::Relaxed) {
                most = most.max(wal_blocks(&dir));
                spares |= std::fs::read_dir(&dir)
                    .unwrap()
                    .filter_map(|e| e.ok())
                    .any(|e| e.file_name().to_string_lossy().ends_with(".log.new"));
                let _ = db.stats();
                std::thread::sleep(Duration::from_millis(2));
            }
            (most, spares)
        })
    };
    const N: u64 = 700_000;
    for i in 0..N {
        db.put(key(i), value(i)).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let (most, spares_seen) = watcher.join().unwrap();
    db.flush().unwrap();
    let s = db.stats();
    let after = wal_blocks(dir.path());
    assert_eq!(s.disk_wal_bytes, after, "Stats::disk_wal_bytes is exact");
    // Nothing but the active log: its mapping (at most a MemTable and a
    // MiB) and the step it may grow into (64 MiB), 4 MiB of margin.
    let active_bound = (MEMTABLE as u64 + (1 << 20)) + (64 << 20) + (4 << 20);
    assert!(
        after <= active_bound,
        "WAL {after} bytes after the flush (most {most}, spares seen {spares_seen}): {s:?}"
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("wal-"))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(most > after, "the WAL never held more: {most} vs {after}");
    for i in (0..N).step_by(97) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    for i in (0..N).step_by(89) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}
