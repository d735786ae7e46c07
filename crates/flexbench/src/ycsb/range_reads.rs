//! The reads of `flexbench range-delete`: timed gets and scans right after
//! a range delete, and an untimed check of sample keys, every result
//! compared with what the deletes left.
//!
//! Invariants:
//! - The store holds the loaded keys `0..records` less the deleted ranges
//!   ([`Deleted`]), nothing else: a get of a deleted key must find nothing
//!   and a get of any other key a value; a scan of `n` from key `i` must
//!   return `min(n, live keys >= i)` pairs.
//! - A result that differs is counted as wrong and the first one is
//!   described; it never just joins the misses.
//! - Keys are drawn before the clock starts; only the engine call is timed
//!   (as in `runner`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::engine::{Engine, Result};
use super::keygen::{FastRng, KeyFormat};
use super::runner::{run_threads, Outcome};
use super::workload::OpKind;

/// The key indexes deleted so far: disjoint half-open ranges of `0..records`.
#[derive(Clone, Debug)]
pub struct Deleted {
    records: u64,
    ranges: Vec<(u64, u64)>,
}

impl Deleted {
    /// Nothing deleted from `records` loaded keys.
    pub fn new(records: u64) -> Deleted {
        Deleted {
            records,
            ranges: Vec::new(),
        }
    }

    /// Adds the deleted range `[start, end)` (disjoint from the others).
    pub fn add(&mut self, start: u64, end: u64) {
        self.ranges.push((start, end.min(self.records)));
        self.ranges.sort_unstable();
    }

    /// Whether key `i` was deleted.
    pub fn contains(&self, i: u64) -> bool {
        self.ranges.iter().any(|&(s, e)| (s..e).contains(&i))
    }

    /// Keys deleted so far.
    pub fn total(&self) -> u64 {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }

    /// Live keys with an index `>= i`.
    pub fn live_from(&self, i: u64) -> u64 {
        let gone: u64 = self
            .ranges
            .iter()
            .map(|&(s, e)| e.saturating_sub(s.max(i)))
            .sum();
        self.records.saturating_sub(i) - gone
    }
}

/// What the reads of one phase go to.
pub struct ReadSpec<'a> {
    /// The key format.
    pub keys: KeyFormat,
    /// What was deleted (so far).
    pub deleted: &'a Deleted,
    /// The range deleted last, where `share` of the reads go.
    pub target: (u64, u64),
    /// The share of reads drawn from `target` (the others are uniform
    /// over every loaded key, deleted or not).
    pub share: f64,
    /// Client threads.
    pub threads: usize,
    /// Seconds of the phase.
    pub seconds: f64,
    /// The random seed.
    pub seed: u64,
    /// The phase's random stream (thread `t` draws from `stream + t`).
    pub stream: u64,
}

impl ReadSpec<'_> {
    fn draw(&self, rng: &mut FastRng) -> u64 {
        let (s, e) = self.target;
        if self.share > 0.0 && e > s && rng.next_f64() < self.share {
            s + rng.below(e - s)
        } else {
            rng.below(self.deleted.records)
        }
    }
}

/// One timed phase and its checks.
pub struct Checked {
    /// Operations, latency, misses (gets) or pairs (scans).
    pub outcome: Outcome,
    /// Gets: of deleted keys (the misses expected); scans: the pairs
    /// expected.
    pub expected: u64,
    /// Gets and scans whose key was in a deleted range.
    pub in_deleted: u64,
    /// Results that differ from what the deletes left.
    pub wrong: u64,
    /// The first of them, described.
    pub first_wrong: Option<String>,
}

/// Counters the client threads of a phase share.
#[derive(Default)]
struct Tally {
    expected: AtomicU64,
    in_deleted: AtomicU64,
    wrong: AtomicU64,
    first_wrong: Mutex<Option<String>>,
}

impl Tally {
    fn wrong(&self, what: impl FnOnce() -> String) {
        if self.wrong.fetch_add(1, Ordering::Relaxed) == 0 {
            let mut first = self
                .first_wrong
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            first.get_or_insert_with(what);
        }
    }

