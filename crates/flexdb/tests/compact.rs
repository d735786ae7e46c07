//! `Db::compact`: on real files, writes, overwrites and deletes until the
//! data file holds freed segments and garbage; compaction makes its
//! allocated blocks (`st_blocks`) fall and every pair reads back, also
//! after reopening. The disk breakdown of `Stats` adds up and matches the
//! directory. `Db::compact` does not wait for its own view. On the
//! fault-injecting backend, crashes at every storage operation of a flush
//! and the compaction after it (punches included), and at some among the
//! writes before, recover a prefix of the writes, every write flushed
//! before the compaction once the flush returned, with a pair count that
//! matches; the recovered store checks clean and compacts. Crash images
//! are taken along a run (`FaultStorage::image_at`), several per run.
//! `CRASH_ITERATIONS` sets the number of crashes (default 24); the seed
//! is random per run (`CRASH_SEED` replays).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flexdb::{Db, Options};
use flexspace::{CrashModel, FaultStorage, Storage, StorageFile};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
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

/// A store (lazy garbage collection) after `ops` random writes over 6,000
/// keys, with half its pairs then deleted, and its model; the generator
/// (seeded with `seed`) goes on from there.
fn churned_then_halved(seed: u64, ops: usize) -> (tempfile::TempDir, Db, Model, StdRng) {
    churned_then_halved_with(seed, ops, lazy_gc())
}

/// `churned_then_halved` on a store opened with `opts`.
fn churned_then_halved_with(
    seed: u64,
    ops: usize,
    opts: Options,
) -> (tempfile::TempDir, Db, Model, StdRng) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let db = Db::open(dir.path(), opts).unwrap();
    churn(&db, &mut model, &mut rng, ops, 6_000, 2048);
    delete_some(&db, &mut model, &mut rng, 0.5);
    (dir, db, model, rng)
}

/// The most garbage the idle tests expect a compaction to leave.
fn idle_target(s: &flexdb::Stats) -> u64 {
    s.disk_live_bytes / 4 + 2 * flexspace::SEGMENT_SIZE
}

/// `churned_then_halved` on a store whose commits collect no garbage
/// (only collection to make room runs), so that its data file's garbage
/// stands well above `idle_target` (a lazy collection leaves a level that
/// depends on when the commits ran: 8.2 to 18.9 MB for one seed, too near
/// the bar), and its stats then.
fn with_garbage_to_compact(
    seed: u64,
    ops: usize,
) -> (tempfile::TempDir, Db, Model, StdRng, flexdb::Stats) {
    let no_gc = real_opts().gc_garbage(1.0, 1.0);
    let (dir, db, model, rng) = churned_then_halved_with(seed, ops, no_gc);
    let s = db.stats();
    assert!(
        s.disk_garbage_bytes > idle_target(&s) + 2 * flexspace::SEGMENT_SIZE,
        "no garbage worth compacting: {s:?}"
    );
    (dir, db, model, rng, s)
}

