//! Crash simulation on the fault-injecting backend: the store (its
//! write-ahead logs, manifest and space, all on one `FaultStorage`) runs a
//! random workload of puts, deletes, range deletes and batches (some
//! holding range deletes), puts with a time to live (deadlines must
//! survive the crash with their pairs), some synced, with flushes
//! and syncs, in the default keyspace and a named one (`ks`, dropped
//! now and then and made again by the next write to it: a drop is all or
//! nothing too); the machine "crashes" at a random storage operation (sometimes
//! tearing the last write; every other iteration with `strict_wal_sync`);
//! the store is reopened and must hold exactly the
//! state after some prefix of the writes that includes every write whose
//! durability was confirmed (a synced write that returned, or any write
//! before a `sync()`/`flush()` that returned). Batches are single writes in
//! that order, so they are all or nothing.
//!
//! Every third iteration also crashes during the recovery itself (while the
//! replayed logs are committed) and recovers again.
//!
//! A second test runs the same with the space's data file slow to sync, so
//! that the committer falls behind the writer and commits several
//! MemTables at once; crashes then land inside such commits. It syncs
//! where the first flushes (a flush lets the committer catch up, which
//! gives the spare logs back).
//!
//! A third runs the first's workload on a device that reorders writes
//! (`CrashModel::Reorder`): every write since its file's last sync, and
//! every directory change (a log's creation, its rename into place, a
//! removal) since the last directory sync, is independently kept, lost or
//! torn by the crash, so a missing `sync_dir` or file sync shows as a
//! lost durable write.
//!
//! In every test the write-ahead logs take production's path, appends
//! through writable mappings (`flexspace::MappableFile`: each copy into a
//! mapping an operation a crash may hit, kept, lost or torn until synced),
//! except one run in four, which takes the buffered path of a backend
//! that cannot map (`FaultStorage::without_mappings`).
//!
//! The first checks that most runs rotated to a log prepared ahead of its
//! rotation (so crashes fall between a preparation and its swap), the
//! second that new logs took over committed logs' files (which still hold
//! the old records past the new ones) in most runs.
//!
//! `CRASH_ITERATIONS` sets the number of crashes of each test (default
//! 150); the master seed is random unless `CRASH_SEED` sets it, and a
//! failure prints it (`flexsys::test_seed`). Each test prints how many
//! planned crashes fired (run with `--nocapture` to see it) and checks
//! that nearly all did.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flexdb::{Db, Options, WriteBatch, WriteOptions};
use flexspace::{CrashModel, Fault, FaultStorage};
use flexsys::test_seed::TestSeed;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Pairs of both keyspaces: each key behind a byte naming its keyspace
/// (0: the default one, 1: `ks`), each value behind its deadline (8 bytes
/// big-endian, Unix milliseconds; 0: none).
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The stores' time: every clock stands still at it, so no pair expires
/// during a run and a deadline is the same in the dry run and the crash
/// run.
const T0: u64 = 1_800_000_000_000;

/// A value as the model holds it: behind its deadline.
fn dated(deadline: u64, v: &[u8]) -> Vec<u8> {
    let mut out = deadline.to_be_bytes().to_vec();
    out.extend_from_slice(v);
    out
}

/// The named keyspace of the workload.
const KS: &str = "ks";

/// `key` of keyspace `tag` as the model holds it.
fn tagged(tag: u8, key: &[u8]) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(key);
    k
}

