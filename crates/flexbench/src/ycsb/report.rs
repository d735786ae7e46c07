//! What `flexbench ycsb` measures, and its human table and JSON lines.
//!
//! Invariants: every record serialises to one JSON object with a `kind`
//! ("workload" or "reopen") and the engine's name; a figure an engine does
//! not provide is `null`, never 0; tables compare each engine with flexdb
//! measured in the same invocation.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latency figures of one operation kind (or of all), in microseconds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Latency {
    /// Operations measured.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile (0 in lines written before it was measured).
    #[serde(default)]
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

impl Latency {
    /// The figures of a histogram of nanoseconds.
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            count: h.len(),
            p50_us: us(h.value_at_quantile(0.50)),
            p95_us: us(h.value_at_quantile(0.95)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// One workload run on one engine at one thread count.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct WorkloadResult {
    /// The engine.
    pub engine: String,
    /// Which run of `--repeat` this is, from 1.
    #[serde(default = "first_run")]
    pub run: u32,
    /// The workload (load, a..f, put).
    pub workload: String,
    /// The dataset (zippydb, udb, sys).
    pub dataset: String,
    /// The key distribution given by `--dist` (workload d reads "latest").
    pub dist: String,
    /// The distribution this workload's requests followed.
    pub request_dist: String,
    /// Records loaded (`--records`).
    pub records: u64,
    /// Client threads.
    pub threads: usize,
    /// Whether every write synced the WAL.
    pub sync: bool,
    /// Whether scans went down from their key (`--scan-reverse`).
    #[serde(default)]
    pub scan_reverse: bool,
    /// Seconds the timed phase took.
    pub seconds: f64,
    /// Seconds the untimed flush and `syncfs` after the phase took (the
    /// engine's backlog of the phase's writes).
    #[serde(default)]
    pub settle_seconds: f64,
    /// CPU time of the whole process (every thread, user and system) over
    /// the phase and its settling flush, per operation, in microseconds: a
    /// cost that a noisy machine disturbs less than a rate.
    #[serde(default)]
    pub cpu_us_per_op: Option<f64>,
    /// Operations done.
    pub ops: u64,
    /// Millions of operations per second.
    pub mops: f64,
    /// Latency percentiles over all operations.
    pub p50_us: f64,
    /// See `p50_us`.
    pub p95_us: f64,
    /// See `p50_us`.
    pub p99_us: f64,
    /// See `p50_us` (0 in lines written before it was measured).
    #[serde(default)]
    pub p999_us: f64,
    /// See `p50_us`.
    pub max_us: f64,
    /// Latency per operation kind (read, update, insert, scan, rmw, put).
    pub latency: BTreeMap<String, Latency>,
    /// Reads (and read-modify-writes) that found no value.
    pub read_misses: u64,
    /// Pairs returned by scans.
    pub scanned_pairs: u64,
    /// Transactions that aborted on a conflict (workloads t and ts; not
    /// counted in `ops`).
    #[serde(default)]
    pub aborts: u64,
    /// aborts / (ops + aborts) for the transaction workloads (null for the
    /// others).
    #[serde(default)]
    pub abort_rate: Option<f64>,
    /// Key and value bytes the workload wrote.
    pub user_bytes_written: u64,
    /// Bytes written to the device during the workload and its settling
    /// flush (block-device counter: includes other processes' writes).
    pub device_bytes_written: u64,
    /// Bytes this process wrote to storage (`/proc/self/io` write_bytes
    /// less cancelled_write_bytes).
    pub process_bytes_written: u64,
    /// device_bytes_written / user_bytes_written (null for no writes).
    pub write_amp: Option<f64>,
    /// process_bytes_written / user_bytes_written (null for no writes).
    pub process_write_amp: Option<f64>,
    /// Bytes the store's directory takes on disk (du) after the workload.
    pub disk_bytes: u64,
    /// Key and value bytes of the live records.
    pub logical_bytes: u64,
    /// disk_bytes / logical_bytes.
    pub space_amp: f64,
    /// The store's disk bytes by what they hold, as the engine counts them
    /// (flexdb: live, garbage, wal, checkpoint, log, other); null for
    /// engines that do not split them.
    #[serde(default)]
    pub disk_parts: Option<BTreeMap<String, u64>>,
    /// The engine's own memory after the workload by what holds it
    /// (flexdb: memtables, memtable_pool, cache, row_cache, sparse_index,
    /// extent_index, snapshot_held); null for engines that do not count
    /// it.
    #[serde(default)]
    pub memory_parts: Option<BTreeMap<String, u64>>,
    /// Bytes the engine's garbage collection relocated since the store was
    /// opened (flexdb); null for engines that do not report it.
    #[serde(default)]
    pub gc_relocated_bytes: Option<u64>,
    /// Bytes the engine wrote since the store was opened, by what wrote
    /// them (flexdb: wal, data, tree, log, and of the data writes
    /// gc_relocated bytes and defragmented_intervals); null for engines
    /// that do not split them. Differences between phases give a phase's.
    #[serde(default)]
    pub written_parts: Option<BTreeMap<String, u64>>,
    /// Counts since the store was opened of what its log rotations did
    /// (flexdb: memtables_committed, commits, logs_prepared, logs_reused);
    /// null for engines that do not report them. Differences between
    /// phases give a phase's.
    #[serde(default)]
    pub log_rotations: Option<BTreeMap<String, u64>>,
    /// The longest reader wait since the store was opened, in microseconds
    /// (flexdb only; null for engines that do not report it).
    pub max_reader_wait_us: Option<f64>,
    /// Memory held by the engine's index (flexdb: sparse index).
    pub index_bytes: Option<u64>,
    /// Memory held by flexdb's extent index.
    pub extent_index_bytes: Option<u64>,
    /// Extents in flexdb's data file (entries of the extent index).
    pub extents: Option<u64>,
    /// Hits over lookups of the engine's cache during the workload
    /// (flexdb's interval cache; null for engines that do not report it).
    #[serde(default)]
    pub cache_hit_ratio: Option<f64>,
    /// Hits over lookups of flexdb's row cache during the workload (null
    /// for other engines, or with the row cache off).
    #[serde(default)]
    pub row_hit_ratio: Option<f64>,
    /// Memory held only for live snapshots after the workload (flexdb).
    #[serde(default)]
    pub snapshot_held_bytes: Option<u64>,
    /// Whether a snapshot was held through the workload (`--hold-snapshot`).
    #[serde(default)]
    pub snapshot_held: bool,
    /// Bytes the write-ahead log's files take on disk after the workload
    /// (flexdb's `Stats::disk_wal_bytes`; null for other engines).
    #[serde(default)]
    pub disk_wal_bytes: Option<u64>,
    /// Resident memory of the process after the workload.
    pub vm_rss_bytes: Option<u64>,
    /// Peak resident memory of the process since the engine was opened.
    pub vm_hwm_bytes: Option<u64>,
    /// Resident anonymous memory of the process after the workload
    /// (`RssAnon`): the resident memory without the pages of mapped files,
    /// which are the kernel's page cache (flexdb maps its data file for
    /// reads and its write-ahead logs).
    #[serde(default)]
    pub rss_anon_bytes: Option<u64>,
    /// The peak of `RssAnon` over the workload and its settling flush,
    /// sampled every `sys::RSS_SAMPLE_PERIOD` by a thread of its own (so a
    /// peak shorter than a period may be missed); null where the process
    /// has no `/proc/self/status`.
    #[serde(default)]
    pub rss_anon_peak_bytes: Option<u64>,
    /// The engine's own memory by part (as `memory_parts`) when `RssAnon`
    /// was at its peak (asked again each time the peak grew by 8 MiB, so
    /// within that of it); null for engines that do not count it.
    #[serde(default)]
    pub memory_parts_at_peak: Option<BTreeMap<String, u64>>,
}

/// Reopen times of one engine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ReopenResult {
    /// The engine.
    pub engine: String,
    /// Which run of `--repeat` this is, from 1.
    #[serde(default = "first_run")]
    pub run: u32,
    /// Always "reopen".
    pub workload: String,
    /// The dataset.
    pub dataset: String,
    /// Records loaded.
    pub records: u64,
    /// Milliseconds a clean close took after the workloads.
    pub close_ms: Option<f64>,
    /// Milliseconds the open after the clean close took.
    pub clean_open_ms: Option<f64>,
    /// Writes the killed child had acknowledged when it was killed.
    pub crash_acknowledged: Option<u64>,
    /// Milliseconds the open after SIGKILL took (recovery).
    pub crash_open_ms: Option<f64>,
    /// Pairs found by a full scan after that recovery (untimed).
    pub crash_recovered_pairs: Option<u64>,
    /// Why a part was not measured, if one was not.
    pub note: Option<String>,
}

