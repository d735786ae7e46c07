//! Exports of a snapshot as a new space (`Snapshot::export`, the physical
//! half of an online backup): the new space reads as the snapshot did
//! (bytes, tags, metadata words) whatever the source did meanwhile; a
//! crash at any step of an export leaves either no space or the whole
//! snapshot; a destination holding a space is refused; on a file system
//! that shares blocks (`FLEXDB_REFLINK_DIR`, set by `.ci/run` to an XFS
//! mount when it can make one), the data is shared, not copied.

mod common;

use std::sync::Arc;

use common::{apply, apply_model, content, random_op};
use flexspace::{CrashModel, FaultStorage, FileStorage, FlexSpace, Options, SEGMENT_SIZE};
use flexsys::test_seed::{self, TestSeed};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn opts() -> Options {
    Options::new()
        .create(true)
        .max_data_size(64 * SEGMENT_SIZE)
        .commit_log_bytes(16 << 10)
        .checkpoint_log_bytes(256 << 10)
}

/// Every tagged offset of a space, in order.
fn tags(space: &FlexSpace) -> Vec<(u64, u16)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some((at, tag)) = space.next_tagged(from, space.len()).unwrap() {
        out.push((at, tag));
        from = at + 1;
    }
    out
}

/// Random inserts, overwrites, collapses and tags until the space holds
/// about `bytes`, with a commit now and then (so some data is in the data
/// file and some only in segment buffers).
fn fill(space: &FlexSpace, model: &mut Vec<u8>, rng: &mut StdRng, steps: usize) {
    for i in 0..steps {
        let op = random_op(rng, model.len() as u64, 32 << 10);
        apply(space, &op).unwrap();
        apply_model(model, &op);
        if !model.is_empty() && rng.gen_bool(0.2) {
            let at = rng.gen_range(0..model.len() as u64);
            space.set_tag(at, rng.gen_range(1..4)).unwrap();
        }
        if i % 50 == 49 {
            space.sync().unwrap();
        }
    }
}

#[test]
fn an_export_reads_as_the_snapshot_while_the_space_goes_on() {
    let guard = TestSeed::new("export");
    let seed = guard.get();
    let mut rng = StdRng::seed_from_u64(seed);
    let src_dir = tempfile::tempdir().unwrap();
    let space = Arc::new(FlexSpace::open(src_dir.path(), opts()).unwrap());
    let mut model = Vec::new();
    fill(&space, &mut model, &mut rng, 400);
    space.set_user_meta([7, 8, 9]).unwrap();
    let snap = space.snapshot().unwrap();
    let want_tags = tags(&space);
    let want = model.clone();
    // The space goes on during the export: overwrites, removals, garbage
    // collection and compaction free and reuse segments.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (space, stop) = (space.clone(), stop.clone());
        let mut model = model.clone();
        let mut rng = StdRng::seed_from_u64(seed ^ 1);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                fill(&space, &mut model, &mut rng, 20);
                space.compact_step().unwrap();
            }
        })
    };
    let dest_dir = tempfile::tempdir().unwrap();
    let report = {
        let dest = FileStorage::open(dest_dir.path(), true).unwrap();
        let mut calls = 0;
        let report = snap.export(&dest, &mut |_| calls += 1).unwrap();
        assert_eq!(calls, report.segments);
        report
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
    assert_eq!(report.len, want.len() as u64);
    assert!(report.segments > 0);
    drop(snap);
    let copy = FlexSpace::open(dest_dir.path(), Options::new()).unwrap();
    assert_eq!(content(&copy), want);
    assert_eq!(tags(&copy), want_tags);
    assert_eq!(copy.user_meta(), [7, 8, 9]);
    assert!(copy.check().unwrap().is_empty());
    // The copy is a space of its own: it takes writes.
    copy.insert(0, b"more").unwrap();
    copy.close().unwrap();
}

#[test]
fn an_export_into_a_space_is_refused_and_changes_nothing() {
    let src = tempfile::tempdir().unwrap();
    let space = FlexSpace::open(src.path(), opts()).unwrap();
    space.insert(0, b"source").unwrap();
    let dest = tempfile::tempdir().unwrap();
    {
        let other = FlexSpace::open(dest.path(), opts()).unwrap();
        other.insert(0, b"kept").unwrap();
        other.close().unwrap();
    }
    {
        let storage = FileStorage::open(dest.path(), false).unwrap();
        let snap = space.snapshot().unwrap();
        assert!(snap.export(&storage, &mut |_| {}).is_err());
    }
    let other = FlexSpace::open(dest.path(), Options::new()).unwrap();
    assert_eq!(content(&other), b"kept");
}