    fn into_checked(self, outcome: Outcome) -> Checked {
        Checked {
            outcome,
            expected: self.expected.into_inner(),
            in_deleted: self.in_deleted.into_inner(),
            wrong: self.wrong.into_inner(),
            first_wrong: self
                .first_wrong
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }
}

fn describe_get(keys: &KeyFormat, i: u64, found: bool) -> String {
    let mut key = Vec::new();
    keys.write(i, &mut key);
    let key = String::from_utf8_lossy(&key);
    if found {
        format!("get of deleted key {key} (index {i}) found a value")
    } else {
        format!("get of kept key {key} (index {i}) found nothing")
    }
}

fn describe_scan(keys: &KeyFormat, i: u64, n: usize, got: usize, want: u64) -> String {
    let mut key = Vec::new();
    keys.write(i, &mut key);
    let key = String::from_utf8_lossy(&key);
    format!("scan of {n} from {key} (index {i}) returned {got} pairs, not {want}")
}

/// Uniform gets (with `share` of them in the range deleted last) for
/// `seconds`.
pub fn gets(engine: &dyn Engine, spec: &ReadSpec) -> Result<Checked> {
    let stop = AtomicBool::new(false);
    let tally = Tally::default();
    let deadline = Duration::from_secs_f64(spec.seconds);
    let outcome = run_threads(spec.threads, &stop, Some(deadline), |t| {
        let mut out = Outcome::new();
        let mut rng = FastRng::stream(spec.seed, spec.stream.wrapping_add(t as u64));
        let mut key = Vec::with_capacity(spec.keys.key_size());
        let mut gone_n = 0;
        while !stop.load(Ordering::Relaxed) {
            let i = spec.draw(&mut rng);
            spec.keys.write(i, &mut key);
            let t0 = Instant::now();
            let found = engine.get(&key)?.is_some();
            out.record(OpKind::Read, t0.elapsed().as_nanos() as u64);
            let gone = spec.deleted.contains(i);
            gone_n += u64::from(gone);
            out.read_misses += u64::from(!found);
            if found == gone {
                tally.wrong(|| describe_get(&spec.keys, i, found));
            }
        }
        tally.expected.fetch_add(gone_n, Ordering::Relaxed);
        tally.in_deleted.fetch_add(gone_n, Ordering::Relaxed);
        Ok(out)
    })?;
    Ok(tally.into_checked(outcome))
}

/// Scans of `n` pairs from uniform keys (with `share` of them in the range
/// deleted last) for `seconds`.
pub fn scans(engine: &dyn Engine, spec: &ReadSpec, n: usize) -> Result<Checked> {
    let stop = AtomicBool::new(false);
    let tally = Tally::default();
    let deadline = Duration::from_secs_f64(spec.seconds);
    let outcome = run_threads(spec.threads, &stop, Some(deadline), |t| {
        let mut out = Outcome::new();
        let mut rng = FastRng::stream(spec.seed, spec.stream.wrapping_add(t as u64));
        let mut key = Vec::with_capacity(spec.keys.key_size());
        let (mut expected, mut inside) = (0, 0);
        while !stop.load(Ordering::Relaxed) {
            let i = spec.draw(&mut rng);
            spec.keys.write(i, &mut key);
            let t0 = Instant::now();
            let got = engine.scan(&key, n)?;
            out.record(OpKind::Scan, t0.elapsed().as_nanos() as u64);
            out.scanned += got as u64;
            let want = spec.deleted.live_from(i).min(n as u64);
            expected += want;
            inside += u64::from(spec.deleted.contains(i));
            if got as u64 != want {
                tally.wrong(|| describe_scan(&spec.keys, i, n, got, want));
            }
        }
        tally.expected.fetch_add(expected, Ordering::Relaxed);
        tally.in_deleted.fetch_add(inside, Ordering::Relaxed);
        Ok(out)
    })?;
    Ok(tally.into_checked(outcome))
}

/// Untimed: gets of the keys at both edges of `range` (the last kept key
/// before it, its first two and last two, the first kept key after it),
/// of `samples` random keys inside it and `samples` over every loaded
/// key, and scans from its edges. `None` if every result is right, else
/// how many were wrong and the first.
pub fn sample_check(
    engine: &dyn Engine,
    keys: &KeyFormat,
    deleted: &Deleted,
    range: (u64, u64),
    samples: u64,
    seed: u64,
) -> Result<Option<String>> {
    let (s, e) = range;
    let records = deleted.records;
    let mut rng = FastRng::stream(seed, SAMPLE_STREAM);
    let mut picks: Vec<u64> = [s.wrapping_sub(1), s, s + 1, e.wrapping_sub(2), e - 1, e]
        .into_iter()
        .filter(|&i| i < records)
        .collect();
    picks.extend((0..samples).map(|_| s + rng.below(e - s)));
    picks.extend((0..samples).map(|_| rng.below(records)));
    let (mut checked, mut wrong, mut first) = (0u64, 0u64, None);
    let mut key = Vec::with_capacity(keys.key_size());
    for &i in &picks {
        keys.write(i, &mut key);
        let found = engine.get(&key)?.is_some();
        checked += 1;
        if found == deleted.contains(i) {
            wrong += 1;
            first.get_or_insert_with(|| describe_get(keys, i, found));
        }
    }
    for i in [s.saturating_sub(1), s, e - 1] {
        keys.write(i, &mut key);
        let n = 100;
        let got = engine.scan(&key, n)?;
        let want = deleted.live_from(i).min(n as u64);
        checked += 1;
        if got as u64 != want {
            wrong += 1;
            first.get_or_insert_with(|| describe_scan(keys, i, n, got, want));
        }
    }
    Ok(first.map(|f| format!("{wrong} of {checked} sampled reads wrong; first: {f}")))
}

/// The sample check's random stream.
const SAMPLE_STREAM: u64 = 0x5a_3b1e;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::engine::open;
    use crate::ycsb::engine::EngineConfig;

