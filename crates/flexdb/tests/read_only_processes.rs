//! Read-only opens beside a writer *process*: the writer (this test binary
//! run again with `FLEXDB_RO_WRITER` set) writes batches that set every
//! one of `KEYS` keys to the batch's round number, with filler pairs that
//! churn the space and a compaction now and then; two reader processes
//! (`FLEXDB_RO_READER`) and this process open the store read-only again
//! and again, `catch_up`, and check every state they read: all `KEYS` keys
//! hold one round (no torn batch), never older than the last state seen.
//! Then the writer is SIGKILLed mid-flight, while a third reader process
//! reads on, and the state checked once more (every acknowledged round is
//! there: the writer's logs are read),
//! and a reader killed the same way leaves a registry entry that the next
//! writer reclaims. About 5 s in a debug build.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flexdb::{Db, Options, WriteBatch};

const WRITER: &str = "FLEXDB_RO_WRITER";
const READER: &str = "FLEXDB_RO_READER";
const TEST: &str = "readers_beside_a_writer_process_never_see_a_torn_state";
const READ_MS: &str = "FLEXDB_RO_READ_MS";
const KEYS: u32 = 40;

fn key(i: u32) -> String {
    format!("k{i:03}")
}

fn writer_opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
        .cache_bytes(1 << 20)
}

fn ro() -> Options {
    Options::new().read_only(true).cache_bytes(1 << 20)
}

/// The writer child: round after round, forever (until killed).
fn writer(dir: &Path) {
    use std::io::Write;
    let db = Db::open(dir, writer_opts()).unwrap();
    let mut out = std::io::stdout().lock();
    for round in 1u64.. {
        let mut b = WriteBatch::new();
        let v = format!("{round:012}");
        for i in 0..KEYS {
            b.put(key(i).as_bytes(), v.as_bytes()).unwrap();
        }
        for j in 0..8 {
            let f = format!("f{:05}", (round * 8 + j) % 3000);
            b.put(f.as_bytes(), &[b'.'; 1500]).unwrap();
        }
        db.write(b).unwrap();
        if round % 200 == 0 {
            db.compact().unwrap();
        }
        writeln!(out, "{round}").unwrap();
        out.flush().unwrap();
    }
}

/// Reads the state of `db` (a snapshot: gets and a scan) and checks it:
/// every key holds the same round, at least `floor`; returns the round.
fn check_state(db: &Db, floor: u64) -> u64 {
    let snap = db.snapshot();
    let rounds: Vec<u64> = (0..KEYS)
        .map(|i| {
            snap.get(key(i))
                .unwrap()
                .map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap())
        })
        .collect();
    assert!(
        rounds.iter().all(|&r| r == rounds[0]),
        "a torn state: {rounds:?}"
    );
    let scanned: Vec<_> = snap.prefix("k").map(|kv| kv.unwrap().1).collect::<Vec<_>>();
    if rounds[0] > 0 {
        assert_eq!(scanned.len(), KEYS as usize, "the scan's keys");
        assert!(
            scanned
                .iter()
                .all(|v| v == format!("{:012}", rounds[0]).as_bytes()),
            "a torn scan"
        );
    }
    assert!(
        rounds[0] >= floor,
        "back in time: round {} after {floor}",
        rounds[0]
    );
    rounds[0]
}

/// Opens read-only again and again for `run` (twice at least), catching
/// up between reads; returns the states checked and the last round seen.
fn read_loop(dir: &Path, run: Duration) -> (u64, u64) {
    let t0 = Instant::now();
    let (mut checks, mut floor) = (0, 0);
    while t0.elapsed() < run || checks < 8 {
        let db = Db::open(dir, ro()).unwrap();
        for _ in 0..4 {
            floor = check_state(&db, floor);
            checks += 1;
            db.catch_up().unwrap();
        }
    }
    (checks, floor)
}

/// The reader child: reads for `FLEXDB_RO_READ_MS`, then reports; one
/// handle stays open all along (its registry entry always exists).
fn reader(dir: &Path) {
    let ms = std::env::var(READ_MS).map_or(2000, |v| v.parse().unwrap());
    let hold = Db::open(dir, ro()).unwrap();
    let (checks, last) = read_loop(dir, Duration::from_millis(ms));
    check_state(&hold, 0);
    println!("checked {checks} {last}");
}

