//! Crash simulation on the fault-injecting backend with the reordering
//! crash model (every write since its file's last sync independently kept,
//! lost or torn): random operations, syncs and checkpoints, a crash at a
//! random storage operation, recovery, and the durability contract: the
//! recovered content is the model after some operation no older than the
//! last completed `sync()` (commits happen between operations, on their
//! own too, so any such state may be the one recovered).
//!
//! `CRASH_ITERATIONS` sets the number of crashes of each test (default 200
//! and 50); the master seed is random unless `CRASH_SEED` sets it, and a
//! failure prints it (`flexsys::test_seed`).

mod common;

use std::sync::Arc;

use common::{apply, apply_model, content, random_op};
use flexspace::{CrashModel, Fault, FaultStorage, FlexSpace, Options};
use flexsys::test_seed::{self, TestSeed};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn opts() -> Options {
    Options::new()
        .create(true)
        .commit_log_bytes(1024)
        .checkpoint_log_bytes(8 * 1024)
}

/// What one run of a workload left behind.
struct Run {
    /// The model after creation and after each operation.
    states: Vec<Vec<u8>>,
    /// Index of the state of the last completed sync (creation counts).
    floor: usize,
    /// Whether an operation failed (the crash hit it).
    failed: bool,
    space: Option<FlexSpace>,
}

/// Runs the workload of `seed` on `storage`.
fn run(seed: u64, storage: Arc<FaultStorage>) -> Run {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Vec::new();
    let mut r = Run {
        states: vec![Vec::new()],
        floor: 0,
        failed: false,
        space: None,
    };
    let space = match FlexSpace::open_with_storage(storage, opts()) {
        Ok(s) => s,
        Err(_) => {
            r.failed = true;
            return r;
        }
    };
    for _ in 0..80 {
        let op = random_op(&mut rng, model.len() as u64, 2500);
        apply_model(&mut model, &op);
        let result = apply(&space, &op);
        // A failed operation may still have been committed whole.
        r.states.push(model.clone());
        match result {
            Ok(()) => {
                if matches!(op, common::Op::Sync | common::Op::Checkpoint) {
                    r.floor = r.states.len() - 1;
                }
            }
            Err(_) => {
                r.failed = true;
                break;
            }
        }
    }
    r.space = Some(space);
    r
}

#[test]
fn every_crash_recovers_a_state_no_older_than_the_last_sync() {
    let name = "every_crash_recovers_a_state_no_older_than_the_last_sync";
    let master = TestSeed::new(name);
    let mut rng = StdRng::seed_from_u64(master.get());
    let iterations = test_seed::iterations(200);
    let mut fired = 0u64;
    for it in 0..iterations {
        let seed = rng.gen();
        let model = CrashModel::Reorder { seed: rng.gen() };
        // A dry run counts the storage operations of the workload.
        let dry = Arc::new(FaultStorage::with_model(model));
        let total = {
            let r = run(seed, dry.clone());
            let n = dry.ops();
            drop(r.space);
            n
        };
        let at = rng.gen_range(0..total.max(1));
        let storage = Arc::new(FaultStorage::with_model(model));
        storage.plan(at, Fault::Crash { tear: false });
        let r = run(seed, storage.clone());
        fired += u64::from(storage.crashed());
        // A crash in the workload's own call fails it; one in a background
        // thread's work after the last call (a punch, a segment write)
        // fails nothing the workload sees.
        let in_background = storage
            .crash_thread()
            .is_some_and(|t| t.starts_with("flexspace-"));
        assert!(
            r.failed || !storage.crashed() || in_background,
            "iteration {it}: the crash hit the workload ({:?}) and no call failed",
            storage.crash_thread()
        );
        let image = Arc::new(storage.crash_image());
        // Dropping the space now cannot change the image.
        drop(r.space);
        let recovered = match FlexSpace::open_with_storage(image, opts()) {
            Ok(s) => {
                s.check_invariants();
                content(&s)
            }
            // A crash before the space's files were first made durable.
            Err(flexspace::Error::NotAFlexSpace(_)) if r.floor == 0 => Vec::new(),
            Err(e) => panic!("iteration {it} (seed {seed}, crash at {at}/{total}): {e}"),
        };
        assert!(
            r.states[r.floor..].contains(&recovered),
            "iteration {it} (seed {seed}, crash at {at}/{total}): recovered {} bytes, \
             not a state since the last sync ({} states from {})",
            recovered.len(),
            r.states.len(),
            r.floor
        );
    }
    report_fired(name, fired, iterations);
}

/// Prints how many planned crashes fired (run with `--nocapture` to see
/// it), and checks that nearly all did: a crash point is drawn from a dry
/// run's operations, and a run whose background threads interleave
/// differently may end before it.
fn report_fired(name: &str, fired: u64, iterations: u64) {
    eprintln!("{name}: {fired} of {iterations} planned crashes fired");
    assert!(
        fired * 10 >= iterations * 8,
        "{name}: only {fired} of {iterations} planned crashes fired"
    );
}

/// The old, gentler model (only synced bytes survive, sometimes half of
/// the last write) still holds too.
#[test]
fn synced_only_crashes_recover_a_state_no_older_than_the_last_sync() {
    let name = "synced_only_crashes_recover_a_state_no_older_than_the_last_sync";
    let master = TestSeed::new(name);
    let mut rng = StdRng::seed_from_u64(master.get());
    let iterations = test_seed::iterations(50);
    let mut fired = 0u64;
    for it in 0..iterations {
        let seed = rng.gen();
        let dry = Arc::new(FaultStorage::new());
        let total = {
            let r = run(seed, dry.clone());
            let n = dry.ops();
            drop(r.space);
            n
        };
        let at = rng.gen_range(0..total.max(1));
        let storage = Arc::new(FaultStorage::new());
        storage.plan(at, Fault::Crash { tear: rng.gen() });
        let r = run(seed, storage.clone());
        fired += u64::from(storage.crashed());
        let image = Arc::new(storage.crash_image());
        drop(r.space);
        let recovered = match FlexSpace::open_with_storage(image, opts()) {
            Ok(s) => {
                s.check_invariants();
                content(&s)
            }
            Err(flexspace::Error::NotAFlexSpace(_)) if r.floor == 0 => Vec::new(),
            Err(e) => panic!("iteration {it}: {e}"),
        };
        assert!(r.states[r.floor..].contains(&recovered), "iteration {it}");
    }
    report_fired(name, fired, iterations);
}
