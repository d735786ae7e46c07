//! Model-based tests: random put/delete/range delete/batch/get/iterate/
//! flush/reopen/keyspace drop sequences over three keyspaces (the default
//! one through `Db`'s methods or a handle, and two named ones) against a
//! `BTreeMap` each, with a tiny MemTable and cache so that commits,
//! interval splits and merges, and cache evictions happen all the time.

mod common;

use common::{bound, range_ok};
use std::collections::BTreeMap;
use std::ops::RangeBounds;
use std::sync::Arc;

use flexdb::{Db, Keyspace, Options, WriteBatch};
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
/// (prefixes of each other too); `0xFF`, the byte keyspace prefixes start
/// with, among them.
fn key(rng: &mut StdRng) -> Vec<u8> {
    let n = rng.gen_range(0..6);
    (0..n).map(|_| b"abcdz\xff"[rng.gen_range(0..6)]).collect()
}

/// The keyspaces of a run: the default one and two named ones.
const NAMES: [&str; 3] = ["default", "a", "b"];

/// The reads and writes of keyspace `NAMES[i]`: the default keyspace
/// through `Db`'s own methods or through a handle, by a coin.
enum Space<'d> {
    Db(&'d Db),
    Ks(Keyspace),
}

impl Space<'_> {
    fn of<'d>(db: &'d Db, i: usize, rng: &mut StdRng) -> Space<'d> {
        if i == 0 && rng.gen_bool(0.5) {
            Space::Db(db)
        } else {
            Space::Ks(db.keyspace(NAMES[i]).unwrap())
        }
    }

    fn put(&self, k: &[u8], v: &[u8]) {
        match self {
            Space::Db(d) => d.put(k, v).unwrap(),
            Space::Ks(s) => s.put(k, v).unwrap(),
        }
    }

    fn delete(&self, k: &[u8]) {
        match self {
            Space::Db(d) => d.delete(k).unwrap(),
            Space::Ks(s) => s.delete(k).unwrap(),
        }
    }

    fn delete_range(&self, r: (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>)) {
        match self {
            Space::Db(d) => d.delete_range::<Vec<u8>, _>(r).unwrap(),
            Space::Ks(s) => s.delete_range::<Vec<u8>, _>(r).unwrap(),
        }
    }

    fn get(&self, k: &[u8]) -> Option<Vec<u8>> {
        match self {
            Space::Db(d) => d.get(k).unwrap(),
            Space::Ks(s) => s.get(k).unwrap(),
        }
    }

    fn len_of(&self, k: &[u8]) -> Option<usize> {
        let len = |v: Option<&[u8]>| v.map(<[u8]>::len);
        match self {
            Space::Db(d) => d.get_with(k, len).unwrap(),
            Space::Ks(s) => s.get_with(k, len).unwrap(),
        }
    }

    fn range(
        &self,
        r: (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>),
    ) -> flexdb::Iter<'static> {
        match self {
            Space::Db(d) => d.range::<Vec<u8>, _>(r),
            Space::Ks(s) => s.range::<Vec<u8>, _>(r),
        }
    }
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

