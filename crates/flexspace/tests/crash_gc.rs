//! Crashes while garbage collection relocates data: a small data file
//! (8 segments) under churn of 64 KiB blocks (overwrites, inserts and
//! removals), the reordering crash model, a crash at a random storage
//! operation, recovery, and the contract: the recovered content is the
//! state after some operation no older than the last completed sync.
//!
//! States are sequences of (block id, version); a block's bytes name its
//! id and version, so a recovered space is decoded back into a sequence
//! and compared by hash. `CRASH_ITERATIONS` sets the number of crashes
//! (default 6); `CRASH_SEED` the master seed (random otherwise, printed
//! on failure: `flexsys::test_seed`).

mod common;

use std::sync::Arc;

use common::blocks::{decode, hash, random_step};
use common::content;
use flexspace::{CrashModel, Fault, FaultStorage, FlexSpace, Options, SEGMENT_SIZE};
use flexsys::test_seed::{self, TestSeed};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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
        failed: false,
        gc_runs: 0,
        space: None,
    };
    let space = match FlexSpace::open_with_storage(storage, opts()) {
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
        }
    }
    r.gc_runs = space.stats().gc_runs;
    r.space = Some(space);
    r
}

#[test]
fn crashes_during_garbage_collection_recover_a_state_since_the_last_sync() {
    let master =
        TestSeed::new("crashes_during_garbage_collection_recover_a_state_since_the_last_sync");
    let mut rng = StdRng::seed_from_u64(master.get());
    for it in 0..test_seed::iterations(6) {
        let seed = rng.gen();
        let model = CrashModel::Reorder { seed: rng.gen() };
        let dry = Arc::new(FaultStorage::with_model(model));
        let (total, gc_runs) = {
            let r = run(seed, dry.clone());
            (dry.ops(), r.gc_runs)
        };
        assert!(gc_runs > 0, "the workload must collect garbage");
        // Crash in the second half, where collection runs.
        let at = rng.gen_range(total / 2..total);
        let storage = Arc::new(FaultStorage::with_model(model));
        storage.plan(at, Fault::Crash { tear: false });
        let r = run(seed, storage.clone());
        let image = Arc::new(storage.crash_image());
        drop(r.space);
        let space = FlexSpace::open_with_storage(image, opts())
            .unwrap_or_else(|e| panic!("iteration {it} (seed {seed}, crash at {at}/{total}): {e}"));
        space.check_invariants();
        let got = decode(&content(&space))
            .unwrap_or_else(|| panic!("iteration {it}: recovered bytes no state had"));
        assert!(
            r.hashes[r.floor..].contains(&hash(&got)),
            "iteration {it} (seed {seed}, crash at {at}/{total}): not a state since the last sync"
        );
        assert_eq!(space.check().unwrap(), Vec::<String>::new());
    }
}
