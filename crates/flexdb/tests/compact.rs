//! `Db::compact`: on real files, writes, overwrites and deletes until the
//! data file holds freed segments and garbage; compaction makes its
//! allocated blocks (`st_blocks`) fall and every pair reads back, also
//! after reopening. The disk breakdown of `Stats` adds up and matches the
//! directory. On the fault-injecting backend, crashes at random storage
//! operations during compaction (punches included) recover every write
//! flushed before it. `CRASH_ITERATIONS` sets the number of crashes
//! (default 8); the seed is random per run (`CRASH_SEED` replays).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use flexdb::{Db, Options};
use flexspace::{CrashModel, Fault, FaultStorage, Storage, StorageFile};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn value(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let b: u8 = rng.gen();
    (0..len).map(|i| b.wrapping_add(i as u8)).collect()
}

/// Puts, overwrites and deletes over `keys` keys.
fn churn(db: &Db, model: &mut Model, rng: &mut StdRng, ops: usize, keys: u32, len: usize) {
    for _ in 0..ops {
        let k = format!("key{:06}", rng.gen_range(0..keys)).into_bytes();
        if rng.gen_bool(0.15) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let n = rng.gen_range(len / 2..len);
            let v = value(rng, n);
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

fn assert_holds(db: &Db, model: &Model) {
    let got: Model = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(got.len(), model.len());
    assert!(got == *model, "the store's pairs differ from the model");
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
}

fn blocks(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn dir_blocks(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().blocks() * 512)
        .sum()
}

/// Deletes each pair with probability `p`, then flushes.
fn delete_some(db: &Db, model: &mut Model, rng: &mut StdRng, p: f64) {
    let doomed: Vec<Vec<u8>> = model.keys().filter(|_| rng.gen_bool(p)).cloned().collect();
    for k in doomed {
        db.delete(&k).unwrap();
        model.remove(&k);
    }
    db.flush().unwrap();
}

fn real_opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(1 << 20)
        .cache_bytes(1 << 20)
}

/// Garbage collection lazy enough to leave garbage in segments that hold
/// data (freed segments are given back after every commit anyway).
fn lazy_gc() -> Options {
    real_opts().gc_garbage(0.9, 0.85)
}

#[test]
fn compaction_gives_disk_back_and_every_pair_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = Model::new();
    let db = Db::open(dir.path(), lazy_gc()).unwrap();
    churn(&db, &mut model, &mut rng, 60_000, 6_000, 2048);
    // Delete half the pairs: every segment keeps garbage below the lazy
    // collection's threshold (segments that empty out are given back by
    // the flush already).
    delete_some(&db, &mut model, &mut rng, 0.5);
    let data = dir.path().join("data");
    let before = blocks(&data);
    let s0 = db.stats();
    assert!(
        s0.disk_garbage_bytes > 8 << 20,
        "the workload must leave garbage: {s0:?}"
    );
    let mut calls = Vec::new();
    let report = db.compact_with_progress(|p| calls.push(p)).unwrap();
    let after = blocks(&data);
    let s1 = db.stats();
    assert!(!calls.is_empty());
    let last = calls.last().unwrap();
    assert_eq!(last.done, last.total);
    assert!(report.punched_bytes > 0, "{report:?}");
    assert!(
        after + 2 * flexspace::SEGMENT_SIZE < before,
        "st_blocks of the data file: {before} -> {after} ({report:?})"
    );
    assert!(
        report.disk_bytes_after < report.disk_bytes_before,
        "{report:?}"
    );
    // What is left of the data file: live pairs, the open segment's rest
    // and the last free segment (never punched while it is the only one).
    assert!(
        s1.disk_garbage_bytes <= 3 * flexspace::SEGMENT_SIZE,
        "{s1:?}"
    );
    assert_holds(&db, &model);
    db.close().unwrap();
    let db = Db::open(dir.path(), real_opts()).unwrap();
    assert_holds(&db, &model);
    assert!(db.check().is_ok());
}

