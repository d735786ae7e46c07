//! Crashes under concurrent writers, on the fault-injecting backend with
//! production's write path (write-ahead logs appended through writable
//! mappings, `flexspace::MappableFile`).
//!
//! Four writer threads each write their own keys (`t{n}/...`): puts,
//! deletes and batches, every value naming the thread's write number; some
//! writes are synced (`WriteOptions { sync: true }`), and now and then a
//! thread calls `Db::sync`. The machine crashes at a random storage
//! operation of any thread: a writer's, or a background thread's (the
//! committer, the log's helpers, the space's writers), whose failure no
//! writer sees at once. After recovery the contract (docs/DESIGN.md,
//! "Durability and recovery") is checked per thread:
//!
//! - the thread's keys hold the state after some prefix of its writes (a
//!   batch all or nothing), since the store recovers a prefix of all
//!   acknowledged writes in their order;
//! - that prefix holds every write the thread had acknowledged before the
//!   start of any sync that was acknowledged (a synced write of any
//!   thread, or `Db::sync`): writes get their place in the order when
//!   they are acknowledged, so a sync that starts later is ordered after
//!   them and makes them durable; and a thread's own synced write.
//!
//! Crashes alternate between the two crash models (`SyncedOnly`, and
//! `Reorder`, which also undoes directory changes not synced). A third of
//! the runs syncs the space's data file slowly, so the committer falls
//! behind the writers and crashes land inside commits of several
//! MemTables.
//!
//! `CRASH_ITERATIONS` sets the number of crashes (default 60); the master
//! seed is random unless `CRASH_SEED` sets it, and a failure prints it
//! (`flexsys::test_seed`). Thread interleavings are not reproducible from
//! the seed, only the workloads and crash points. The test prints how many
//! planned crashes fired, and how many in a background thread (run with
//! `--nocapture`), and checks that most fired and some hit a background
//! thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flexdb::{Db, Options, WriteBatch, WriteOptions};
use flexspace::{CrashModel, Fault, FaultStorage};
use flexsys::test_seed::TestSeed;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const THREADS: usize = 4;
const WRITES_PER_THREAD: usize = 60;

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(4096)
        .cache_bytes(32 << 10)
}

/// What one writer thread did: its keys' state after each of its writes
/// (index 0: before any).
struct Thread {
    states: Vec<Model>,
}

/// What the writers share while they run: each thread's acknowledged
/// writes so far, and each thread's floor (the fewest of its writes a
/// recovery may hold).
struct Shared {
    acked: [AtomicUsize; THREADS],
    floors: Mutex<[usize; THREADS]>,
}

impl Shared {
    /// The writes each thread had acknowledged, read before a sync starts.
    fn acked_now(&self) -> [usize; THREADS] {
        std::array::from_fn(|t| self.acked[t].load(Ordering::SeqCst))
    }

    /// A sync that started after `before` was acknowledged.
    fn synced(&self, before: [usize; THREADS]) {
        let mut floors = self.floors.lock().unwrap();
        for (f, b) in floors.iter_mut().zip(before) {
            *f = (*f).max(b);
        }
    }
}

/// One writer: `WRITES_PER_THREAD` writes drawn from `seed`, stopping at
/// the first error (a crash makes every later storage operation fail,
/// though an append that lands in a mapping is acknowledged all the
/// same: it is simply not durable).
fn writer(db: &Db, t: usize, seed: u64, shared: &Shared) -> Thread {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut states = vec![Model::new()];
    let key = |rng: &mut StdRng| format!("t{t}/{:02}", rng.gen_range(0..40)).into_bytes();
    for i in 1..=WRITES_PER_THREAD {
        let value = |rng: &mut StdRng| {
            let mut v = format!("t{t} write {i}:").into_bytes();
            v.resize(v.len() + rng.gen_range(0..200), b'.');
            v
        };
        if rng.gen_ratio(1, 15) {
            let before = shared.acked_now();
            match db.sync() {
                Ok(()) => shared.synced(before),
                Err(_) => break,
            }
        }
        let sync = rng.gen_ratio(1, 8);
        let wo = WriteOptions { sync };
        let before = shared.acked_now();
        let result = match rng.gen_range(0..100) {
            0..=59 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                model.insert(k.clone(), v.clone());
                db.put_opt(&k, &v, &wo)
            }
            60..=79 => {
                let k = key(&mut rng);
                model.remove(&k);
                db.delete_opt(&k, &wo)
            }
            _ => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..6) {
                    let k = key(&mut rng);
                    if rng.gen_bool(0.8) {
                        let v = value(&mut rng);
                        b.put(&k, &v).unwrap();
                        model.insert(k, v);
                    } else {
                        b.delete(&k).unwrap();
                        model.remove(&k);
                    }
                }
                db.write_opt(b, &wo)
            }
        };
        states.push(model.clone());
        if result.is_err() {
            break;
        }
        shared.acked[t].store(i, Ordering::SeqCst);
        if sync {
            // Every thread's writes acknowledged before it, and this one.
            let mut own = before;
            own[t] = i;
            shared.synced(own);
        }
    }
    Thread { states }
}

