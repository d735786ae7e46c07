//! Model-based tests: random put/delete/range delete/batch/get/iterate/
//! flush/reopen sequences against a `BTreeMap`, with a tiny MemTable and cache so that
//! commits, interval splits and merges, and cache evictions happen all the
//! time.

mod common;

use common::{bound, range_ok};
use std::collections::BTreeMap;
use std::ops::RangeBounds;
use std::sync::Arc;

use flexdb::{Db, Options, WriteBatch};
use flexspace::FaultStorage;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options::new()
        .create_if_missing(true)
        .memtable_bytes(1024)
        .cache_bytes(16 << 10)
}

/// Keys from a small alphabet so that operations collide, of varied length
/// (prefixes of each other too).
fn key(rng: &mut StdRng) -> Vec<u8> {
    let n = rng.gen_range(0..6);
    (0..n).map(|_| b"abcdz"[rng.gen_range(0..5)]).collect()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let n = match rng.gen_range(0..20) {
        0 => 0,
        1 => rng.gen_range(1000..20_000),
        _ => rng.gen_range(1..60),
    };
    let b: u8 = rng.gen();
    (0..n).map(|i| b.wrapping_add(i as u8)).collect()
}

fn check_range(db: &Db, model: &Model, rng: &mut StdRng) -> Result<(), TestCaseError> {
    let (lo, hi) = (bound(rng, key), bound(rng, key));
    if !range_ok(&lo, &hi) {
        return Ok(());
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut it = db.range::<Vec<u8>, _>((lo, hi));
    match rng.gen_range(0..3) {
        0 => {
            let got: Vec<_> = it.map(|kv| kv.unwrap()).collect();
            prop_assert_eq!(got, want);
        }
        1 => {
            let got: Vec<_> = it.rev().map(|kv| kv.unwrap()).collect();
            let mut w = want;
            w.reverse();
            prop_assert_eq!(got, w);
        }
        _ => {
            // Alternate ends; together they must produce every pair once.
            let mut front = Vec::new();
            let mut back = Vec::new();
            loop {
                let a = it.next().map(|kv| kv.unwrap());
                let b = it.next_back().map(|kv| kv.unwrap());
                if a.is_none() && b.is_none() {
                    break;
                }
                front.extend(a);
                back.extend(b);
            }
            back.reverse();
            front.extend(back);
            prop_assert_eq!(front, want);
        }
    }
    Ok(())
}

/// Where a run keeps its store: in memory or in a real directory.
enum Place {
    Memory(Arc<FaultStorage>),
    Dir(tempfile::TempDir),
}

impl Place {
    fn open(&self) -> Db {
        match self {
            Place::Memory(s) => Db::open_with_storage(s.clone(), "model", opts()).unwrap(),
            Place::Dir(d) => Db::open(d.path(), opts()).unwrap(),
        }
    }
}

fn run(seed: u64, steps: usize, place: Place) -> Result<(), TestCaseError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = place.open();
    let mut model = Model::new();
    for _ in 0..steps {
        match rng.gen_range(0..100) {
            0..=34 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            35..=46 => {
                let k = key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            47..=49 => {
                let (lo, hi) = (bound(&mut rng, key), bound(&mut rng, key));
                if range_ok(&lo, &hi) {
                    model.retain(|k, _| !(lo.clone(), hi.clone()).contains(k));
                    db.delete_range::<Vec<u8>, _>((lo, hi)).unwrap();
                }
            }
            50..=57 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..10) {
                    let k = key(&mut rng);
                    if rng.gen_ratio(1, 10) {
                        // A range delete, in order with the batch's other
                        // writes.
                        let end = key(&mut rng);
                        if k <= end {
                            model.retain(|m, _| *m < k || *m >= end);
                            b.delete_range(&k[..]..&end[..]).unwrap();
                        }
                    } else if rng.gen_bool(0.7) {
                        let v = value(&mut rng);
                        b.put(&k, &v).unwrap();
                        model.insert(k, v);
                    } else {
                        b.delete(&k).unwrap();
                        model.remove(&k);
                    }
                }
                db.write(b).unwrap();
            }
            58..=79 => {
                let k = key(&mut rng);
                prop_assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
                let len = db.get_with(&k, |v| v.map(<[u8]>::len)).unwrap();
                prop_assert_eq!(len, model.get(&k).map(Vec::len));
            }
            80..=92 => check_range(&db, &model, &mut rng)?,
            93..=95 => db.flush().unwrap(),
            96..=97 => {
                let r = db.check().unwrap();
                prop_assert!(r.is_ok(), "{:?}", r.problems);
            }
            _ => {
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    drop(db);
                }
                db = place.open();
            }
        }
    }
    let all: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    let want: Vec<_> = model.into_iter().collect();
    prop_assert_eq!(all, want);
    db.flush().unwrap();
    let r = db.check().unwrap();
    prop_assert!(r.is_ok(), "{:?}", r.problems);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_match_a_btreemap(seed in any::<u64>()) {
        run(seed, 1500, Place::Memory(Arc::new(FaultStorage::new())))?;
    }
}

#[test]
fn long_run_with_many_splits() {
    run(42, 8_000, Place::Dir(tempfile::tempdir().unwrap())).unwrap();
}
