//! Runs one phase (the load, or a timed workload) on an engine with client
//! threads, timing every operation into per-kind histograms.
//!
//! Invariants:
//! - Thread `t` of a phase draws its operations, keys and values from
//!   streams of the seed fixed by (workload, threads, t): every engine
//!   sees the same sequence (a faster engine sees a longer prefix of it).
//! - Keys and values are produced before the clock starts for an
//!   operation; only the engine call is timed.
//! - New keys (inserts of D and E) take indexes from one counter shared by
//!   all phases, starting at `records`, so they never collide.
//! - The first error (or panic) of any thread stops the phase and is
//!   returned; a phase never hangs on a failed thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::engine::{Engine, Result};
use super::keygen::{Dataset, FastRng, KeyFormat, Permutation, ValuePool};
use super::workload::{OpKind, Workload, OP_KINDS};
use super::zipf::{Dist, KeyChooser};

/// What every phase of one run shares.
pub struct Setup {
    /// Key and value sizes.
    pub dataset: Dataset,
    /// The key format.
    pub keys: KeyFormat,
    /// Random values.
    pub values: ValuePool,
    /// Records the load inserts.
    pub records: u64,
    /// `--dist`.
    pub dist: Dist,
    /// `--seed`.
    pub seed: u64,
    /// Pairs per scan.
    pub scan_len: usize,
    /// Scans go down from their key instead of up.
    pub scan_reverse: bool,
    /// The record count: `records` plus every insert started so far (the
    /// next new key's index).
    pub count: AtomicU64,
    /// One past the highest key whose insert completed (reads of "latest"
    /// stay below it; a key below it may still be in flight in another
    /// thread, which a read reports as a miss).
    pub acked: AtomicU64,
}

/// What one phase measured.
pub struct Outcome {
    /// Operations done.
    pub ops: u64,
    /// Seconds from the start to the last thread's end.
    pub seconds: f64,
    /// Latency in nanoseconds per operation kind.
    pub hists: Vec<Option<Histogram<u64>>>,
    /// Reads that found nothing.
    pub read_misses: u64,
    /// Pairs returned by scans.
    pub scanned: u64,
    /// Key and value bytes written.
    pub user_bytes: u64,
    /// Transactions that aborted on a conflict (not counted in `ops`; the
    /// time they took is in the phase's).
    pub aborts: u64,
}

impl Outcome {
    /// No operations yet.
    pub fn new() -> Outcome {
        Outcome {
            ops: 0,
            seconds: 0.0,
            hists: OP_KINDS.iter().map(|_| None).collect(),
            read_misses: 0,
            scanned: 0,
            user_bytes: 0,
            aborts: 0,
        }
    }

    /// Counts one operation of `kind` that took `ns` nanoseconds.
    #[inline]
    pub fn record(&mut self, kind: OpKind, ns: u64) {
        let h = self.hists[kind.index()].get_or_insert_with(new_histogram);
        h.saturating_record(ns.max(1));
        self.ops += 1;
    }

    fn merge(&mut self, other: Outcome) {
        self.ops += other.ops;
        self.seconds = self.seconds.max(other.seconds);
        self.read_misses += other.read_misses;
        self.scanned += other.scanned;
        self.user_bytes += other.user_bytes;
        self.aborts += other.aborts;
        for (mine, theirs) in self.hists.iter_mut().zip(other.hists) {
            if let Some(t) = theirs {
                match mine {
                    Some(m) => {
                        // Same bounds on both sides: cannot fail.
                        let _ = m.add(&t);
                    }
                    None => *mine = Some(t),
                }
            }
        }
    }

    /// All kinds merged.
    pub fn total(&self) -> Histogram<u64> {
        let mut all = new_histogram();
        for h in self.hists.iter().flatten() {
            let _ = all.add(h);
        }
        all
    }
}

/// A histogram of 1 ns to 1 hour at 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

