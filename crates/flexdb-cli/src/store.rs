//! Opening the store a command works on.
//!
//! Invariants: a command that only reads never creates anything: a missing
//! directory is reported as "no FlexDB store here" (exit 3) without calling
//! the library; a path that is not a directory is "not a FlexDB store"
//! (exit 4). A command that writes creates the directory (and the store) if
//! missing. The commands that only read (`get`, `scan`, `dump`, `stats`,
//! `check`, `keyspaces`) open read-only ([`Mode::ReadOnly`]): they take no
//! lock, change nothing, and work beside a process that has the store
//! open for writing. Errors of the library keep their own exit codes (see
//! exit.rs).

use std::io;
use std::path::Path;

use flexdb::{Db, Options};

use crate::exit::{CliError, Code};

/// Whether a command may create the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The store must exist.
    Existing,
    /// The store must exist; it is opened read-only (`Options::read_only`),
    /// beside a writer process or not.
    ReadOnly,
    /// Create the directory and the store if missing.
    Create,
}

/// Opens the store in `dir`.
pub fn open(dir: &Path, mode: Mode) -> Result<Db, CliError> {
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => {
            return Err(CliError::new(
                Code::NotAStore,
                format!("{}: not a FlexDB store (not a directory)", dir.display()),
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => match mode {
            Mode::Existing | Mode::ReadOnly => {
                return Err(CliError::new(
                    Code::NoStore,
                    format!("{}: no FlexDB store here", dir.display()),
                ))
            }
            Mode::Create => std::fs::create_dir_all(dir)
                .map_err(|e| CliError::io(&dir.display().to_string(), e))?,
        },
        Err(e) => return Err(CliError::io(&dir.display().to_string(), e)),
    }
    let options = Options::new()
        .create_if_missing(mode == Mode::Create)
        .read_only(mode == Mode::ReadOnly);
    match Db::open(dir, options) {
        // A format-1 store: only a writable open reads it (and upgrades
        // it, as every open did before read-only opens; no writer of this
        // build can hold it, or it would be upgraded already).
        Err(flexdb::Error::NeedsUpgrade { .. }) if mode == Mode::ReadOnly => {
            Db::open(dir, Options::new()).map_err(|e| CliError::db(dir, e))
        }
        r => r.map_err(|e| CliError::db(dir, e)),
    }
}

/// Closes the store, reporting any error.
pub fn close(dir: &Path, db: Db) -> Result<(), CliError> {
    db.close().map_err(|e| CliError::db(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_commands_never_create() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope");
        for mode in [Mode::Existing, Mode::ReadOnly] {
            let err = open(&missing, mode).err().unwrap();
            assert_eq!(err.code, Code::NoStore);
            assert!(err.message.unwrap().ends_with("nope: no FlexDB store here"));
            assert!(!missing.exists());
        }
    }

    #[test]
    fn a_file_is_not_a_store() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        for mode in [Mode::Existing, Mode::Create, Mode::ReadOnly] {
            let err = open(&file, mode).err().unwrap();
            assert_eq!(err.code, Code::NotAStore);
            assert!(err.message.unwrap().contains("not a directory"));
        }
    }
}