/// A child process, killed (SIGKILL) if the test fails before it ends.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(var: &str, dir: &Path, read_ms: u64) -> ChildGuard {
    ChildGuard(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--nocapture"])
            .env(var, dir)
            .env(READ_MS, read_ms.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn readers_beside_a_writer_process_never_see_a_torn_state() {
    if let Ok(dir) = std::env::var(WRITER) {
        return writer(Path::new(&dir));
    }
    if let Ok(dir) = std::env::var(READER) {
        return reader(Path::new(&dir));
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut w = spawn(WRITER, &dir, 0);
    let mut acked = BufReader::new(w.0.stdout.take().unwrap()).lines();
    let mut last_acked = 0u64;
    // The store exists and holds some rounds.
    for line in acked.by_ref() {
        // (The test harness's own lines are not numbers.)
        if let Ok(r) = line.unwrap().trim().parse() {
            last_acked = r;
        }
        if last_acked >= 20 {
            break;
        }
    }
    // Keep reading the writer's acknowledgements (its pipe must not fill).
    let progress = Arc::new(AtomicU64::new(last_acked));
    let acks = {
        let progress = progress.clone();
        std::thread::spawn(move || {
            let mut last = last_acked;
            for line in acked.map_while(Result::ok) {
                if let Ok(r) = line.trim().parse() {
                    last = r;
                    progress.store(r, Ordering::Relaxed);
                }
            }
            last
        })
    };
    let r1 = spawn(READER, &dir, 2000);
    // Killed before it is done.
    let mut r2 = spawn(READER, &dir, 60_000);
    let (checks, seen) = read_loop(&dir, Duration::from_secs(2));
    assert!(checks >= 8, "this process checked {checks} states");
    let mut r1 = r1;
    let mut report = String::new();
    std::io::Read::read_to_string(&mut r1.0.stdout.take().unwrap(), &mut report).unwrap();
    let status = r1.0.wait().unwrap();
    assert!(status.success(), "reader 1 failed");
    let line = report
        .lines()
        .find(|l| l.starts_with("checked "))
        .expect("reader 1 reported");
    let n: u64 = line.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(n >= 8, "reader 1 checked {n} states");
    // A reader that keeps reading across the writer's death.
    let mut r3 = spawn(READER, &dir, 1500);
    // The writer dies mid-flight, once it went on past what the readers
    // saw (it may be compacting, slowly in a debug build).
    let deadline = Instant::now() + Duration::from_secs(60);
    while progress.load(Ordering::Relaxed) <= seen + 5 {
        assert!(Instant::now() < deadline, "the writer stopped writing");
        std::thread::sleep(Duration::from_millis(10));
    }
    w.0.kill().unwrap();
    w.0.wait().unwrap();
    let last_acked = acks.join().unwrap();
    assert!(last_acked > seen, "the writer wrote while the readers read");
    // Every acknowledged round is in its logs (in the page cache), and
    // the state is whole.
    let db = Db::open(&dir, ro()).unwrap();
    let round = check_state(&db, seen);
    assert!(
        round >= last_acked,
        "round {round} read after the writer acknowledged {last_acked}"
    );
    db.catch_up().unwrap();
    assert_eq!(check_state(&db, round), round);
    drop(db);
    // The reader that read while the writer died saw whole states only.
    let mut report = String::new();
    std::io::Read::read_to_string(&mut r3.0.stdout.take().unwrap(), &mut report).unwrap();
    assert!(r3.0.wait().unwrap().success(), "reader 3 failed: {report}");
    assert!(
        report.lines().any(|l| l.starts_with("checked ")),
        "reader 3 reported: {report}"
    );
    // A reader killed mid-read: its registry entry stays behind, and the
    // next writer's commits reclaim it.
    r2.0.kill().unwrap();
    r2.0.wait().unwrap();
    let registry = dir.join("readers");
    assert!(
        std::fs::read_dir(&registry).unwrap().count() >= 1,
        "the killed reader left its entry"
    );
    let w = Db::open(&dir, writer_opts().create_if_missing(false)).unwrap();
    assert!(check_state(&w, round) >= round);
    w.put("after", "x").unwrap();
    w.flush().unwrap();
    assert_eq!(
        std::fs::read_dir(&registry).unwrap().count(),
        0,
        "the dead reader's entry was reclaimed"
    );
    w.close().unwrap();
}
