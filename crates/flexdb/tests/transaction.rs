//! Transactions: read-your-writes (gets and iterators both ways), first
//! committer wins, write skew (allowed under snapshot isolation, refused
//! under serializable), phantoms, `compare_and_swap`, and the bank test:
//! concurrent transfers keep the total in every snapshot scan and every
//! serializable read, also after crashes on the fault-injecting storage.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flexdb::{Db, Error, Isolation, Options, WriteBatch, WriteOptions};
use flexspace::{Fault, FaultStorage};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn small() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(1024)
        .cache_bytes(32 << 10)
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    (dir, db)
}

fn pairs(it: impl Iterator<Item = flexdb::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|kv| kv.unwrap()).collect()
}

#[test]
fn a_transaction_reads_its_own_writes_in_order_both_ways() {
    for iso in [Isolation::Snapshot, Isolation::Serializable] {
        let (_dir, db) = open();
        for k in ["a", "c", "e", "g"] {
            db.put(k, format!("db-{k}")).unwrap();
        }
        db.flush().unwrap();
        db.put("i", "db-i").unwrap();
        let mut t = db.transaction(iso);
        t.put("b", "t-b").unwrap();
        t.put("c", "t-c").unwrap();
        t.delete("e").unwrap();
        t.put("h", "t-h").unwrap();
        t.delete("zz").unwrap();
        // A write after the transaction began is not seen.
        db.put("d", "db-d").unwrap();
        assert_eq!(t.get("c").unwrap().as_deref(), Some(&b"t-c"[..]));
        assert!(t.get_with("c", |v| v == Some(&b"t-c"[..])).unwrap());
        assert_eq!(
            t.get_with("a", |v| v.map(<[u8]>::to_vec)).unwrap(),
            db.get("a").unwrap()
        );
        assert_eq!(t.get("e").unwrap(), None);
        assert_eq!(t.get("d").unwrap(), None);
        assert!(t.contains("a").unwrap() && !t.contains("zz").unwrap());
        let want: Vec<(Vec<u8>, Vec<u8>)> = [
            ("a", "db-a"),
            ("b", "t-b"),
            ("c", "t-c"),
            ("g", "db-g"),
            ("h", "t-h"),
            ("i", "db-i"),
        ]
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
        assert_eq!(pairs(t.iter()), want);
        let mut rev = pairs(t.iter().rev());
        rev.reverse();
        assert_eq!(rev, want);
        assert_eq!(pairs(t.range("b".."h")), want[1..4].to_vec());
        assert_eq!(pairs(t.prefix("h")), want[4..5].to_vec());
        let mut it = t.iter();
        it.seek("c");
        assert_eq!(it.next().unwrap().unwrap().0, b"c");
        it.seek_back("h");
        assert_eq!(it.next_back().unwrap().unwrap().0, b"h");
        // An iterator keeps the writes made before it.
        let it = t.iter();
        t.put("a", "t-a").unwrap();
        assert_eq!(pairs(it), want);
        assert_eq!(t.get("a").unwrap().as_deref(), Some(&b"t-a"[..]));
        if iso == Isolation::Serializable {
            // It read "d" (absent) and scanned over it: the put of "d"
            // after it began is a conflict.
            assert!(matches!(t.commit(), Err(Error::Conflict)));
            assert_eq!(db.get("c").unwrap().as_deref(), Some(&b"db-c"[..]));
            continue;
        }
        t.commit().unwrap();
        assert_eq!(db.get("c").unwrap().as_deref(), Some(&b"t-c"[..]));
        assert_eq!(db.get("e").unwrap(), None);
        assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"t-a"[..]));
    }
}

