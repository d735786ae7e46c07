//! `flexbench ycsb`: YCSB's core workloads (Table 5 of the FlexSpace paper)
//! on the paper's datasets (Table 3) and key distributions (§6.3), on
//! FlexDB and on peer engines side by side.
//!
//! For each engine: a fresh store in `DIR/ENGINE`, the load (always first),
//! then each workload at each thread count for `--seconds`; after each
//! phase that wrote, an untimed flush of the engine and a `syncfs`, then
//! the counters. Then a clean close and a timed reopen, and a crash test:
//! a child process loads a fresh store and is killed with SIGKILL while it
//! writes; the parent times the open that recovers it. With `--repeat N`
//! all of that runs N times, engines alternating, and a summary of medians
//! follows the runs (`summary`).
//!
//! Invariants: several engines run one after another, each in its own
//! child process (so memory figures are the engine's own), on the same
//! generated operations (same seeds); an error in one engine is reported
//! and the others still run; nothing panics on bad input.

pub mod children;
pub mod engine;
pub mod engines;
pub mod keygen;
pub mod plot;
pub mod range_delete;
pub mod range_reads;
pub mod range_report;
pub mod report;
pub mod runner;
pub mod summary;
pub mod sys;
pub mod workload;
pub mod zipf;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use crate::device::DeviceCounter;
use engine::{Engine, EngineConfig, Result};
use keygen::{Dataset, FastRng, KeyFormat, Permutation, ValuePool};
use report::{Latency, Record, ReopenResult, WorkloadResult};
use runner::{Outcome, Setup};
use workload::{Workload, OP_KINDS};
use zipf::Dist;

/// flexdb's default MemTable size in MiB, the default of `--memtable-mb`.
fn flexdb_memtable_mb() -> usize {
    flexdb::Options::default().memtable_bytes >> 20
}

