//! `flexbench range-delete`: the time of deleting a range of adjacent keys
//! in a loaded store, and get and scan throughput right after, on FlexDB
//! and on the peers' own range deletes (RocksDB's `DeleteRange`, LMDB's
//! cursor deletes in one transaction).
//!
//! For each engine: a fresh store in `DIR/ENGINE` loaded once with
//! `--records` pairs (as `ycsb`'s load, then an untimed flush); then, for
//! each size k of `--sizes` in turn, a range of exactly k adjacent loaded
//! keys is deleted with one timed call (each size in its own slice of the
//! key space, so the ranges are disjoint and each removes k pairs that are
//! there); on flexdb a timed `flush` follows (`commit_ms`: until the range
//! is out of the space); then an untimed check of sample keys, and gets
//! and scans for `--seconds` each, every result checked against the
//! ranges deleted so far. Several engines run one after another, each in
//! its own child process, as in `ycsb`.
//!
//! Invariants: a wrong read (a deleted key found, a kept key missing, a
//! scan of the wrong length) goes into the record's `check`, to stderr and
//! into the exit status (the later sizes still run, their checks against
//! every range deleted so far); an error in one engine is reported and the
//! others still run; nothing panics on bad input.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use super::engine::{self, Engine, EngineConfig, Result};
use super::keygen::{Dataset, KeyFormat, ValuePool};
use super::range_reads::{self, Checked, Deleted, ReadSpec};
use super::range_report::{self, GetFigures, RangeDeleteResult, ScanFigures};
use super::report::Latency;
use super::runner::{self, Setup};
use super::zipf::Dist;
use super::{children, flexdb_memtable_mb, fresh_dir, guarded, log, ms, sys};

/// Arguments of `flexbench range-delete`.
#[derive(clap::Args, Debug, Clone)]
pub struct RangeDeleteArgs {
    /// Comma-separated engines: flexdb, rocksdb, lmdb (peers need their
    /// cargo feature), mem (the harness's in-memory reference).
    #[arg(long, value_delimiter = ',', default_value = "flexdb")]
    pub engine: Vec<String>,
    /// Records to load (once per engine).
    #[arg(long, default_value_t = 10_000_000)]
    pub records: u64,
    /// Key and value sizes: zippydb (48+43), udb (27+127), sys (28+396).
    #[arg(long, default_value = "udb")]
    pub dataset: String,
    /// Comma-separated range sizes: adjacent pairs each range delete
    /// removes, in this order, each from its own slice of the key space
    /// (so each must fit in records / number of sizes).
    #[arg(long, value_delimiter = ',', default_value = "1000,100000,1000000")]
    pub sizes: Vec<u64>,
    /// Seconds of gets, then seconds of scans, after each range delete.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Client threads of the gets and scans.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Threads of the load.
    #[arg(long, default_value_t = 1)]
    pub load_threads: usize,
    /// Load in key order (default: a random permutation, as `ycsb`'s
    /// load for every distribution but seq).
    #[arg(long)]
    pub seq_load: bool,
    /// Pairs read by a scan.
    #[arg(long, default_value_t = 100)]
    pub scan_len: usize,
    /// The share of gets and scans whose key is drawn from the range just
    /// deleted (the others are uniform over every loaded key, deleted
    /// ones included).
    #[arg(long, default_value_t = 0.0)]
    pub deleted_share: f64,
    /// Cache size in MiB (flexdb interval cache, RocksDB block cache).
    #[arg(long, default_value_t = 256)]
    pub cache_mb: usize,
    /// MemTable (write buffer) size in MiB (flexdb, RocksDB): flexdb's
    /// default.
    #[arg(long, default_value_t = flexdb_memtable_mb())]
    pub memtable_mb: usize,
    /// Sync the write-ahead log on every write (the range delete too).
    #[arg(long)]
    pub sync: bool,
    /// Directory for the stores (default: a new temporary directory in the
    /// current one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the stores after the run.
    #[arg(long)]
    pub keep: bool,
    /// Random seed (same for every engine).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One JSON object per engine and size instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Internal: run one engine and print JSON lines for a parent.
    #[arg(long, hide = true)]
    pub child: bool,
}

/// A validated run.
struct Plan {
    engines: Vec<String>,
    dataset: Dataset,
    /// The key indexes `[start, end)` of each size's range.
    ranges: Vec<(u64, u64)>,
}

/// Engines with a range delete here.
const RANGE_ENGINES: [&str; 4] = ["flexdb", "rocksdb", "lmdb", "mem"];