fn first_run() -> u32 {
    1
}

impl Record {
    /// Marks the record as measured in run `run` of `--repeat`.
    pub fn set_run(&mut self, run: u32) {
        match self {
            Record::Workload(w) => w.run = run,
            Record::Reopen(r) => r.run = run,
        }
    }

    /// The run of `--repeat` the record was measured in.
    pub fn run(&self) -> u32 {
        match self {
            Record::Workload(w) => w.run,
            Record::Reopen(r) => r.run,
        }
    }
}

/// One line of output.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    /// A workload figure.
    Workload(Box<WorkloadResult>),
    /// Reopen times.
    Reopen(ReopenResult),
}

/// The workload figures among `records`, in order.
pub fn workloads(records: &[Record]) -> Vec<&WorkloadResult> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Workload(w) => Some(w.as_ref()),
            Record::Reopen(_) => None,
        })
        .collect()
}

/// The reopen figures among `records`, in order.
pub fn reopens(records: &[Record]) -> Vec<&ReopenResult> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Reopen(x) => Some(x),
            Record::Workload(_) => None,
        })
        .collect()
}

/// The records as JSON lines.
pub fn json_lines(records: &[Record]) -> String {
    let mut s = String::new();
    for r in records {
        s += &serde_json::to_string(r).unwrap_or_default();
        s.push('\n');
    }
    s
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "n/a".into(), |v| v.to_string())
}

