//! `flexbench`: the benchmarks of FlexDB's layers.
//!
//! Each subcommand reproduces one table of the FlexSpace paper and runs its
//! baselines in the same process, so ratios compare like with like on the
//! same (noisy, shared) machine.

mod baseline;
mod device;
mod diag;
mod index;
mod median;
mod space_bench;
mod space_latency;
mod trace;
mod tree_bench;
mod ycsb;

/// mimalloc instead of the system allocator: glibc's per-thread arenas
/// grow and shrink with an mprotect per step under the store's allocation
/// pattern (measured in docs/experiments/2026-11-26-memtable-first-table-prefix.md); the library itself stays
/// allocator-agnostic.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Benchmarks for FlexTree, FlexSpace and FlexDB.
#[derive(Parser, Debug)]
#[command(name = "flexbench", version, about)]
struct Cli {
    /// Print the engines' diagnostic events (commit groups, lock holds,
    /// recovery steps) on stderr; `RUST_LOG` chooses others (for example
    /// `RUST_LOG=flexdb=trace`), and `FLEXDB_TRACE=1` in the environment
    /// means the same as this flag.
    #[arg(long, global = true)]
    trace: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Table 1: FlexTree against a B+-tree without shift values and a
    /// sorted array.
    Tree {
        /// Extents to build each structure to.
        #[arg(long, default_value_t = 1_000_000)]
        extents: u64,
        /// Comma-separated structures: flextree, btree, array.
        #[arg(long, value_delimiter = ',', default_value = "flextree,btree,array")]
        structures: Vec<String>,
        /// Operations per phase (default: lookups min(N, 10^6), inserts and
        /// appends N/20, at least 1000).
        #[arg(long)]
        ops: Option<u64>,
        /// Time budget per phase in seconds, shared by its repeats (O(N)
        /// baselines stop there).
        #[arg(long, default_value_t = 2.0)]
        phase_seconds: f64,
        /// Timed runs of each phase; the figure is their median (inserts
        /// and appends run on a fresh copy of the built structure each
        /// time).
        #[arg(long, default_value_t = 5)]
        repeat: u32,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Table 2: FlexSpace against a plain file (inserts by
    /// fallocate(FALLOC_FL_INSERT_RANGE)).
    Space {
        /// The write pattern.
        #[arg(long, value_enum)]
        pattern: space_bench::Pattern,
        /// Bytes per operation (suffixes K, M, G).
        #[arg(long, value_parser = device::parse_size, default_value = "4096")]
        io_size: u64,
        /// Bytes to write (suffixes K, M, G).
        #[arg(long, value_parser = device::parse_size, default_value = "1G")]
        total: u64,
        /// Run a baseline: `file`.
        #[arg(long)]
        baseline: Option<String>,
        /// Stop the baseline's insert phase after this many seconds.
        #[arg(long, default_value_t = 30.0)]
        baseline_seconds: f64,
        /// Time cap of each read phase in seconds.
        #[arg(long, default_value_t = 10.0)]
        read_seconds: f64,
        /// Directory for the files (default: a new temporary directory in
        /// the current one, removed afterwards).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Random inserts go to multiples of this many bytes (4096, as in
        /// the paper, for both targets; 1 lets flexspace insert at any byte,
        /// while the file baseline still needs multiples of 4096).
        #[arg(long, value_parser = device::parse_size, default_value = "4096")]
        insert_align: u64,
        /// Open flexspace with `mmap_reads` (reads through a memory mapping).
        #[arg(long)]
        mmap_reads: bool,
        /// flexspace's garbage-collection thresholds `HIGH,LOW` (fractions
        /// of the segments holding data; default: the library's).
        #[arg(long, value_delimiter = ',', num_args = 1)]
        gc_garbage: Option<Vec<f64>>,
        /// Instead of the table: measure the latency of reads made by a
        /// second thread during flexspace's write phase.
        #[arg(long)]
        reader_latency: bool,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// YCSB workloads (Table 5) on the paper's datasets (Table 3): FlexDB
    /// and peer engines side by side.
    Ycsb(ycsb::YcsbArgs),
    /// Range deletes: the time of one `delete_range` over k adjacent pairs
    /// of a loaded store (flexdb: and of its commit to the space), and get
    /// and scan throughput right after, beside the peers' range deletes.
    RangeDelete(ycsb::range_delete::RangeDeleteArgs),
    /// Focused timings of one piece of one layer (see `flexbench diag
    /// --help`).
    Diag {
        /// The diagnostic to run.
        #[command(subcommand)]
        what: diag::Diag,
    },
    /// Internal: the child the crash test of `ycsb` kills.
    #[command(hide = true)]
    YcsbCrashChild(ycsb::CrashChildArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    trace::install(cli.trace);
    match cli.command {
        Command::Tree {
            extents,
            structures,
            ops,
            phase_seconds,
            repeat,
            seed,
            json,
        } => {
            if let Some(bad) = structures
                .iter()
                .find(|s| !tree_bench::STRUCTURES.contains(&s.as_str()))
            {
                eprintln!(
                    "flexbench: unknown structure '{bad}' (expected one of {})",
                    tree_bench::STRUCTURES.join(", ")
                );
                return ExitCode::from(2);
            }
            if extents == 0 || repeat == 0 || !phase_seconds.is_finite() || phase_seconds <= 0.0 {
                eprintln!("flexbench: --extents, --repeat and --phase-seconds must be positive");
                return ExitCode::from(2);
            }
            let bench = tree_bench::TreeBench {
                extents,
                structures,
                ops,
                phase_seconds,
                repeats: repeat,
                seed,
            };
            match bench.run() {
                Ok(report) if json => print!("{}", report.json_lines()),
                Ok(report) => print!("{}", report.table()),
                Err(e) => {
                    eprintln!("flexbench: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        Command::Space {
            pattern,
            io_size,
            total,
            baseline,
            baseline_seconds,
            read_seconds,
            dir,
            seed,
            insert_align,
            mmap_reads,
            reader_latency,
            gc_garbage,
            json,
        } => {
            let gc = gc_garbage.map(|v| (v[0], v.get(1).copied().unwrap_or(v[0])));
            if insert_align == 0 {
                eprintln!("flexbench: --insert-align must be positive");
                return ExitCode::from(2);
            }
            let baseline_file = match baseline.as_deref() {
                None => false,
                Some("file") => true,
                Some(other) => {
                    eprintln!("flexbench: unknown baseline '{other}' (expected: file)");
                    return ExitCode::from(2);
                }
            };
            let tmp;
            let dir = match dir {
                Some(d) => d,
                None => match tempfile::tempdir_in(".") {
                    Ok(t) => {
                        tmp = t;
                        tmp.path().to_path_buf()
                    }
                    Err(e) => {
                        eprintln!("flexbench: cannot create a temporary directory: {e}");
                        return ExitCode::from(1);
                    }
                },
            };
            if let Err(e) = std::fs::create_dir_all(&dir) {
                eprintln!("flexbench: {}: {e}", dir.display());
                return ExitCode::from(1);
            }
            if reader_latency {
                let opts = flexspace::Options::new()
                    .create(true)
                    .max_data_size((total * 4).max(256 << 20))
                    .mmap_reads(mmap_reads);
                let opts = match gc {
                    Some((h, l)) => opts.gc_garbage(h, l),
                    None => opts,
                };
                let sdir = dir.join("flexspace-latency");
                let r = space_latency::run(&sdir, pattern, io_size, total, seed, opts);
                let _ = std::fs::remove_dir_all(&sdir);
                match r {
                    Ok(r) if json => {
                        println!("{}", serde_json::to_string(&r).unwrap_or_default())
                    }
                    Ok(r) => print!("{}", space_latency::table(&r)),
                    Err(e) => {
                        eprintln!("flexbench: {e}");
                        return ExitCode::from(1);
                    }
                }
                return ExitCode::SUCCESS;
            }
            let bench = space_bench::SpaceBench {
                pattern,
                io_size,
                total,
                baseline_file,
                baseline_seconds,
                read_seconds,
                dir: dir.clone(),
                seed,
                insert_align,
                mmap_reads,
                gc_garbage: gc,
            };
            match bench.run() {
                Ok(results) if json => {
                    for r in &results {
                        println!("{}", serde_json::to_string(r).unwrap_or_default());
                    }
                }
                Ok(results) => print!(
                    "{}",
                    space_bench::table(&results, &space_bench::counter_source(&dir))
                ),
                Err(e) => {
                    eprintln!("flexbench: {e}");
                    return ExitCode::from(1);
                }
            }
        }
        Command::Ycsb(args) => return ExitCode::from(ycsb::run(&args)),
        Command::RangeDelete(args) => return ExitCode::from(ycsb::range_delete::run(&args)),
        Command::Diag { what } => {
            if let Err(e) = diag::run(&what) {
                eprintln!("flexbench: {e}");
                return ExitCode::from(1);
            }
        }
        Command::YcsbCrashChild(args) => return ExitCode::from(ycsb::crash_child(&args)),
    }
    ExitCode::SUCCESS
}
