//! Maintenance under the caller's control (`auto_maintenance` off),
//! `reserve`, commit ids across checkpoints and reopens, garbage collection
//! bounding space amplification, and tags through garbage collection.

mod common;

use std::sync::Arc;

use common::content;
use flexspace::{FaultStorage, FlexSpace, Options, MAX_EXTENT, SEGMENT_SIZE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn manual() -> Options {
    Options::new()
        .create(true)
        .auto_maintenance(false)
        .commit_log_bytes(4096)
        .checkpoint_log_bytes(64 << 10)
}

#[test]
fn without_automatic_maintenance_nothing_commits_until_asked() {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), manual()).unwrap();
    assert!(!space.maintenance_due());
    for i in 0..200u64 {
        space.insert(i * 10, &[i as u8; 10]).unwrap();
    }
    let st = space.stats();
    assert_eq!(st.commits, 0, "{st:?}");
    assert!(st.uncommitted);
    // 200 entries of 32 bytes are past the 4 KiB commit threshold.
    assert!(space.maintenance_due());
    space.maintain().unwrap();
    let st = space.stats();
    assert_eq!(st.commits, 1);
    assert!(!st.uncommitted);
    assert!(!space.maintenance_due());
    // Past the checkpoint threshold, maintain checkpoints.
    for i in 0..3000u64 {
        space.insert(0, &[i as u8; 3]).unwrap();
    }
    assert!(space.maintenance_due());
    assert_eq!(space.stats().checkpoints, 0);
    // The commit takes the log file past its threshold: a checkpoint.
    space.maintain().unwrap();
    assert!(!space.maintenance_due());
    assert_eq!(space.stats().checkpoints, 1);
    assert_eq!(space.stats().log_file_bytes, 32);
    // What maintain committed survives a crash.
    let model = content(&space);
    space.sync().unwrap();
    let image = Arc::new(storage.crash_image());
    let again = FlexSpace::open_with_storage(image, manual()).unwrap();
    assert_eq!(content(&again), model);
}

#[test]
fn commit_ids_name_commit_points_and_survive_a_clean_reopen() {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), manual()).unwrap();
    let (v0, s0) = space.commit_id();
    assert_eq!(s0, 0);
    space.insert(0, b"one").unwrap();
    assert_eq!(space.commit_id(), (v0, 0), "not committed yet");
    space.sync().unwrap();
    let id1 = space.commit_id();
    assert_eq!(id1, (v0, 1));
    space.sync().unwrap();
    assert_eq!(space.commit_id(), id1, "an empty sync commits nothing");
    space.insert(3, b" two").unwrap();
    space.checkpoint().unwrap();
    let id2 = space.commit_id();
    assert!(id2.0 > v0 && id2.1 == 0, "{id2:?}");
    space.checkpoint().unwrap();
    assert_eq!(space.commit_id(), id2, "nothing changed: no checkpoint");
    let tree_bytes = space.stats().tree_bytes_written;
    space.close().unwrap();
    // Close after a checkpoint with no change writes nothing new.
    let space = FlexSpace::open_with_storage(storage.clone(), manual()).unwrap();
    assert_eq!(space.commit_id(), id2);
    assert_eq!(content(&space), b"one two");
    space.close().unwrap();
    let space = FlexSpace::open_with_storage(storage.clone(), manual()).unwrap();
    assert_eq!(space.commit_id(), id2);
    assert_eq!(space.stats().tree_bytes_written, 0);
    assert!(tree_bytes > 0);
    // A change, then close: a new checkpoint, and reopen agrees with it.
    space.insert(0, b">").unwrap();
    space.close().unwrap();
    let space = FlexSpace::open_with_storage(storage.clone(), manual()).unwrap();
    let id3 = space.commit_id();
    assert!(id3.0 > id2.0 && id3.1 == 0);
    // Commits after a checkpoint, then a crash: the id of the recovered
    // commit point comes back.
    space.insert(0, b"<").unwrap();
    space.sync().unwrap();
    let id4 = space.commit_id();
    assert_eq!(id4, (id3.0, 1));
    space.insert(0, b"lost").unwrap();
    let image = Arc::new(storage.crash_image());
    let crashed = FlexSpace::open_with_storage(image, manual()).unwrap();
    assert_eq!(crashed.commit_id(), id4);
    assert_eq!(content(&crashed), b"<>one two");
}