/// Arguments of `flexbench ycsb`.
#[derive(clap::Args, Debug, Clone)]
pub struct YcsbArgs {
    /// Comma-separated engines: flexdb, rocksdb, lmdb, fjall (peers need
    /// their cargo feature), mem (the harness's in-memory reference).
    #[arg(long, value_delimiter = ',', default_value = "flexdb")]
    pub engine: Vec<String>,
    /// Records to load.
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    /// Key and value sizes: zippydb (48+43), udb (27+127), sys (28+396).
    #[arg(long, default_value = "udb")]
    pub dataset: String,
    /// Key distribution (load order: seq loads in key order, any other in
    /// a random permutation; requests: this distribution, but d reads
    /// "latest").
    #[arg(long, value_enum, default_value = "zipf")]
    pub dist: Dist,
    /// Comma-separated workloads: load, a, b, c, d, e, f, put (alias w:
    /// 100% put), t (transfers: a transaction reads two keys and writes
    /// both, snapshot isolation), ts (the same, serializable). The load
    /// always runs first.
    #[arg(long, value_delimiter = ',', default_value = "load,a,b,c,d,e,f")]
    pub workloads: Vec<String>,
    /// Comma-separated client thread counts; each workload runs at each.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    pub threads: Vec<usize>,
    /// Threads of the load phase.
    #[arg(long, default_value_t = 1)]
    pub load_threads: usize,
    /// Seconds per workload (the load runs to completion).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Seconds the `idle` phase leaves the store alone before measuring it.
    #[arg(long, default_value_t = 30.0)]
    pub idle_seconds: f64,
    /// Cache size in MiB (flexdb interval cache, RocksDB block cache,
    /// fjall block cache).
    #[arg(long, default_value_t = 256)]
    pub cache_mb: usize,
    /// MemTable (write buffer) size in MiB, the same for every engine that
    /// has one (flexdb, RocksDB, fjall): flexdb's default. The paper ran
    /// with 1 GiB ones.
    #[arg(long, default_value_t = flexdb_memtable_mb())]
    pub memtable_mb: usize,
    /// flexdb only: frozen MemTables that may wait for the committer
    /// (`flexdb::Options::max_frozen_memtables`; default: flexdb's).
    #[arg(long)]
    pub max_frozen: Option<usize>,
    /// Sync the write-ahead log on every write (default: WAL on, no fsync
    /// per write, for every engine).
    #[arg(long)]
    pub sync: bool,
    /// flexdb's garbage-collection thresholds `HIGH,LOW`
    /// (`flexdb::Options::gc_garbage`; default: flexdb's).
    #[arg(long, value_delimiter = ',')]
    pub gc_garbage: Option<Vec<f64>>,
    /// flexdb reads its data file with `pread` instead of through a
    /// memory mapping (`flexdb::Options::mmap_reads` off).
    #[arg(long)]
    pub pread: bool,
    /// flexdb without its row cache (`flexdb::Options::row_cache` off).
    #[arg(long)]
    pub no_row_cache: bool,
    /// Hold a snapshot (taken before the phase) through every timed phase
    /// and its settling flush: what a long-lived reader costs the writers,
    /// the disk and the memory (`snapshot_held_bytes` in the JSON).
    #[arg(long)]
    pub hold_snapshot: bool,
    /// Pairs read by a scan of workload e.
    #[arg(long, default_value_t = 50)]
    pub scan_len: usize,
    /// Workload e scans down from its key (the pairs at or below it, in
    /// descending order) instead of up.
    #[arg(long)]
    pub scan_reverse: bool,
    /// Directory for the stores (default: a new temporary directory in the
    /// current one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the stores after the run.
    #[arg(long)]
    pub keep: bool,
    /// Skip the reopen and crash-recovery measurements.
    #[arg(long)]
    pub no_reopen: bool,
    /// Kill the crash-test child after it acknowledged this fraction of
    /// the records.
    #[arg(long, default_value_t = 0.5)]
    pub crash_at: f64,
    /// Random seed (same for every engine).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One JSON object per engine and workload instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Draw throughput and p99 latency per workload to this .svg file
    /// (with `--repeat`, for each engine and workload the run whose
    /// throughput was the median).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Run the whole benchmark this many times, each engine in a fresh
    /// store and its own process, engines alternating (run 1 of each, then
    /// run 2, ...); report every run, then the median, lowest and highest
    /// throughput of each workload and each engine's median ratio to
    /// flexdb. (A shared machine's speed drifts: one run proves little.)
    /// With `--keep`, only the last run's stores are kept.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// flexdb: every put (load, updates, inserts) is a put with this time
    /// to live in seconds (`Db::put_with_ttl`): what deadlines and their
    /// expiry queue cost. Other engines ignore it.
    #[arg(long)]
    pub ttl_secs: Option<u64>,
    /// Internal: run one engine and print JSON lines for a parent.
    #[arg(long, hide = true)]
    pub child: bool,
}

/// Arguments of the hidden crash-test child.
#[derive(clap::Args, Debug, Clone)]
pub struct CrashChildArgs {
    /// The engine.
    #[arg(long)]
    pub engine: String,
    /// The store's directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Records to load.
    #[arg(long)]
    pub records: u64,
    /// The dataset.
    #[arg(long)]
    pub dataset: String,
    /// The key distribution (load order).
    #[arg(long, value_enum)]
    pub dist: Dist,
    /// Cache size in MiB.
    #[arg(long)]
    pub cache_mb: usize,
    /// MemTable size in MiB (flexdb's default).
    #[arg(long, default_value_t = flexdb_memtable_mb())]
    pub memtable_mb: usize,
    /// Sync every write.
    #[arg(long)]
    pub sync: bool,
    /// flexdb reads with `pread`.
    #[arg(long)]
    pub pread: bool,
    /// Random seed.
    #[arg(long)]
    pub seed: u64,
}

