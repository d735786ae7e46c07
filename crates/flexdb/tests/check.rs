//! `Db::check` on damaged data: every damaged record is reported, with the
//! keys it may have held, the walk going on past each; the pairs elsewhere
//! read back.

mod common;

use std::sync::Arc;

use common::damage::damage_marks;
use common::fill::{create, fill, key, marked_value, small_opts};
use flexdb::{Db, Error};
use flexspace::FaultStorage;

#[test]
fn check_reports_every_damaged_record_with_its_key_range() {
    let storage = FaultStorage::new();
    let db = create(&storage, small_opts());
    let model = fill(&db, 3000, |i, _| marked_value(i, ""));
    db.close().unwrap();
    let image = storage.crash_image();
    // Damage the values of three pairs far apart (every copy: the file
    // also holds garbage, copies rewritten since).
    let hurt = [150u32, 1400, 2850];
    damage_marks(&image, &hurt);
    let db = Db::open_with_storage(Arc::new(image), "store", small_opts()).unwrap();
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
