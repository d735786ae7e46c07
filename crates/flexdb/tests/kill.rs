//! A real-process crash test: a child process writes (some writes synced,
//! some batched) and reports every write as it returns; the parent kills it
//! with SIGKILL at a random moment, reopens the store and checks the
//! contract: the store holds the state after some prefix of the writes, a
//! prefix that includes every write whose sync returned. On real files the
//! store promises more against a dying process (the machine keeps running):
//! every write that returned is in the operating system's page cache, so
//! the prefix includes every acknowledged write.
//!
//! The child is this test binary run again with `FLEXDB_KILL_CHILD` set.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use flexdb::{Db, Options, WriteBatch, WriteOptions};
use rand::{Rng, SeedableRng};

const CHILD: &str = "FLEXDB_KILL_CHILD";

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
        .cache_bytes(256 << 10)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:04}", i % 400).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("{i}-").repeat(1 + (i % 37) as usize).into_bytes()
}

/// Write `i` of the deterministic workload, applied to a model.
fn apply_model(m: &mut BTreeMap<Vec<u8>, Vec<u8>>, i: u64) {
    match i % 11 {
        0 => {
            for j in 0..3 {
                m.insert(key(i + j * 101), value(i + j));
            }
        }
        1 | 5 => {
            m.remove(&key(i));
        }
        _ => {
            m.insert(key(i), value(i));
        }
    }
}

fn synced(i: u64) -> bool {
    i.is_multiple_of(5)
}

/// The child: write forever, printing `i` after write `i` returns.
fn child(dir: &str) {
    use std::io::Write;
    let db = Db::open(dir, opts()).unwrap();
    let out = std::io::stdout();
    let mut out = out.lock();
    for i in 0.. {
        let wo = WriteOptions { sync: synced(i) };
        match i % 11 {
            0 => {
                let mut b = WriteBatch::new();
                for j in 0..3 {
                    b.put(&key(i + j * 101), &value(i + j)).unwrap();
                }
                db.write_opt(b, &wo).unwrap();
            }
            1 | 5 => db.delete_opt(key(i), &wo).unwrap(),
            _ => db.put_opt(key(i), value(i), &wo).unwrap(),
        }
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_at_random_moments_keeps_the_contract() {
    if let Ok(dir) = std::env::var(CHILD) {
        child(&dir);
        return;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(77);
    for round in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut proc = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sigkill_at_random_moments_keeps_the_contract",
                "--nocapture",
            ])
            .env(CHILD, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = proc.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let target = rng.gen_range(50..4000u64);
        let mut acked: Option<u64> = None;
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            let Ok(i) = line.trim().parse::<u64>() else {
                continue;
            };
            acked = Some(i);
            if i >= target {
                break;
            }
        }
        proc.kill().unwrap();
        proc.wait().unwrap();
        // What the child reported before it died, also after the target.
        for line in lines.map_while(Result::ok) {
            if let Ok(i) = line.trim().parse::<u64>() {
                acked = Some(i);
            }
        }
        let acked = acked.expect("the child acknowledged writes");
        // Every acknowledged write must be there (the last synced one would
        // be the bound after a machine crash); the one write in flight when
        // the child died may or may not be.
        assert!(
            (0..=acked).any(synced),
            "round {round}: the run covered a synced write"
        );
        let floor = acked + 1;
        let db = Db::open(&path, opts()).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().map(|kv| kv.unwrap()).collect();
        let mut model = BTreeMap::new();
        let mut matched = None;
        for n in 0..=acked + 2 {
            if n >= floor && model == got {
                matched = Some(n);
                break;
            }
            apply_model(&mut model, n);
        }
        assert!(
            matched.is_some(),
            "round {round}: killed after write {acked} (durable up to {floor}): \
             the store ({} pairs) is no prefix state from {floor} on",
            got.len()
        );
        let report = db.check().unwrap();
        assert!(report.is_ok(), "round {round}: {:?}", report.problems);
    }
}