/// A validated run.
struct Plan {
    engines: Vec<String>,
    dataset: Dataset,
    workloads: Vec<Workload>,
    threads: Vec<usize>,
}

impl YcsbArgs {
    fn plan(&self) -> Result<Plan> {
        let dataset = Dataset::parse(&self.dataset)?;
        let mut engines: Vec<String> = Vec::new();
        for e in &self.engine {
            let e = e.trim().to_ascii_lowercase();
            engine::compiled_in(&e)?;
            if !engines.contains(&e) {
                engines.push(e);
            }
        }
        if engines.is_empty() {
            return Err("--engine names no engine".into());
        }
        let mut workloads = vec![Workload::Load];
        for w in &self.workloads {
            let w = Workload::parse(w)?;
            if !workloads.contains(&w) {
                workloads.push(w);
            }
        }
        if self.records == 0 {
            return Err("--records must be positive".into());
        }
        if !self.seconds.is_finite() || self.seconds <= 0.0 || self.seconds > 1e6 {
            return Err("--seconds must be positive".into());
        }
        if !self.idle_seconds.is_finite() || self.idle_seconds < 0.0 || self.idle_seconds > 1e6 {
            return Err("--idle-seconds must be at least 0".into());
        }
        if self.threads.is_empty() || self.threads.iter().any(|&t| t == 0 || t > 1024) {
            return Err("--threads must be between 1 and 1024".into());
        }
        if self.load_threads == 0 || self.load_threads > 1024 {
            return Err("--load-threads must be between 1 and 1024".into());
        }
        if self.repeat == 0 || self.repeat > 1000 {
            return Err("--repeat must be between 1 and 1000".into());
        }
        if self.scan_len == 0 {
            return Err("--scan-len must be positive".into());
        }
        if !(self.crash_at > 0.0 && self.crash_at <= 1.0) {
            return Err("--crash-at must be in (0, 1]".into());
        }
        if let Some(p) = &self.plot {
            plot::check_path(p)?;
        }
        if self.cache_mb == 0 || self.cache_mb > (1 << 30) {
            return Err("--cache-mb must be positive".into());
        }
        if self.memtable_mb == 0 || self.memtable_mb > (1 << 20) {
            return Err("--memtable-mb must be between 1 and 1048576".into());
        }
        if let Some(g) = &self.gc_garbage {
            if !(g.len() == 2 && g[1] > 0.0 && g[1] <= g[0] && g[0] <= 1.0) {
                return Err("--gc-garbage takes HIGH,LOW with 0 < LOW <= HIGH <= 1".into());
            }
        }
        if self.max_frozen == Some(0) {
            return Err("--max-frozen must be at least 1".into());
        }
        // Room for the inserts of d and e: at most 1000x the records.
        KeyFormat::new(dataset.key_size, self.records.saturating_mul(1000))?;
        Ok(Plan {
            engines,
            dataset,
            workloads,
            threads: self.threads.clone(),
        })
    }

    fn config(&self) -> EngineConfig {
        EngineConfig {
            cache_bytes: self.cache_mb << 20,
            memtable_bytes: self.memtable_mb << 20,
            max_frozen: self.max_frozen,
            sync: self.sync,
            pread: self.pread,
            row_cache: !self.no_row_cache,
            gc_garbage: self.gc_garbage.as_ref().map(|g| (g[0], g[1])),
            ttl: self.ttl_secs.map(Duration::from_secs),
            transactions: self
                .workloads
                .iter()
                .any(|w| matches!(Workload::parse(w), Ok(Workload::T) | Ok(Workload::Ts))),
        }
    }