#[test]
fn the_first_committer_wins_and_the_loser_writes_nothing() {
    for iso in [Isolation::Snapshot, Isolation::Serializable] {
        let (_dir, db) = open();
        db.put("k", "0").unwrap();
        let mut t1 = db.transaction(iso);
        let mut t2 = db.transaction(iso);
        t1.put("k", "1").unwrap();
        t2.put("k", "2").unwrap();
        t2.put("other", "2").unwrap();
        t1.commit().unwrap();
        assert!(matches!(t2.commit(), Err(Error::Conflict)));
        assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(db.get("other").unwrap(), None);
        // A plain write conflicts too.
        let mut t3 = db.transaction(iso);
        t3.put("k", "3").unwrap();
        db.put("k", "plain").unwrap();
        assert!(t3.commit().unwrap_err().is_retryable());
        // Rollback and drop write nothing.
        let mut t4 = db.transaction(iso);
        t4.put("r", "x").unwrap();
        t4.rollback();
        let mut t5 = db.transaction(iso);
        t5.put("r", "y").unwrap();
        drop(t5);
        assert_eq!(db.get("r").unwrap(), None);
        assert_eq!(db.stats().snapshots_live, 0);
    }
}

/// Two transactions each read both `x` and `y` and, seeing their sum at 2,
/// take one from a different key: under snapshot isolation both commit
/// (write skew, the sum goes to 0); under serializable the second fails.
#[test]
fn write_skew_is_allowed_under_snapshot_and_refused_under_serializable() {
    for iso in [Isolation::Snapshot, Isolation::Serializable] {
        let (_dir, db) = open();
        db.put("x", "1").unwrap();
        db.put("y", "1").unwrap();
        let read = |t: &flexdb::Transaction, k: &str| -> i32 {
            String::from_utf8(t.get(k).unwrap().unwrap())
                .unwrap()
                .parse()
                .unwrap()
        };
        let mut t1 = db.transaction(iso);
        let mut t2 = db.transaction(iso);
        assert_eq!(read(&t1, "x") + read(&t1, "y"), 2);
        assert_eq!(read(&t2, "x") + read(&t2, "y"), 2);
        t1.put("x", (read(&t1, "x") - 1).to_string()).unwrap();
        t2.put("y", (read(&t2, "y") - 1).to_string()).unwrap();
        t1.commit().unwrap();
        let second = t2.commit();
        match iso {
            Isolation::Snapshot => {
                second.unwrap();
                assert_eq!(db.get("y").unwrap().as_deref(), Some(&b"0"[..]));
            }
            Isolation::Serializable => {
                assert!(matches!(second, Err(Error::Conflict)));
                assert_eq!(db.get("y").unwrap().as_deref(), Some(&b"1"[..]));
            }
        }
        assert_eq!(db.get("x").unwrap().as_deref(), Some(&b"0"[..]));
    }
}

/// A serializable transaction that scanned a range conflicts with a key
/// inserted into that range after it began (a phantom), also backward and
/// also when the insert is already committed to the space; one inserted
/// outside the range does not conflict, nor under snapshot isolation.
#[test]
fn a_serializable_scan_conflicts_with_an_insert_into_its_range() {
    let (_dir, db) = open();
    for i in [1, 3, 5] {
        db.put(format!("p/{i}"), "v").unwrap();
    }
    for (insert, flush, reverse, iso, conflict) in [
        ("p/4", false, false, Isolation::Serializable, true),
        ("p/4", true, true, Isolation::Serializable, true),
        ("p/0", false, false, Isolation::Serializable, true),
        ("q/4", false, false, Isolation::Serializable, false),
        ("o/9", true, true, Isolation::Serializable, false),
        ("p/4", false, false, Isolation::Snapshot, false),
    ] {
        let mut t = db.transaction(iso);
        let n = if reverse {
            t.prefix("p/").rev().count()
        } else {
            t.prefix("p/").count()
        };
        t.put("count", n.to_string()).unwrap();
        db.put(insert, "new").unwrap();
        if flush {
            db.flush().unwrap();
        }
        let r = t.commit();
        assert_eq!(
            matches!(r, Err(Error::Conflict)),
            conflict,
            "insert {insert} (flushed: {flush}, {iso:?}): {r:?}"
        );
        db.delete(insert).unwrap();
    }
}

