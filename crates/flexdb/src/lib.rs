//! FlexDB: an ordered key-value store that keeps every pair sorted in one
//! flexible address space (§5 of the FlexSpace paper).
//!
//! This crate is being built up; today it holds the record encodings and the
//! write-ahead log.

pub mod cache;
pub mod codec;
mod error;
pub mod memtable;
pub mod wal;

pub use codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use error::{Error, Result};