    /// The arguments that rerun this benchmark for `engine` alone as a
    /// child.
    fn child_args(&self, engine: &str, dir: &Path) -> Vec<String> {
        let mut a = vec![
            "ycsb".to_string(),
            "--child".into(),
            "--engine".into(),
            engine.into(),
            "--records".into(),
            self.records.to_string(),
            "--dataset".into(),
            self.dataset.clone(),
            "--dist".into(),
            self.dist.name().into(),
            "--workloads".into(),
            self.workloads.join(","),
            "--threads".into(),
            self.threads
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(","),
            "--load-threads".into(),
            self.load_threads.to_string(),
            "--seconds".into(),
            self.seconds.to_string(),
            "--idle-seconds".into(),
            self.idle_seconds.to_string(),
            "--cache-mb".into(),
            self.cache_mb.to_string(),
            "--memtable-mb".into(),
            self.memtable_mb.to_string(),
            "--scan-len".into(),
            self.scan_len.to_string(),
            "--crash-at".into(),
            self.crash_at.to_string(),
            "--seed".into(),
            self.seed.to_string(),
            "--dir".into(),
            dir.display().to_string(),
        ];
        if let Some(g) = &self.gc_garbage {
            a.push("--gc-garbage".into());
            a.push(format!("{},{}", g[0], g[1]));
        }
        if let Some(t) = self.ttl_secs {
            a.push("--ttl-secs".into());
            a.push(t.to_string());
        }
        if let Some(n) = self.max_frozen {
            a.push("--max-frozen".into());
            a.push(n.to_string());
        }
        for (flag, on) in [
            ("--sync", self.sync),
            ("--pread", self.pread),
            ("--no-row-cache", self.no_row_cache),
            ("--keep", self.keep),
            ("--no-reopen", self.no_reopen),
            ("--scan-reverse", self.scan_reverse),
            ("--hold-snapshot", self.hold_snapshot),
        ] {
            if on {
                a.push(flag.into());
            }
        }
        a
    }
}

/// Exit status of a run: 0 all good, 1 an engine failed, 2 bad arguments.
pub fn run(args: &YcsbArgs) -> u8 {
    let plan = match args.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("flexbench ycsb: {e}");
            return 2;
        }
    };
    let work = match children::WorkDir::new(args.dir.as_deref(), "ycsb-", "flexbench ycsb") {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let base = work.path();
    let mut records = Vec::new();
    let mut failed = false;
    if args.child || (plan.engines.len() == 1 && args.repeat == 1) {
        let name = plan.engines[0].clone();
        let mut emit = |r: Record| {
            if args.child {
                children::emit_line(&r);
            }
            records.push(r);
        };
        if let Err(e) = run_engine(args, &plan, &name, base, &mut emit) {
            eprintln!("flexbench ycsb: {name}: {e}");
            failed = true;
        }
    } else {
        for run in 1..=args.repeat {
            for name in &plan.engines {
                if args.repeat > 1 {
                    log(name, &format!("run {run} of {}", args.repeat));
                }
                match children::run_child::<Record>(args.child_args(name, base), name) {
                    Ok((mut rs, ok)) => {
                        rs.iter_mut().for_each(|r| r.set_run(run));
                        records.extend(rs);
                        failed |= !ok;
                    }
                    Err(e) => {
                        eprintln!("flexbench ycsb: {name}: {e}");
                        failed = true;
                    }
                }
            }
        }
    }
    if !args.child {
        if args.json {
            print!("{}", report::json_lines(&records));
        } else if args.repeat > 1 {
            for run in 1..=args.repeat {
                let of_run: Vec<Record> =
                    records.iter().filter(|r| r.run() == run).cloned().collect();
                println!("# run {run} of {}\n{}", args.repeat, report::table(&of_run));
            }
            print!("{}", summary::table(&records));
        } else {
            print!("{}", report::table(&records));
        }
        if let Some(p) = &args.plot {
            let drawn = if args.repeat > 1 {
                plot::draw(&summary::median_records(&records), p)
            } else {
                plot::draw(&records, p)
            };
            match drawn {
                Ok(()) => eprintln!("flexbench ycsb: plot written to {}", p.display()),
                Err(e) => {
                    eprintln!("flexbench ycsb: plot: {e}");
                    failed = true;
                }
            }
        }
    }
    u8::from(failed)
}