/// A key read with `get` and changed after the transaction began is a
/// conflict under serializable (also when the change was a deletion); a
/// transaction that only read always commits.
#[test]
fn a_serializable_read_conflicts_with_a_later_write_of_the_key() {
    let (_dir, db) = open();
    db.put("a", "1").unwrap();
    let mut t = db.transaction(Isolation::Serializable);
    assert!(t.contains("a").unwrap());
    t.put("b", "x").unwrap();
    db.delete("a").unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    let t = db.transaction(Isolation::Serializable);
    assert_eq!(t.get("b").unwrap(), None);
    db.put("b", "now").unwrap();
    t.commit().unwrap();
}

/// When the MemTables that held the writes after a transaction began are
/// committed and gone, its commit fails rather than guessing.
#[test]
fn a_transaction_older_than_the_kept_history_conflicts() {
    let (_dir, db) = open();
    let mut t = db.transaction(Isolation::Snapshot);
    t.put("mine", "x").unwrap();
    for round in 0..3 {
        db.put(format!("other{round}"), "y").unwrap();
        db.flush().unwrap();
    }
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    assert_eq!(db.get("mine").unwrap(), None);
    // One flush later the point's own table still tells.
    let mut t = db.transaction(Isolation::Snapshot);
    t.put("mine", "x").unwrap();
    db.put("other", "y").unwrap();
    db.flush().unwrap();
    t.commit().unwrap();
    assert_eq!(db.get("mine").unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn compare_and_swap_counts_every_increment_of_racing_threads() {
    let (_dir, db) = open();
    assert!(db.compare_and_swap("n", None, Some(b"0")).unwrap());
    assert!(!db.compare_and_swap("n", None, Some(b"0")).unwrap());
    assert!(!db.compare_and_swap("n", Some(b"7"), Some(b"8")).unwrap());
    let (threads, each) = (3, 300);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..each {
                    loop {
                        let cur = db.get("n").unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&cur).unwrap().parse().unwrap();
                        let next = (n + 1).to_string();
                        if db
                            .compare_and_swap("n", Some(&cur), Some(next.as_bytes()))
                            .unwrap()
                        {
                            break;
                        }
                    }
                }
            });
        }
    });
    let want = (threads * each).to_string();
    assert_eq!(db.get("n").unwrap().as_deref(), Some(want.as_bytes()));
    assert!(db
        .compare_and_swap("n", Some(want.as_bytes()), None)
        .unwrap());
    assert_eq!(db.get("n").unwrap(), None);
}

const ACCOUNTS: u64 = 100;
const START: u64 = 1000;
const TOTAL: u64 = ACCOUNTS * START;

fn account(i: u64) -> Vec<u8> {
    format!("acct{i:03}").into_bytes()
}

