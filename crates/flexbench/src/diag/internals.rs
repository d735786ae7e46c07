//! `flexbench diag sparse-index` and `flexbench diag memtable-walk`:
//! measurements of FlexDB structures that its public API does not reach,
//! taken by flexdb itself (its `diagnostics` feature) and printed here.
//!
//! Invariant: nothing here sees the structures; it passes sizes in and
//! prints the reports that come out.

/// Arguments of `flexbench diag sparse-index`.
#[derive(clap::Args, Debug)]
pub struct SparseArgs {
    /// Pairs the simulated load inserts.
    #[arg(long, default_value_t = 10_000_000)]
    pairs: u64,
    /// Bytes of a key (27 for udb, 48 for zippydb).
    #[arg(long, default_value_t = 27)]
    key_bytes: usize,
}

/// Arguments of `flexbench diag memtable-walk`.
#[derive(clap::Args, Debug)]
pub struct WalkArgs {
    /// Pairs inserted before the walks (default: about what a 256 MiB
    /// MemTable holds).
    #[arg(long, default_value_t = 1_200_000)]
    pairs: u64,
}

/// Runs `sparse-index`.
pub fn sparse_index(args: &SparseArgs) -> Result<(), Box<dyn std::error::Error>> {
    let report = flexdb::diagnostics::sparse_index(args.pairs.max(1), args.key_bytes);
    println!("{}", report.to_string().trim_end());
    Ok(())
}

/// Runs `memtable-walk`.
pub fn memtable_walk(args: &WalkArgs) -> Result<(), Box<dyn std::error::Error>> {
    let report = flexdb::diagnostics::memtable_walk(args.pairs.max(1));
    println!("{}", report.to_string().trim_end());
    Ok(())
}
