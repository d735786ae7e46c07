//! `flexbench diag tree-insert`: FlexTree's random-insert path (profiling
//! harness). Builds a tree of N extents by appends, like `flexbench tree`,
//! then times random inserts and lookups in functions that are never
//! inlined, so `valgrind --tool=callgrind --toggle-collect=...` and `perf
//! record` can isolate them. Every trial inserts into a fresh clone.
//!
//! Invariant: insert `i` lands at an offset of at most `len + i * NEW_LEN`
//! (the tree's length when it runs), sorted or not, so every insert is
//! valid; lookups stay below the built length.

use std::time::Instant;

use flextree::FlexTree;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Bytes of each appended extent.
const EXTENT_LEN: u64 = 100;
/// Bytes of each inserted extent.
const NEW_LEN: u64 = 10;

/// Arguments of `flexbench diag tree-insert`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Extents to build the tree to.
    #[arg(long, default_value_t = 1_000_000)]
    extents: u64,
    /// Inserts (and lookups) per trial (default N/20, at least 1000).
    #[arg(long)]
    inserts: Option<u64>,
    /// Trials.
    #[arg(long, default_value_t = 5)]
    trials: u64,
    /// Sort the insert offsets (the same work without the leaf misses).
    #[arg(long)]
    sorted: bool,
}

/// The timed inserts.
#[inline(never)]
fn inserts(tree: &mut FlexTree, offsets: &[u64], base: u64) -> flextree::Result<()> {
    for (i, &off) in offsets.iter().enumerate() {
        tree.insert(off, NEW_LEN, base + i as u64 * 2 * NEW_LEN)?;
    }
    Ok(())
}

/// The timed lookups.
#[inline(never)]
fn lookups(tree: &FlexTree, offsets: &[u64]) -> flextree::Result<u64> {
    let mut sink = 0u64;
    for &off in offsets {
        sink = sink.wrapping_add(tree.lookup(off)?.unwrap_or(0));
    }
    Ok(sink)
}

/// Prints how much of the process sits on transparent huge pages.
fn huge_pages(when: &str) {
    if let Ok(s) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        for line in s.lines().filter(|l| l.starts_with("AnonHugePages")) {
            println!("{when}: {line}");
        }
    }
}

/// Runs the diagnostic.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let n = args.extents.max(1);
    let m = args.inserts.unwrap_or((n / 20).max(1000));
    let mut tree = FlexTree::new();
    for i in 0..n {
        tree.append(EXTENT_LEN, i * 2 * EXTENT_LEN)?;
    }
    let total = tree.len();
    let mut rng = StdRng::seed_from_u64(1);
    let mut offs: Vec<u64> = (0..m)
        .map(|i| rng.gen_range(0..=total + i * NEW_LEN))
        .collect();
    if args.sorted {
        // The i-th smallest offset is still at most total + i * NEW_LEN.
        offs.sort_unstable();
    }
    let looks: Vec<u64> = (0..m).map(|_| rng.gen_range(0..total)).collect();
    println!(
        "{n} extents, {:.1} B/extent, height {}",
        tree.memory_usage() as f64 / n as f64,
        tree.height()
    );
    huge_pages("built");
    let mut sink = 0;
    for t in 0..args.trials {
        let mut copy = tree.clone();
        let start = Instant::now();
        inserts(&mut copy, &offs, n * 2 * EXTENT_LEN)?;
        let ins = m as f64 / start.elapsed().as_secs_f64() / 1e6;
        if t == 0 {
            huge_pages("with a clone");
        }
        let start = Instant::now();
        sink += lookups(&tree, &looks)?;
        let look = m as f64 / start.elapsed().as_secs_f64() / 1e6;
        println!("trial {t}: insert {ins:.3} Mops/s, lookup {look:.3} Mops/s");
    }
    std::hint::black_box(sink);
    Ok(())
}
