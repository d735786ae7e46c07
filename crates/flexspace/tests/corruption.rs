//! Corruption: flipped or truncated bytes in the tree file, the log or a
//! header give a typed error or a clean recovery to a commit point, never a
//! panic and never content that was not committed.

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

#[test]
fn flipped_bytes_in_tree_and_log_are_detected() {
    let (image, states) = build();
    let mut rng = StdRng::seed_from_u64(4);
    for file in ["tree", "log"] {
        let bytes = image.file_bytes(file).unwrap();
        for _ in 0..150 {
            let copy = image.crash_image();
            let mut b = bytes.clone();
            let at = rng.gen_range(0..b.len());
            b[at] ^= 1 << rng.gen_range(0..8);
            copy.set_file_bytes(file, b);
            check(copy, &states, &format!("{file} flip at {at}"));
        }
    }
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
