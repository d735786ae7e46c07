//! A snapshot reads the space as it was when taken, whatever the space
//! does afterwards: overwrites, inserts, collapses, and garbage collection
//! moving and freeing the segments the snapshot maps into, and so does a
//! snapshot whose index was copied into an ended one's.

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
    // From the third on, each copies its index into the one an ended
    // snapshot gave back (`snapshot_reusing`).
    let mut held: Vec<(flexspace::Snapshot, Vec<u8>)> = Vec::new();
    let mut spare = None;
    for round in 0..8u8 {
        held.push((space.snapshot_reusing(spare.take()).unwrap(), model.clone()));
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
            spare = Some(held.remove(0).0.into_index());
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

/// A snapshot's copy of the index holds the space's extents in full leaves:
/// less memory than the space's own index, which keeps room for inserts;
/// and a spare copied into again keeps its memory.
#[test]
fn a_snapshot_copies_the_index_into_full_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new().create(true).max_data_size(48 * SEGMENT_SIZE);
    let space = FlexSpace::open(dir.path(), opts).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = Vec::new();
    // Small random inserts: many extents, leaves split to about half.
    for i in 0..6000 {
        let at = rng.gen_range(0..=model.len());
        let data = vec![(i % 251) as u8; rng.gen_range(1..64)];
        space.insert(at as u64, &data).unwrap();
        model.splice(at..at, data);
    }
    let live = space.index_memory();
    let snap = space.snapshot().unwrap();
    let copy = snap.index_memory();
    assert_eq!(copy.extents, live.extents);
    assert!(live.leaves > 8, "the test needs a tree of many leaves");
    assert!(copy.leaf_fill > 0.95, "copy fill {}", copy.leaf_fill);
    assert!(
        copy.tree_bytes < live.tree_bytes,
        "copy {copy:?} live {live:?}"
    );
    assert_eq!(copy.free_bytes, 0);
    assert_reads(&snap, &model, &mut rng);
    // Copied again into its own memory: same bytes held, same reads.
    let spare = snap.into_index();
    let held = spare.memory_bytes();
    let again = space.snapshot_reusing(Some(spare)).unwrap();
    assert_eq!(again.index_bytes() as usize, held);
    assert_reads(&again, &model, &mut rng);
    drop(again);
    space.close().unwrap();
}