fn amount(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

fn open_accounts(db: &Db, sync: bool) -> flexdb::Result<()> {
    let mut b = WriteBatch::new();
    for i in 0..ACCOUNTS {
        b.put(&account(i), START.to_string().as_bytes())?;
    }
    db.write_opt(b, &WriteOptions { sync })
}

/// One transfer between two random accounts, retried on conflicts (also
/// the transfer's record, written in the same transaction). Returns the
/// first error that is not a conflict.
fn transfer(db: &Db, rng: &mut StdRng, iso: Isolation, id: u64) -> flexdb::Result<()> {
    let a = rng.gen_range(0..ACCOUNTS);
    let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
    let sync = rng.gen_bool(0.2);
    loop {
        let mut t = db.transaction(iso);
        let from = amount(&t.get(account(a))?.expect("account"));
        let to = amount(&t.get(account(b))?.expect("account"));
        let x = rng.gen_range(0..=from.min(50));
        t.put(account(a), (from - x).to_string())?;
        t.put(account(b), (to + x).to_string())?;
        t.put(format!("xfer{id:08}"), format!("{a}->{b}:{x}"))?;
        match t.commit_opt(&WriteOptions { sync }) {
            Err(Error::Conflict) => continue,
            r => return r,
        }
    }
}

/// The sum of every account, by a scan (of `it`).
fn scan_total(it: impl Iterator<Item = flexdb::Result<(Vec<u8>, Vec<u8>)>>) -> (u64, u64) {
    it.map(|kv| amount(&kv.unwrap().1))
        .fold((0, 0), |(n, s), x| (n + 1, s + x))
}

/// Transfers on three threads (snapshot isolation on one, serializable on
/// two) with tiny MemTables, so commits run all the time, while checkers
/// sum every account through snapshots (forward and backward), plain
/// scans and serializable transactions reading each account.
#[test]
fn bank_transfers_keep_the_total_in_every_snapshot_and_serializable_read() {
    let (_dir, db) = open();
    open_accounts(&db, false).unwrap();
    let stop = AtomicBool::new(false);
    let (transfers, checks) = (AtomicU64::new(0), AtomicU64::new(0));
    let (limit, patience) = (Duration::from_secs(5), Duration::from_secs(120));
    std::thread::scope(|s| {
        for w in 0..3u64 {
            let (db, stop, transfers) = (&db, &stop, &transfers);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(w);
                let iso = if w == 0 {
                    Isolation::Snapshot
                } else {
                    Isolation::Serializable
                };
                let mut id = w << 32;
                while !stop.load(Ordering::Acquire) {
                    id += 1;
                    transfer(db, &mut rng, iso, id).unwrap();
                    transfers.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for c in 0..2u64 {
            let (db, stop, checks) = (&db, &stop, &checks);
            s.spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Acquire) {
                    round += 1;
                    match (round + c) % 4 {
                        0 => {
                            let snap = db.snapshot();
                            assert_eq!(scan_total(snap.prefix("acct")), (ACCOUNTS, TOTAL));
                            assert_eq!(scan_total(snap.prefix("acct").rev()), (ACCOUNTS, TOTAL));
                        }
                        1 => assert_eq!(scan_total(db.prefix("acct")), (ACCOUNTS, TOTAL)),
                        2 => {
                            let t = db.transaction(Isolation::Serializable);
                            let sum: u64 = (0..ACCOUNTS)
                                .map(|i| amount(&t.get(account(i)).unwrap().unwrap()))
                                .sum();
                            assert_eq!(sum, TOTAL);
                            t.commit().unwrap();
                        }
                        _ => {
                            let snap = db.snapshot();
                            let sum: u64 = (0..ACCOUNTS)
                                .map(|i| amount(&snap.get(account(i)).unwrap().unwrap()))
                                .sum();
                            assert_eq!(sum, TOTAL);
                        }
                    }
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // At least `limit`, and on a slow or busy machine until the
        // threads have done enough work to mean something (`patience` at
        // most: the assertion below then says how far they got).
        let t = Instant::now();
        let enough =
            || transfers.load(Ordering::Relaxed) > 500 && checks.load(Ordering::Relaxed) > 50;
        while t.elapsed() < limit || (!enough() && t.elapsed() < patience) {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Release);
    });
    let (transfers, checks) = (transfers.into_inner(), checks.into_inner());
    assert!(
        transfers > 500 && checks > 50,
        "{transfers} transfers, {checks} checks"
    );
    assert_eq!(scan_total(db.prefix("acct")), (ACCOUNTS, TOTAL));
    assert!(db.stats().commits > 10);
    db.check().unwrap();
}

/// Every account after a recovery, and the transfer records.
fn recovered(db: &Db) -> (BTreeMap<Vec<u8>, u64>, usize) {
    let accounts = db
        .prefix("acct")
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k, amount(&v))
        })
        .collect();
    (accounts, db.prefix("xfer").count())
}

/// Transfers on two threads over the fault-injecting storage, which
/// crashes at a random operation (sometimes tearing the last write); after
/// recovery the accounts hold the total (no transfer half applied), every
/// transfer whose synced commit returned is there, and the store checks.
#[test]
fn bank_total_survives_crashes() {
    let iterations = flexsys::test_seed::iterations(40);
    let master = flexsys::test_seed::TestSeed::new("bank_total_survives_crashes");
    let mut rng = StdRng::seed_from_u64(master.get());
    let workload = |storage: Arc<FaultStorage>, seed: u64| -> Vec<u64> {
        // The transfers whose synced commit returned.
        let Ok(db) = Db::open_with_storage(storage, "bank", small()) else {
            return Vec::new();
        };
        if open_accounts(&db, true).is_err() {
            return Vec::new();
        }
        let durable = parking_lot::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for w in 0..2u64 {
                let (db, durable) = (&db, &durable);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ w);
                    let iso = if w == 0 {
                        Isolation::Serializable
                    } else {
                        Isolation::Snapshot
                    };
                    for n in 0..150u64 {
                        let id = (w << 32) | n;
                        let (a, b) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS));
                        if a == b {
                            continue;
                        }
                        let r = loop {
                            let mut t = db.transaction(iso);
                            let read = |k| t.get(account(k)).map(|v| amount(&v.unwrap()));
                            let (from, to) = match (read(a), read(b)) {
                                (Ok(f), Ok(t)) => (f, t),
                                (Err(e), _) | (_, Err(e)) => break Err(e),
                            };
                            let x = rng.gen_range(0..=from.min(50));
                            t.put(account(a), (from - x).to_string()).unwrap();
                            t.put(account(b), (to + x).to_string()).unwrap();
                            t.put(format!("xfer{id:016}"), "done").unwrap();
                            match t.commit_opt(&WriteOptions { sync: n % 3 == 0 }) {
                                Err(Error::Conflict) => continue,
                                r => break r,
                            }
                        };
                        match r {
                            Ok(()) if n % 3 == 0 => durable.lock().push(id),
                            Ok(()) => {}
                            Err(_) => return,
                        }
                    }
                });
            }
        });
        drop(db);
        durable.into_inner()
    };
    let dry = Arc::new(FaultStorage::new());
    workload(dry.clone(), 1);
    let total_ops = dry.ops();
    let mut checked = 0;
    for it in 0..iterations {
        let seed = rng.gen();
        let storage = Arc::new(FaultStorage::new());
        let at = rng.gen_range(0..total_ops.max(1));
        storage.plan(at, Fault::Crash { tear: rng.gen() });
        let durable = workload(storage.clone(), seed);
        let image = Arc::new(storage.crash_image());
        let db = match Db::open_with_storage(image, "bank", small()) {
            Ok(db) => db,
            Err(Error::NotFound(_)) => continue,
            Err(e) => panic!("iteration {it} (crash at {at}): reopen: {e}"),
        };
        let (accounts, _) = recovered(&db);
        if accounts.is_empty() {
            // The crash came before the accounts were durable.
            assert!(durable.is_empty());
            continue;
        }
        assert_eq!(accounts.len() as u64, ACCOUNTS, "iteration {it}");
        assert_eq!(
            accounts.values().sum::<u64>(),
            TOTAL,
            "iteration {it} (crash at {at}/{total_ops}): the total changed (a transfer half applied or lost)"
        );
        for id in durable {
            assert!(
                db.get(format!("xfer{id:016}")).unwrap().is_some(),
                "iteration {it}: synced transfer {id:x} lost"
            );
        }
        assert!(db.check().unwrap().is_ok());
        checked += 1;
    }
    assert!(
        checked >= iterations / 2,
        "only {checked} recoveries held accounts"
    );
}

