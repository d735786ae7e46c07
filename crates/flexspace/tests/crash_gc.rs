//! Crashes while garbage collection relocates data: a small data file
//! (8 segments) under churn of 64 KiB blocks (overwrites, inserts and
//! removals), the reordering crash model, a crash at a random storage
//! operation, recovery, and the contract: the recovered content is the
//! state after some operation no older than the last completed sync.
//!
//! States are sequences of (block id, version); a block's bytes name its
//! id and version, so a recovered space is decoded back into a sequence
//! and compared by hash. Each run gives several crash images
//! (`FaultStorage::image_at`: what a crash before operation N would
//! leave, taken without stopping the run), each checked against the last
//! sync that returned before operation N (the space's background threads
//! make runs differ a little, so an image's point is not the dry run's
//! exactly, but always one of this run's operations). `CRASH_ITERATIONS`
//! sets the number of crashes
//! (default 6); `CRASH_SEED` the master seed (random otherwise, printed
//! on failure: `flexsys::test_seed`).

mod common;

use std::sync::Arc;

use common::blocks::{decode, hash, random_step};
use common::content;
use flexspace::{CrashModel, FaultStorage, FlexSpace, Options, SEGMENT_SIZE};
use flexsys::test_seed::{self, TestSeed};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Crash images taken from one run (see the module documentation).
const IMAGES_PER_RUN: u64 = 8;

fn opts() -> Options {
    Options::new()
        .create(true)
        .max_data_size(8 * SEGMENT_SIZE)
        .commit_log_bytes(8 << 10)
        .checkpoint_log_bytes(64 << 10)
        .gc_garbage(0.3, 0.2)
}

struct Run {
    hashes: Vec<u64>,
    floor: usize,
    /// `(operations so far, floor)` each time a sync returned.
    floors: Vec<(u64, usize)>,
    failed: bool,
    gc_runs: u64,
    space: Option<FlexSpace>,
}

fn run(seed: u64, storage: Arc<FaultStorage>) -> Run {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut state: Vec<(u32, u32)> = Vec::new();
    let mut r = Run {
        hashes: vec![hash(&state)],
        floor: 0,
        floors: Vec::new(),
        failed: false,
        gc_runs: 0,
        space: None,
    };
    let space = match FlexSpace::open_with_storage(storage.clone(), opts()) {
        Ok(s) => s,
        Err(_) => {
            r.failed = true;
            return r;
        }
    };
    let mut next_id = 0u32;
    for step in 0..700 {
        let result = random_step(&space, &mut rng, &mut state, &mut next_id, (300, 340, 0.1));
        r.hashes.push(hash(&state));
        if result.is_err() {
            r.failed = true;
            break;
        }
        if step % 97 == 96 {
            if space.sync().is_err() {
                r.failed = true;
                break;
            }
            r.floor = r.hashes.len() - 1;
            r.floors.push((storage.ops(), r.floor));
        }
    }
    r.gc_runs = space.stats().gc_runs;
    r.space = Some(space);
    r
}

#[test]
fn crashes_during_garbage_collection_recover_a_state_since_the_last_sync() {
    let name = "crashes_during_garbage_collection_recover_a_state_since_the_last_sync";
    let master = TestSeed::new(name);
    let mut rng = StdRng::seed_from_u64(master.get());
    let iterations = test_seed::iterations(6);
    let (mut planned, mut fired) = (0u64, 0u64);
    while planned < iterations {
        let seed = rng.gen();
        let model = CrashModel::Reorder { seed: rng.gen() };
        let dry = Arc::new(FaultStorage::with_model(model));
        let (total, gc_runs) = {
            let r = run(seed, dry.clone());
            (dry.ops(), r.gc_runs)
        };
        assert!(gc_runs > 0, "the workload must collect garbage");
        // Crashes in the second half, where collection runs; several
        // images of one run (`FaultStorage::image_at`).
        let mut points: Vec<u64> = (0..IMAGES_PER_RUN.min(iterations - planned))
            .map(|_| rng.gen_range(total / 2..total))
            .collect();
        points.sort_unstable();
        points.dedup();
        planned += points.len() as u64;
        let storage = Arc::new(FaultStorage::with_model(model));
        storage.image_at(&points, false);
        let r = run(seed, storage.clone());
        drop(r.space);
        for (at, image) in storage.take_images() {
            fired += 1;
            // The last sync that returned before the image was taken.
            let floor = r
                .floors
                .iter()
                .take_while(|(ops, _)| *ops <= at)
                .last()
                .map_or(0, |f| f.1);
            let ctx = format!("seed {seed}, crash at {at}/{total}");
            let space = FlexSpace::open_with_storage(Arc::new(image), opts())
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            space.check_invariants();
            let got = decode(&content(&space))
                .unwrap_or_else(|| panic!("{ctx}: recovered bytes no state had"));
            assert!(
                r.hashes[floor..].contains(&hash(&got)),
                "{ctx}: not a state since the last sync"
            );
            assert_eq!(space.check().unwrap(), Vec::<String>::new());
        }
    }
    // How many planned crashes fired (run with `--nocapture` to see it);
    // nearly all must, or the test tests little.
    eprintln!("{name}: {fired} of {planned} planned crashes fired");
    assert!(
        fired * 10 >= planned * 8,
        "only {fired} of {planned} planned crashes fired"
    );
}
