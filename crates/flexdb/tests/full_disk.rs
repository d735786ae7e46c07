//! A full device: writes fail with `Error::NoSpace` (never another error,
//! never a stopped store), reads go on, nothing acknowledged is lost, and
//! once room is made writes resume without a reopen.
//!
//! `full_device_at_random_points` runs on `FaultStorage`, whose device
//! fills at a random operation (`fill_device`: every write needing a new
//! block fails with ENOSPC until `free_device`). A model of the
//! acknowledged writes checks, while the device is full, that every write
//! either succeeded or failed with `NoSpace` having written nothing, that
//! reads and scans return the model, and that `flush` fails with
//! `NoSpace`; after the device is freed, that every write succeeds and a
//! flush commits; after a close and reopen, that every acknowledged write
//! is there. At the first refused write it also takes the image a crash
//! there would leave (synced bytes only, or unsynced writes kept, lost or
//! torn at random) and checks that it recovers a prefix of the
//! acknowledged writes holding every one acknowledged before the last
//! successful `sync`.
//!
//! `real_small_file_system` does the same on a real, size-limited tmpfs
//! (the WAL mapped and preallocated, as in production): it is mounted by
//! the test when it can (root, `mount` present) and skipped with a printed
//! reason when it cannot.
//!
//! Seeds are random per run and printed on failure (`CRASH_SEED` replays
//! one); `CRASH_ITERATIONS` sets the iterations.

use std::collections::BTreeMap;
use std::sync::Arc;

use flexdb::{Db, Error, Options};
use flexspace::{CrashModel, FaultStorage};
use flexsys::test_seed::TestSeed;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .mmap_reads(false)
        .memtable_bytes(32 << 10)
        .cache_bytes(64 << 10)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// One write of the workload: a put (`Some`) or a delete.
#[derive(Clone, Debug)]
struct Write {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
}

fn random_write(rng: &mut StdRng, n: u32) -> Write {
    let k = key(rng.gen_range(0..600));
    let value = (rng.gen_range(0..8) != 0).then(|| {
        let len = rng.gen_range(1..300);
        let mut v = format!("write {n} ").into_bytes();
        v.resize(len.max(v.len()), b'a' + (n % 26) as u8);
        v
    });
    Write { key: k, value }
}

fn apply(db: &Db, w: &Write) -> flexdb::Result<()> {
    match &w.value {
        Some(v) => db.put(&w.key, v),
        None => db.delete(&w.key),
    }
}

fn apply_model(m: &mut Model, w: &Write) {
    match &w.value {
        Some(v) => m.insert(w.key.clone(), v.clone()),
        None => m.remove(&w.key),
    };
}

fn content(db: &Db) -> Model {
    db.iter().map(|kv| kv.expect("a scan")).collect()
}

/// Every key of `model` reads back, by get and by scan.
fn check_reads(db: &Db, model: &Model, what: &str) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).expect("a get").as_deref(),
            Some(&v[..]),
            "{what}: {}",
            String::from_utf8_lossy(k)
        );
    }
    assert!(
        content(db) == *model,
        "{what}: a scan differs from the model"
    );
}

/// Whether `got` is the state after some prefix of `acked` of at least
/// `floor` writes.
fn is_prefix_state(acked: &[Write], floor: usize, got: &Model) -> bool {
    let mut m = Model::new();
    for (i, w) in acked.iter().enumerate() {
        if i >= floor && m == *got {
            return true;
        }
        apply_model(&mut m, w);
    }
    m == *got
}

