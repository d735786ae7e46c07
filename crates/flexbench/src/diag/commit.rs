//! `flexbench diag commit`: the write path and the committer timed through
//! flexdb's public API (puts, then `flush`, which waits for the committer).
//!
//! Invariant: the store lives in a fresh temporary directory (or a
//! directory given, which must not hold a store yet) and is closed before
//! the figures are final.

use std::path::PathBuf;
use std::time::Instant;

use super::udb_key;

/// Arguments of `flexbench diag commit`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Pairs to load.
    #[arg(long, default_value_t = 1_000_000)]
    pairs: u64,
    /// MemTable size in MiB.
    #[arg(long, default_value_t = 64)]
    memtable_mb: usize,
    /// Interval cache size in MiB.
    #[arg(long, default_value_t = 1024)]
    cache_mb: usize,
    /// Directory for the store (default: a temporary directory, removed
    /// afterwards); it must not hold a store yet.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Runs the diagnostic.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir_in(".")?;
    let dir = args.dir.clone().unwrap_or_else(|| tmp.path().join("db"));
    let db = flexdb::Db::open(
        &dir,
        flexdb::Options::new()
            .create_if_missing(true)
            .cache_bytes(args.cache_mb << 20)
            .memtable_bytes(args.memtable_mb << 20),
    )?;
    let n = args.pairs.max(1);
    let val = vec![7u8; 127];
    let t = Instant::now();
    for i in 0..n {
        db.put(udb_key(i), &val)?;
    }
    let writes = t.elapsed();
    db.flush()?;
    println!(
        "load {n}: writes {writes:?}, total {:?} ({:.3} Mops/s)",
        t.elapsed(),
        n as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    let t = Instant::now();
    let m = n / 4;
    let mut x = 12345u64;
    for _ in 0..m {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        db.put(udb_key(x % n), &val)?;
    }
    let writes = t.elapsed();
    db.flush()?;
    println!(
        "update {m}: writes {writes:?}, total {:?} ({:.3} Mops/s)",
        t.elapsed(),
        m as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    println!("{:#?}", db.stats());
    db.close()?;
    Ok(())
}
