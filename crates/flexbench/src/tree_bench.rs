//! `flexbench tree`: Table 1 of the paper. Each structure is built to N
//! extents by appends (untimed), then random lookups, range queries of about
//! 50 extents, random inserts and appends are timed at that size, each phase
//! `repeats` times; the report gives the median rate with the slowest and
//! fastest run, so one preemption or page-fault burst on the shared machine
//! moves a figure no more than the other runs let it.
//!
//! Invariants: every structure sees the same operations (same seed, same
//! offsets), and every repeat of a phase the same operations too; lookups
//! and range queries run on the built structure, inserts and then appends
//! on a fresh copy of it per repeat (copied untimed), so every repeat
//! measures the same structure; an insert phase grows the structure by at
//! most ~10% so the figures describe size N; baselines whose operations
//! cost O(N) stop a run at its share of the phase's time budget (at least a
//! few operations always run).

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::baseline::array::SortedArray;
use crate::baseline::btree::AbsoluteBTree;
use crate::index::ExtentIndex;

/// Length of the extents the structures are built from.
const EXTENT_LEN: u64 = 100;
/// Length of an inserted or appended extent.
const NEW_LEN: u64 = 10;

/// Settings of one run.
pub struct TreeBench {
    /// Extents to build each structure to.
    pub extents: u64,
    /// Structures to run, by name.
    pub structures: Vec<String>,
    /// Operations per phase (before the time budget).
    pub ops: Option<u64>,
    /// Time budget per phase, shared by its repeats.
    pub phase_seconds: f64,
    /// Timed runs of each phase (at least 1).
    pub repeats: u32,
    /// Random seed.
    pub seed: u64,
}

/// One measured (structure, operation) figure.
#[derive(Serialize, Clone, Debug)]
pub struct OpResult {
    /// The structure.
    pub structure: String,
    /// insert, append, lookup or range.
    pub op: String,
    /// The size the structure was built to.
    pub extents: u64,
    /// Millions of operations per second: the median over the repeats.
    pub mops: f64,
    /// The slowest repeat's rate.
    pub mops_min: f64,
    /// The fastest repeat's rate.
    pub mops_max: f64,
    /// Timed runs of the phase.
    pub repeats: u32,
    /// Operations timed in one run (the median run's, where the time
    /// budget stopped runs at different counts).
    pub ops: u64,
}

/// Memory held by one structure after the build.
#[derive(Serialize, Clone, Debug)]
pub struct MemoryResult {
    /// The structure.
    pub structure: String,
    /// Always "memory".
    pub op: String,
    /// Extents held.
    pub extents: u64,
    /// Bytes held per extent.
    pub bytes_per_extent: f64,
}

/// Everything one run measured.
pub struct Report {
    /// Throughput figures.
    pub ops: Vec<OpResult>,
    /// Memory figures.
    pub memory: Vec<MemoryResult>,
}

fn new_structure(name: &str) -> Option<Box<dyn ExtentIndex>> {
    match name {
        "flextree" => Some(Box::new(flextree::FlexTree::new())),
        "btree" => Some(Box::new(AbsoluteBTree::new())),
        "array" => Some(Box::new(SortedArray::new())),
        _ => None,
    }
}

/// The structure names `--structures` accepts.
pub const STRUCTURES: [&str; 3] = ["flextree", "btree", "array"];

/// Runs `op(i)` for i in 0..max_ops, stopping early once `budget` has passed
/// (checked every 16 operations). Returns (operations, seconds).
fn timed(max_ops: u64, budget: Duration, mut op: impl FnMut(u64)) -> (u64, f64) {
    let start = Instant::now();
    let mut done = 0;
    while done < max_ops {
        let stop = (done + 16).min(max_ops);
        for i in done..stop {
            op(i);
        }
        done = stop;
        if start.elapsed() > budget {
            break;
        }
    }
    (done, start.elapsed().as_secs_f64())
}

impl TreeBench {
    /// Runs every structure and returns the figures.
    pub fn run(&self) -> Result<Report, String> {
        let mut report = Report {
            ops: Vec::new(),
            memory: Vec::new(),
        };
        for name in &self.structures {
            let mut s = new_structure(name).ok_or_else(|| format!("unknown structure {name}"))?;
            self.run_one(s.as_mut(), &mut report);
        }
        Ok(report)
    }