/// The ranges of `sizes`: size i of m takes `sizes[i]` adjacent keys in
/// the middle of the i-th of m equal slices of `0..records`.
pub fn place(records: u64, sizes: &[u64]) -> Result<Vec<(u64, u64)>> {
    let m = sizes.len() as u64;
    let mut ranges = Vec::new();
    for (i, &k) in sizes.iter().enumerate() {
        let lo = records * i as u64 / m;
        let hi = records * (i as u64 + 1) / m;
        if k == 0 || k > hi - lo {
            return Err(format!(
                "--sizes: {k} pairs do not fit in a slice of {} of the {records} records \
                 (one slice per size)",
                hi - lo
            ));
        }
        let start = lo + (hi - lo - k) / 2;
        ranges.push((start, start + k));
    }
    Ok(ranges)
}

impl RangeDeleteArgs {
    fn plan(&self) -> Result<Plan> {
        let dataset = Dataset::parse(&self.dataset)?;
        let mut engines: Vec<String> = Vec::new();
        for e in &self.engine {
            let e = e.trim().to_ascii_lowercase();
            engine::compiled_in(&e)?;
            if !RANGE_ENGINES.contains(&e.as_str()) {
                return Err(format!(
                    "engine '{e}' runs no range deletes here (expected one of {})",
                    RANGE_ENGINES.join(", ")
                ));
            }
            if !engines.contains(&e) {
                engines.push(e);
            }
        }
        if engines.is_empty() {
            return Err("--engine names no engine".into());
        }
        if self.records == 0 {
            return Err("--records must be positive".into());
        }
        if self.sizes.is_empty() {
            return Err("--sizes names no size".into());
        }
        if !self.seconds.is_finite() || self.seconds <= 0.0 || self.seconds > 1e6 {
            return Err("--seconds must be positive".into());
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err("--threads must be between 1 and 1024".into());
        }
        if self.load_threads == 0 || self.load_threads > 1024 {
            return Err("--load-threads must be between 1 and 1024".into());
        }
        if self.scan_len == 0 {
            return Err("--scan-len must be positive".into());
        }
        if !(0.0..=1.0).contains(&self.deleted_share) {
            return Err("--deleted-share must be in [0, 1]".into());
        }
        if self.cache_mb == 0 || self.cache_mb > (1 << 30) {
            return Err("--cache-mb must be positive".into());
        }
        if self.memtable_mb == 0 || self.memtable_mb > (1 << 20) {
            return Err("--memtable-mb must be between 1 and 1048576".into());
        }
        KeyFormat::new(dataset.key_size, self.records.saturating_add(1))?;
        Ok(Plan {
            engines,
            dataset,
            ranges: place(self.records, &self.sizes)?,
        })
    }

    fn config(&self) -> EngineConfig {
        EngineConfig {
            cache_bytes: self.cache_mb << 20,
            memtable_bytes: self.memtable_mb << 20,
            max_frozen: None,
            sync: self.sync,
            pread: false,
            row_cache: true,
            gc_garbage: None,
            ttl: None,
            transactions: false,
        }
    }

    /// The arguments that rerun this benchmark for `engine` alone as a
    /// child.
    fn child_args(&self, engine: &str, dir: &Path) -> Vec<String> {
        let list = |v: &[u64]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut a = vec![
            "range-delete".to_string(),
            "--child".into(),
            "--engine".into(),
            engine.into(),
            "--records".into(),
            self.records.to_string(),
            "--dataset".into(),
            self.dataset.clone(),
            "--sizes".into(),
            list(&self.sizes),
            "--seconds".into(),
            self.seconds.to_string(),
            "--threads".into(),
            self.threads.to_string(),
            "--load-threads".into(),
            self.load_threads.to_string(),
            "--scan-len".into(),
            self.scan_len.to_string(),
            "--deleted-share".into(),
            self.deleted_share.to_string(),
            "--cache-mb".into(),
            self.cache_mb.to_string(),
            "--memtable-mb".into(),
            self.memtable_mb.to_string(),
            "--seed".into(),
            self.seed.to_string(),
            "--dir".into(),
            dir.display().to_string(),
        ];
        for (flag, on) in [
            ("--seq-load", self.seq_load),
            ("--sync", self.sync),
            ("--keep", self.keep),
        ] {
            if on {
                a.push(flag.into());
            }
        }
        a
    }
}