    #[test]
    fn deleted_ranges_count_live_keys() {
        let mut d = Deleted::new(100);
        assert_eq!(d.live_from(0), 100);
        d.add(60, 70);
        d.add(10, 20);
        assert_eq!(d.total(), 20);
        assert!(d.contains(10) && d.contains(69));
        assert!(!d.contains(9) && !d.contains(20) && !d.contains(70));
        assert_eq!(d.live_from(0), 80);
        assert_eq!(d.live_from(15), 70);
        assert_eq!(d.live_from(65), 30);
        assert_eq!(d.live_from(99), 1);
        assert_eq!(d.live_from(100), 0);
    }

    fn loaded_mem(records: u64) -> (Box<dyn Engine>, KeyFormat) {
        let cfg = EngineConfig::small();
        let dir = tempfile::tempdir().unwrap();
        let e = open("mem", dir.path(), &cfg).unwrap();
        let keys = KeyFormat::new(27, records + 1).unwrap();
        let mut k = Vec::new();
        for i in 0..records {
            keys.write(i, &mut k);
            e.put(&k, b"v").unwrap();
        }
        (e, keys)
    }

    #[test]
    fn reads_after_a_range_delete_are_checked() {
        let (e, keys) = loaded_mem(2000);
        let mut deleted = Deleted::new(2000);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        keys.write(500, &mut a);
        keys.write(700, &mut b);
        assert_eq!(e.delete_range(&a, &b).unwrap(), Some(200));
        deleted.add(500, 700);
        assert_eq!(
            sample_check(e.as_ref(), &keys, &deleted, (500, 700), 50, 1).unwrap(),
            None
        );
        let spec = ReadSpec {
            keys,
            deleted: &deleted,
            target: (500, 700),
            share: 0.5,
            threads: 2,
            seconds: 0.05,
            seed: 1,
            stream: 7,
        };
        let g = gets(e.as_ref(), &spec).unwrap();
        assert!(g.outcome.ops > 0);
        assert_eq!(g.wrong, 0, "{:?}", g.first_wrong);
        assert_eq!(g.outcome.read_misses, g.expected);
        assert!(
            g.in_deleted > g.outcome.ops / 4,
            "half the gets aim at the range"
        );
        let s = scans(e.as_ref(), &spec, 100).unwrap();
        assert!(s.outcome.ops > 0);
        assert_eq!(s.wrong, 0, "{:?}", s.first_wrong);
        assert_eq!(s.outcome.scanned, s.expected);
        // A model that forgot the delete sees every read of the range as
        // wrong, and says which.
        let forgot = Deleted::new(2000);
        let bad = sample_check(e.as_ref(), &keys, &forgot, (500, 700), 10, 1).unwrap();
        assert!(bad.unwrap().contains("found nothing"));
        let spec = ReadSpec {
            deleted: &forgot,
            ..spec
        };
        let g = gets(e.as_ref(), &spec).unwrap();
        assert!(g.wrong > 0 && g.first_wrong.is_some());
    }
}
