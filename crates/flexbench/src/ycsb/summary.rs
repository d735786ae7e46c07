//! The summary of a benchmark repeated with `--repeat N`: per engine,
//! workload and thread count, the median, lowest and highest throughput
//! over the runs, and each engine's throughput over flexdb's.
//!
//! A shared machine's speed drifts by more than most effects worth
//! measuring, so one run proves little; the runs of a repeat alternate
//! engines (run 1 of every engine, then run 2, ...), and the ratio to
//! flexdb is taken within each run before its median is, so that drift
//! between runs cancels out of the comparison.
//!
//! Invariants: runs count from 1 (the harness numbers every record); a
//! figure absent from every run is "n/a", and a ratio with no flexdb
//! figure to divide by is "-", never 0; a run where flexdb measured no
//! throughput gives no ratio.

use std::collections::BTreeMap;

use crate::median::of as median;
use crate::ycsb::report::{reopens, workloads, Record, ReopenResult, WorkloadResult};

/// The figures of one engine, workload and thread count over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The engine.
    pub engine: String,
    /// The workload.
    pub workload: String,
    /// Client threads.
    pub threads: usize,
    /// Runs measured.
    pub runs: usize,
    /// Median Mops/s.
    pub median_mops: f64,
    /// Lowest Mops/s.
    pub min_mops: f64,
    /// Highest Mops/s.
    pub max_mops: f64,
    /// Median over the runs of this engine's Mops/s over flexdb's in the
    /// same run (`None` when no run has flexdb's figure).
    pub median_ratio: Option<f64>,
    /// Median p99 latency over all operations, in microseconds.
    pub median_p99_us: f64,
    /// The longest reader wait of any run, in microseconds.
    pub max_reader_wait_us: Option<f64>,
}

/// One summary per engine, workload and thread count, in the order they
/// first appear in `records`.
pub fn summarize(records: &[Record]) -> Vec<Summary> {
    let ws = workloads(records);
    let mut order: Vec<(String, String, usize)> = Vec::new();
    let mut by_key: BTreeMap<(String, String, usize), Vec<&WorkloadResult>> = BTreeMap::new();
    for w in &ws {
        let k = (w.engine.clone(), w.workload.clone(), w.threads);
        if !by_key.contains_key(&k) {
            order.push(k.clone());
        }
        by_key.entry(k).or_default().push(w);
    }
    let flexdb_in_run = |run: u32, workload: &str, threads: usize| {
        ws.iter()
            .find(|b| {
                b.engine == "flexdb"
                    && b.run == run
                    && b.workload == workload
                    && b.threads == threads
            })
            .map(|b| b.mops)
    };
    order
        .into_iter()
        .map(|k| {
            let runs = &by_key[&k];
            let mut mops: Vec<f64> = runs.iter().map(|w| w.mops).collect();
            let mut p99: Vec<f64> = runs.iter().map(|w| w.p99_us).collect();
            let mut ratios: Vec<f64> = runs
                .iter()
                .filter_map(|w| {
                    flexdb_in_run(w.run, &w.workload, w.threads)
                        .filter(|&b| b > 0.0)
                        .map(|b| w.mops / b)
                })
                .collect();
            let max_reader_wait_us = runs
                .iter()
                .filter_map(|w| w.max_reader_wait_us)
                .reduce(f64::max);
            Summary {
                runs: runs.len(),
                min_mops: mops.iter().copied().fold(f64::INFINITY, f64::min),
                max_mops: mops.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                median_mops: median(&mut mops).unwrap_or(0.0),
                median_ratio: median(&mut ratios),
                median_p99_us: median(&mut p99).unwrap_or(0.0),
                max_reader_wait_us,
                engine: k.0,
                workload: k.1,
                threads: k.2,
            }
        })
        .collect()
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.digits$}"))
}

