//! `flexdb shell`: the commands of the command line, one per line, on one
//! open store.
//!
//! Invariants: the store is opened once and closed at the end; `put`,
//! `get`, `del` and `scan` work on the session's keyspace (`use NAME`
//! switches it, the prompt shows it) exactly as the command line's
//! `--keyspace` does: `put` creates a missing keyspace, the others fail
//! on one and create nothing, and `use` itself creates nothing; a failing
//! command prints `error: <message>` on stderr and the shell goes on; the
//! shell's exit status is that of the last command (1 for a `get` that
//! found nothing), like sh. With a terminal on stdin it edits lines with
//! rustyline and keeps history in `$FLEXDB_HISTORY` or else
//! `~/.flexdb_history`; otherwise it reads stdin line by line without a
//! prompt, so scripts and tests can drive it.

mod words;

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use flexdb::Db;

use crate::cli::{EncodingArgs, ScanArgs};
use crate::commands::{check, decode_arg, keyspaces, kv, scan, stats, stdout_err};
use crate::encoding::{escape, Encoding};
use crate::exit::{CliError, Code};
use crate::keyspace;
use crate::store::Mode;

const SHELL_TEMPLATE: &str = "Commands (`help COMMAND` or `COMMAND --help` for details):\n{subcommands}\n\nQuote keys with spaces: put 'my key' \"a value\\n\".";
const COMMAND_TEMPLATE: &str = "{about-with-newline}\n{usage-heading} {usage}\n\n{all-args}";

/// One line of the shell.
#[derive(Parser, Debug)]
#[command(multicall = true, help_template = SHELL_TEMPLATE)]
struct Line {
    #[command(subcommand)]
    command: ShellCommand,
}

#[derive(Subcommand, Debug)]
#[command(help_template = COMMAND_TEMPLATE)]
enum ShellCommand {
    /// Set KEY to VALUE.
    #[command(help_template = COMMAND_TEMPLATE)]
    Put {
        #[arg(allow_hyphen_values = true)]
        key: String,
        #[arg(allow_hyphen_values = true)]
        value: String,
        #[command(flatten)]
        enc: EncodingArgs,
    },
    /// Print the value of KEY.
    #[command(help_template = COMMAND_TEMPLATE)]
    Get {
        #[arg(allow_hyphen_values = true)]
        key: String,
        #[command(flatten)]
        enc: EncodingArgs,
    },
    /// Remove KEY.
    #[command(help_template = COMMAND_TEMPLATE)]
    Del {
        #[arg(allow_hyphen_values = true)]
        key: String,
        #[command(flatten)]
        enc: EncodingArgs,
    },
    /// List pairs (--from inclusive, --to exclusive).
    #[command(help_template = COMMAND_TEMPLATE)]
    Scan {
        #[command(flatten)]
        scan: ScanArgs,
        #[command(flatten)]
        enc: EncodingArgs,
    },
    /// Show the keyspace of put, get, del and scan, or switch to NAME (a
    /// missing one is made by the first put).
    #[command(alias = "keyspace", help_template = COMMAND_TEMPLATE)]
    Use {
        #[arg(allow_hyphen_values = true)]
        name: Option<String>,
    },
    /// List the keyspaces with their pairs.
    #[command(help_template = COMMAND_TEMPLATE)]
    Keyspaces {
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Print the store's counters (all keyspaces).
    #[command(help_template = COMMAND_TEMPLATE)]
    Stats {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Verify the whole store (all keyspaces).
    #[command(help_template = COMMAND_TEMPLATE)]
    Check {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Commit every write so far to the space.
    #[command(help_template = COMMAND_TEMPLATE)]
    Flush,
    /// Show or set how keys and values are written: text, hex or base64.
    #[command(help_template = COMMAND_TEMPLATE)]
    Encoding { name: Option<String> },
    /// Leave the shell (also: quit, Ctrl-D).
    #[command(alias = "quit", help_template = COMMAND_TEMPLATE)]
    Exit,
}

/// What to do after a line.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Go on; the status of the line.
    Next(Code),
    /// Leave the shell.
    Exit,
}

/// The state of a shell session.
struct Session<'a> {
    db: &'a Db,
    dir: &'a Path,
    enc: Encoding,
    /// The keyspace's name (checked; it may not exist yet).
    keyspace: String,
    status: Code,
}

impl Session<'_> {
    /// The session's keyspace: created if missing with [`Mode::Create`],
    /// else it must exist.
    fn keyspace(&self, mode: Mode) -> Result<flexdb::Keyspace, CliError> {
        keyspace::open(self.db, self.dir, &self.keyspace, mode)
    }

