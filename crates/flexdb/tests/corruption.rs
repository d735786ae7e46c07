//! Corruption: flipped or truncated bytes in any file of a store (manifest,
//! write-ahead logs, the space's data, tree and log) give a typed error that
//! names the file, or a store whose content is exactly the original (the
//! damage hit bytes nothing refers to), never different content.

mod common;

use std::sync::Arc;

use common::fill::{create, fill, power_loss, read_all, small_opts, Model};
use flexdb::{Db, Error, Options};
use flexspace::{FaultStorage, Storage};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn opts() -> Options {
    small_opts().create_if_missing(false)
}

/// The value every store here starts with for its `nth` write (8 to 99
/// bytes).
fn value(_: u32, nth: u32) -> Vec<u8> {
    format!("value-{nth}-")
        .repeat(1 + (nth % 9) as usize)
        .into_bytes()
}

/// A closed store with pairs in its space and, with `pending`, synced writes
/// left in its write-ahead log (the store was dropped without a flush),
/// made with `Options::strict_wal_sync` as `strict` says. Returns the
/// storage, the full content, and the content without the last write
/// (without `strict_wal_sync`, the records of a log's last sync cannot be
/// told from a crash's torn tail when nothing was written after them; see
/// docs/DESIGN.md, "Corruption").
fn build_with(pending: bool, strict: bool) -> (FaultStorage, Model, Model) {
    let storage = FaultStorage::new();
    let db = create(&storage, opts());
    let mut model = fill(&db, 3000, value);
    db.close().unwrap();
    let mut before_last = model.clone();
    if !pending {
        return (storage.crash_image(), model, before_last);
    }
    // Reopen, write a little more and stop without flushing: the writes
    // stay in the log (synced), to be replayed.
    let reopen = opts().strict_wal_sync(strict);
    let db = Db::open_with_storage(Arc::new(storage.clone()), "store", reopen).unwrap();
    for i in 0..40u32 {
        let k = format!("late{i:03}").into_bytes();
        db.put_opt(&k, b"v", &flexdb::WriteOptions { sync: true })
            .unwrap();
        before_last = model.clone();
        model.insert(k, b"v".to_vec());
    }
    (power_loss(&storage, db), model, before_last)
}

/// Opens and reads everything, then checks; `Ok` only if every read
/// succeeded and the check passed.
fn read_checked(storage: FaultStorage, model: &Model) -> Result<Model, Error> {
    let db = Db::open_with_storage(Arc::new(storage), "store", opts())?;
    let all = read_all(&db, model)?;
    let report = db.check()?;
    if !report.is_ok() {
        return Err(Error::Corrupt {
            file: "check".into(),
            detail: report.problems.join("; "),
        });
    }
    Ok(all)
}

fn names_a_file(e: &Error) -> bool {
    match e {
        Error::Corrupt { file, .. } | Error::Io { file, .. } => !file.as_os_str().is_empty(),
        _ => false,
    }
}

fn damage_each_file(pending: bool, trials_per_file: usize) {
    let (clean, model, _) = build_with(pending, true);
    assert_eq!(read_checked(clean.crash_image(), &model).unwrap(), model);
    let mut rng = StdRng::seed_from_u64(if pending { 2 } else { 1 });
    let files = clean.list_files().unwrap();
    for name in files.iter().filter(|n| *n != "lock") {
        let bytes = clean.file_bytes(name).unwrap();
        if bytes.is_empty() {
            continue;
        }
        for t in 0..trials_per_file {
            let damaged = clean.crash_image();
            let mut b = bytes.clone();
            let how = if t % 4 == 3 {
                let cut = rng.gen_range(0..b.len());
                b.truncate(cut);
                format!("truncated to {cut}")
            } else {
                let at = rng.gen_range(0..b.len());
                b[at] ^= 1 << rng.gen_range(0..8);
                format!("bit flipped at {at}")
            };
            damaged.set_file_bytes(name, b);
            match read_checked(damaged, &model) {
                Ok(got) => assert!(
                    got == model,
                    "{name} {how}: the store opened with different content ({} pairs of {})",
                    got.len(),
                    model.len()
                ),
                Err(e) => assert!(
                    names_a_file(&e) || matches!(e, Error::NotAStore(..)),
                    "{name} {how}: {e}"
                ),
            }
        }
    }
}

