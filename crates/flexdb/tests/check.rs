//! `Db::check` on damaged data: every damaged record is reported, with the
//! keys it may have held, the walk going on past each; the pairs elsewhere
//! read back.

use std::collections::BTreeMap;
use std::sync::Arc;

use flexdb::{Db, Error, Options};
use flexspace::{FaultStorage, Storage};

fn opts() -> Options {
    Options::new()
        .memtable_bytes(16 << 10)
        .cache_bytes(64 << 10)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Each value carries a marker the test can find in the data file.
fn value(i: u32) -> Vec<u8> {
    format!("<MARK{i:05}>-{}", "v".repeat((i % 50) as usize)).into_bytes()
}

#[test]
fn check_reports_every_damaged_record_with_its_key_range() {
    let storage = FaultStorage::new();
    let db = Db::open_with_storage(
        Arc::new(storage.clone()),
        "store",
        opts().create_if_missing(true),
    )
    .unwrap();
    let mut model = BTreeMap::new();
    for i in 0..3000u32 {
        let i = (i * 7919) % 3000;
        db.put(key(i), value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    db.close().unwrap();
    let image = storage.crash_image();
    let data = image
        .list_files()
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with("data"))
        .expect("a data file");
    let mut bytes = image.file_bytes(&data).unwrap();
    // Damage the values of three pairs far apart (every copy: the file
    // also holds garbage, copies rewritten since).
    let hurt = [150u32, 1400, 2850];
    for i in hurt {
        let mark = format!("<MARK{i:05}>").into_bytes();
        let at: Vec<usize> = bytes
            .windows(mark.len())
            .enumerate()
            .filter(|(_, w)| *w == mark.as_slice())
            .map(|(at, _)| at)
            .collect();
        assert!(!at.is_empty(), "the marker is in the data file");
        for a in at {
            bytes[a + 2] ^= 0x10;
        }
    }
    image.set_file_bytes(&data, bytes);
    let db = Db::open_with_storage(Arc::new(image), "store", opts()).unwrap();
    let report = db.check().unwrap();
    assert!(!report.is_ok());
    assert_eq!(
        report.damaged.len(),
        hurt.len(),
        "every damaged record, not just the first: {:?}",
        report.problems
    );
    for (d, i) in report.damaged.iter().zip(hurt) {
        let k = key(i);
        assert!(
            d.after.as_ref().is_none_or(|a| *a < k) && d.before.as_ref().is_none_or(|b| k < *b),
            "the range of {d:?} holds the damaged key {}",
            k.escape_ascii()
        );
        assert!(report
            .problems
            .iter()
            .any(|p| p.contains(&d.offset.to_string())));
    }
    // The walk went on: the pairs checked are those of the undamaged
    // stretches, most of the store.
    assert!(report.pairs > 2500, "{} pairs checked", report.pairs);
    // Pairs outside the damaged intervals read back; one inside fails
    // typed.
    let outside = report.damaged.iter().fold(model.clone(), |mut m, d| {
        m.retain(|k, _| *k < d.interval_from || d.before.as_ref().is_some_and(|b| k >= b));
        m
    });
    assert!(outside.len() > 2500);
    for (k, v) in &outside {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
    match db.get(key(hurt[0])) {
        Err(Error::Corrupt { .. }) => {}
        other => panic!("reading a damaged pair's interval: {other:?}"),
    }
}
