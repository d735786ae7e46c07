//! Readers during writes, inserts, collapses and garbage collection always
//! see a state the writer produced: here, a space of records (one id
//! repeated; 2 KiB) kept sorted by id, which every moment of the writer's history
//! satisfies and a torn or mixed read would not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flexspace::{FlexSpace, Options, SEGMENT_SIZE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REC: usize = 2048;

fn record(id: u64) -> Vec<u8> {
    id.to_be_bytes().repeat(REC / 8)
}

fn check_record(r: &[u8]) -> u64 {
    let id = &r[..8];
    assert!(r.chunks(8).all(|c| c == id), "torn record");
    u64::from_be_bytes(id.try_into().unwrap())
}

#[test]
fn readers_see_only_states_the_writer_made() {
    let dir = tempfile::tempdir().unwrap();
    // A small data file so garbage collection runs during the test.
    let opts = Options::new().create(true).max_data_size(8 * SEGMENT_SIZE);
    let space = Arc::new(FlexSpace::open(dir.path(), opts).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let space = space.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let len = space.len();
                    let mut buf = vec![0u8; len as usize];
                    let n = space.read(0, &mut buf).unwrap();
                    // The space may have changed between len() and read():
                    // only what read() returned is one moment.
                    let buf = &buf[..n];
                    if n as u64 == len {
                        assert_eq!(n % REC, 0);
                        let mut last = None;
                        for r in buf.chunks(REC) {
                            let id = check_record(r);
                            assert!(last.is_none_or(|l| l < id), "records out of order");
                            last = Some(id);
                        }
                    }
                    if len >= REC as u64 {
                        let at = rng.gen_range(0..len / REC as u64) * REC as u64;
                        let mut r = vec![0u8; REC];
                        if space.read(at, &mut r).unwrap() == REC {
                            check_record(&r);
                        }
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(99);
    let mut ids: Vec<u64> = Vec::new();
    for i in 0..60_000u64 {
        if ids.len() < 6_000 && (ids.len() < 100 || rng.gen_bool(0.6)) {
            let id = rng.gen::<u64>() >> 1;
            let pos = ids.partition_point(|&x| x < id);
            if ids.get(pos) == Some(&id) {
                continue;
            }
            space.insert((pos * REC) as u64, &record(id)).unwrap();
            ids.insert(pos, id);
        } else {
            let pos = rng.gen_range(0..ids.len());
            space.collapse((pos * REC) as u64, REC as u64).unwrap();
            ids.remove(pos);
        }
        if i % 5000 == 0 {
            space.sync().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    space.check_invariants();
    let mut buf = vec![0u8; space.len() as usize];
    space.read(0, &mut buf).unwrap();
    let got: Vec<u64> = buf.chunks(REC).map(check_record).collect();
    assert_eq!(got, ids);
    assert!(
        space.stats().gc_runs > 0,
        "the test must run garbage collection"
    );
}

const MAX_RECORDS: usize = 3_000;

/// A hash of a state (the ids of its records, in order).
fn state_hash(ids: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for id in ids {
        for b in id.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    h ^ ids.len() as u64
}

/// Readers (whole reads and planned reads), one writer, and a maintenance
/// thread running commits, garbage collection and checkpoints through
/// `maintain` and `checkpoint` (automatic maintenance off, as the layer
/// above runs it). Every whole read must equal a state in the writer's
/// history: the writer records each state before it makes it.
#[test]
fn readers_match_the_writers_history_under_forced_maintenance() {
    history_under_forced_maintenance(false);
}

/// The same with reads through the memory mapping of the data file.
#[test]
fn readers_match_the_writers_history_with_mmap_reads() {
    history_under_forced_maintenance(true);
}

fn history_under_forced_maintenance(mmap: bool) {
    use std::collections::HashSet;
    use std::sync::Mutex;

    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new()
        .create(true)
        .mmap_reads(mmap)
        .max_data_size(8 * SEGMENT_SIZE)
        .auto_maintenance(false)
        .commit_log_bytes(16 << 10)
        .checkpoint_log_bytes(256 << 10)
        .gc_garbage(0.3, 0.2);
    let space = Arc::new(FlexSpace::open(dir.path(), opts.clone()).unwrap());
    let history = Arc::new(Mutex::new(HashSet::from([state_hash(&[])])));
    let stop = Arc::new(AtomicBool::new(false));
    let whole_reader = {
        let (space, stop, history) = (space.clone(), stop.clone(), history.clone());
        std::thread::spawn(move || {
            let mut checked = 0u64;
            // Larger than the space ever gets, so a read returns all of it:
            // one moment of its history.
            let mut buf = vec![0u8; (MAX_RECORDS + 1) * REC];
            while !stop.load(Ordering::Relaxed) {
                let n = space.read(0, &mut buf).unwrap();
                assert!(n < buf.len());
                assert_eq!(n % REC, 0);
                let ids: Vec<u64> = buf[..n].chunks(REC).map(check_record).collect();
                let h = state_hash(&ids);
                assert!(
                    history.lock().unwrap().contains(&h),
                    "a read saw a state the writer never made ({} records)",
                    ids.len()
                );
                checked += 1;
            }
            checked
        })
    };
    let plan_reader = {
        let (space, stop) = (space.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(5);
            let mut r = vec![0u8; REC];
            while !stop.load(Ordering::Relaxed) {
                let recs = space.len() / REC as u64;
                if recs == 0 {
                    continue;
                }
                let at = rng.gen_range(0..recs) * REC as u64;
                let plan = match space.plan_read(at, REC as u64) {
                    Ok(plan) => plan,
                    // A collapse since `len` ended the space before `at`:
                    // the typed answer for an offset past the end.
                    Err(flexspace::Error::OutOfRange { offset, size, .. }) => {
                        assert!(offset > size, "{offset} past {size}");
                        continue;
                    }
                    Err(e) => panic!("plan_read: {e}"),
                };
                if plan.len() == REC {
                    plan.read(&mut r).unwrap();
                    check_record(&r);
                }
            }
        })
    };
    let maintainer = {
        let (space, stop) = (space.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if space.maintenance_due() {
                    space.maintain().unwrap();
                }
                i += 1;
                if i.is_multiple_of(2000) {
                    space.checkpoint().unwrap();
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        })
    };
    let mut rng = StdRng::seed_from_u64(17);
    let mut ids: Vec<u64> = Vec::new();
    for _ in 0..40_000u64 {
        space.reserve(REC as u64).unwrap();
        if ids.len() < MAX_RECORDS && (ids.len() < 100 || rng.gen_bool(0.55)) {
            let id = rng.gen::<u64>() >> 1;
            let pos = ids.partition_point(|&x| x < id);
            if ids.get(pos) == Some(&id) {
                continue;
            }
            let mut next = ids.clone();
            next.insert(pos, id);
            history.lock().unwrap().insert(state_hash(&next));
            space.insert((pos * REC) as u64, &record(id)).unwrap();
            ids = next;
        } else {
            let pos = rng.gen_range(0..ids.len());
            let mut next = ids.clone();
            next.remove(pos);
            history.lock().unwrap().insert(state_hash(&next));
            space.collapse((pos * REC) as u64, REC as u64).unwrap();
            ids = next;
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(whole_reader.join().unwrap() > 0);
    plan_reader.join().unwrap();
    maintainer.join().unwrap();
    let st = space.stats();
    assert!(st.gc_runs > 0, "{st:?}");
    assert!(st.checkpoints > 0 && st.commits > 0, "{st:?}");
    assert_eq!(space.check().unwrap(), Vec::<String>::new());
    space.check_invariants();
    let mut buf = vec![0u8; space.len() as usize];
    space.read(0, &mut buf).unwrap();
    let got: Vec<u64> = buf.chunks(REC).map(check_record).collect();
    assert_eq!(got, ids);
    let space = Arc::try_unwrap(space).ok().unwrap();
    space.close().unwrap();
    let space = FlexSpace::open(dir.path(), opts).unwrap();
    let mut buf = vec![0u8; space.len() as usize];
    space.read(0, &mut buf).unwrap();
    let got: Vec<u64> = buf.chunks(REC).map(check_record).collect();
    assert_eq!(got, ids);
}
