//! Exit statuses, and the one error type every command returns.
//!
//! Invariants: every failure is one [`CliError`], reported as a single line
//! `flexdb: <message>` on stderr (newlines in underlying messages are
//! folded), and the process exits with its [`Code`]; the message names the
//! problem and the path it concerns. A closed output pipe is not a failure
//! to report: it ends the command quietly with status 0.

use std::fmt;
use std::io::{self, Write};
use std::path::Path;

/// The documented exit statuses (see docs/CLI.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Success.
    Success = 0,
    /// `get`: the key is not in the store (nothing is printed).
    KeyNotFound = 1,
    /// Bad command line (clap's own status for usage errors).
    Usage = 2,
    /// No store at the path (and the command does not create one), or no
    /// keyspace of the given name in it (and the command does not create
    /// one).
    NoStore = 3,
    /// The path holds something that is not a FlexDB store.
    NotAStore = 4,
    /// Another process has the store open.
    Locked = 5,
    /// Corruption found (by `check`, or while opening or reading).
    Corrupt = 6,
    /// An I/O error (also: disk or store full, store stopped).
    Io = 7,
    /// Bad input data: an argument that is not valid hex/base64, a key or
    /// value over the size limits, a malformed line of a `load` file.
    BadInput = 8,
    /// A bug in flexdb (a panic); please report it.
    Internal = 70,
}

impl From<Code> for std::process::ExitCode {
    fn from(code: Code) -> Self {
        std::process::ExitCode::from(code as u8)
    }
}

/// A failure of a command: the exit status and the line to print.
#[derive(Debug)]
pub struct CliError {
    /// The exit status.
    pub code: Code,
    /// The message (without the `flexdb: ` prefix); `None` to exit quietly.
    pub message: Option<String>,
}

impl CliError {
    /// An error with a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: Some(one_line(&message.into())),
        }
    }

    /// Bad input data.
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(Code::BadInput, message)
    }

    /// An error of the store at `dir`; the message names `dir` unless the
    /// library's message already names a path.
    pub fn db(dir: &Path, e: flexdb::Error) -> Self {
        use flexdb::Error as E;
        let code = match &e {
            E::NotFound(_) => Code::NoStore,
            E::NotAStore(..) => Code::NotAStore,
            E::Locked(_) => Code::Locked,
            E::Corrupt { .. } => Code::Corrupt,
            E::Io { .. } | E::NoSpace(_) | E::Stopped(_) | E::AlreadyExists(_) => Code::Io,
            // The read commands open read-only and never write; a writer
            // that kept changing the store under a reader is an I/O
            // condition (try again); a format-1 store is opened writable
            // instead (`store::open`).
            E::ReadOnly | E::Unstable { .. } | E::NeedsUpgrade { .. } => Code::Io,
            // Only transactions conflict; the command line runs none.
            E::Conflict => Code::Io,
            E::KeyTooLarge { .. }
            | E::ValueTooLarge { .. }
            | E::BatchTooLarge { .. }
            | E::InvalidArgument(_) => Code::BadInput,
        };
        // The store's path errors carry it; a file path counts only when
        // it is absolute (some errors name a file relative to the store).
        let names_a_path = match &e {
            E::NotFound(_)
            | E::NotAStore(..)
            | E::Locked(_)
            | E::AlreadyExists(_)
            | E::NeedsUpgrade { .. } => true,
            E::Corrupt { file, .. } | E::Io { file, .. } => file.is_absolute(),
            _ => false,
        };
        if names_a_path {
            Self::new(code, e.to_string())
        } else {
            Self::new(code, format!("{}: {e}", dir.display()))
        }
    }

    /// An I/O error on `what` (a file name, or `stdout`/`stdin`); a broken
    /// pipe becomes a quiet exit with status 0.
    pub fn io(what: &str, e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return CliError {
                code: Code::Success,
                message: None,
            };
        }
        Self::new(Code::Io, format!("{what}: {e}"))
    }

    /// Writes the message (if any) to stderr, never failing.
    pub fn report(&self) {
        if let Some(msg) = &self.message {
            let _ = writeln!(io::stderr().lock(), "flexdb: {msg}");
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message.as_deref().unwrap_or(""))
    }
}

/// Folds a message onto one line.
fn one_line(s: &str) -> String {
    s.trim_end()
        .replace("\r\n", "; ")
        .replace(['\n', '\r'], "; ")
}

/// Replaces the default panic report (message and backtrace over several
/// lines) with one line and exit status 70, unless `RUST_BACKTRACE` asks
/// for a backtrace (is set and not `0`).
pub fn install_panic_hook() {
    if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
        return;
    }
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let _ = writeln!(
            io::stderr().lock(),
            "flexdb: internal error: {}{at} (a bug; please report it)",
            one_line(&what)
        );
        std::process::exit(Code::Internal as i32);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexdb::Error as E;
    use std::path::PathBuf;

    fn code(e: E) -> (Code, String) {
        let err = CliError::db(Path::new("/db"), e);
        (err.code, err.message.unwrap())
    }

    #[test]
    fn library_errors_map_to_documented_codes() {
        let p = || PathBuf::from("/db");
        assert_eq!(code(E::NotFound(p())).0, Code::NoStore);
        assert_eq!(code(E::NotAStore(p(), "x".into())).0, Code::NotAStore);
        assert_eq!(code(E::Locked(p())).0, Code::Locked);
        let (c, m) = code(E::Corrupt {
            file: "/db/space/data".into(),
            detail: "bad crc".into(),
        });
        assert_eq!(c, Code::Corrupt);
        assert_eq!(m, "corruption in /db/space/data: bad crc");
        let (c, m) = code(E::Corrupt {
            file: "data".into(),
            detail: "bad crc".into(),
        });
        assert_eq!(
            (c, m.as_str()),
            (Code::Corrupt, "/db: corruption in data: bad crc")
        );
        let (c, m) = code(E::Io {
            file: "/db/wal".into(),
            source: io::Error::other("boom"),
        });
        assert_eq!((c, m.as_str()), (Code::Io, "I/O error on /db/wal: boom"));
        assert_eq!(code(E::NoSpace("full".into())).0, Code::Io);
        assert_eq!(code(E::Stopped("x".into())).0, Code::Io);
        let (c, m) = code(E::KeyTooLarge { len: 9, max: 8 });
        assert_eq!(c, Code::BadInput);
        assert!(m.starts_with("/db: key of 9 bytes"), "{m}");
        assert_eq!(code(E::InvalidArgument("x".into())).0, Code::BadInput);
        assert_eq!(code(E::NotFound(p())).1, "/db: no FlexDB store here");
    }

    #[test]
    fn messages_are_one_line_and_broken_pipes_are_quiet() {
        let e = CliError::new(Code::Io, "a\nb\r\nc\n");
        assert_eq!(e.message.as_deref(), Some("a; b; c"));
        let quiet = CliError::io("stdout", io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!((quiet.code, quiet.message), (Code::Success, None));
        let loud = CliError::io("out.csv", io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(loud.code, Code::Io);
        assert!(loud.message.unwrap().starts_with("out.csv: "));
    }
}
