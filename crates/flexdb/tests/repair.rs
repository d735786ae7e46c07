//! `Db::repair` / `Db::repair_storage`: a damaged store is salvaged into a
//! new one that holds every pair that could be read, the writes still in
//! its write-ahead logs applied over them, and a report of what was lost.
//!
//! What each test proves:
//! - `damaged_records_lose_only_their_key_ranges`: damaged records in the
//!   data file of a store left by a crash with synced writes in its logs:
//!   the repaired store holds exactly the model outside the reported
//!   ranges (the logged writes included), and every damaged key lies in a
//!   reported range.
//! - `a_damaged_space_log_is_salvaged_up_to_the_damage`: a store that
//!   refuses to open (a flip in the space's log) repairs into one holding
//!   a committed state, with the damage named in `salvaged`.
//! - `a_damaged_write_ahead_log_keeps_the_writes_before_the_damage`: a
//!   flipped record in the middle of a synced log (a store that refuses
//!   to open) repairs into the space's pairs with the log's writes before
//!   the damage over them, the log named in `salvaged`.
//! - `repair_in_place_keeps_the_damaged_store_beside_it`: on real files,
//!   in place: the repaired store opens under the old name, the damaged
//!   files are kept, an undamaged store repairs to the same content.

mod common;

use std::sync::Arc;

use common::damage::{damage_marks, file_named};
use common::fill::{content, create, fill, key, marked_value, power_loss, small_opts, Model};
use flexdb::{Db, Error, WriteOptions};
use flexspace::{FaultStorage, Storage};

fn value(i: u32, round: u32) -> Vec<u8> {
    marked_value(i, &format!("{round}-"))
}

/// A store with 3000 pairs committed to its space, then, with `logged`,
/// synced overwrites and deletes left in its write-ahead log by a crash.
fn build(logged: bool) -> (FaultStorage, Model) {
    let storage = FaultStorage::new();
    let db = create(&storage, small_opts());
    let mut model = fill(&db, 3000, |i, _| value(i, 0));
    db.flush().unwrap();
    if logged {
        let sync = WriteOptions { sync: true };
        for i in (0..3000u32).step_by(97) {
            db.put_opt(key(i), b"late", &sync).unwrap();
            model.insert(key(i), b"late".to_vec());
        }
        for i in (5..3000u32).step_by(89) {
            db.delete_opt(key(i), &sync).unwrap();
            model.remove(&key(i));
        }
        return (power_loss(&storage, db), model);
    }
    db.close().unwrap();
    (storage.crash_image(), model)
}

fn repair_into_new(damaged: FaultStorage) -> (Db, flexdb::RepairReport) {
    let new = Db::open_with_storage(
        Arc::new(FaultStorage::new()),
        "new",
        small_opts().create_if_missing(true),
    )
    .unwrap();
    let mut seen = 0;
    let report = Db::repair_storage(Arc::new(damaged), &new, |p| {
        assert!(p.done <= p.total);
        seen = p.done;
    })
    .unwrap();
    assert!(seen > 0, "progress was reported");
    (new, report)
}

fn in_ranges(k: &[u8], lost: &[flexdb::DamagedRange]) -> bool {
    lost.iter().any(|d| {
        d.after.as_deref().is_none_or(|a| a < k) && d.before.as_deref().is_none_or(|b| k < b)
    })
}