fn log(name: &str, msg: &str) {
    eprintln!("[{name}] {msg}");
}

/// Runs every phase on engine `name` in a fresh `base/name`.
fn run_engine(
    args: &YcsbArgs,
    plan: &Plan,
    name: &str,
    base: &Path,
    emit: &mut dyn FnMut(Record),
) -> Result<()> {
    let dir = base.join(name);
    fresh_dir(&dir)?;
    let cfg = args.config();
    let setup = Setup {
        dataset: plan.dataset,
        keys: KeyFormat::new(plan.dataset.key_size, args.records.saturating_mul(1000))?,
        values: ValuePool::new(plan.dataset.value_size, args.seed),
        records: args.records,
        dist: args.dist,
        seed: args.seed,
        scan_len: args.scan_len,
        scan_reverse: args.scan_reverse,
        count: AtomicU64::new(args.records),
        acked: AtomicU64::new(args.records),
    };
    sys::reset_peak_rss();
    let engine = guarded(name, || engine::open(name, &dir, &cfg))?;
    let counter = DeviceCounter::for_dir(&dir);
    let mut phases: Vec<(Workload, usize)> = vec![(Workload::Load, args.load_threads)];
    for &w in &plan.workloads[1..] {
        for &t in &plan.threads {
            phases.push((w, t));
        }
    }
    for (w, threads) in phases {
        let dev0 = counter.bytes_written();
        let proc0 = sys::process_bytes_written();
        let cpu0 = sys::process_cpu();
        let rss_anon =
            sys::PeakSampler::start("RssAnon", sys::RSS_SAMPLE_PERIOD, engine.memory_probe());
        log(name, &format!("{} with {threads} thread(s)...", w.name()));
        // `--hold-snapshot`: a view of the state before the phase, held
        // through it and its settling flush, dropped once it is measured.
        let pinned = if args.hold_snapshot && w != Workload::Load {
            guarded(name, || engine.pin_snapshot())?
        } else {
            None
        };
        let outcome = guarded(name, || match w {
            Workload::Load => runner::load(engine.as_ref(), &setup, threads),
            Workload::Idle => {
                let t = Instant::now();
                std::thread::sleep(Duration::from_secs_f64(args.idle_seconds));
                Ok(Outcome {
                    seconds: t.elapsed().as_secs_f64(),
                    ..Outcome::new()
                })
            }
            Workload::Compact => {
                let t = Instant::now();
                engine.compact()?;
                Ok(Outcome {
                    seconds: t.elapsed().as_secs_f64(),
                    ..Outcome::new()
                })
            }
            _ => runner::timed(engine.as_ref(), &setup, w, threads, args.seconds),
        })?;
        let settle = Instant::now();
        if w.writes() {
            guarded(name, || engine.flush())?;
        }
        sys::syncfs(&dir);
        let settle_secs = settle.elapsed().as_secs_f64();
        let rss_anon_peak = rss_anon.finish();
        let cpu = cpu0
            .zip(sys::process_cpu())
            .map(|(a, b)| b.saturating_sub(a));
        let mut r = workload_result(
            args,
            plan,
            name,
            w,
            threads,
            &outcome,
            engine.as_ref(),
            &dir,
            &setup,
            (
                counter.bytes_written().saturating_sub(dev0),
                sys::process_bytes_written().saturating_sub(proc0),
            ),
        );
        r.settle_seconds = settle_secs;
        r.rss_anon_peak_bytes = rss_anon_peak.bytes;
        r.memory_parts_at_peak = rss_anon_peak.parts;
        r.cpu_us_per_op = cpu
            .filter(|_| r.ops > 0)
            .map(|c| c.as_secs_f64() * 1e6 / r.ops as f64);
        let aborts = r
            .abort_rate
            .map(|rate| format!(", {} aborts ({:.2}%)", r.aborts, rate * 100.0))
            .unwrap_or_default();
        log(
            name,
            &format!(
                "{}: {} ops in {:.2} s = {:.4} Mops/s, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us{aborts} (flush {:.2} s, cpu {:.2} us/op)",
                w.name(),
                r.ops,
                r.seconds,
                r.mops,
                r.p99_us,
                r.p999_us,
                r.max_us,
                settle_secs,
                r.cpu_us_per_op.unwrap_or(f64::NAN)
            ),
        );
        r.snapshot_held = pinned.is_some();
        drop(pinned);
        emit(Record::Workload(Box::new(r)));
    }
    let mut reopen = ReopenResult {
        engine: name.into(),
        run: 1,
        workload: "reopen".into(),
        dataset: plan.dataset.name.into(),
        records: args.records,
        ..Default::default()
    };
    if args.no_reopen {
        guarded(name, || engine.close())?;
    } else {
        let t = Instant::now();
        guarded(name, || engine.close())?;
        reopen.close_ms = Some(ms(t.elapsed()));
        let t = Instant::now();
        let engine = guarded(name, || engine::open(name, &dir, &cfg))?;
        reopen.clean_open_ms = Some(ms(t.elapsed()));
        log(
            name,
            &format!(
                "clean close {:.1} ms, reopen {:.1} ms",
                reopen.close_ms.unwrap_or(0.0),
                reopen.clean_open_ms.unwrap_or(0.0)
            ),
        );
        guarded(name, || engine.close())?;
        if !args.keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
        if let Err(e) = crash_test(args, plan, name, base, &cfg, &mut reopen) {
            reopen.note = Some(e);
        }
    }
    if !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    emit(Record::Reopen(reopen));
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Runs `f`, turning a panic (an engine's `todo!()`, a bug) into an error.
fn guarded<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(format!("{name} panicked: {msg}"))
    })
}