/// Exit status of a run: 0 all good, 1 an engine failed (or read wrong),
/// 2 bad arguments.
pub fn run(args: &RangeDeleteArgs) -> u8 {
    let plan = match args.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("flexbench range-delete: {e}");
            return 2;
        }
    };
    let work = match children::WorkDir::new(args.dir.as_deref(), "range-", "flexbench range-delete")
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let base = work.path();
    let mut records = Vec::new();
    let mut failed = false;
    if args.child || plan.engines.len() == 1 {
        let name = plan.engines[0].clone();
        let mut emit = |r: RangeDeleteResult| {
            if args.child {
                children::emit_line(&r);
            }
            records.push(r);
        };
        if let Err(e) = run_engine(args, &plan, &name, base, &mut emit) {
            eprintln!("flexbench range-delete: {name}: {e}");
            failed = true;
        }
    } else {
        for name in &plan.engines {
            match children::run_child::<RangeDeleteResult>(args.child_args(name, base), name) {
                Ok((rs, ok)) => {
                    records.extend(rs);
                    failed |= !ok;
                }
                Err(e) => {
                    eprintln!("flexbench range-delete: {name}: {e}");
                    failed = true;
                }
            }
        }
    }
    if !args.child {
        if args.json {
            print!("{}", range_report::json_lines(&records));
        } else {
            print!("{}", range_report::table(&records));
        }
    }
    u8::from(failed)
}

/// What the commit step after the call is on `engine`, and whether it
/// has one (a `flush` timed as `commit_ms`).
fn commit_step(engine: &str) -> (bool, &'static str) {
    match engine {
        "flexdb" => (
            true,
            "Db::flush right after the call: returns once the committer took the range out of \
             the space",
        ),
        "rocksdb" => (
            false,
            "none: the call writes one range tombstone to the WAL and the MemTable and returns; \
             compactions drop the covered pairs later, in the background",
        ),
        "lmdb" => (
            false,
            "none: the call's write transaction deleted every pair of the range and committed \
             (NO_SYNC unless --sync)",
        ),
        _ => (false, "none: the in-memory reference engine"),
    }
}

/// Loads a fresh store of `name`, then deletes each size's range and
/// measures the reads after it.
fn run_engine(
    args: &RangeDeleteArgs,
    plan: &Plan,
    name: &str,
    base: &Path,
    emit: &mut dyn FnMut(RangeDeleteResult),
) -> Result<()> {
    let dir = base.join(name);
    fresh_dir(&dir)?;
    let cfg = args.config();
    let setup = Setup {
        dataset: plan.dataset,
        keys: KeyFormat::new(plan.dataset.key_size, args.records.saturating_add(1))?,
        values: ValuePool::new(plan.dataset.value_size, args.seed),
        records: args.records,
        dist: if args.seq_load {
            Dist::Seq
        } else {
            Dist::Uniform
        },
        seed: args.seed,
        scan_len: args.scan_len,
        scan_reverse: false,
        count: AtomicU64::new(args.records),
        acked: AtomicU64::new(args.records),
    };
    let engine = guarded(name, || engine::open(name, &dir, &cfg))?;
    log(
        name,
        &format!(
            "load of {} records with {} thread(s)...",
            args.records, args.load_threads
        ),
    );
    let load = guarded(name, || {
        runner::load(engine.as_ref(), &setup, args.load_threads)
    })?;
    let settle = Instant::now();
    guarded(name, || engine.flush())?;
    sys::syncfs(&dir);
    log(
        name,
        &format!(
            "loaded in {:.2} s (flush {:.2} s), {:.1} MiB on disk",
            load.seconds,
            settle.elapsed().as_secs_f64(),
            sys::disk_usage(&dir) as f64 / (1 << 20) as f64
        ),
    );
    let mut deleted = Deleted::new(args.records);
    let mut wrong_sizes = Vec::new();
    for (i, (&size, &range)) in args.sizes.iter().zip(&plan.ranges).enumerate() {
        let mut r = measure(
            args,
            plan,
            name,
            engine.as_ref(),
            &dir,
            &setup.keys,
            &mut deleted,
            (i, size, range),
        )?;
        r.load_seconds = load.seconds;
        if let Some(c) = &r.check {
            log(
                name,
                &format!("WRONG READ after the range delete of {size} pairs: {c}"),
            );
            wrong_sizes.push(size.to_string());
        }
        emit(r);
    }
    guarded(name, || engine.close())?;
    if !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if wrong_sizes.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "wrong reads after the range deletes of {} pairs (see `check`)",
            wrong_sizes.join(", ")
        ))
    }
}

