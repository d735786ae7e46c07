//! Helpers shared by flexdb's integration tests: random range bounds for
//! model tests, a child process that reruns one test (SIGKILL tests),
//! filled stores and their crash images (`fill`), and damage to chosen
//! bytes of their files (`damage`).
//!
//! Invariant: nothing here checks what a store holds; each helper only
//! builds input, damages it, reads it back or starts a process, so a
//! test's assertions stay in the test.
#![allow(dead_code)] // each test file uses a part

pub mod damage;
pub mod fill;

use std::io::{BufRead, BufReader, Lines};
use std::ops::Bound;
use std::process::{Child, ChildStdout, Command, Stdio};

use rand::rngs::StdRng;
use rand::Rng;

/// A store created in `dir` (on real files) with MemTables of
/// `memtable_bytes` and an interval cache of `cache_bytes`.
pub fn open_sized(dir: &std::path::Path, memtable_bytes: usize, cache_bytes: usize) -> flexdb::Db {
    let opts = flexdb::Options::new()
        .create_if_missing(true)
        .memtable_bytes(memtable_bytes)
        .cache_bytes(cache_bytes);
    flexdb::Db::open(dir, opts).unwrap()
}

/// A random bound: unbounded, or included or excluded at a key `key` draws.
pub fn bound(rng: &mut StdRng, key: impl Fn(&mut StdRng) -> Vec<u8>) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng)),
        _ => Bound::Excluded(key(rng)),
    }
}

/// Whether `lo..hi` is a range `BTreeMap::range` accepts (it panics on a
/// start above the end, or an empty range with an excluded end).
pub fn range_ok(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a < b || (a == b && matches!((lo, hi), (Bound::Included(_), Bound::Included(_))))
        }
        _ => true,
    }
}

/// Starts this test binary again running only test `name`, with `var` set
/// to `path` (the test then acts as the child), and returns it with the
/// lines of its standard output.
pub fn spawn_child(
    name: &str,
    var: &str,
    path: &std::path::Path,
) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut proc = Command::new(std::env::current_exe().expect("test binary path"))
        .args(["--exact", name, "--nocapture"])
        .env(var, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let stdout = proc.stdout.take().expect("piped stdout");
    (proc, BufReader::new(stdout).lines())
}

/// A pair of a keyspace with its time to live: (keyspace, key, value, ttl).
pub type PairWithTtl = (String, Vec<u8>, Vec<u8>, Option<std::time::Duration>);

/// Every pair of every keyspace of `db`, keyspaces by name, with its time
/// to live (keys as the user sees them).
pub fn every_pair_with_ttl(db: &flexdb::Db) -> Vec<PairWithTtl> {
    let mut out = Vec::new();
    let mut names = db.keyspaces();
    names.sort();
    for name in names {
        let ks = db.keyspace(&name).unwrap();
        for pair in ks.iter() {
            let (k, v) = pair.unwrap();
            let ttl = ks.ttl(&k).unwrap().flatten();
            out.push((name.clone(), k, v, ttl));
        }
    }
    out
}