    fn run_one(&self, s: &mut dyn ExtentIndex, report: &mut Report) {
        let n = self.extents;
        for i in 0..n {
            // Gaps between physical addresses keep neighbours from merging.
            s.append(EXTENT_LEN, i * 2 * EXTENT_LEN);
        }
        report.memory.push(MemoryResult {
            structure: s.name().to_string(),
            op: "memory".into(),
            extents: s.extent_count(),
            bytes_per_extent: s.memory_usage() as f64 / s.extent_count().max(1) as f64,
        });
        let repeats = self.repeats.max(1);
        let budget = Duration::from_secs_f64(self.phase_seconds / f64::from(repeats));
        let mut rng = StdRng::seed_from_u64(self.seed);
        let total = s.len();
        let reads = self.ops.unwrap_or(n.clamp(1000, 1_000_000));
        let lookups: Vec<u64> = (0..reads).map(|_| rng.gen_range(0..total)).collect();
        let span = 50 * EXTENT_LEN;
        let ranges: Vec<u64> = (0..reads / 4)
            .map(|_| rng.gen_range(0..total.saturating_sub(span).max(1)))
            .collect();
        // Inserts add two extents each (the one they split and their own).
        let writes = self.ops.unwrap_or((n / 20).max(1000));
        let inserts: Vec<u64> = (0..writes)
            .map(|i| rng.gen_range(0..=total + i * NEW_LEN))
            .collect();
        let insert_base = n * 2 * EXTENT_LEN;
        let append_base = insert_base + writes * 2 * NEW_LEN;
        let mut sink = 0u64;
        let mut out = Vec::new();
        // Runs of (operations, seconds) per phase. The phases alternate
        // within each round, so a burst of load hits one round of every
        // phase rather than every run of one.
        let mut runs: [Vec<(u64, f64)>; 4] = Default::default();
        for _ in 0..repeats {
            runs[0].push(timed(reads, budget, |i| {
                sink = sink.wrapping_add(s.lookup(lookups[i as usize]).unwrap_or(0));
            }));
            runs[1].push(timed(reads / 4, budget, |i| {
                s.range(ranges[i as usize], span.min(total), &mut out);
                sink = sink.wrapping_add(out.len() as u64);
            }));
            let mut copy = s.clone_box();
            runs[2].push(timed(writes, budget, |i| {
                copy.insert(inserts[i as usize], NEW_LEN, insert_base + i * 2 * NEW_LEN);
            }));
            runs[3].push(timed(writes, budget, |i| {
                copy.append(NEW_LEN, append_base + i * 2 * NEW_LEN);
            }));
        }
        for (op, runs) in ["lookup", "range", "insert", "append"].iter().zip(&runs) {
            report.ops.push(self.summarize(s.name(), op, runs));
        }
        std::hint::black_box(sink);
    }

    /// The figure of one phase from its runs of (operations, seconds).
    fn summarize(&self, structure: &str, op: &str, runs: &[(u64, f64)]) -> OpResult {
        let mut by_rate: Vec<(f64, u64)> = runs
            .iter()
            .map(|&(ops, secs)| (ops as f64 / secs.max(1e-9) / 1e6, ops))
            .collect();
        by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
        let rates: Vec<f64> = by_rate.iter().map(|r| r.0).collect();
        OpResult {
            structure: structure.to_string(),
            op: op.to_string(),
            extents: self.extents,
            mops: crate::median::of_sorted(&rates),
            mops_min: rates[0],
            mops_max: rates[rates.len() - 1],
            repeats: runs.len() as u32,
            ops: by_rate[by_rate.len() / 2].1,
        }
    }
}