    /// The prompt: `flexdb> `, with the keyspace when not the default.
    fn prompt(&self) -> String {
        if self.keyspace == flexdb::DEFAULT_KEYSPACE {
            "flexdb> ".into()
        } else {
            format!("flexdb:{}> ", escape(self.keyspace.as_bytes()))
        }
    }

    /// Runs one line; prints its output on `out` and its errors on `err`.
    fn line(&mut self, line: &str, out: &mut dyn Write, err: &mut dyn Write) -> Step {
        let step = match self.run(line, out) {
            Ok(step) => step,
            Err(e) if e.message.is_none() => Step::Exit,
            Err(e) => {
                let _ = writeln!(err, "error: {e}");
                Step::Next(e.code)
            }
        };
        let _ = out.flush();
        if let Step::Next(code) = step {
            self.status = code;
        }
        step
    }

    fn run(&mut self, line: &str, out: &mut dyn Write) -> Result<Step, CliError> {
        let words = words::split(line).map_err(|e| CliError::new(Code::Usage, e))?;
        if words.is_empty() {
            return Ok(Step::Next(self.status));
        }
        let parsed = match Line::try_parse_from(&words) {
            Ok(parsed) => parsed,
            Err(e) if !e.use_stderr() => {
                // help and --help
                write!(out, "{}", e.render()).map_err(stdout_err)?;
                return Ok(Step::Next(Code::Success));
            }
            Err(e) => return Err(CliError::new(Code::Usage, usage_message(&e))),
        };
        let (db, dir, enc) = (self.db, self.dir, self.enc);
        let db_err = |e| CliError::db(dir, e);
        let code = match parsed.command {
            ShellCommand::Put { key, value, enc: e } => {
                let enc = e.or(enc);
                let (k, v) = (
                    decode_arg(enc, "key", &key)?,
                    decode_arg(enc, "value", &value)?,
                );
                kv::put(&self.keyspace(Mode::Create)?, dir, &k, &v, None)?;
                Code::Success
            }
            ShellCommand::Get { key, enc: e } => {
                let enc = e.or(enc);
                let key = decode_arg(enc, "key", &key)?;
                let code = kv::get(&self.keyspace(Mode::Existing)?, dir, &key, enc, out)?;
                if code == Code::KeyNotFound {
                    return Err(CliError::new(Code::KeyNotFound, "(not found)"));
                }
                code
            }
            ShellCommand::Del { key, enc: e } => {
                let enc = e.or(enc);
                let key = decode_arg(enc, "key", &key)?;
                kv::del(&self.keyspace(Mode::Existing)?, dir, &key)?;
                Code::Success
            }
            ShellCommand::Scan { scan: args, enc: e } => {
                let enc = e.or(enc);
                let range = crate::range::range_of(&args.range, enc)?;
                scan::scan(&self.keyspace(Mode::Existing)?, dir, range, &args, enc, out)?;
                Code::Success
            }
            ShellCommand::Use { name: None } => {
                writeln!(out, "{}", escape(self.keyspace.as_bytes())).map_err(stdout_err)?;
                Code::Success
            }
            ShellCommand::Use { name: Some(name) } => {
                keyspace::check_name(&name)?;
                self.keyspace = name;
                Code::Success
            }
            ShellCommand::Keyspaces { json } => {
                keyspaces::keyspaces(db, dir, json, true, out)?;
                Code::Success
            }
            ShellCommand::Stats { json } => {
                let s = db.stats();
                let text = if json {
                    format!("{}\n", stats::to_json(&s))
                } else {
                    stats::table(&s)
                };
                out.write_all(text.as_bytes()).map_err(stdout_err)?;
                Code::Success
            }
            ShellCommand::Check { json } => {
                check::print(dir, &db.check().map_err(db_err)?, json, out)?;
                Code::Success
            }
            ShellCommand::Flush => {
                db.flush().map_err(db_err)?;
                Code::Success
            }
            ShellCommand::Encoding { name: None } => {
                writeln!(out, "{}", enc.name()).map_err(stdout_err)?;
                Code::Success
            }
            ShellCommand::Encoding { name: Some(name) } => {
                self.enc = Encoding::from_name(&name).ok_or_else(|| {
                    CliError::new(
                        Code::Usage,
                        format!("unknown encoding {name:?} (text, hex or base64)"),
                    )
                })?;
                Code::Success
            }
            ShellCommand::Exit => return Ok(Step::Exit),
        };
        Ok(Step::Next(code))
    }
}

/// clap's error as one line: its paragraph before the usage, plus a hint.
fn usage_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let words: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .flat_map(str::split_whitespace)
        .collect();
    let msg = words.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    format!("{msg} (try `help`)")
}

/// Where the history is kept.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FLEXDB_HISTORY") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".flexdb_history"))
}

