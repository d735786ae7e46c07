//! Options no space can work with are refused with a typed error before
//! any file is made or read, whichever way the space is opened.

use std::sync::Arc;

use flexspace::{Error, FaultStorage, FlexSpace, Options, Storage, MAX_DATA_SIZE};

fn nonsense() -> Vec<(&'static str, Options)> {
    let base = || Options::new().create(true);
    vec![
        (
            "a data file past the bound",
            base().max_data_size(MAX_DATA_SIZE + 1),
        ),
        ("the largest u64", base().max_data_size(u64::MAX)),
        ("thresholds out of order", base().gc_garbage(0.5, 0.6)),
        ("a negative threshold", base().gc_garbage(0.5, -0.1)),
        ("NaN high", base().gc_garbage(f64::NAN, 0.5)),
        ("NaN low", base().gc_garbage(0.5, f64::NAN)),
    ]
}

#[test]
fn nonsense_options_are_refused_before_any_file_is_touched() {
    for (what, opts) in nonsense() {
        let dir = tempfile::tempdir().unwrap();
        let err = FlexSpace::open(dir.path(), opts.clone()).err();
        assert!(
            matches!(err, Some(Error::InvalidOptions(_))),
            "{what}: {err:?}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{what}: files made: {left:?}");

        let storage = Arc::new(FaultStorage::new());
        let err = FlexSpace::open_with_storage(storage.clone(), opts.clone()).err();
        assert!(
            matches!(err, Some(Error::InvalidOptions(_))),
            "{what}: {err:?}"
        );
        assert!(!storage.exists("tree").unwrap(), "{what}: tree file made");

        // A read-only open of an existing space refuses them too.
        let good =
            FlexSpace::open_with_storage(storage.clone(), Options::new().create(true)).unwrap();
        drop(good);
        let err = FlexSpace::open_with_storage(storage, opts.read_only(true)).err();
        assert!(
            matches!(err, Some(Error::InvalidOptions(_))),
            "{what}: {err:?}"
        );
    }
}

#[test]
fn the_bounds_themselves_are_accepted() {
    // Thresholds equal to each other, at zero, and at or above 1 (which
    // turns garbage-driven collection off) are all meaningful.
    for (high, low) in [(0.0, 0.0), (0.5, 0.5), (1.0, 1.0), (2.0, 0.5)] {
        let storage = Arc::new(FaultStorage::new());
        let opts = Options::new().create(true).gc_garbage(high, low);
        let space = FlexSpace::open_with_storage(storage, opts).unwrap();
        space.insert(0, b"kept").unwrap();
        let mut out = vec![0; 4];
        space.read(0, &mut out).unwrap();
        assert_eq!(&out, b"kept");
    }
}