thread_local! {
    /// Whether this thread's stores sync their logs strictly (every other
    /// iteration: the crash contract is the same either way).
    static STRICT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn opts() -> Options {
    let clock = flexdb::ManualClock::new();
    clock.set_ms(T0);
    Options::new()
        .clock(clock)
        .create_if_missing(true)
        .memtable_bytes(4096)
        .cache_bytes(32 << 10)
        .strict_wal_sync(STRICT.get())
}

/// What a run recorded: the model after each write (index 0: empty), the
/// lowest index a recovery may return, whether an operation failed, and
/// whether a commit held more than one MemTable.
struct Run {
    states: Vec<Model>,
    floor: usize,
    failed: bool,
    batched: bool,
    /// A log took over a committed log's file (whose old records a crash
    /// then leaves behind the new log's).
    reused: bool,
    /// A rotation took a log prepared ahead of it (`wal::next_log`): a
    /// crash may fall between its preparation and the swap.
    prepared: bool,
}

/// How a test's storages are made.
#[derive(Clone, Copy, Default)]
struct Setup {
    /// The space's data file is this slow to sync.
    slow_data: Option<Duration>,
    /// Crashes reorder writes and directory changes
    /// (`CrashModel::Reorder`), rather than keeping exactly the synced
    /// bytes and every directory change.
    reorder: bool,
}

/// A new storage for iteration `it` (its dry run and its crash run get
/// the same); `seed` seeds a reordering crash.
fn storage(setup: Setup, it: u64, seed: u64) -> Arc<FaultStorage> {
    let st = if setup.reorder {
        FaultStorage::with_model(CrashModel::Reorder { seed })
    } else {
        FaultStorage::new()
    };
    // One run in four on the buffered log path, the rest on production's
    // mapped appends.
    let st = if it % 4 == 3 {
        st.without_mappings()
    } else {
        st
    };
    if let Some(d) = setup.slow_data {
        st.slow_syncs("data", d);
    }
    Arc::new(st)
}

fn workload(seed: u64, storage: Arc<FaultStorage>, flushes: bool) -> Run {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut run = Run {
        states: vec![Model::new()],
        floor: 0,
        failed: false,
        batched: false,
        reused: false,
        prepared: false,
    };
    let db = match Db::open_with_storage(storage, "crash", opts()) {
        Ok(db) => db,
        Err(_) => {
            run.failed = true;
            return run;
        }
    };
    let key = |rng: &mut StdRng| format!("k{:03}", rng.gen_range(0..150)).into_bytes();
    for _ in 0..120 {
        let sync = rng.gen_ratio(1, 6);
        let wo = WriteOptions { sync };
        // A third of the writes go to the named keyspace (made by the
        // first of them, and again after each drop).
        let tag = u8::from(rng.gen_ratio(1, 3));
        let ks = match tag {
            0 => db.keyspace(flexdb::DEFAULT_KEYSPACE),
            _ => db.keyspace(KS),
        };
        let ks = match ks {
            Ok(ks) => ks,
            Err(_) => {
                run.failed = true;
                break;
            }
        };
        let result = match rng.gen_range(0..100) {
            0..=44 => {
                let k = key(&mut rng);
                let v = vec![rng.gen::<u8>(); rng.gen_range(0..300)];
                model.insert(tagged(tag, &k), dated(0, &v));
                Some(ks.put_opt(&k, &v, &wo))
            }
            45..=54 => {
                let k = key(&mut rng);
                let v = vec![rng.gen::<u8>(); rng.gen_range(0..300)];
                let ttl = rng.gen_range(1..100_000_000u64);
                model.insert(tagged(tag, &k), dated(T0 + ttl, &v));
                Some(ks.put_with_ttl_opt(&k, &v, Duration::from_millis(ttl), &wo))
            }
            55..=59 => {
                // A range delete, of up to a third of the keys.
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                let (ta, tb) = (tagged(tag, &a), tagged(tag, &b));
                model.retain(|k, _| *k < ta || *k >= tb);
                Some(ks.delete_range_opt(&a[..]..&b[..], &wo))
            }
            60..=72 => {
                let k = key(&mut rng);
                model.remove(&tagged(tag, &k));
                Some(ks.delete_opt(&k, &wo))
            }
            73..=74 => {
                // Dropping the named keyspace: every pair of it at once.
                model.retain(|k, _| k[0] != 1);
                drop(ks);
                match db.drop_keyspace_opt(KS, &wo) {
                    // Nothing to drop: nothing written, nothing synced
                    // (the model holds none of its pairs).
                    Ok(false) => {
                        run.states.push(model.clone());
                        continue;
                    }
                    r => Some(r.map(|_| ())),
                }
            }
            75..=89 => {
                // A batch over both keyspaces.
                let named = match db.keyspace(KS) {
                    Ok(named) => named,
                    Err(_) => {
                        run.failed = true;
                        break;
                    }
                };
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..8) {
                    let k = key(&mut rng);
                    let tag = u8::from(rng.gen_bool(0.5));
                    let tk = tagged(tag, &k);
                    if rng.gen_ratio(1, 12) {
                        // A range delete among the batch's writes, from
                        // `k` on: atomic with the others.
                        let end = key(&mut rng);
                        if k < end {
                            let te = tagged(tag, &end);
                            model.retain(|m, _| *m < tk || *m >= te);
                            match tag {
                                0 => b.delete_range(&k[..]..&end[..]).unwrap(),
                                _ => b.delete_range_in(&named, &k[..]..&end[..]).unwrap(),
                            };
                        }
                    } else if rng.gen_bool(0.8) {
                        let v = vec![rng.gen::<u8>(); rng.gen_range(0..200)];
                        let ttl = rng
                            .gen_ratio(1, 4)
                            .then(|| rng.gen_range(1..100_000_000u64));
                        match (tag, ttl) {
                            (0, None) => b.put(&k, &v).unwrap(),
                            (_, None) => b.put_in(&named, &k, &v).unwrap(),
                            (0, Some(t)) => {
                                b.put_with_ttl(&k, &v, Duration::from_millis(t)).unwrap()
                            }
                            (_, Some(t)) => b
                                .put_with_ttl_in(&named, &k, &v, Duration::from_millis(t))
                                .unwrap(),
                        };
                        model.insert(tk, dated(ttl.map_or(0, |t| T0 + t), &v));
                    } else {
                        match tag {
                            0 => b.delete(&k).unwrap(),
                            _ => b.delete_in(&named, &k).unwrap(),
                        };
                        model.remove(&tk);
                    }
                }
                Some(db.write_opt(b, &wo))
            }
            n => match if n <= 95 || !flushes {
                db.sync()
            } else {
                db.flush()
            } {
                Ok(()) => {
                    run.floor = run.states.len() - 1;
                    None
                }
                Err(_) => {
                    run.failed = true;
                    break;
                }
            },
        };
        if let Some(r) = result {
            run.states.push(model.clone());
            match r {
                Ok(()) if sync => run.floor = run.states.len() - 1,
                Ok(()) => {}
                Err(_) => {
                    run.failed = true;
                    break;
                }
            }
        }
    }
    let stats = db.stats();
    run.batched = stats.memtables_committed > stats.commits;
    run.reused = stats.logs_reused > 0;
    run.prepared = stats.logs_prepared > 0;
    drop(db);
    run
}

