//! The error type of the flexdb crate.
//!
//! Invariant: every error names what went wrong and, for I/O and corruption,
//! which file; a failed write leaves every earlier durable write intact.

use std::io;
use std::path::PathBuf;

/// Errors returned by FlexDB.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A key longer than [`crate::MAX_KEY_LEN`].
    #[error("key of {len} bytes exceeds the limit of {max}")]
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A value longer than [`crate::MAX_VALUE_LEN`].
    #[error("value of {len} bytes exceeds the limit of {max}")]
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A write batch larger than the write-ahead log accepts in one record.
    #[error("write batch of {len} bytes exceeds the limit of {max}")]
    BatchTooLarge {
        /// The batch's encoded size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// No store at the path, and `create_if_missing` was not set.
    #[error("{0}: no FlexDB store here")]
    NotFound(PathBuf),
    /// A store exists at the path and `error_if_exists` was set.
    #[error("{0}: a FlexDB store already exists here")]
    AlreadyExists(PathBuf),
    /// The path holds something that is not a FlexDB store.
    #[error("{0}: not a FlexDB store ({1})")]
    NotAStore(PathBuf, String),
    /// Another process or handle has the store open.
    #[error("{0}: locked by another process or handle")]
    Locked(PathBuf),
    /// A file is corrupt.
    #[error("corruption in {file}: {detail}")]
    Corrupt {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// An I/O error on a file.
    #[error("I/O error on {file}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// No room to write: the device (or the user's quota) is full, naming
    /// the file whose write it refused, or the space's data file is (live
    /// data is capped at 30/32 of [`crate::Options::max_space_bytes`]).
    /// Nothing acknowledged is lost, reads go on, and writes succeed again
    /// once room is made (files of other programs removed, or pairs of the
    /// store deleted), without a reopen.
    #[error("no space left in the store: {0}")]
    NoSpace(String),
    /// An earlier I/O error stopped the store's background work; writes are
    /// refused until the store is reopened (which recovers every durable
    /// write).
    #[error("the store stopped after an earlier error ({0}); reopen it")]
    Stopped(String),
    /// A transaction (or `compare_and_swap`) could not commit without
    /// breaking its isolation level: another write committed after it
    /// began changed what it wrote (or, when serializable, what it read).
    /// Nothing was written; run it again from the start.
    #[error("transaction conflict: retry the transaction")]
    Conflict,
    /// An option or argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A write (or `flush`, `sync`, `compact`, keyspace creation or drop)
    /// on a store opened read-only (`Options::read_only`).
    #[error("the store is open read-only")]
    ReadOnly,
    /// A read-only open of a store of an older format, which only a
    /// writable open upgrades (format 1, before keyspaces).
    #[error("{path}: a store of format {version} cannot be opened read-only; a writable open upgrades it")]
    NeedsUpgrade {
        /// The store.
        path: PathBuf,
        /// Its format version.
        version: u32,
    },
    /// A read-only open (or `Db::catch_up`) found no consistent state
    /// after its tries: a writer kept changing what it read, or a file is
    /// damaged (the last failure is named).
    #[error("no consistent state of the store after {tries} tries: {last}")]
    Unstable {
        /// Loads tried.
        tries: u32,
        /// The last failure.
        last: String,
    },
}

impl Error {
    /// Whether this error reports corruption (of any file).
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }

    /// Whether this error says there is no room to write ([`Error::NoSpace`]):
    /// the write may succeed once room is made.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace(_))
    }

    /// Whether the operation may succeed if run again from the start
    /// (a transaction conflict).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Conflict)
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
/// Maps an I/O error on `file` onto the store's error type: a full device
/// is [`Error::NoSpace`] naming the file.
pub(crate) fn io_err(file: &str) -> impl Fn(io::Error) -> Error + '_ {
    move |source| {
        if storage_full(&source) {
            Error::NoSpace(format!("{file}: {source}"))
        } else {
            Error::Io {
                file: file.into(),
                source,
            }
        }
    }
}

/// Whether `e` says the device (or the user's quota) is full.
pub(crate) fn storage_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Maps a flexspace error onto the store's error type.
pub(crate) fn space_err(e: flexspace::Error) -> Error {
    match e {
        // Reading past the end of a space file means it was truncated.
        flexspace::Error::Io { file, source } if source.kind() == io::ErrorKind::UnexpectedEof => {
            Error::Corrupt {
                file: file.into(),
                detail: format!("truncated ({source})"),
            }
        }
        flexspace::Error::Io { file, source } => io_err(&file)(source),
        flexspace::Error::Corrupt { file, detail } => Error::Corrupt {
            file: file.into(),
            detail,
        },
        flexspace::Error::NoSpace(s) => Error::NoSpace(s),
        e if e.is_storage_full() => Error::NoSpace(e.to_string()),
        flexspace::Error::Locked(p) => Error::Locked(p),
        flexspace::Error::Poisoned => Error::Stopped("an earlier I/O error on the space".into()),
        flexspace::Error::ReadOnly => Error::ReadOnly,
        flexspace::Error::InvalidOptions(s) => Error::InvalidArgument(s),
        flexspace::Error::Unstable { tries, last } => Error::Unstable {
            tries,
            last: last.to_string(),
        },
        e => Error::Corrupt {
            file: "space".into(),
            detail: e.to_string(),
        },
    }
}
