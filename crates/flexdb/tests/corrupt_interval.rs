//! A corrupt interval fails only the operations that touch it.
//!
//! A store is built and closed, one pair's bytes in the data file are
//! damaged (its checksum fails), and the store is reopened. Then writes
//! over the whole key range all succeed, and flushes commit: the committer
//! applies every interval but the damaged one, whose updates it holds back
//! (their logs stay, see `commit`). Reads of keys in the damaged interval
//! fail with `Corrupt` naming the data file and the interval's offset;
//! every other key reads its newest value, by get and by scan, also after
//! a reopen. Once the damage is mended (the bytes put back, as a repair
//! would), a reopen commits the held updates: every acknowledged write is
//! there.

use std::collections::BTreeMap;
use std::sync::Arc;

use flexdb::{Db, Error, Options};
use flexspace::{FaultStorage, Storage};

fn opts() -> Options {
    Options::new()
        .memtable_bytes(16 << 10)
        .cache_bytes(64 << 10)
        .mmap_reads(false)
}

const KEYS: u32 = 3000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Each first value carries a marker the test can find in the data file.
fn value(i: u32) -> Vec<u8> {
    format!("<MARK{i:05}>-{}", "v".repeat((i % 50) as usize)).into_bytes()
}

/// The name of the space's data file.
fn data_file(storage: &FaultStorage) -> String {
    storage
        .list_files()
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with("data"))
        .expect("a data file")
}

/// Replaces every copy of `from` in the data file with `to` (same length);
/// returns how many.
fn replace_in_data(storage: &FaultStorage, from: &[u8], to: &[u8]) -> usize {
    let name = data_file(storage);
    let mut bytes = storage.file_bytes(&name).unwrap();
    let at: Vec<usize> = bytes
        .windows(from.len())
        .enumerate()
        .filter(|(_, w)| *w == from)
        .map(|(at, _)| at)
        .collect();
    for &a in &at {
        bytes[a..a + to.len()].copy_from_slice(to);
    }
    storage.set_file_bytes(&name, bytes);
    at.len()
}

/// Checks every key of `model` outside `damaged` (a key range) by get and
/// by a scan of each side, and that a get inside fails with `Corrupt`
/// naming the data file and an offset.
fn check_around(
    db: &Db,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    damaged: &(Vec<u8>, Option<Vec<u8>>),
    what: &str,
) {
    let inside = |k: &[u8]| k >= damaged.0.as_slice() && damaged.1.as_deref().is_none_or(|b| k < b);
    let mut inside_keys = 0;
    for (k, v) in model {
        if inside(k) {
            inside_keys += 1;
            match db.get(k) {
                Err(Error::Corrupt { file, detail }) => {
                    assert!(file.ends_with("data"), "{what}: {file:?}");
                    assert!(detail.contains("offset"), "{what}: {detail}");
                }
                other => panic!("{what}: a get in the damaged interval gave {other:?}"),
            }
        } else {
            assert_eq!(
                db.get(k)
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .as_deref(),
                Some(v.as_slice()),
                "{what}: {}",
                k.escape_ascii()
            );
        }
    }
    assert!(inside_keys > 0, "{what}: no key in the damaged interval");
    // Scans up to the damage and from its end read the model.
    let below: BTreeMap<_, _> = db
        .range::<&[u8], _>(..damaged.0.as_slice())
        .map(|kv| kv.unwrap_or_else(|e| panic!("{what}: scan below: {e}")))
        .collect();
    let want: BTreeMap<_, _> = model
        .iter()
        .filter(|(k, _)| **k < damaged.0)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(below == want, "{what}: the scan below the damage");
    if let Some(b) = &damaged.1 {
        let above: BTreeMap<_, _> = db
            .range::<&[u8], _>(b.as_slice()..)
            .map(|kv| kv.unwrap_or_else(|e| panic!("{what}: scan above: {e}")))
            .collect();
        let want: BTreeMap<_, _> = model
            .iter()
            .filter(|(k, _)| *k >= b)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert!(above == want, "{what}: the scan above the damage");
    }
    // A scan across it fails typed.
    let across: flexdb::Result<Vec<_>> = db.iter().collect();
    assert!(
        matches!(across, Err(Error::Corrupt { .. })),
        "{what}: a scan across the damage"
    );
}

