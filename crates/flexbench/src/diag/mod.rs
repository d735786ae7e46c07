//! `flexbench diag`: focused timings of one piece of one layer, without the
//! YCSB harness. Each answers one question a design decision depends on
//! (docs/DESIGN.md and docs/experiments/ quote their figures); each runs on
//! a temporary directory unless told otherwise and removes what it made.
//!
//! Invariants: a diagnostic uses only the public API of the crate it
//! measures (flexdb's internal structures through its `diagnostics`
//! feature, which exposes measurements, not the structures); it prints its
//! figures on stdout and returns an error instead of panicking on I/O.

mod commit;
mod internals;
mod log_replay;
mod scan;
mod scattered_copy;
mod snapshot;
mod tree_insert;

use clap::Subcommand;

/// The diagnostics.
#[derive(Subcommand, Debug)]
pub enum Diag {
    /// The write path and the committer alone: loads N udb-sized pairs
    /// (27-byte keys, 127-byte values) in a scrambled order, flushes, then
    /// overwrites N/4 random keys and flushes again.
    Commit(commit::Args),
    /// FlexTree's random-insert path: builds a tree of N extents by
    /// appends, then times random inserts and lookups in functions that are
    /// never inlined (for callgrind's `--toggle-collect` and perf).
    TreeInsert(tree_insert::Args),
    /// FlexSpace recovery time against the size of the logical log since
    /// the last checkpoint (16, 64, 128, 256 MiB).
    LogReplay(log_replay::Args),
    /// What a read of a fragmented interval costs through a mapping: six
    /// 300-byte copies at random places of a large cached file, plain,
    /// prefetched, by pread, and after other work.
    ScatteredCopy(scattered_copy::Args),
    /// What a short range scan from a random key costs, with every pair in
    /// the MemTable and after they are committed.
    Scan(scan::Args),
    /// What a point-in-time view costs: `Db::snapshot` and creating an
    /// iterator, at a given store size.
    Snapshot(snapshot::Args),
    /// FlexDB's sparse index alone: memory per interval and per pair after
    /// a random-order load and after a bulk build, and the time of a find.
    SparseIndex(internals::SparseArgs),
    /// FlexDB's MemTable alone: the committer's walk over the newest
    /// version of every key of a full table.
    MemtableWalk(internals::WalkArgs),
}

/// Runs one diagnostic.
pub fn run(diag: &Diag) -> Result<(), Box<dyn std::error::Error>> {
    match diag {
        Diag::Commit(a) => commit::run(a),
        Diag::TreeInsert(a) => tree_insert::run(a),
        Diag::LogReplay(a) => log_replay::run(a),
        Diag::ScatteredCopy(a) => scattered_copy::run(a),
        Diag::Scan(a) => scan::run(a),
        Diag::Snapshot(a) => snapshot::run(a),
        Diag::SparseIndex(a) => internals::sparse_index(a),
        Diag::MemtableWalk(a) => internals::memtable_walk(a),
    }
}

/// A new store with default options in `tmp` (a temporary directory,
/// which the caller drops after the store).
pub(crate) fn open_in(tmp: &tempfile::TempDir) -> flexdb::Result<flexdb::Db> {
    flexdb::Db::open(
        tmp.path().join("db"),
        flexdb::Options::new().create_if_missing(true),
    )
}

/// The key of pair `i` of `n` scrambled over the udb key space ("user" and
/// 23 digits: 27 bytes).
pub(crate) fn udb_key(i: u64) -> String {
    format!(
        "user{:023}",
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 10_000_000_000_000_000
    )
}
