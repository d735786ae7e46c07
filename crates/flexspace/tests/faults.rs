//! ENOSPC and EIO at random storage operations: the error reaches a caller
//! (the one whose operation hit it, or the next one when background
//! maintenance hit it). After EIO (or ENOSPC from the data file's sync) the
//! space refuses with `Poisoned`; after ENOSPC on a write it stays usable
//! (the failed operation applied or not), the next sync succeeds and
//! writes go on. Reopening recovers a state no older than the last sync.

mod common;

use std::sync::Arc;

use common::{apply, apply_model, content, random_op, Op};
use flexspace::{Error, Fault, FaultStorage, FlexSpace, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn opts() -> Options {
    Options::new()
        .create(true)
        .commit_log_bytes(1024)
        .checkpoint_log_bytes(8 * 1024)
}

#[test]
fn injected_errors_reach_the_caller_and_reopen_recovers() {
    let mut rng = StdRng::seed_from_u64(77);
    let (mut failures, mut usable) = (0, 0);
    for it in 0..300 {
        let storage = Arc::new(FaultStorage::new());
        let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
        let fault = if rng.gen() { Fault::NoSpace } else { Fault::Io };
        storage.plan(rng.gen_range(0..40), fault);
        let mut model = Vec::new();
        let mut states = vec![Vec::new()];
        let mut floor = 0;
        let mut failed = false;
        let mut poisoned = false;
        for _ in 0..60 {
            let op = random_op(&mut rng, model.len() as u64, 2000);
            match apply(&space, &op) {
                Ok(()) => {
                    apply_model(&mut model, &op);
                    states.push(model.clone());
                    if matches!(op, Op::Sync | Op::Checkpoint) {
                        floor = states.len() - 1;
                    }
                    // Reads always agree with what the caller was told.
                    assert_eq!(content(&space), model, "iteration {it}");
                }
                Err(Error::Io { source, .. }) if !failed => {
                    let code = source.raw_os_error();
                    assert!(code == Some(libc::ENOSPC) || code == Some(libc::EIO));
                    failed = true;
                    // The failed operation may have been applied whole.
                    let mut post = model.clone();
                    apply_model(&mut post, &op);
                    if code == Some(libc::ENOSPC) {
                        match space.sync() {
                            Ok(()) => {
                                // Usable: reads show the operation whole or
                                // not at all, now durable; writes go on.
                                let got = content(&space);
                                assert!(got == model || got == post, "iteration {it}");
                                model = got;
                                states.push(model.clone());
                                floor = states.len() - 1;
                                usable += 1;
                                continue;
                            }
                            Err(Error::Poisoned) => {}
                            Err(e) => panic!("iteration {it}: sync after ENOSPC: {e}"),
                        }
                    }
                    poisoned = true;
                    states.push(post);
                    break;
                }
                Err(e) => panic!("iteration {it}: unexpected {e}"),
            }
        }
        failures += usize::from(failed);
        if poisoned {
            // Poisoned: mutations refuse, reads still work.
            assert!(matches!(space.insert(0, b"x"), Err(Error::Poisoned)));
            assert!(matches!(space.sync(), Err(Error::Poisoned)));
        }
        drop(space);
        let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
        let got = content(&space);
        assert!(
            states[floor..].contains(&got),
            "iteration {it}: reopened content is not a state since the last sync"
        );
    }
    assert!(
        failures > 100,
        "only {failures} iterations hit an injected error"
    );
    assert!(
        usable > 20,
        "only {usable} of {failures} ENOSPC left the space usable"
    );
}

/// A device full from a random operation (`FaultStorage::fill_device`):
/// calls fail with ENOSPC, never `Poisoned`, each failed mutation applied
/// whole or not at all, and reads show exactly that; once the device is
/// freed, a sync commits everything (the commits that failed meanwhile
/// are made again) and the reopened space holds it.
#[test]
fn a_full_device_refuses_and_the_space_goes_on_once_freed() {
    let master = flexsys::test_seed::TestSeed::new("a_full_device_refuses");
    let mut rng = StdRng::seed_from_u64(master.get());
    let iterations = flexsys::test_seed::iterations(150);
    let mut refused = 0u64;
    for it in 0..iterations {
        let storage = Arc::new(FaultStorage::new());
        let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
        let mut model = Vec::new();
        for _ in 0..rng.gen_range(0..20) {
            let op = random_op(&mut rng, model.len() as u64, 2000);
            apply(&space, &op).unwrap();
            apply_model(&mut model, &op);
        }
        storage.fill_device(rng.gen_range(0..30));
        for _ in 0..60 {
            let op = random_op(&mut rng, model.len() as u64, 2000);
            match apply(&space, &op) {
                Ok(()) => apply_model(&mut model, &op),
                Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOSPC) => {
                    refused += 1;
                    let mut post = model.clone();
                    apply_model(&mut post, &op);
                    let got = content(&space);
                    assert!(got == model || got == post, "iteration {it}: half applied");
                    model = got;
                }
                Err(e) => panic!("iteration {it}: {op:?} on a full device: {e}"),
            }
            assert_eq!(content(&space), model, "iteration {it}");
        }
        storage.free_device();
        space
            .sync()
            .unwrap_or_else(|e| panic!("iteration {it}: sync once freed: {e}"));
        space.check_invariants();
        assert_eq!(content(&space), model, "iteration {it}");
        drop(space);
        let space = FlexSpace::open_with_storage(storage, opts()).unwrap();
        assert_eq!(content(&space), model, "iteration {it}: reopened");
    }
    assert!(refused >= iterations, "only {refused} refusals");
}
