//! Corruption: a flipped bit in the tree file or the log is reported as
//! `Corrupt` naming the file, or (a bit the recovered state does not
//! depend on) recovers the last commit: never an earlier commit, never a
//! panic. A file cut short gives a typed error or a commit point (a log
//! cut at an entry boundary reads like a crash before those commits: see
//! docs/DESIGN.md, "Corruption").

mod common;

use std::sync::Arc;

use common::content;
use flexspace::{Error, FaultStorage, FlexSpace, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Commits only at the syncs (no background maintenance), so the synced
/// states are every state a commit can hold.
fn opts() -> Options {
    Options::new()
        .create(true)
        .auto_maintenance(false)
        .commit_log_bytes(1 << 20)
        .checkpoint_log_bytes(1 << 20)
}

/// A space with a checkpoint (a close and reopen) and then several synced
/// states in its log. Returns the durable image and every synced state.
fn build() -> (FaultStorage, Vec<Vec<u8>>) {
    let storage = Arc::new(FaultStorage::new());
    let mut space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let mut states = vec![Vec::new()];
    let mut model = Vec::new();
    for round in 0..6 {
        for _ in 0..20 {
            let d: Vec<u8> = (0..rng.gen_range(1..500)).map(|_| rng.gen()).collect();
            let at = rng.gen_range(0..=model.len());
            space.insert(at as u64, &d).unwrap();
            model.splice(at..at, d);
        }
        if round == 2 {
            space.close().unwrap();
            space = FlexSpace::open_with_storage(storage.clone(), opts()).unwrap();
        } else {
            space.sync().unwrap();
        }
        states.push(model.clone());
    }
    let image = storage.crash_image();
    // Dropping would checkpoint; the image is already taken either way.
    drop(space);
    (image, states)
}

fn check(storage: FaultStorage, states: &[Vec<u8>], what: &str) {
    match FlexSpace::open_with_storage(Arc::new(storage), Options::new()) {
        Ok(space) => {
            let got = content(&space);
            assert!(
                states.contains(&got),
                "{what}: recovered content that was never committed"
            );
            std::mem::forget(space);
        }
        Err(Error::Corrupt { .. } | Error::NotAFlexSpace(_)) => {}
        Err(e) => panic!("{what}: unexpected error {e}"),
    }
}

/// A flip is `Corrupt` naming `file`, or recovers exactly the last state.
fn check_flip(storage: FaultStorage, states: &[Vec<u8>], file: &str, what: &str) {
    match FlexSpace::open_with_storage(Arc::new(storage), Options::new()) {
        Ok(space) => {
            assert!(
                &content(&space) == states.last().unwrap(),
                "{what}: opened without an error but not at the last commit"
            );
            std::mem::forget(space);
        }
        Err(Error::Corrupt { file: f, .. }) => assert_eq!(f, file, "{what}"),
        Err(e) => panic!("{what}: unexpected error {e}"),
    }
}

#[test]
fn flipped_bytes_in_tree_and_log_are_detected() {
    let (image, states) = build();
    let mut rng = StdRng::seed_from_u64(4);
    let mut refused = 0;
    for file in ["tree", "log"] {
        let bytes = image.file_bytes(file).unwrap();
        for _ in 0..150 {
            let copy = image.crash_image();
            let mut b = bytes.clone();
            let at = rng.gen_range(0..b.len());
            b[at] ^= 1 << rng.gen_range(0..8);
            copy.set_file_bytes(file, b);
            let fails = FlexSpace::open_with_storage(Arc::new(copy.crash_image()), Options::new())
                .map(std::mem::forget)
                .is_err();
            refused += usize::from(fails && file == "log");
            check_flip(copy, &states, file, &format!("{file} flip at {at}"));
        }
    }
    // Every byte of this log is synced: no flip in it can pass unseen.
    assert_eq!(refused, 150);
}

#[test]
fn truncated_tree_and_log_are_detected() {
    let (image, states) = build();
    for file in ["tree", "log"] {
        let bytes = image.file_bytes(file).unwrap();
        for cut in (0..bytes.len()).step_by(97) {
            let copy = image.crash_image();
            copy.set_file_bytes(file, bytes[..cut].to_vec());
            check(copy, &states, &format!("{file} cut at {cut}"));
        }
    }
}

#[test]
fn an_intact_image_recovers_the_last_sync() {
    let (image, states) = build();
    let space = FlexSpace::open_with_storage(Arc::new(image), Options::new()).unwrap();
    assert_eq!(&content(&space), states.last().unwrap());
}
