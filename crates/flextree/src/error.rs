//! The error type of the flextree crate.
//!
//! Invariant: every fallible public operation returns one of these variants and
//! leaves the tree unchanged when it fails (checkpoint errors leave the
//! previous checkpoint loadable).

use std::io;

/// Errors returned by FlexTree operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An offset or range lies outside the address space.
    #[error("range {offset}+{len} is outside the address space of {size} bytes")]
    OutOfRange {
        /// Start of the requested range.
        offset: u64,
        /// Length of the requested range.
        len: u64,
        /// Current size of the address space.
        size: u64,
    },
    /// A length of zero was given where a range is required.
    #[error("zero-length range")]
    ZeroLength,
    /// The operation would grow the address space beyond [`crate::MAX_SPACE`].
    #[error("address space would exceed 2^63 bytes")]
    SpaceOverflow,
    /// A physical address (plus length) exceeds [`crate::MAX_ADDR`].
    #[error("physical address {0:#x} is out of the 48-bit range")]
    AddressTooLarge(u64),
    /// A tree file is corrupt or truncated.
    #[error("corrupt tree file: {0}")]
    Corrupt(String),
    /// Checkpoint metadata longer than [`crate::MAX_META`] bytes.
    #[error("checkpoint metadata of {0} bytes exceeds the limit")]
    MetaTooLarge(usize),
    /// The tree file was written by a newer build in a format this one
    /// cannot read.
    #[error("tree file format {found} is newer than this build reads (up to {supported})")]
    NewerFormat {
        /// The format version the file's header carries.
        found: u32,
        /// The newest format this build reads.
        supported: u32,
    },
    /// A fresh tree was asked to checkpoint into a non-empty file.
    #[error("a new tree can only checkpoint into an empty tree file")]
    FileNotEmpty,
    /// An I/O error from the storage backend.
    #[error("tree file I/O: {0}")]
    Io(#[from] io::Error),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