const KILL_CHILD: &str = "FLEXDB_BANK_KILL_CHILD";

/// The child of the SIGKILL test: opens (or creates) the bank, then runs
/// transfers on two threads forever, printing each transfer's id once its
/// commit returned.
fn bank_child(dir: &str) {
    use std::io::Write;
    let opts = Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
        .cache_bytes(256 << 10);
    let db = Db::open(dir, opts).unwrap();
    if db.get(account(0)).unwrap().is_none() {
        open_accounts(&db, true).unwrap();
    }
    let out = parking_lot::Mutex::new(std::io::stdout());
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (db, out) = (&db, &out);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(std::process::id() as u64 ^ w);
                let iso = if w == 0 {
                    Isolation::Serializable
                } else {
                    Isolation::Snapshot
                };
                for n in 0.. {
                    let id = (w << 32) | n;
                    transfer(db, &mut rng, iso, id).unwrap();
                    let mut o = out.lock();
                    writeln!(o, "{id}").unwrap();
                    o.flush().unwrap();
                }
            });
        }
    });
}

/// A process running transfers is killed with SIGKILL at random moments
/// (three times on the same store, which each child reopens): the
/// accounts always hold the total, and every transfer whose commit
/// returned is there (on real files an acknowledged write survives the
/// process's death).
#[test]
fn bank_total_survives_sigkill() {
    let name = "bank_total_survives_sigkill";
    if let Ok(dir) = std::env::var(KILL_CHILD) {
        bank_child(&dir);
        return;
    }
    let mut rng = StdRng::seed_from_u64(35);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank");
    for round in 0..3 {
        let (mut proc, mut lines) = common::spawn_child(name, KILL_CHILD, &path);
        let target = rng.gen_range(200..3000);
        let mut acked = Vec::new();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if let Ok(id) = line.trim().parse::<u64>() {
                acked.push(id);
                if acked.len() >= target {
                    break;
                }
            }
        }
        proc.kill().unwrap();
        proc.wait().unwrap();
        acked.extend(
            lines
                .map_while(Result::ok)
                .filter_map(|l| l.trim().parse::<u64>().ok()),
        );
        assert!(
            !acked.is_empty(),
            "round {round}: the child made no transfer"
        );
        let opts = Options::new()
            .memtable_bytes(64 << 10)
            .cache_bytes(256 << 10);
        let db = Db::open(&path, opts).unwrap();
        let (accounts, records) = recovered(&db);
        assert_eq!(accounts.len() as u64, ACCOUNTS);
        assert_eq!(
            accounts.values().sum::<u64>(),
            TOTAL,
            "round {round}: the total changed (a transfer half applied or lost)"
        );
        for id in &acked {
            assert!(
                db.get(format!("xfer{id:08}")).unwrap().is_some(),
                "round {round}: acknowledged transfer {id:x} lost"
            );
        }
        assert!(records >= acked.len());
        assert!(db.check().unwrap().is_ok());
        db.close().unwrap();
    }
}

