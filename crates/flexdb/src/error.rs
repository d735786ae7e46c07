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
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
