//! Opening a store: creation or recovery (`open`, with `replay` for the
//! logs and `rebuild` for the sparse index after a crash), the manifest and
//! what a store directory holds (`manifest`), the full consistency check
//! (`check`) and the salvage of a damaged store (`repair`), both reading
//! the data through one walk (`walk`); the read-only open and catch-up
//! (`read_only`, with `read_only_logs` for the logs it reads).
//!
//! Invariants: a directory holds a store exactly when its manifest
//! verifies; an open store holds every write whose sync returned before a
//! crash; a check changes nothing; a read-only open changes nothing but
//! its own entry in the reader registry.

pub(crate) mod check;
pub(crate) mod manifest;
pub(crate) mod open;
pub(crate) mod read_only;
mod read_only_logs;
mod rebuild;
pub(crate) mod repair;
mod replay;
mod walk;

/// The tracing target of recovery's events: the step timings of an open
/// (`store recovered`) and each replayed log (`log replayed`).
pub(crate) const TRACE_TARGET: &str = "flexdb::recovery";
