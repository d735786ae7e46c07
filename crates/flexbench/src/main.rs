//! `flexbench`: the benchmarks of FlexDB's layers.
//!
//! Each subcommand reproduces one table of the FlexSpace paper and runs its
//! baselines in the same process, so ratios compare like with like on the
//! same (noisy, shared) machine.

mod baseline;
mod index;
mod tree_bench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Benchmarks for FlexTree, FlexSpace and FlexDB.
#[derive(Parser, Debug)]
#[command(name = "flexbench", version, about)]
struct Cli {
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
        /// Time budget per phase in seconds (O(N) baselines stop there).
        #[arg(long, default_value_t = 2.0)]
        phase_seconds: f64,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Tree {
            extents,
            structures,
            ops,
            phase_seconds,
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
            if extents == 0 || !phase_seconds.is_finite() || phase_seconds <= 0.0 {
                eprintln!("flexbench: --extents and --phase-seconds must be positive");
                return ExitCode::from(2);
            }
            let bench = tree_bench::TreeBench {
                extents,
                structures,
                ops,
                phase_seconds,
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
    }
    ExitCode::SUCCESS
}