fn stream_id(workload: Workload, threads: usize, thread: usize) -> u64 {
    ((workload as u64) << 48) | ((threads as u64) << 24) | thread as u64
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs `body(thread)` on `threads` threads started together; stops all
/// at the first error. With a `deadline`, sets `stop` once it passed.
pub fn run_threads(
    threads: usize,
    stop: &AtomicBool,
    deadline: Option<Duration>,
    body: impl Fn(usize) -> Result<Outcome> + Sync,
) -> Result<Outcome> {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                let body = &body;
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(t)))
                        .unwrap_or_else(|p| {
                            Err(format!("a client thread panicked: {}", panic_message(p)))
                        });
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r.map(|mut o| {
                        o.seconds = start.elapsed().as_secs_f64();
                        o
                    })
                })
            })
            .collect();
        barrier.wait();
        if let Some(d) = deadline {
            let start = Instant::now();
            while start.elapsed() < d && !stop.load(Ordering::Relaxed) {
                std::thread::sleep((d - start.elapsed().min(d)).min(Duration::from_millis(20)));
            }
            stop.store(true, Ordering::Relaxed);
        }
        let mut total = Outcome::new();
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(o)) => total.merge(o),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(p) => {
                    stop.store(true, Ordering::Relaxed);
                    first_err
                        .get_or_insert(format!("a client thread panicked: {}", panic_message(p)));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(total),
        }
    })
}

/// The key index loaded at position `pos` of the load.
pub fn load_index(setup: &Setup, perm: &Permutation, pos: u64) -> u64 {
    match setup.dist {
        Dist::Seq => pos,
        _ => perm.get(pos),
    }
}

/// Inserts the `records` records with `threads` threads, each a contiguous
/// slice of the load order.
pub fn load(engine: &dyn Engine, setup: &Setup, threads: usize) -> Result<Outcome> {
    let perm = Permutation::new(setup.records, setup.seed);
    let stop = AtomicBool::new(false);
    let n = setup.records;
    run_threads(threads, &stop, None, |t| {
        let mut out = Outcome::new();
        let mut rng = FastRng::stream(setup.seed, stream_id(Workload::Load, threads, t));
        let mut key = Vec::with_capacity(setup.keys.key_size());
        let from = n * t as u64 / threads as u64;
        let to = n * (t as u64 + 1) / threads as u64;
        for pos in from..to {
            if pos % 1024 == 0 && stop.load(Ordering::Relaxed) {
                break;
            }
            setup.keys.write(load_index(setup, &perm, pos), &mut key);
            let value = setup.values.value(&mut rng);
            let t0 = Instant::now();
            engine.put(&key, value)?;
            out.record(OpKind::Insert, t0.elapsed().as_nanos() as u64);
            out.user_bytes += (key.len() + value.len()) as u64;
        }
        Ok(out)
    })
}

