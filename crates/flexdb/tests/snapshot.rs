//! Snapshots and consistent iterators: a versioned model test (random
//! writes, batches, snapshots taken and released, reads through old
//! snapshots, on a store whose tiny MemTables and cache keep the committer
//! and the cache busy) and the atomic-scan test (batches move one token
//! among 1,000 keys while scanners run; every scan sees exactly one).

mod common;

use common::{bound, range_ok};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flexdb::{Db, Options, Snapshot, WriteBatch};
use flexspace::FaultStorage;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:03}", rng.gen_range(0..300)).into_bytes()
}

fn value(rng: &mut StdRng, step: usize) -> Vec<u8> {
    let n = match rng.gen_range(0..20) {
        0 => 0,
        1 => rng.gen_range(1000..6000),
        _ => rng.gen_range(1..80),
    };
    let mut v = format!("{step}:").into_bytes();
    v.resize(v.len() + n, b'a' + (step % 26) as u8);
    v
}

/// Reads `snap` against `model` (the state when it was taken): a few gets
/// and one range, forward, backward or from both ends.
fn check_snapshot(snap: &Snapshot, model: &Model, rng: &mut StdRng) -> Result<(), TestCaseError> {
    for _ in 0..3 {
        let k = key(rng);
        prop_assert_eq!(snap.get(&k).unwrap(), model.get(&k).cloned(), "get {:?}", k);
        let borrowed = snap.get_with(&k, |v| v.map(<[u8]>::to_vec)).unwrap();
        prop_assert_eq!(borrowed, model.get(&k).cloned(), "get_with {:?}", k);
    }
    let (lo, hi) = (bound(rng, key), bound(rng, key));
    if !range_ok(&lo, &hi) {
        return Ok(());
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let it = snap.range::<Vec<u8>, _>((lo, hi));
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
            // Both ends, alternating.
            let mut it = it;
            let (mut front, mut back) = (Vec::new(), Vec::new());
            loop {
                let n = if (front.len() + back.len()) % 2 == 0 {
                    it.next().map(|kv| front.push(kv.unwrap()))
                } else {
                    it.next_back().map(|kv| back.push(kv.unwrap()))
                };
                if n.is_none() {
                    // One end ran dry: the other may still hold pairs.
                    front.extend(it.by_ref().map(|kv| kv.unwrap()));
                    break;
                }
            }
            back.reverse();
            front.extend(back);
            prop_assert_eq!(front, want);
        }
    }
    Ok(())
}

fn run(seed: u64, steps: usize) -> Result<(), TestCaseError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let storage = Arc::new(FaultStorage::new());
    let opts = Options::new()
        .create_if_missing(true)
        .memtable_bytes(1024)
        .cache_bytes(8 << 10);
    let db = Db::open_with_storage(storage, "snapshots", opts).unwrap();
    let mut model = Model::new();
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    for step in 0..steps {
        match rng.gen_range(0..100) {
            0..=39 => {
                let (k, v) = (key(&mut rng), value(&mut rng, step));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            40..=49 => {
                let k = key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            50..=59 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..12) {
                    let k = key(&mut rng);
                    if rng.gen_bool(0.3) {
                        b.delete(&k).unwrap();
                        model.remove(&k);
                    } else {
                        let v = value(&mut rng, step);
                        b.put(&k, &v).unwrap();
                        model.insert(k, v);
                    }
                }
                db.write(b).unwrap();
            }
            60..=66 => {
                if snaps.len() < 8 {
                    snaps.push((db.snapshot(), model.clone()));
                }
            }
            67..=71 => {
                if !snaps.is_empty() {
                    let i = rng.gen_range(0..snaps.len());
                    snaps.swap_remove(i);
                }
            }
            72..=89 => {
                if !snaps.is_empty() {
                    let i = rng.gen_range(0..snaps.len());
                    let (s, m) = &snaps[i];
                    // A clone reads the same state.
                    check_snapshot(&s.clone(), m, &mut rng)?;
                }
            }
            90..=93 => {
                // The store itself, through an implicit snapshot.
                let k = key(&mut rng);
                prop_assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
                let got: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
                let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                prop_assert_eq!(got, want);
            }
            _ => db.flush().unwrap(),
        }
    }
    prop_assert_eq!(db.stats().snapshots_live, snaps.len());
    for (s, m) in &snaps {
        let got: Model = s.iter().map(|kv| kv.unwrap()).collect();
        prop_assert_eq!(&got, m);
    }
    drop(snaps);
    prop_assert_eq!(db.stats().snapshots_live, 0);
    db.close().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every snapshot reads exactly the model's state when it was taken,
    /// whatever was written, committed and cached since.
    #[test]
    fn snapshots_read_the_state_they_were_taken_at(seed in any::<u64>()) {
        run(seed, 1200)?;
    }
}