/// One size: the delete, its commit, the sample check and the reads.
#[allow(clippy::too_many_arguments)]
fn measure(
    args: &RangeDeleteArgs,
    plan: &Plan,
    name: &str,
    engine: &dyn Engine,
    dir: &Path,
    keys: &KeyFormat,
    deleted: &mut Deleted,
    (index, size, (start, end)): (usize, u64, (u64, u64)),
) -> Result<RangeDeleteResult> {
    let (mut first, mut past) = (Vec::new(), Vec::new());
    keys.write(start, &mut first);
    keys.write(end, &mut past);
    let text = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    let disk_before = sys::disk_usage(dir);
    log(
        name,
        &format!(
            "delete_range of {size} pairs [{}, {})...",
            text(&first),
            text(&past)
        ),
    );
    let t = Instant::now();
    let engine_deleted = guarded(name, || engine.delete_range(&first, &past))?;
    let call_ms = ms(t.elapsed());
    deleted.add(start, end);
    let disk_after_call = sys::disk_usage(dir);
    let (commits, commit) = commit_step(name);
    let commit_ms = if commits {
        let t = Instant::now();
        guarded(name, || engine.flush())?;
        Some(ms(t.elapsed()))
    } else {
        None
    };
    sys::syncfs(dir);
    let disk_after_commit = sys::disk_usage(dir);
    let disk_parts = engine.stats().disk_parts;
    let mut check = engine_deleted
        .filter(|&n| n != size)
        .map(|n| format!("the engine removed {n} pairs, not {size}"));
    if check.is_none() {
        check = guarded(name, || {
            range_reads::sample_check(engine, keys, deleted, (start, end), 1000, args.seed)
        })?;
    }
    let spec = ReadSpec {
        keys: *keys,
        deleted,
        target: (start, end),
        share: args.deleted_share,
        threads: args.threads,
        seconds: args.seconds,
        seed: args.seed,
        stream: 0x7a9e_0000_0000 | ((index as u64) << 24),
    };
    let gets = guarded(name, || range_reads::gets(engine, &spec))?;
    let spec = ReadSpec {
        stream: spec.stream | (1 << 20),
        ..spec
    };
    let scans = guarded(name, || range_reads::scans(engine, &spec, args.scan_len))?;
    check = check
        .or_else(|| gets.first_wrong.clone().map(|w| wrong(&gets, "gets", w)))
        .or_else(|| scans.first_wrong.clone().map(|w| wrong(&scans, "scans", w)));
    let r = RangeDeleteResult {
        kind: "range_delete".into(),
        engine: name.into(),
        dataset: plan.dataset.name.into(),
        records: args.records,
        load_seconds: 0.0,
        threads: args.threads,
        deleted_share: args.deleted_share,
        size,
        first_key: text(&first),
        end_key: text(&past),
        first_index: start,
        deleted_total: deleted.total(),
        engine_deleted,
        call_ms,
        commit_ms,
        done_ms: call_ms + commit_ms.unwrap_or(0.0),
        commit: commit.into(),
        disk_bytes_before: disk_before,
        disk_bytes_after_call: disk_after_call,
        disk_bytes_after_commit: disk_after_commit,
        disk_bytes_after_reads: sys::disk_usage(dir),
        disk_parts_after_commit: disk_parts,
        get: get_figures(&gets),
        scan: scan_figures(&scans, args.scan_len),
        check,
    };
    log(
        name,
        &format!(
            "{size} pairs: call {:.3} ms, commit {}; gets {:.4} Mops/s ({} misses of {} expected), \
             scans {:.4} Mops/s; disk {:.1} -> {:.1} MiB; {}",
            r.call_ms,
            r.commit_ms
                .map_or_else(|| "n/a".into(), |v| format!("{v:.3} ms")),
            r.get.mops,
            r.get.misses,
            r.get.expected_misses,
            r.scan.mops,
            r.disk_bytes_before as f64 / (1 << 20) as f64,
            r.disk_bytes_after_commit as f64 / (1 << 20) as f64,
            r.check.as_deref().unwrap_or("every read right"),
        ),
    );
    Ok(r)
}

fn wrong(c: &Checked, what: &str, first: String) -> String {
    format!(
        "{} of {} {what} wrong; first: {first}",
        c.wrong, c.outcome.ops
    )
}

fn mops(ops: u64, seconds: f64) -> f64 {
    ops as f64 / seconds.max(1e-9) / 1e6
}