/// Runs `workload` with `threads` threads for `seconds`.
pub fn timed(
    engine: &dyn Engine,
    setup: &Setup,
    workload: Workload,
    threads: usize,
    seconds: f64,
) -> Result<Outcome> {
    let stop = AtomicBool::new(false);
    let mix = workload.mix();
    let dist = workload.request_dist(setup.dist);
    let n = setup.records.max(1);
    let deadline = Duration::from_secs_f64(seconds);
    // Built once, untimed: a Zipfian generator sums zeta over the keys.
    let proto = KeyChooser::new(dist, n, 0);
    run_threads(threads, &stop, Some(deadline), |t| {
        let mut out = Outcome::new();
        let mut rng = FastRng::stream(setup.seed, stream_id(workload, threads, t));
        let mut chooser = proto.clone().starting_at(n * t as u64 / threads as u64);
        let mut key = Vec::with_capacity(setup.keys.key_size());
        let mut other = Vec::with_capacity(setup.keys.key_size());
        let pair = setup.dataset.pair_bytes();
        while !stop.load(Ordering::Relaxed) {
            let op = mix.pick(&mut rng);
            let count = setup.acked.load(Ordering::Relaxed);
            let index = match op {
                OpKind::Insert => setup.count.fetch_add(1, Ordering::Relaxed),
                _ => chooser.next(&mut rng, count),
            };
            setup.keys.write(index, &mut key);
            if op == OpKind::Transfer {
                // The second key of a transfer: another draw, not the
                // first key again (a few tries; a tiny key space may give
                // the same key, which is still a valid transaction).
                let mut second = chooser.next(&mut rng, count);
                for _ in 0..4 {
                    if second != index {
                        break;
                    }
                    second = chooser.next(&mut rng, count);
                }
                setup.keys.write(second, &mut other);
            }
            let t0 = Instant::now();
            match op {
                OpKind::Read => {
                    if engine.get(&key)?.is_none() {
                        out.read_misses += 1;
                    }
                }
                OpKind::Update | OpKind::Put => {
                    let value = setup.values.value(&mut rng);
                    engine.put(&key, value)?;
                    out.user_bytes += pair;
                }
                OpKind::Insert => {
                    let value = setup.values.value(&mut rng);
                    engine.put(&key, value)?;
                    setup.acked.fetch_max(index + 1, Ordering::Relaxed);
                    out.user_bytes += pair;
                }
                OpKind::Scan => {
                    out.scanned += if setup.scan_reverse {
                        engine.scan_back(&key, setup.scan_len)?
                    } else {
                        engine.scan(&key, setup.scan_len)?
                    } as u64;
                }
                OpKind::Rmw => {
                    if engine.get(&key)?.is_none() {
                        out.read_misses += 1;
                    }
                    let value = setup.values.value(&mut rng);
                    engine.put(&key, value)?;
                    out.user_bytes += pair;
                }
                OpKind::Transfer => {
                    let new_a = setup.values.value(&mut rng);
                    let new_b = setup.values.value(&mut rng);
                    let committed =
                        engine.transfer(&key, &other, new_a, new_b, workload.serializable())?;
                    if !committed {
                        out.aborts += 1;
                        continue;
                    }
                    out.user_bytes += 2 * pair;
                }
            }
            out.record(op, t0.elapsed().as_nanos() as u64);
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::engine::{compiled_in, open, EngineConfig};

    fn setup(records: u64, dist: Dist) -> Setup {
        let dataset = Dataset::parse("udb").unwrap();
        Setup {
            dataset,
            keys: KeyFormat::new(dataset.key_size, records * 4).unwrap(),
            values: ValuePool::new(dataset.value_size, 1),
            records,
            dist,
            seed: 1,
            scan_len: 50,
            scan_reverse: false,
            count: AtomicU64::new(records),
            acked: AtomicU64::new(records),
        }
    }

    fn small_config() -> EngineConfig {
        EngineConfig::small()
    }

    #[test]
    fn load_inserts_every_record_once_and_workloads_run() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = small_config();
        for dist in [Dist::Seq, Dist::Zipf] {
            let e = open("mem", dir.path(), &cfg).unwrap();
            let s = setup(5000, dist);
            let o = load(e.as_ref(), &s, 3).unwrap();
            assert_eq!(o.ops, 5000);
            assert_eq!(o.user_bytes, 5000 * 154);
            assert_eq!(e.scan(b"", usize::MAX).unwrap(), 5000);
            for i in [0, 1, 2500, 4999] {
                assert!(e.get(&s.keys.key(i)).unwrap().is_some());
            }
            for w in [
                Workload::A,
                Workload::C,
                Workload::D,
                Workload::E,
                Workload::F,
                Workload::Put,
                Workload::T,
                Workload::Ts,
            ] {
                let o = timed(e.as_ref(), &s, w, 2, 0.05).unwrap();
                assert!(o.ops > 0, "{w:?}");
                // Only "latest" may read a key whose insert is in flight.
                let allowed = if w == Workload::D { o.ops / 100 } else { 0 };
                assert!(o.read_misses <= allowed, "{w:?}: {} misses", o.read_misses);
                let mix = w.mix();
                for k in OP_KINDS {
                    let seen = o.hists[k.index()].as_ref().map_or(0, |h| h.len());
                    if mix.share(k) == 0.0 {
                        assert_eq!(seen, 0, "{w:?} {k:?}");
                    } else if mix.share(k) >= 0.5 {
                        assert!(seen > 0, "{w:?} {k:?}");
                    }
                }
                if w == Workload::E {
                    assert!(o.scanned > 0);
                }
            }
            // D and E inserted new keys past the loaded ones.
            let count = s.count.load(Ordering::Relaxed);
            assert!(count > 5000);
            assert_eq!(e.scan(b"", usize::MAX).unwrap() as u64, count);
        }
    }

    /// Transfers commit or abort as whole transactions on every engine
    /// that runs them (flexdb; the peers opened transactional when
    /// compiled in): the committed ones wrote both keys, and the aborted
    /// ones are counted.
    #[test]
    fn transfers_run_at_both_isolation_levels() {
        let engines = ["flexdb", "rocksdb", "fjall"]
            .into_iter()
            .filter(|n| compiled_in(n).is_ok());
        for name in engines {
            let dir = tempfile::tempdir().unwrap();
            let cfg = EngineConfig {
                transactions: true,
                ..small_config()
            };
            let e = open(name, dir.path(), &cfg).unwrap();
            let s = setup(2000, Dist::Zipf);
            load(e.as_ref(), &s, 1).unwrap();
            for w in [Workload::T, Workload::Ts] {
                for threads in [1, 2] {
                    let o = timed(e.as_ref(), &s, w, threads, 0.1).unwrap();
                    assert!(o.ops > 0, "{name} {w:?} {threads}");
                    assert_eq!(o.user_bytes, o.ops * 2 * 154, "{name} {w:?} {threads}");
                    if threads == 1 {
                        assert_eq!(o.aborts, 0, "{name}: one thread cannot conflict");
                    }
                }
            }
            // Every key still has a value of the dataset's size.
            for i in 0..2000 {
                assert_eq!(e.get(&s.keys.key(i)).unwrap(), Some(127), "{name} key {i}");
            }
            e.close().unwrap();
        }
    }

    #[test]
    fn reverse_scans_read_the_pairs_at_or_below_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = small_config();
        for engine in ["mem", "flexdb"] {
            let e = open(engine, &dir.path().join(engine), &cfg).unwrap();
            let mut s = setup(1000, Dist::Uniform);
            load(e.as_ref(), &s, 1).unwrap();
            let key = |i| s.keys.key(i);
            assert_eq!(e.scan_back(&key(9), 50).unwrap(), 10, "{engine}");
            assert_eq!(e.scan_back(&key(500), 50).unwrap(), 50, "{engine}");
            // Between two keys: from the lower one down.
            let mut mid = key(20);
            mid.push(0);
            assert_eq!(e.scan_back(&mid, 1000).unwrap(), 21, "{engine}");
            assert_eq!(e.scan_back(b"", 50).unwrap(), 0, "{engine}");
            s.scan_reverse = true;
            let o = timed(e.as_ref(), &s, Workload::E, 2, 0.05).unwrap();
            assert!(o.scanned > 0, "{engine}");
            e.close().unwrap();
        }
    }

    #[test]
    fn engine_errors_stop_the_phase() {
        struct Failing;
        impl Engine for Failing {
            fn put(&self, _: &[u8], _: &[u8]) -> Result<()> {
                Err("disk on fire".into())
            }
            fn get(&self, _: &[u8]) -> Result<Option<usize>> {
                panic!("boom")
            }
            fn delete(&self, _: &[u8]) -> Result<()> {
                Ok(())
            }
            fn scan(&self, _: &[u8], _: usize) -> Result<usize> {
                Ok(0)
            }
            fn scan_back(&self, _: &[u8], _: usize) -> Result<usize> {
                Ok(0)
            }
            fn flush(&self) -> Result<()> {
                Ok(())
            }
            fn close(self: Box<Self>) -> Result<()> {
                Ok(())
            }
        }
        let s = setup(100, Dist::Uniform);
        let e = load(&Failing, &s, 2).err().unwrap();
        assert!(e.contains("disk on fire"));
        let e = timed(&Failing, &s, Workload::C, 2, 10.0).err().unwrap();
        assert!(e.contains("panicked") && e.contains("boom"), "{e}");
    }
}
