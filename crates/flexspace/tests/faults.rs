//! ENOSPC and EIO at random storage operations: the error reaches the
//! caller, the space then either keeps working or refuses with `Poisoned`,
//! and reopening recovers a commit point no older than the last sync.

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
        let mut committed = vec![Vec::new()];
        let mut floor = 0;
        let mut failed = false;
        for _ in 0..60 {
            let op = random_op(&mut rng, model.len() as u64, 2000);
            let pre = model.clone();
            let before = space.stats().commits;
            match apply(&space, &op) {
                Ok(()) => {
                    apply_model(&mut model, &op);
                    let st = space.stats();
                    if st.commits > before {
                        committed.push(pre);
                        if !st.uncommitted {
                            committed.push(model.clone());
                        }
                    }
                    if matches!(op, Op::Sync) {
                        floor = committed.len() - 1;
                    }
                    // Reads always agree with what the caller was told.
                    assert_eq!(content(&space), model, "iteration {it}");
                }
                Err(Error::Io { source, .. }) => {
                    let code = source.raw_os_error();
                    assert!(code == Some(libc::ENOSPC) || code == Some(libc::EIO));
                    failed = true;
                    committed.push(pre.clone());
                    let mut post = pre;
                    apply_model(&mut post, &op);
                    committed.push(post);
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
            committed[floor..].contains(&got) || (!failed && got == model),
            "iteration {it}: reopened content is not a commit point since the last sync"
        );
    }
    assert!(
        failures > 100,
        "only {failures} iterations hit an injected error"
    );
}