/// The records of the last sync before a crash: damage to them reads as
/// a torn tail by default (the store opens without that write), and is
/// reported with `Options::strict_wal_sync`, whose second fsync made the
/// sync's length durable.
#[test]
fn damage_to_the_last_synced_write_is_reported_with_strict_wal_sync() {
    for strict in [false, true] {
        let (clean, model, before_last) = build_with(true, strict);
        let wal = clean
            .list_files()
            .unwrap()
            .into_iter()
            .filter(|n| n.starts_with("wal-") && n.ends_with(".log"))
            .max()
            .expect("a write-ahead log");
        let bytes = clean.file_bytes(&wal).unwrap();
        let end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
        // The last record is a 7-byte head and a batch of one short put.
        for back in 1..=10 {
            let damaged = clean.crash_image();
            let mut b = bytes.clone();
            b[end - back] ^= 0x04;
            damaged.set_file_bytes(&wal, b);
            match (strict, read_checked(damaged, &model)) {
                (true, Err(Error::Corrupt { file, .. })) => {
                    assert!(file.ends_with(&wal), "byte {}: {file:?}", end - back)
                }
                (false, Ok(got)) => assert!(got == before_last, "byte {}", end - back),
                (strict, got) => panic!(
                    "strict {strict}, byte {}: {:?}",
                    end - back,
                    got.map(|m| m.len())
                ),
            }
        }
    }
}

#[test]
fn damage_to_a_closed_store_is_reported_not_served() {
    damage_each_file(false, 60);
}

#[test]
fn damage_to_a_store_with_logged_writes_is_reported_not_served() {
    damage_each_file(true, 60);
}

/// Round `round` of the space-log tests: a batch of 200 puts over 1000
/// keys, then a flush, which commits the MemTable to the space (the log
/// gains a batch) and removes the write-ahead log that held the writes.
fn write_round(db: &Db, model: &mut Model, round: u32) {
    let mut batch = flexdb::WriteBatch::new();
    for i in 0..200u32 {
        let k = format!("key{:05}", (i * 7919 + round) % 1000).into_bytes();
        let v = format!("r{round}-{i}").into_bytes();
        batch.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.write(batch).unwrap();
    db.flush().unwrap();
}

/// The space's logical log of a store stopped while writers committed
/// (no close, so its batches are not yet in a checkpoint): every flipped
/// bit in it is `Corrupt` naming the log. Rolling back to the commit
/// before the flip would serve a state that never existed: the
/// write-ahead logs of the lost commits are gone.
#[test]
fn a_flip_in_the_space_log_is_reported_never_rolled_back() {
    let storage = FaultStorage::new();
    let db = create(&storage, opts());
    let mut model = Model::new();
    for round in 0..8u32 {
        write_round(&db, &mut model, round);
    }
    let image = power_loss(&storage, db);
    let log = image
        .file_bytes("store/log")
        .or_else(|| image.file_bytes("log"));
    let (name, bytes) = match log {
        Some(b) if image.file_bytes("store/log").is_some() => ("store/log", b),
        Some(b) => ("log", b),
        None => panic!("no space log in {:?}", image.list_files().unwrap()),
    };
    assert!(
        bytes.len() > 64 * 32,
        "the log holds the commits: {} bytes",
        bytes.len()
    );
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..40 {
        let damaged = image.crash_image();
        let mut b = bytes.clone();
        let at = rng.gen_range(0..b.len());
        b[at] ^= 1 << rng.gen_range(0..8);
        damaged.set_file_bytes(name, b);
        match read_checked(damaged, &model) {
            Err(Error::Corrupt { file, .. }) => assert!(file.ends_with("log"), "{file:?}"),
            Err(e) => panic!("flip at {at}: expected corruption naming the log, got {e}"),
            Ok(got) => panic!(
                "flip at {at}: the store opened ({} pairs of {}, same content: {})",
                got.len(),
                model.len(),
                got == model
            ),
        }
    }
    assert_eq!(read_checked(image, &model).unwrap(), model);
}

/// The space's logical log cut back at an entry boundary (here: replaced by
/// what it held at an earlier commit) reads as a valid older state; the
/// write-ahead logs of the commits it lost are gone. Recovery sees that
/// the oldest log left follows a generation the space never committed and
/// whose log is missing, and reports it instead of serving the older
/// state. Also when the store was reopened in between (the log made at
/// an open links to what recovery took).
#[test]
fn a_space_log_cut_back_to_an_earlier_commit_is_reported() {
    let mut storage = FaultStorage::new();
    let log_name = "log";
    let mut model = Model::new();
    let mut earlier: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut db = Db::open_with_storage(
        Arc::new(storage.clone()),
        "store",
        opts().create_if_missing(true),
    )
    .unwrap();
    for round in 0..8u32 {
        if round == 4 {
            // Stopped without a close (no checkpoint) and reopened: the
            // log made at this open follows what recovery found.
            std::mem::forget(db);
            storage = storage.crash_image();
            db = Db::open_with_storage(Arc::new(storage.clone()), "store", opts()).unwrap();
        }
        earlier.push((round, storage.file_bytes(log_name).unwrap_or_default()));
        write_round(&db, &mut model, round);
    }
    let image = storage.crash_image();
    std::mem::forget(db);
    assert_eq!(read_checked(image.crash_image(), &model).unwrap(), model);
    let now = image.file_bytes(log_name).expect("the space's log");
    let (mut cut, mut after_reopen) = (0, 0);
    for (round, bytes) in earlier {
        if bytes.len() >= now.len() || !now.starts_with(&bytes) {
            // (A checkpoint rewrote the log: not a cut.)
            continue;
        }
        cut += 1;
        after_reopen += usize::from(round >= 4);
        let damaged = image.crash_image();
        damaged.set_file_bytes(log_name, bytes);
        match read_checked(damaged, &model) {
            Err(Error::Corrupt { file, detail }) => assert!(
                file.ends_with("log") || file.ends_with("tree"),
                "log as before round {round}: {file:?}: {detail}"
            ),
            Err(e) => panic!("log as before round {round}: expected corruption, got {e}"),
            Ok(got) => panic!(
                "log as before round {round}: the store opened with {} pairs of {} (same: {})",
                got.len(),
                model.len(),
                got == model
            ),
        }
    }
    assert!(
        cut >= 6 && after_reopen >= 3,
        "only {cut} earlier logs ({after_reopen} after the reopen) were cuts of the last one"
    );
}

#[test]
fn a_log_torn_inside_its_header_is_reported_not_read_as_empty() {
    // A log is renamed into place only once its header is durable, so a
    // header cut short is damage: the synced writes the log held are gone.
    let (clean, model, _) = build_with(true, true);
    let log = clean
        .list_files()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("wal-"))
        .max()
        .expect("the pending writes are in a log");
    for cut in [0usize, 11, 31] {
        let damaged = clean.crash_image();
        let mut b = clean.file_bytes(&log).unwrap();
        b.truncate(cut);
        damaged.set_file_bytes(&log, b);
        match read_checked(damaged, &model) {
            Err(Error::Corrupt { file, .. }) => {
                assert_eq!(
                    file.file_name().and_then(|n| n.to_str()),
                    Some(log.as_str())
                )
            }
            Err(e) => panic!("cut at {cut}: expected corruption naming {log}, got {e}"),
            Ok(got) => panic!(
                "cut at {cut}: the store opened with {} pairs of {}",
                got.len(),
                model.len()
            ),
        }
    }
}

