//! ENOSPC and EIO at random storage operations: the error reaches a caller
//! (the one whose operation hit it, or the next one when background
//! maintenance hit it), the space then refuses with `Poisoned`, and
//! reopening recovers a state no older than the last sync.

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
    let mut failures = 0;
    for it in 0..300 {
        let storage = Arc::new(FaultStorage::new());
        let space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
        let fault = if rng.gen() { Fault::NoSpace } else { Fault::Io };
        storage.plan(rng.gen_range(0..40), fault);
        let mut model = Vec::new();
        let mut states = vec![Vec::new()];
        let mut floor = 0;
        let mut failed = false;
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
                Err(Error::Io { source, .. }) => {
                    let code = source.raw_os_error();
                    assert!(code == Some(libc::ENOSPC) || code == Some(libc::EIO));
                    failed = true;
                    // The failed operation may have been committed whole.
                    let mut post = model.clone();
                    apply_model(&mut post, &op);
                    states.push(post);
                    break;
                }
                Err(e) => panic!("iteration {it}: unexpected {e}"),
            }
        }
        if failed {
            failures += 1;
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
}