/// Both keyspaces' pairs with their deadlines (without making the named
/// one).
fn content(db: &Db) -> Model {
    let mut m = Model::new();
    let mut keyspaces = vec![(0, db.keyspace(flexdb::DEFAULT_KEYSPACE).unwrap())];
    if db.has_keyspace(KS) {
        keyspaces.push((1, db.keyspace(KS).unwrap()));
    }
    for (tag, ks) in keyspaces {
        for kv in ks.iter() {
            let (k, v) = kv.unwrap();
            let deadline = match ks.ttl(&k).unwrap() {
                Some(Some(left)) => T0 + left.as_millis() as u64,
                Some(None) => 0,
                None => panic!("a pair the scan saw has no time left"),
            };
            m.insert(tagged(tag, &k), dated(deadline, &v));
        }
    }
    m
}

fn iterations() -> u64 {
    flexsys::test_seed::iterations(150)
}

#[test]
fn every_crash_recovers_a_prefix_with_every_durable_write() {
    let iterations = iterations();
    let name = "every_crash_recovers_a_prefix_with_every_durable_write";
    let master = TestSeed::new(name);
    let (_, _, prepared) = crash_and_recover(name, master.get(), iterations, Setup::default());
    // So must logs prepared ahead of their rotation (a crash between the
    // preparation and the swap leaves an empty newest log).
    assert!(
        prepared * 2 >= iterations,
        "only {prepared} of {iterations} dry runs rotated to a log prepared ahead"
    );
}

#[test]
fn crashes_inside_commits_of_several_memtables_recover_a_prefix() {
    let iterations = iterations();
    let name = "crashes_inside_commits_of_several_memtables_recover_a_prefix";
    let master = TestSeed::new(name);
    let setup = Setup {
        slow_data: Some(Duration::from_millis(2)),
        reorder: false,
    };
    let (batched, reused, _) = crash_and_recover(name, master.get(), iterations, setup);
    // The slow syncs are there to make the committer fall behind: check
    // that they did, or this test tests nothing new.
    assert!(
        batched * 2 >= iterations,
        "only {batched} of {iterations} dry runs committed several MemTables at once"
    );
    // Logs in files that still hold older logs' records must be covered:
    // spares are kept only while the committer is behind (a flush, which
    // lets it catch up, gives them back: `wal::footprint`), so this run
    // syncs where the other flushes.
    assert!(
        reused * 2 >= iterations,
        "only {reused} of {iterations} dry runs had a log take over a committed one's file"
    );
}

#[test]
fn crashes_that_reorder_writes_and_directory_changes_recover_a_prefix() {
    let iterations = iterations();
    let name = "crashes_that_reorder_writes_and_directory_changes_recover_a_prefix";
    let master = TestSeed::new(name);
    let setup = Setup {
        slow_data: None,
        reorder: true,
    };
    crash_and_recover(name, master.get(), iterations, setup);
}

