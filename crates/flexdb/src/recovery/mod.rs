//! Opening a store: creation or recovery (`open`, with `rebuild` for the
//! sparse index after a crash), the manifest and the names of a store
//! directory's files (`manifest`), and the full consistency check
//! (`check`).
//!
//! Invariants: a directory holds a store exactly when its manifest
//! verifies; an open store holds every write whose sync returned before a
//! crash; a check changes nothing.

pub(crate) mod check;
pub(crate) mod manifest;
pub(crate) mod open;
mod rebuild;
