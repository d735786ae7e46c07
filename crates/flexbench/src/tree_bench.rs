//! `flexbench tree`: Table 1 of the paper. Each structure is built to N
//! extents by appends (untimed), then random lookups, range queries of about
//! 50 extents, random inserts and appends are timed at that size.
//!
//! Invariants: every structure sees the same operations (same seed, same
//! offsets); an insert phase grows the structure by at most ~10% so the
//! figures describe size N; baselines whose operations cost O(N) stop a
//! phase at its time budget (at least a few operations always run).

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
    /// Time budget per phase.
    pub phase_seconds: f64,
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
    /// Millions of operations per second.
    pub mops: f64,
    /// Operations timed.
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
        let budget = Duration::from_secs_f64(self.phase_seconds);
        let mut rng = StdRng::seed_from_u64(self.seed);
        let total = s.len();
        let reads = self.ops.unwrap_or(n.clamp(1000, 1_000_000));
        let lookups: Vec<u64> = (0..reads).map(|_| rng.gen_range(0..total)).collect();
        let mut sink = 0u64;
        let (ops, secs) = timed(reads, budget, |i| {
            sink = sink.wrapping_add(s.lookup(lookups[i as usize]).unwrap_or(0));
        });
        self.push(report, s, "lookup", ops, secs);
        let span = 50 * EXTENT_LEN;
        let ranges: Vec<u64> = (0..reads / 4)
            .map(|_| rng.gen_range(0..total.saturating_sub(span).max(1)))
            .collect();
        let mut out = Vec::new();
        let (ops, secs) = timed(reads / 4, budget, |i| {
            s.range(ranges[i as usize], span.min(total), &mut out);
            sink = sink.wrapping_add(out.len() as u64);
        });
        self.push(report, s, "range", ops, secs);
        // Inserts add two extents each (the one they split and their own).
        let writes = self.ops.unwrap_or((n / 20).max(1000));
        let inserts: Vec<u64> = (0..writes)
            .map(|i| rng.gen_range(0..=total + i * NEW_LEN))
            .collect();
        let base = n * 2 * EXTENT_LEN;
        let (ops, secs) = timed(writes, budget, |i| {
            s.insert(inserts[i as usize], NEW_LEN, base + i * 2 * NEW_LEN);
        });
        self.push(report, s, "insert", ops, secs);
        let base = base + writes * 2 * NEW_LEN;
        let (ops, secs) = timed(writes, budget, |i| {
            s.append(NEW_LEN, base + i * 2 * NEW_LEN);
        });
        self.push(report, s, "append", ops, secs);
        std::hint::black_box(sink);
    }

    fn push(&self, report: &mut Report, s: &dyn ExtentIndex, op: &str, ops: u64, secs: f64) {
        report.ops.push(OpResult {
            structure: s.name().to_string(),
            op: op.to_string(),
            extents: self.extents,
            mops: ops as f64 / secs.max(1e-9) / 1e6,
            ops,
        });
    }
}

impl Report {
    /// The report as a human table, with each structure's ratio to
    /// flextree.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<10} {:<7} {:>10} {:>10} {:>10} {:>12}\n",
            "structure", "op", "extents", "ops", "Mops/s", "flextree/x"
        );
        for r in &self.ops {
            let base = self
                .ops
                .iter()
                .find(|b| b.structure == "flextree" && b.op == r.op)
                .map(|b| format!("{:.1}x", b.mops / r.mops.max(1e-12)))
                .unwrap_or_else(|| "-".into());
            s += &format!(
                "{:<10} {:<7} {:>10} {:>10} {:>10.4} {:>12}\n",
                r.structure, r.op, r.extents, r.ops, r.mops, base
            );
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