#[test]
fn compaction_gives_disk_back_and_every_pair_reads_back() {
    // Half the pairs deleted: every segment keeps garbage below the lazy
    // collection's threshold (segments that empty out are given back by
    // the flush already).
    let (dir, db, model, _) = churned_then_halved(11, 60_000);
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
/// anything took over 2 s), leaving the segments held (`held_bytes`).
#[test]
fn compaction_does_not_wait_out_the_readers_grace_period() {
    let (_dir, db, model, _) = churned_then_halved(14, 20_000);
    let report = db.compact().unwrap();
    assert!(report.relocated_bytes > 0, "{report:?}");
    // Nothing held the emptied segments past the wait: the store's own
    // view did not (it used to, until the wait ran out).
    assert_eq!(report.held_bytes, 0, "{report:?}");
    assert_eq!(db.stats().space_held_bytes, 0, "{:?}", db.stats());
    assert_holds(&db, &model);
}

/// A snapshot taken before a compaction holds the segments it empties:
/// the report says so (`held_bytes`), the snapshot still reads what it
/// saw, and once it is dropped the next compaction holds nothing.
#[test]
fn segments_a_snapshot_holds_through_compaction_are_reported() {
    let (_dir, db, mut model, mut rng) = churned_then_halved(15, 20_000);
    db.flush().unwrap();
    let snap = db.snapshot();
    let seen = model.clone();
    delete_some(&db, &mut model, &mut rng, 0.5);
    // (Whether this compaction or the commit before it empties them.)
    let report = db.compact().unwrap();
    assert!(report.held_bytes > 0, "{report:?}");
    for (k, v) in seen.iter().take(500) {
        assert_eq!(snap.get(k).unwrap().as_deref(), Some(&v[..]));
    }
    drop(snap);
    let again = db.compact().unwrap();
    assert_eq!(again.held_bytes, 0, "{again:?}");
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
        std::thread::sleep(Duration::from_millis(100));
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

/// Crash images one run takes in its flush and compaction at most: each
/// is a copy of the store's files, held (packed, without their holes)
/// until the run ends, so a workload's crash points are spread over
/// several runs of it.
const IMAGES_PER_RUN: usize = 16;

/// Crash points of a workload among its writes (the others are every
/// operation from its flush on).
const POINTS_IN_WRITES: usize = 16;

/// The workload's writes: puts of 6000-byte values over 1000 keys, a fifth
/// of them deletes instead (drawn from a seed). Enough that its
/// compaction relocates a partly filled segment.
const WRITES: usize = 4000;

/// The hash of one pair; a state's fingerprint is the wrapping sum of its
/// pairs' hashes, so a write updates it in O(1).
fn pair_hash(k: &[u8], v: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (k, v).hash(&mut h);
    h.finish()
}

fn fingerprint(m: &Model) -> u64 {
    m.iter()
        .fold(0u64, |a, (k, v)| a.wrapping_add(pair_hash(k, v)))
}

/// Where one run takes crash images (`FaultStorage::image_at`), counted
/// from its own steps, since background threads make the operation counts
/// of two runs of a workload drift apart by far more than a compaction's
/// few dozen operations: `writes`, (write index, operations after that
/// write began), increasing and each taken before the next one's write;
/// `flush`, operations after the flush began; `compaction`, operations
/// after the flush returned (the compaction and the close).
#[derive(Default)]
struct Plan {
    writes: Vec<(usize, u64)>,
    flush: Vec<u64>,
    compaction: Vec<u64>,
    tear: bool,
}

/// What one run of a workload did, with the storage's operation count
/// (`FaultStorage::ops`) at each step: a crash image taken before
/// operation N saw every step whose count is at most N.
#[derive(Default)]
struct Run {
    /// The fingerprint of the pairs after each write (index 0: before any).
    prints: Vec<u64>,
    /// The count when each write began.
    began: Vec<u64>,
    /// The pairs after the last write (the flush's floor).
    model: Model,
    /// The count when the flush began, and when it returned.
    flush_began: Option<u64>,
    flushed_at: Option<u64>,
    /// The count when the compaction returned, and what it did.
    compacted_at: Option<u64>,
    report: flexdb::CompactReport,
}

/// Where a crash image was taken, relative to the run's steps.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Phase {
    Writes,
    Flush,
    Compaction,
    Closing,
}

impl Run {
    fn phase(&self, at: u64) -> Phase {
        let passed = |step: Option<u64>| step.is_some_and(|s| s <= at);
        if passed(self.compacted_at) {
            Phase::Closing
        } else if passed(self.flushed_at) {
            Phase::Compaction
        } else if passed(self.flush_began) {
            Phase::Flush
        } else {
            Phase::Writes
        }
    }
}

/// Writes, flushes (the floor: every write is durable), compacts, closes,
/// taking the crash images `plan` asks for (without pausing: the store's
/// threads go on as in a run that takes none).
fn run(seed: u64, storage: &Arc<FaultStorage>, plan: &Plan) -> Run {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut r = Run {
        prints: vec![0],
        ..Run::default()
    };
    let mut planned = plan.writes.iter().peekable();
    if let Ok(db) = Db::open_with_storage(storage.clone(), "compact", crash_opts()) {
        r.flushed_at = writes_then_flush(&db, storage, &mut rng, &mut r, |i| {
            if let Some(&(_, after)) = planned.next_if(|p| p.0 == i) {
                storage.image_at(&[after], plan.tear);
            }
            if i == WRITES {
                storage.image_at(&plan.flush, plan.tear);
            }
        });
        if r.flushed_at.is_some() {
            storage.image_at(&plan.compaction, plan.tear);
            match db.compact() {
                Ok(report) => {
                    r.report = report;
                    r.compacted_at = Some(storage.ops());
                }
                Err(e) => eprintln!("compact: {e}"),
            }
        }
    }
    r
}

/// The workload's writes, then a flush; calls `before(i)` before write
/// `i` and before the flush (`i` = `WRITES`); the count when the flush
/// returned.
fn writes_then_flush(
    db: &Db,
    storage: &FaultStorage,
    rng: &mut StdRng,
    r: &mut Run,
    mut before: impl FnMut(usize),
) -> Option<u64> {
    let mut print = 0u64;
    for i in 0..WRITES {
        before(i);
        let k = format!("key{:04}", rng.gen_range(0..1000)).into_bytes();
        r.began.push(storage.ops());
        let (old, result) = if rng.gen_bool(0.2) {
            (r.model.remove(&k), db.delete(&k))
        } else {
            let v = value(rng, 6000);
            print = print.wrapping_add(pair_hash(&k, &v));
            (r.model.insert(k.clone(), v.clone()), db.put(&k, &v))
        };
        if let Some(old) = old {
            print = print.wrapping_sub(pair_hash(&k, &old));
        }
        r.prints.push(print);
        result.ok()?;
    }
    before(WRITES);
    r.flush_began = Some(storage.ops());
    db.flush().ok()?;
    Some(storage.ops())
}

/// Recovers `image` (taken before operation `at` of run `r`) and checks
/// the contract: the pairs are those after a prefix of the writes begun
/// before the crash, all of them once the flush returned; the store checks
/// clean, compacts, and keeps its pairs through that and a reopen.
fn check_image(r: &Run, at: u64, image: FaultStorage, what: &str) {
    let image = Arc::new(image);
    let phase = r.phase(at);
    let db = match Db::open_with_storage(image.clone(), "compact", crash_opts()) {
        Ok(db) => db,
        // The store's creation was not durable yet: nothing was promised.
        Err(flexdb::Error::NotFound(_)) if phase <= Phase::Flush => return,
        Err(e) => panic!("{what}: reopen: {e}"),
    };
    let pairs = |db: &Db| -> Model {
        db.iter()
            .map(|kv| kv.unwrap_or_else(|e| panic!("{what}: read: {e}")))
            .collect()
    };
    let got = pairs(&db);
    if phase >= Phase::Compaction {
        assert!(got == r.model, "{what}: the flushed pairs differ");
        assert_holds(&db, &r.model);
    } else {
        let begun = r.began.partition_point(|&b| b < at);
        let print = fingerprint(&got);
        assert!(
            r.prints[..=begun].contains(&print),
            "{what}: the {} recovered pairs are no prefix of the {begun} writes begun",
            got.len()
        );
    }
    let report = db.check().unwrap_or_else(|e| panic!("{what}: check: {e}"));
    assert!(report.is_ok(), "{what}: {:?}", report.problems);
    // The recovered pair count is the space's, replayed logs merged.
    db.flush().unwrap_or_else(|e| panic!("{what}: flush: {e}"));
    assert_eq!(db.stats().pairs, got.len() as u64, "{what}: pair count");
    db.compact()
        .unwrap_or_else(|e| panic!("{what}: compact: {e}"));
    assert!(pairs(&db) == got, "{what}: the pairs changed in compaction");
    db.put(b"after", b"crash").unwrap();
    db.close().unwrap();
    let db = Db::open_with_storage(image, "compact", crash_opts())
        .unwrap_or_else(|e| panic!("{what}: reopen after the recovery: {e}"));
    let mut want = got;
    want.insert(b"after".to_vec(), b"crash".to_vec());
    assert!(pairs(&db) == want, "{what}: the pairs changed in a reopen");
}

/// Runs a workload taking the images `plan` asks for, then recovers and
/// checks each (`check_image`); counts them by phase and the time spent.
struct Crashes {
    planned: u64,
    fired: u64,
    phases: BTreeMap<Phase, u64>,
    running: Duration,
    recovering: Duration,
}

impl Crashes {
    fn run(&mut self, seed: u64, model: CrashModel, plan: &Plan) -> (Run, Arc<FaultStorage>) {
        self.planned += (plan.writes.len() + plan.flush.len() + plan.compaction.len()) as u64;
        let storage = Arc::new(FaultStorage::with_model(model));
        let t = Instant::now();
        let r = run(seed, &storage, plan);
        let images = storage.take_images();
        self.running += t.elapsed();
        assert!(r.compacted_at.is_some(), "seed {seed}: the run compacts");
        let t = Instant::now();
        for (at, image) in images {
            self.fired += 1;
            let phase = r.phase(at);
            *self.phases.entry(phase).or_default() += 1;
            let what = format!(
                "workload seed {seed}, {model:?}, crash at {at} in {phase:?} (tear {}, flush \
                 {:?}..{:?}, compaction until {:?})",
                plan.tear, r.flush_began, r.flushed_at, r.compacted_at
            );
            check_image(&r, at, image, &what);
        }
        self.recovering += t.elapsed();
        (r, storage)
    }
}

/// Crashes at every storage operation of the flush, the compaction and
/// the close that follow a workload's writes, and at some among the
/// writes, each checked after recovery (see `check_image`). A workload's
/// first run takes the crash images among its writes and counts its
/// operations from the flush on; each later run takes `IMAGES_PER_RUN` of
/// those. Half the workloads crash keeping only synced bytes (the last
/// write torn or not), half with unsynced writes reordered.
/// `CRASH_ITERATIONS` sets the number of crashes (default 24).
#[test]
fn crashes_during_compaction_keep_every_flushed_write() {
    let name = "crashes_during_compaction_keep_every_flushed_write";
    let master = flexsys::test_seed::TestSeed::new(name);
    let iterations = flexsys::test_seed::iterations(24);
    let mut rng = StdRng::seed_from_u64(master.get());
    let mut c = Crashes {
        planned: 0,
        fired: 0,
        phases: BTreeMap::new(),
        running: Duration::ZERO,
        recovering: Duration::ZERO,
    };
    let mut workloads = 0;
    while c.planned < iterations {
        workloads += 1;
        let seed: u64 = rng.gen();
        let model = if workloads % 2 == 0 {
            CrashModel::Reorder { seed: rng.gen() }
        } else {
            CrashModel::SyncedOnly
        };
        // One point within each of `POINTS_IN_WRITES` stretches of the last
        // two thirds of the writes (a fourth of the crashes left at most),
        // each before the next stretch begins: a write is one operation at
        // least.
        let left = iterations - c.planned;
        let stretch = WRITES * 2 / 3 / POINTS_IN_WRITES;
        let first = Plan {
            writes: (0..POINTS_IN_WRITES.min(left.div_ceil(4) as usize))
                .map(|i| (WRITES / 3 + i * stretch, rng.gen_range(0..stretch as u64)))
                .collect(),
            tear: rng.gen(),
            ..Plan::default()
        };
        let (d, dry) = c.run(seed, model, &first);
        assert!(
            d.report.relocated_bytes > 0,
            "seed {seed}: the compaction relocates: {:?}",
            d.report
        );
        // Free segments were punched (after commits and by the compaction).
        let data = dry.open_file("data", false).unwrap();
        assert!(
            data.allocated_bytes().unwrap() + flexspace::SEGMENT_SIZE <= data.len().unwrap(),
            "seed {seed}: the data file has holes"
        );
        // Every operation from the flush on (a sample when fewer crashes
        // are left), in runs of `IMAGES_PER_RUN`.
        let (flush_began, flushed_at) = (d.flush_began.unwrap(), d.flushed_at.unwrap());
        let mut points: Vec<(bool, u64)> = (0..flushed_at - flush_began)
            .map(|n| (false, n))
            .chain((0..dry.ops() - flushed_at).map(|n| (true, n)))
            .collect();
        points.shuffle(&mut rng);
        points.truncate(iterations.saturating_sub(c.planned) as usize);
        points.sort_unstable();
        for chunk in points.chunks(IMAGES_PER_RUN) {
            let plan = Plan {
                flush: chunk.iter().filter(|p| !p.0).map(|p| p.1).collect(),
                compaction: chunk.iter().filter(|p| p.0).map(|p| p.1).collect(),
                tear: rng.gen(),
                ..Plan::default()
            };
            c.run(seed, model, &plan);
        }
    }
    let Crashes {
        planned,
        fired,
        phases,
        running,
        recovering,
    } = c;
    eprintln!(
        "{name}: {fired} of {planned} planned crashes fired ({workloads} workloads; by phase: \
         {phases:?}; {running:.1?} running them, {recovering:.1?} recovering)"
    );
    assert!(
        fired * 10 >= planned * 8,
        "only {fired} of {planned} planned crashes fired"
    );
    let in_compaction = phases.get(&Phase::Compaction).copied().unwrap_or(0);
    assert!(
        iterations < 100 || in_compaction * 5 >= iterations,
        "too few crashes hit a compaction: {phases:?}"
    );
}

/// A store left idle compacts on its own: its data file's garbage falls
/// within seconds, and writes coming back work as before.
#[test]
fn an_idle_store_compacts_on_its_own() {
    let (dir, db, mut model, mut rng, s0) = with_garbage_to_compact(13, 60_000);
    let t = Instant::now();
    let limit = Duration::from_secs(30);
    let target = idle_target(&s0);
    while db.stats().disk_garbage_bytes > target {
        assert!(t.elapsed() < limit, "idle compaction: {:?}", db.stats());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_holds(&db, &model);
    churn(&db, &mut model, &mut rng, 2_000, 6_000, 2048);
    db.flush().unwrap();
    assert_holds(&db, &model);
    db.close().unwrap();
    let db = Db::open(dir.path(), real_opts()).unwrap();
    assert_holds(&db, &model);
}

/// The stretch `a_store_serving_reads_compacts_only_once_they_stop` counts
/// its gets over.
const QUARTER: Duration = Duration::from_millis(250);

/// A store serving reads is not idle: it does not compact while gets come
/// at thousands a second (a compaction would take a core the readers
/// want), and compacts once they stop.
#[test]
fn a_store_serving_reads_compacts_only_once_they_stop() {
    let (_dir, db, model, _, s0) = with_garbage_to_compact(17, 60_000);
    let target = idle_target(&s0);
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    // Several times the idle waits before a compaction starts.
    let reading = Instant::now();
    let mut gets = 0u64;
    // Gets in each quarter second, to tell a reader the machine starved
    // (the store then rightly found it idle) from a store that compacted
    // under reads.
    let (mut quarters, mut in_quarter, mut quarter_end) = (Vec::new(), 0u64, QUARTER);
    loop {
        let now = reading.elapsed();
        if now >= quarter_end {
            quarters.push(in_quarter);
            (in_quarter, quarter_end) = (0, quarter_end + QUARTER);
        }
        if now >= Duration::from_secs(8) {
            break;
        }
        let k = keys[gets as usize % keys.len()];
        assert_eq!(db.get(k).unwrap().as_ref(), model.get(k));
        gets += 1;
        in_quarter += 1;
    }
    let rate = gets as f64 / reading.elapsed().as_secs_f64();
    let slowest_second = quarters.windows(4).map(|w| w.iter().sum::<u64>()).min();
    // The premise: reads came faster than the idle bar.
    assert!(rate > 20_000.0, "only {rate:.0} gets a second");
    let s1 = db.stats();
    assert!(
        s1.disk_garbage_bytes > target,
        "compacted while serving {rate:.0} gets a second (the slowest second: \
         {slowest_second:?}): before the reads {s0:?}, after {s1:?}"
    );
    let t = Instant::now();
    while db.stats().disk_garbage_bytes > target {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no compaction once reads stopped: {:?}",
            db.stats()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_holds(&db, &model);
}