#[test]
fn damaged_records_lose_only_their_key_ranges() {
    let (image, model) = build(true);
    let hurt = [150u32, 1400, 2850];
    damage_marks(&image, &hurt);
    let (new, report) = repair_into_new(image.crash_image());
    assert_eq!(report.lost.len(), hurt.len(), "{report:?}");
    assert!(report.salvaged.is_empty(), "{:?}", report.salvaged);
    assert!(report.replayed > 0);
    for i in hurt {
        assert!(
            in_ranges(&key(i), &report.lost),
            "key {i} is in a lost range"
        );
    }
    let got = content(&new);
    // Outside the lost ranges: exactly the model (the logged writes won).
    let outside = |m: &Model| -> Model {
        m.iter()
            .filter(|(k, _)| !in_ranges(k, &report.lost))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(outside(&got), outside(&model));
    // Inside them, only what the model holds (logged writes, or pairs read
    // before the damage).
    for (k, v) in &got {
        assert_eq!(model.get(k), Some(v), "{}", k.escape_ascii());
    }
    assert!(
        got.len() * 10 > model.len() * 9,
        "{} of {}",
        got.len(),
        model.len()
    );
    assert!(new.check().unwrap().is_ok());
}

#[test]
fn a_damaged_space_log_is_salvaged_up_to_the_damage() {
    let storage = FaultStorage::new();
    let db = create(&storage, small_opts());
    let mut writes = Vec::new();
    for round in 0..6u32 {
        for i in 0..300u32 {
            let i = (i * 7919 + round) % 1000;
            db.put(key(i), value(i, round)).unwrap();
            writes.push((key(i), value(i, round)));
        }
        db.flush().unwrap();
    }
    let image = power_loss(&storage, db);
    let log = file_named(&image, "log");
    let mut bytes = image.file_bytes(&log).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 4;
    image.set_file_bytes(&log, bytes);
    match Db::open_with_storage(Arc::new(image.crash_image()), "store", small_opts()) {
        Err(Error::Corrupt { .. }) => {}
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("a flipped log entry opened"),
    }
    let (new, report) = repair_into_new(image);
    assert!(
        report
            .salvaged
            .iter()
            .any(|s| s.starts_with("log: entry at byte")),
        "{:?}",
        report.salvaged
    );
    // The state after some prefix of the writes (a MemTable commits a
    // stretch of them), short of all of them.
    let got = content(&new);
    let mut model = Model::new();
    let mut matched = got.is_empty();
    for (k, v) in writes {
        model.insert(k, v);
        matched |= model == got;
    }
    assert!(matched, "a committed state ({} pairs)", got.len());
    assert!(got != model, "the commits after the damage are lost");
}

#[test]
fn repair_in_place_keeps_the_damaged_store_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut model = Model::new();
    {
        let db = Db::open(&path, small_opts().create_if_missing(true)).unwrap();
        for i in 0..2000u32 {
            db.put(key(i), value(i, 1)).unwrap();
            model.insert(key(i), value(i, 1));
        }
        db.close().unwrap();
    }
    // Open elsewhere: refused, nothing changed.
    {
        let db = Db::open(&path, small_opts()).unwrap();
        assert!(matches!(
            Db::repair(&path, None, |_| {}),
            Err(Error::Locked(_))
        ));
        db.close().unwrap();
    }
    // Into a new directory: the source stays.
    let copy = dir.path().join("copy");
    let report = Db::repair(&path, Some(&copy), |_| {}).unwrap();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.pairs, 2000);
    assert_eq!(content(&Db::open(&copy, small_opts()).unwrap()), model);
    // In place.
    let report = Db::repair(&path, None, |_| {}).unwrap();
    assert!(report.is_complete(), "{report:?}");
    let original = report.original.expect("the damaged store is kept");
    assert!(original.join("data").exists());
    let db = Db::open(&path, small_opts()).unwrap();
    assert_eq!(content(&db), model);
    db.close().unwrap();
    // No work directory left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("repair-work")),
        "{names:?}"
    );
}

#[test]
fn a_damaged_write_ahead_log_keeps_the_writes_before_the_damage() {
    let (image, model) = build(true);
    // The log holding the most records: the logged writes.
    let wal = image
        .list_files()
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .max_by_key(|n| {
            image
                .file_bytes(n)
                .unwrap()
                .iter()
                .filter(|&&b| b != 0)
                .count()
        })
        .expect("a write-ahead log");
    let mut bytes = image.file_bytes(&wal).unwrap();
    // In the middle one of its records of a logged put (a reused log file
    // holds an older log's records after its own).
    let puts: Vec<usize> = bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| w == b"late")
        .map(|(at, _)| at)
        .collect();
    let at = puts[puts.len() / 2];
    bytes[at] ^= 0x20;
    image.set_file_bytes(&wal, bytes);
    assert!(matches!(
        Db::open_with_storage(Arc::new(image.crash_image()), "store", small_opts()),
        Err(Error::Corrupt { .. })
    ));
    let (new, report) = repair_into_new(image);
    assert!(
        report.salvaged.iter().any(|s| s.starts_with(&wal)),
        "{:?}",
        report.salvaged
    );
    assert!(report.lost.is_empty());
    let got = content(&new);
    // Every pair is the model's or the one the space held before the
    // logged writes (those after the damage are lost), and some of the
    // logged writes made it.
    let mut late = 0;
    for i in 0..3000u32 {
        let want = model.get(&key(i));
        match got.get(&key(i)) {
            Some(v) if Some(v) == want => late += usize::from(v == b"late"),
            Some(v) => assert_eq!(v, &value(i, 0), "key {i}"),
            None => assert!(want.is_none(), "key {i} lost"),
        }
    }
    assert!(late > 0 && got != model, "{late} logged writes kept");
}

/// A range delete in a log the salvaging open replays is carried into the
/// new store, with the writes after it and without those before it.
#[test]
fn repair_carries_the_range_deletes_of_the_logs_it_replays() {
    let storage = FaultStorage::new();
    let db = create(&storage, small_opts());
    let mut model = fill(&db, 2000, |i, _| marked_value(i, "old"));
    db.flush().unwrap();
    db.put(key(500), b"before the range delete").unwrap();
    db.delete_range(key(400)..key(1600)).unwrap();
    db.put(key(1000), b"after the range delete").unwrap();
    db.sync().unwrap();
    model.retain(|k, _| *k < key(400) || *k >= key(1600));
    model.insert(key(1000), b"after the range delete".to_vec());
    let image = power_loss(&storage, db);
    let (new, _) = repair_into_new(image);
    assert_eq!(content(&new), model);
}