#[allow(clippy::too_many_arguments)]
fn workload_result(
    args: &YcsbArgs,
    plan: &Plan,
    name: &str,
    w: Workload,
    threads: usize,
    o: &Outcome,
    engine: &dyn Engine,
    dir: &Path,
    setup: &Setup,
    (device, process): (u64, u64),
) -> WorkloadResult {
    let all = Latency::of(&o.total());
    let mut latency = std::collections::BTreeMap::new();
    for k in OP_KINDS {
        if let Some(h) = &o.hists[k.index()] {
            latency.insert(k.name().to_string(), Latency::of(h));
        }
    }
    let stats = engine.stats();
    let disk = sys::disk_usage(dir);
    let live = setup.count.load(std::sync::atomic::Ordering::Relaxed);
    let logical = live * plan.dataset.pair_bytes();
    let amp = |b: u64| (o.user_bytes > 0).then(|| b as f64 / o.user_bytes as f64);
    WorkloadResult {
        engine: name.into(),
        run: 1,
        workload: w.name().into(),
        dataset: plan.dataset.name.into(),
        dist: args.dist.name().into(),
        request_dist: match w {
            Workload::Load if args.dist == Dist::Seq => "seq".into(),
            Workload::Load => "random-order".into(),
            _ => w.request_dist(args.dist).name().into(),
        },
        records: args.records,
        threads,
        sync: args.sync,
        scan_reverse: args.scan_reverse,
        seconds: o.seconds,
        settle_seconds: 0.0,
        cpu_us_per_op: None,
        ops: o.ops,
        mops: o.ops as f64 / o.seconds.max(1e-9) / 1e6,
        p50_us: all.p50_us,
        p95_us: all.p95_us,
        p99_us: all.p99_us,
        p999_us: all.p999_us,
        max_us: all.max_us,
        latency,
        read_misses: o.read_misses,
        scanned_pairs: o.scanned,
        aborts: o.aborts,
        abort_rate: matches!(w, Workload::T | Workload::Ts)
            .then(|| o.aborts as f64 / (o.ops + o.aborts).max(1) as f64),
        user_bytes_written: o.user_bytes,
        device_bytes_written: device,
        process_bytes_written: process,
        write_amp: amp(device),
        process_write_amp: amp(process),
        disk_bytes: disk,
        logical_bytes: logical,
        space_amp: disk as f64 / logical.max(1) as f64,
        disk_parts: stats.disk_parts,
        memory_parts: stats.memory_parts,
        gc_relocated_bytes: stats.gc_relocated_bytes,
        written_parts: stats.written_parts,
        log_rotations: stats.log_rotations,
        max_reader_wait_us: stats.max_reader_wait.map(|d| d.as_secs_f64() * 1e6),
        index_bytes: stats.index_bytes,
        extent_index_bytes: stats.extent_index_bytes,
        extents: stats.extents,
        cache_hit_ratio: stats.cache_hit_ratio,
        row_hit_ratio: stats.row_hit_ratio,
        snapshot_held_bytes: stats.snapshot_held_bytes,
        snapshot_held: false,
        disk_wal_bytes: stats.disk_wal_bytes,
        vm_rss_bytes: sys::proc_status_bytes("VmRSS"),
        vm_hwm_bytes: sys::proc_status_bytes("VmHWM"),
        rss_anon_bytes: sys::proc_status_bytes("RssAnon"),
        rss_anon_peak_bytes: None,
        memory_parts_at_peak: None,
    }
}

