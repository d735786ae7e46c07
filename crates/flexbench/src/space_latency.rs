//! `flexbench space --reader-latency`: how long reads of a FlexSpace wait
//! while one thread writes it with the chosen pattern (and commits, segment
//! writes, checkpoints and garbage collection run in the background). A
//! reader thread reads `io_size` bytes at random aligned offsets in a loop,
//! as a plan (`plan_read`: the lock and the translation) and then the copy
//! (`ReadPlan::read`: page cache or device), and records both latencies.
//! The plan's latency is what locking costs a reader; the whole read's
//! also includes device reads, which a busy device makes slow.
//!
//! Invariant: the write phase is the same as the table's (same seed and
//! pattern), ended by a sync; only reads that started during it count.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use flexspace::{FlexSpace, Options};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::space_bench::Pattern;

/// Read latencies measured during a write phase.
#[derive(Serialize, Clone, Debug)]
pub struct LatencyResult {
    /// Always "flexspace".
    pub target: String,
    /// The write pattern running meanwhile.
    pub pattern: String,
    /// Bytes per read and per write.
    pub io_size: u64,
    /// Always "read-during-write".
    pub phase: String,
    /// Reads measured.
    pub reads: u64,
    /// Planning (lock and translation): percentiles and maximum in µs.
    pub plan_p50_us: f64,
    pub plan_p99_us: f64,
    pub plan_p999_us: f64,
    pub plan_max_us: f64,
    /// Plans that took longer than 100 µs.
    pub plan_over_100us: u64,
    /// Whole reads (plan and copy): percentiles and maximum in µs.
    pub read_p50_us: f64,
    pub read_p99_us: f64,
    pub read_max_us: f64,
    /// Throughput of the concurrent write phase in MB/s.
    pub write_mbps: f64,
    /// The space's longest exclusive-lock hold (µs) and holds over 100 µs.
    pub write_lock_max_us: f64,
    pub write_lock_holds_over_100us: u64,
}

/// Runs the write phase of `pattern` on a fresh space in `dir` with a
/// concurrent reader.
pub fn run(
    dir: &std::path::Path,
    pattern: Pattern,
    io: u64,
    total: u64,
    seed: u64,
    opts: Options,
) -> Result<LatencyResult, String> {
    let space = Arc::new(FlexSpace::open(dir, opts).map_err(|e| e.to_string())?);
    let block: Vec<u8> = (0..io).map(|i| (i * 31 + 7) as u8).collect();
    if pattern == Pattern::RandWrite {
        while space.len() < total {
            space
                .insert(space.len(), &block)
                .map_err(|e| e.to_string())?;
        }
        space.sync().map_err(|e| e.to_string())?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (space, stop) = (space.clone(), stop.clone());
        std::thread::spawn(
            move || -> Result<(Histogram<u64>, Histogram<u64>), String> {
                let new = || Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3);
                let mut plans = new().map_err(|e| e.to_string())?;
                let mut h = new().map_err(|e| e.to_string())?;
                let mut rng = StdRng::seed_from_u64(seed ^ 0x5EED);
                let mut buf = vec![0u8; io as usize];
                while !stop.load(Ordering::Relaxed) {
                    let blocks = space.len() / io;
                    if blocks == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    let at = rng.gen_range(0..blocks) * io;
                    let t = Instant::now();
                    let plan = space.plan_read(at, io).map_err(|e| e.to_string())?;
                    let planned = t.elapsed().as_nanos() as u64;
                    plan.read(&mut buf).map_err(|e| e.to_string())?;
                    drop(plan);
                    let ns = t.elapsed().as_nanos() as u64;
                    plans.record(planned.max(1)).map_err(|e| e.to_string())?;
                    h.record(ns.max(1)).map_err(|e| e.to_string())?;
                }
                Ok((plans, h))
            },
        )
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let start = Instant::now();
    let mut written = 0u64;
    let r: Result<(), String> = (|| {
        while written < total {
            match pattern {
                Pattern::SeqWrite => space.insert(space.len(), &block),
                Pattern::RandInsert => {
                    let at = rng.gen_range(0..=space.len() / 4096) * 4096;
                    space.insert(at, &block)
                }
                Pattern::RandWrite => {
                    let at = rng.gen_range(0..total / io) * io;
                    space.write(at, &block)
                }
            }
            .map_err(|e| e.to_string())?;
            written += io;
        }
        space.sync().map_err(|e| e.to_string())
    })();
    let secs = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let (p, h) = reader
        .join()
        .map_err(|_| "the reader thread panicked".to_string())??;
    r?;
    let st = space.stats();
    let us = |ns: u64| ns as f64 / 1000.0;
    let over = if p.max() > 100_000 {
        p.count_between(100_001, p.max())
    } else {
        0
    };
    Ok(LatencyResult {
        target: "flexspace".into(),
        pattern: pattern.name().into(),
        io_size: io,
        phase: "read-during-write".into(),
        reads: h.len(),
        plan_p50_us: us(p.value_at_quantile(0.5)),
        plan_p99_us: us(p.value_at_quantile(0.99)),
        plan_p999_us: us(p.value_at_quantile(0.999)),
        plan_max_us: us(p.max()),
        plan_over_100us: over,
        read_p50_us: us(h.value_at_quantile(0.5)),
        read_p99_us: us(h.value_at_quantile(0.99)),
        read_max_us: us(h.max()),
        write_mbps: written as f64 / secs / 1e6,
        write_lock_max_us: st.write_lock_max_us,
        write_lock_holds_over_100us: st.write_lock_holds_over_100us,
    })
}

/// The human report.
pub fn table(r: &LatencyResult) -> String {
    format!(
        "reads during {} ({} B, writes at {:.1} MB/s): {} reads\n  \
         plan (lock + translate): p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us, \
         {} over 100 us\n  whole read: p50 {:.1} us, p99 {:.1} us, max {:.1} us\n  \
         exclusive lock: longest hold {:.1} us, {} holds over 100 us\n",
        r.pattern,
        r.io_size,
        r.write_mbps,
        r.reads,
        r.plan_p50_us,
        r.plan_p99_us,
        r.plan_p999_us,
        r.plan_max_us,
        r.plan_over_100us,
        r.read_p50_us,
        r.read_p99_us,
        r.read_max_us,
        r.write_lock_max_us,
        r.write_lock_holds_over_100us
    )
}
