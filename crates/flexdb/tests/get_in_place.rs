//! Gets that miss the interval cache (`read::fetch`'s in-place search):
//! an interval read for the first time in a while is searched where it was
//! read and not cached; one read again is cached (the doorkeeper) if it
//! was read more often than the entry it would evict (TinyLFU). Values
//! read so are right, absent keys are absent, and gets of keys spread over
//! many intervals while a writer overwrites them and the committer
//! rewrites and splits their intervals never go back in time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use flexdb::{Db, Options};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Value `version` of key `i`: the version, then filler.
fn value(i: u64, version: u64) -> Vec<u8> {
    let mut v = format!("{version:010}:").into_bytes();
    v.resize(40 + (i % 50) as usize, b'a' + (i % 26) as u8);
    v
}

/// Writes version 1 of keys `0..keys` into a new store at `dir` and
/// closes it.
fn fill(dir: &std::path::Path, opts: &Options, keys: u64) {
    let db = Db::open(dir, opts.clone()).unwrap();
    for i in 0..keys {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.close().unwrap();
}

fn version_of(v: &[u8]) -> u64 {
    std::str::from_utf8(&v[..10])
        .expect("a value the test wrote")
        .parse()
        .expect("a version")
}

#[test]
fn an_interval_read_once_is_searched_in_place_and_cached_when_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new()
        .create_if_missing(true)
        .cache_bytes(64 << 20)
        .row_cache(false);
    const KEYS: u64 = 20_000;
    fill(dir.path(), &opts, KEYS);
    let db = Db::open(dir.path(), opts).unwrap();
    let cached = |db: &Db| db.stats().cache_bytes;
    let before = cached(&db);
    // One get per interval or so: every interval missed once.
    for i in (0..KEYS).step_by(20) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)), "key {i}");
    }
    let once = cached(&db);
    // Every key, twice more: intervals missed again are cached.
    for _ in 0..2 {
        for i in 0..KEYS {
            assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)), "key {i}");
        }
    }
    let again = cached(&db);
    let total = db.stats().space_bytes;
    // Absent keys, between present ones and past the last.
    for i in (0..=KEYS).step_by(7) {
        assert_eq!(
            db.get(format!("key{i:06}x")).unwrap(),
            None,
            "after key {i}"
        );
    }
    assert!(
        once - before < total / 4,
        "intervals read once were cached: {before} -> {once} of {total} bytes"
    );
    assert!(
        again - before > total / 2,
        "intervals read again were not cached: {before} -> {again} of {total} bytes"
    );
}

#[test]
fn gets_missing_the_cache_never_go_back_in_time_while_intervals_are_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    // A cache far smaller than the data, so most gets miss it.
    let opts = Options::new()
        .create_if_missing(true)
        .memtable_bytes(64 << 10)
        .cache_bytes(128 << 10)
        .row_cache(false);
    const KEYS: u64 = 4_000;
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    for i in 0..KEYS {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.flush().unwrap();
    // acked[i]: the newest version of key i whose write returned.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(1)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2u64)
        .map(|t| {
            let (db, acked, done) = (db.clone(), acked.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = vec![0u64; KEYS as usize];
                let mut i = t * 7919 % KEYS;
                let mut gets = 0u64;
                while !done.load(Ordering::Relaxed) || gets < 20_000 {
                    i = (i + 104_729) % KEYS;
                    let floor = acked[i as usize].load(Ordering::Acquire);
                    let got = db
                        .get_with(key(i), |v| v.map(version_of))
                        .unwrap()
                        .unwrap_or_else(|| panic!("key {i} absent"));
                    assert!(
                        got >= floor,
                        "key {i}: read {got} after {floor} was acknowledged"
                    );
                    assert!(
                        got >= seen[i as usize],
                        "key {i}: {got} after {}",
                        seen[i as usize]
                    );
                    seen[i as usize] = got;
                    gets += 1;
                }
                gets
            })
        })
        .collect();
    // Overwrite keys (some values longer, so intervals split), flushing now
    // and then so the committer rewrites intervals under the readers.
    for round in 2..40u64 {
        for i in (round % 3..KEYS).step_by(3) {
            let mut v = value(i, round);
            if round % 5 == 0 {
                v.extend_from_slice(&[b'z'; 100]);
            }
            db.put(key(i), v).unwrap();
            acked[i as usize].store(round, Ordering::Release);
        }
        if round % 4 == 0 {
            db.flush().unwrap();
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() >= 20_000);
    }
    let s = db.stats();
    assert!(
        s.cache_lookups > s.cache_hits,
        "no get missed the cache: {} hits of {} lookups",
        s.cache_hits,
        s.cache_lookups
    );
}

