//! The logical log: the file format of its entries and batches
//! ([`format`](mod@format)), and the in-memory buffer of the entries logged since the
//! last commit ([`buffer`]).
//!
//! Invariant: the buffer holds whole entries in the order the mutations
//! applied them, so a commit that writes the buffer followed by a commit
//! entry writes whole mutations (see `format` for what recovery accepts).

pub mod buffer;
pub mod format;

pub use buffer::LogBuf;
pub use format::{commit_entry, entry, header, parse_header, replay, LogOp, ENTRY, HEADER};