/// Fills most of a small data file, frees scattered garbage, then checks
/// that `reserve` does the collection up front so that the mutations it
/// covers run none inline.
#[test]
fn reserve_collects_up_front() {
    let storage = Arc::new(FaultStorage::new());
    let opts = manual()
        .max_data_size(8 * SEGMENT_SIZE)
        .gc_garbage(1.0, 1.0);
    let space = FlexSpace::open_with_storage(storage, opts).unwrap();
    let chunk = 64 << 10;
    let mut model = Vec::new();
    let mut rng = StdRng::seed_from_u64(3);
    while model.len() < 26 << 20 {
        let d: Vec<u8> = (0..chunk).map(|_| rng.gen()).collect();
        space.insert(model.len() as u64, &d).unwrap();
        model.extend_from_slice(&d);
    }
    for _ in 0..150 {
        let at = rng.gen_range(0..model.len() - chunk);
        space.collapse(at as u64, chunk as u64).unwrap();
        model.drain(at..at + chunk);
    }
    space.maintain().unwrap();
    let before = space.stats();
    space.reserve(6 << 20).unwrap();
    let reserved = space.stats();
    assert!(reserved.gc_runs > before.gc_runs, "{reserved:?}");
    for _ in 0..(6 << 20) / chunk {
        let d = vec![7u8; chunk];
        let at = rng.gen_range(0..model.len());
        space.insert(at as u64, &d).unwrap();
        model.splice(at..at, d);
    }
    let after = space.stats();
    assert_eq!(after.gc_runs, reserved.gc_runs, "no GC inline: {after:?}");
    assert_eq!(content(&space), model);
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
    // More than the file can hold is refused.
    assert!(matches!(
        space.reserve(64 << 20),
        Err(flexspace::Error::NoSpace(_))
    ));
}

/// Overwrites of 16 KiB blocks churn a 16 MiB space in a 1 GiB data file;
/// `between` runs after every overwrite. Returns the space's worst
/// amplification, sampled after a sync every 100 overwrites, and the model.
fn churn(space: &FlexSpace, mut between: impl FnMut(&FlexSpace)) -> (f64, Vec<u8>) {
    let mut rng = StdRng::seed_from_u64(11);
    let size = 16 << 20;
    let block = 16 << 10;
    let mut model = vec![0u8; size];
    rng.fill(&mut model[..]);
    space.write(0, &model).unwrap();
    let mut worst: f64 = 0.0;
    for i in 0..6000 {
        let at = rng.gen_range(0..size / block) * block;
        let d = vec![(i % 251) as u8; block];
        space.write(at as u64, &d).unwrap();
        model[at..at + block].copy_from_slice(&d);
        between(space);
        if i % 100 == 99 {
            space.sync().unwrap();
            worst = worst.max(space.stats().space_amplification);
            space.check_invariants();
        }
    }
    (worst, model)
}

/// The bound of the two tests below: 1/(1 - 0.25) for the garbage, plus
/// the open segment and the segments between a round and its release.
const AMPLIFICATION_BOUND: f64 = 1.33 + 0.6;

/// The garbage threshold, not the data file's size, bounds the space
/// used while overwrites churn: maintenance runs whenever it is due, on
/// the writer's thread, so the bound holds at every sample whatever the
/// machine's load (a background thread can fall behind a busy writer).
#[test]
fn garbage_collection_bounds_space_amplification() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new()
        .create(true)
        .auto_maintenance(false)
        .max_data_size(1 << 30)
        .gc_garbage(0.25, 0.2);
    let space = FlexSpace::open(dir.path(), opts).unwrap();
    let (worst, model) = churn(&space, |s| {
        if s.maintenance_due() {
            s.maintain().unwrap();
        }
    });
    let st = space.stats();
    assert!(
        worst < AMPLIFICATION_BOUND,
        "space amplification reached {worst}: {st:?}"
    );
    assert!(st.garbage_ratio <= 0.25, "{st:?}");
    assert!(st.gc_runs > 0);
    assert_eq!(content(&space), model);
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
}