fn get_figures(c: &Checked) -> GetFigures {
    let o = &c.outcome;
    GetFigures {
        seconds: o.seconds,
        ops: o.ops,
        mops: mops(o.ops, o.seconds),
        latency: Latency::of(&o.total()),
        misses: o.read_misses,
        expected_misses: c.expected,
        wrong: c.wrong,
    }
}

fn scan_figures(c: &Checked, scan_len: usize) -> ScanFigures {
    let o = &c.outcome;
    ScanFigures {
        seconds: o.seconds,
        ops: o.ops,
        mops: mops(o.ops, o.seconds),
        latency: Latency::of(&o.total()),
        scan_len,
        pairs: o.scanned,
        expected_pairs: c.expected,
        starts_in_deleted: c.in_deleted,
        wrong: c.wrong,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RangeDeleteArgs,
    }

    fn parse(extra: &[&str]) -> RangeDeleteArgs {
        let mut v = vec!["x"];
        v.extend_from_slice(extra);
        Cli::parse_from(v).args
    }

    #[test]
    fn ranges_are_disjoint_exact_and_spread() {
        let r = place(10_000_000, &[1000, 100_000, 1_000_000]).unwrap();
        assert_eq!(r.len(), 3);
        for (&(s, e), k) in r.iter().zip([1000, 100_000, 1_000_000]) {
            assert_eq!(e - s, k);
            assert!(e <= 10_000_000);
        }
        assert!(r[0].1 < r[1].0 && r[1].1 < r[2].0);
        // Each in its own third of the key space.
        assert!(r[0].1 <= 3_333_333 && r[1].0 >= 3_333_333 && r[2].0 >= 6_666_666);
        assert!(place(100, &[60, 60]).is_err());
        assert!(place(100, &[0]).is_err());
        assert_eq!(place(10, &[10]).unwrap(), [(0, 10)]);
    }

    #[test]
    fn plans_validate_arguments() {
        let p = parse(&["--engine", "flexdb,mem,flexdb"]).plan().unwrap();
        assert_eq!(p.engines, ["flexdb", "mem"]);
        assert_eq!(p.ranges.len(), 3);
        assert!(parse(&["--records", "0"]).plan().is_err());
        assert!(parse(&["--records", "1000"]).plan().is_err());
        assert!(parse(&["--seconds", "0"]).plan().is_err());
        assert!(parse(&["--threads", "0"]).plan().is_err());
        assert!(parse(&["--deleted-share", "2"]).plan().is_err());
        assert!(parse(&["--engine", "oracle"]).plan().is_err());
        if engine::compiled_in("fjall").is_ok() {
            assert!(parse(&["--engine", "fjall"]).plan().is_err());
        }
    }

    #[test]
    fn child_args_parse_back_to_the_same_run() {
        let a = parse(&["--engine", "flexdb,mem", "--sizes", "5,6", "--seq-load"]);
        let args = a.child_args("mem", Path::new("/tmp/x"));
        let mut v = vec!["x"];
        v.extend(args.iter().skip(1).map(String::as_str));
        let b = Cli::parse_from(v).args;
        assert_eq!(b.engine, ["mem"]);
        assert!(b.child && b.seq_load && !b.sync);
        assert_eq!(b.sizes, [5, 6]);
        assert_eq!(b.records, a.records);
        assert_eq!(b.dir.as_deref(), Some(Path::new("/tmp/x")));
    }

    /// The whole run on the in-memory reference, small: every size is
    /// measured and every read checked right.
    #[test]
    fn a_small_run_measures_every_size() {
        let dir = tempfile::tempdir().unwrap();
        let a = parse(&[
            "--engine",
            "mem",
            "--records",
            "20000",
            "--sizes",
            "10,1000",
            "--seconds",
            "0.05",
            "--threads",
            "2",
            "--deleted-share",
            "0.1",
        ]);
        let plan = a.plan().unwrap();
        let mut out = Vec::new();
        run_engine(&a, &plan, "mem", dir.path(), &mut |r| out.push(r)).unwrap();
        assert_eq!(out.len(), 2);
        for (r, k) in out.iter().zip([10, 1000]) {
            assert_eq!(r.size, k);
            assert_eq!(r.engine_deleted, Some(k));
            assert_eq!(r.check, None);
            assert!(r.get.ops > 0 && r.scan.ops > 0);
            assert_eq!(r.get.misses, r.get.expected_misses);
            assert_eq!(r.scan.pairs, r.scan.expected_pairs);
            assert_eq!(r.commit_ms, None);
        }
        assert_eq!(out[1].deleted_total, 1010);
    }
}