fn mib(v: Option<u64>) -> String {
    opt(v.map(|b| format!("{:.1}", b as f64 / (1 << 20) as f64)))
}

/// The records as human tables: throughput and latency side by side with
/// each engine's throughput over flexdb's, the latency per operation kind,
/// amplification and memory, and reopen times.
pub fn table(records: &[Record]) -> String {
    let ws = workloads(records);
    let mut s = String::new();
    if let Some(first) = ws.first() {
        s += &format!(
            "# ycsb: dataset {} ({} records), dist {}, sync {}{}\n",
            first.dataset,
            first.records,
            first.dist,
            first.sync,
            if first.scan_reverse {
                ", scans in reverse"
            } else {
                ""
            }
        );
    }
    s += &format!(
        "{:<8} {:>3} {:<8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9}\n",
        "workload",
        "thr",
        "engine",
        "ops",
        "Mops/s",
        "x flexdb",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
        "misses"
    );
    for w in &ws {
        let base = ws
            .iter()
            .find(|b| b.engine == "flexdb" && b.workload == w.workload && b.threads == w.threads)
            .map(|b| format!("{:.2}x", w.mops / b.mops.max(1e-12)))
            .unwrap_or_else(|| "-".into());
        s += &format!(
            "{:<8} {:>3} {:<8} {:>11} {:>9.4} {:>9} {:>9.1} {:>9.1} {:>10.1} {:>10.1} {:>9}\n",
            w.workload,
            w.threads,
            w.engine,
            w.ops,
            w.mops,
            base,
            w.p50_us,
            w.p99_us,
            w.p999_us,
            w.max_us,
            w.read_misses
        );
    }
    s += "\n# latency per operation kind (us)\n";
    s += &format!(
        "{:<8} {:>3} {:<8} {:<7} {:>11} {:>9} {:>9} {:>9} {:>10} {:>10}\n",
        "workload", "thr", "engine", "op", "count", "p50", "p95", "p99", "p99.9", "max"
    );
    for w in &ws {
        for (op, l) in &w.latency {
            s += &format!(
                "{:<8} {:>3} {:<8} {:<7} {:>11} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>10.1}\n",
                w.workload,
                w.threads,
                w.engine,
                op,
                l.count,
                l.p50_us,
                l.p95_us,
                l.p99_us,
                l.p999_us,
                l.max_us
            );
        }
    }
    if ws.iter().any(|w| w.abort_rate.is_some()) {
        s += "\n# transactions (committed ones are the ops above)\n";
        s += &format!(
            "{:<8} {:>3} {:<8} {:>11} {:>11} {:>8}\n",
            "workload", "thr", "engine", "committed", "aborted", "abort %"
        );
        for w in ws.iter().filter(|w| w.abort_rate.is_some()) {
            s += &format!(
                "{:<8} {:>3} {:<8} {:>11} {:>11} {:>8.2}\n",
                w.workload,
                w.threads,
                w.engine,
                w.ops,
                w.aborts,
                w.abort_rate.unwrap_or(0.0) * 100.0
            );
        }
    }
    s += "\n# amplification and memory (after each workload; WA = device bytes / user bytes written)\n";
    s += &format!(
        "{:<8} {:>3} {:<8} {:>8} {:>8} {:>10} {:>6} {:>11} {:>6} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>10}\n",
        "workload",
        "thr",
        "engine",
        "WA",
        "procWA",
        "disk MiB",
        "SA",
        "rdwait us",
        "hit %",
        "row %",
        "index MiB",
        "extent MiB",
        "RSS MiB",
        "HWM MiB",
        "anon MiB",
        "anon peak"
    );
    for w in &ws {
        s += &format!(
            "{:<8} {:>3} {:<8} {:>8} {:>8} {:>10.1} {:>6.2} {:>11} {:>6} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>10}\n",
            w.workload,
            w.threads,
            w.engine,
            opt(w.write_amp.map(|v| format!("{v:.2}"))),
            opt(w.process_write_amp.map(|v| format!("{v:.2}"))),
            w.disk_bytes as f64 / (1 << 20) as f64,
            w.space_amp,
            opt(w.max_reader_wait_us.map(|v| format!("{v:.0}"))),
            opt(w.cache_hit_ratio.map(|v| format!("{:.1}", v * 100.0))),
            opt(w.row_hit_ratio.map(|v| format!("{:.1}", v * 100.0))),
            mib(w.index_bytes),
            mib(w.extent_index_bytes),
            mib(w.vm_rss_bytes),
            mib(w.vm_hwm_bytes),
            mib(w.rss_anon_bytes),
            mib(w.rss_anon_peak_bytes),
        );
    }
    let reopens = reopens(records);
    if !reopens.is_empty() {
        s += "\n# reopen (ms): clean close, open after it; open after SIGKILL during writes\n";
        s += &format!(
            "{:<8} {:>10} {:>10} {:>12} {:>12} {:>12}  {}\n",
            "engine", "close", "open", "killed at", "crash open", "recovered", "note"
        );
        for r in reopens {
            let ms = |v: Option<f64>| opt(v.map(|v| format!("{v:.1}")));
            s += &format!(
                "{:<8} {:>10} {:>10} {:>12} {:>12} {:>12}  {}\n",
                r.engine,
                ms(r.close_ms),
                ms(r.clean_open_ms),
                opt(r.crash_acknowledged),
                ms(r.crash_open_ms),
                opt(r.crash_recovered_pairs),
                r.note.as_deref().unwrap_or("")
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(engine: &str, mops: f64) -> WorkloadResult {
        let mut latency = BTreeMap::new();
        latency.insert(
            "read".to_string(),
            Latency {
                count: 10,
                p50_us: 1.0,
                p95_us: 2.0,
                p99_us: 3.0,
                p999_us: 3.5,
                max_us: 4.0,
                mean_us: 1.5,
            },
        );
        WorkloadResult {
            engine: engine.into(),
            workload: "c".into(),
            dataset: "udb".into(),
            dist: "zipf".into(),
            request_dist: "zipf".into(),
            records: 100,
            threads: 2,
            ops: 10,
            mops,
            latency,
            ..Default::default()
        }
    }

    #[test]
    fn json_lines_have_the_issue_shape_and_round_trip() {
        let records = vec![
            Record::Workload(Box::new(sample("flexdb", 0.5))),
            Record::Reopen(ReopenResult {
                engine: "flexdb".into(),
                workload: "reopen".into(),
                clean_open_ms: Some(3.0),
                ..Default::default()
            }),
        ];
        let text = json_lines(&records);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["kind"], "workload");
        assert_eq!(v["engine"], "flexdb");
        assert_eq!(v["workload"], "c");
        assert_eq!(v["threads"], 2);
        assert_eq!(v["mops"], 0.5);
        assert!(v["p99_us"].is_number());
        assert!(v["write_amp"].is_null());
        assert!(v["max_reader_wait_us"].is_null());
        assert_eq!(v["latency"]["read"]["p99_us"], 3.0);
        assert_eq!(v["latency"]["read"]["p999_us"], 3.5);
        assert!(v["p999_us"].is_number());
        assert!(v["rss_anon_peak_bytes"].is_null());
        let back: Vec<Record> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, records);
    }

    #[test]
    fn lines_written_before_repeats_existed_read_as_run_1() {
        let mut v =
            serde_json::to_value(Record::Workload(Box::new(sample("flexdb", 0.5)))).unwrap();
        v.as_object_mut().unwrap().remove("run");
        let old: Record = serde_json::from_value(v).unwrap();
        assert_eq!(old.run(), 1);
        let v = serde_json::json!({"kind": "reopen", "engine": "flexdb", "workload": "reopen",
            "dataset": "udb", "records": 1, "close_ms": null, "clean_open_ms": 2.0,
            "crash_acknowledged": null, "crash_open_ms": null, "crash_recovered_pairs": null,
            "note": null});
        let old: Record = serde_json::from_value(v).unwrap();
        assert_eq!(old.run(), 1);
    }

    #[test]
    fn the_table_compares_with_flexdb() {
        let t = table(&[
            Record::Workload(Box::new(sample("flexdb", 0.5))),
            Record::Workload(Box::new(sample("rocksdb", 0.25))),
        ]);
        assert!(t.contains("0.50x"), "{t}");
        assert!(t.contains("1.00x"), "{t}");
        assert!(t.contains("n/a"), "{t}");
    }

    #[test]
    fn p999_sees_the_one_slow_operation_in_a_thousand_that_p99_misses() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for _ in 0..9_980 {
            h.record(10_000).unwrap();
        }
        // 20 of 10,000 (0.2%) take 50 ms: above p99.9, below p99.
        for _ in 0..20 {
            h.record(50_000_000).unwrap();
        }
        let l = Latency::of(&h);
        assert!((l.p99_us - 10.0).abs() < 0.1, "{l:?}");
        assert!((l.p999_us - 50_000.0).abs() < 50.0, "{l:?}");
        assert!((l.max_us - 50_000.0).abs() < 50.0, "{l:?}");
    }

    #[test]
    fn lines_written_before_p999_and_the_rss_peak_read_as_zero_and_null() {
        let mut v =
            serde_json::to_value(Record::Workload(Box::new(sample("flexdb", 0.5)))).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("p999_us");
        o.remove("rss_anon_peak_bytes");
        o["latency"]["read"]
            .as_object_mut()
            .unwrap()
            .remove("p999_us");
        let Record::Workload(old) = serde_json::from_value(v).unwrap() else {
            panic!("not a workload line");
        };
        assert_eq!(old.p999_us, 0.0);
        assert_eq!(old.latency["read"].p999_us, 0.0);
        assert_eq!(old.rss_anon_peak_bytes, None);
    }

    #[test]
    fn latency_of_a_histogram() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let l = Latency::of(&h);
        assert_eq!(l.count, 1000);
        assert!((l.p50_us - 500.0).abs() < 1.0, "{l:?}");
        assert!((l.p99_us - 990.0).abs() < 1.0, "{l:?}");
        assert!((l.p999_us - 999.0).abs() < 1.0, "{l:?}");
        assert!((l.max_us - 1000.0).abs() < 1.0, "{l:?}");
        assert_eq!(
            Latency::of(&Histogram::<u64>::new(3).unwrap()),
            Latency::default()
        );
    }
}
