//! The open store shared by a `DB` and everything made from it
//! (keyspaces, iterators, snapshots, batches, transactions), and the one
//! locking rule that keeps the GIL and Rust locks from deadlocking.
//!
//! Invariants:
//! - `Handle::db` is `Some` from the open to `close()`, then `None` for
//!   good; every engine call runs under a read guard of it, so `close()`
//!   (the only writer) waits for calls in flight and no call reaches a
//!   closed engine: later calls raise `ClosedError`.
//! - Read guards are taken with `read_recursive`, which never waits for a
//!   queued writer: a thread holding the GIL only blocks on this lock
//!   while `close()` holds it, and `close()` runs with the GIL released,
//!   so it always finishes.
//! - A thread holding the GIL never blocks on a `Mutex` another thread
//!   may hold while it waits for the GIL: [`lock`] waits with the GIL
//!   released.

use std::path::PathBuf;

use parking_lot::{MappedRwLockReadGuard, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use pyo3::prelude::*;

use crate::errors::{closed, OrPy};

/// An open store (or a closed one).
pub struct Handle {
    db: RwLock<Option<flexdb::Db>>,
    /// The store's directory, kept for `repr` after the close.
    pub path: PathBuf,
    /// Whether it was opened read-only.
    pub read_only: bool,
}

impl Handle {
    /// A handle of `db`.
    pub fn new(db: flexdb::Db) -> Handle {
        Handle {
            path: db.path().to_path_buf(),
            read_only: db.is_read_only(),
            db: RwLock::new(Some(db)),
        }
    }

    /// The open store, or `ClosedError`. Never waits for a queued `close`.
    pub fn db(&self) -> PyResult<MappedRwLockReadGuard<'_, flexdb::Db>> {
        RwLockReadGuard::try_map(self.db.read_recursive(), Option::as_ref)
            .map_err(|_| closed("store"))
    }

    /// Whether `close()` ran.
    pub fn is_closed(&self) -> bool {
        self.db.read_recursive().is_none()
    }

    /// Closes the store: waits for the calls in flight, flushes and
    /// checkpoints it. Idempotent: a second close does nothing.
    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let db = self.db.write().take();
            match db {
                Some(db) => db.close().py_err(),
                None => Ok(()),
            }
        })
    }
}

/// Locks `m`, waiting (if another thread holds it) with the GIL released,
/// so that a holder waiting for the GIL can finish.
pub fn lock<'a, T>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T>
where
    T: Send,
{
    loop {
        if let Some(g) = m.try_lock() {
            return g;
        }
        py.detach(|| drop(m.lock()));
    }
}
