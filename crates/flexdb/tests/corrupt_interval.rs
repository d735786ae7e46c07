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

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::damage::{damage_marks, mend_marks};
use common::fill::{content, create, fill, key, marked_value, small_opts, Model};
use flexdb::{Db, Error, Options};
use flexspace::{FaultStorage, Storage};

fn opts() -> Options {
    small_opts().mmap_reads(false)
}

const KEYS: u32 = 3000;

/// Checks every key of `model` outside `damaged` (a key range) by get and
/// by a scan of each side, and that a get inside fails with `Corrupt`
/// naming the data file and an offset.
fn check_around(db: &Db, model: &Model, damaged: &(Vec<u8>, Option<Vec<u8>>), what: &str) {
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
    let db = create(&storage, opts());
    let mut model = fill(&db, KEYS, |i, _| marked_value(i, ""));
    db.close().unwrap();
    // Damage one pair (every copy of it: the file may hold stale ones).
    let storage = storage.crash_image();
    let hurt = 1400u32;
    damage_marks(&storage, &[hurt]);
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
    mend_marks(&storage, &[hurt]);
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
    assert!(content(&db) == model, "mended: a scan");
    let report = db.check().unwrap();
    assert!(report.problems.is_empty(), "mended: {:?}", report.problems);
    db.close().unwrap();
    // The logs kept meanwhile are gone once committed.
    let db = Db::open_with_storage(Arc::new(storage.clone()), "store", opts()).unwrap();
    assert!(content(&db) == model, "reopened after mending");
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

/// A range delete across a corrupt interval, after a crash (so the index
/// is rebuilt without pair counts and each interval the range drops whole
/// is read to count its pairs): the corrupt one is held back, and every
/// other key of the range goes, before it and after it.
#[test]
fn a_range_delete_over_a_corrupt_interval_removes_every_other_key() {
    let storage = FaultStorage::new();
    let db = create(&storage, opts());
    let mut model = fill(&db, KEYS, |i, _| marked_value(i, ""));
    db.flush().unwrap();
    let storage = common::fill::power_loss(&storage, db);
    let hurt = 1400u32;
    damage_marks(&storage, &[hurt]);
    let db = Db::open_with_storage(Arc::new(storage.clone()), "store", opts()).unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.damaged.len(), 1, "{:?}", report.problems);
    let d = &report.damaged[0];
    let inside =
        |k: &[u8]| k >= d.interval_from.as_slice() && d.before.as_deref().is_none_or(|b| k < b);
    db.delete_range(key(200)..key(2800)).unwrap();
    db.flush().unwrap();
    model.retain(|k, _| *k < key(200) || *k >= key(2800));
    let mut after_damage = 0;
    for i in 0..KEYS {
        let k = key(i);
        match db.get(&k) {
            // Held back: its keys stay, unreadable.
            Err(Error::Corrupt { .. }) if inside(&k) => {}
            Ok(v) => {
                assert_eq!(v.as_ref(), model.get(&k), "key {i}");
                if i > hurt && i < 2800 && !inside(&k) {
                    after_damage += 1;
                }
            }
            Err(e) => panic!("key {i}: {e}"),
        }
    }
    assert!(
        after_damage > 1000,
        "{after_damage} keys checked after the damage"
    );
}