/// `Db::compact` does not wait out the space's wait for readers of the
/// segments it empties (2 s): the store's current view is such a reader,
/// and only the republishing after the space's compaction lets it go, so
/// that wait always ran to its end (every compaction that relocated
/// anything took over 2 s). The bound is that wait, not a speed: a
/// compaction of a few MiB takes milliseconds.
#[test]
fn compaction_does_not_wait_out_the_readers_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(14);
    let mut model = Model::new();
    let db = Db::open(dir.path(), lazy_gc()).unwrap();
    churn(&db, &mut model, &mut rng, 20_000, 6_000, 2048);
    delete_some(&db, &mut model, &mut rng, 0.5);
    let t = std::time::Instant::now();
    let report = db.compact().unwrap();
    let took = t.elapsed();
    assert!(report.relocated_bytes > 0, "{report:?}");
    assert!(
        took < std::time::Duration::from_secs(2),
        "compact took {took:?}: it waited for its own view ({report:?})"
    );
    assert_eq!(db.stats().space_held_bytes, 0, "{:?}", db.stats());
    assert_holds(&db, &model);
}

/// Segments a commit empties are free, and punched, once the flush that
/// made the commit returns: the view published with it registered in a later grace epoch
/// than they were freed in, and the view it replaced was the last reader
/// holding them. (They used to wait for the next commit.) Also with
/// garbage collection at low thresholds, whose rounds free segments
/// between publishes.
#[test]
fn segments_emptied_by_a_commit_are_free_when_its_flush_returns() {
    for (high, low) in [(0.6, 0.5), (0.25, 0.2)] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(13);
        let mut model = Model::new();
        let db = Db::open(dir.path(), real_opts().gc_garbage(high, low)).unwrap();
        let mut emptied_some = false;
        for round in 0..6 {
            churn(&db, &mut model, &mut rng, 8_000, 3_000, 2048);
            db.flush().unwrap();
            let s = db.stats();
            assert_eq!(
                s.space_held_bytes, 0,
                "gc {high}/{low}, round {round}: segments held after the flush: {s:?}"
            );
            // And given back: the flush waits for the space's punches (at
            // most the one free segment never punched while alone stays).
            assert!(
                s.disk_garbage_free_bytes <= flexspace::SEGMENT_SIZE,
                "gc {high}/{low}, round {round}: free segments left allocated: {s:?}"
            );
            emptied_some |= s.gc_relocated_bytes > 0;
        }
        assert!(
            emptied_some,
            "gc {high}/{low}: the churn never freed a segment"
        );
        assert_holds(&db, &model);
    }
}

#[test]
fn the_disk_breakdown_adds_up_and_matches_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(12);
    let mut model = Model::new();
    let db = Db::open(dir.path(), real_opts()).unwrap();
    churn(&db, &mut model, &mut rng, 20_000, 3_000, 1024);
    db.flush().unwrap();
    let check = |s: &flexdb::Stats| {
        assert_eq!(
            s.disk_total_bytes,
            s.disk_live_bytes
                + s.disk_garbage_bytes
                + s.disk_wal_bytes
                + s.disk_checkpoint_bytes
                + s.disk_log_bytes
                + s.disk_other_bytes,
            "{s:?}"
        );
        assert!(s.disk_live_bytes > 0 && s.disk_wal_bytes > 0 && s.disk_log_bytes > 0);
        assert!(
            s.disk_checkpoint_bytes > 0,
            "the tree file holds a checkpoint"
        );
        let data = blocks(&dir.path().join("data"));
        assert_eq!(s.disk_live_bytes + s.disk_garbage_bytes, data, "{s:?}");
        let wal: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().starts_with("wal-"))
            .map(|e| e.metadata().unwrap().blocks() * 512)
            .sum();
        (wal, dir_blocks(dir.path()))
    };
    // The store is quiet: the files do not change between the two reads
    // (retried a few times in case the committer's idle release ran).
    let mut matched = false;
    for _ in 0..20 {
        let s = db.stats();
        let (wal, total) = check(&s);
        if s.disk_total_bytes == total && s.disk_wal_bytes == wal {
            matched = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(matched, "the breakdown never matched the directory");
    db.compact().unwrap();
    check(&db.stats());
}

fn crash_opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
        .cache_bytes(64 << 10)
}