/// A limited scan (`Iter::limit`) of a transaction yields the first (or
/// last) pairs of its merged view, its own writes, the MemTable and the
/// space alike, whatever the limit against a refill.
#[test]
fn a_limited_scan_merges_every_source_up_to_its_limit() {
    let (_dir, db) = open();
    let mut model = BTreeMap::new();
    for i in 0..300u32 {
        let (k, v) = (format!("k{i:04}"), format!("space{i}"));
        db.put(&k, &v).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
    db.flush().unwrap();
    for i in (0..300u32).step_by(3) {
        let (k, v) = (format!("k{i:04}"), format!("mem{i}"));
        db.put(&k, &v).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
    let mut t = db.transaction(Isolation::Snapshot);
    for i in (0..300u32).step_by(7) {
        let k = format!("k{i:04}");
        if i % 2 == 0 {
            t.delete(&k).unwrap();
            model.remove(k.as_bytes());
        } else {
            t.put(&k, "txn").unwrap();
            model.insert(k.into_bytes(), b"txn".to_vec());
        }
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    for n in [0, 1, 2, 5, 50, 63, 64, 65, 129, 1000] {
        let take = n.min(want.len());
        let got: Vec<_> = t.iter().limit(n).map(|kv| kv.unwrap()).collect();
        assert_eq!(got, want[..take], "limit {n}");
        let mut back: Vec<_> = t.iter().limit(n).rev().map(|kv| kv.unwrap()).collect();
        back.reverse();
        assert_eq!(back, want[want.len() - take..], "limit {n}, backward");
        let from = &want[want.len() / 2].0;
        let got: Vec<_> = t
            .range(from.clone()..)
            .limit(n)
            .map(|kv| kv.unwrap())
            .collect();
        let rest = &want[want.len() / 2..];
        assert_eq!(got, rest[..n.min(rest.len())], "limit {n} from the middle");
    }
}
