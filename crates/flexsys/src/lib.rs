//! Low-level helpers that more than one FlexDB layer needs and that know
//! nothing of extents, spaces or keys: software prefetch hints
//! ([`prefetch`]), memory mapped on huge-page boundaries ([`huge_pages`]),
//! ways of waiting for a lock that a background thread shares with readers
//! ([`lock_wait`]), the machine's physical memory ([`memory`]), statistics counters that many threads add to without
//! sharing a cache line ([`counter`]), LEB128 varints ([`varint`]) and
//! the master seeds of the randomized crash tests ([`test_seed`]).
//!
//! Invariant: nothing here has an effect a caller can observe except
//! through its documented result; prefetch and huge-page advice are hints
//! only.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod counter;
pub mod huge_pages;
pub mod lock_wait;
pub mod memory;
pub mod prefetch;
pub mod test_seed;
pub mod varint;
