//! The command line, as clap parses it (`flexdb --help` shows it).
//!
//! Invariants: parsing is pure (no I/O); every key or value argument
//! accepts a leading `-` (so `put DIR k -1` works); `--hex` and `--base64`
//! exclude each other. The shell reuses [`ScanArgs`] so `scan` takes the
//! same flags in both places, and `scan` and `delete-range` share
//! [`RangeArgs`] so that their ranges are given alike. Every command on
//! pairs takes `--keyspace` through [`KeyspaceArgs`]; the commands on the
//! whole store (stats, check, compact, backup, repair) do not take it, so
//! clap refuses it there as any unknown flag (usage, status 2).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::encoding::Encoding;
use crate::formats::Format;

/// Command-line tool for FlexDB stores.
///
/// Exit status: 0 success, 1 key not found (get), 2 usage error, 3 store (or
/// keyspace) not found, 4 not a FlexDB store, 5 locked, 6 corruption, 7 I/O
/// error, 8 bad input data.
#[derive(Parser, Debug)]
#[command(name = "flexdb", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// How keys and values are written in arguments and output.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct EncodingArgs {
    /// Keys and values are hexadecimal (input and output).
    #[arg(long, conflicts_with = "base64")]
    pub hex: bool,
    /// Keys and values are standard base64 (input and output).
    #[arg(long)]
    pub base64: bool,
}

impl EncodingArgs {
    /// The selected encoding.
    pub fn encoding(self) -> Encoding {
        Encoding::from_flags(self.hex, self.base64)
    }

    /// The selected encoding, or `default` when no flag is given.
    pub fn or(self, default: Encoding) -> Encoding {
        if self.hex || self.base64 {
            self.encoding()
        } else {
            default
        }
    }
}

/// The keyspace a command on pairs works on.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct KeyspaceArgs {
    /// The keyspace to work on; one that is missing is an error, except
    /// for put and load, which create it (`flexdb keyspaces DIR` lists
    /// them).
    #[arg(long, value_name = "NAME", allow_hyphen_values = true,
          default_value = flexdb::DEFAULT_KEYSPACE)]
    pub keyspace: String,
}

/// A key range: the same flags, meaning the same keys, for `scan` and
/// `delete-range` (decoded by `crate::range`).
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeArgs {
    /// Start at this key (inclusive).
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Stop before this key (exclusive); without it, through the last key.
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Only keys starting with PREFIX (combines with --from and --to).
    #[arg(long, allow_hyphen_values = true)]
    pub prefix: Option<String>,
}