/// Runs `iterations` crashes and recoveries (see the module docs); returns
/// how many of the dry runs committed several MemTables at once, how many
/// had a log take over a committed log's file, and how many rotated to a
/// log prepared ahead.
fn crash_and_recover(name: &str, seed: u64, iterations: u64, setup: Setup) -> (u64, u64, u64) {
    let slow_data = setup.slow_data;
    let mut rng = StdRng::seed_from_u64(seed);
    // Planned crashes that fired (a run may do fewer operations than its
    // dry run, whose background threads interleave differently).
    let mut fired = 0u64;
    let (mut batched, mut reused, mut prepared) = (0, 0, 0);
    // Crashes planned during a recovery, and those that fired (a recovery
    // may run fewer operations than the probe that measured its span).
    let (mut nested, mut nested_fired) = (0u64, 0u64);
    for it in 0..iterations {
        STRICT.set(it % 2 == 1);
        let seed = rng.gen();
        let dry = storage(setup, it, seed);
        let full = workload(seed, dry.clone(), slow_data.is_none());
        assert!(!full.failed, "iteration {it}: the dry run failed");
        batched += u64::from(full.batched);
        reused += u64::from(full.reused);
        prepared += u64::from(full.prepared);
        let total = dry.ops();
        let at = rng.gen_range(0..total.max(1));
        let tear = rng.gen_bool(0.5);
        let storage = storage(setup, it, seed);
        storage.plan(at, Fault::Crash { tear });
        let run = workload(seed, storage.clone(), slow_data.is_none());
        fired += u64::from(storage.crashed());
        let mut image = Arc::new(storage.crash_image());
        // Every third time, crash again while recovering (the replayed logs
        // are being committed), then recover from that.
        if it % 3 == 0 {
            let probe = Arc::new(image.crash_image());
            let before = probe.ops();
            if let Ok(db) = Db::open_with_storage(probe.clone(), "crash", opts()) {
                let _ = db.flush();
                drop(db);
            }
            let span = probe.ops() - before;
            let again = Arc::new(image.crash_image());
            again.plan(
                rng.gen_range(0..span.max(1)),
                Fault::Crash { tear: rng.gen() },
            );
            // The second recovery fails where the crash hits it; whether
            // it did is counted below.
            if let Ok(db) = Db::open_with_storage(again.clone(), "crash", opts()) {
                let _ = db.flush();
                drop(db);
            }
            if span > 0 {
                nested += 1;
                nested_fired += u64::from(again.crashed());
            }
            image = Arc::new(again.crash_image());
        }
        let db = match Db::open_with_storage(image.clone(), "crash", opts()) {
            Ok(db) => db,
            // A crash before the store's creation was durable.
            Err(flexdb::Error::NotFound(_)) if run.floor == 0 => continue,
            Err(e) => panic!("iteration {it} (seed {seed}, crash at {at}/{total}): reopen: {e}"),
        };
        let got = content(&db);
        let ok = run.states[run.floor..].contains(&got);
        if !ok {
            let any = run.states.iter().position(|s| *s == got);
            eprintln!("iteration {it}: the recovered state is state {any:?} of the run");
        }
        assert!(
            ok,
            "iteration {it} (seed {seed}, crash at {at}/{total}, tear {tear}): recovered {} pairs, \
             not a state from {} to {} (failed: {})",
            got.len(),
            run.floor,
            run.states.len() - 1,
            run.failed
        );
        let report = db.check().unwrap();
        assert!(report.is_ok(), "iteration {it}: {:?}", report.problems);
        // The recovered store keeps working and survives a clean reopen.
        db.put(b"after", b"crash").unwrap();
        db.close().unwrap();
        let db = Db::open_with_storage(image, "crash", opts()).unwrap();
        let mut want = got;
        want.insert(tagged(0, b"after"), dated(0, b"crash"));
        assert_eq!(content(&db), want, "iteration {it}: after reopen");
    }
    eprintln!(
        "{name}: {fired} of {iterations} planned crashes fired, and {nested_fired} of {nested} \
         during a recovery"
    );
    assert!(
        fired * 10 >= iterations * 9,
        "only {fired} of {iterations} planned crashes fired"
    );
    // Most planned crashes during recovery must have fired, or the
    // recovery of a recovery is not tested (50 of 50 in two runs).
    assert!(
        nested_fired * 2 >= nested,
        "only {nested_fired} of {nested} crashes planned during a recovery happened"
    );
    (batched, reused, prepared)
}
