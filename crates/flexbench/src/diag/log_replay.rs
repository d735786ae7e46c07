//! `flexbench diag log-replay`: how long `FlexSpace::open` takes after a
//! crash when the logical log holds 16, 64, 128 or 256 MiB (by default) of
//! entries since the last checkpoint, on a space of N extents. It measures what
//! `Options::checkpoint_log_bytes` trades against fewer checkpoints.
//!
//! How: build a space of N 170-byte extents (random inserts), take a
//! checkpoint, then update random extents in place; each time the log
//! passes a size, sync and copy the tree and log files as they are then
//! (the data file is linked: recovery never reads it), which is what a
//! crash right after that sync leaves. Then open each copy and time it.
//! The files are in the page cache, as after a process crash.
//!
//! Invariant: everything lives in one temporary directory, removed at the
//! end (at 10 M extents about 5 GiB: the data file and a copy of the tree
//! and the log per size). The spaces are never closed (a close would
//! checkpoint), only forgotten.

use std::time::Instant;

use flexspace::{FlexSpace, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Bytes of each extent.
const RECORD: u64 = 170;

/// Arguments of `flexbench diag log-replay`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Extents of the space.
    #[arg(long, default_value_t = 10_000_000)]
    extents: u64,
    /// Log sizes in MiB at which a crash is copied, ascending.
    #[arg(long, value_delimiter = ',', default_value = "16,64,128,256")]
    levels_mib: Vec<u64>,
}

/// Runs the diagnostic.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let extents = args.extents.max(1);
    let dir = tempfile::tempdir_in(".")?;
    let main = dir.path().join("space");
    // No checkpoint but the ones asked for.
    let opts = Options::new()
        .create(true)
        .checkpoint_log_bytes(u64::MAX / 2);
    let space = FlexSpace::open(&main, opts)?;
    let mut rng = StdRng::seed_from_u64(7);
    let record = [0x5au8; RECORD as usize];
    let t = Instant::now();
    for i in 0..extents {
        let at = rng.gen_range(0..=i) * RECORD;
        space.insert(at, &record)?;
    }
    space.checkpoint()?;
    println!(
        "built {} extents ({} MiB) in {:.1} s",
        space.stats().extents,
        space.len() >> 20,
        t.elapsed().as_secs_f64()
    );
    let mut copies = Vec::new();
    let mut updates = 0u64;
    for &mib in &args.levels_mib {
        while space.stats().log_file_bytes < mib << 20 {
            for _ in 0..10_000 {
                let at = rng.gen_range(0..extents) * RECORD;
                space.update(at, &record, RECORD)?;
            }
            updates += 10_000;
            space.sync()?;
        }
        let copy = dir.path().join(format!("crash-{mib}"));
        std::fs::create_dir(&copy)?;
        std::fs::copy(main.join("tree"), copy.join("tree"))?;
        std::fs::copy(main.join("log"), copy.join("log"))?;
        std::fs::hard_link(main.join("data"), copy.join("data"))?;
        let log = std::fs::metadata(copy.join("log"))?.len();
        copies.push((copy, log, updates));
    }
    // Not closed: a close would checkpoint.
    std::mem::forget(space);
    println!("log MiB  updates since checkpoint  open s");
    for (copy, log, updates) in copies {
        let t = Instant::now();
        let space = FlexSpace::open(&copy, Options::new())?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{:7.1}  {updates:>24}  {secs:6.2}",
            log as f64 / (1 << 20) as f64
        );
        std::mem::forget(space);
    }
    Ok(())
}
