//! Online backup: a backup taken while writers write equals the snapshot
//! it was taken from, pair for pair, opens as a store, and stays whole
//! (batches all or nothing); destinations that would lose or mix data are
//! refused with nothing changed.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::every_pair_with_ttl;
use flexdb::{BackupMethod, BackupProgress, Db, Error, Options, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A store with tiny MemTables, so the committer commits (and collects
/// garbage) while a backup reads.
fn busy_store(dir: &Path) -> Db {
    let opts = Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
        .cache_bytes(1 << 20);
    Db::open(dir, opts).unwrap()
}

fn open_backup(dir: &Path) -> Db {
    Db::open(dir, Options::new()).unwrap()
}

/// Writes each writer makes at most (so that a slow machine does not
/// grow the store without bound while a snapshot pins its segments).
const WRITES_EACH: u64 = 200_000;

/// Writers that put, overwrite and delete random keys until stopped.
fn writers(db: &Arc<Db>, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<u64>> {
    (0..2u64)
        .map(|t| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) && n < WRITES_EACH {
                    let k = format!("key{:06}", rng.gen_range(0..30_000));
                    if rng.gen_range(0..5) == 0 {
                        db.delete(&k).unwrap();
                    } else {
                        let v = format!("{t}:{n}:{}", "v".repeat(rng.gen_range(0..200)));
                        db.put(&k, v).unwrap();
                    }
                    n += 1;
                }
                n
            })
        })
        .collect()
}

#[test]
fn a_backup_taken_while_writers_write_equals_its_snapshot() {
    backup_while_writers_write(BackupMethod::Physical);
}

#[test]
fn a_logical_backup_taken_while_writers_write_equals_its_snapshot() {
    backup_while_writers_write(BackupMethod::Logical);
}

fn backup_while_writers_write(method: BackupMethod) {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dest) = (tmp.path().join("src"), tmp.path().join("backup"));
    let db = Arc::new(busy_store(&src));
    for i in 0..20_000u32 {
        db.put(format!("key{:06}", i * 3 % 30_000), format!("first {i}"))
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let threads = writers(&db, &stop);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let snap = db.snapshot();
    let mut calls: Vec<BackupProgress> = Vec::new();
    let report = snap.backup_with(&dest, method, |p| calls.push(p)).unwrap();
    stop.store(true, Ordering::Relaxed);
    let written: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(written > 0);
    assert_eq!(report.dest, dest);
    assert!(report.disk_bytes > 0);
    assert_eq!(report.method, method);
    // Progress grows, and ends with all done.
    assert!(calls
        .windows(2)
        .all(|w| w[0].pairs <= w[1].pairs && w[0].bytes <= w[1].bytes));
    let last = calls.last().copied().unwrap_or_default();
    assert_eq!(last.bytes, last.total_bytes);
    assert!(!tmp.path().join("backup.backup-partial").exists());

    let backup = open_backup(&dest);
    let want: Vec<_> = snap.iter().map(Result::unwrap).collect();
    let got: Vec<_> = backup.iter().map(Result::unwrap).collect();
    assert_eq!(got.len() as u64, report.pairs);
    if method == BackupMethod::Logical {
        assert_eq!(
            report.bytes,
            want.iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>()
        );
    }
    assert!(got == want, "the backup differs from its snapshot");
    let check = backup.check().unwrap();
    assert!(check.is_ok(), "{check:?}");
    // It is a store like any other: written to and reopened.
    backup.put("after", "restore").unwrap();
    backup.close().unwrap();
    let again = open_backup(&dest);
    assert_eq!(
        again.get("after").unwrap().as_deref(),
        Some(&b"restore"[..])
    );
    assert_eq!(again.iter().count() as u64, report.pairs + 1);
}