/// Which pairs `scan` lists.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanArgs {
    #[command(flatten)]
    pub range: RangeArgs,
    /// Print at most N pairs.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Largest key first.
    #[arg(long)]
    pub reverse: bool,
    /// Print keys only.
    #[arg(long)]
    pub keys_only: bool,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Set KEY to VALUE (creates the store, and the keyspace, if missing).
    Put {
        /// The store's directory.
        dir: PathBuf,
        #[arg(allow_hyphen_values = true)]
        key: String,
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// The pair expires after DURATION (90, 1500ms, 10m, 2h, 7d;
        /// seconds without a unit): no read sees it from then on.
        #[arg(long, value_name = "DURATION", value_parser = crate::ttl::parse_ttl)]
        ttl: Option<std::time::Duration>,
        #[command(flatten)]
        enc: EncodingArgs,
        #[command(flatten)]
        ks: KeyspaceArgs,
    },
    /// Print the value of KEY (exit status 1, no output, if it is absent).
    Get {
        /// The store's directory.
        dir: PathBuf,
        #[arg(allow_hyphen_values = true)]
        key: String,
        #[command(flatten)]
        enc: EncodingArgs,
        #[command(flatten)]
        ks: KeyspaceArgs,
    },
    /// Remove KEY (removing an absent key is not an error; a missing
    /// keyspace is).
    Del {
        /// The store's directory.
        dir: PathBuf,
        #[arg(allow_hyphen_values = true)]
        key: String,
        #[command(flatten)]
        enc: EncodingArgs,
        #[command(flatten)]
        ks: KeyspaceArgs,
    },
    /// List pairs in key order, one `KEY<TAB>VALUE` line each (text is
    /// escaped: \\ \t \n \r \xHH).
    Scan {
        /// The store's directory.
        dir: PathBuf,
        #[command(flatten)]
        scan: ScanArgs,
        #[command(flatten)]
        enc: EncodingArgs,
        #[command(flatten)]
        ks: KeyspaceArgs,
    },
    /// Remove every pair of a key range (--from, --to, --prefix as for
    /// `scan`, or --all) in one atomic write; prints the range and the
    /// pairs removed (counted just before the delete).
    DeleteRange {
        /// The store's directory.
        dir: PathBuf,
        #[command(flatten)]
        range: RangeArgs,
        /// Remove every pair of the keyspace (needed when no bound is
        /// given, or when the bounds take in every key).
        #[arg(long, conflicts_with_all = ["from", "to", "prefix"])]
        all: bool,
        /// Only count the pairs of the range and print the report; remove
        /// nothing.
        #[arg(long)]
        dry_run: bool,
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
        /// No progress spinner while counting.
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        enc: EncodingArgs,
        #[command(flatten)]
        ks: KeyspaceArgs,
    },
    /// Load pairs from FILE (or stdin) into a keyspace of the store
    /// (creates the store, and the keyspace, if missing).
    Load {
        /// The store's directory.
        dir: PathBuf,
        /// The input file; `-` or nothing for stdin.
        file: Option<PathBuf>,
        /// The input format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        /// Pairs per write batch.
        #[arg(long, value_name = "N", default_value_t = 10_000,
              value_parser = clap::value_parser!(u64).range(1..))]
        batch_size: u64,
        /// No progress bar and no summary line.
        #[arg(long, short)]
        quiet: bool,
        /// Every pair loaded expires DURATION after its batch is written
        /// (as `put --ttl`).
        #[arg(long, value_name = "DURATION", value_parser = crate::ttl::parse_ttl)]
        ttl: Option<std::time::Duration>,
        #[command(flatten)]
        ks: KeyspaceArgs,
    },
    /// Write every pair of one keyspace (the default one unless
    /// --keyspace is given) to FILE (or stdout), in key order.
    Dump {
        /// The store's directory.
        dir: PathBuf,
        /// The output file; `-` or nothing for stdout.
        file: Option<PathBuf>,
        /// The output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        /// No progress and no summary line.
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        ks: KeyspaceArgs,
    },
    /// List the store's keyspaces ("default" first) with their pairs,
    /// one `NAME<TAB>PAIRS` line each.
    Keyspaces {
        /// The store's directory.
        dir: PathBuf,
        /// One JSON array of {"name":..,"pairs":..} instead of lines.
        #[arg(long)]
        json: bool,
        /// No progress spinner while counting.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Remove a keyspace and every pair in it, atomically; prints the
    /// pairs it held. A missing keyspace is an error; "default" cannot be
    /// dropped.
    DropKeyspace {
        /// The store's directory.
        dir: PathBuf,
        /// The keyspace to drop.
        #[arg(allow_hyphen_values = true)]
        name: String,
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
        /// No progress spinner while counting.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Print the store's counters.
    Stats {
        /// The store's directory.
        dir: PathBuf,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Verify the whole store (exit status 6 if anything is wrong).
    Check {
        /// The store's directory.
        dir: PathBuf,
        /// One JSON object instead of a report.
        #[arg(long)]
        json: bool,
    },
    /// Collect the store's garbage and give freed disk space back; prints
    /// the store's disk bytes before and after.
    Compact {
        /// The store's directory.
        dir: PathBuf,
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Copy the store, as of one moment, into a new store in DEST (absent
    /// or an empty directory), which opens as any other: restoring is
    /// opening it. Shares the file system's blocks with the store where it
    /// can (reflink); prints the pairs, the bytes copied and shared.
    Backup {
        /// The store's directory.
        dir: PathBuf,
        /// The backup's directory (made; an empty one is taken).
        dest: PathBuf,
        /// Rewrite every pair (slower, shares nothing, holds no garbage).
        #[arg(long)]
        logical: bool,
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Salvage every readable pair of a damaged store (one that `check`
    /// reports or that will not open) into a consistent store, and print
    /// what was lost by key range. The store must not be open.
    Repair {
        /// The store's directory.
        dir: PathBuf,
        /// Write the salvaged store to this new directory and leave DIR as
        /// it is; without it, DIR is repaired in place and the damaged
        /// store kept beside it as DIR.before-repair-SECONDS.
        #[arg(long, value_name = "NEW")]
        into: Option<PathBuf>,
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Interactive shell (reads commands line by line when stdin is not a
    /// terminal).
    Shell {
        /// The store's directory.
        dir: PathBuf,
        /// Create the store if it is missing.
        #[arg(long)]
        create: bool,
        #[command(flatten)]
        enc: EncodingArgs,
        /// The keyspace to start in (`use NAME` switches; `put` creates a
        /// missing one).
        #[arg(long, value_name = "NAME", allow_hyphen_values = true,
              default_value = flexdb::DEFAULT_KEYSPACE)]
        keyspace: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Cli::try_parse_from(std::iter::once("flexdb").chain(args.iter().copied()))
            .map(|c| c.command)
    }

    #[test]
    fn definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn keys_and_values_may_start_with_a_dash() {
        match parse(&["put", "/db", "-k", "-1"]).unwrap() {
            Command::Put { key, value, .. } => {
                assert_eq!((key.as_str(), value.as_str()), ("-k", "-1"))
            }
            other => panic!("{other:?}"),
        }
        match parse(&["scan", "/db", "--from", "-a", "--to", "-b"]).unwrap() {
            Command::Scan { scan, .. } => {
                assert_eq!(scan.range.from.as_deref(), Some("-a"));
                assert_eq!(scan.range.to.as_deref(), Some("-b"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["delete-range", "/db", "--from", "-a", "--prefix", "-"]).unwrap() {
            Command::DeleteRange { range, .. } => {
                assert_eq!(range.from.as_deref(), Some("-a"));
                assert_eq!(range.prefix.as_deref(), Some("-"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn delete_range_takes_the_flags_of_scan() {
        match parse(&[
            "delete-range",
            "/db",
            "--from",
            "a",
            "--to",
            "c",
            "--prefix",
            "b",
            "--dry-run",
            "--json",
            "-q",
            "--hex",
        ])
        .unwrap()
        {
            Command::DeleteRange {
                range,
                all,
                dry_run,
                json,
                quiet,
                enc,
                ..
            } => {
                let want = RangeArgs {
                    from: Some("a".into()),
                    to: Some("c".into()),
                    prefix: Some("b".into()),
                };
                assert_eq!(range, want);
                assert_eq!((all, dry_run, json, quiet), (false, true, true, true));
                assert_eq!(enc.encoding(), Encoding::Hex);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["delete-range", "/db", "--all"]).unwrap() {
            Command::DeleteRange { range, all, .. } => {
                assert_eq!((range, all), (RangeArgs::default(), true))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn usage_errors_are_rejected() {
        use clap::error::ErrorKind;
        let kind = |args: &[&str]| parse(args).unwrap_err().kind();
        assert_eq!(
            kind(&["get", "/db", "k", "--hex", "--base64"]),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(kind(&["get", "/db"]), ErrorKind::MissingRequiredArgument);
        assert_eq!(kind(&["frobnicate"]), ErrorKind::InvalidSubcommand);
        assert_eq!(
            kind(&["load", "/db", "--format", "xml"]),
            ErrorKind::InvalidValue
        );
        assert_eq!(
            kind(&["load", "/db", "--batch-size", "0"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["scan", "/db", "--limit", "many"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["put", "/db", "k", "v", "extra"]),
            ErrorKind::UnknownArgument
        );
        for bound in ["--from", "--to", "--prefix"] {
            assert_eq!(
                kind(&["delete-range", "/db", "--all", bound, "k"]),
                ErrorKind::ArgumentConflict
            );
        }
        assert_eq!(
            kind(&["delete-range", "/db", "--limit", "3"]),
            ErrorKind::UnknownArgument
        );
    }

    #[test]
    fn keyspace_is_a_flag_of_the_pair_commands_only() {
        use clap::error::ErrorKind;
        let ks = |args: &[&str]| match parse(args).unwrap() {
            Command::Put { ks, .. }
            | Command::Get { ks, .. }
            | Command::Del { ks, .. }
            | Command::Scan { ks, .. }
            | Command::DeleteRange { ks, .. }
            | Command::Load { ks, .. }
            | Command::Dump { ks, .. } => ks.keyspace,
            Command::Shell { keyspace, .. } => keyspace,
            other => panic!("{other:?}"),
        };
        let with = |args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["--keyspace", "users"]);
            ks(&all)
        };
        for args in [
            &["put", "/db", "k", "v"][..],
            &["get", "/db", "k"],
            &["del", "/db", "k"],
            &["scan", "/db"],
            &["delete-range", "/db", "--all"],
            &["load", "/db"],
            &["dump", "/db"],
            &["shell", "/db"],
        ] {
            assert_eq!(ks(args), flexdb::DEFAULT_KEYSPACE, "{args:?}");
            assert_eq!(with(args), "users", "{args:?}");
        }
        assert_eq!(ks(&["get", "/db", "k", "--keyspace", "-x"]), "-x");
        // No short flag: `-k` stays a key.
        match parse(&["put", "/db", "-k", "v"]).unwrap() {
            Command::Put { key, ks, .. } => {
                assert_eq!((key.as_str(), ks.keyspace.as_str()), ("-k", "default"))
            }
            other => panic!("{other:?}"),
        }
        for args in [
            &["stats", "/db"][..],
            &["check", "/db"],
            &["compact", "/db"],
            &["backup", "/db", "/b"],
            &["repair", "/db"],
            &["keyspaces", "/db"],
            &["drop-keyspace", "/db", "x"],
        ] {
            let mut all = args.to_vec();
            all.extend(["--keyspace", "users"]);
            let kind = parse(&all).unwrap_err().kind();
            assert_eq!(kind, ErrorKind::UnknownArgument, "{args:?}");
        }
        match parse(&["drop-keyspace", "/db", "-x", "--json", "-q"]).unwrap() {
            Command::DropKeyspace {
                name, json, quiet, ..
            } => assert_eq!((name.as_str(), json, quiet), ("-x", true, true)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults() {
        match parse(&["load", "/db"]).unwrap() {
            Command::Load {
                file,
                format,
                batch_size,
                quiet,
                ..
            } => {
                assert_eq!(
                    (file, format, batch_size, quiet),
                    (None, Format::Jsonl, 10_000, false)
                );
            }
            other => panic!("{other:?}"),
        }
        match parse(&["get", "/db", "00", "--hex"]).unwrap() {
            Command::Get { enc, .. } => assert_eq!(enc.encoding(), Encoding::Hex),
            other => panic!("{other:?}"),
        }
    }
}
