//! Profiling harness for the random-insert path (docs/DESIGN.md, "The
//! random-insert path"): builds a tree of N extents by appends, like
//! `flexbench tree`, then times random inserts and lookups in functions that
//! are never inlined, so `valgrind --tool=callgrind --toggle-collect=...`
//! and `perf record` can isolate them.
//!
//! ```sh
//! cargo run --release -p flextree --example insert_path -- 1000000 50000 5
//! ```
//!
//! Arguments: extents (10^6), inserts per trial (N/20), trials (5). Every
//! trial inserts into a fresh clone of the built tree. `SORTED=1` sorts the
//! insert offsets (the same work without the leaf misses).
//!
//! Invariants: insert `i` lands at an offset of at most `len + i * NEW_LEN`
//! (the tree's length when it runs), sorted or not, so every insert is
//! valid; lookups stay below the built length.

use std::time::Instant;

use flextree::FlexTree;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const EXTENT_LEN: u64 = 100;
const NEW_LEN: u64 = 10;

/// The timed inserts.
#[inline(never)]
fn inserts(tree: &mut FlexTree, offsets: &[u64], base: u64) {
    for (i, &off) in offsets.iter().enumerate() {
        tree.insert(off, NEW_LEN, base + i as u64 * 2 * NEW_LEN)
            .expect("valid insert");
    }
}

/// The timed lookups.
#[inline(never)]
fn lookups(tree: &FlexTree, offsets: &[u64]) -> u64 {
    let mut sink = 0u64;
    for &off in offsets {
        sink = sink.wrapping_add(tree.lookup(off).expect("valid lookup").unwrap_or(0));
    }
    sink
}

/// Prints how much of the process sits on transparent huge pages.
fn huge_pages(when: &str) {
    if let Ok(s) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        for line in s.lines().filter(|l| l.starts_with("AnonHugePages")) {
            println!("{when}: {line}");
        }
    }
}

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map(|s| s.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let n = arg(1, 1_000_000);
    let m = arg(2, (n / 20).max(1000));
    let trials = arg(3, 5);
    let mut tree = FlexTree::new();
    for i in 0..n {
        tree.append(EXTENT_LEN, i * 2 * EXTENT_LEN).expect("append");
    }
    let total = tree.len();
    let mut rng = StdRng::seed_from_u64(1);
    let offs: Vec<u64> = (0..m)
        .map(|i| rng.gen_range(0..=total + i * NEW_LEN))
        .collect();
    let mut offs = offs;
    if std::env::var_os("SORTED").is_some() {
        // Sorted offsets visit the leaves in order (cache and TLB hits):
        // the difference to random offsets is the cost of the misses. The
        // i-th smallest offset is still at most total + i * NEW_LEN.
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
    for t in 0..trials {
        let mut copy = tree.clone();
        let start = Instant::now();
        inserts(&mut copy, &offs, n * 2 * EXTENT_LEN);
        let ins = m as f64 / start.elapsed().as_secs_f64() / 1e6;
        if t == 0 {
            huge_pages("with a clone");
        }
        let start = Instant::now();
        sink += lookups(&tree, &looks);
        let look = m as f64 / start.elapsed().as_secs_f64() / 1e6;
        println!("trial {t}: insert {ins:.3} Mops/s, lookup {look:.3} Mops/s");
    }
    std::hint::black_box(sink);
}
