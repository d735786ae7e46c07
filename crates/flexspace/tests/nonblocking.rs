//! Nothing waits for I/O it does not need: while a commit, a checkpoint or
//! a garbage-collection round is stuck in a `sync` (held by the test),
//! other threads' reads complete, and so do mutations that need no room;
//! and a segment is not reused while a read plan that saw it is pending.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::blocking::{BlockingStorage, Gate};
use common::content;
use flexspace::{FaultStorage, FlexSpace, Options, SEGMENT_SIZE};

fn blocking_space(opts: Options) -> (Arc<FlexSpace>, Arc<Gate>, Arc<FaultStorage>) {
    let inner = Arc::new(FaultStorage::new());
    let gate = Arc::new(Gate::default());
    let storage = Arc::new(BlockingStorage {
        inner: inner.clone(),
        gate: gate.clone(),
    });
    let space = FlexSpace::open_with_storage(storage, opts).unwrap();
    (Arc::new(space), gate, inner)
}

/// Runs `f` on another thread and fails the test if it does not finish in
/// time (it would be waiting for the held I/O).
fn completes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(v) => v,
        Err(_) => panic!("{what} waited for I/O held by another thread"),
    }
}

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add((i % 251) as u8)).collect()
}

#[test]
fn reads_and_mutations_proceed_while_a_commit_waits_for_its_sync() {
    let opts = Options::new().create(true).auto_maintenance(false);
    let (space, gate, _) = blocking_space(opts);
    let mut model = Vec::new();
    for i in 0..64u8 {
        let d = pattern(i, 3000);
        space.insert(0, &d).unwrap();
        model.splice(0..0, d);
    }
    space.sync().unwrap();
    // More data, the tail of it in a sealed segment and the open one.
    for i in 0..40u8 {
        let d = pattern(i.wrapping_mul(7), 128 << 10);
        let at = model.len() / 2;
        space.insert(at as u64, &d).unwrap();
        model.splice(at..at, d);
    }
    gate.close("data");
    let committer = {
        let space = space.clone();
        std::thread::spawn(move || space.sync())
    };
    gate.wait_blocked(1);
    // The commit is inside fsync(data) now, and stays there.
    let got = completes("a whole read", {
        let space = space.clone();
        move || content(&space)
    });
    assert_eq!(got, model);
    let (first, plan_len) = completes("a planned read", {
        let space = space.clone();
        move || {
            let plan = space.plan_read(10, 5000).unwrap();
            let mut b = vec![0u8; 5000];
            let (n, extents) = plan.read(&mut b).unwrap();
            assert!(extents >= 1);
            (b[..n].to_vec(), plan.len())
        }
    });
    assert_eq!(plan_len, 5000);
    assert_eq!(first, model[10..5010]);
    completes("a mutation, stats and queries", {
        let space = space.clone();
        move || {
            space.insert(0, b"during the commit").unwrap();
            let _ = space.stats();
            let _ = space.maintenance_due();
            let _ = space.commit_id();
            space.get_tag(0).unwrap();
        }
    });
    model.splice(0..0, b"during the commit".iter().copied());
    assert!(!committer.is_finished(), "the sync should still be held");
    gate.open();
    committer.join().unwrap().unwrap();
    assert_eq!(content(&space), model);
    space.sync().unwrap();
}

#[test]
fn reads_proceed_while_a_checkpoint_waits_for_its_sync() {
    let opts = Options::new().create(true).auto_maintenance(false);
    let (space, gate, storage) = blocking_space(opts.clone());
    let mut model = Vec::new();
    for i in 0..2000u32 {
        let d = pattern(i as u8, 100 + (i % 50) as usize);
        let at = (i as usize * 7919) % (model.len() + 1);
        space.insert(at as u64, &d).unwrap();
        model.splice(at..at, d);
    }
    space.sync().unwrap();
    gate.close("tree");
    let checkpointer = {
        let space = space.clone();
        std::thread::spawn(move || space.checkpoint())
    };
    gate.wait_blocked(1);
    for _ in 0..3 {
        let got = completes("a read during a checkpoint", {
            let space = space.clone();
            move || content(&space)
        });
        assert_eq!(got, model);
    }
    assert!(!checkpointer.is_finished());
    gate.open();
    checkpointer.join().unwrap().unwrap();
    assert_eq!(space.stats().checkpoints, 1);
    let id = space.commit_id();
    assert_eq!(id.1, 0, "a checkpoint restarts the commit numbering");
    drop(space);
    let space = FlexSpace::open_with_storage(storage, opts).unwrap();
    assert_eq!(content(&space), model);
    assert_eq!(space.commit_id(), id);
}

