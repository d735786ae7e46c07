//! Logs chained across rotations (`Wal::link`): a rotation no longer syncs
//! the old log under the writer lock, so a crash may keep a newer log's
//! records and lose the tail of the log before it. Recovery must then
//! return a prefix of the writes (the newer log's writes follow a gap and
//! are dropped), and every write acknowledged as durable (a synced write,
//! a `sync()`) must survive, which a sync of the newer log guarantees by
//! syncing the older ones first.
//!
//! The first test builds such an image on the fault-injecting storage: the
//! store's durable state after many rotations, every log's bytes as
//! written, and one log (not the newest) cut inside its last record. The
//! second crashes right after acknowledged syncs while older logs are not
//! synced yet (MemTables this small get no syncing thread at rotation, and
//! the committer, which syncs a log before committing it, is held up by a
//! slow data file): only the sync of the newest log made them durable.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flexdb::{Db, Options, WriteOptions};
use flexspace::{FaultStorage, Storage};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(2048)
        .max_frozen_memtables(64)
        .cache_bytes(32 << 10)
}

fn content(db: &Db) -> Model {
    db.iter().map(|kv| kv.unwrap()).collect()
}

/// Bytes of a log's header (docs/FORMAT.md).
fn flexdb_header() -> usize {
    48
}

fn wal_names(st: &FaultStorage) -> Vec<String> {
    let mut names: Vec<String> = st
        .list_files()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("wal-") && n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

/// Writes `n` puts, syncs, and writes `n` more; returns the model after
/// each write, the index of the last acknowledged one and the logs that
/// existed at the sync.
fn write_many(
    db: &Db,
    storage: &FaultStorage,
    rng: &mut StdRng,
    n: usize,
) -> (Vec<Model>, usize, Vec<String>) {
    let mut model = Model::new();
    let mut states = vec![model.clone()];
    for i in 0..n {
        let k = format!("k{:04}", rng.gen_range(0..400)).into_bytes();
        let v = vec![i as u8; rng.gen_range(500..2000)];
        db.put(&k, &v).unwrap();
        model.insert(k, v);
        states.push(model.clone());
    }
    db.sync().unwrap();
    let floor = states.len() - 1;
    let at_sync = wal_names(storage);
    for i in 0..n {
        let k = format!("k{:04}", rng.gen_range(0..400)).into_bytes();
        let v = vec![(i + 7) as u8; rng.gen_range(500..2000)];
        db.put(&k, &v).unwrap();
        model.insert(k, v);
        states.push(model.clone());
    }
    (states, floor, at_sync)
}

#[test]
fn a_torn_older_log_drops_the_newer_logs_and_recovers_a_prefix() {
    let mut rng = StdRng::seed_from_u64(36);
    let mut tried = 0;
    for round in 0..12 {
        // The buffered log path: a log's file then ends at its last
        // record (a mapped log's file has a preallocated zero tail), so
        // cutting its end cuts its last record.
        let storage = Arc::new(FaultStorage::new().without_mappings());
        // The committer's first commit waits on the data file: the logs
        // stay to be replayed.
        storage.slow_syncs("data", Duration::from_millis(400));
        // Logs of 96 KiB: a log on this storage buffers its records until
        // a sync or 64 KiB, so each writes some to its file.
        let big = opts().memtable_bytes(96 << 10);
        let db = Db::open_with_storage(storage.clone(), "chain", big.clone()).unwrap();
        let (states, floor, at_sync) = write_many(&db, &storage, &mut rng, 300);
        // The durable state, with every log as written (a device that
        // wrote them all, as it may).
        let image = storage.crash_image();
        let logs = wal_names(&image);
        for name in &logs {
            image.set_file_bytes(name, storage.file_bytes(name).unwrap());
        }
        drop(db);
        // Cut one log that has a successor inside its last record: a log
        // made after the sync (its writes were never acknowledged as
        // durable), whose records are in the file (a log on this storage
        // buffers them until a sync or 64 KiB).
        let written: Vec<&String> = logs[..logs.len() - 1]
            .iter()
            .filter(|n| !at_sync.contains(n))
            .filter(|n| image.file_bytes(n).unwrap().len() > flexdb_header() + 40)
            .collect();
        if written.is_empty() {
            continue;
        }
        let victim = written[written.len() - 1 - rng.gen_range(0..written.len().min(2))];
        let mut bytes = image.file_bytes(victim).unwrap();
        let cut = bytes.len() - rng.gen_range(1..8);
        bytes.truncate(cut);
        image.set_file_bytes(victim, bytes);
        let image = Arc::new(image);
        let db = Db::open_with_storage(image.clone(), "chain", big.clone())
            .unwrap_or_else(|e| panic!("round {round}: reopen: {e}"));
        let got = content(&db);
        let at = states.iter().position(|s| *s == got);
        assert!(
            at.is_some_and(|i| i >= floor),
            "round {round}: cut {victim}: recovered state {at:?}, not a prefix from {floor}"
        );
        // Not every write survived: the newer logs were dropped.
        assert!(at < Some(states.len() - 1), "round {round}");
        tried += 1;
        // The store goes on, and reopens with the same content.
        db.put(b"after", b"crash").unwrap();
        db.close().unwrap();
        let db = Db::open_with_storage(image, "chain", big).unwrap();
        let mut want = got;
        want.insert(b"after".to_vec(), b"crash".to_vec());
        assert_eq!(content(&db), want, "round {round}: after reopen");
    }
    assert!(tried >= 8, "only {tried} rounds had logs to cut");
}

#[test]
fn acknowledged_syncs_survive_with_older_logs_unsynced() {
    let mut rng = StdRng::seed_from_u64(37);
    for round in 0..30 {
        let storage = Arc::new(FaultStorage::new());
        storage.slow_syncs("data", Duration::from_millis(400));
        let db = Db::open_with_storage(storage.clone(), "chain", opts()).unwrap();
        let mut model = Model::new();
        let mut states = vec![model.clone()];
        let n = rng.gen_range(20..200);
        let mut floor = 0;
        for i in 0..n {
            let k = format!("k{:04}", rng.gen_range(0..400)).into_bytes();
            let v = vec![i as u8; rng.gen_range(10..120)];
            let sync = i == n - 1 || rng.gen_ratio(1, 40);
            db.put_opt(&k, &v, &WriteOptions { sync }).unwrap();
            model.insert(k, v);
            states.push(model.clone());
            if sync {
                floor = states.len() - 1;
            }
        }
        // The crash comes right after the last synced write returned.
        let image = Arc::new(storage.crash_image());
        drop(db);
        let db = Db::open_with_storage(image, "chain", opts())
            .unwrap_or_else(|e| panic!("round {round}: reopen: {e}"));
        let got = content(&db);
        let at = states.iter().position(|s| *s == got);
        assert!(
            at.is_some_and(|i| i >= floor),
            "round {round}: recovered state {at:?}, the last synced is {floor}"
        );
    }
}