/// The summary as a human table, with the reopen times' medians.
pub fn table(records: &[Record]) -> String {
    let runs = records.iter().map(Record::run).max().unwrap_or(0).max(1);
    let mut s = format!(
        "# median of {runs} runs (min and max beside it; x flexdb: median of the per-run ratios)\n"
    );
    s += &format!(
        "{:<8} {:>3} {:<8} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}\n",
        "workload",
        "thr",
        "engine",
        "runs",
        "Mops/s",
        "min",
        "max",
        "x flexdb",
        "p99 us",
        "rdwait us"
    );
    for m in summarize(records) {
        s += &format!(
            "{:<8} {:>3} {:<8} {:>4} {:>9.4} {:>9.4} {:>9.4} {:>9} {:>9.1} {:>11}\n",
            m.workload,
            m.threads,
            m.engine,
            m.runs,
            m.median_mops,
            m.min_mops,
            m.max_mops,
            m.median_ratio
                .map_or_else(|| "-".into(), |r| format!("{r:.2}x")),
            m.median_p99_us,
            opt(m.max_reader_wait_us, 0),
        );
    }
    let reopens = reopens(records);
    let mut engines: Vec<&str> = Vec::new();
    for r in &reopens {
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
    }
    if !engines.is_empty() {
        s += "\n# reopen, median of the runs (ms)\n";
        s += &format!(
            "{:<8} {:>10} {:>10} {:>12}\n",
            "engine", "close", "open", "crash open"
        );
        for e in engines {
            let of = |f: fn(&ReopenResult) -> Option<f64>| {
                let mut v: Vec<f64> = reopens
                    .iter()
                    .filter(|r| r.engine == e)
                    .filter_map(|r| f(r))
                    .collect();
                opt(median(&mut v), 1)
            };
            s += &format!(
                "{:<8} {:>10} {:>10} {:>12}\n",
                e,
                of(|r| r.close_ms),
                of(|r| r.clean_open_ms),
                of(|r| r.crash_open_ms)
            );
        }
    }
    s
}

/// For each engine, workload and thread count, the record of the run whose
/// throughput is nearest the median (for the plot of a repeated benchmark;
/// different workloads may come from different runs).
pub fn median_records(records: &[Record]) -> Vec<Record> {
    let ws = workloads(records);
    summarize(records)
        .into_iter()
        .filter_map(|m| {
            ws.iter()
                .filter(|w| {
                    w.engine == m.engine && w.workload == m.workload && w.threads == m.threads
                })
                .min_by(|a, b| {
                    (a.mops - m.median_mops)
                        .abs()
                        .total_cmp(&(b.mops - m.median_mops).abs())
                })
                .map(|&w| Record::Workload(Box::new(w.clone())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(engine: &str, run: u32, workload: &str, mops: f64) -> Record {
        Record::Workload(Box::new(WorkloadResult {
            engine: engine.into(),
            run,
            workload: workload.into(),
            threads: 2,
            mops,
            p99_us: 10.0 * f64::from(run),
            max_reader_wait_us: (engine == "flexdb").then_some(f64::from(run)),
            ..Default::default()
        }))
    }

    #[test]
    fn ratios_are_taken_within_a_run_before_the_median() {
        // The machine halves its speed in run 3: both engines slow down,
        // their ratio does not.
        let records = vec![
            result("flexdb", 1, "c", 1.0),
            result("peer", 1, "c", 0.5),
            result("flexdb", 2, "c", 1.2),
            result("peer", 2, "c", 0.6),
            result("flexdb", 3, "c", 0.5),
            result("peer", 3, "c", 0.25),
        ];
        let s = summarize(&records);
        assert_eq!(s.len(), 2);
        let flexdb = &s[0];
        assert_eq!((flexdb.engine.as_str(), flexdb.runs), ("flexdb", 3));
        assert_eq!(flexdb.median_mops, 1.0);
        assert_eq!((flexdb.min_mops, flexdb.max_mops), (0.5, 1.2));
        assert_eq!(flexdb.median_ratio, Some(1.0));
        assert_eq!(flexdb.median_p99_us, 20.0);
        assert_eq!(flexdb.max_reader_wait_us, Some(3.0));
        let peer = &s[1];
        assert_eq!(peer.median_mops, 0.5);
        assert_eq!(peer.median_ratio, Some(0.5));
        assert_eq!(peer.max_reader_wait_us, None);
    }

    #[test]
    fn a_run_where_flexdb_measured_nothing_gives_no_ratio() {
        let records = vec![
            result("flexdb", 1, "c", 0.0),
            result("peer", 1, "c", 0.5),
            result("flexdb", 2, "c", 1.0),
            result("peer", 2, "c", 0.7),
        ];
        let s = summarize(&records);
        assert_eq!(s[1].median_ratio, Some(0.7));
        let t = table(&[result("peer", 1, "c", 0.5)]);
        assert!(t.contains(" - "), "{t}");
    }

    #[test]
    fn the_table_shows_medians_and_the_median_records_are_real_runs() {
        let mut records = vec![
            result("flexdb", 1, "a", 0.30),
            result("flexdb", 2, "a", 0.50),
            result("flexdb", 3, "a", 0.40),
        ];
        for run in 1..=3 {
            records.push(Record::Reopen(ReopenResult {
                engine: "flexdb".into(),
                run,
                clean_open_ms: Some(100.0 * f64::from(run)),
                ..Default::default()
            }));
        }
        let t = table(&records);
        assert!(t.contains("median of 3 runs"), "{t}");
        assert!(t.contains("0.4000"), "{t}");
        assert!(t.contains("0.3000") && t.contains("0.5000"), "{t}");
        assert!(t.contains("200.0"), "{t}");
        let m = median_records(&records);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].run(), 3);
    }
}
