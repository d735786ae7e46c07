//! `flexbench diag scan`: what a short range scan costs, from a random key,
//! while every pair is still in the MemTable and again after they are
//! committed to the space. Loads N udb-sized pairs in a scrambled order
//! (without a flush), then times scans of `--len` pairs from random keys
//! (`Db::range(k..)` and `next_ref` until `len` pairs), and the creation of
//! the iterator with its first pair alone; flushes and times both again.
//! Each figure is the median of several rounds.
//!
//! Invariant: the store lives in a temporary directory removed at the end.

use std::time::Instant;

use super::udb_key;

/// Arguments of `flexbench diag scan`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Pairs to load first.
    #[arg(long, default_value_t = 1_000_000)]
    pairs: u64,
    /// Pairs each scan reads.
    #[arg(long, default_value_t = 50)]
    len: usize,
    /// Scans timed per round.
    #[arg(long, default_value_t = 100_000)]
    ops: u64,
    /// Rounds; the median counts.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

/// Median nanoseconds per scan over the rounds; `f(i)` scans from key `i`
/// and returns the pairs it read.
fn median_ns(
    args: &Args,
    mut f: impl FnMut(u64) -> Result<usize, flexdb::Error>,
) -> Result<(f64, usize), flexdb::Error> {
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut pairs = 0;
    let mut per_op = Vec::new();
    for _ in 0..args.rounds.max(1) {
        let t = Instant::now();
        for _ in 0..args.ops.max(1) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            pairs += f(rng % args.pairs.max(1))?;
        }
        per_op.push(t.elapsed().as_nanos() as f64 / args.ops.max(1) as f64);
    }
    per_op.sort_by(f64::total_cmp);
    Ok((per_op[per_op.len() / 2], pairs))
}

/// Times both kinds of scan on `db` and prints them under `label`.
fn time_scans(db: &flexdb::Db, args: &Args, label: &str) -> Result<(), flexdb::Error> {
    // Each pair is copied out, as a caller reads it.
    let mut copy = Vec::new();
    let (scan, read) = median_ns(args, |i| {
        let mut it = db.range(udb_key(i).into_bytes()..);
        let mut n = 0;
        while n < args.len {
            match it.next_ref() {
                Some(Ok((k, v))) => {
                    copy.clear();
                    copy.extend_from_slice(k);
                    copy.extend_from_slice(v);
                    std::hint::black_box(&copy);
                    n += 1;
                }
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        Ok(n)
    })?;
    let (first, _) = median_ns(args, |i| {
        let mut it = db.range(udb_key(i).into_bytes()..);
        match it.next_ref() {
            Some(Ok((k, v))) => {
                copy.clear();
                copy.extend_from_slice(k);
                copy.extend_from_slice(v);
                std::hint::black_box(&copy);
                Ok(1)
            }
            Some(Err(e)) => Err(e),
            None => Ok(0),
        }
    })?;
    let per_scan = read as f64 / (args.ops.max(1) * args.rounds.max(1) as u64) as f64;
    println!(
        "{label}: scan of {} ({per_scan:.1} pairs on average): {scan:.0} ns; iterator and first pair: {first:.0} ns",
        args.len
    );
    Ok(())
}

/// Runs the diagnostic.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir_in(".")?;
    let db = super::open_in(&tmp)?;
    let n = args.pairs.max(1);
    let value = [7u8; 127];
    let t = Instant::now();
    for i in 0..n {
        db.put(udb_key(i), value)?;
    }
    println!("loaded {n} pairs in {:.1} s", t.elapsed().as_secs_f64());
    time_scans(&db, args, "in the MemTable")?;
    db.flush()?;
    time_scans(&db, args, "committed")?;
    db.close()?;
    Ok(())
}