/// Keys in the stores of the even-spread tests: about 2.5 times their
/// 256 KiB cache.
const SPREAD_KEYS: u64 = 8_000;

/// A store at `dir` of `SPREAD_KEYS` pairs, opened with a 256 KiB interval cache
/// and no row cache.
fn small_cache_store(dir: &std::path::Path) -> Db {
    let opts = Options::new()
        .create_if_missing(true)
        .cache_bytes(256 << 10)
        .row_cache(false);
    fill(dir, &opts, SPREAD_KEYS);
    Db::open(dir, opts).unwrap()
}

/// Four rounds of `read` on each of `order` twice in a row: every second
/// read of a pair is a miss the doorkeeper has seen.
fn twice_each_four_rounds(order: &[u64], read: impl Fn(u64)) {
    for _ in 0..4 {
        for &i in order {
            read(i);
            read(i);
        }
    }
}

/// The interval-cache hits and lookups of the reads `f` makes.
fn cache_hits_during(db: &Db, f: impl FnOnce()) -> (u64, u64) {
    let s0 = db.stats();
    f();
    let s1 = db.stats();
    (
        s1.cache_hits - s0.cache_hits,
        s1.cache_lookups - s0.cache_lookups,
    )
}

/// A full cache admits a missed interval only if it was read more often
/// than the entry it would push out (TinyLFU, `read::frequency`): under
/// gets spread evenly over a store a few times the cache's size, each key
/// read twice in a row (so the doorkeeper lets its interval through), the
/// cache stops trading entries for others read as often, and intervals
/// just read are searched in place, not cached.
#[test]
fn an_even_spread_of_gets_does_not_churn_a_full_cache() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_cache_store(dir.path());
    let total = db.stats().space_bytes;
    assert!(
        total > 2 * (256 << 10),
        "the store outgrows the cache: {total}"
    );
    let get = |i: u64| assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)), "key {i}");
    let order: Vec<u64> = (0..SPREAD_KEYS).map(|n| n * 7919 % SPREAD_KEYS).collect();
    twice_each_four_rounds(&order, get);
    // The last keys read, twice each moments ago: most of their intervals
    // were not cached (a cache that admits every second miss holds all).
    let (h, n) = cache_hits_during(&db, || {
        order[order.len() - 100..].iter().for_each(|&i| get(i))
    });
    assert!(h * 10 <= n * 7, "the cache churned: {h} hits of {n}");
}

/// Scans admit what they miss as gets do: short scans spread evenly over a
/// store a few times the cache's size, each range scanned twice in a row,
/// leave the intervals they just read uncached once the cache is full.
#[test]
fn an_even_spread_of_scans_does_not_churn_a_full_cache() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_cache_store(dir.path());
    // Ten pairs from key `i` on, checked.
    let scan = |i: u64| {
        let got: Vec<_> = db.range(key(i)..).take(10).map(|kv| kv.unwrap()).collect();
        let want: Vec<_> = (i..(i + 10).min(SPREAD_KEYS))
            .map(|j| (key(j), value(j, 1)))
            .collect();
        assert_eq!(got, want, "from key {i}");
    };
    let order: Vec<u64> = (0..SPREAD_KEYS / 10)
        .map(|n| n * 797 % (SPREAD_KEYS / 10) * 10)
        .collect();
    twice_each_four_rounds(&order, scan);
    let (h, n) = cache_hits_during(&db, || {
        order[order.len() - 50..].iter().for_each(|&i| scan(i))
    });
    assert!(n >= 50, "{n} lookups");
    assert!(h * 10 <= n * 7, "the cache churned: {h} hits of {n}");
}