const KEYS: usize = 1000;

fn token_key(i: usize) -> Vec<u8> {
    format!("slot{i:04}").into_bytes()
}

/// Counts the tokens a scan sees (and checks the other keys' values).
fn tokens(it: impl Iterator<Item = flexdb::Result<(Vec<u8>, Vec<u8>)>>) -> (usize, usize) {
    let (mut n, mut tokens) = (0, 0);
    for kv in it {
        let (_, v) = kv.unwrap();
        n += 1;
        if v == b"TOKEN" {
            tokens += 1;
        } else {
            assert!(v.starts_with(b"filler"), "unexpected value {v:?}");
        }
    }
    (n, tokens)
}

/// Batches move one token among 1,000 keys (delete one key, put another,
/// and rewrite a few fillers, in one batch) with 1 KiB MemTables (the
/// smallest `Options` accepts), so that
/// the committer moves them into the space all the time, while scanners
/// run forward, backward and through snapshots: every scan sees exactly
/// one token and every key.
#[test]
fn every_scan_sees_exactly_one_token() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new()
        .create_if_missing(true)
        .memtable_bytes(1024)
        .cache_bytes(32 << 10);
    let db = Db::open(dir.path(), opts).unwrap();
    let mut b = WriteBatch::new();
    for i in 0..KEYS {
        b.put(&token_key(i), format!("filler{i}").as_bytes())
            .unwrap();
    }
    db.write(b).unwrap();
    db.put(token_key(0), "TOKEN").unwrap();
    db.flush().unwrap();
    let stop = AtomicBool::new(false);
    let moves = AtomicU64::new(0);
    let scans = AtomicU64::new(0);
    // The writer moves the token until enough moves and scans overlapped
    // (a count of work, not a speed: a slow machine only takes longer);
    // the time cap only stops a hung run.
    let (min_moves, min_scans) = (1000u64, 50u64);
    let cap = Duration::from_secs(600);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = StdRng::seed_from_u64(7);
            let mut at = 0usize;
            let t = Instant::now();
            while moves.load(Ordering::Relaxed) < min_moves
                || scans.load(Ordering::Relaxed) < min_scans
            {
                if t.elapsed() > cap {
                    break;
                }
                let to = rng.gen_range(0..KEYS);
                if to == at {
                    continue;
                }
                let mut b = WriteBatch::new();
                b.put(&token_key(at), format!("filler{at}").as_bytes())
                    .unwrap();
                b.put(&token_key(to), b"TOKEN").unwrap();
                for _ in 0..3 {
                    let i = rng.gen_range(0..KEYS);
                    if i != at && i != to {
                        b.put(
                            &token_key(i),
                            format!("filler{i}-{}", rng.gen::<u16>()).as_bytes(),
                        )
                        .unwrap();
                    }
                }
                db.write(b).unwrap();
                at = to;
                moves.fetch_add(1, Ordering::Relaxed);
            }
            stop.store(true, Ordering::Release);
        });
        for reader in 0..3 {
            let (db, stop, scans) = (&db, &stop, &scans);
            s.spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Acquire) {
                    round += 1;
                    let (n, t) = match (round + reader) % 3 {
                        0 => tokens(db.iter()),
                        1 => tokens(db.iter().rev()),
                        _ => {
                            let snap = db.snapshot();
                            let fwd = tokens(snap.iter());
                            // The snapshot still reads the same state.
                            std::thread::yield_now();
                            assert_eq!(tokens(snap.iter().rev()), fwd);
                            fwd
                        }
                    };
                    assert_eq!(n, KEYS, "a scan missed or repeated keys");
                    assert_eq!(t, 1, "a scan saw {t} tokens");
                    scans.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let (moves, scans) = (moves.into_inner(), scans.into_inner());
    assert!(
        moves >= min_moves && scans >= min_scans,
        "{moves} moves, {scans} scans in {cap:?}"
    );
    assert!(db.stats().commits > 20);
    db.close().unwrap();
}

/// Snapshots, transactions and iterators hold no borrow of the store and
/// move between threads.
#[test]
fn handles_are_static_and_thread_safe() {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    fn send_static<T: Send + 'static>() {}
    send_sync_static::<Snapshot>();
    send_sync_static::<flexdb::Transaction>();
    send_static::<flexdb::Iter<'static>>();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::new().create_if_missing(true)).unwrap();
    db.put("a", "1").unwrap();
    let (snap, it) = (db.snapshot(), db.iter());
    db.put("a", "2").unwrap();
    let seen = std::thread::spawn(move || {
        let got: Vec<_> = it.map(|kv| kv.unwrap().1).collect();
        (snap.get("a").unwrap(), got)
    })
    .join()
    .unwrap();
    assert_eq!(seen, (Some(b"1".to_vec()), vec![b"1".to_vec()]));
}
