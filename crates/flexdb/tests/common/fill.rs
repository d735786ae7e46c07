//! Stores for the corruption, check and repair tests: small MemTables on a
//! `FaultStorage`, keys written in a scrambled order, values that carry a
//! marker a test can find in the data file (`damage`), the image a power
//! loss leaves, and reading a store back.
//!
//! Invariant: `fill` returns exactly the pairs it wrote, and `read_all`
//! returns what the store serves (it asserts nothing about it).

use std::collections::BTreeMap;
use std::sync::Arc;

use flexdb::{Db, Error, Options};
use flexspace::FaultStorage;

/// A store's content, as a test expects it.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// MemTables of 16 KiB (a commit every few hundred pairs) and a 64 KiB
/// cache, so that a few thousand pairs make many intervals and commits.
pub fn small_opts() -> Options {
    Options::new()
        .memtable_bytes(16 << 10)
        .cache_bytes(64 << 10)
}

/// Key number `i`.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The marker of key number `i`'s values, found in the data file by
/// `damage::damage_marks`.
pub fn mark(i: u32) -> Vec<u8> {
    format!("<MARK{i:05}>").into_bytes()
}

/// A value of key number `i` that carries its marker, then `tag`, then
/// `i % 50` bytes more.
pub fn marked_value(i: u32, tag: &str) -> Vec<u8> {
    let mut v = mark(i);
    v.extend_from_slice(format!("-{tag}{}", "v".repeat((i % 50) as usize)).as_bytes());
    v
}

/// Creates the store `store` on `storage`.
pub fn create(storage: &FaultStorage, opts: Options) -> Db {
    Db::open_with_storage(
        Arc::new(storage.clone()),
        "store",
        opts.create_if_missing(true),
    )
    .unwrap()
}

/// Puts keys `0..n` in a scrambled order: the `nth` write puts key number
/// `nth * 7919 % n` with `value(key number, nth)`. Returns the pairs.
pub fn fill(db: &Db, n: u32, value: impl Fn(u32, u32) -> Vec<u8>) -> Model {
    let mut model = Model::new();
    for nth in 0..n {
        let i = (nth * 7919) % n;
        let v = value(i, nth);
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    model
}

/// The files of `storage` as a power loss would leave them now, with `db`
/// still running: it is never closed nor dropped (no flush, no commit at
/// close), as in a process that died.
pub fn power_loss(storage: &FaultStorage, db: Db) -> FaultStorage {
    let image = storage.crash_image();
    std::mem::forget(db);
    image
}

/// Reads every key of `model` and then scans the whole store; returns
/// what the scan read, or the first error of any read.
pub fn read_all(db: &Db, model: &Model) -> Result<Model, Error> {
    for k in model.keys() {
        db.get(k)?;
    }
    db.iter().collect()
}

/// What a scan of the whole store reads (it must not fail).
pub fn content(db: &Db) -> Model {
    db.iter().collect::<Result<Model, Error>>().unwrap()
}
