//! The error type of the flexspace crate.
//!
//! Invariant: an error from a mutating call either left the space unchanged
//! or poisoned it (every later mutation returns [`Error::Poisoned`]); the
//! files always reopen to a committed state. A full device
//! ([`Error::is_storage_full`]) poisons nothing where the write it refused
//! can be made again whole (see `maintenance/commit.rs`): the call fails,
//! and the next one retries.

use std::io;
use std::path::PathBuf;

/// Errors returned by FlexSpace.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error on one of the space's files.
    #[error("I/O error on {file}: {source}")]
    Io {
        /// The file (`data`, `tree`, `log` or the directory).
        file: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The directory does not hold a flexspace (and creation was not asked).
    #[error("{0} is not a flexspace")]
    NotAFlexSpace(PathBuf),
    /// Another handle holds the space's lock.
    #[error("{0} is locked by another process or handle")]
    Locked(PathBuf),
    /// A file is corrupt.
    #[error("corrupt {file}: {detail}")]
    Corrupt {
        /// The file.
        file: String,
        /// What is wrong.
        detail: String,
    },
    /// The data file is full (utilization is capped at 30/32).
    #[error("no space left: {0}")]
    NoSpace(String),
    /// An offset or range outside the space.
    #[error("range {offset}+{len} is outside the space of {size} bytes")]
    OutOfRange {
        /// Start of the range.
        offset: u64,
        /// Its length.
        len: u64,
        /// The space's size.
        size: u64,
    },
    /// An earlier I/O error left unsynced state behind; reopen the space.
    #[error("an earlier I/O error poisoned the space; reopen it")]
    Poisoned,
    /// A mutation of a space opened read-only (`Options::read_only`).
    #[error("the space is open read-only")]
    ReadOnly,
    /// A read-only open could not load a consistent state: another
    /// process kept changing the space (or the files are damaged).
    #[error("no consistent state of the space after {tries} tries: {last}")]
    Unstable {
        /// Loads tried.
        tries: u32,
        /// The last failure.
        last: Box<Error>,
    },
    /// Options no space can work with (`Options`' documentation says
    /// which); nothing was opened or changed.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// An error from the extent index.
    #[error("extent index: {0}")]
    Tree(#[from] flextree::Error),
}

impl Error {
    /// Whether this is an I/O error of a full device or quota (ENOSPC,
    /// EDQUOT): a commit or checkpoint it failed left the space usable, and
    /// succeeds once room is made.
    pub fn is_storage_full(&self) -> bool {
        match self {
            Error::Io { source, .. } => storage_full(source),
            Error::Tree(flextree::Error::Io(source)) => storage_full(source),
            _ => false,
        }
    }

    /// A copy for a second reader (the error of a background step, kept
    /// for the next call): I/O errors keep their OS error code, or their
    /// kind and message; the other kinds keep their message as `Corrupt`
    /// or `NoSpace` where they are those, else become `Io` of kind
    /// `Other` naming what failed.
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { file, source } => Error::Io {
                file: file.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corrupt { file, detail } => Error::Corrupt {
                file: file.clone(),
                detail: detail.clone(),
            },
            Error::NoSpace(s) => Error::NoSpace(s.clone()),
            Error::Poisoned => Error::Poisoned,
            other => Error::Io {
                file: "space".to_string(),
                source: io::Error::other(other.to_string()),
            },
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Whether `e` says the device (or the user's quota) is full.
pub(crate) fn storage_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

pub(crate) fn io(file: &str) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Io {
        file: file.to_string(),
        source,
    }
}

/// A tree error, with I/O errors on the tree file reported as `Io`.
pub(crate) fn tree(e: flextree::Error) -> Error {
    match e {
        flextree::Error::Io(source) => Error::Io {
            file: "tree".to_string(),
            source,
        },
        e => Error::Tree(e),
    }
}