/// A run: the store opened on `storage`, four writers, then a close.
/// Returns each thread's states and floors, or `None` when the store did
/// not open.
fn run(storage: Arc<FaultStorage>, seed: u64) -> Option<(Vec<Thread>, [usize; THREADS])> {
    let db = Arc::new(Db::open_with_storage(storage, "crash", opts()).ok()?);
    let shared = Arc::new(Shared {
        acked: Default::default(),
        floors: Mutex::new([0; THREADS]),
    });
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, shared) = (db.clone(), shared.clone());
            std::thread::Builder::new()
                .name(format!("writer-{t}"))
                .spawn(move || writer(&db, t, seed ^ ((t as u64 + 1) * 0x9E37), &shared))
                .unwrap()
        })
        .collect();
    let threads = handles.into_iter().map(|h| h.join().unwrap()).collect();
    drop(db);
    let floors = *shared.floors.lock().unwrap();
    Some((threads, floors))
}

fn storage(seed: u64, reorder: bool, slow: bool) -> Arc<FaultStorage> {
    let st = if reorder {
        FaultStorage::with_model(CrashModel::Reorder { seed })
    } else {
        FaultStorage::new()
    };
    if slow {
        st.slow_syncs("data", Duration::from_millis(2));
    }
    Arc::new(st)
}

#[test]
fn each_threads_recovered_writes_are_a_prefix_holding_all_it_acknowledged_before_a_sync() {
    let name =
        "each_threads_recovered_writes_are_a_prefix_holding_all_it_acknowledged_before_a_sync";
    let master = TestSeed::new(name);
    let iterations = flexsys::test_seed::iterations(60);
    let mut rng = StdRng::seed_from_u64(master.get());
    let (mut fired, mut in_background) = (0u64, 0u64);
    for it in 0..iterations {
        let seed: u64 = rng.gen();
        let (reorder, slow) = (it % 2 == 1, it % 3 == 2);
        let dry = storage(seed, reorder, slow);
        run(dry.clone(), seed).expect("the dry run opens the store");
        let total = dry.ops();
        let at = rng.gen_range(0..total.max(1));
        let tear = rng.gen_bool(0.5);
        let st = storage(seed, reorder, slow);
        st.plan(at, Fault::Crash { tear });
        let outcome = run(st.clone(), seed);
        fired += u64::from(st.crashed());
        let hit = st.crash_thread();
        if st.crashed() && !hit.as_deref().is_some_and(|n| n.starts_with("writer-")) {
            in_background += 1;
        }
        let what = format!(
            "iteration {it} (seed {seed}, crash at {at}/{total} in {hit:?}, tear {tear}, \
             reorder {reorder})"
        );
        let image = Arc::new(st.crash_image());
        let db = match Db::open_with_storage(image.clone(), "crash", opts()) {
            Ok(db) => db,
            // The crash came before the store's creation was durable.
            Err(flexdb::Error::NotFound(_)) => {
                let floors = outcome.map_or([0; THREADS], |o| o.1);
                assert_eq!(floors, [0; THREADS], "{what}: the store is gone");
                continue;
            }
            Err(e) => panic!("{what}: reopen: {e}"),
        };
        let got: Model = db.iter().map(|kv| kv.unwrap()).collect();
        let Some((threads, floors)) = outcome else {
            // The store never opened: nothing was acknowledged.
            continue;
        };
        for (t, thread) in threads.iter().enumerate() {
            let prefix = format!("t{t}/").into_bytes();
            let mine: Model = got
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let found = thread.states.iter().rposition(|s| *s == mine);
            match found {
                Some(n) => assert!(
                    thread.states[floors[t]..].contains(&mine),
                    "{what}: thread {t} recovered its first {n} writes, but had {} \
                     acknowledged before an acknowledged sync",
                    floors[t]
                ),
                None => panic!(
                    "{what}: thread {t}'s {} recovered pairs are no prefix of its {} writes",
                    mine.len(),
                    thread.states.len() - 1
                ),
            }
        }
        assert!(got
            .keys()
            .all(|k| (0..THREADS).any(|t| k.starts_with(format!("t{t}/").as_bytes()))));
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{what}: {:?}", report.problems);
        // The recovered store takes writes and keeps them across a reopen.
        db.put(b"after", b"crash").unwrap();
        db.close().unwrap();
        let db = Db::open_with_storage(image, "crash", opts()).unwrap();
        let mut want = got;
        want.insert(b"after".to_vec(), b"crash".to_vec());
        let again: Model = db.iter().map(|kv| kv.unwrap()).collect();
        assert_eq!(again, want, "{what}: after reopen");
    }
    eprintln!(
        "{name}: {fired} of {iterations} planned crashes fired, {in_background} in a background \
         thread"
    );
    assert!(
        fired * 10 >= iterations * 8,
        "only {fired} of {iterations} planned crashes fired"
    );
    assert!(
        iterations < 20 || in_background > 0,
        "no crash of {fired} hit a background thread"
    );
}
