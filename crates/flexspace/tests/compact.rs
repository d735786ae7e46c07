//! Giving disk space back: `compact` on real files (the data file's
//! allocated bytes fall, every byte reads back, also after reopening), and
//! crashes at random storage operations of a workload that punches free
//! segments after its commits and compacts now and then (the reordering
//! crash model; the recovered content is a state no older than the last
//! completed sync or compaction). `CRASH_ITERATIONS` sets the number of
//! crashes (default 8); the seed is random per run (`CRASH_SEED` replays).

mod common;

use std::sync::Arc;

use common::blocks::{decode, hash, random_step};
use common::content;
use flexspace::{CrashModel, Fault, FaultStorage, FlexSpace, Options, SEGMENT_SIZE};

/// Blocks the file system may count for a file beyond its data: `st_blocks`
/// includes ext4's extent-tree blocks, which a file fragmented by punched
/// holes needs (one 4 KiB block per 340 extents). Seen in CI: 4 KiB.
const FS_METADATA: u64 = 64 << 10;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Inserts, overwrites and removes 64 KiB blocks; `compact_every` steps
/// (0: never) compacts. Returns the model state.
fn churn(
    space: &FlexSpace,
    rng: &mut StdRng,
    steps: usize,
    mut after: impl FnMut(&FlexSpace, usize, &[(u32, u32)]) -> bool,
) -> Vec<(u32, u32)> {
    let mut state: Vec<(u32, u32)> = Vec::new();
    let mut next_id = 0u32;
    for step in 0..steps {
        let r = random_step(space, rng, &mut state, &mut next_id, (200, 240, 0.15));
        if r.is_err() || !after(space, step, &state) {
            break;
        }
    }
    state
}

/// Garbage high enough that collection leaves plenty for `compact`.
fn lazy_gc(o: Options) -> Options {
    o.max_data_size(64 * SEGMENT_SIZE)
        .commit_log_bytes(16 << 10)
        .checkpoint_log_bytes(256 << 10)
        .gc_garbage(0.9, 0.85)
}

#[test]
fn compaction_gives_blocks_back_and_every_byte_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let state = {
        let space = FlexSpace::open(dir.path(), lazy_gc(Options::new().create(true))).unwrap();
        let state = churn(&space, &mut rng, 3000, |_, _, _| true);
        space.sync().unwrap();
        // The sync's commit may have left a punch to the space's thread;
        // `before` must not count blocks that punch gives back meanwhile.
        space.wait_punched();
        let before = space.stats();
        assert!(
            before.garbage_bytes > 8 * SEGMENT_SIZE,
            "the workload must leave garbage: {before:?}"
        );
        let mut calls = Vec::new();
        let report = space
            .compact(|done, total| calls.push((done, total)))
            .unwrap();
        let after = space.stats();
        let (&(_, total), &(last, _)) = (calls.first().unwrap(), calls.last().unwrap());
        assert_eq!(last, total, "progress ends at its total");
        assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(report.data_allocated_before, before.data_allocated_bytes);
        if report.punched_bytes > 0 {
            // The file system punches holes (ext4, xfs, tmpfs do).
            assert!(
                after.data_allocated_bytes + 4 * SEGMENT_SIZE < before.data_allocated_bytes,
                "{before:?} -> {after:?}"
            );
            // At most the open segment's rest and a punch the last free
            // segment waits for beyond the live bytes.
            assert!(
                after.data_allocated_bytes <= after.live_bytes + 2 * SEGMENT_SIZE + FS_METADATA,
                "{after:?}"
            );
        }
        assert_eq!(decode(&content(&space)).unwrap(), state);
        space.check_invariants();
        space.close().unwrap();
        state
    };
    let space = FlexSpace::open(dir.path(), lazy_gc(Options::new())).unwrap();
    assert_eq!(decode(&content(&space)).unwrap(), state);
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
}