/// The same churn with automatic maintenance: whatever the background
/// thread let pile up meanwhile, one `maintain` brings garbage and
/// amplification back under the bound.
#[test]
fn background_maintenance_brings_garbage_back_under_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new()
        .create(true)
        .max_data_size(1 << 30)
        .gc_garbage(0.25, 0.2);
    let space = FlexSpace::open(dir.path(), opts).unwrap();
    let (_, model) = churn(&space, |_| {});
    space.maintain().unwrap();
    space.sync().unwrap();
    let st = space.stats();
    assert!(st.gc_runs > 0);
    assert!(st.garbage_ratio <= 0.25, "{st:?}");
    assert!(
        st.space_amplification < AMPLIFICATION_BOUND,
        "space amplification {}: {st:?}",
        st.space_amplification
    );
    assert_eq!(content(&space), model);
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
}

/// Tagged records, churned until garbage collection relocates most of
/// them: every record start keeps its tag, nothing else gains one.
#[test]
fn garbage_collection_keeps_every_tag() {
    let storage = Arc::new(FaultStorage::new());
    let opts = Options::new()
        .create(true)
        .max_data_size(8 * SEGMENT_SIZE)
        .gc_garbage(0.3, 0.2);
    let space = FlexSpace::open_with_storage(storage.clone(), opts.clone()).unwrap();
    let mut rng = StdRng::seed_from_u64(8);
    // (length, tag) of each record, in order.
    let mut recs: Vec<(u64, u16)> = Vec::new();
    for _ in 0..30_000 {
        let total: u64 = recs.iter().map(|r| r.0).sum();
        if total < 12 << 20 || rng.gen_bool(0.5) {
            let len = rng.gen_range(100..3000);
            let tag = rng.gen_range(1..1000);
            let i = rng.gen_range(0..=recs.len());
            let at: u64 = recs[..i].iter().map(|r| r.0).sum();
            space
                .insert_tagged(at, &vec![tag as u8; len as usize], tag)
                .unwrap();
            recs.insert(i, (len, tag));
        } else {
            let i = rng.gen_range(0..recs.len());
            let at: u64 = recs[..i].iter().map(|r| r.0).sum();
            space.collapse(at, recs[i].0).unwrap();
            recs.remove(i);
        }
    }
    let st = space.stats();
    assert!(st.gc_runs > 0 && st.gc_relocated_bytes > 0, "{st:?}");
    let check = |space: &FlexSpace| {
        let mut at = 0;
        for &(len, tag) in &recs {
            assert_eq!(space.get_tag(at).unwrap(), tag, "record at {at}");
            // No tag inside the record.
            if len > 1 {
                assert_eq!(space.next_tagged(at + 1, at + len).unwrap(), None);
            }
            at += len;
        }
        assert!(space.check().unwrap().is_empty());
    };
    check(&space);
    space.close().unwrap();
    let space = FlexSpace::open_with_storage(storage, opts).unwrap();
    check(&space);
}

#[test]
fn extents_never_cross_segments_and_defrag_merges() {
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage, manual()).unwrap();
    // Appends of odd sizes: consecutive extents merge, but never across a
    // segment boundary (check() reports crossings).
    let mut model = Vec::new();
    for i in 0..3000u32 {
        let d = vec![(i % 251) as u8; 4093];
        space.insert(model.len() as u64, &d).unwrap();
        model.extend_from_slice(&d);
    }
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
    let st = space.stats();
    let mapped = model.len() as u64;
    assert!(
        st.extents <= mapped / MAX_EXTENT + mapped / SEGMENT_SIZE + 2,
        "{st:?}"
    );
    // Fragment a range with small inserts, then defragment it.
    for i in 0..100u64 {
        let at = 1000 + i * 997;
        space.insert_tagged(at, b"xy", 5).unwrap();
        model.splice(at as usize..at as usize, b"xy".iter().copied());
    }
    space.set_tag(1000, 9).unwrap();
    let (_, before) = space.read_counted(1000, &mut vec![0u8; 100_000]).unwrap();
    space.defrag(1000, 100_000).unwrap();
    let (_, after) = space.read_counted(1000, &mut vec![0u8; 100_000]).unwrap();
    assert!(before > 100 && after <= 2, "{before} -> {after} extents");
    assert_eq!(
        space.get_tag(1000).unwrap(),
        9,
        "the range's first tag stays"
    );
    assert_eq!(content(&space), model);
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
}
