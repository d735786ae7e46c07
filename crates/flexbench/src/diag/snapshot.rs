//! `flexbench diag snapshot`: what a point-in-time view costs. Loads N
//! udb-sized pairs, commits them, then times `Db::snapshot` (taken and
//! dropped), `Db::snapshot` while a thousand others are held, and creating
//! an iterator (`Db::iter` plus its first pair), each the median of several
//! rounds. Run at two sizes (say 10^4 and 10^7 pairs) to see whether the
//! cost grows with the store: it must not (no copy of an index).
//!
//! Invariant: the store lives in a temporary directory removed at the end.

use std::time::Instant;

use super::udb_key;

/// Arguments of `flexbench diag snapshot`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Pairs to load first.
    #[arg(long, default_value_t = 10_000)]
    pairs: u64,
    /// Operations timed per round.
    #[arg(long, default_value_t = 100_000)]
    ops: u64,
    /// Rounds; the median counts.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

/// The median of `f()`'s nanoseconds per operation over `rounds` rounds of
/// `ops` operations.
fn median_ns(rounds: usize, ops: u64, mut f: impl FnMut()) -> f64 {
    let mut per_op: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..ops {
                f();
            }
            t.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    per_op.sort_by(f64::total_cmp);
    per_op[per_op.len() / 2]
}

/// Runs the diagnostic.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir_in(".")?;
    let db = super::open_in(&tmp)?;
    let n = args.pairs.max(1);
    let ops = args.ops.max(1);
    let value = [7u8; 127];
    let t = Instant::now();
    for i in 0..n {
        db.put(udb_key(i), value)?;
    }
    db.flush()?;
    println!(
        "loaded and committed {n} pairs in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let take = median_ns(args.rounds, ops, || {
        std::hint::black_box(db.snapshot());
    });
    let held: Vec<flexdb::Snapshot> = (0..1000).map(|_| db.snapshot()).collect();
    let take_held = median_ns(args.rounds, ops, || {
        std::hint::black_box(db.snapshot());
    });
    let live = db.stats().snapshots_live;
    drop(held);
    let mut failed = None;
    let iter = median_ns(args.rounds, ops, || {
        let mut it = db.iter();
        match it.next() {
            Some(Err(e)) => failed = Some(e),
            pair => {
                std::hint::black_box(pair);
            }
        }
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    println!("snapshot taken and dropped: {take:.0} ns");
    println!("snapshot with 1000 held ({live} live): {take_held:.0} ns");
    println!("iterator created, first pair read: {iter:.0} ns");
    db.close()?;
    Ok(())
}
