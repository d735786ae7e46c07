//! A snapshot reads the space as it was when taken, whatever the space
//! does afterwards: overwrites, inserts, collapses, and garbage collection
//! moving and freeing the segments the snapshot maps into. Snapshots share
//! the space's index nodes; the space copies a node block before it
//! writes into a shared one.

use flexspace::{FlexSpace, Options, SEGMENT_SIZE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Reads the whole snapshot (in pieces of random size) and compares.
fn assert_reads(snap: &flexspace::Snapshot, want: &[u8], rng: &mut StdRng) {
    assert_eq!(snap.len(), want.len() as u64);
    let mut at = 0usize;
    while at < want.len() {
        let n = rng.gen_range(1..=64 << 10).min(want.len() - at);
        let plan = snap.plan_read(at as u64, n as u64).unwrap();
        let mut buf = vec![0u8; n];
        assert_eq!(plan.read(&mut buf).unwrap().0, n);
        assert!(buf == want[at..at + n], "snapshot bytes at {at} changed");
        at += n;
    }
}

/// Applies a random mutation to the space and to `model`.
fn mutate(space: &FlexSpace, model: &mut Vec<u8>, rng: &mut StdRng, fill: u8) {
    let len = model.len();
    let data = vec![fill; rng.gen_range(1..8 << 10)];
    match rng.gen_range(0..3) {
        0 if len > 0 => {
            let at = rng.gen_range(0..len);
            let n = data.len().min(len - at);
            space.write(at as u64, &data[..n]).unwrap();
            model[at..at + n].copy_from_slice(&data[..n]);
        }
        1 if len > (16 << 20) => {
            let at = rng.gen_range(0..len - (8 << 10));
            let n = rng.gen_range(1..8 << 10);
            space.collapse(at as u64, n as u64).unwrap();
            model.drain(at..at + n);
        }
        _ => {
            let at = rng.gen_range(0..=len);
            space.insert(at as u64, &data).unwrap();
            model.splice(at..at, data.iter().copied());
        }
    }
}

#[test]
fn snapshots_keep_their_bytes_through_writes_and_garbage_collection() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new().create(true).max_data_size(48 * SEGMENT_SIZE);
    let space = FlexSpace::open(dir.path(), opts).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    // About 16 MiB live (collapses balance inserts there), spread over
    // segments that are written and no longer held in memory, so that the
    // snapshots read the data file where the collector frees segments.
    let mut model = Vec::new();
    for i in 0..3000 {
        mutate(&space, &mut model, &mut rng, (i % 251) as u8);
    }
    let gc_before = space.stats().gc_runs;
    // Snapshots taken along the way, each checked after every later round.
    let mut held: Vec<(flexspace::Snapshot, Vec<u8>)> = Vec::new();
    for round in 0..8u8 {
        held.push((space.snapshot().unwrap(), model.clone()));
        // Overwrites mostly, so that segments turn to garbage and the
        // collector moves what the snapshots map.
        for i in 0..6000 {
            mutate(
                &space,
                &mut model,
                &mut rng,
                round.wrapping_mul(31).wrapping_add(i as u8),
            );
        }
        for (snap, want) in &held {
            assert_reads(snap, want, &mut rng);
        }
        // Keep at most two alive, so freed space can be reused.
        if held.len() > 1 {
            drop(held.remove(0));
        }
    }
    assert!(
        space.stats().gc_runs > gc_before,
        "the test must make garbage collection run"
    );
    // The live space is what the model says.
    let mut buf = vec![0u8; model.len()];
    assert_eq!(space.read(0, &mut buf).unwrap(), model.len());
    assert!(buf == model);
    drop(held);
    space.close().unwrap();
}

/// A snapshot shares the space's index nodes: it costs (almost) nothing on
/// top of the space's index until the space changes, then the node blocks
/// the space rewrote; reads see the snapshot's state throughout.
#[test]
fn a_snapshot_shares_the_index_until_the_space_changes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new().create(true).max_data_size(48 * SEGMENT_SIZE);
    let space = FlexSpace::open(dir.path(), opts).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = Vec::new();
    // Small random inserts: many extents, several node blocks.
    for i in 0..60_000 {
        let at = rng.gen_range(0..=model.len());
        let data = vec![(i % 251) as u8; rng.gen_range(1..64)];
        space.insert(at as u64, &data).unwrap();
        model.splice(at..at, data);
    }
    let live = space.index_memory();
    assert_eq!(live.own_bytes, live.held_bytes);
    let snap = space.snapshot().unwrap();
    let shared = snap.index_memory();
    assert_eq!(shared.extents, live.extents);
    assert!(live.leaves > 1000, "the test needs a tree of many leaves");
    assert!(
        shared.own_bytes < live.held_bytes / 20,
        "an unchanged snapshot adds {} to {}",
        shared.own_bytes,
        live.held_bytes
    );
    assert_reads(&snap, &model, &mut rng);
    let before = model.clone();
    for i in 0..2000 {
        mutate(&space, &mut model, &mut rng, (i % 97) as u8);
    }
    let after = snap.index_bytes();
    assert!(
        after > shared.own_bytes + (1 << 20),
        "the space rewrote blocks: {after}"
    );
    assert_reads(&snap, &before, &mut rng);
    drop(snap);
    space.close().unwrap();
}