#[test]
fn a_crash_during_an_export_leaves_no_space_or_the_whole_snapshot() {
    let guard = TestSeed::new("export crash");
    let seed = guard.get();
    let iterations = test_seed::iterations(24);
    let mut rng = StdRng::seed_from_u64(seed);
    let src_dir = tempfile::tempdir().unwrap();
    let space = FlexSpace::open(src_dir.path(), opts()).unwrap();
    let mut model = Vec::new();
    fill(&space, &mut model, &mut rng, 300);
    let want_tags = tags(&space);
    let snap = space.snapshot().unwrap();
    // A dry run counts the export's storage operations.
    let dry = FaultStorage::new();
    snap.export(&dry, &mut |_| {}).unwrap();
    let ops = dry.ops();
    let (mut whole, mut none) = (0, 0);
    let mut left = iterations;
    let mut taken = 0;
    while left > 0 {
        let n = left.min(8);
        left -= n;
        taken += n.min(ops);
        let dest = FaultStorage::with_model(CrashModel::Reorder { seed: rng.gen() });
        // Always just before the last step (the checkpoint is durable by
        // then: a whole space).
        let mut points = std::collections::BTreeSet::from([ops - 1]);
        // Half anywhere, half among the last steps (the tree and log
        // files: most operations write the data file).
        while (points.len() as u64) < n.min(ops) {
            let from = if rng.gen() { 0 } else { ops.saturating_sub(3) };
            points.insert(rng.gen_range(from..ops));
        }
        let points: Vec<u64> = points.into_iter().collect();
        dest.image_at(&points, false);
        snap.export(&dest, &mut |_| {}).unwrap();
        for (at, image) in dest.take_images() {
            let image = Arc::new(image);
            if !flexspace_exists(&image) {
                none += 1;
                continue;
            }
            let copy = FlexSpace::open_with_storage(image, Options::new())
                .unwrap_or_else(|e| panic!("crash before operation {at} of {ops}: {e}"));
            assert!(
                content(&copy) == model,
                "crash before operation {at} of {ops}: the space differs from the snapshot"
            );
            assert_eq!(tags(&copy), want_tags);
            whole += 1;
        }
    }
    eprintln!("export crashes: {whole} whole spaces, {none} not a space, of {iterations}");
    assert_eq!(whole + none, taken);
    assert!(
        whole > 0 && none > 0,
        "crashes hit both sides of the last step"
    );
}

/// Whether a crash image holds a space (its tree file has a checkpoint).
fn flexspace_exists(image: &Arc<FaultStorage>) -> bool {
    match image.file_bytes("tree") {
        Some(bytes) => {
            let opened =
                FlexSpace::open_with_storage(image.clone(), Options::new().read_only(true));
            !bytes.is_empty() && opened.is_ok()
        }
        None => false,
    }
}

#[test]
fn an_export_shares_blocks_where_the_file_system_can() {
    let Some(root) = std::env::var_os("FLEXDB_REFLINK_DIR") else {
        eprintln!("FLEXDB_REFLINK_DIR is not set: no file system that shares blocks to test on");
        return;
    };
    let src = tempfile::tempdir_in(&root).unwrap();
    let space = FlexSpace::open(src.path(), opts()).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut model = Vec::new();
    for _ in 0..64 {
        let block: Vec<u8> = (0..256 << 10).map(|_| rng.gen()).collect();
        space.insert(model.len() as u64, &block).unwrap();
        model.extend_from_slice(&block);
    }
    space.sync().unwrap();
    let snap = space.snapshot().unwrap();
    let dest = tempfile::tempdir_in(&root).unwrap();
    let report = {
        let storage = FileStorage::open(dest.path(), true).unwrap();
        snap.export(&storage, &mut |_| {}).unwrap()
    };
    // Every segment in the data file is shared; only what the segment
    // buffers still held (none after the sync) is copied.
    assert!(
        report.shared_bytes >= model.len() as u64,
        "shared {} bytes of {}: {report:?}",
        report.shared_bytes,
        model.len()
    );
    drop(snap);
    let copy = FlexSpace::open(dest.path(), Options::new()).unwrap();
    assert_eq!(content(&copy), model);
}

#[test]
fn the_storage_of_an_export_can_be_any_backend() {
    // A source on the fault-injecting backend (no operating-system file:
    // the copy goes through a buffer) into real files.
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
    let data: Vec<u8> = (0..3 * SEGMENT_SIZE as usize / 2)
        .map(|i| (i % 253) as u8)
        .collect();
    space.insert(0, &data).unwrap();
    space.sync().unwrap();
    space.insert(10, b"in a buffer").unwrap();
    let mut want = data.clone();
    want.splice(10..10, b"in a buffer".iter().copied());
    let snap = space.snapshot().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let report = {
        let st = FileStorage::open(dest.path(), true).unwrap();
        snap.export(&st, &mut |_| {}).unwrap()
    };
    assert_eq!(report.shared_bytes, 0);
    assert!(report.copied_bytes >= want.len() as u64);
    let copy = FlexSpace::open(dest.path(), Options::new()).unwrap();
    assert_eq!(content(&copy), want);
}
