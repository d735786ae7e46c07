//! Read-only opens (`Options::read_only`): every write method refuses with
//! `Error::ReadOnly` and nothing on disk changes; read-only handles beside
//! a writer in the same process read its state as of their open (its logs
//! included) and `catch_up` moves them on; snapshots taken before a
//! catch-up keep their state while the writer overwrites and compacts.
//! The multi-process tests are in `read_only_processes.rs`.

use std::path::Path;
use std::time::SystemTime;

use flexdb::{Db, Error, Isolation, Options, WriteBatch};

/// Small tables, so that the committer runs and logs rotate often.
fn writer_opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
        .cache_bytes(1 << 20)
}

fn ro() -> Options {
    Options::new().read_only(true).cache_bytes(1 << 20)
}

/// Every file of the store (the reader registry aside), with its bytes
/// and modification time; and the directory's own mtime.
fn snapshot_files(dir: &Path) -> (Vec<(String, Vec<u8>, SystemTime)>, SystemTime) {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
                e.metadata().unwrap().modified().unwrap(),
            )
        })
        .collect();
    v.sort();
    (v, std::fs::metadata(dir).unwrap().modified().unwrap())
}

fn key(i: u32) -> String {
    format!("key{i:06}")
}

#[test]
fn write_methods_refuse_and_nothing_on_disk_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let db = Db::open(dir, writer_opts()).unwrap();
        for i in 0..2000 {
            db.put(key(i), format!("v{i}")).unwrap();
        }
        db.keyspace("other").unwrap().put("a", "1").unwrap();
        db.close().unwrap();
    }
    // The registry's directory is made by the first reader: the one
    // change a read-only open makes (docs/FORMAT.md).
    drop(Db::open(dir, ro()).unwrap());
    let before = snapshot_files(dir);
    {
        let db = Db::open(dir, ro()).unwrap();
        assert!(db.is_read_only());
        assert_eq!(db.get(key(7)).unwrap().as_deref(), Some(&b"v7"[..]));
        assert_eq!(db.iter().count(), 2000);
        let ro_err = |r: Result<(), Error>| assert!(matches!(r, Err(Error::ReadOnly)), "{r:?}");
        ro_err(db.put("x", "y"));
        ro_err(db.delete(key(1)));
        ro_err(db.delete_range(key(0)..key(10)));
        let mut b = WriteBatch::new();
        b.put(b"x", b"y").unwrap();
        ro_err(db.write(b));
        ro_err(db.flush());
        ro_err(db.sync());
        ro_err(db.compact().map(|_| ()));
        let mut t = db.transaction(Isolation::Snapshot);
        t.put("x", "y").unwrap();
        ro_err(t.commit());
        assert!(!db
            .compare_and_swap("x", None, Some(b"y"))
            .is_ok_and(|done| done));
        ro_err(db.keyspace("new").map(|_| ()));
        ro_err(db.drop_keyspace("other").map(|_| ()));
        let other = db.keyspace("other").unwrap();
        assert_eq!(other.get("a").unwrap().as_deref(), Some(&b"1"[..]));
        ro_err(other.put("b", "2"));
        assert!(db.check().unwrap().problems.is_empty());
        let _ = db.stats();
        // A backup only reads.
        let copy = tempfile::tempdir().unwrap();
        db.backup(copy.path().join("b")).unwrap();
        db.close().unwrap();
    }
    assert_eq!(snapshot_files(dir), before, "bytes and mtimes unchanged");
    assert!(
        std::fs::read_dir(dir.join("readers"))
            .unwrap()
            .next()
            .is_none(),
        "the registration is gone with the handle"
    );
    // A store that does not exist is not created.
    let missing = tmp.path().join("missing");
    assert!(matches!(Db::open(&missing, ro()), Err(Error::NotFound(_))));
    assert!(!missing.exists());
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        Db::open(empty.path(), ro()),
        Err(Error::NotFound(_))
    ));
}

/// Two read-only handles and the writer in one process: each reads the
/// state as of its open, unflushed writes in the writer's logs included,
/// and `catch_up` brings one forward while the other stays.
#[test]
fn two_readers_and_a_writer_in_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let w = Db::open(dir, writer_opts()).unwrap();
    for i in 0..3000 {
        w.put(key(i), "one").unwrap();
    }
    let a = Db::open(dir, ro()).unwrap();
    for i in 0..3000 {
        w.put(key(i), "two").unwrap();
    }
    w.put("last", "x").unwrap();
    let b = Db::open(dir, ro()).unwrap();
    assert_eq!(a.iter().count(), 3000);
    assert!(a.iter().all(|kv| kv.unwrap().1 == b"one"));
    assert_eq!(b.get("last").unwrap().as_deref(), Some(&b"x"[..]));
    assert!(b.range(key(0)..key(3000)).all(|kv| kv.unwrap().1 == b"two"));
    let snap = a.snapshot();
    a.catch_up().unwrap();
    assert_eq!(a.get(key(5)).unwrap().as_deref(), Some(&b"two"[..]));
    assert_eq!(a.get("last").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(snap.get(key(5)).unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(snap.get("last").unwrap(), None);
    // A writable store has nothing to catch up with.
    w.catch_up().unwrap();
    w.close().unwrap();
    // With the writer closed (everything in the space, logs removed).
    a.catch_up().unwrap();
    assert_eq!(a.iter().count(), 3001);
}

/// Snapshots taken before a catch-up keep reading their state while the
/// writer overwrites everything again and again and compacts (which
/// relocates and punches the data file's segments): the old state's
/// segments stay pinned for as long as the snapshot lives.
#[test]
fn old_snapshots_survive_catch_up_overwrites_and_compaction() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let w = Db::open(dir, writer_opts().memtable_bytes(1 << 20)).unwrap();
    let n = 20_000;
    let val = |round: u32, i: u32| format!("{round:02}-{i:06}-{}", "x".repeat(40));
    for i in 0..n {
        w.put(key(i), val(0, i)).unwrap();
    }
    w.flush().unwrap();
    let r = Db::open(dir, ro()).unwrap();
    let old = r.snapshot();
    let mut held = vec![(0, old)];
    for round in 1..=4 {
        for i in 0..n {
            w.put(key(i), val(round, i)).unwrap();
        }
        w.flush().unwrap();
        w.compact().unwrap();
        r.catch_up().unwrap();
        assert_eq!(r.get(key(9)).unwrap(), Some(val(round, 9).into_bytes()));
        held.push((round, r.snapshot()));
        for (at, snap) in &held {
            let mut count = 0;
            for kv in snap.iter() {
                let (k, v) = kv.unwrap();
                let i: u32 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                assert_eq!(v, val(*at, i).into_bytes(), "snapshot of round {at}");
                count += 1;
            }
            assert_eq!(count, n);
        }
    }
    drop(held);
    drop(r);
    w.close().unwrap();
}

