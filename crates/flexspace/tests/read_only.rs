//! Read-only opens of a space: nothing changes on disk, loads racing a
//! writer's commits and checkpoints are retried into a consistent state,
//! and a reader's state stays readable while the writer overwrites,
//! collects and punches (its segments are pinned through the registry).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flexspace::{Error, FlexSpace, Options};

fn writer_opts() -> Options {
    Options::new()
        .create(true)
        .max_data_size(64 << 20)
        .checkpoint_log_bytes(64 << 10)
}

fn ro() -> Options {
    Options::new().read_only(true).max_data_size(64 << 20)
}

/// Every file of the space (not the registry) with its bytes and mtime.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>, std::time::SystemTime)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let m = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
                m.modified().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_read_only_open_changes_nothing_and_refuses_mutations() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let w = FlexSpace::open(dir, writer_opts()).unwrap();
        w.insert(0, b"hello world").unwrap();
        w.sync().unwrap();
        // No close: the log holds a commit the checkpoint does not.
        std::mem::forget(w);
    }
    let before = files(dir);
    let r = FlexSpace::open(dir, ro()).unwrap();
    assert!(r.is_read_only());
    let mut buf = [0u8; 11];
    r.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"hello world");
    assert!(matches!(r.insert(0, b"x"), Err(Error::ReadOnly)));
    assert!(matches!(r.collapse(0, 1), Err(Error::ReadOnly)));
    assert!(matches!(r.set_user_meta([1, 2, 3]), Err(Error::ReadOnly)));
    assert!(matches!(r.sync(), Err(Error::ReadOnly)));
    assert!(matches!(r.checkpoint(), Err(Error::ReadOnly)));
    assert!(matches!(r.maintain(), Err(Error::ReadOnly)));
    assert!(matches!(r.compact(|_, _| {}), Err(Error::ReadOnly)));
    assert!(matches!(r.punch_free_segments(), Err(Error::ReadOnly)));
    let reg = r.registration_file().unwrap().to_path_buf();
    assert!(reg.exists());
    r.close().unwrap();
    assert!(!reg.exists(), "the registration goes with the handle");
    assert_eq!(files(dir), before, "bytes and mtimes unchanged");
    // A directory that is not a space.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        FlexSpace::open(empty.path(), ro()),
        Err(Error::NotAFlexSpace(_))
    ));
}

/// The writer appends 8-byte counters (one a commit, a checkpoint every
/// 50) while readers open read-only again and again: every
/// state loaded is some commit, i.e. the counters 0..n, never a torn one.
#[test]
fn loads_racing_commits_and_checkpoints_are_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let w = Arc::new(FlexSpace::open(&dir, writer_opts()).unwrap());
    w.sync().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, stop) = (w.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < 20_000 {
                w.insert(n * 8, &n.to_le_bytes()).unwrap();
                w.set_user_meta([n + 1, 0, 0]).unwrap();
                w.sync().unwrap();
                if n % 50 == 49 {
                    w.checkpoint().unwrap();
                }
                n += 1;
            }
            n
        })
    };
    let mut last = 0;
    let mut checkpoints_seen = std::collections::BTreeSet::new();
    let mut opens = 0;
    while opens < 100 || last < 400 {
        opens += 1;
        let r = FlexSpace::open(&dir, ro()).unwrap();
        let len = r.len();
        assert_eq!(len % 8, 0);
        let count = len / 8;
        assert_eq!(r.user_meta()[0], count, "metadata words of the same commit");
        assert!(count >= last, "never back in time: {count} after {last}");
        last = count;
        let mut buf = vec![0u8; len as usize];
        r.read(0, &mut buf).unwrap();
        for (i, c) in buf.chunks_exact(8).enumerate() {
            assert_eq!(u64::from_le_bytes(c.try_into().unwrap()), i as u64);
        }
        checkpoints_seen.insert(r.commit_id().0);
        let (latest, words) = r.latest_commit().unwrap_or(((0, 0), [0; 3]));
        assert!(latest == (0, 0) || latest >= r.commit_id());
        assert!(latest == (0, 0) || words[0] >= count);
    }
    stop.store(true, Ordering::Relaxed);
    let n = writer.join().unwrap();
    assert!(n > 0);
    assert!(
        checkpoints_seen.len() > 1,
        "the loads never raced a checkpoint: {checkpoints_seen:?}"
    );
}

/// A reader's state maps segments the writer then empties (overwrites,
/// compaction, punching): the registry keeps them from reuse, so the
/// reader still reads its state; once the reader is gone they are freed.
#[test]
fn a_readers_segments_are_pinned_until_it_goes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let w = FlexSpace::open(dir, writer_opts()).unwrap();
    let old: Vec<u8> = (0..6 << 20).map(|i| (i % 251) as u8).collect();
    for (i, c) in old.chunks(64 << 10).enumerate() {
        w.insert((i * (64 << 10)) as u64, c).unwrap();
    }
    w.sync().unwrap();
    let r = FlexSpace::open(dir, ro()).unwrap();
    // The writer replaces everything, several times, and compacts.
    for round in 0..4u8 {
        let new = vec![round; 6 << 20];
        w.collapse(0, w.len()).unwrap();
        for (i, c) in new.chunks(64 << 10).enumerate() {
            w.insert((i * (64 << 10)) as u64, c).unwrap();
        }
        w.sync().unwrap();
        w.compact(|_, _| {}).unwrap();
    }
    let mut buf = vec![0u8; old.len()];
    r.read(0, &mut buf).unwrap();
    assert!(buf == old, "the reader's state was overwritten or punched");
    assert!(
        w.stats().reclaimable_segments > 0,
        "the reader's segments are held"
    );
    drop(r);
    // The next commit's scan lets them go.
    w.insert(0, b"x").unwrap();
    w.sync().unwrap();
    w.punch_free_segments().unwrap();
    assert_eq!(w.stats().reclaimable_segments, 0);
    w.close().unwrap();
}