#[test]
fn reads_proceed_while_garbage_collection_waits_for_its_commit() {
    let opts = Options::new()
        .create(true)
        .auto_maintenance(false)
        .max_data_size(8 * SEGMENT_SIZE)
        .gc_garbage(0.3, 0.2);
    let (space, gate, _) = blocking_space(opts);
    let chunk = 256 << 10;
    let mut model = Vec::new();
    for i in 0..48u8 {
        let d = pattern(i, chunk);
        space.insert(model.len() as u64, &d).unwrap();
        model.extend_from_slice(&d);
    }
    // Remove every other chunk: half of each sealed segment is garbage.
    for i in (0..24).rev() {
        let at = 2 * i * chunk;
        space.collapse(at as u64, chunk as u64).unwrap();
        model.drain(at..at + chunk);
    }
    space.sync().unwrap();
    assert!(space.maintenance_due(), "{:?}", space.stats());
    gate.close("data");
    let collector = {
        let space = space.clone();
        std::thread::spawn(move || space.maintain())
    };
    gate.wait_blocked(1);
    let got = completes("a read during garbage collection", {
        let space = space.clone();
        move || content(&space)
    });
    assert_eq!(got, model);
    gate.open();
    collector.join().unwrap().unwrap();
    let st = space.stats();
    assert!(st.gc_runs > 0 && st.gc_relocated_bytes > 0, "{st:?}");
    assert!(st.garbage_ratio <= 0.3, "{st:?}");
    assert_eq!(content(&space), model);
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
}

#[test]
fn a_segment_is_not_reused_while_a_plan_that_saw_it_is_pending() {
    let opts = Options::new()
        .create(true)
        .auto_maintenance(false)
        .max_data_size(8 * SEGMENT_SIZE);
    let storage = Arc::new(FaultStorage::new());
    let space = FlexSpace::open_with_storage(storage.clone(), opts).unwrap();
    let seg = SEGMENT_SIZE as usize;
    let a = pattern(1, seg);
    // Segment 0 holds `a` exactly; segment 1 is opened by the next bytes.
    space.insert(0, &a).unwrap();
    space.insert(seg as u64, b"x").unwrap();
    // The commit waits for segment 0's write; reads now go to the file.
    space.sync().unwrap();
    let plan = space.plan_read(100, 4096).unwrap();
    space.collapse(0, seg as u64).unwrap();
    space.sync().unwrap();
    assert_eq!(space.stats().reclaimable_segments, 1, "held by the plan");
    // Enough new data to take every other free segment; the lowest free
    // one would be segment 0, were it free.
    let b = pattern(2, seg);
    for _ in 0..5 {
        space.insert(0, &b).unwrap();
    }
    space.sync().unwrap();
    let st = space.stats();
    assert_eq!(st.free_segments, 1, "{st:?}");
    assert_eq!(st.reclaimable_segments, 1, "{st:?}");
    let mut got = vec![0u8; 4096];
    assert_eq!(plan.read(&mut got).unwrap(), (4096, 1));
    assert_eq!(got, a[100..4196], "the plan read reused space");
    drop(plan);
    // Now it is released, and it is the next one taken.
    space.maintain().unwrap();
    let st = space.stats();
    assert_eq!(st.reclaimable_segments, 0, "{st:?}");
    space.insert(0, &b).unwrap();
    space.sync().unwrap();
    let data = storage.file_bytes("data").unwrap();
    assert_ne!(&data[100..4196], &a[100..4196], "segment 0 was not reused");
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
}