#[test]
fn a_format_1_store_is_refused_read_only() {
    // A store of format 1 is upgraded by any writable open: read-only, it
    // is refused, and left as it is.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    Db::open(dir, writer_opts()).unwrap().close().unwrap();
    let manifest = dir.join("MANIFEST");
    let mut m = std::fs::read(&manifest).unwrap();
    m[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&m[..16]);
    m[16..20].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&manifest, &m).unwrap();
    let e = Db::open(dir, ro()).unwrap_err();
    assert!(
        matches!(e, Error::NeedsUpgrade { version: 1, .. })
            && e.to_string().contains("a writable open upgrades it"),
        "{e}"
    );
    assert_eq!(std::fs::read(&manifest).unwrap(), m);
}

/// Damage is a typed error after the retries (a read-only open cannot
/// tell a torn read from damage until it sees it again and again), and
/// the files stay as they are; a path that is a file is not a store.
#[test]
fn damage_and_bad_paths_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    {
        let db = Db::open(&dir, writer_opts()).unwrap();
        for i in 0..500 {
            db.put(key(i), "v").unwrap();
        }
        db.close().unwrap();
    }
    let tree = dir.join("tree");
    let mut bytes = std::fs::read(&tree).unwrap();
    // Both header slots.
    bytes[100] ^= 0xff;
    bytes[2048 + 100] ^= 0xff;
    std::fs::write(&tree, &bytes).unwrap();
    let t = std::time::Instant::now();
    let e = Db::open(&dir, ro()).unwrap_err();
    assert!(
        matches!(&e, Error::Unstable { last, .. } if last.contains("corrupt")),
        "{e}"
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(std::fs::read(&tree).unwrap(), bytes);
    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(Db::open(&file, ro()), Err(Error::NotAStore(..))));
    // Bad options are refused before anything is read.
    assert!(matches!(
        Db::open(&dir, ro().memtable_bytes(1)),
        Err(Error::InvalidArgument(_))
    ));
}

fn manifest(version: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"FLEXDB\0\0");
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn a_format_2_store_opens_read_only_and_stays_format_2() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), writer_opts()).unwrap();
    db.put("a", "1").unwrap();
    db.close().unwrap();
    std::fs::write(tmp.path().join("MANIFEST"), manifest(2)).unwrap();
    let r = Db::open(tmp.path(), ro()).unwrap();
    assert_eq!(r.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    drop(r);
    assert_eq!(
        std::fs::read(tmp.path().join("MANIFEST")).unwrap(),
        manifest(2)
    );
}

/// Every sync of the writer rewrites its log's durable-length slot: a
/// load must not take that for a log taken over as a spare.
#[test]
fn read_only_opens_succeed_beside_a_writer_that_syncs_every_write() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let w = Db::open(
        &dir,
        writer_opts().memtable_bytes(64 << 20).sync_writes(true),
    )
    .unwrap();
    for i in 0..100u32 {
        w.put(key(i), "v").unwrap();
    }
    let w = std::sync::Arc::new(w);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let t = {
        let (w, stop) = (w.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                w.put(key(i % 1000), format!("v{i}")).unwrap();
                i += 1;
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let opened: Vec<_> = (0..3).map(|_| Db::open(&dir, ro()).map(|_| ())).collect();
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    for r in opened {
        assert!(r.is_ok(), "{r:?}");
    }
}

#[test]
fn a_backup_of_a_read_only_open_beside_a_writer_equals_the_readers_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("src");
    let writer = std::sync::Arc::new(Db::open(&dir, writer_opts()).unwrap());
    for i in 0..20_000 {
        writer.put(key(i), format!("v{i}")).unwrap();
    }
    let reader = Db::open(&dir, ro()).unwrap();
    let want: Vec<_> = reader.iter().map(Result::unwrap).collect();
    // The writer overwrites, deletes and commits while the reader backs
    // up what it read at its open.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (writer, stop) = (writer.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 200_000 {
                let k = key(i * 7 % 20_000);
                match i % 3 {
                    0 => writer.delete(&k).unwrap(),
                    _ => writer.put(&k, format!("new {i}")).unwrap(),
                }
                i += 1;
            }
        })
    };
    let dest = tmp.path().join("backup");
    let report = reader.backup(&dest).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
    assert_eq!(report.pairs, want.len() as u64);
    let backup = Db::open(&dest, Options::new()).unwrap();
    assert!(backup.iter().map(Result::unwrap).eq(want.into_iter()));
    assert!(backup.check().unwrap().is_ok());
}