/// Churns, flushes (the floor: everything so far is durable), then
/// compacts, then writes a little more and compacts again; returns the
/// model at the floor and whether the flush returned.
fn run(seed: u64, storage: Arc<FaultStorage>) -> (Model, bool, flexdb::CompactReport) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let Ok(db) = Db::open_with_storage(storage, "compact", crash_opts()) else {
        return (model, false, Default::default());
    };
    let mut ok = true;
    for _ in 0..4000 {
        let k = format!("key{:04}", rng.gen_range(0..1000)).into_bytes();
        let r = if rng.gen_bool(0.2) {
            model.remove(&k);
            db.delete(&k)
        } else {
            let v = value(&mut rng, 6000);
            model.insert(k.clone(), v.clone());
            db.put(&k, &v)
        };
        if r.is_err() {
            ok = false;
            break;
        }
    }
    let flushed = ok && db.flush().is_ok();
    let mut report = Default::default();
    if flushed {
        match db.compact() {
            Ok(r) => report = r,
            Err(e) => eprintln!("compact: {e}"),
        }
    }
    drop(db);
    (model, flushed, report)
}

#[test]
fn crashes_during_compaction_keep_every_flushed_write() {
    let iterations = flexsys::test_seed::iterations(8);
    let master =
        flexsys::test_seed::TestSeed::new("crashes_during_compaction_keep_every_flushed_write");
    let mut rng = StdRng::seed_from_u64(master.get());
    for it in 0..iterations {
        let seed = rng.gen();
        let model_seed = rng.gen();
        let dry = Arc::new(FaultStorage::with_model(CrashModel::Reorder {
            seed: model_seed,
        }));
        let (model, flushed, report) = run(seed, dry.clone());
        assert!(flushed, "the dry run flushes");
        assert!(
            report.relocated_bytes > 0,
            "the dry run's compaction relocates: {report:?}"
        );
        // Free segments were punched (after commits and by the compaction).
        let data = dry.open_file("data", false).unwrap();
        assert!(
            data.allocated_bytes().unwrap() + flexspace::SEGMENT_SIZE <= data.len().unwrap(),
            "the data file has holes"
        );
        let total = dry.ops();
        // Crash in the last third: compaction and its punches run there.
        let at = rng.gen_range(total * 2 / 3..total);
        let storage = Arc::new(FaultStorage::with_model(CrashModel::Reorder {
            seed: model_seed,
        }));
        storage.plan(at, Fault::Crash { tear: rng.gen() });
        let (_, flushed, _) = run(seed, storage.clone());
        let image = Arc::new(storage.crash_image());
        let db = Db::open_with_storage(image, "compact", crash_opts())
            .unwrap_or_else(|e| panic!("iteration {it} (crash at {at}/{total}): {e}"));
        if flushed {
            assert_holds(&db, &model);
        }
        db.check()
            .unwrap_or_else(|e| panic!("iteration {it} (crash at {at}/{total}): {e}"));
        db.compact().unwrap();
        if flushed {
            assert_holds(&db, &model);
        }
    }
}

/// A store left idle compacts on its own: its data file's garbage falls
/// within seconds, and writes coming back work as before.
#[test]
fn an_idle_store_compacts_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(13);
    let mut model = Model::new();
    let db = Db::open(dir.path(), lazy_gc()).unwrap();
    churn(&db, &mut model, &mut rng, 40_000, 6_000, 2048);
    delete_some(&db, &mut model, &mut rng, 0.5);
    let s0 = db.stats();
    assert!(s0.disk_garbage_bytes > 8 << 20, "{s0:?}");
    let t = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(30);
    let target = s0.disk_live_bytes / 4 + 2 * flexspace::SEGMENT_SIZE;
    while db.stats().disk_garbage_bytes > target {
        assert!(t.elapsed() < limit, "idle compaction: {:?}", db.stats());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_holds(&db, &model);
    churn(&db, &mut model, &mut rng, 2_000, 6_000, 2048);
    db.flush().unwrap();
    assert_holds(&db, &model);
    db.close().unwrap();
    let db = Db::open(dir.path(), real_opts()).unwrap();
    assert_holds(&db, &model);
}
