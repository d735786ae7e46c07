//! `flexdb`: the command-line tool for FlexDB stores.
//!
//! This file only dispatches: it parses the command line (cli.rs), opens
//! the store (store.rs) and the keyspace (keyspace.rs), runs a command
//! (commands/, shell/) and turns the outcome into an exit status
//! (exit.rs).
//!
//! Invariants: every path out of `main` goes through one exit status of
//! [`exit::Code`]; a failure prints exactly one line on stderr; the store
//! is closed with `Db::close` on success so that its errors are reported;
//! arguments (keys, keyspace names, ranges) are checked before the store
//! is opened, so a bad one changes nothing.

#![forbid(unsafe_code)]

mod cli;
mod commands;
mod encoding;
mod exit;
mod formats;
mod keyspace;
mod progress;
mod range;
mod shell;
mod store;
mod ttl;

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
    backup, check, compact, decode_arg, delete_range, drop_keyspace, dump, keyspaces, kv, load,
    repair, scan, stats, stdout_err,
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
            ttl,
            enc,
            ks,
        } => {
            let enc = enc.encoding();
            let (key, value) = (
                decode_arg(enc, "key", &key)?,
                decode_arg(enc, "value", &value)?,
            );
            with_keyspace(&dir, &ks.keyspace, Mode::Create, |ks| {
                kv::put(ks, &dir, &key, &value, ttl)
            })?;
            Code::Success
        }
        Command::Get { dir, key, enc, ks } => {
            let enc = enc.encoding();
            let key = decode_arg(enc, "key", &key)?;
            with_keyspace(&dir, &ks.keyspace, Mode::ReadOnly, |ks| {
                kv::get(ks, &dir, &key, enc, &mut out)
            })?
        }
        Command::Del { dir, key, enc, ks } => {
            let key = decode_arg(enc.encoding(), "key", &key)?;
            with_keyspace(&dir, &ks.keyspace, Mode::Existing, |ks| {
                kv::del(ks, &dir, &key)
            })?;
            Code::Success
        }
        Command::Scan { dir, scan, enc, ks } => {
            let enc = enc.encoding();
            let range = range::range_of(&scan.range, enc)?;
            with_keyspace(&dir, &ks.keyspace, Mode::ReadOnly, |ks| {
                scan::scan(ks, &dir, range, &scan, enc, &mut out)
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
            ks,
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
            with_keyspace(&dir, &ks.keyspace, Mode::Existing, |ks| {
                delete_range::delete_range(ks, &dir, &plan, opts, &mut out)
            })?;
            Code::Success
        }
        Command::Load {
            dir,
            file,
            format,
            batch_size,
            quiet,
            ttl,
            ks,
        } => {
            keyspace::check_name(&ks.keyspace)?;
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
                let ks = keyspace::open(db, &dir, &ks.keyspace, Mode::Create)?;
                let mut progress = Progress::new("loaded", total, quiet);
                let res = load::load(
                    db,
                    &ks,
                    &dir,
                    reader.as_mut(),
                    &source,
                    load::LoadOptions { batch_size, ttl },
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
            ks,
        } => {
            let file = file_arg(file);
            // A missing keyspace fails before the output file is made.
            with_keyspace(&dir, &ks.keyspace, Mode::ReadOnly, |ks| {
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
                let res = dump::dump(ks, &dir, writer.as_mut(), &dest, &mut progress);
                progress.finish(res.is_ok());
                res
            })?;
            Code::Success
        }
        Command::Keyspaces { dir, json, quiet } => {
            with_store(&dir, Mode::ReadOnly, |db| {
                keyspaces::keyspaces(db, &dir, json, quiet, &mut out)
            })?;
            Code::Success
        }
        Command::DropKeyspace {
            dir,
            name,
            json,
            quiet,
        } => {
            // Refused before the store is opened: nothing changes.
            drop_keyspace::check(&dir, &name)?;
            with_store(&dir, Mode::Existing, |db| {
                drop_keyspace::drop_keyspace(db, &dir, &name, json, quiet, &mut out)
            })?;
            Code::Success
        }
        Command::Stats { dir, json } => {
            // Read-only: nothing is flushed (the pair count is the space's;
            // writes still in the logs count as MemTable bytes).
            let text = with_store(&dir, Mode::ReadOnly, |db| {
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
            with_store(&dir, Mode::ReadOnly, |db| {
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
            logical,
            json,
            quiet,
        } => {
            let method = match logical {
                true => flexdb::BackupMethod::Logical,
                false => flexdb::BackupMethod::Physical,
            };
            with_store(&dir, Mode::ReadOnly, |db| {
                backup::backup(db, &dir, &dest, method, json, quiet, &mut out)
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
        Command::Shell {
            dir,
            create,
            enc,
            keyspace,
        } => {
            keyspace::check_name(&keyspace)?;
            let mode = if create { Mode::Create } else { Mode::Existing };
            with_store(&dir, mode, |db| {
                shell::run(db, &dir, enc.encoding(), keyspace)
            })?
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

/// Checks the keyspace name, then opens the store in `dir` and runs `f`
/// on its keyspace `name` (created if missing with [`Mode::Create`], an
/// error with [`Mode::Existing`]) as [`with_store`] does.
fn with_keyspace<T>(
    dir: &Path,
    name: &str,
    mode: Mode,
    f: impl FnOnce(&flexdb::Keyspace) -> Result<T, CliError>,
) -> Result<T, CliError> {
    keyspace::check_name(name)?;
    with_store(dir, mode, |db| f(&keyspace::open(db, dir, name, mode)?))
}