fn check_range(db: &Space, model: &Model, rng: &mut StdRng) -> Result<(), TestCaseError> {
    let (lo, hi) = (bound(rng, key), bound(rng, key));
    if !range_ok(&lo, &hi) {
        return Ok(());
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // Half the scans limited (`Iter::limit`), often below a refill.
    let n = if rng.gen_bool(0.5) {
        rng.gen_range(0..150)
    } else {
        usize::MAX
    };
    let limited = |it: flexdb::Iter<'static>| if n == usize::MAX { it } else { it.limit(n) };
    let mut it = limited(db.range((lo, hi)));
    let take = n.min(want.len());
    match rng.gen_range(0..5) {
        4 => walk_both_ends(&mut it, &want, n, rng)?,
        0 => {
            let got: Vec<_> = it.map(|kv| kv.unwrap()).collect();
            prop_assert_eq!(&got[..], &want[..take]);
        }
        1 => {
            let got: Vec<_> = it.rev().map(|kv| kv.unwrap()).collect();
            let mut w = want[want.len() - take..].to_vec();
            w.reverse();
            prop_assert_eq!(got, w);
        }
        2 => {
            // Lent pairs, forward.
            let mut got = Vec::new();
            while let Some(kv) = it.next_ref() {
                let (k, v) = kv.unwrap();
                got.push((k.to_vec(), v.to_vec()));
            }
            prop_assert_eq!(&got[..], &want[..take]);
        }
        _ => {
            // Alternate ends; together they must produce every pair once
            // (the limit's worth of them, from both ends).
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
            prop_assert_eq!(front.len() + back.len(), take);
            prop_assert_eq!(&front[..], &want[..front.len()]);
            prop_assert_eq!(&back[..], &want[want.len() - back.len()..]);
        }
    }
    Ok(())
}

/// Drives `it` (over `want`'s range, limited to `n` pairs) by a random
/// mix of lent and copied pairs from either end and seeks of either end,
/// each checked against a cursor over `want`: the front at `f`, the back
/// below `b`, a seek moving its end to the first key at or past the key
/// sought (the front may move back over pairs it yielded), the ends never
/// crossing, and `n` pairs yielded at most in all.
fn walk_both_ends(
    it: &mut flexdb::Iter<'static>,
    want: &[(Vec<u8>, Vec<u8>)],
    n: usize,
    rng: &mut StdRng,
) -> Result<(), TestCaseError> {
    let (mut f, mut b, mut left) = (0, want.len(), n);
    for _ in 0..rng.gen_range(1..3 * want.len() + 8) {
        match rng.gen_range(0..10) {
            0..=3 => {
                let got = it.next_ref().map(|kv| {
                    let (k, v) = kv.unwrap();
                    (k.to_vec(), v.to_vec())
                });
                let expect = (left > 0 && f < b).then(|| want[f].clone());
                if expect.is_some() {
                    (f, left) = (f + 1, left - 1);
                }
                prop_assert_eq!(got, expect);
            }
            4 => {
                let got = it.next().map(|kv| kv.unwrap());
                let expect = (left > 0 && f < b).then(|| want[f].clone());
                if expect.is_some() {
                    (f, left) = (f + 1, left - 1);
                }
                prop_assert_eq!(got, expect);
            }
            5..=7 => {
                let got = it.next_back().map(|kv| kv.unwrap());
                let expect = (left > 0 && f < b).then(|| want[b - 1].clone());
                if expect.is_some() {
                    (b, left) = (b - 1, left - 1);
                }
                prop_assert_eq!(got, expect);
            }
            8 => {
                let k = key(rng);
                it.seek(&k);
                f = want.partition_point(|(w, _)| *w < k);
            }
            _ => {
                let k = key(rng);
                it.seek_back(&k);
                b = want.partition_point(|(w, _)| *w <= k);
            }
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
    let mut models = [Model::new(), Model::new(), Model::new()];
    for _ in 0..steps {
        // The default keyspace half the time, each named one a quarter.
        let i = [0, 0, 1, 2][rng.gen_range(0..4)];
        let space = Space::of(&db, i, &mut rng);
        let model = &mut models[i];
        match rng.gen_range(0..100) {
            0..=34 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                space.put(&k, &v);
                model.insert(k, v);
            }
            35..=46 => {
                let k = key(&mut rng);
                space.delete(&k);
                model.remove(&k);
            }
            47..=49 => {
                let (lo, hi) = (bound(&mut rng, key), bound(&mut rng, key));
                if range_ok(&lo, &hi) {
                    model.retain(|k, _| !(lo.clone(), hi.clone()).contains(k));
                    space.delete_range((lo, hi));
                }
            }
            50..=57 => {
                // A batch over every keyspace.
                let handles: Vec<Keyspace> =
                    NAMES.iter().map(|n| db.keyspace(n).unwrap()).collect();
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..10) {
                    let j = rng.gen_range(0..3);
                    let (ks, model) = (&handles[j], &mut models[j]);
                    let direct = j == 0 && rng.gen_bool(0.5);
                    let k = key(&mut rng);
                    if rng.gen_ratio(1, 10) {
                        // A range delete, in order with the batch's other
                        // writes.
                        let end = key(&mut rng);
                        if k <= end {
                            model.retain(|m, _| *m < k || *m >= end);
                            if direct {
                                b.delete_range(&k[..]..&end[..]).unwrap();
                            } else {
                                b.delete_range_in(ks, &k[..]..&end[..]).unwrap();
                            }
                        }
                    } else if rng.gen_bool(0.7) {
                        let v = value(&mut rng);
                        if direct {
                            b.put(&k, &v).unwrap();
                        } else {
                            b.put_in(ks, &k, &v).unwrap();
                        }
                        model.insert(k, v);
                    } else {
                        if direct {
                            b.delete(&k).unwrap();
                        } else {
                            b.delete_in(ks, &k).unwrap();
                        }
                        model.remove(&k);
                    }
                }
                db.write(b).unwrap();
            }
            58..=79 => {
                let k = key(&mut rng);
                prop_assert_eq!(space.get(&k), model.get(&k).cloned());
                prop_assert_eq!(space.len_of(&k), model.get(&k).map(Vec::len));
            }
            80..=91 => check_range(&space, model, &mut rng)?,
            92 => {
                if i > 0 {
                    drop(space);
                    prop_assert!(db.drop_keyspace(NAMES[i]).unwrap() || model.is_empty());
                    model.clear();
                }
            }
            93..=95 => db.flush().unwrap(),
            96..=97 => {
                let r = db.check().unwrap();
                prop_assert!(r.is_ok(), "{:?}", r.problems);
            }
            _ => {
                drop(space);
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    drop(db);
                }
                db = place.open();
            }
        }
    }
    for (i, model) in models.into_iter().enumerate() {
        let all: Vec<_> = db
            .keyspace(NAMES[i])
            .unwrap()
            .iter()
            .map(|kv| kv.unwrap())
            .collect();
        let want: Vec<_> = model.into_iter().collect();
        prop_assert_eq!(all, want, "keyspace {}", NAMES[i]);
    }
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