impl Report {
    /// The report as a human table: each phase's median rate over its
    /// repeats, the slowest and fastest repeat, and each structure's ratio
    /// to flextree (of the medians).
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<10} {:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}\n",
            "structure", "op", "extents", "ops", "Mops/s", "min", "max", "flextree/x"
        );
        for r in &self.ops {
            let base = self
                .ops
                .iter()
                .find(|b| b.structure == "flextree" && b.op == r.op)
                .map(|b| format!("{:.1}x", b.mops / r.mops.max(1e-12)))
                .unwrap_or_else(|| "-".into());
            s += &format!(
                "{:<10} {:<7} {:>10} {:>10} {:>10.4} {:>10.4} {:>10.4} {:>12}\n",
                r.structure, r.op, r.extents, r.ops, r.mops, r.mops_min, r.mops_max, base
            );
        }
        if let Some(r) = self.ops.first() {
            s += &format!("(Mops/s: median of {} runs; ops: per run)\n", r.repeats);
        }
        for m in &self.memory {
            s += &format!(
                "{:<10} memory  {:>10} extents, {:.1} bytes/extent\n",
                m.structure, m.extents, m.bytes_per_extent
            );
        }
        s
    }

    /// The report as JSON lines.
    pub fn json_lines(&self) -> String {
        let mut s = String::new();
        for r in &self.ops {
            s += &serde_json::to_string(r).unwrap_or_default();
            s.push('\n');
        }
        for m in &self.memory {
            s += &serde_json::to_string(m).unwrap_or_default();
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(extents: u64, repeats: u32) -> TreeBench {
        TreeBench {
            extents,
            structures: vec!["flextree".into()],
            ops: None,
            phase_seconds: 10.0,
            repeats,
            seed: 1,
        }
    }

    #[test]
    fn summary_is_the_median_run_with_its_extremes() {
        let b = bench(1000, 3);
        // 2, 4 and 1 Mops/s.
        let r = b.summarize("x", "insert", &[(2000, 1e-3), (400, 1e-4), (1000, 1e-3)]);
        assert!((r.mops - 2.0).abs() < 1e-9);
        assert!((r.mops_min - 1.0).abs() < 1e-9);
        assert!((r.mops_max - 4.0).abs() < 1e-9);
        assert_eq!((r.repeats, r.ops), (3, 2000));
    }

    #[test]
    fn repeats_leave_the_built_structure_as_built() {
        let b = bench(5000, 3);
        for name in STRUCTURES {
            let mut s = new_structure(name).unwrap();
            let mut report = Report {
                ops: Vec::new(),
                memory: Vec::new(),
            };
            b.run_one(s.as_mut(), &mut report);
            // Inserts and appends ran on copies: the built structure is
            // unchanged.
            assert_eq!(s.extent_count(), 5000, "{name}");
            assert_eq!(s.len(), 5000 * EXTENT_LEN, "{name}");
            assert_eq!(s.lookup(4999 * EXTENT_LEN), Some(4999 * 2 * EXTENT_LEN));
            let ops: Vec<&str> = report.ops.iter().map(|r| r.op.as_str()).collect();
            assert_eq!(ops, ["lookup", "range", "insert", "append"]);
            for r in &report.ops {
                assert_eq!(r.repeats, 3);
                assert!(r.mops_min <= r.mops && r.mops <= r.mops_max, "{r:?}");
                assert!(r.mops_min > 0.0);
            }
            // Every run timed every operation (no budget cut): 1000 writes.
            assert_eq!(report.ops[2].ops, 1000, "{name}");
            let table = report.table();
            assert!(table.contains("median of 3 runs"), "{table}");
        }
    }

    #[test]
    fn copies_are_independent_and_equal() {
        for name in STRUCTURES {
            let mut s = new_structure(name).unwrap();
            for i in 0..3000 {
                s.append(EXTENT_LEN, i * 2 * EXTENT_LEN);
            }
            let mut copy = s.clone_box();
            copy.insert(150, NEW_LEN, 1 << 40);
            assert_eq!(copy.lookup(155), Some((1 << 40) + 5), "{name}");
            assert_eq!(s.lookup(155), Some(255), "{name}");
            assert_eq!(copy.len(), s.len() + NEW_LEN);
            let (mut a, mut c) = (Vec::new(), Vec::new());
            s.range(1000, 100_000, &mut a);
            copy.range(1000 + NEW_LEN, 100_000, &mut c);
            assert_eq!(a, c, "{name}");
        }
    }
}