/// Runs the shell on the open store; returns the status of the last
/// command. `keyspace` is the keyspace to start in (a checked name).
pub fn run(db: &Db, dir: &Path, enc: Encoding, keyspace: String) -> Result<Code, CliError> {
    let mut session = Session {
        db,
        dir,
        enc,
        keyspace,
        status: Code::Success,
    };
    if io::stdin().is_terminal() {
        interactive(&mut session)?;
    } else {
        let stdin = io::stdin().lock();
        for (n, line) in stdin.split(b'\n').enumerate() {
            let line = line.map_err(|e| CliError::io("stdin", e))?;
            let Ok(line) = String::from_utf8(line) else {
                let _ = writeln!(io::stderr(), "error: line {}: not UTF-8", n + 1);
                session.status = Code::BadInput;
                continue;
            };
            let step = session.line(&line, &mut io::stdout().lock(), &mut io::stderr().lock());
            if step == Step::Exit {
                break;
            }
        }
    }
    Ok(session.status)
}

fn interactive(session: &mut Session<'_>) -> Result<(), CliError> {
    use rustyline::error::ReadlineError;
    let mut editor = rustyline::DefaultEditor::new()
        .map_err(|e| CliError::new(Code::Io, format!("terminal: {e}")))?;
    let history = history_path();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    println!(
        "FlexDB shell on {} (keyspace: {}; keys and values: {}). Type `help`, or `exit` to leave.",
        session.dir.display(),
        escape(session.keyspace.as_bytes()),
        session.enc.name()
    );
    loop {
        match editor.readline(&session.prompt()) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                }
                let step = session.line(&line, &mut io::stdout().lock(), &mut io::stderr().lock());
                if step == Step::Exit {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(CliError::new(Code::Io, format!("terminal: {e}"))),
        }
    }
    if let Some(h) = &history {
        if let Err(e) = editor.save_history(h) {
            let _ = writeln!(
                io::stderr(),
                "flexdb: {}: cannot save history: {e}",
                h.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_valid() {
        Line::command().debug_assert();
    }

    #[test]
    fn lines_parse() {
        let p = |s: &str| Line::try_parse_from(words::split(s).unwrap()).map(|l| l.command);
        assert!(
            matches!(p("put 'a b' -1").unwrap(), ShellCommand::Put { key, value, .. } if key == "a b" && value == "-1")
        );
        assert!(matches!(p("quit").unwrap(), ShellCommand::Exit));
        assert!(matches!(
            p("scan --from a --limit 3").unwrap(),
            ShellCommand::Scan {
                scan: ScanArgs { limit: Some(3), .. },
                ..
            }
        ));
        assert!(
            matches!(p("use users").unwrap(), ShellCommand::Use { name: Some(n) } if n == "users")
        );
        assert!(matches!(
            p("keyspace").unwrap(),
            ShellCommand::Use { name: None }
        ));
        assert!(matches!(
            p("keyspaces --json").unwrap(),
            ShellCommand::Keyspaces { json: true }
        ));
        assert!(p("frob").is_err());
        assert_eq!(
            usage_message(&p("put a").unwrap_err()),
            "the following required arguments were not provided: <VALUE> (try `help`)"
        );
        assert!(
            usage_message(&p("frob").unwrap_err()).starts_with("unrecognized subcommand 'frob'")
        );
        let help = p("help").unwrap_err();
        assert!(!help.use_stderr());
        let text = help.render().to_string();
        for cmd in [
            "put",
            "get",
            "del",
            "scan",
            "use",
            "keyspaces",
            "stats",
            "check",
            "flush",
            "encoding",
            "exit",
        ] {
            assert!(text.contains(cmd), "{cmd} missing from help: {text}");
        }
    }

    #[test]
    fn the_prompt_names_a_keyspace_other_than_the_default() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = flexdb::Options::new().create_if_missing(true);
        let db = Db::open(tmp.path(), opts).unwrap();
        let mut session = Session {
            db: &db,
            dir: tmp.path(),
            enc: Encoding::Text,
            keyspace: flexdb::DEFAULT_KEYSPACE.into(),
            status: Code::Success,
        };
        assert_eq!(session.prompt(), "flexdb> ");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(
            session.line("use 'a b\tc'", &mut out, &mut err),
            Step::Next(Code::Success)
        );
        assert_eq!(session.prompt(), "flexdb:a b\\tc> ");
        assert_eq!(
            session.line("use ''", &mut out, &mut err),
            Step::Next(Code::BadInput)
        );
        assert_eq!(session.keyspace, "a b\tc", "a bad name switched");
        // `use` alone creates nothing.
        assert_eq!(db.keyspaces(), ["default"]);
        drop(session);
        db.close().unwrap();
    }
}
