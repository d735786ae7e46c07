//! Reopening after a clean close loads the sparse index the close saved;
//! a damaged or stale saved index is ignored (the space is sampled) and
//! never changes what the store returns.

use std::path::Path;

use flexdb::{Db, Options};

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
}

fn key(i: u32) -> String {
    format!("key{i:06}")
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-")
        .repeat(1 + (i % 3) as usize)
        .into_bytes()
}

fn fill(dir: &Path, keys: std::ops::Range<u32>, round: u32) -> u64 {
    let db = Db::open(dir, opts()).unwrap();
    for i in keys {
        db.put(key(i), value(i, round)).unwrap();
    }
    db.flush().unwrap();
    let intervals = db.stats().intervals;
    db.close().unwrap();
    intervals
}

fn verify(db: &Db, n: u32, round_of: impl Fn(u32) -> u32) {
    let pairs: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(pairs.len(), n as usize);
    for (i, (k, v)) in pairs.iter().enumerate() {
        let i = i as u32;
        assert_eq!(k, key(i).as_bytes());
        assert_eq!(v, &value(i, round_of(i)));
    }
    assert!(db.check().unwrap().problems.is_empty());
}

#[test]
fn a_clean_close_saves_the_index_and_reopen_loads_it() {
    let dir = tempfile::tempdir().unwrap();
    let intervals = fill(dir.path(), 0..20_000, 0);
    assert!(dir.path().join("SPARSE").exists());
    let db = Db::open(dir.path(), opts()).unwrap();
    // The sampled index would cut the space every 8 KiB instead.
    assert_eq!(db.stats().intervals, intervals);
    verify(&db, 20_000, |_| 0);
    db.close().unwrap();
}

#[test]
fn a_damaged_saved_index_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let intervals = fill(dir.path(), 0..20_000, 0);
    let path = dir.path().join("SPARSE");
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_ne!(
        db.stats().intervals,
        intervals,
        "the damaged index was used"
    );
    verify(&db, 20_000, |_| 0);
    db.close().unwrap();
}

#[test]
fn a_stale_saved_index_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 0..20_000, 0);
    let stale = std::fs::read(dir.path().join("SPARSE")).unwrap();
    // Overwrite every other key with longer values and add keys: every
    // offset after the first change moves.
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in (0..20_000).step_by(2) {
        db.put(key(i), value(i, 1).repeat(2)).unwrap();
    }
    db.close().unwrap();
    fill(dir.path(), 20_000..25_000, 0);
    std::fs::write(dir.path().join("SPARSE"), &stale).unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let pairs: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(pairs.len(), 25_000);
    for (i, (k, v)) in pairs.iter().enumerate() {
        let i = i as u32;
        assert_eq!(k, key(i).as_bytes());
        let want = if i < 20_000 && i.is_multiple_of(2) {
            value(i, 1).repeat(2)
        } else {
            value(i, 0)
        };
        assert_eq!(v, &want);
    }
    assert!(db.check().unwrap().problems.is_empty());
    db.close().unwrap();
}

#[test]
fn a_log_whose_creation_did_not_finish_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 0..500, 0);
    // What a crash between creating a log and renaming it leaves.
    let leftover = dir.path().join("wal-000000000099.log.new");
    std::fs::write(&leftover, b"FLEXW").unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    verify(&db, 500, |_| 0);
    assert!(!leftover.exists());
    db.close().unwrap();
}