/// The crash test: a child loads a fresh store and is killed with SIGKILL
/// once it acknowledged `crash_at` of the records; the open that recovers
/// the store is timed here.
fn crash_test(
    args: &YcsbArgs,
    plan: &Plan,
    name: &str,
    base: &Path,
    cfg: &EngineConfig,
    out: &mut ReopenResult,
) -> Result<()> {
    let dir = base.join(format!("{name}-crash"));
    fresh_dir(&dir)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find flexbench itself: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "ycsb-crash-child",
        "--engine",
        name,
        "--dir",
        &dir.display().to_string(),
        "--records",
        &args.records.to_string(),
        "--dataset",
        plan.dataset.name,
        "--dist",
        args.dist.name(),
        "--cache-mb",
        &args.cache_mb.to_string(),
        "--memtable-mb",
        &args.memtable_mb.to_string(),
        "--seed",
        &args.seed.to_string(),
    ]);
    if args.sync {
        cmd.arg("--sync");
    }
    if args.pread {
        cmd.arg("--pread");
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the crash child: {e}"))?;
    let target = ((args.records as f64 * args.crash_at).ceil() as u64).clamp(1, args.records);
    let stdout = child.stdout.take();
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        if let Some(s) = stdout {
            for line in BufReader::new(s).lines().map_while(|l| l.ok()) {
                if let Some(n) = line
                    .strip_prefix("ack ")
                    .and_then(|v| v.trim().parse().ok())
                {
                    if tx.send(n).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut acked = 0u64;
    let mut killed = false;
    let limit = Instant::now() + Duration::from_secs(3600);
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(n) => {
                acked = n;
                if n >= target {
                    let _ = child.kill();
                    killed = true;
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() > limit {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("crash child made no progress for an hour".into());
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let _ = reader.join();
    out.crash_acknowledged = Some(acked);
    if !killed {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "the crash child ended ({status}) after {acked} writes, before the kill"
        ));
    }
    let t = Instant::now();
    let engine = guarded(name, || engine::open(name, &dir, cfg))?;
    out.crash_open_ms = Some(ms(t.elapsed()));
    let pairs = guarded(name, || engine.scan(b"", usize::MAX))?;
    out.crash_recovered_pairs = Some(pairs as u64);
    log(
        name,
        &format!(
            "killed after {acked} acknowledged writes; recovery open {:.1} ms, {pairs} pairs",
            out.crash_open_ms.unwrap_or(0.0)
        ),
    );
    guarded(name, || engine.close())?;
    if !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// The crash-test child: loads the records (then overwrites them) and
/// prints `ack N` every 1000 acknowledged writes until it is killed.
pub fn crash_child(a: &CrashChildArgs) -> u8 {
    let r = (|| -> Result<()> {
        let dataset = Dataset::parse(&a.dataset)?;
        let keys = KeyFormat::new(dataset.key_size, a.records.saturating_mul(1000))?;
        let values = ValuePool::new(dataset.value_size, a.seed);
        let cfg = EngineConfig {
            cache_bytes: a.cache_mb << 20,
            memtable_bytes: a.memtable_mb << 20,
            max_frozen: None,
            sync: a.sync,
            pread: a.pread,
            row_cache: true,
            gc_garbage: None,
            ttl: None,
            transactions: false,
        };
        let engine = engine::open(&a.engine, &a.dir, &cfg)?;
        let perm = Permutation::new(a.records, a.seed);
        let mut rng = FastRng::stream(a.seed, u64::MAX);
        let mut key = Vec::new();
        let mut out = std::io::stdout().lock();
        for i in 0..a.records.saturating_mul(2) {
            let index = if i < a.records {
                match a.dist {
                    Dist::Seq => i,
                    _ => perm.get(i),
                }
            } else {
                rng.below(a.records)
            };
            keys.write(index, &mut key);
            engine.put(&key, values.value(&mut rng))?;
            if (i + 1) % 1000 == 0 || i + 1 == a.records {
                writeln!(out, "ack {}", i + 1).map_err(|e| e.to_string())?;
                out.flush().map_err(|e| e.to_string())?;
            }
        }
        engine.close()
    })();
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("flexbench ycsb-crash-child: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: YcsbArgs,
    }

    fn parse(extra: &[&str]) -> YcsbArgs {
        let mut v = vec!["x"];
        v.extend_from_slice(extra);
        Cli::parse_from(v).args
    }

    #[test]
    fn plans_validate_arguments() {
        let p = parse(&["--workloads", "c,a,w,a"]).plan().unwrap();
        assert_eq!(
            p.workloads,
            [Workload::Load, Workload::C, Workload::A, Workload::Put]
        );
        assert_eq!(p.engines, ["flexdb"]);
        assert!(parse(&["--records", "0"]).plan().is_err());
        assert!(parse(&["--seconds", "0"]).plan().is_err());
        assert!(parse(&["--threads", "0"]).plan().is_err());
        assert!(parse(&["--dataset", "x"]).plan().is_err());
        assert!(parse(&["--workloads", "z"]).plan().is_err());
        assert!(parse(&["--engine", "oracle"]).plan().is_err());
        assert!(parse(&["--crash-at", "1.5"]).plan().is_err());
        assert!(parse(&["--plot", "x.pdf"]).plan().is_err());
    }

    #[test]
    fn child_args_parse_back_to_the_same_run() {
        let a = parse(&[
            "--engine",
            "flexdb,mem",
            "--threads",
            "1,2",
            "--sync",
            "--dist",
            "zipf-composite",
        ]);
        let args = a.child_args("mem", Path::new("/tmp/x"));
        let mut v = vec!["x"];
        v.extend(args.iter().skip(1).map(String::as_str));
        let b = Cli::parse_from(v).args;
        assert_eq!(b.engine, ["mem"]);
        assert!(b.child && b.sync);
        assert_eq!(b.threads, [1, 2]);
        assert_eq!(b.dist, Dist::ZipfComposite);
        assert_eq!(b.records, a.records);
        assert_eq!(b.seconds, a.seconds);
        assert_eq!(b.dir.as_deref(), Some(Path::new("/tmp/x")));
    }
}