#[test]
fn full_device_at_random_points() {
    let master = TestSeed::new("full_device_at_random_points");
    let mut rng = StdRng::seed_from_u64(master.get());
    let iterations = flexsys::test_seed::iterations(24);
    let (mut refused_total, mut crash_checks) = (0u64, 0u64);
    for it in 0..iterations {
        let model_kind = if rng.gen() {
            CrashModel::SyncedOnly
        } else {
            CrashModel::Reorder { seed: rng.gen() }
        };
        let storage = Arc::new(FaultStorage::with_model(model_kind));
        let db = Db::open_with_storage(storage.clone(), "store", opts()).expect("open");
        let mut acked: Vec<Write> = Vec::new();
        let mut model = Model::new();
        let mut n = 0u32;
        // Some history first, committed and not.
        for _ in 0..rng.gen_range(200..1500) {
            let w = random_write(&mut rng, n);
            n += 1;
            apply(&db, &w).expect("a write before the device fills");
            apply_model(&mut model, &w);
            acked.push(w);
        }
        db.sync().expect("a sync before the device fills");
        let mut synced = acked.len();
        // The device fills at a random operation from now.
        storage.fill_device(rng.gen_range(0..200));
        let mut refused = 0u32;
        let mut crash_image = None;
        for _ in 0..30_000 {
            let w = random_write(&mut rng, n);
            n += 1;
            match apply(&db, &w) {
                Ok(()) => {
                    apply_model(&mut model, &w);
                    acked.push(w);
                }
                Err(Error::NoSpace(_)) => {
                    refused += 1;
                    if crash_image.is_none() {
                        crash_image = Some((storage.crash_image(), acked.len(), synced));
                    }
                }
                Err(e) => panic!("iteration {it}: a write failed with {e}"),
            }
            if rng.gen_range(0..50) == 0 {
                match db.sync() {
                    Ok(()) => synced = acked.len(),
                    Err(Error::NoSpace(_)) => {}
                    Err(e) => panic!("iteration {it}: a sync failed with {e}"),
                }
            }
            if refused >= 40 {
                break;
            }
        }
        assert!(
            refused > 0,
            "iteration {it}: no write refused ({} operations)",
            storage.ops()
        );
        refused_total += u64::from(refused);
        // Full: reads serve every acknowledged write; a flush cannot commit.
        check_reads(&db, &model, &format!("iteration {it}, device full"));
        match db.flush() {
            Err(Error::NoSpace(_)) => {}
            other => panic!("iteration {it}: a flush on a full device gave {other:?}"),
        }
        // A crash right after the first refused write.
        if let Some((image, acked_then, synced_then)) = crash_image {
            let db2 = Db::open_with_storage(Arc::new(image), "store", opts())
                .unwrap_or_else(|e| panic!("iteration {it}: reopen after the crash: {e}"));
            let got = content(&db2);
            assert!(
                is_prefix_state(&acked[..acked_then], synced_then, &got),
                "iteration {it}: after a crash at a refused write the store holds no \
                 prefix of the acknowledged writes with every synced one \
                 ({} pairs; {acked_then} acknowledged, {synced_then} synced)",
                got.len()
            );
            drop(db2);
            crash_checks += 1;
        }
        // Room again: writes resume without a reopen (a flush has the
        // committer try again at once, rather than within a second).
        storage.free_device();
        db.flush()
            .unwrap_or_else(|e| panic!("iteration {it}: a flush once there is room: {e}"));
        for _ in 0..rng.gen_range(100..600) {
            let w = random_write(&mut rng, n);
            n += 1;
            apply(&db, &w).unwrap_or_else(|e| panic!("iteration {it}: a write after room: {e}"));
            apply_model(&mut model, &w);
            acked.push(w);
        }
        db.flush()
            .unwrap_or_else(|e| panic!("iteration {it}: a flush after room: {e}"));
        check_reads(&db, &model, &format!("iteration {it}, after room"));
        db.close()
            .unwrap_or_else(|e| panic!("iteration {it}: close: {e}"));
        let db = Db::open_with_storage(storage, "store", opts()).expect("reopen");
        check_reads(&db, &model, &format!("iteration {it}, reopened"));
        let report = db
            .check()
            .unwrap_or_else(|e| panic!("iteration {it}: check: {e}"));
        assert!(report.problems.is_empty(), "iteration {it}: {report:?}");
    }
    assert!(
        refused_total >= iterations,
        "{refused_total} writes refused"
    );
    assert!(crash_checks >= iterations, "{crash_checks} crash images");
}

/// A tmpfs mounted for a test, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it) on a new
    /// directory, or says why it cannot.
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs: {} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a thread of the store that has not exited yet (segment
        // writers leave after an idle while) may still hold a file open.
        // Best effort: a failed unmount leaves a small tmpfs behind.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn real_small_file_system() {
    let fs = match Tmpfs::mount("64m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("real_small_file_system skipped: cannot mount a tmpfs ({why})");
            return;
        }
    };
    let master = TestSeed::new("real_small_file_system");
    let mut rng = StdRng::seed_from_u64(master.get());
    let store = fs.path().join("store");
    let opts = || {
        Options::new()
            .create_if_missing(true)
            .memtable_bytes(1 << 20)
    };
    let db = Db::open(&store, opts()).expect("open on the tmpfs");
    // Most of the file system goes to a file of another program's, which
    // is removed later to make room.
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![7u8; 40 << 20]).expect("the filler file");
    let mut model = Model::new();
    let (mut refused, mut i) = (0u32, 0u32);
    while refused < 20 {
        assert!(i < 200_000, "no write refused on a 64 MiB file system");
        let k = key(rng.gen_range(0..50_000));
        let v = vec![b'a' + (i % 26) as u8; rng.gen_range(200..2000)];
        i += 1;
        match db.put(&k, &v) {
            Ok(()) => {
                model.insert(k, v);
            }
            Err(Error::NoSpace(_)) => refused += 1,
            Err(e) => panic!("a write on a full file system failed with {e}"),
        }
        if i % 100 == 0 {
            match db.sync() {
                Ok(()) | Err(Error::NoSpace(_)) => {}
                Err(e) => panic!("a sync on a full file system failed with {e}"),
            }
        }
    }
    check_reads(&db, &model, "file system full");
    match db.flush() {
        Ok(()) | Err(Error::NoSpace(_)) => {}
        Err(e) => panic!("a flush on a full file system failed with {e}"),
    }
    // Room again: the store goes on without a reopen.
    std::fs::remove_file(&filler).expect("remove the filler");
    db.flush().expect("a flush once there is room");
    for n in 0..3000u32 {
        let k = key(rng.gen_range(0..50_000));
        let v = format!("after room {n}").into_bytes();
        db.put(&k, &v)
            .unwrap_or_else(|e| panic!("a write once there is room: {e}"));
        model.insert(k, v);
    }
    db.flush().expect("a flush after the writes");
    check_reads(&db, &model, "after room");
    db.close().expect("close");
    let db = Db::open(&store, opts()).expect("reopen");
    check_reads(&db, &model, "reopened");
    let report = db.check().expect("check");
    assert!(report.problems.is_empty(), "{report:?}");
    drop(db);
}
