//! Crash simulation on the fault-injecting backend: random operations and
//! syncs, a crash at a random storage operation (sometimes tearing the last
//! write), recovery, and the durability contract: the recovered content is
//! the model at a commit point no older than the last completed `sync()`.
//!
//! `CRASH_ITERATIONS` sets the number of crashes (default 200).

mod common;

use std::sync::Arc;

use common::{apply, apply_model, content, random_op};
use flexspace::{Fault, FaultStorage, FlexSpace, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn opts() -> Options {
    Options::new()
        .create(true)
        .commit_log_bytes(1024)
        .checkpoint_log_bytes(8 * 1024)
}

/// Runs the workload of `seed` on `storage`, returning the committed
/// candidates (model states), the index of the first candidate allowed after
/// the last completed sync, and whether an operation failed.
fn run(seed: u64, storage: Arc<FaultStorage>) -> (Vec<Vec<u8>>, usize, bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Vec::new();
    let mut candidates = vec![Vec::new()];
    let mut floor = 0;
    let space = match FlexSpace::open_with_storage(storage, opts()) {
        Ok(s) => s,
        Err(_) => return (candidates, floor, true),
    };
    floor = candidates.len() - 1;
    for _ in 0..80 {
        let op = random_op(&mut rng, model.len() as u64, 2500);
        let before = space.stats().commits;
        let pre = model.clone();
        apply_model(&mut model, &op);
        match apply(&space, &op) {
            Ok(()) => {
                let st = space.stats();
                if st.commits > before {
                    // A commit at the start of the operation (room making)
                    // holds the state before it; one at the end, the state
                    // after it.
                    candidates.push(pre);
                    if !st.uncommitted {
                        candidates.push(model.clone());
                    }
                }
                if matches!(op, common::Op::Sync) {
                    floor = candidates.len() - 1;
                }
            }
            Err(_) => {
                // The crash hit inside this operation: its start commit or
                // its end commit may have completed.
                candidates.push(pre);
                candidates.push(model.clone());
                std::mem::forget(space);
                return (candidates, floor, true);
            }
        }
    }
    std::mem::forget(space);
    (candidates, floor, false)
}

#[test]
fn every_crash_recovers_a_commit_no_older_than_the_last_sync() {
    let iterations: u64 = std::env::var("CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut rng = StdRng::seed_from_u64(0xC0FFEE);
    for it in 0..iterations {
        let seed = rng.gen();
        // A dry run counts the storage operations of the workload.
        let dry = Arc::new(FaultStorage::new());
        run(seed, dry.clone());
        let total = dry.ops();
        let at = rng.gen_range(0..total.max(1));
        let tear = rng.gen_bool(0.5);
        let storage = Arc::new(FaultStorage::new());
        storage.plan(at, Fault::Crash { tear });
        let (candidates, floor, failed) = run(seed, storage.clone());
        assert!(failed || !storage.crashed(), "iteration {it}");
        let image = Arc::new(storage.crash_image());
        let recovered = match FlexSpace::open_with_storage(image, opts()) {
            Ok(s) => content(&s),
            // A crash before the space's files were first made durable.
            Err(flexspace::Error::NotAFlexSpace(_)) if floor == 0 => Vec::new(),
            Err(e) => panic!("iteration {it} (seed {seed}, crash at {at}/{total}): {e}"),
        };
        let ok = candidates[floor..].contains(&recovered);
        assert!(
            ok,
            "iteration {it} (seed {seed}, crash at {at}/{total}, tear {tear}): recovered {} bytes, \
             not a commit point since the last sync ({} candidates from {floor})",
            recovered.len(),
            candidates.len()
        );
    }
}