/// Copies every file of the store directory `from` into `to`.
fn copy_store(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// On real files, read through the memory mapping (`Options::mmap_reads`),
/// a data file cut short or with flipped bits gives a typed error naming a
/// file, or the original content; never a SIGBUS (which would end this
/// test's process) nor different content.
#[test]
fn damage_to_a_mapped_data_file_is_reported_not_served() {
    let root = tempfile::tempdir().unwrap();
    let clean = root.path().join("clean");
    let mapped = || opts().mmap_reads(true);
    let db = Db::open(&clean, mapped().create_if_missing(true)).unwrap();
    let model = fill(&db, 3000, value);
    db.close().unwrap();
    let read = |dir: &std::path::Path| -> Result<Model, Error> {
        let db = Db::open(dir, mapped())?;
        let all = read_all(&db, &model)?;
        db.close()?;
        Ok(all)
    };
    assert_eq!(read(&clean).unwrap(), model);
    let data_len = std::fs::metadata(clean.join("data")).unwrap().len();
    assert!(data_len > 0);
    let mut rng = StdRng::seed_from_u64(3);
    let (mut errors, mut cuts) = (0, 0);
    for t in 0..40 {
        let dir = root.path().join(format!("t{t}"));
        copy_store(&clean, &dir);
        let data = dir.join("data");
        let how = if t % 2 == 0 {
            // Cut inside the written pairs, where the index still points.
            let cut = rng.gen_range(0..data_len);
            let f = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
            f.set_len(cut).unwrap();
            cuts += 1;
            format!("cut to {cut}")
        } else {
            let mut b = std::fs::read(&data).unwrap();
            let at = rng.gen_range(0..b.len());
            b[at] ^= 1 << rng.gen_range(0..8);
            std::fs::write(&data, b).unwrap();
            format!("bit flipped at {at}")
        };
        match read(&dir) {
            Ok(got) => assert!(got == model, "data {how}: different content"),
            Err(e) => {
                assert!(names_a_file(&e), "data {how}: {e}");
                errors += 1;
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // The damage was seen, not only missed (a cut may remove only bytes
    // no pair uses any more).
    assert!(errors > 0 && cuts > 0, "{errors} errors, {cuts} cuts");
}
