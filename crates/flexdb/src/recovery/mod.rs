//! Opening a store: creation or recovery, the manifest that says a
//! directory holds a store, and the full consistency check.

pub(crate) mod check;
pub(crate) mod manifest;
pub(crate) mod open;
pub(crate) mod rebuild;
