//! `flexdb`: the command-line tool for FlexDB stores.
//!
//! This file only dispatches: it parses the command line (cli.rs), opens
//! the store (store.rs), runs a command (commands/, shell/) and turns the
//! outcome into an exit status (exit.rs).
//!
//! Invariants: every path out of `main` goes through one exit status of
//! [`exit::Code`]; a failure prints exactly one line on stderr; the store
//! is closed with `Db::close` on success so that its errors are reported.

#![forbid(unsafe_code)]

mod cli;
mod commands;
mod encoding;
mod exit;
mod formats;
mod progress;
mod range;
mod shell;
mod store;

/// mimalloc instead of the system allocator: glibc's per-thread arenas
/// grow and shrink with an mprotect per step under the store's allocation
/// pattern (measured in docs/experiments/2026-11-26-memtable-first-table-prefix.md); the library itself stays
/// allocator-agnostic.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};
use commands::{
    backup, check, compact, decode_arg, delete_range, dump, kv, load, repair, scan, stats,
    stdout_err,
};
use exit::{CliError, Code};
use progress::Progress;
use store::Mode;

fn main() -> ExitCode {
    exit::install_panic_hook();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code.into(),
        Err(e) => {
            e.report();
            e.code.into()
        }
    }
}

/// `None` for `-` or no file: stdin or stdout.
fn file_arg(file: Option<PathBuf>) -> Option<PathBuf> {
    file.filter(|f| f.as_os_str() != "-")
}

