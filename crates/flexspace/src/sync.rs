//! The atomics of the lock-free pieces (`grace`, `segments::segbuf`):
//! std's, or loom's when the crate is built with `--cfg loom`, so that the
//! loom tests of those modules check their memory orderings.
//!
//! Invariant: the lock-free pieces take their atomics from here only, so a
//! loom build models every atomic access they make. (`Arc` stays std's:
//! it only shares ownership there, and `self: &Arc<Self>` receivers need
//! std's type.)

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
