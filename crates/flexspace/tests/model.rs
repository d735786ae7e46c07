//! Model-based tests: random operation sequences against a `Vec<u8>`, with
//! close/reopen cycles, and garbage collection forced by a small data file.

mod common;

use std::sync::Arc;

use common::{apply, apply_model, content, random_op, Op};
use flexspace::{FaultStorage, FlexSpace, Options, SEGMENT_SIZE};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn opts() -> Options {
    Options::new()
        .create(true)
        .commit_log_bytes(2048)
        .checkpoint_log_bytes(16 * 1024)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_ops_with_reopens_match_the_model(seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let storage = Arc::new(FaultStorage::new());
        let mut space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
        let mut model = Vec::new();
        for step in 0..300 {
            let op = random_op(&mut rng, model.len() as u64, 3000);
            apply(&space, &op).unwrap();
            apply_model(&mut model, &op);
            space.check_invariants();
            prop_assert_eq!(space.len(), model.len() as u64);
            if step % 25 == 0 {
                prop_assert_eq!(content(&space), model.clone());
                // Tags and extents: read_extent returns bytes of the model.
                if !model.is_empty() {
                    let o = rng.gen_range(0..model.len() as u64);
                    let mut b = vec![0u8; 64];
                    let (start, n) = space.read_extent(o, &mut b).unwrap();
                    prop_assert!(start <= o);
                    prop_assert_eq!(&b[..n], &model[start as usize..start as usize + n]);
                }
            }
            if rng.gen_ratio(1, 60) {
                if rng.gen() {
                    space.close().unwrap();
                } else {
                    drop(space);
                }
                space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
                space.check_invariants();
                prop_assert_eq!(content(&space), model.clone());
            }
        }
        prop_assert_eq!(content(&space), model);
    }
}

#[test]
fn tags_survive_reopen_and_shift_with_data() {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
    space.insert(0, &[1; 100]).unwrap();
    space.set_tag(40, 7).unwrap();
    space.insert(0, &[2; 10]).unwrap();
    assert_eq!(space.get_tag(50).unwrap(), 7);
    assert_eq!(space.get_tag(40).unwrap(), 0);
    space.sync().unwrap();
    drop(space);
    let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
    assert_eq!(space.get_tag(50).unwrap(), 7);
    let mut b = [0u8; 200];
    let (start, n) = space.read_extent(60, &mut b).unwrap();
    assert_eq!(start, 50);
    assert_eq!(n, 60);
}

/// A 32 MiB data file (8 segments) holding ~20 MiB while 200 MiB of
/// overwrites and updates go through: only garbage collection keeps it
/// going. Real files in a temporary directory.
#[test]
fn garbage_collection_keeps_a_small_data_file_usable() {
    gc_keeps_a_small_data_file_usable(false);
}

/// The same through the memory-mapped read path: segments are reused under
/// the mapping, and reads still see the right bytes.
#[test]
fn garbage_collection_keeps_a_small_data_file_usable_with_mmap_reads() {
    gc_keeps_a_small_data_file_usable(true);
}

fn gc_keeps_a_small_data_file_usable(mmap: bool) {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::new()
        .create(true)
        .max_data_size(8 * SEGMENT_SIZE)
        .mmap_reads(mmap);
    let space = FlexSpace::open(dir.path(), o.clone()).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let mut model = vec![0u8; 0];
    let chunk = 64 * 1024;
    while model.len() < 20 << 20 {
        let d: Vec<u8> = (0..chunk).map(|_| rng.gen()).collect();
        space.insert(model.len() as u64, &d).unwrap();
        model.extend_from_slice(&d);
        space.check_invariants();
    }
    for i in 0..3200u64 {
        let at = rng.gen_range(0..model.len() - chunk);
        let d = vec![(i % 251) as u8; chunk];
        let op = if i % 2 == 0 {
            Op::Write(at as u64, d)
        } else {
            Op::Update(at as u64, d, chunk as u64)
        };
        apply(&space, &op).unwrap();
        apply_model(&mut model, &op);
        space.check_invariants();
        if i % 400 == 0 {
            space.sync().unwrap();
            space.check_invariants();
        }
        if i % 97 == 0 {
            // Reads of random ranges, through whatever path serves them.
            let at = rng.gen_range(0..model.len() - 3 * chunk);
            let mut b = vec![0u8; 3 * chunk];
            space.read(at as u64, &mut b).unwrap();
            assert_eq!(b, model[at..at + 3 * chunk], "step {i}");
        }
    }
    let stats = space.stats();
    assert!(stats.gc_runs > 0, "{stats:?}");
    assert!(stats.gc_relocated_bytes > 0);
    assert_eq!(content(&space), model);
    space.close().unwrap();
    let space = FlexSpace::open(dir.path(), o).unwrap();
    assert_eq!(content(&space), model);
}

#[test]
fn a_full_data_file_refuses_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::new().create(true).max_data_size(8 * SEGMENT_SIZE);
    let space = FlexSpace::open(dir.path(), o.clone()).unwrap();
    let d = vec![5u8; 1 << 20];
    let mut n = 0u64;
    let err = loop {
        match space.insert(0, &d) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, flexspace::Error::NoSpace(_)), "{err}");
    space.check_invariants();
    assert!(n >= 25, "only {n} MiB fit");
    // Still usable: reads work, collapses work, and then inserts again.
    assert_eq!(space.len(), n << 20);
    space.collapse(0, 4 << 20).unwrap();
    space.check_invariants();
    space.insert(0, &d).unwrap();
    space.check_invariants();
    space.sync().unwrap();
    space.check_invariants();
    drop(space);
    let space = FlexSpace::open(dir.path(), o).unwrap();
    assert_eq!(space.len(), (n - 3) << 20);
}

#[test]
fn open_errors_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert!(matches!(
        FlexSpace::open(&missing, Options::new()),
        Err(flexspace::Error::NotAFlexSpace(_))
    ));
    std::fs::write(dir.path().join("unrelated"), b"x").unwrap();
    assert!(matches!(
        FlexSpace::open(dir.path(), Options::new()),
        Err(flexspace::Error::NotAFlexSpace(_))
    ));
    let sp = dir.path().join("sp");
    let a = FlexSpace::open(&sp, Options::new().create(true)).unwrap();
    assert!(matches!(
        FlexSpace::open(&sp, Options::new()),
        Err(flexspace::Error::Locked(_))
    ));
    drop(a);
    FlexSpace::open(&sp, Options::new()).unwrap();
}