/// Without `compact` or an explicit punch: the segments garbage
/// collection frees are given back to the file system after the commits
/// that free them (on the space's punching thread), so the data file holds
/// little beyond its segments in use.
#[test]
fn commits_give_freed_segments_back_without_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let opts = Options::new()
        .create(true)
        .max_data_size(64 * SEGMENT_SIZE)
        .commit_log_bytes(16 << 10)
        .checkpoint_log_bytes(256 << 10)
        .gc_garbage(0.3, 0.2);
    let space = FlexSpace::open(dir.path(), opts).unwrap();
    let state = churn(&space, &mut rng, 3000, |_, _, _| true);
    space.sync().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let s = loop {
        let s = space.stats();
        if s.unpunched_segments <= 1 || std::time::Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(s.gc_runs > 0 && s.punched_bytes > 4 * SEGMENT_SIZE, "{s:?}");
    assert!(
        s.unpunched_segments <= 1,
        "free segments left allocated: {s:?}"
    );
    if s.punched_bytes > 0 {
        // Segments in use, the last free one start_punch keeps, and the
        // one a punch may be finishing.
        assert!(
            s.data_allocated_bytes <= s.data_file_bytes + 2 * SEGMENT_SIZE + FS_METADATA,
            "{s:?}"
        );
    }
    assert_eq!(decode(&content(&space)).unwrap(), state);
    space.close().unwrap();
}

struct Run {
    hashes: Vec<u64>,
    floor: usize,
    punched: u64,
    compactions: usize,
}

fn crash_opts() -> Options {
    lazy_gc(Options::new().create(true)).max_data_size(16 * SEGMENT_SIZE)
}

fn run(seed: u64, storage: Arc<FaultStorage>) -> Run {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut r = Run {
        hashes: vec![hash(&[])],
        floor: 0,
        punched: 0,
        compactions: 0,
    };
    let Ok(space) = FlexSpace::open_with_storage(storage, crash_opts()) else {
        return r;
    };
    churn(&space, &mut rng, 900, |space, step, state| {
        r.hashes.push(hash(state));
        let durable = if step % 150 == 149 {
            r.compactions += 1;
            space.compact(|_, _| {}).is_ok()
        } else if step % 37 == 36 {
            space.sync().is_ok()
        } else {
            return true;
        };
        if durable {
            r.floor = r.hashes.len() - 1;
        }
        durable
    });
    r.punched = space.stats().punched_bytes;
    r
}

#[test]
fn crashes_while_punching_and_compacting_recover_a_state_since_the_last_sync() {
    let iterations = flexsys::test_seed::iterations(8);
    let master = flexsys::test_seed::TestSeed::new(
        "crashes_while_punching_and_compacting_recover_a_state_since_the_last_sync",
    );
    let mut rng = StdRng::seed_from_u64(master.get());
    for it in 0..iterations {
        let seed = rng.gen();
        let model = CrashModel::Reorder { seed: rng.gen() };
        let dry = Arc::new(FaultStorage::with_model(model));
        let total = {
            let r = run(seed, dry.clone());
            assert!(r.punched > 0, "the workload must punch free segments");
            assert!(r.compactions >= 4, "the workload must compact");
            dry.ops()
        };
        let at = rng.gen_range(total / 4..total);
        let storage = Arc::new(FaultStorage::with_model(model));
        storage.plan(at, Fault::Crash { tear: false });
        let r = run(seed, storage.clone());
        let image = Arc::new(storage.crash_image());
        let space = FlexSpace::open_with_storage(image, crash_opts())
            .unwrap_or_else(|e| panic!("iteration {it} (seed {seed}, crash at {at}/{total}): {e}"));
        space.check_invariants();
        let got = decode(&content(&space)).unwrap_or_else(|| {
            panic!("iteration {it} (crash at {at}/{total}): recovered bytes no state had")
        });
        assert!(
            r.hashes[r.floor..].contains(&hash(&got)),
            "iteration {it} (seed {seed}, crash at {at}/{total}): not a state since the last sync"
        );
        assert_eq!(space.check().unwrap(), Vec::<String>::new());
        // The recovered space compacts and still reads the same.
        space.compact(|_, _| {}).unwrap();
        assert_eq!(decode(&content(&space)).unwrap(), got);
    }
}