fn run(command: Command) -> Result<Code, CliError> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let code = match command {
        Command::Put {
            dir,
            key,
            value,
            enc,
        } => {
            let enc = enc.encoding();
            let (key, value) = (
                decode_arg(enc, "key", &key)?,
                decode_arg(enc, "value", &value)?,
            );
            with_store(&dir, Mode::Create, |db| kv::put(db, &dir, &key, &value))?;
            Code::Success
        }
        Command::Get { dir, key, enc } => {
            let enc = enc.encoding();
            let key = decode_arg(enc, "key", &key)?;
            with_store(&dir, Mode::Existing, |db| {
                kv::get(db, &dir, &key, enc, &mut out)
            })?
        }
        Command::Del { dir, key, enc } => {
            let key = decode_arg(enc.encoding(), "key", &key)?;
            with_store(&dir, Mode::Existing, |db| kv::del(db, &dir, &key))?;
            Code::Success
        }
        Command::Scan { dir, scan, enc } => {
            let enc = enc.encoding();
            let range = range::range_of(&scan.range, enc)?;
            with_store(&dir, Mode::Existing, |db| {
                scan::scan(db, &dir, range, &scan, enc, &mut out)
            })?;
            Code::Success
        }
        Command::DeleteRange {
            dir,
            range,
            all,
            dry_run,
            json,
            quiet,
            enc,
        } => {
            let enc = enc.encoding();
            // Refused before the store is opened: nothing changes.
            let plan = delete_range::plan(&dir, &range, all, enc)?;
            let opts = delete_range::Options {
                dry_run,
                json,
                quiet,
                enc,
            };
            with_store(&dir, Mode::Existing, |db| {
                delete_range::delete_range(db, &dir, &plan, opts, &mut out)
            })?;
            Code::Success
        }
        Command::Load {
            dir,
            file,
            format,
            batch_size,
            quiet,
        } => {
            let file = file_arg(file);
            let (input, source, total): (Box<dyn BufRead>, String, Option<u64>) = match &file {
                Some(path) => {
                    let name = path.display().to_string();
                    let f = File::open(path).map_err(|e| CliError::io(&name, e))?;
                    let meta = f.metadata().map_err(|e| CliError::io(&name, e))?;
                    if meta.is_dir() {
                        return Err(CliError::new(Code::Io, format!("{name}: is a directory")));
                    }
                    let total = meta.is_file().then_some(meta.len());
                    (Box::new(BufReader::with_capacity(1 << 20, f)), name, total)
                }
                None => {
                    if io::stdin().is_terminal() && !quiet {
                        let _ = writeln!(
                            io::stderr(),
                            "flexdb: reading {format:?} pairs from the terminal; end with Ctrl-D"
                        );
                    }
                    (Box::new(io::stdin().lock()), "stdin".into(), None)
                }
            };
            let mut reader = formats::reader(format, input);
            with_store(&dir, Mode::Create, |db| {
                let mut progress = Progress::new("loaded", total, quiet);
                let res = load::load(
                    db,
                    &dir,
                    reader.as_mut(),
                    &source,
                    batch_size,
                    &mut progress,
                );
                progress.finish(res.is_ok());
                res
            })?;
            Code::Success
        }
        Command::Dump {
            dir,
            file,
            format,
            quiet,
        } => {
            let file = file_arg(file);
            with_store(&dir, Mode::Existing, |db| {
                let (output, dest): (Box<dyn Write + '_>, String) = match &file {
                    Some(path) => {
                        let name = path.display().to_string();
                        let f = File::create(path).map_err(|e| CliError::io(&name, e))?;
                        (Box::new(BufWriter::with_capacity(1 << 20, f)), name)
                    }
                    None => (Box::new(&mut out), "stdout".into()),
                };
                // Progress and summary only when stdout is free for them.
                let mut progress = Progress::new("dumped", None, quiet || file.is_none());
                let mut writer = formats::writer(format, output);
                let res = dump::dump(db, &dir, writer.as_mut(), &dest, &mut progress);
                progress.finish(res.is_ok());
                res
            })?;
            Code::Success
        }
        Command::Stats { dir, json } => {
            let text = with_store(&dir, Mode::Existing, |db| {
                // Commit what recovery left in the MemTables, so that the
                // counts are exact.
                db.flush().map_err(|e| CliError::db(&dir, e))?;
                let s = db.stats();
                Ok(if json {
                    format!("{}\n", stats::to_json(&s))
                } else {
                    stats::table(&s)
                })
            })?;
            out.write_all(text.as_bytes()).map_err(stdout_err)?;
            Code::Success
        }
        Command::Check { dir, json } => {
            with_store(&dir, Mode::Existing, |db| {
                let report = db.check().map_err(|e| CliError::db(&dir, e))?;
                let res = check::print(&dir, &report, json, &mut out);
                out.flush().map_err(stdout_err)?;
                res
            })?;
            Code::Success
        }
        Command::Compact { dir, json, quiet } => {
            with_store(&dir, Mode::Existing, |db| {
                compact::compact(db, &dir, json, quiet, &mut out)
            })?;
            Code::Success
        }
        Command::Backup {
            dir,
            dest,
            json,
            quiet,
        } => {
            with_store(&dir, Mode::Existing, |db| {
                backup::backup(db, &dir, &dest, json, quiet, &mut out)
            })?;
            Code::Success
        }
        Command::Repair {
            dir,
            into,
            json,
            quiet,
        } => {
            repair::repair(&dir, into.as_deref(), json, quiet, &mut out)?;
            Code::Success
        }
        Command::Shell { dir, create, enc } => {
            let mode = if create { Mode::Create } else { Mode::Existing };
            with_store(&dir, mode, |db| shell::run(db, &dir, enc.encoding()))?
        }
    };
    out.flush().map_err(stdout_err)?;
    Ok(code)
}

/// Opens the store in `dir`, runs `f` on it and closes it. When `f` fails
/// the store is dropped (closed without reporting close errors: the first
/// error is the one worth telling).
fn with_store<T>(
    dir: &Path,
    mode: Mode,
    f: impl FnOnce(&flexdb::Db) -> Result<T, CliError>,
) -> Result<T, CliError> {
    let db = store::open(dir, mode)?;
    let value = f(&db)?;
    store::close(dir, db)?;
    Ok(value)
}