#[test]
fn a_corrupt_interval_fails_only_its_operations() {
    let storage = FaultStorage::new();
    let db = Db::open_with_storage(
        Arc::new(storage.clone()),
        "store",
        opts().create_if_missing(true),
    )
    .unwrap();
    let mut model = BTreeMap::new();
    for i in 0..KEYS {
        let i = (i * 7919) % KEYS;
        db.put(key(i), value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    db.close().unwrap();
    // Damage one pair (every copy of it: the file may hold stale ones).
    let storage = storage.crash_image();
    let hurt = 1400u32;
    let mark = format!("<MARK{hurt:05}>").into_bytes();
    let bad = format!("<MQRK{hurt:05}>").into_bytes();
    assert!(
        replace_in_data(&storage, &mark, &bad) > 0,
        "the marker is in the data file"
    );
    let db = Db::open_with_storage(Arc::new(storage.clone()), "store", opts()).unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.damaged.len(), 1, "{:?}", report.problems);
    let d = &report.damaged[0];
    let damaged = (d.interval_from.clone(), d.before.clone());
    assert!(damaged.0 <= key(hurt) && damaged.1.as_ref().is_none_or(|b| key(hurt) < *b));

    // Writes over the whole key range, twice, each time flushed: every
    // write is acknowledged and every flush commits.
    for round in 1..=2u32 {
        for i in 0..KEYS {
            let i = (i * 7919 + round) % KEYS;
            let v = format!("round {round} key {i}").into_bytes();
            db.put(key(i), &v)
                .unwrap_or_else(|e| panic!("round {round}: a write: {e}"));
            model.insert(key(i), v);
        }
        db.flush()
            .unwrap_or_else(|e| panic!("round {round}: a flush: {e}"));
        check_around(&db, &model, &damaged, &format!("round {round}"));
    }
    db.close().unwrap();

    // Reopened: the same, and writes go on.
    let db = Db::open_with_storage(Arc::new(storage.clone()), "store", opts()).unwrap();
    db.flush().unwrap();
    check_around(&db, &model, &damaged, "reopened");
    for i in (0..KEYS).step_by(3) {
        let v = format!("after reopen {i}").into_bytes();
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.flush().unwrap();
    check_around(&db, &model, &damaged, "written after the reopen");
    db.close().unwrap();

    // Mended: the held updates are committed at the next open, and every
    // acknowledged write reads back.
    assert!(replace_in_data(&storage, &bad, &mark) > 0);
    let db = Db::open_with_storage(Arc::new(storage.clone()), "store", opts()).unwrap();
    db.flush().unwrap();
    for (k, v) in &model {
        assert_eq!(
            db.get(k).unwrap().as_deref(),
            Some(v.as_slice()),
            "mended: {}",
            k.escape_ascii()
        );
    }
    let all: BTreeMap<_, _> = db.iter().map(|kv| kv.unwrap()).collect();
    assert!(all == model, "mended: a scan");
    let report = db.check().unwrap();
    assert!(report.problems.is_empty(), "mended: {:?}", report.problems);
    db.close().unwrap();
    // The logs kept meanwhile are gone once committed.
    let db = Db::open_with_storage(Arc::new(storage.clone()), "store", opts()).unwrap();
    let all: BTreeMap<_, _> = db.iter().map(|kv| kv.unwrap()).collect();
    assert!(all == model, "reopened after mending");
    drop(db);
    let logs = storage
        .list_files()
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .count();
    assert!(
        logs <= 2,
        "{logs} logs left after the held updates were committed"
    );
}