#[test]
fn a_backup_of_a_store_being_written_in_batches_holds_whole_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let db = Arc::new(busy_store(&src));
    // A token moves among 1,000 keys, one batch a move, and every batch
    // also rewrites a block of 50 keys with the move's number.
    let mut b = WriteBatch::new();
    b.put(b"token/0000", b"here").unwrap();
    db.write(b).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let moved = Arc::new(AtomicU64::new(0));
    let mover = {
        let (db, stop, moved) = (db.clone(), stop.clone(), moved.clone());
        std::thread::spawn(move || {
            let mut at = 0u32;
            let mut moves = 0u64;
            while !stop.load(Ordering::Relaxed) && moves < 100_000 {
                let next = (at * 7 + 13) % 1000;
                moves += 1;
                let mut b = WriteBatch::new();
                b.delete(format!("token/{at:04}").as_bytes()).unwrap();
                b.put(format!("token/{next:04}").as_bytes(), b"here")
                    .unwrap();
                for j in 0..50 {
                    b.put(
                        format!("block/{j:02}").as_bytes(),
                        moves.to_string().as_bytes(),
                    )
                    .unwrap();
                }
                db.write(b).unwrap();
                moved.store(moves, Ordering::Relaxed);
                at = next;
            }
            moves
        })
    };
    for round in 0..3 {
        // Each backup after some batches more.
        let seen = moved.load(Ordering::Relaxed);
        while moved.load(Ordering::Relaxed) < seen + 10 && !mover.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let dest = tmp.path().join(format!("backup{round}"));
        let method = [BackupMethod::Physical, BackupMethod::Logical][round % 2];
        db.backup_with(&dest, method, |_| {}).unwrap();
        let backup = open_backup(&dest);
        let tokens = backup.prefix("token/").count();
        assert_eq!(tokens, 1, "round {round}: {tokens} tokens");
        let block: Vec<_> = backup
            .prefix("block/")
            .map(|p| p.unwrap().1)
            .collect::<Vec<_>>();
        assert!(
            block.len() == 50 && block.iter().all(|v| *v == block[0]),
            "round {round}: a batch split: {block:?}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    assert!(mover.join().unwrap() > 0);
}

#[test]
fn destinations_that_would_mix_or_lose_data_are_refused_with_nothing_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let db = busy_store(&src);
    db.put("k", "v").unwrap();
    let listing = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let invalid = |r: flexdb::Result<flexdb::BackupReport>, what: &str| match r {
        Err(Error::InvalidArgument(why)) => assert!(why.contains(what), "{why}"),
        other => panic!("expected InvalidArgument ({what}), got {other:?}"),
    };

    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("precious"), "keep me").unwrap();
    invalid(db.backup(&full), "not empty");
    assert_eq!(listing(&full), vec!["precious"]);
    assert_eq!(std::fs::read(full.join("precious")).unwrap(), b"keep me");

    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    invalid(db.backup(&file), "is a file");
    assert_eq!(std::fs::read(&file).unwrap(), b"x");

    let before = listing(&src);
    invalid(db.backup(src.join("inside")), "inside the store");
    invalid(db.backup(&src), "not empty");
    assert_eq!(listing(&src), before);

    let dest = tmp.path().join("dest");
    let staging = tmp.path().join("dest.backup-partial");
    std::fs::create_dir(&staging).unwrap();
    std::fs::write(staging.join("left"), "from a crash").unwrap();
    invalid(db.backup(&dest), "did not finish");
    assert!(!dest.exists());
    assert_eq!(listing(&staging), vec!["left"]);
    std::fs::remove_dir_all(&staging).unwrap();

    match db.backup(tmp.path().join("no/such/parent/dest")) {
        Err(Error::Io { .. }) => {}
        other => panic!("expected Io, got {other:?}"),
    }
    assert!(!tmp.path().join("no").exists());
    // Nothing of the refused backups is left beside them.
    assert_eq!(
        listing(tmp.path()),
        vec!["a-file", "full", "src"]
            .into_iter()
            .map(std::ffi::OsString::from)
            .collect::<Vec<_>>()
    );

    // An empty directory takes a backup; so does an empty store.
    let empty_dir = tmp.path().join("empty");
    std::fs::create_dir(&empty_dir).unwrap();
    let report = db.backup(&empty_dir).unwrap();
    assert_eq!(report.pairs, 1);
    assert_eq!(
        open_backup(&empty_dir).get("k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    let fresh = busy_store(&tmp.path().join("fresh"));
    let report = fresh.backup(tmp.path().join("fresh-backup")).unwrap();
    assert_eq!(report.pairs, 0);
    assert_eq!(
        open_backup(&tmp.path().join("fresh-backup")).iter().count(),
        0
    );
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_or_a_path_without_a_name_is_refused_and_x_dot_is_x() {
    let tmp = tempfile::tempdir().unwrap();
    let db = busy_store(&tmp.path().join("src"));
    db.put("k", "v").unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&empty, &link).unwrap();
    match db.backup(&link) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("symbolic link"), "{why}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(std::fs::read_dir(&empty).unwrap().next().is_none());
    match db.backup(tmp.path().join("..")) {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // `empty/.` names the empty directory: the backup goes there.
    let report = db.backup(empty.join(".")).unwrap();
    assert_eq!(report.pairs, 1);
    assert_eq!(
        open_backup(&empty).get("k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    assert!(!tmp.path().join("empty.backup-partial").exists());
}

#[test]
fn a_physical_backup_carries_what_only_the_memtables_hold() {
    // Range deletes, deletes, overwrites, deadlines and keyspaces, some
    // committed to the space and some only in MemTables when the
    // snapshot is taken: the backup reads as the snapshot did.
    let tmp = tempfile::tempdir().unwrap();
    let clock = flexdb::ManualClock::new();
    let opts = Options::new()
        .create_if_missing(true)
        .memtable_bytes(256 << 20)
        .clock(clock.clone());
    let db = Db::open(tmp.path().join("src"), opts.clone()).unwrap();
    let users = db.keyspace("users").unwrap();
    let hour = std::time::Duration::from_secs(3600);
    for i in 0..5_000u32 {
        db.put(format!("k{i:05}"), format!("space {i}")).unwrap();
        users.put(format!("u{i:05}"), format!("user {i}")).unwrap();
        if i % 7 == 0 {
            db.put_with_ttl(format!("t{i:05}"), "expiring", hour)
                .unwrap();
        }
    }
    db.flush().unwrap();
    // Now only in the MemTable:
    db.delete_range("k01000".."k02000").unwrap();
    db.put("k01500", "after the range delete").unwrap();
    db.delete("k03000").unwrap();
    db.put("k04000", "overwritten").unwrap();
    users.delete_range("u00000".."u00100").unwrap();
    users
        .put_with_ttl("u00050", "back, for a while", hour)
        .unwrap();
    db.persist("t00007").unwrap();
    db.put_with_ttl("fresh", "new", 2 * hour).unwrap();
    let logs = db.keyspace("logs").unwrap();
    logs.put("l", "only in a MemTable").unwrap();
    let snap = db.snapshot();
    // Written after the snapshot: not in the backup.
    db.put("k04000", "too late").unwrap();
    db.delete_range::<[u8], _>(..).unwrap();
    let dest = tmp.path().join("backup");
    let report = snap.backup(&dest).unwrap();
    assert_eq!(report.method, BackupMethod::Physical);
    let want = {
        // The snapshot's state, read through a store opened on it: take
        // it from the snapshot itself, keyspace by keyspace.
        let mut out = Vec::new();
        let mut names = vec!["default".to_string(), "logs".into(), "users".into()];
        names.sort();
        for name in names {
            let ks = db.keyspace(&name).unwrap();
            let s = snap.keyspace(&ks).unwrap();
            for pair in s.iter() {
                let (k, v) = pair.unwrap();
                out.push((name.clone(), k, v));
            }
        }
        out
    };
    drop(snap);
    let backup = Db::open(&dest, Options::new().clock(clock.clone())).unwrap();
    let got = every_pair_with_ttl(&backup);
    let got_pairs: Vec<_> = got
        .iter()
        .map(|(n, k, v, _)| (n.clone(), k.clone(), v.clone()))
        .collect();
    assert!(got_pairs == want, "the backup differs from its snapshot");
    assert!(backup.get("k01500").unwrap().is_some());
    assert!(backup.get("k01501").unwrap().is_none());
    assert!(backup.get("k03000").unwrap().is_none());
    assert_eq!(
        backup.get("k04000").unwrap().as_deref(),
        Some(&b"overwritten"[..])
    );
    // Deadlines came along, to the millisecond.
    assert_eq!(backup.ttl("fresh").unwrap(), Some(Some(2 * hour)));
    assert_eq!(backup.ttl("t00014").unwrap(), Some(Some(hour)));
    assert_eq!(backup.ttl("t00007").unwrap(), Some(None));
    let users_b = backup.keyspace("users").unwrap();
    assert_eq!(users_b.ttl("u00050").unwrap(), Some(Some(hour)));
    assert!(users_b.get("u00051").unwrap().is_none());
    // And they expire there: the expiry queue came along too.
    clock.advance(hour + std::time::Duration::from_secs(1));
    assert!(backup.get("t00014").unwrap().is_none());
    assert!(backup.remove_expired().unwrap() > 0);
    assert!(backup.check().unwrap().is_ok());
}

#[test]
fn a_backup_shares_blocks_where_the_file_system_can() {
    let Some(root) = std::env::var_os("FLEXDB_REFLINK_DIR") else {
        eprintln!("FLEXDB_REFLINK_DIR is not set: no file system that shares blocks to test on");
        return;
    };
    let tmp = tempfile::tempdir_in(&root).unwrap();
    let db = Db::open(
        tmp.path().join("src"),
        Options::new().create_if_missing(true),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    for i in 0..40_000u32 {
        let v: Vec<u8> = (0..500).map(|_| rng.gen()).collect();
        db.put(format!("key{i:08}"), v).unwrap();
    }
    db.flush().unwrap();
    let space = db.stats().space_bytes;
    let dest = tmp.path().join("backup");
    let report = db.backup(&dest).unwrap();
    assert!(
        report.shared_bytes >= space / 2,
        "{} bytes shared of {space}: {report:?}",
        report.shared_bytes
    );
    let backup = open_backup(&dest);
    assert!(backup
        .iter()
        .map(Result::unwrap)
        .eq(db.iter().map(Result::unwrap)));
}
